//! Close: EOF, then SIGTERM, then SIGKILL, on the whole group, and nothing left.
//!
//! Lifecycle behaviour is specified by the scenarios (`scenarios/`); a test stays here only when
//! it asserts more than its scenario does (a tighter bound, the client's own API) or what YAML
//! cannot express.

use std::{sync::Arc, time::Duration};

use mcp_stdio_client::{ChildExit, ClosePath, EventKind, StdioClient};
use mcp_stdio_process::table as probe;
use serde_json::json;

use crate::support::{Case, args, text};

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn well_behaved_closes_by_eof_well_under_the_grace() {
    let case = Case::new();
    let mut stdio = case.stdio("fixture-well-behaved", &[]);
    stdio.eof_grace = Duration::from_secs(5);
    let client = StdioClient::connect(&case.server("good", stdio, TIMEOUT))
        .await
        .unwrap();
    assert_eq!(
        text(
            &client
                .call_tool("echo", args(json!({ "text": "hi" })))
                .await
                .unwrap()
        ),
        "hi"
    );

    let outcome = client.close().await;
    assert_eq!(outcome.path, ClosePath::Eof);
    assert_eq!(outcome.status, Some(ChildExit::Code(0)));
    assert!(!outcome.group_swept);
    assert!(
        outcome.elapsed < Duration::from_millis(2500),
        "{:?} is not well under 5s",
        outcome.elapsed
    );
    assert_eq!(case.events_of(client.pid()).last().unwrap(), "exit");
    case.assert_no_survivors();
}

/// A host that blocks SIGTERM on its own threads (to take it with sigwait)
/// must still start servers that can see the close ladder's SIGTERM: a
/// blocked mask survives exec, so the client resets it for the child.
#[tokio::test]
async fn a_host_that_blocks_sigterm_still_starts_servers_that_see_it() {
    use nix::sys::signal::{SigSet, Signal};
    let mut blocked = SigSet::empty();
    blocked.add(Signal::SIGTERM);
    // On this thread only: the current-thread runtime spawns from here.
    blocked.thread_block().unwrap();
    let case = Case::new();
    let mut stdio = case.stdio("fixture-eof-ignoring", &[]);
    stdio.eof_grace = Duration::from_millis(200);
    stdio.term_grace = Duration::from_secs(5);
    let client = StdioClient::connect(&case.server("deaf", stdio, TIMEOUT))
        .await
        .unwrap();
    let outcome = client.close().await;
    blocked.thread_unblock().unwrap();
    assert_eq!(outcome.path, ClosePath::Sigterm, "{outcome:?}");
    assert_eq!(outcome.status, Some(ChildExit::Code(143)));
    case.assert_no_survivors();
}

#[tokio::test]
async fn launcher_with_an_eof_ignoring_grandchild_leaves_no_survivor() {
    let case = Case::new();
    let mut stdio = case.stdio(
        "fixture-launcher",
        &["--", "{fixtures}/fixture-eof-ignoring", "--marker={marker}"],
    );
    stdio.eof_grace = Duration::from_millis(200);
    let client = StdioClient::connect(&case.server("npx-like", stdio, TIMEOUT))
        .await
        .unwrap();
    let info = client.server_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "fixture-eof-ignoring"
    );
    assert_eq!(case.survivors().len(), 2, "launcher and grandchild");

    let outcome = client.close().await;
    // The launcher exits at once on SIGTERM without forwarding it; the group
    // signal is what reaches the grandchild.
    assert_eq!(outcome.path, ClosePath::Sigterm);
    let grandchild = case.wait_ledger("grandchild exit", |r| {
        r["fixture"] == json!("fixture-eof-ignoring") && r["event"] == json!("exit")
    });
    assert_eq!(grandchild["code"], json!(143));
    case.assert_no_survivors();
}

#[tokio::test]
async fn lingering_sidecar_is_swept_after_a_graceful_leader_exit() {
    let case = Case::new();
    let stdio = case.stdio("fixture-lingering", &[]);
    let client = StdioClient::connect(&case.server("sidecar", stdio, TIMEOUT))
        .await
        .unwrap();
    let sidecar = case.wait_ledger("sidecar started", |r| {
        r["fixture"] == json!("fixture-lingering-sidecar") && r["event"] == json!("started")
    });
    let sidecar_pid = sidecar["pid"].as_u64().unwrap() as u32;

    let outcome = client.close().await;
    assert_eq!(
        outcome.path,
        ClosePath::Eof,
        "the leader itself left gracefully"
    );
    assert!(outcome.group_swept, "the sidecar was found and killed");
    assert!(!probe::is_alive(sidecar_pid));
    assert!(
        client
            .events()
            .iter()
            .any(|e| e.kind == EventKind::GroupSwept)
    );
    case.assert_no_survivors();
}

#[tokio::test]
async fn close_is_idempotent_and_concurrent_closes_agree() {
    let case = Case::new();
    let mut stdio = case.stdio("fixture-eof-ignoring", &[]);
    stdio.eof_grace = Duration::from_millis(100);
    let client = Arc::new(
        StdioClient::connect(&case.server("twice", stdio, TIMEOUT))
            .await
            .unwrap(),
    );
    let closes: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.close().await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for close in closes {
        outcomes.push(close.await.unwrap());
    }
    assert!(outcomes.windows(2).all(|w| w[0] == w[1]), "{outcomes:?}");
    assert_eq!(outcomes[0].path, ClosePath::Sigterm);
    // Once closed, close returns the same outcome at once.
    assert_eq!(client.close().await, outcomes[0]);
    let closed = client
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Closed { .. }))
        .count();
    assert_eq!(closed, 1, "the sequence ran once");
    let error = client
        .call_tool("echo", args(json!({ "text": "x" })))
        .await
        .unwrap_err();
    assert_eq!(error.kind().as_str(), "closed", "{error}");
    case.assert_no_survivors();
}

#[tokio::test]
async fn drop_without_close_kills_the_group_and_reaps_the_child() {
    let case = Case::new();
    let stdio = case.stdio(
        "fixture-launcher",
        &[
            "--",
            "{fixtures}/fixture-term-ignoring",
            "--marker={marker}",
        ],
    );
    let client = StdioClient::connect(&case.server("dropped", stdio, TIMEOUT))
        .await
        .unwrap();
    let pid = client.pid();
    assert_eq!(case.survivors().len(), 2);
    drop(client);
    // Drop waits for the reaper, so the leader is gone (not a zombie) now.
    assert_eq!(probe::state(pid), None, "the child was reaped");
    let gone = crate::support::wait_gone(&case);
    assert!(gone, "survivors after drop: {:?}", case.survivors());
}
