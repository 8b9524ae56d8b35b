//! What the client reports about its server, compared with what the harness
//! sees for itself (the ledger, the process table): checked on every step
//! where the client can be asked, so no scenario has to remember to ask. A
//! client that reports a constant, or the wrong process, fails here.

use std::time::Duration;

use mcp_stdio_client::ChildExit;

use super::{
    Exec,
    env::Record,
    subject::{ClientReport, CloseReport},
};
use crate::scenario::ClosePath;

/// Slack for comparing wall-clock milliseconds across processes.
const CLOCK_SLACK_MS: u64 = 20;

/// Right after a connect: the pid and group the client reports are the
/// fixture's own, in a group of its own; `serverInfo` names the fixture that
/// answered the handshake.
pub(super) fn after_connect(exec: &mut Exec<'_>, id: &str) {
    let Some(report) = exec.subject.report() else {
        return;
    };
    if let Some(server) = &exec.server {
        exec.rec.check(
            &format!("{id}.reported_name"),
            report.name == server.name,
            format!(
                "the client reports the name {:?} for the server configured as {:?}",
                report.name, server.name
            ),
        );
    }
    // The server as the harness sees it (the ledger, the process table):
    // a client reporting another process, or a constant, fails here.
    if let Some(leader) = exec.subject.leaders().first().copied() {
        exec.rec.check(
            &format!("{id}.reported_pid"),
            report.pid == leader.pid,
            format!(
                "the client reports pid {}; the server it started is pid {}",
                report.pid, leader.pid
            ),
        );
    }
    let ledger = exec.env.ledger();
    // Servers that are not fixtures write no ledger: nothing to compare.
    let Some(record) = ledger.iter().find(|r| r.pid == report.pid) else {
        return;
    };
    exec.rec.check(
        &format!("{id}.reported_pgid"),
        report.pgid == record.pgid && report.pgid == report.pid,
        format!(
            "the client reports group {} for pid {}; the server is in group {} (its own group is {})",
            report.pgid, report.pid, record.pgid, report.pid
        ),
    );
    let answered: Vec<&str> = ledger
        .iter()
        .filter(|r| {
            r.event == "request"
                && matches!(
                    r.raw["method"].as_str(),
                    Some("server/discover" | "initialize")
                )
        })
        .map(|r| r.fixture.as_str())
        .collect();
    if !answered.is_empty() {
        let name = report.server_name.as_deref().unwrap_or("(none)");
        exec.rec.check(
            &format!("{id}.reported_server_info"),
            answered.contains(&name),
            format!(
                "the client reports serverInfo.name {name:?}; the handshake was answered by {answered:?}"
            ),
        );
    }
}

/// The close paths consistent with the leader's ledger: how it ended
/// relative to when close began (`start_ms`), and whether it was alive then.
pub(super) fn paths_of(records: &[&Record], start_ms: u64, alive_at_start: bool) -> Vec<ClosePath> {
    let exit = records.iter().find(|r| r.event == "exit");
    if !alive_at_start || exit.is_some_and(|r| r.t_ms + CLOCK_SLACK_MS < start_ms) {
        return vec![ClosePath::Exited];
    }
    let termed = records
        .iter()
        .any(|r| r.event == "signal" && r.raw["signal"] == "SIGTERM");
    let mut paths = match (termed, exit.is_some()) {
        (false, true) => vec![ClosePath::Eof],
        (true, true) => vec![ClosePath::Sigterm],
        (_, false) => vec![ClosePath::Sigkill],
    };
    // Exited at the very moment close began: either reading is right.
    if exit.is_some_and(|r| r.t_ms <= start_ms + CLOCK_SLACK_MS) {
        paths.push(ClosePath::Exited);
    }
    paths
}

/// The close paths the leader's ledger implies, with its events; `None`
/// when the leader wrote no ledger (not a fixture).
pub(super) fn ledger_paths(
    exec: &Exec<'_>,
    start_ms: u64,
    alive_at_start: bool,
) -> Option<(Vec<ClosePath>, Vec<String>)> {
    let leader = exec.subject.leaders().first().copied()?;
    let ledger = exec.env.ledger();
    let records: Vec<&Record> = ledger.iter().filter(|r| r.pid == leader.pid).collect();
    if records.is_empty() {
        return None;
    }
    Some((
        paths_of(&records, start_ms, alive_at_start),
        events(&records),
    ))
}

