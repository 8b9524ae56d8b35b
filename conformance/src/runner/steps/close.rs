//! `close`: the client's close; also the checks every close shares with
//! `close_concurrently`.

use crate::{
    outcome::StepOutcome,
    runner::{Exec, describe_survivors, subject::CloseReport},
    scenario::{CloseBucket, CloseExpect, CloseStep},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CloseStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let report = exec.subject.close().await;
    let out = record(exec, id, "close", &step.expect, report);
    exec.rec.push(out);
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
) -> StepOutcome {
    // Observed first: the guarantee holds when close returns, not some time
    // later.
    let alive = exec.env.alive(&exec.groups());
    let (eof, term) = exec.graces();
    let bucket = CloseBucket::of(report.elapsed, eof, term);
    let mut out = exec.rec.timed(id, label, bucket, expect.within);
    out.result = "ok".into();
    out.path = report.path.map(|p| p.to_string());
    out.status = report.status.map(|s| s.to_string());
    out.group_swept = report.group_swept;
    if let Some(path) = expect.path {
        let got = report.path.map_or("unknown".into(), |p| p.to_string());
        exec.rec.check(
            &format!("{id}.path"),
            report.path == Some(path),
            format!("close ended by {got}, expected {path}"),
        );
    }
    if let Some(status) = &expect.status {
        let got = out.status.clone().unwrap_or_else(|| "not reaped".into());
        exec.rec.check(
            &format!("{id}.status"),
            &got == status,
            format!("child ended with {got}, expected {status}"),
        );
    }
    if let (Some(swept), Some(got)) = (expect.group_swept, report.group_swept) {
        exec.rec.check(
            &format!("{id}.group_swept"),
            got == swept,
            format!("group_swept {got}, expected {swept}"),
        );
    }
    exec.rec.check(
        &format!("{id}.reaped"),
        report.status.is_some(),
        "the child was reaped by close",
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
