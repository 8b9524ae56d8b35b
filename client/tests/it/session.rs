//! Many servers in one session: concurrent build, warn-and-skip, credentials
//! never touched for stdio, namespacing, routing, concurrent close.

use std::time::{Duration, Instant};

use mcp_stdio_client::{
    ClosePath, ServerClose, Session, SessionError, SessionOptions,
    config::{Config, ServerConfig, StdioConfig},
};
use serde_json::{Value, json};

use crate::support::{Case, args, text};

const TIMEOUT: Duration = Duration::from_secs(10);

fn add(config: &mut Config, server: ServerConfig) {
    config.servers.insert(server.name.clone(), server);
}

#[tokio::test]
async fn eight_slow_handshakes_build_in_about_one_and_a_failure_is_skipped() {
    const DELAY_MS: u64 = 500;
    let case = Case::new();
    let mut config = Config::default();
    for n in 0..8 {
        let stdio = case.stdio(
            "fixture-well-behaved",
            &["--handshake-delay-ms", &DELAY_MS.to_string()],
        );
        add(
            &mut config,
            case.server(&format!("slow-{n}"), stdio, TIMEOUT),
        );
    }
    add(
        &mut config,
        case.server("missing", StdioConfig::new("no-such-mcp-server"), TIMEOUT),
    );

    let start = Instant::now();
    let mut session = Session::build(&config, &SessionOptions::default()).await;
    let elapsed = start.elapsed();
    // The sum would be 8 x 500 ms; concurrent, it is about one delay.
    assert!(
        elapsed < Duration::from_millis(4 * DELAY_MS),
        "built in {elapsed:?}"
    );
    assert!(elapsed >= Duration::from_millis(DELAY_MS));

    let failures = failure_kinds(&session);
    assert_eq!(failures, [("missing", "not_found")]);
    assert_eq!(session.servers().count(), 8);
    let tools = session.discover_tools(Duration::from_secs(10)).await;
    assert_eq!(tools.len(), 8 * 5);
    assert_eq!(
        text(
            &session
                .call("mcp_slow-3_echo", args(json!({ "text": "3" })))
                .await
                .unwrap()
        ),
        "3"
    );
    for (_, close) in session.close().await {
        assert!(
            matches!(close, ServerClose::Stdio(outcome) if outcome.path == ClosePath::Eof),
            "{close:?}"
        );
    }
    case.assert_no_survivors();
}

/// Every connect runs as a task of its own and they end in any order: the failures are still
/// listed in config order. Here they end in the reverse order (a missing command at once,
/// then the shorter TIMEOUT, then the longer).
#[tokio::test]
async fn failures_are_listed_in_config_order_whatever_order_the_starts_end_in() {
    let case = Case::new();
    let mut config = Config::default();
    for (name, timeout) in [("a-late", 1200), ("b-sooner", 600)] {
        let stdio = case.stdio("fixture-well-behaved", &["--handshake-delay-ms", "60000"]);
        add(
            &mut config,
            case.server(name, stdio, Duration::from_millis(timeout)),
        );
    }
    add(
        &mut config,
        case.server("c-at-once", StdioConfig::new("no-such-mcp-server"), TIMEOUT),
    );
    let session = Session::build(&config, &SessionOptions::default()).await;
    let failures = failure_kinds(&session);
    assert_eq!(
        failures,
        [
            ("a-late", "handshake_timeout"),
            ("b-sooner", "handshake_timeout"),
            ("c-at-once", "not_found"),
        ]
    );
    assert_eq!(session.servers().count(), 0);
    // A failed start is killed and reaped before the build returns.
    case.assert_no_survivors();
}

