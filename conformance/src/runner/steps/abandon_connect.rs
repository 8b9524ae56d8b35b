//! `abandon_connect`: a connect whose future is dropped half-way, once the
//! ledger shows the server got that far. Whatever the connect started must
//! go with it: checked at once (bounded only by how long a SIGKILLed
//! process takes to vanish), and again by the survivor scan after the steps.

use std::time::{Duration, Instant};

use crate::{
    outcome::StepOutcome,
    runner::{Exec, WAIT_BOUND, describe_state, describe_survivors, subject::Leader},
    scenario::AbandonConnectStep,
};

/// How long a killed process may take to leave the process table.
const VANISH: Duration = Duration::from_secs(1);

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &AbandonConnectStep) {
    let Some(server) = exec.server.clone() else {
        exec.rec
            .check(&format!("{id}.server"), false, "no server to connect");
        return;
    };
    let env = &exec.env;
    // The server it started: the fixture whose parent is this process.
    let me = std::process::id();
    let reached = || {
        let ledger = env.ledger();
        let started = ledger
            .iter()
            .find(|r| r.event == "started" && r.ppid == me)?;
        ledger
            .iter()
            .any(|r| r.event == step.after)
            .then_some(started.pid)
    };
    let Some(library) = exec.subject.library() else {
        return exec.library_only(id, "abandon_connect");
    };
    let abandoned = library.abandon_connect(&server, reached, WAIT_BOUND).await;
    exec.rec.check(
        &format!("{id}.abandoned"),
        abandoned.is_ok(),
        match &abandoned {
            Ok(_) => format!("the connect was dropped after `{}`", step.after),
            Err(why) => why.clone(),
        },
    );
    // Contract 4.drop / 4.connect: the dropped connect kills and reaps its
    // child before the drop returns (no zombie left for anyone to see).
    if let Ok((pid, state)) = abandoned {
        exec.rec.check(
            &format!("{id}.at_return.reaped"),
            state.is_none(),
            format!(
                "when the drop of the connect returned, its server (pid {pid}) was {}; expected it reaped",
                describe_state(state)
            ),
        );
    }
    let started = exec
        .env
        .ledger()
        .into_iter()
        .find(|r| r.event == "started" && r.ppid == me);
    if let Some(record) = &started {
        exec.rec.normalizer.add_pid(record.pid);
        if let Some(library) = exec.subject.library() {
            library.abandoned.push(Leader {
                pid: record.pid,
                pgid: record.pgid,
            });
        }
    }
    let expected = exec.expected_survivors();
    let deadline = Instant::now() + VANISH;
    let alive = loop {
        let alive = exec.env.alive(&exec.groups());
        if alive == expected || Instant::now() > deadline {
            break alive;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    exec.rec.check(
        &format!("{id}.nothing_left"),
        alive == expected,
        format!(
            "alive {VANISH:?} after the connect was dropped: {}; expected: {}",
            describe_survivors(&alive),
            describe_survivors(&expected)
        ),
    );
    exec.rec.push(StepOutcome {
        step: format!("abandon_connect after {}", step.after),
        result: if abandoned.is_ok() { "ok" } else { "error" }.into(),
        ..StepOutcome::default()
    });
}
