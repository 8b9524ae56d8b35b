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

use super::Exec;
use crate::scenario::Step;

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
