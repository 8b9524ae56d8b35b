//! Connect: resolution, spawn, a bounded handshake, cleanup on failure.
//!
//! Lifecycle behaviour is specified by the scenarios (`scenarios/`); a test stays here only when
//! it asserts more than its scenario does (a tighter bound, the client's own API) or what YAML
//! cannot express.

use std::time::{Duration, Instant};

use mcp_fixtures::locate;
use mcp_stdio_client::{ErrorKind, EventKind, StdioClient, config::StdioConfig};
use serde_json::json;

use crate::support::{Case, args, text};

const TIMEOUT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn connect_spawns_in_a_group_of_its_own_and_lists_tools() {
    let case = Case::new();
    let client = StdioClient::connect(&case.server(
        "good",
        case.stdio("fixture-well-behaved", &[]),
        TIMEOUT,
    ))
    .await
    .unwrap();
    assert_eq!(client.pgid(), client.pid());
    assert_eq!(
        mcp_stdio_process::table::pgid_of(client.pid()),
        Some(client.pgid())
    );
    let info = client
        .server_info()
        .expect("server info from the handshake");
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "fixture-well-behaved"
    );
    let tools: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.into_owned())
        .collect();
    assert_eq!(tools, ["echo", "add", "sleep_ms", "pid", "fail"]);
    assert_eq!(
        text(
            &client
                .call_tool("add", args(json!({ "a": 1, "b": 2 })))
                .await
                .unwrap()
        ),
        "3"
    );
    let failed = client
        .call_tool("fail", args(json!({ "message": "tool says no" })))
        .await
        .unwrap();
    assert_eq!(
        failed.is_error,
        Some(true),
        "a tool error is a result, not a ClientError"
    );
    let events = case.events_of(client.pid());
    assert_eq!(&events[..2], ["started", "request"]);
    // A dual-era fixture is spoken to in the modern era: no `initialize`.
    let first = case.wait_ledger("the first request", |r| r["event"] == json!("request"));
    assert_eq!(first["method"], json!("server/discover"), "{first}");
    assert_eq!(first["era"], json!("modern"), "{first}");
    assert!(
        !case
            .ledger()
            .iter()
            .any(|r| r["method"] == json!("initialize")),
        "a modern server got initialize"
    );
    client.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn lifecycle_events_are_recorded_in_order() {
    let case = Case::new();
    let client = StdioClient::connect(&case.server(
        "events",
        case.stdio("fixture-well-behaved", &[]),
        TIMEOUT,
    ))
    .await
    .unwrap();
    let mut live = client.subscribe();
    client.close().await;
    let names: Vec<&'static str> = client
        .events()
        .iter()
        .map(|e| match &e.kind {
            EventKind::Spawned { .. } => "spawned",
            EventKind::Initialized { .. } => "initialized",
            EventKind::ClosePhase { .. } => "close_phase",
            EventKind::Exited { .. } => "exited",
            EventKind::Closed { .. } => "closed",
            _ => "other",
        })
        .collect();
    assert_eq!(
        names,
        ["spawned", "initialized", "close_phase", "exited", "closed"]
    );
    let first = client.events()[0].clone();
    assert_eq!(
        first.kind,
        EventKind::Spawned {
            pid: client.pid(),
            pgid: client.pgid()
        }
    );
    // Subscribers see the events that happened after they subscribed.
    let phase = live.recv().await.unwrap();
    assert!(
        matches!(phase.kind, EventKind::ClosePhase { .. }),
        "{phase:?}"
    );
    let json = serde_json::to_value(client.events()).unwrap();
    assert_eq!(json[0]["event"], json!("spawned"));
    assert!(json[0]["at"].is_u64());
}

#[tokio::test]
async fn a_failed_connect_leaves_its_events_in_the_callers_log() {
    let case = Case::new();
    let stdio = case.stdio("fixture-wedged", &["--never-initialize"]);
    let server = case.server("wedged", stdio, Duration::from_millis(200));
    let log = std::sync::Arc::new(mcp_stdio_client::EventLog::new("wedged", Instant::now()));
    let error = StdioClient::builder(&server)
        .events(log.clone())
        .connect()
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind().as_str(), "handshake_timeout");
    let kinds: Vec<EventKind> = log.snapshot().into_iter().map(|e| e.kind).collect();
    assert!(matches!(kinds[0], EventKind::Spawned { .. }), "{kinds:?}");
    assert_eq!(
        kinds[1],
        EventKind::Exited {
            status: mcp_stdio_client::ChildExit::Signal(9)
        },
        "killed and reaped before the error returned"
    );
    case.assert_no_survivors();
}

