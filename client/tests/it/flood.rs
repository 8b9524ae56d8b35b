//! A server that floods requests and never reads its stdin: the replies the
//! client cannot deliver stay bounded, its own requests are not wedged, and
//! close still works.

use std::time::{Duration, Instant};

use mcp_stdio_client::{ChildExit, ClosePath, EventKind, MAX_STDIN_BACKLOG, StdioClient};
use serde_json::json;

use crate::support::{Case, args};

/// Pings the fixture must have written before the backlog is looked at:
/// unbounded, their replies would be about 3 MiB, well over the bound.
const FLOODED: u64 = 1 << 16;

/// Generous: the client parses every ping on a loaded 2-core machine.
const FLOOD_DEADLINE: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_that_is_never_read_keeps_the_stdin_backlog_bounded() {
    let case = Case::new();
    let timeout = Duration::from_secs(3);
    let client = StdioClient::connect(&case.server(
        "flood",
        case.stdio("fixture-well-behaved", &["--flood-pings"]),
        timeout,
    ))
    .await
    .unwrap();

    // The fixture counts the pings it wrote; the client has read all but a
    // pipe's worth of them.
    let deadline = Instant::now() + FLOOD_DEADLINE;
    loop {
        let flooded = case
            .ledger()
            .iter()
            .filter(|r| r["event"] == "flooded")
            .filter_map(|r| r["count"].as_u64())
            .max()
            .unwrap_or(0);
        if flooded >= FLOODED {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the fixture wrote only {flooded} pings; backlog {:?}",
            client.stdin_backlog()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let backlog = client.stdin_backlog();
    assert!(
        backlog.bytes <= MAX_STDIN_BACKLOG,
        "{backlog:?} is over the bound of {MAX_STDIN_BACKLOG} bytes"
    );
    assert!(backlog.replies_dropped > 0, "{backlog:?}");
    let reported = client
        .events()
        .iter()
        .filter_map(|e| match e.kind {
            EventKind::StdinRepliesDropped { count, .. } => Some(count),
            _ => None,
        })
        .max();
    assert!(
        reported.is_some_and(|count| count.is_power_of_two() && count <= backlog.replies_dropped),
        "{reported:?}"
    );

    // The client's own request is not wedged behind the flood: the server
    // never reads it, so it fails by its TIMEOUT like any unanswered request.
    let started = Instant::now();
    let error = client
        .call_tool("echo", args(json!({ "text": "hi" })))
        .await
        .unwrap_err();
    assert_eq!(error.kind().as_str(), "timeout", "{error}");
    assert!(started.elapsed() < timeout * 3, "{:?}", started.elapsed());

    // Close still works: stdin closes even with a write blocked on it, and
    // the server, which never sees that EOF, ends by SIGTERM.
    let outcome = client.close().await;
    assert_eq!(outcome.path, ClosePath::Sigterm, "{outcome:?}");
    assert_eq!(outcome.status, Some(ChildExit::Code(143)));
    case.assert_no_survivors();
}
