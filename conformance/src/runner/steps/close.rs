//! `close`: the client's close; also the checks every close shares with
//! `close_concurrently`.

use crate::{
    outcome::StepOutcome,
    runner::{
        Exec, consistency, describe_survivors,
        env::{group_members, now_ms, state_of},
        subject::CloseReport,
    },
    scenario::{CLOSE_SLACK, CloseBucket, CloseExpect, CloseStep},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CloseStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let before = Before::now(exec);
    let report = exec.subject.close().await;
    let at_return = AtReturnSeen::now(exec);
    let out = record(exec, id, "close", &step.expect, report, before, at_return);
    exec.rec.push(out);
}

/// What held just before close was called.
#[derive(Clone, Copy)]
pub(super) struct Before {
    start_ms: u64,
    leader_alive: bool,
}

impl Before {
    pub(super) fn now(exec: &Exec<'_>) -> Self {
        Self::of(exec.subject.leaders().first().copied())
    }

    pub(super) fn now_of(library: &crate::runner::subject::Library) -> Self {
        Self::of(library.leaders().first().copied())
    }

    fn of(leader: Option<crate::runner::subject::Leader>) -> Self {
        Before {
            start_ms: now_ms(),
            leader_alive: leader.is_some_and(|l| state_of(l.pid).is_some_and(|s| s != 'Z')),
        }
    }
}

/// The observation at the instant close returned: live members of the
/// server's group, and the server's own state letter (`None`: reaped).
pub(super) struct AtReturnSeen {
    /// Not counting the client's own line (`own`).
    members: Vec<u32>,
    /// The client's own processes that were in the group: a client that
    /// leaves its servers in its own group (the TypeScript SDK does) is a
    /// member itself, with the driver and maybe the harness's ancestors.
    own: Vec<u32>,
    leader_state: Option<char>,
    pgid: Option<u32>,
}

impl AtReturnSeen {
    pub(super) fn now(exec: &Exec<'_>) -> Self {
        let leader = exec.subject.leaders().first().copied();
        let line = exec.subject.own_line();
        let (own, members) = leader
            .map(|l| group_members(l.pgid))
            .unwrap_or_default()
            .into_iter()
            .partition(|pid| line.contains(pid));
        AtReturnSeen {
            members,
            own,
            leader_state: leader.and_then(|l| state_of(l.pid)),
            pgid: leader.map(|l| l.pgid),
        }
    }
}

