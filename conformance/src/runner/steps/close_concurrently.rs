//! `close_concurrently`: several closes at once must agree, and the close
//! sequence must run once.

use crate::{runner::Exec, scenario::CloseConcurrentlyStep};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &CloseConcurrentlyStep) {
    if !exec.subject.connected() {
        return exec.no_client(id);
    }
    let count = step.count.0;
    let Some(library) = exec.subject.library() else {
        return exec.library_only(id, "close_concurrently");
    };
    let before = super::close::Before::now_of(library);
    let (reports, sequences) = library.close_concurrently(count).await;
    let seen = super::close::AtReturnSeen::now(exec);
    let agree = reports.windows(2).all(|w| w[0] == w[1]);
    exec.rec.check(
        &format!("{id}.agree"),
        agree,
        format!(
            "{count} concurrent closes {}",
            if agree { "agree" } else { "disagree" }
        ),
    );
    exec.rec.check(
        &format!("{id}.once"),
        sequences == 1,
        format!("the close sequence ran {sequences} time(s)"),
    );
    let label = format!("close x{count}");
    let out = super::close::record(
        exec,
        id,
        &label,
        &step.expect,
        reports[0].clone(),
        before,
        seen,
    );
    exec.rec.push(out);
}
