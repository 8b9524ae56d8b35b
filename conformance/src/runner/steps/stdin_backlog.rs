//! `stdin_backlog`: a server that stopped reading its stdin while the
//! client still owes it replies (its ping flood): the client must queue
//! them, bounded, and say so (`StdioClient::stdin_backlog`), instead of
//! blocking its own requests behind a full pipe or growing without bound.

use std::time::{Duration, Instant};

use mcp_stdio_client::MAX_STDIN_BACKLOG;

use crate::{
    outcome::StepOutcome,
    runner::{Exec, WAIT_BOUND},
    scenario::StdinBacklogStep,
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &StdinBacklogStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let Some(client) = exec.subject.library().and_then(|l| l.client.clone()) else {
        return exec.library_only(id, "stdin_backlog");
    };
    let deadline = Instant::now() + WAIT_BOUND;
    let mut largest = 0;
    let backlog = loop {
        let backlog = client.stdin_backlog();
        largest = largest.max(backlog.bytes);
        if backlog.messages >= step.min_messages || Instant::now() > deadline {
            break backlog;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let reached = backlog.messages >= step.min_messages;
    exec.rec.check(
        &format!("{id}.min_messages"),
        reached,
        format!(
            "stdin_backlog() shows {} queued message(s) ({} bytes); expected at least {} within {WAIT_BOUND:?}",
            backlog.messages, backlog.bytes, step.min_messages
        ),
    );
    exec.rec.check(
        &format!("{id}.bounded"),
        largest <= MAX_STDIN_BACKLOG,
        format!("stdin_backlog() reached {largest} bytes; the bound is {MAX_STDIN_BACKLOG}"),
    );
    exec.rec.push(StepOutcome {
        step: format!("stdin_backlog at least {}", step.min_messages),
        result: if reached { "ok" } else { "error" }.into(),
        ..StepOutcome::default()
    });
}
