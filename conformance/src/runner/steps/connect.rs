//! `connect`: start the server and complete the handshake.

use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal};

use crate::{
    runner::Exec,
    scenario::{ConnectStep, RequestBucket},
};

pub(super) async fn run(exec: &mut Exec<'_>, id: &str, step: &ConnectStep) {
    let server = match (&step.server, &exec.config) {
        (Some(name), Some(config)) => config.servers.get(name).cloned(),
        (None, Some(config)) if config.servers.len() == 1 => {
            config.servers.values().next().cloned()
        }
        (None, Some(_)) => None,
        (_, None) => exec.server.clone(),
    };
    let Some(server) = server else {
        exec.rec.check(
            &format!("{id}.connect"),
            false,
            "no such server to connect (did the config load?)",
        );
        return;
    };
    exec.rec.words.push(format!("{server:?}"));
    if step.sigterm_blocked && exec.subject.library().is_none() {
        return exec.library_only(id, "connect: {sigterm_blocked: true}");
    }
    if step.options.is_some() && exec.subject.library().is_none() {
        return exec.library_only(id, "connect: {options: ...}");
    }
    // The runtime is current-thread: the connect, and so the spawn, runs on
    // this thread, and the mask is this thread's only (other scenarios run
    // on threads of their own). The previous mask is restored after.
    let previous = step.sigterm_blocked.then(|| {
        let mut term = SigSet::empty();
        term.add(Signal::SIGTERM);
        term.thread_swap_mask(SigmaskHow::SIG_BLOCK)
    });
    let start = Instant::now();
    let wall_start = crate::runner::env::now_ms();
    let result = exec
        .subject
        .connect(&server, step.options.as_ref(), &exec.env)
        .await;
    if let Some(previous) = previous {
        let restored = previous.and_then(|mask| mask.thread_set_mask());
        exec.rec.check(
            &format!("{id}.sigterm_blocked"),
            restored.is_ok(),
            format!("blocking SIGTERM on the connecting thread: {restored:?}"),
        );
    }
    // From here on the harness expects what the client was asked to run.
    let server = match &step.options {
        Some(options) => options.applied_to(&server),
        None => server,
    };
    // From when the subject sent its connect (an external driver ready),
    // else from the step's start.
    let elapsed = exec
        .subject
        .connect_sent()
        .map_or_else(|| start.elapsed(), |sent| sent.elapsed());
    // The last server process to start during this connect (a launcher's
    // grandchild after the launcher, not a sidecar): the one that answered.
    let since_started = exec
        .env
        .ledger()
        .iter()
        .filter(|record| record.event == "started" && record.t_ms >= wall_start)
        .filter(|record| !record.fixture.ends_with("-sidecar"))
        .map(|record| record.t_ms)
        .max()
        .map(|started| Duration::from_millis(crate::runner::env::now_ms().saturating_sub(started)));
    let bucket = RequestBucket::of_connect(elapsed, since_started, server.timeout);
    exec.server = Some(server);
    let mut out = super::timed_request(exec, id, "connect", elapsed, bucket, step.expect.within);
    match result {
        Ok(leader) => {
            exec.rec.normalizer.add_pid(leader.pid);
            exec.rec.reply_ok(id, &step.expect, &mut out);
            crate::runner::consistency::after_connect(exec, id);
        }
        Err(failure) => exec.rec.reply_err(id, &step.expect, &failure, &mut out),
    }
    exec.rec.push(out);
}
