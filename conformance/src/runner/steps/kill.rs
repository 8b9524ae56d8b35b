//! `kill`: a signal from outside the client, to the server or its group.

use mcp_stdio_process::{
    signal::{signal_group, signal_pid},
    table,
};

use crate::{
    outcome::StepOutcome,
    runner::Exec,
    scenario::{KillStep, KillTarget},
};

/// How long a SIGKILLed server may take to exit: far more than the kernel
/// needs, even on a loaded machine.
const KILLED_EXIT_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

pub(super) fn run(exec: &mut Exec<'_>, id: &str, step: &KillStep) {
    let signal = step.signal.0;
    let Some(leader) = exec.subject.leaders().first().copied() else {
        return exec.no_client(id);
    };
    // The leader is the harness's own sighting (the ledger, the process
    // table), never the client's report; and still, never this process,
    // its group, pid 0 or 1 (kill(0), kill(-1) and kill(-own group) would
    // signal the harness itself or every process it may signal).
    let me = std::process::id();
    let own_group = table::own_group();
    // Nor the group of the client itself: a client that keeps its servers
    // in its own group would be killed with them.
    let clients_group = exec
        .subject
        .own_line()
        .into_iter()
        .any(|pid| table::group_of(pid) == Some(leader.pgid));
    // The process crate refuses those too; the checks here stay, so the
    // refusal is reported with its reason.
    let sent = match step.target {
        KillTarget::Child if leader.pid > 1 && leader.pid != me => signal_pid(leader.pid, signal),
        KillTarget::Group if leader.pgid > 1 && leader.pgid != own_group && !clients_group => {
            signal_group(leader.pgid, signal)
        }
        _ => {
            exec.rec.check(
                &format!("{id}.kill"),
                false,
                format!(
                    "refused to signal pid {} / group {}: not a server's alone (the harness is pid {me} in group {own_group}; the client's own processes in that group: {clients_group})",
                    leader.pid, leader.pgid
                ),
            );
            return;
        }
    };
    // Refused by the process crate (it cannot be, after the checks above)
    // counts as not sent.
    let sent = sent.and_then(|sent| {
        if sent {
            Ok(())
        } else {
            Err(std::io::Error::other("refused by the process crate"))
        }
    });
    // A SIGKILL is delivered asynchronously: for a moment the server may
    // still show as running (it has closed its pipes, so the client may
    // already have seen it die). Later steps read the process table (the
    // close's "was it alive when close began", which decides the close path
    // a ledger implies), so wait, bounded, until it has exited.
    if sent.is_ok() && signal == nix::sys::signal::Signal::SIGKILL {
        let exited = mcp_stdio_process::signal::wait_exited(leader.pid, KILLED_EXIT_BOUND);
        exec.rec.check(
            &format!("{id}.exited"),
            exited,
            format!(
                "the server (pid {}) had not exited {} ms after SIGKILL",
                leader.pid,
                KILLED_EXIT_BOUND.as_millis()
            ),
        );
    }
    exec.rec.check(
        &format!("{id}.kill"),
        sent.is_ok(),
        format!("{} to the {:?}: {sent:?}", signal.as_str(), step.target),
    );
    exec.rec.push(StepOutcome {
        step: format!("kill {} {:?}", signal.as_str(), step.target).to_lowercase(),
        result: if sent.is_ok() { "ok" } else { "error" }.into(),
        ..StepOutcome::default()
    });
}
