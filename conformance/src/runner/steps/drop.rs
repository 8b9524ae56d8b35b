//! `drop`: the client goes away without being closed.

use crate::{
    outcome::StepOutcome,
    runner::{Exec, describe_state, env::state_of},
    scenario::DropStep,
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, _step: &DropStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let in_process = exec.subject.library().is_some();
    exec.subject.drop_client().await;
    // Contract 4.drop: the library's drop blocks until the child is
    // reaped, so at the instant it returns the server is gone from the
    // process table. (An external client's "drop" is its program's exit.)
    if in_process && let Some(leader) = exec.subject.leaders().first().copied() {
        let state = state_of(leader.pid);
        exec.rec.check(
            &format!("{id}.at_return.reaped"),
            state.is_none(),
            format!(
                "when the drop returned, the server process was {}; expected it reaped",
                describe_state(state)
            ),
        );
    }
    exec.rec.push(StepOutcome {
        step: "drop".into(),
        result: "ok".into(),
        ..StepOutcome::default()
    });
}
