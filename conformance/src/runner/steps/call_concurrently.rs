//! `call_concurrently`: the same `tools/call` from several tasks at once, as
//! a host's parallel tool calls are; each answer is checked against the
//! step's `expect`.

use crate::{
    runner::Exec,
    scenario::{CallConcurrentlyStep, RequestBucket},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CallConcurrentlyStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let count = step.count.0;
    let Some(library) = exec.subject.library() else {
        return exec.library_only(id, "call_concurrently");
    };
    let results = library
        .call_concurrently(count, &step.tool, &step.args)
        .await;
    for (index, (result, elapsed)) in results.into_iter().enumerate() {
        let bucket = RequestBucket::of(elapsed, exec.timeout());
        let label = format!("call {} ({} of {count})", step.tool, index + 1);
        // Each call's checks under an id of its own: `<step>.<n>.text`.
        let call = format!("{id}.{}", index + 1);
        let out = exec.rec.timed(&call, &label, bucket, step.expect.within);
        super::call::record(exec, &call, &step.expect, result, out);
    }
}
