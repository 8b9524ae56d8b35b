//! `drop`: the client goes away without being closed.

use crate::{outcome::StepOutcome, runner::Exec, scenario::DropStep};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, _step: &DropStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    exec.subject.drop_client().await;
    exec.rec.push(StepOutcome {
        step: "drop".into(),
        result: "ok".into(),
        ..StepOutcome::default()
    });
}
