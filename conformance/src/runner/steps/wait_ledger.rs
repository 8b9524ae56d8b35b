//! `wait_ledger`: wait (bounded) until a fixture recorded an event. A fixture
//! that could not do what the event says records `<event>_failed` instead
//! (`left_group_failed`: a server the client made a session leader cannot
//! leave its group): then the wait ends at once, and the scenario, whose
//! precondition does not hold for this client, is skipped with that reason.

use std::time::{Duration, Instant};

use crate::{
    outcome::StepOutcome,
    runner::{Exec, WAIT_BOUND},
    scenario::{WaitLedgerStep, fixture_binary},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &WaitLedgerStep) {
    let deadline = Instant::now() + WAIT_BOUND;
    let fixture = step.fixture.as_deref().map(fixture_binary);
    let failed_event = format!("{}_failed", step.event);
    let ours =
        |record: &crate::runner::env::Record| fixture.as_ref().is_none_or(|f| &record.fixture == f);
    let (found, failed) = loop {
        let ledger = exec.env.ledger();
        let found = ledger
            .iter()
            .any(|record| record.event == step.event && ours(record));
        let failed = ledger
            .iter()
            .find(|record| record.event == failed_event && ours(record))
            .map(|record| {
                let error = record.raw["error"].as_str().unwrap_or("no reason given");
                format!("{} recorded {failed_event}: {error}", record.fixture)
            });
        if found || failed.is_some() || Instant::now() > deadline {
            break (found, failed);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let what = match &fixture {
        Some(fixture) => format!("{} from {fixture}", step.event),
        None => step.event.clone(),
    };
    if let (false, Some(why)) = (found, failed) {
        exec.rec.skipped = Some(format!(
            "the scenario's precondition does not hold for this client: waiting for ledger event {what}, {why}"
        ));
        exec.rec.push(StepOutcome {
            step: format!("wait_ledger {what}"),
            result: "skipped".into(),
            ..StepOutcome::default()
        });
        return;
    }
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