#[tokio::test]
async fn bare_command_is_resolved_in_env_path() {
    let case = Case::new();
    let mut stdio = case.stdio("fixture-well-behaved", &[]);
    stdio.command = "fixture-well-behaved".into();
    let dir = locate::fixtures_dir().unwrap();
    stdio
        .env
        .insert("PATH".into(), format!("/nonexistent:{}", dir.display()));
    let client = StdioClient::connect(&case.server("via-env-path", stdio, TIMEOUT))
        .await
        .unwrap();
    client.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn not_found_command_says_which_path_and_how_to_fix_it() {
    let case = Case::new();
    let mut stdio = StdioConfig::new("no-such-mcp-server");
    stdio
        .env
        .insert("PATH".into(), "/opt/secret-venv/bin".into());
    let error = StdioClient::connect(&case.server("missing", stdio, TIMEOUT))
        .await
        .err()
        .unwrap();
    assert_eq!(error.kind().as_str(), "not_found");
    let message = format!("{error}: {}", std::error::Error::source(&error).unwrap());
    assert!(message.contains("\"missing\""), "{message}");
    assert!(
        message.contains("the PATH set in the server's ENV"),
        "{message}"
    );
    assert!(
        !message.contains("/opt/secret-venv"),
        "ENV values are not printed: {message}"
    );
    assert!(message.contains("absolute COMMAND"), "{message}");

    let stdio = StdioConfig::new("no-such-mcp-server");
    let error = StdioClient::connect(&case.server("missing", stdio, TIMEOUT))
        .await
        .err()
        .unwrap();
    let source = std::error::Error::source(&error).unwrap().to_string();
    assert!(source.contains("the inherited PATH ("), "{source}");
}

#[tokio::test]
async fn an_http_entry_is_not_a_stdio_server() {
    let server = mcp_stdio_client::config::ServerConfig::http(
        "remote",
        mcp_stdio_client::config::HttpConfig::new("http://127.0.0.1:9/mcp"),
    );
    let error = StdioClient::connect(&server).await.err().unwrap();
    assert_eq!(error.kind(), ErrorKind::NotStdio, "{error}");
}

#[tokio::test]
async fn a_connect_abandoned_half_way_leaves_no_process() {
    let case = Case::new();
    let stdio = case.stdio("fixture-wedged", &["--never-initialize"]);
    let server = case.server("abandoned", stdio, Duration::from_secs(30));
    let connect = StdioClient::connect(&server);
    let waited = tokio::time::timeout(Duration::from_millis(300), async {
        let connecting = connect;
        tokio::pin!(connecting);
        tokio::select! {
            _ = &mut connecting => panic!("the handshake cannot complete"),
            _ = case.wait_ledger_async("the probe", |r| r["method"] == json!("server/discover")) => {}
        }
        // Dropping `connecting` here abandons the handshake.
    })
    .await;
    assert!(waited.is_ok(), "the fixture received server/discover");
    case.assert_no_survivors();
}

#[tokio::test]
async fn a_name_with_a_nul_byte_is_refused_before_anything_is_spawned() {
    let case = Case::new();
    let stdio = case.stdio("fixture-well-behaved", &[]);
    let server = mcp_stdio_client::config::ServerConfig::stdio("bad\0name", stdio);
    let error = StdioClient::connect(&server)
        .await
        .err()
        .expect("a NUL in the name is an error");
    assert_eq!(error.kind().as_str(), "invalid_name", "{error}");
    assert!(error.to_string().contains("NUL"), "{error}");
    assert!(
        !case.ledger_path().exists(),
        "a fixture was started for an invalid name"
    );
    case.assert_no_survivors();
}

/// `path` written relative to this process's working directory (`../../tmp/...`), so a test can
/// give a relative DIR without changing the working directory of the whole test binary.
fn relative_to_cwd(path: &std::path::Path) -> std::path::PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let mut relative = std::path::PathBuf::new();
    for _ in cwd.components().skip(1) {
        relative.push("..");
    }
    relative.join(path.strip_prefix("/").unwrap())
}

