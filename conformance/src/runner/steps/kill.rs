//! `kill`: a signal from outside the client, to the server or its group.

use nix::{sys::signal::kill, unistd::Pid};

use crate::{
    outcome::StepOutcome,
    runner::Exec,
    scenario::{KillStep, KillTarget},
};

pub(super) fn run(exec: &mut Exec<'_>, id: &str, step: &KillStep) {
    let signal = step.signal.0;
    let Some(leader) = exec.subject.leaders().first().copied() else {
        return exec.no_client(id);
    };
    let target = match step.target {
        KillTarget::Child => leader.pid,
        KillTarget::Group => -leader.pgid,
    };
    let sent = kill(Pid::from_raw(target), signal);
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
