//! `call`: one `tools/call`; also the checks of a call's answer that
//! `session_call` shares.

use std::time::Instant;

use crate::{
    outcome::StepOutcome,
    runner::{
        Exec,
        subject::{CallReply, Failure},
    },
    scenario::{CallExpect, CallStep, RequestBucket},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CallStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let start = Instant::now();
    let result = exec.subject.call(&step.tool, step.args.clone()).await;
    let elapsed = start.elapsed();
    let bucket = RequestBucket::of(elapsed, exec.timeout());
    let label = format!("call {}", step.tool);
    let out = super::timed_request(exec, id, &label, elapsed, bucket, step.expect.within);
    record(exec, id, &step.expect, result, out);
}

/// Checks a tool call's answer (or failure) against `expect` and records
/// the step.
pub(super) fn record(
    exec: &mut Exec<'_>,
    id: &str,
    expect: &CallExpect,
    result: Result<CallReply, Failure>,
    mut out: StepOutcome,
) {
    match result {
        Ok(reply) => {
            // A driver need not report the content: then it is not checked.
            if let Some(expected) = expect.text.as_ref().filter(|_| reply.reported) {
                let got = reply.text.clone().unwrap_or_default();
                exec.rec.check(
                    &format!("{id}.text"),
                    &got == expected,
                    format!("text {got:?}, expected {expected:?}"),
                );
            }
            if let Some(expected) = expect.is_error {
                exec.rec.check(
                    &format!("{id}.is_error"),
                    reply.is_error == expected,
                    format!("isError {}, expected {expected}", reply.is_error),
                );
            }
            out.text = reply.text.map(|t| exec.rec.normalizer.apply(&t));
            out.is_error = Some(reply.is_error);
            exec.rec.reply_ok(id, expect, &mut out);
        }
        Err(failure) => exec.rec.reply_err(id, expect, &failure, &mut out),
    }
    exec.rec.push(out);
}