/// A directory deeper than the working directory, holding `bin/fixture-well-behaved` (a
/// symlink). The depth matters: a relative path that climbs to `/` and back down still works
/// after a `chdir` into a shallower directory (`..` stops at `/`), which would hide the bug.
fn deep_dir_with_fixture(case: &Case) -> std::path::PathBuf {
    let depth = std::env::current_dir().unwrap().components().count() + 2;
    let deep = (0..depth).fold(case.dir.path().to_path_buf(), |dir, i| {
        dir.join(format!("d{i}"))
    });
    std::fs::create_dir_all(deep.join("bin")).unwrap();
    let fixture = locate::fixtures_dir().unwrap().join("fixture-well-behaved");
    std::os::unix::fs::symlink(fixture, deep.join("bin/fixture-well-behaved")).unwrap();
    deep
}

#[tokio::test]
async fn a_relative_command_in_a_relative_dir_is_resolved_once() {
    let case = Case::new();
    let deep = deep_dir_with_fixture(&case);
    let mut stdio = case.stdio("fixture-well-behaved", &[]);
    stdio.command = "./bin/fixture-well-behaved".into();
    stdio.dir = Some(relative_to_cwd(&deep));
    let client = StdioClient::connect(&case.server("rel", stdio, TIMEOUT))
        .await
        .unwrap();
    let answer = client
        .call_tool("echo", args(json!({ "text": "relative" })))
        .await
        .unwrap();
    assert_eq!(text(&answer), "relative");
    client.close().await;
    case.assert_no_survivors();
}

#[tokio::test]
async fn a_relative_path_entry_in_a_relative_dir_is_resolved_once() {
    let case = Case::new();
    let deep = deep_dir_with_fixture(&case);
    let mut stdio = case.stdio("fixture-well-behaved", &[]);
    stdio.command = "fixture-well-behaved".into();
    stdio.dir = Some(relative_to_cwd(&deep));
    stdio.env.insert("PATH".into(), "bin".into());
    let client = StdioClient::connect(&case.server("relpath", stdio, TIMEOUT))
        .await
        .unwrap();
    client.close().await;
    case.assert_no_survivors();
}
#[tokio::test]
async fn a_missing_or_non_directory_dir_is_an_error_naming_dir() {
    let case = Case::new();
    let fixtures = locate::fixtures_dir().unwrap();
    let absolute = fixtures.join("fixture-well-behaved");
    for (command, dir) in [
        // An absolute COMMAND used to spawn and fail with ENOENT, blamed on COMMAND.
        (
            absolute.to_string_lossy().into_owned(),
            case.dir.path().join("missing"),
        ),
        (
            "./fixture-well-behaved".to_owned(),
            case.dir.path().join("missing"),
        ),
        (absolute.to_string_lossy().into_owned(), absolute.clone()),
    ] {
        let mut stdio = case.stdio("fixture-well-behaved", &[]);
        stdio.command = command;
        stdio.dir = Some(dir.clone());
        let error = StdioClient::connect(&case.server("nodir", stdio, TIMEOUT))
            .await
            .err()
            .expect("a missing DIR fails");
        let message = mcp_stdio_client::error_chain(&error);
        assert_eq!(error.kind().as_str(), "bad_dir", "{message}");
        assert!(message.contains("DIR"), "{message}");
        assert!(message.contains(&*dir.to_string_lossy()), "{message}");
        assert!(!message.contains("COMMAND"), "{message}");
    }
    case.assert_no_survivors();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawned_always_comes_before_exited_in_the_log() {
    // A child that exits at once races the reaper thread's `exited` against
    // the connect's own `spawned`; the log must tell them in the order they
    // happened, whatever the scheduler does. With a busy thread beside it,
    // the race was lost within a few of these starts before the reaper
    // waited for `spawned`.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hog = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        })
    };
    for i in 0..200 {
        let server = mcp_stdio_client::config::ServerConfig::stdio(
            "gone",
            mcp_stdio_client::config::StdioConfig::new("true"),
        );
        let log = std::sync::Arc::new(mcp_stdio_client::EventLog::new("gone", Instant::now()));
        let error = StdioClient::builder(&server)
            .events(log.clone())
            .connect()
            .await
            .err()
            .expect("`true` is no MCP server");
        assert_eq!(error.kind().as_str(), "child_exited");
        let kinds: Vec<EventKind> = log.snapshot().into_iter().map(|e| e.kind).collect();
        assert!(
            matches!(kinds.first(), Some(EventKind::Spawned { .. })),
            "start {i}: {kinds:?}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    hog.join().unwrap();
}