/// A build dropped while its servers are starting (a caller's own timeout, say) aborts every
/// connect: each one's kill guard kills its server's group and reaps it. The connects are
/// tasks of their own, so this happens when the runtime drops the aborted tasks (promptly,
/// here on this thread as soon as the test yields), not inside the drop.
#[tokio::test]
async fn a_build_dropped_mid_way_kills_and_reaps_every_server_it_started() {
    const SERVERS: usize = 4;
    let case = Case::new();
    let mut config = Config::default();
    for n in 0..SERVERS {
        let stdio = case.stdio("fixture-well-behaved", &["--handshake-delay-ms", "60000"]);
        add(
            &mut config,
            case.server(&format!("slow-{n}"), stdio, Duration::from_secs(120)),
        );
    }
    let started_pids = || -> Vec<u32> {
        case.ledger()
            .iter()
            .filter(|r| r["event"] == "started")
            .filter_map(|r| r["pid"].as_u64().map(|pid| pid as u32))
            .collect()
    };
    let options = SessionOptions::default();
    let pids = {
        let build = Session::build(&config, &options);
        let mut build = std::pin::pin!(build);
        let every_server_running = async {
            let deadline = Instant::now() + crate::support::DEADLINE;
            loop {
                let pids = started_pids();
                if pids.len() == SERVERS {
                    return pids;
                }
                assert!(Instant::now() < deadline, "started: {pids:?}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::select! {
            _ = &mut build => panic!("the handshakes are a minute away: the build cannot end"),
            pids = every_server_running => pids,
        }
        // The build is dropped here, mid-way.
    };
    // Killed and reaped: not even a zombie is left of any of them.
    let deadline = Instant::now() + crate::support::DEADLINE;
    loop {
        let left: Vec<u32> = pids
            .iter()
            .copied()
            .filter(|pid| mcp_stdio_process::table::stat(*pid).is_some())
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "left behind: {left:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    case.assert_no_survivors();
}

// Current-thread, so the subscriber installed on this thread sees every task.
#[tokio::test(flavor = "current_thread")]
async fn a_stdio_server_never_reaches_credential_resolution() {
    let captured = crate::support::Captured::default();
    let _guard = tracing::subscriber::set_default(captured.subscriber());
    let case = Case::new();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let gh = dir.path().join("gh");
    std::fs::write(
        &gh,
        format!("#!/bin/sh\necho run >> {}\necho token\n", runs.display()),
    )
    .unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let text = format!(
        "MCP_SERVERS:\n  local:\n    COMMAND: {}\n    ARGS: [\"--marker={}\"]\n    AUTH: gh\n",
        mcp_fixtures::locate::fixture("fixture-well-behaved")
            .unwrap()
            .display(),
        case.marker
    );
    let config = Config::from_str_with_env(&text, "test", &|_| None).unwrap();
    let options = SessionOptions {
        gh_command: gh.to_string_lossy().into_owned(),
        ..SessionOptions::default()
    };
    let session = Session::build(&config, &options).await;
    assert!(session.failures().is_empty(), "{:?}", session.failures());
    assert_eq!(session.gh_runs(), 0);
    assert!(!runs.exists(), "gh was never run");
    let log = captured.text();
    assert!(!log.contains("WARN"), "nothing to warn about:\n{log}");
    session.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn tools_are_namespaced_carry_flags_and_calls_route_to_their_server() {
    let case = Case::new();
    let mut config = Config::default();
    add(
        &mut config,
        case.server("alpha", case.stdio("fixture-well-behaved", &[]), TIMEOUT),
    );
    let mut trusted = case.server("beta", case.stdio("fixture-well-behaved", &[]), TIMEOUT);
    trusted.requires_consent = false;
    add(&mut config, trusted);
    let mut session = Session::build(&config, &SessionOptions::default()).await;
    let tools = session
        .discover_tools(Duration::from_secs(10))
        .await
        .to_vec();
    let names: Vec<&str> = tools.iter().map(|t| t.qualified_name.as_str()).collect();
    assert!(
        names.contains(&"mcp_alpha_echo") && names.contains(&"mcp_beta_pid"),
        "{names:?}"
    );
    for tool in &tools {
        assert!(tool.serial, "stdio servers are serial");
        assert_eq!(
            tool.requires_consent,
            tool.server == "alpha",
            "{}",
            tool.qualified_name
        );
    }
    // Routing: each server answers `pid` with its own process.
    for server in ["alpha", "beta"] {
        let answer = session
            .call(&format!("mcp_{server}_pid"), None)
            .await
            .unwrap();
        let pid: Value = serde_json::from_str(&text(&answer)).unwrap();
        let mcp_stdio_client::Connection::Stdio(client) = session.connection(server).unwrap()
        else {
            panic!("stdio")
        };
        assert_eq!(pid["pid"], json!(client.pid()), "{server}");
    }
    let unknown = session.call("mcp_gamma_echo", None).await.unwrap_err();
    assert!(matches!(unknown, SessionError::UnknownTool(_)), "{unknown}");
    session.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn closing_a_mixed_session_closes_every_server_concurrently() {
    let case = Case::new();
    let mut config = Config::default();
    for (name, fixture) in [
        ("good", "fixture-well-behaved"),
        ("deaf", "fixture-eof-ignoring"),
        ("stubborn", "fixture-term-ignoring"),
    ] {
        let mut stdio = case.stdio(fixture, &[]);
        stdio.eof_grace = Duration::from_millis(300);
        stdio.term_grace = Duration::from_millis(300);
        add(&mut config, case.server(name, stdio, TIMEOUT));
    }
    let session = Session::build(&config, &SessionOptions::default()).await;
    let start = Instant::now();
    let closes = session.close().await;
    // Concurrent: about the slowest (EOF + TERM grace), not the sum.
    assert!(
        start.elapsed() < Duration::from_millis(1200),
        "{:?}",
        start.elapsed()
    );
    let paths: Vec<(String, ClosePath)> = closes
        .into_iter()
        .map(|(name, close)| match close {
            ServerClose::Stdio(outcome) => (name, outcome.path),
            ServerClose::Http => panic!("stdio only"),
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("deaf".to_owned(), ClosePath::Sigterm),
            ("good".to_owned(), ClosePath::Eof),
            ("stubborn".to_owned(), ClosePath::Sigkill),
        ]
    );
    case.assert_no_survivors();
}

#[cfg(feature = "http")]
#[tokio::test]
async fn a_bearer_http_server_without_token_is_skipped_not_fatal() {
    let case = Case::new();
    let mut config = Config::default();
    add(
        &mut config,
        case.server("local", case.stdio("fixture-well-behaved", &[]), TIMEOUT),
    );
    let mut http = mcp_stdio_client::config::HttpConfig::new("http://127.0.0.1:9/mcp");
    http.auth = mcp_stdio_client::config::AuthMode::Bearer;
    add(&mut config, ServerConfig::http("remote", http));
    let session = Session::build(&config, &SessionOptions::default()).await;
    let failures = failure_kinds(&session);
    assert_eq!(failures, [("remote", "credentials")]);
    assert_eq!(session.servers().collect::<Vec<_>>(), ["local"]);
    session.close().await;
    case.assert_no_survivors();
}

/// Without the `http` feature an HTTP server in the config is a start failure of kind `http`
/// that says why, and the stdio servers start as usual.
#[cfg(not(feature = "http"))]
#[tokio::test]
async fn without_the_http_feature_an_http_server_fails_to_start_and_says_why() {
    let case = Case::new();
    let mut config = Config::default();
    add(
        &mut config,
        case.server("local", case.stdio("fixture-well-behaved", &[]), TIMEOUT),
    );
    let http = mcp_stdio_client::config::HttpConfig::new("http://127.0.0.1:9/mcp");
    add(&mut config, ServerConfig::http("remote", http));
    let session = Session::build(&config, &SessionOptions::default()).await;
    let failures = failure_kinds(&session);
    assert_eq!(failures, [("remote", "http")]);
    let message = session.failures()[0].error.to_string();
    assert!(message.contains("cargo feature `http`"), "{message}");
    assert_eq!(session.servers().collect::<Vec<_>>(), ["local"]);
    session.close().await;
    case.assert_no_survivors();
}

/// Each server that did not start, with the kind of its error, in config order.
fn failure_kinds(session: &Session) -> Vec<(&str, &str)> {
    session
        .failures()
        .iter()
        .map(|f| (f.server.as_str(), f.error.kind().as_str()))
        .collect()
}
