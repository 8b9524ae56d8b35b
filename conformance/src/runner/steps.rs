//! The steps, one file per kind; `run` dispatches.

mod abandon_connect;
mod build_session;
mod call;
mod call_concurrently;
mod close;
mod close_concurrently;
mod close_session;
mod connect;
mod discover_tools;
mod drop;
mod kill;
mod list_tools;
mod session_call;
mod stdin_backlog;
mod wait_ledger;

use std::time::Duration;

use super::Exec;
use crate::{
    outcome::StepOutcome,
    scenario::{RequestBucket, Step},
};

/// Slack on the upper edge of an external client's `at_timeout`, past the
/// close ladder it declared: it notices, reaps and answers through its
/// driver, maybe in an interpreter, on a loaded machine.
const AT_TIMEOUT_SLACK: Duration = Duration::from_secs(2);

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &Step) {
    match step {
        Step::Connect(step) => connect::run(exec, id, step).await,
        Step::AbandonConnect(step) => abandon_connect::run(exec, id, step).await,
        Step::ListTools(step) => list_tools::run(exec, id, step).await,
        Step::Call(step) => call::run(exec, id, step).await,
        Step::CallConcurrently(step) => call_concurrently::run(exec, id, step).await,
        Step::Kill(step) => kill::run(exec, id, step),
        Step::WaitLedger(step) => wait_ledger::run(exec, id, step).await,
        Step::StdinBacklog(step) => stdin_backlog::run(exec, id, step).await,
        Step::Close(step) => close::run(exec, id, step).await,
        Step::CloseConcurrently(step) => close_concurrently::run(exec, id, step).await,
        Step::Drop(step) => drop::run(exec, id, step).await,
        Step::BuildSession(step) => build_session::run(exec, id, step).await,
        Step::DiscoverTools(step) => discover_tools::run(exec, id, step).await,
        Step::SessionCall(step) => session_call::run(exec, id, step).await,
        Step::CloseSession(step) => close_session::run(exec, id, step).await,
    }
}

/// Records a request-like step's time bucket against `expected`. The library
/// in process is held to the exact bucket (its snapshot shows it). An
/// external client is held to what the contract says, each correct
/// behaviour accepted: `before_timeout` ("under TIMEOUT") admits `fast`
/// too, and `at_timeout` of a failed start admits the close ladder the
/// client declared (its EOF and TERM graces, plus slack) after TIMEOUT,
/// since the contract has the child ended and reaped before the error
/// returns (4.start.cleanup) and a client may end it with its ladder.
pub(super) fn timed_request(
    exec: &mut Exec<'_>,
    id: &str,
    label: &str,
    elapsed: Duration,
    bucket: RequestBucket,
    expected: Option<RequestBucket>,
) -> StepOutcome {
    let timeout = exec.timeout();
    let (eof, term) = exec.graces();
    let Some(external) = exec.subject.external() else {
        return exec.rec.timed(id, label, bucket, expected);
    };
    let source = external.graces_source();
    let mut out = exec.rec.timed(id, label, bucket, None);
    out.time = expected.map(|_| bucket.into());
    if let Some(expected) = expected {
        let admitted = expected.admits_external(elapsed, timeout, eof + term + AT_TIMEOUT_SLACK);
        exec.rec.check(
            &format!("{id}.within"),
            admitted,
            format!(
                "{label} took {} ms ({}), expected {}{}",
                elapsed.as_millis(),
                crate::scenario::Bucket::from(bucket),
                crate::scenario::Bucket::from(expected),
                match expected {
                    RequestBucket::BeforeTimeout => format!(" (under TIMEOUT {} ms)", timeout.as_millis()),
                    RequestBucket::AtTimeout => format!(
                        " (TIMEOUT {} ms, then at most the close ladder: EOF_GRACE {} ms and TERM_GRACE {} ms {source}, and {} ms of slack)",
                        timeout.as_millis(),
                        eof.as_millis(),
                        term.as_millis(),
                        AT_TIMEOUT_SLACK.as_millis()
                    ),
                    _ => String::new(),
                }
            ),
        );
    }
    out
}
