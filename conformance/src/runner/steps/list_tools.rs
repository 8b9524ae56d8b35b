//! `list_tools`: every page of `tools/list`.

use std::time::Instant;

use crate::{
    runner::Exec,
    scenario::{ListToolsStep, RequestBucket},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &ListToolsStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let start = Instant::now();
    let result = exec.subject.list_tools().await;
    let elapsed = start.elapsed();
    let bucket = RequestBucket::of(elapsed, exec.timeout());
    let mut out = super::timed_request(exec, id, "list_tools", elapsed, bucket, step.expect.within);
    match result {
        Ok(count) => {
            out.count = count;
            // A driver need not report the count: then it is not checked.
            if let (Some(expected), Some(count)) = (step.expect.count, count) {
                exec.rec.check(
                    &format!("{id}.count"),
                    count == expected,
                    format!("{count} tools, expected {expected}"),
                );
            }
            exec.rec.reply_ok(id, &step.expect, &mut out);
        }
        Err(failure) => exec.rec.reply_err(id, &step.expect, &failure, &mut out),
    }
    exec.rec.push(out);
}
