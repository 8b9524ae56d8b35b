//! Containment: with it on, close ends what the server started outside its
//! process group (`fixture-escaping`'s `setsid` sidecar), in a cgroup or by
//! tracking; with it off, that escapee outlives close as it always did.

use std::time::Duration;

use mcp_stdio_client::{CloseOutcome, Contain, ContainMethod, Contained, EventKind, StdioClient};
use mcp_stdio_process::{
    contain::{Containment, Prefer},
    table as probe,
};

use crate::support::Case;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Connects `fixture-escaping` (with `extra` flags) under `contain`, checks
/// that its sidecar left the server's group and session, and closes it.
/// Returns the close, the escapee's pid and the client's events.
async fn close_escaping(
    case: &Case,
    contain: Contain,
    extra: &[&str],
) -> (CloseOutcome, u32, Vec<EventKind>) {
    let stdio = case.stdio("fixture-escaping", extra);
    let client = StdioClient::builder(&case.server("escaper", stdio, TIMEOUT))
        .contain(contain)
        .connect()
        .await
        .unwrap();
    // The server records the sidecar once its spawn returned, which is after
    // the sidecar's setsid (done between fork and exec).
    let record = case
        .wait_ledger_async("the sidecar's spawn", |r| r["event"] == "sidecar_spawned")
        .await;
    let escapee = record["child_pid"].as_u64().expect("child_pid") as u32;
    let stat = probe::stat(escapee).expect("the escapee runs");
    assert!(stat.is_alive());
    assert_eq!(stat.sid, escapee, "the sidecar leads a session of its own");
    assert_ne!(
        stat.pgid,
        client.pgid(),
        "the sidecar left the server's group"
    );
    let outcome = client.close().await;
    let events = client.events().into_iter().map(|e| e.kind).collect();
    (outcome, escapee, events)
}

/// The method `Contain::On` gets on this machine: a cgroup where this
/// process may make one with `cgroup.kill`, else tracking.
fn expected_on() -> ContainMethod {
    let method = Containment::new(Prefer::Cgroup).method();
    if method != ContainMethod::Cgroup {
        eprintln!("no usable cgroup v2 here: `Contain::On` tracks");
    }
    method
}

/// The escapee is dead the moment close returns, and close says so.
fn assert_ended(case: &Case, outcome: &CloseOutcome, escapee: u32, method: ContainMethod) {
    assert!(
        !probe::is_alive(escapee),
        "the escapee {escapee} outlived close: {:?}",
        probe::stat(escapee)
    );
    case.assert_no_survivors();
    assert_eq!(
        outcome.contained,
        Some(Contained { method, killed: 1 }),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_contained_close_ends_the_setsid_escapee() {
    let case = Case::new();
    let method = expected_on();
    let (outcome, escapee, events) = close_escaping(&case, Contain::On, &[]).await;
    assert_ended(&case, &outcome, escapee, method);
    // The event names the cgroup used, and close removed it.
    let cgroup = events.iter().find_map(|e| match e {
        EventKind::Contained {
            method: got,
            killed,
            cgroup,
        } => Some((*got, *killed, cgroup.clone())),
        _ => None,
    });
    let (got, killed, cgroup) = cgroup.expect("a contained event");
    assert_eq!((got, killed), (method, 1));
    if method == ContainMethod::Cgroup {
        let dir = cgroup.expect("the cgroup's directory");
        assert!(
            !std::path::Path::new(&dir).exists(),
            "close left the cgroup {dir}"
        );
    }
}

#[tokio::test]
async fn a_contained_close_ends_an_escapee_without_environment() {
    let case = Case::new();
    let method = expected_on();
    let (outcome, escapee, _) = close_escaping(&case, Contain::On, &["--empty-env"]).await;
    assert_ended(&case, &outcome, escapee, method);
}

#[tokio::test]
async fn the_tracking_fallback_ends_the_setsid_escapee() {
    let case = Case::new();
    let (outcome, escapee, _) = close_escaping(&case, Contain::Tracked, &[]).await;
    assert_ended(&case, &outcome, escapee, ContainMethod::Tracked);
    // It became ours (the client is a subreaper now) and was reaped: not
    // even a zombie is left.
    assert_eq!(probe::state(escapee), None, "the escapee was not reaped");
}

#[tokio::test]
async fn the_tracking_fallback_ends_an_escapee_without_environment() {
    let case = Case::new();
    let (outcome, escapee, _) = close_escaping(&case, Contain::Tracked, &["--empty-env"]).await;
    assert_ended(&case, &outcome, escapee, ContainMethod::Tracked);
    assert_eq!(probe::state(escapee), None, "the escapee was not reaped");
}

#[tokio::test]
async fn without_containment_the_escapee_outlives_close() {
    let case = Case::new();
    let (outcome, escapee, events) = close_escaping(&case, Contain::Off, &[]).await;
    assert_eq!(outcome.contained, None);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, EventKind::Contained { .. }))
    );
    assert!(
        probe::is_alive(escapee),
        "without containment the escapee is out of reach"
    );
    assert_eq!(case.survivors(), vec![escapee]);
    // The case's drop kills it by marker.
}

#[tokio::test]
async fn a_dropped_contained_client_ends_the_escapee_too() {
    let case = Case::new();
    let stdio = case.stdio("fixture-escaping", &[]);
    let client = StdioClient::builder(&case.server("dropped", stdio, TIMEOUT))
        .contain(Contain::Tracked)
        .connect()
        .await
        .unwrap();
    let record = case
        .wait_ledger_async("the sidecar's spawn", |r| r["event"] == "sidecar_spawned")
        .await;
    let escapee = record["child_pid"].as_u64().expect("child_pid") as u32;
    assert!(probe::is_alive(escapee));
    drop(client);
    assert!(!probe::is_alive(escapee), "the escapee outlived the drop");
    case.assert_no_survivors();
}
