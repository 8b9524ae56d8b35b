//! `wait_ledger`: wait (bounded) until a fixture recorded an event.

use std::time::{Duration, Instant};

use crate::{
    outcome::StepOutcome,
    runner::{Exec, WAIT_BOUND},
    scenario::{WaitLedgerStep, fixture_binary},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &WaitLedgerStep) {
    let deadline = Instant::now() + WAIT_BOUND;
    let fixture = step.fixture.as_deref().map(fixture_binary);
    let found = loop {
        let found = exec.env.ledger().into_iter().any(|record| {
            record.event == step.event && fixture.as_ref().is_none_or(|f| &record.fixture == f)
        });
        if found || Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let what = match &fixture {
        Some(fixture) => format!("{} from {fixture}", step.event),
        None => step.event.clone(),
    };
    exec.rec.check(
        &format!("{id}.wait_ledger"),
        found,
        format!(
            "ledger event {what} {}",
            if found { "seen" } else { "not seen within 10s" }
        ),
    );
    exec.rec.push(StepOutcome {
        step: format!("wait_ledger {what}"),
        result: if found { "ok" } else { "error" }.into(),
        ..StepOutcome::default()
    });
}
