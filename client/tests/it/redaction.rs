//! Secrets in ARGS and ENV never appear in what the client itself writes.

use std::time::Duration;

use mcp_stdio_client::{StdioClient, config::StdioConfig};

use crate::support::{Captured, Case};

const ARG_SECRET: &str = "sk-live-1234";
const ENV_SECRET: &str = "env-secret-5678";

fn secret_stdio(case: &Case) -> StdioConfig {
    let mut stdio = case.stdio("fixture-secret-echoing", &["-p", ARG_SECRET]);
    stdio.env.insert("API_KEY".into(), ENV_SECRET.into());
    stdio
}

/// The client's own words: every log line except the child's stderr lines,
/// which are the server's words, logged as they are (docs/client.md).
fn own_words(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| !line.contains(": stderr server="))
        .collect()
}

// A current-thread runtime keeps every task on this thread, where the
// subscriber is installed.
#[tokio::test(flavor = "current_thread")]
async fn secrets_do_not_appear_in_logs_events_errors_or_debug_output() {
    let case = Case::new();
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(captured.subscriber());

    let stdio = secret_stdio(&case);
    let server = case.server("secretive", stdio, Duration::from_secs(10));
    let client = StdioClient::connect(&server).await.unwrap();
    let _ = client.call_tool("no_such_tool", None).await.unwrap_err();
    let outcome = client.close().await;

    // The server echoed them (so they were really passed)...
    let log = captured.text();
    assert!(
        log.contains(ARG_SECRET) && log.contains(ENV_SECRET),
        "the fixture did echo them:\n{log}"
    );
    // ...but none of the client's own output holds them.
    for line in own_words(&log) {
        assert!(
            !line.contains(ARG_SECRET) && !line.contains(ENV_SECRET),
            "leaked in a log line: {line}"
        );
    }
    let everything = format!(
        "{server:?} {:?} {} {outcome:?}",
        client.events(),
        serde_json::to_string(&client.events()).unwrap()
    );
    assert!(
        !everything.contains(ARG_SECRET) && !everything.contains(ENV_SECRET),
        "{everything}"
    );
    case.assert_no_survivors();
}

#[tokio::test(flavor = "current_thread")]
async fn secrets_do_not_appear_in_failure_errors() {
    let case = Case::new();
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(captured.subscriber());

    let mut failures = Vec::new();
    // Not found.
    let mut stdio = secret_stdio(&case);
    stdio.command = "no-such-server".into();
    failures.push(
        StdioClient::connect(&case.server("a", stdio, Duration::from_secs(5)))
            .await
            .err()
            .unwrap(),
    );
    // Handshake timeout.
    let mut stdio = case.stdio(
        "fixture-wedged",
        &["--never-initialize", "--marker", ARG_SECRET],
    );
    stdio.env.insert("API_KEY".into(), ENV_SECRET.into());
    failures.push(
        StdioClient::connect(&case.server("b", stdio, Duration::from_millis(200)))
            .await
            .err()
            .unwrap(),
    );
    // Child exits during the handshake (usage error).
    let mut stdio = case.stdio("fixture-crash", &["--exit-code", ARG_SECRET]);
    stdio.env.insert("API_KEY".into(), ENV_SECRET.into());
    failures.push(
        StdioClient::connect(&case.server("c", stdio, Duration::from_secs(5)))
            .await
            .err()
            .unwrap(),
    );

    for error in &failures {
        let mut text = format!("{error} {error:?}");
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text.push_str(&format!(" {cause} {cause:?}"));
            source = cause.source();
        }
        // The usage error quotes the bad value: that is the child's stderr,
        // attached as the server's words. The client's own text must not.
        for line in error.stderr_tail() {
            text = text.replace(line.as_str(), "<server's words>");
        }
        assert!(
            !text.contains(ARG_SECRET) && !text.contains(ENV_SECRET),
            "{text}"
        );
    }
    for line in own_words(&captured.text()) {
        assert!(
            !line.contains(ARG_SECRET) && !line.contains(ENV_SECRET),
            "leaked in a log line: {line}"
        );
    }
    case.assert_no_survivors();
}
