//! Stdout that is not only JSON-RPC, and stderr that floods.

use std::time::Duration;

use mcp_stdio_client::{ClosePath, EventKind, SkipReason, StdioClient};
use serde_json::json;

use crate::support::{Case, args, text};

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn stdout_pollution_is_skipped_counted_and_the_session_works() {
    let case = Case::new();
    let client = StdioClient::connect(&case.server(
        "noisy",
        case.stdio("fixture-stdout-polluting", &[]),
        TIMEOUT,
    ))
    .await
    .unwrap();
    assert_eq!(
        text(
            &client
                .call_tool("echo", args(json!({ "text": "clean" })))
                .await
                .unwrap()
        ),
        "clean"
    );
    assert_eq!(client.list_tools().await.unwrap().len(), 5);
    // Banner (2 lines) + a log line after each of the 3 answers read so far;
    // the last log line may still be in flight.
    assert!(
        client.stdout_lines_skipped() >= 4,
        "{}",
        client.stdout_lines_skipped()
    );
    let skipped: Vec<_> = client
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::StdoutLineSkipped {
                reason,
                count,
                prefix,
            } => Some((reason, count, prefix)),
            _ => None,
        })
        .collect();
    assert_eq!(skipped[0].0, SkipReason::NotJson);
    assert_eq!(skipped[0].1, 1);
    assert!(
        skipped[0].2.starts_with("fixture-stdout-polluting v"),
        "{:?}",
        skipped[0]
    );
    assert_eq!(client.close().await.path, ClosePath::Eof);
    case.assert_no_survivors();
}

#[tokio::test]
async fn stderr_flood_never_blocks_the_session_and_is_drained() {
    let case = Case::new();
    let stdio = case.stdio(
        "fixture-stderr-flooding",
        &["--bytes", "8388608", "--per-call-bytes", "262144"],
    );
    let client = StdioClient::connect(&case.server("flood", stdio, TIMEOUT))
        .await
        .unwrap();
    for n in 0..4 {
        let answer = client
            .call_tool("add", args(json!({ "a": n, "b": 1 })))
            .await
            .unwrap();
        assert_eq!(text(&answer), (n + 1).to_string());
    }
    let outcome = client.close().await;
    assert_eq!(outcome.path, ClosePath::Eof);
    // Close waits for stderr to reach EOF, so every line has been read: the
    // 8 MiB flood is 41943 full 200-byte lines, each 256 KiB one 1310, and
    // the partial lines each flood ends with join into one, plus the last.
    assert_eq!(client.stderr_lines(), 41943 + 4 * 1310 + 1);
    let tail = client.stderr_tail();
    assert_eq!(tail.len(), 20);
    assert!(tail[19].starts_with("flood line "), "{tail:?}");
    case.assert_no_survivors();
}

#[tokio::test]
async fn a_giant_stderr_line_is_bounded() {
    let case = Case::new();
    let stdio = case.stdio(
        "fixture-stderr-flooding",
        &[
            "--bytes",
            "2000000",
            "--line-len",
            "4000000",
            "--per-call-bytes",
            "0",
        ],
    );
    let client = StdioClient::connect(&case.server("giant", stdio, TIMEOUT))
        .await
        .unwrap();
    client.close().await;
    let tail = client.stderr_tail();
    assert_eq!(tail.len(), 1, "{} lines", tail.len());
    assert!(
        tail[0].ends_with("[line truncated: 2000000 bytes]"),
        "{}",
        &tail[0][tail[0].len() - 60..]
    );
    assert!(tail[0].len() < 1000);
}

/// A request larger than the stdin pipe holds: the non-blocking write in
/// rmcp's `send` takes what fits, the backlog writer task writes the rest as
/// the server reads, the requests after it queue behind it in order, and the
/// backlog is empty once they are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_the_pipe_is_written_whole_and_in_order() {
    let case = Case::new();
    let client = std::sync::Arc::new(
        StdioClient::connect(&case.server("big", case.stdio("fixture-well-behaved", &[]), TIMEOUT))
            .await
            .unwrap(),
    );
    // 1 MiB: sixteen times a default Linux pipe (64 KiB).
    let big = "x".repeat(1 << 20);
    let calls: Vec<_> = (0..4)
        .map(|n| {
            let client = client.clone();
            let text = if n % 2 == 0 {
                big.clone()
            } else {
                format!("small {n}")
            };
            tokio::spawn(async move {
                let result = client
                    .call_tool("echo", args(json!({ "text": text.clone() })))
                    .await
                    .unwrap();
                assert!(
                    crate::support::text(&result) == text,
                    "echo {n} came back changed"
                );
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    let backlog = client.stdin_backlog();
    assert_eq!((backlog.messages, backlog.bytes), (0, 0), "{backlog:?}");
    assert_eq!(backlog.replies_dropped, 0);
    assert_eq!(client.close().await.path, ClosePath::Eof);
    case.assert_no_survivors();
}
