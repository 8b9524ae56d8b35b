//! `session_call`: `Session::call` by qualified name.

use std::time::Instant;

use mcp_stdio_client::SessionError;

use crate::{
    runner::{
        Exec,
        subject::{Failure, library::reply},
    },
    scenario::{CallStep, RequestBucket},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CallStep) {
    let timeout = exec.timeout();
    let Some(session) = exec.subject.library().and_then(|l| l.session.as_ref()) else {
        return exec.no_client(id);
    };
    let start = Instant::now();
    let result = session.call(&step.tool, Some(step.args.clone())).await;
    let bucket = RequestBucket::of(start.elapsed(), timeout);
    let label = format!("session_call {}", step.tool);
    let mut out = exec.rec.timed(id, &label, bucket, step.expect.within);
    let result = match result {
        Ok(result) => Ok(reply(&result)),
        Err(SessionError::Client(error)) => Err(Failure::of(&error)),
        Err(error) => {
            out.result = "error".into();
            out.message = Some(error.to_string());
            exec.rec.check(
                &format!("{id}.result"),
                false,
                format!("{label} failed: {error}"),
            );
            return exec.rec.push(out);
        }
    };
    super::call::record(exec, id, &step.expect, result, out);
}
