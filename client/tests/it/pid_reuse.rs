//! No signal ever reaches a recycled pid or process group.
//!
//! A crashed child's pid is also its group id. If the client reaped it at
//! once, the kernel could hand that pid to an unrelated process that makes
//! itself a group leader, and the `exited` close path's sweep, or `Drop`,
//! would SIGKILL a stranger's group. These tests force the reuse the way an
//! attacker would (as root, by writing pid-1 to `ns_last_pid` just before
//! spawning) and prove that the pid stays reserved until the client has
//! finished with the group, and is freed after.

use std::{
    os::unix::process::CommandExt,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use mcp_stdio_client::StdioClient;
use serde_json::json;

use crate::support::{Case, DEADLINE, args};

const NS_LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";
const TIMEOUT: Duration = Duration::from_secs(10);
/// Other processes fork too: a few tries let the forced reuse win the race.
const TRIES: usize = 50;

/// Why the forced reuse cannot be tried here, if it cannot.
fn cannot_force_reuse() -> Option<String> {
    let last = match std::fs::read_to_string(NS_LAST_PID) {
        Ok(last) => last,
        Err(error) => return Some(format!("cannot read {NS_LAST_PID} ({error})")),
    };
    std::fs::write(NS_LAST_PID, last.trim())
        .err()
        .map(|error| format!("cannot write {NS_LAST_PID} ({error}); needs root"))
}

/// A `sleep` in a process group of its own, started so that the kernel gives
/// it `pid` if `pid` is free. Returns it and whether it got `pid`.
fn stranger_at(pid: u32) -> (Child, bool) {
    for _ in 0..TRIES {
        std::fs::write(NS_LAST_PID, (pid - 1).to_string()).expect("write ns_last_pid");
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        if child.id() == pid {
            return (child, true);
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    let child = Command::new("sleep")
        .arg("60")
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn sleep");
    (child, false)
}

/// True while `/proc/<pid>` exists.
fn pid_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

async fn crashed_client(case: &Case) -> StdioClient {
    let stdio = case.stdio("fixture-crash", &["--on-call", "1"]);
    let client = StdioClient::connect(&case.server("crashy", stdio, TIMEOUT))
        .await
        .expect("connect");
    let error = client
        .call_tool("echo", args(json!({ "text": "bye" })))
        .await
        .expect_err("the fixture dies on its first call");
    assert_eq!(error.kind().as_str(), "child_exited", "{error}");
    client
}

/// Checks the stranger, then ends it whatever happened.
fn end_stranger(mut stranger: Child, got_pid: bool, path: &str) {
    let alive = stranger.try_wait().expect("try_wait").is_none();
    let _ = stranger.kill();
    let _ = stranger.wait();
    assert!(
        alive,
        "{path} killed an unrelated process (given the crashed child's pid: {got_pid})"
    );
    assert!(
        !got_pid,
        "the crashed child's pid was given to another process before {path} had swept its group"
    );
}

/// Crashes a child, tries to hand its pid to a stranger, ends the client
/// with `end`, and checks that the stranger lives and the child was reaped.
async fn no_recycled_pid_is_signalled_by<F, Fut>(path: &str, end: F)
where
    F: FnOnce(StdioClient) -> Fut,
    Fut: Future<Output = ()>,
{
    if let Some(why) = cannot_force_reuse() {
        eprintln!("skipped: {why}");
        return;
    }
    let case = Case::new();
    let client = crashed_client(&case).await;
    let pid = client.pid();
    let (stranger, got_pid) = stranger_at(pid);
    end(client).await;
    end_stranger(stranger, got_pid, path);
    // Released after the sweep: the zombie is reaped, not leaked.
    let deadline = Instant::now() + DEADLINE;
    while pid_exists(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!pid_exists(pid), "the crashed child was never reaped");
}

#[tokio::test]
async fn close_never_signals_a_recycled_pid() {
    no_recycled_pid_is_signalled_by("close", |client| async move {
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn drop_never_signals_a_recycled_pid() {
    no_recycled_pid_is_signalled_by("drop", |client| async move { drop(client) }).await;
}