/// Whether `status` is how the ledger says the process ended: its `exit`
/// record's code or crash signal, or, with no `exit` record, a signal it
/// could not record (SIGKILL).
pub(super) fn status_agrees(records: &[&Record], status: ChildExit) -> bool {
    let exit = records.iter().find(|r| r.event == "exit");
    match (exit, status) {
        (None, ChildExit::Signal(_)) => true,
        (None, ChildExit::Code(_)) => false,
        (Some(exit), status) => match (exit.raw["code"].as_i64(), exit.raw["signal"].as_str()) {
            (Some(code), _) => status == ChildExit::Code(code as i32),
            (None, Some(signal)) => signal
                .parse::<nix::sys::signal::Signal>()
                .is_ok_and(|s| status == ChildExit::Signal(s as i32)),
            (None, None) => true,
        },
    }
}

/// After a close: the path and status the client reports agree with the
/// leader's ledger, the client did not escalate before EOF_GRACE, and its
/// own `exit_status()` is the close's.
pub(super) fn after_close(
    exec: &mut Exec<'_>,
    id: &str,
    report: &CloseReport,
    client: Option<&ClientReport>,
    start_ms: u64,
    alive_at_start: bool,
) {
    let Some(leader) = exec.subject.leaders().first().copied() else {
        return;
    };
    let ledger = exec.env.ledger();
    let records: Vec<&Record> = ledger.iter().filter(|r| r.pid == leader.pid).collect();
    if records.is_empty() {
        return;
    }
    let paths = paths_of(&records, start_ms, alive_at_start);
    // A second close reports the first one's outcome (close is idempotent):
    // the ledger is compared with the close that ran the sequence.
    let first = !exec.closed;
    exec.closed = true;
    if let Some(path) = report.path.filter(|_| first) {
        exec.rec.check(
            &format!("{id}.path_agrees_with_ledger"),
            paths.contains(&path),
            format!(
                "the client reports close path {path}; the server's ledger {:?} says {}",
                events(&records),
                paths
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        );
    }
    if let Some(status) = report.status {
        exec.rec.check(
            &format!("{id}.status_agrees_with_ledger"),
            status_agrees(&records, status),
            format!(
                "the client reports {status}; the server's ledger {:?} says otherwise",
                events(&records)
            ),
        );
    }
    if let Some(client) = client {
        exec.rec.check(
            &format!("{id}.reported_exit_status"),
            client.exit_status == report.status,
            format!(
                "exit_status() is {:?} after a close that reported {:?}",
                client.exit_status, report.status
            ),
        );
    }
    // EOF first, then EOF_GRACE, then SIGTERM. The close sent its EOF no
    // earlier than it began (`start_ms`, the harness's own clock), and the
    // server recorded the SIGTERM no earlier than it was sent: so a client
    // that waited EOF_GRACE always shows the SIGTERM record EOF_GRACE or more
    // after the close began, however late a loaded machine lets the server
    // record either. (The server's own `stdin_eof` record is no such bound:
    // a server scheduled late notices its EOF late, which made a client that
    // waited the whole grace look early.) Checked when this close sent the
    // EOF the server recorded.
    let (eof_grace, _) = exec.graces();
    let eof = records
        .iter()
        .find(|r| r.event == "stdin_eof" && r.t_ms + CLOCK_SLACK_MS >= start_ms);
    let term = records
        .iter()
        .find(|r| r.event == "signal" && r.raw["signal"] == "SIGTERM");
    if let (Some(_), Some(term)) = (eof, term) {
        let waited = Duration::from_millis(term.t_ms.saturating_sub(start_ms));
        exec.rec.check(
            &format!("{id}.eof_grace_honoured"),
            waited + Duration::from_millis(CLOCK_SLACK_MS) >= eof_grace,
            format!(
                "SIGTERM came {waited:?} after the close (and its stdin EOF) began; EOF_GRACE is {eof_grace:?}"
            ),
        );
    }
}

/// After the steps, under a restart policy: the restarts the client reports
/// are the servers the harness saw it start beyond the first (`started`
/// records written by children of the harness, of the leader's fixture).
pub(super) fn restarts(exec: &mut Exec<'_>, client: &ClientReport) {
    let policy = exec
        .server
        .as_ref()
        .and_then(|server| match &server.transport {
            mcp_stdio_client::config::Transport::Stdio(stdio) => Some(stdio.restart),
            _ => None,
        });
    let Some(leader) = exec.subject.leaders().first().copied() else {
        return;
    };
    if policy.is_none_or(|policy| policy.attempts == 0) {
        return;
    }
    let me = std::process::id();
    let ledger = exec.env.ledger();
    let Some(fixture) = ledger
        .iter()
        .find(|r| r.pid == leader.pid)
        .map(|r| r.fixture.clone())
    else {
        return;
    };
    let started = ledger
        .iter()
        .filter(|r| r.event == "started" && r.ppid == me && r.fixture == fixture)
        .count();
    let expected = started.saturating_sub(1) as u32;
    exec.rec.check(
        "reported_restarts",
        client.restarts == expected,
        format!(
            "restarts() is {}; the harness saw the client start {started} {fixture} server(s)",
            client.restarts
        ),
    );
}

/// After the steps: the stderr the client reports is what it forwarded.
pub(super) fn stderr(exec: &mut Exec<'_>, client: &ClientReport, forwarded: &[&str]) {
    let missing: Vec<&String> = client
        .stderr_tail
        .iter()
        .filter(|line| !line.is_empty() && !forwarded.iter().any(|f| f.contains(line.as_str())))
        .collect();
    exec.rec.check(
        "reported_stderr_tail",
        missing.is_empty(),
        format!("stderr_tail() holds lines the server never wrote to stderr: {missing:?}"),
    );
    // And it is not empty when there was stderr to keep.
    exec.rec.check(
        "reported_stderr_tail_kept",
        forwarded.is_empty() || !client.stderr_tail.is_empty(),
        format!(
            "stderr_tail() is empty; {} stderr line(s) forwarded",
            forwarded.len()
        ),
    );
    let count = client.stderr_lines;
    exec.rec.check(
        "reported_stderr_lines",
        (count > 0) != forwarded.is_empty() && count >= client.stderr_tail.len() as u64,
        format!(
            "stderr_lines() is {count} with {} line(s) in stderr_tail(); {} stderr line(s) forwarded",
            client.stderr_tail.len(),
            forwarded.len()
        ),
    );
}

fn events(records: &[&Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| match r.raw["signal"].as_str() {
            Some(signal) if r.event == "signal" => format!("signal {signal}"),
            _ => r.event.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(event: &str, t_ms: u64, extra: serde_json::Value) -> Record {
        let mut raw = serde_json::json!({"event": event});
        if let (Some(raw), serde_json::Value::Object(extra)) = (raw.as_object_mut(), extra) {
            raw.extend(extra);
        }
        Record {
            pid: 1,
            ppid: 0,
            pgid: 1,
            t_ms,
            fixture: "fixture-x".into(),
            event: event.into(),
            raw,
        }
    }

    #[test]
    fn the_ledger_tells_the_close_path() {
        let started = record("started", 0, json!({}));
        let eof = record("stdin_eof", 1000, json!({}));
        let exit0 = record("exit", 1001, json!({"code": 0}));
        let term = record("signal", 1300, json!({"signal": "SIGTERM"}));
        let exit143 = record("exit", 1301, json!({"code": 143}));
        assert_eq!(
            paths_of(&[&started, &eof, &exit0], 950, true),
            [ClosePath::Eof]
        );
        assert_eq!(
            paths_of(&[&started, &eof, &term, &exit143], 950, true),
            [ClosePath::Sigterm]
        );
        assert_eq!(
            paths_of(&[&started, &eof, &term], 950, true),
            [ClosePath::Sigkill]
        );
        // Exited at the moment close began: either reading.
        assert_eq!(
            paths_of(&[&started, &eof, &exit0], 995, true),
            [ClosePath::Eof, ClosePath::Exited]
        );
        assert_eq!(paths_of(&[&started], 990, false), [ClosePath::Exited]);
        assert_eq!(
            paths_of(&[&started, &exit0], 5000, true),
            [ClosePath::Exited]
        );
        // A client that reports eof for a server it had to kill is caught.
        assert!(!paths_of(&[&started, &eof, &term], 990, true).contains(&ClosePath::Eof));
    }

    #[test]
    fn the_ledger_tells_the_exit_status() {
        let exit0 = record("exit", 1, json!({"code": 0}));
        let crash = record("exit", 1, json!({"code": null, "signal": "SIGSEGV"}));
        assert!(status_agrees(&[&exit0], ChildExit::Code(0)));
        assert!(!status_agrees(&[&exit0], ChildExit::Code(1)));
        assert!(status_agrees(&[&crash], ChildExit::Signal(11)));
        assert!(!status_agrees(&[&crash], ChildExit::Code(0)));
        // Killed without a word: only a signal fits.
        assert!(status_agrees(&[], ChildExit::Signal(9)));
        assert!(!status_agrees(&[], ChildExit::Code(0)));
    }
}