/// Checks a close's report against `expect`, and what must always hold
/// when a close returns: the child reaped, nothing left but the expected
/// survivors.
pub(super) fn record(
    exec: &mut Exec<'_>,
    id: &str,
    label: &str,
    expect: &CloseExpect,
    report: CloseReport,
    before: Before,
    seen: AtReturnSeen,
) -> StepOutcome {
    if let Some(pgid) = seen.pgid {
        let in_group = exec
            .expected_survivors()
            .iter()
            .filter(|s| !s.left_group)
            .count();
        let empty = seen.members.len() <= in_group;
        exec.rec.check(
            &format!("{id}.at_return.group_empty"),
            empty == expect.at_return.group_empty,
            format!(
                "when close returned, group {pgid} had {} live member(s) ({:?}), not counting the client's own process and its ancestors{}; expected {}",
                seen.members.len(),
                seen.members,
                if seen.own.is_empty() {
                    String::new()
                } else {
                    format!(" (pids {:?}, in the group)", seen.own)
                },
                if expect.at_return.group_empty {
                    "none"
                } else {
                    "some"
                }
            ),
        );
        // The client may say it had not reaped its server yet (a version 2
        // driver reads its SDK's state in the instant close returned): then
        // it had not, whatever the table shows a moment later, when the
        // client's runtime may have reaped it since.
        let said_not = report.reaped_by_client == Some(false);
        let reaped = seen.leader_state.is_none() && !said_not;
        exec.rec.check(
            &format!("{id}.at_return.reaped"),
            reaped == expect.at_return.reaped,
            format!(
                "when close returned, {}; expected it {}",
                if said_not {
                    format!(
                        "the client had not reaped the server yet (its own word, read as close returned; the process table, read just after, shows it {})",
                        crate::runner::describe_state(seen.leader_state)
                    )
                } else {
                    format!(
                        "the server process was {}",
                        crate::runner::describe_state(seen.leader_state)
                    )
                },
                if expect.at_return.reaped {
                    "reaped"
                } else {
                    "not reaped"
                }
            ),
        );
    }
    // Observed first: the guarantee holds when close returns, not some time
    // later.
    let alive = exec.env.alive(&exec.groups());
    let (eof, term) = exec.graces();
    let bucket = CloseBucket::of(report.elapsed, eof, term);
    let mut out = match exec.subject.external() {
        None => exec.rec.timed(id, label, bucket, expect.within),
        // An external client is timed from outside, against the graces it
        // declared, with slack past each upper edge (`CLOSE_SLACK`).
        Some(external) => {
            let source = external.graces_source();
            let mut out = exec.rec.timed(id, label, bucket, None);
            out.time = expect.within.map(|_| bucket.into());
            if let Some(within) = expect.within {
                exec.rec.check(
                    &format!("{id}.within"),
                    within.admits(report.elapsed, eof, term, CLOSE_SLACK),
                    format!(
                        "{label} took {} ms ({}), expected {} with EOF_GRACE {} ms and TERM_GRACE {} ms {source}, and {} ms of slack",
                        report.elapsed.as_millis(),
                        crate::scenario::Bucket::from(bucket),
                        crate::scenario::Bucket::from(within),
                        eof.as_millis(),
                        term.as_millis(),
                        CLOSE_SLACK.as_millis()
                    ),
                );
            }
            out
        }
    };
    out.result = "ok".into();
    if let Some(error) = &report.error {
        out.result = "error".into();
        out.message = Some(error.lines().next().unwrap_or_default().to_owned());
        exec.rec.check(
            &format!("{id}.result"),
            false,
            format!("{label} failed: {error}"),
        );
    }
    out.status = report.status.map(|s| s.to_string());
    out.group_swept = report.group_swept;
    // A subject that does not report its close path (a driver) is judged by
    // the path the server's ledger implies.
    let inferred = consistency::ledger_paths(exec, before.start_ms, before.leader_alive);
    out.path = match (report.path, &inferred) {
        (Some(path), _) => Some(path.to_string()),
        (None, Some((paths, _))) => Some(format!("{} (from the ledger)", or_list(paths))),
        (None, None) => None,
    };
    if let Some(path) = expect.path {
        let (passed, message) = match (report.path, &inferred) {
            (Some(got), _) => (
                got == path,
                format!("close ended by {got}, expected {path}"),
            ),
            (None, Some((paths, events))) => (
                paths.contains(&path),
                format!(
                    "the server's ledger {events:?} says the close ended by {}, expected {path}",
                    or_list(paths)
                ),
            ),
            (None, None) => (
                false,
                format!("the close path is unknown (no report, no ledger), expected {path}"),
            ),
        };
        exec.rec.check(&format!("{id}.path"), passed, message);
    }
    // The exit status and the sweep are what the client reports: checked
    // where it reports them.
    if let Some(status) = expect
        .status
        .as_ref()
        .filter(|_| exec.subject.reports_close())
    {
        let got = out.status.clone().unwrap_or_else(|| "not reaped".into());
        exec.rec.check(
            &format!("{id}.status"),
            &got == status,
            format!("child ended with {got}, expected {status}"),
        );
    }
    if let Some(want) = expect.contained {
        out.contained = report.contained;
        if exec.subject.reports_close() {
            let got = report.contained;
            exec.rec.check(
                &format!("{id}.contained"),
                got == Some(want),
                match got {
                    Some(got) => format!("containment killed {got} process(es), expected {want}"),
                    None => format!("no containment reported, expected it to kill {want}"),
                },
            );
        }
    }
    if let (Some(swept), Some(got)) = (expect.group_swept, report.group_swept) {
        exec.rec.check(
            &format!("{id}.group_swept"),
            got == swept,
            format!("group_swept {got}, expected {swept}"),
        );
    }
    if exec.subject.reports_close() {
        exec.rec.check(
            &format!("{id}.reaped"),
            report.status.is_some(),
            "the child was reaped by close",
        );
    }
    let client = exec.subject.report();
    consistency::after_close(
        exec,
        id,
        &report,
        client.as_ref(),
        before.start_ms,
        before.leader_alive,
    );
    let expected = exec.expected_survivors();
    exec.rec.check(
        &format!("{id}.nothing_left"),
        alive == expected,
        format!(
            "alive when close returned: {}; expected: {}",
            describe_survivors(&alive),
            describe_survivors(&expected)
        ),
    );
    out
}

fn or_list(paths: &[crate::scenario::ClosePath]) -> String {
    paths
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(" or ")
}
