//! A dead child fails fast; a wedged or slow one times out and is left alone.
//!
//! Lifecycle behaviour is specified by the scenarios (`scenarios/`); a test stays here only when
//! it asserts more than its scenario does (a tighter bound, the client's own API) or what YAML
//! cannot express.

use std::time::{Duration, Instant};

use mcp_stdio_client::{ChildExit, ClosePath, StdioClient};
use mcp_stdio_process::table as probe;
use nix::{
    sys::signal::{Signal, kill},
    unistd::Pid,
};
use serde_json::json;

use crate::support::{Case, args, text};

const TIMEOUT: Duration = Duration::from_secs(10);
/// Well below any TIMEOUT used here: "at once".
const FAST: Duration = Duration::from_millis(500);

#[tokio::test]
async fn crash_mid_session_fails_that_call_and_every_later_call_fast() {
    let case = Case::new();
    let stdio = case.stdio("fixture-crash", &["--on-call", "2", "--exit-code", "3"]);
    let client = StdioClient::connect(&case.server("crashy", stdio, TIMEOUT))
        .await
        .unwrap();
    assert_eq!(
        text(
            &client
                .call_tool("echo", args(json!({ "text": "one" })))
                .await
                .unwrap()
        ),
        "one"
    );

    let start = Instant::now();
    let error = client
        .call_tool("echo", args(json!({ "text": "two" })))
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < FAST,
        "in-flight call failed after {:?}",
        start.elapsed()
    );
    assert_eq!(error.kind().as_str(), "child_exited");
    assert!(
        error
            .to_string()
            .starts_with("stdio server \"crashy\" exited: exit status 3"),
        "{error}"
    );

    for _ in 0..3 {
        let start = Instant::now();
        let error = client.list_tools().await.unwrap_err();
        assert!(
            start.elapsed() < Duration::from_millis(50),
            "took {:?}",
            start.elapsed()
        );
        assert_eq!(
            error.to_string().lines().next().unwrap(),
            "stdio server \"crashy\" exited: exit status 3"
        );
    }
    assert_eq!(client.exit_status(), Some(ChildExit::Code(3)));
    client.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn a_request_in_flight_when_the_child_is_killed_gets_the_exit_error() {
    let case = Case::new();
    let client = StdioClient::connect(&case.server(
        "victim",
        case.stdio("fixture-well-behaved", &[]),
        TIMEOUT,
    ))
    .await
    .unwrap();
    let pid = client.pid();
    let call = client.call_tool("sleep_ms", args(json!({ "ms": 20000 })));
    let killer = async {
        case.wait_ledger_async("the call", |r| r["tool"] == json!("sleep_ms"))
            .await;
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
    };
    let start = Instant::now();
    let (result, ()) = tokio::join!(call, killer);
    let error = result.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(
        error.to_string(),
        "stdio server \"victim\" exited: signal 9 (SIGKILL)"
    );
    let outcome = client.close().await;
    assert_eq!(outcome.path, ClosePath::Exited);
    case.assert_no_survivors();
}

#[tokio::test]
async fn wedged_call_times_out_sends_cancelled_and_kills_nothing() {
    let case = Case::new();
    let mut stdio = case.stdio("fixture-wedged", &["--on-tool", "sleep_ms"]);
    stdio.eof_grace = Duration::from_millis(100);
    let client = StdioClient::connect(&case.server("stuck", stdio, Duration::from_millis(300)))
        .await
        .unwrap();
    let start = Instant::now();
    let error = client
        .call_tool("sleep_ms", args(json!({ "ms": 1 })))
        .await
        .unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(error.kind().as_str(), "timeout", "{error}");
    assert!(
        error
            .to_string()
            .contains("did not answer tools/call within 300ms"),
        "{error}"
    );

    let request = case.wait_ledger("the call", |r| r["tool"] == json!("sleep_ms"));
    let cancelled = case.wait_ledger("cancellation", |r| r["event"] == json!("cancelled"));
    assert_eq!(cancelled["request_id"], request["id"]);
    assert!(
        probe::is_alive(client.pid()),
        "a slow call is not a dead server"
    );
    assert_eq!(client.exit_status(), None);

    let outcome = client.close().await;
    assert_eq!(outcome.path, ClosePath::Sigterm, "wedged ignores EOF");
    case.assert_no_survivors();
}

#[tokio::test]
async fn slow_call_times_out_then_a_fast_call_succeeds_and_the_stale_reply_is_ignored() {
    let case = Case::new();
    let stdio = case.stdio("fixture-slow", &["--delay-ms", "0"]);
    let client = StdioClient::connect(&case.server("slow", stdio, Duration::from_millis(400)))
        .await
        .unwrap();
    let error = client
        .call_tool("sleep_ms", args(json!({ "ms": 700 })))
        .await
        .unwrap_err();
    assert_eq!(error.kind().as_str(), "timeout");
    // Answered at ~700ms since the first call began, i.e. after its stale
    // reply (which fixture-slow sends despite the cancellation) has arrived.
    let later = client
        .call_tool("sleep_ms", args(json!({ "ms": 350 })))
        .await
        .unwrap();
    assert_eq!(
        text(&later),
        "slept 350 ms",
        "the stale reply was not taken for this one"
    );
    assert_eq!(
        text(
            &client
                .call_tool("echo", args(json!({ "text": "ok" })))
                .await
                .unwrap()
        ),
        "ok"
    );
    assert!(
        case.ledger()
            .iter()
            .any(|r| r["event"] == json!("cancelled"))
    );
    assert_eq!(client.close().await.path, ClosePath::Eof);
    case.assert_no_survivors();
}

#[tokio::test]
async fn server_errors_are_reported_with_their_code() {
    let case = Case::new();
    let client = StdioClient::connect(&case.server(
        "picky",
        case.stdio("fixture-well-behaved", &[]),
        TIMEOUT,
    ))
    .await
    .unwrap();
    let error = client.call_tool("no_such_tool", None).await.unwrap_err();
    assert_eq!(error.kind().as_str(), "server_error");
    assert!(
        error
            .to_string()
            .contains("answered tools/call with error -32602"),
        "{error}"
    );
    // The session survives a rejected request.
    assert_eq!(
        text(
            &client
                .call_tool("echo", args(json!({ "text": "fine" })))
                .await
                .unwrap()
        ),
        "fine"
    );
    client.close().await;
}
