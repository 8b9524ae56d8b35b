//! `mcp-conformance host`, tested with real processes:
//!
//! - the stand-in model endpoint on each wire format, through a stdlib
//!   Python client shaped like that format's official SDK
//!   (`tests/data/model_clients.py`): it parses the streamed answers as the
//!   SDKs do, calls the tools, sends the results and reads the final text;
//! - the whole subcommand against a scripted host
//!   (`tests/data/scripted_host.py`) that starts the servers from the
//!   config, talks to the endpoint in one format, calls the tools and then
//!   closes carefully, with a SIGINT ladder, abruptly, or hangs: each gets
//!   its true verdicts, and nothing of the run is left running.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use mcp_conformance::{FINAL_TEXT, ModelApi as Api, ModelEndpoint as Endpoint};
use mcp_stdio_process::{Marker, MarkerGuard};
use serde_json::{Value, json};

const CLI: &str = env!("CARGO_BIN_EXE_mcp-conformance");

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs `model_clients.py ARGS` and parses the JSON it prints.
fn python(args: &[&str]) -> Value {
    let output = Command::new("python3")
        .arg(data("model_clients.py"))
        .args(args)
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client failed: {stderr}");
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"))
}

/// One conversation in `api`'s format: the fixture tools offered (however
/// prefixed) are called with schema-valid arguments, the host's own tool is
/// not, and the turn with the results gets the final text.
fn conversation(api: &str, base_suffix: &str, expected: Api) {
    let endpoint = Endpoint::start(&mcp_fixtures::server::TOOL_NAMES).unwrap();
    let base = format!("{}{base_suffix}", endpoint.url());
    let seen = python(&[api, &base]);
    assert_eq!(
        seen["calls"],
        json!([
            ["mcp__alpha__echo", { "text": "mcp-conformance" }],
            ["mcp__beta__add", { "a": 1, "b": 1 }],
            ["mcp__beta__sleep_ms", { "ms": 0 }],
        ]),
        "{seen}"
    );
    assert_eq!(seen["final_calls"], 0, "{seen}");
    assert_eq!(seen["final"], FINAL_TEXT, "{seen}");
    let exchanges = endpoint.exchanges();
    assert_eq!(exchanges.len(), 2, "{exchanges:?}");
    let (first, second) = (&exchanges[0], &exchanges[1]);
    assert_eq!(first.api, Some(expected));
    assert!(first.stream);
    assert_eq!(first.tools_offered.len(), 4, "{first:?}");
    assert_eq!(first.tool_results, 0);
    assert_eq!(first.answer, "tool_calls");
    assert_eq!(first.called.len(), 3);
    assert_eq!(second.tool_results, 3, "{second:?}");
    assert_eq!(second.answer, "text");
}

#[test]
fn endpoint_speaks_anthropic_messages() {
    conversation("anthropic", "", Api::Anthropic);
}

#[test]
fn endpoint_speaks_openai_chat_completions() {
    conversation("openai", "/v1", Api::Openai);
}

#[test]
fn endpoint_speaks_openai_responses() {
    conversation("openai-responses", "/v1", Api::OpenaiResponses);
}

#[test]
fn endpoint_speaks_gemini() {
    conversation("gemini", "", Api::Gemini);
}

/// Deferred MCP tools (Qwen Code): the model first asks the search tool
/// for the fixture tools the prompt names, then calls them once offered.
#[test]
fn endpoint_fetches_deferred_tools_through_the_search_tool() {
    let endpoint = Endpoint::start(&mcp_fixtures::server::TOOL_NAMES).unwrap();
    let seen = python(&["deferred", &format!("{}/v1", endpoint.url())]);
    assert_eq!(
        seen["turns"],
        json!([
            [["tool_search", { "query": "select:mcp__alpha__echo,mcp__beta__pid", "max_results": 2 }]],
            [["mcp__alpha__echo", { "text": "mcp-conformance" }]],
            [],
        ]),
        "{seen}"
    );
    assert_eq!(seen["final"], FINAL_TEXT);
}

/// POSTs `body` to `path` of `url` over plain HTTP/1.1; the status line
/// and the body.
fn post(url: &str, method: &str, path: &str, body: &str) -> (String, String) {
    use std::io::{Read, Write};
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, rest) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        rest.to_owned(),
    )
}

/// The first model turn real hosts sent (recorded by `mcp-conformance host
/// --dir`, long prose cut, paths replaced): the endpoint calls every fixture
/// tool each offered, however the host named and shaped them (Claude Code's
/// `mcp__SERVER__TOOL`, Codex's Responses namespaces, Gemini CLI's
/// `SERVER__TOOL`, opencode's `SERVER_TOOL`), and asks Qwen Code's
/// `tool_search` for the deferred ones.
#[test]
fn endpoint_answers_recorded_first_turns_of_real_hosts() {
    let dir = data("recorded");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "{files:?}");
    for file in files {
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let endpoint = Endpoint::start(&mcp_fixtures::server::TOOL_NAMES).unwrap();
        let (status, body) = post(
            &endpoint.url(),
            recorded["method"].as_str().unwrap(),
            recorded["path"].as_str().unwrap(),
            &recorded["body"].to_string(),
        );
        let host = &recorded["host"];
        assert!(status.contains(" 200 "), "{host}: {status}");
        let exchanges = endpoint.exchanges();
        assert_eq!(exchanges.len(), 1, "{host}");
        assert_eq!(
            exchanges[0].answer, recorded["expect"]["answer"],
            "{host}: {body}"
        );
        assert_eq!(
            exchanges[0].called.len() as u64,
            recorded["expect"]["called"].as_u64().unwrap(),
            "{host}: {:?}",
            exchanges[0].called
        );
        // Every call names an offered tool, once.
        for called in &exchanges[0].called {
            assert!(
                exchanges[0].tools_offered.contains(called),
                "{host}: {called} was not offered"
            );
        }
    }
}

#[test]
fn endpoint_answers_and_records_side_requests() {
    let endpoint = Endpoint::start(&mcp_fixtures::server::TOOL_NAMES).unwrap();
    let codes = python(&["side", &endpoint.url()]);
    assert_eq!(codes[0][1], 200, "{codes}");
    assert_eq!(codes[1][1], 200, "{codes}");
    assert!(codes[1][2]["data"][0]["id"].is_string(), "{codes}");
    assert_eq!(codes[2][2], json!({ "input_tokens": 1 }), "{codes}");
    assert_eq!(codes[3][1], 404, "{codes}");
    let answers: Vec<&str> = endpoint.exchanges().iter().map(|e| e.answer).collect();
    assert_eq!(answers, ["ok", "models", "count", "not_found"]);
}

/// The markers `mcp-conformance host --dir DIR` gave its servers.
fn markers_in(dir: &Path) -> Vec<String> {
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("host.json")).unwrap_or_default())
            .unwrap_or(Value::Null);
    state["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["marker"].as_str().map(str::to_owned))
        .collect()
}

/// A run of the subcommand in a directory the test keeps, so that whatever
/// the run left is found by its markers and ended, even on failure.
struct Run {
    dir: tempfile::TempDir,
    code: i32,
    report: Value,
    stderr: String,
}

impl Run {
    fn host(api: &str, close: &str, extra: &[&str]) -> Run {
        Run::host_with(api, close, extra, &[])
    }

    /// [`Run::host`] with more arguments for the scripted host.
    fn host_with(api: &str, close: &str, extra: &[&str], host_args: &[&str]) -> Run {
        let dir = tempfile::tempdir().unwrap();
        let script = data("scripted_host.py");
        let output = Command::new(CLI)
            .args(["host", "--json", "--model-api", api, "--dir"])
            .arg(dir.path())
            .args(extra)
            .arg("--")
            .arg("python3")
            .arg(&script)
            .args(["--config", "{config}", "--api", api, "--close", close])
            .args(host_args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        eprintln!("{stderr}");
        let run = Run {
            code: output.status.code().unwrap_or(-1),
            report: serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            stderr,
            dir,
        };
        eprintln!("{:#}", run.report);
        run
    }

    fn markers(&self) -> Vec<String> {
        markers_in(self.dir.path())
    }

    fn verdicts(&self) -> BTreeMap<String, String> {
        self.report["checks"]
            .as_array()
            .unwrap_or_else(|| panic!("no report: {}", self.stderr))
            .iter()
            .map(|c| {
                (
                    c["id"].as_str().unwrap().to_owned(),
                    c["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn summary(&self, id: &str) -> String {
        self.report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["id"] == id)
            .and_then(|c| c["summary"].as_str())
            .unwrap_or_default()
            .to_owned()
    }

    /// Nothing of the run is alive when the subcommand has returned.
    fn nothing_left(&self) {
        for marker in self.markers() {
            let left = mcp_stdio_process::marker::marked(&marker);
            assert!(left.is_empty(), "{marker}: {left:?}");
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for marker in self.markers() {
            drop(MarkerGuard::new(
                Marker::from_value(marker),
                Duration::from_secs(5),
            ));
        }
    }
}

fn expect(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(id, verdict)| ((*id).to_owned(), (*verdict).to_owned()))
        .collect()
}

#[test]
fn a_careful_host_passes_and_its_escaped_sidecar_is_ended() {
    let run = Run::host("anthropic", "careful", &[]);
    assert_eq!(
        run.verdicts(),
        expect(&[
            ("host.exit", "pass"),
            ("host.tools_called", "pass"),
            ("close.eof_first", "pass"),
            ("close.graceful", "pass"),
            ("close.sigterm", "pass"),
            ("close.sigkill", "pass"),
            ("close.group", "pass"),
            ("close.sidecar", "pass"),
            ("close.escaped", "info"),
            ("death.fast", "info"),
            ("stderr.drained", "pass"),
            ("stdout.tolerant", "pass"),
            ("exit.clean", "pass"),
        ]),
        "{}",
        run.stderr
    );
    assert_eq!(run.code, 0);
    // The first rows are the host's own, in this order.
    assert_eq!(run.report["checks"][0]["id"], "host.exit");
    assert_eq!(run.report["checks"][1]["id"], "host.tools_called");
    assert!(
        run.summary("host.tools_called")
            .contains("the tools of all 9 servers were offered"),
        "{}",
        run.summary("host.tools_called")
    );
    // The story: true order, times from the first teardown action.
    let sigkill = run.summary("close.sigkill");
    let eof = sigkill.find("stdin EOF at +").unwrap();
    let term = sigkill.find("SIGTERM at +").unwrap();
    assert!(eof < term, "{sigkill}");
    assert!(
        run.summary("close.escaped")
            .contains("the setsid sidecar outlived the host"),
        "{}",
        run.summary("close.escaped")
    );
    assert!(
        run.stderr.contains("ended fixture-escaping-sidecar"),
        "{}",
        run.stderr
    );
    run.nothing_left();
}

#[test]
fn a_sigint_ladder_is_graded_on_the_ladder() {
    let run = Run::host("openai", "sigint-ladder", &[]);
    let verdicts = run.verdicts();
    assert_eq!(verdicts["close.sigterm"], "pass", "{}", run.stderr);
    assert!(
        run.summary("close.sigterm")
            .contains("the host's ladder is SIGINT → SIGTERM"),
        "{}",
        run.summary("close.sigterm")
    );
    assert_eq!(verdicts["close.sigkill"], "pass");
    assert_eq!(verdicts["host.tools_called"], "pass");
    assert_eq!(run.code, 0);
    run.nothing_left();
}

#[test]
fn an_abrupt_host_fails_what_it_left() {
    let run = Run::host("gemini", "abrupt", &[]);
    let verdicts = run.verdicts();
    for (id, verdict) in [
        ("host.exit", "pass"),
        ("host.tools_called", "pass"),
        ("close.graceful", "pass"),
        ("close.sigterm", "fail"),
        ("close.sigkill", "fail"),
        ("close.group", "fail"),
        ("close.sidecar", "fail"),
        ("exit.clean", "fail"),
    ] {
        assert_eq!(verdicts[id], verdict, "{id}: {}", run.stderr);
    }
    assert_eq!(run.code, 1);
    for left in ["fixture-term-ignoring", "fixture-launcher"] {
        assert!(
            run.stderr.contains(&format!("ended {left}")),
            "{left}: {}",
            run.stderr
        );
    }
    run.nothing_left();
}

#[test]
fn a_hung_host_fails_host_exit_and_is_ended() {
    let run = Run::host("openai-responses", "hang", &["--host-timeout", "6s"]);
    let verdicts = run.verdicts();
    assert_eq!(verdicts["host.exit"], "fail", "{}", run.stderr);
    let said = run.summary("host.exit");
    assert!(said.contains("had not exited after 6.0 s"), "{said}");
    assert!(said.contains("its child"), "{said}");
    assert_eq!(verdicts["host.tools_called"], "pass");
    assert_eq!(run.code, 1);
    run.nothing_left();
}

#[test]
fn a_host_that_never_asks_the_model_proves_little() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(CLI)
        .args(["host", "--json", "--model-api", "anthropic", "--dir"])
        .arg(dir.path())
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(3),
        "an error and no failure: no verdict"
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let row = &report["checks"][1];
    assert_eq!(row["id"], "host.tools_called");
    assert_eq!(row["verdict"], "error");
    assert!(
        row["summary"]
            .as_str()
            .unwrap()
            .contains("never asked the stand-in model anything"),
        "{row}"
    );
    assert_eq!(report["checks"][0]["verdict"], "pass");
}

#[test]
fn a_host_that_cannot_start_is_a_usage_error() {
    let output = Command::new(CLI)
        .args(["host", "--", "/nonexistent/host-binary"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot start the host `/nonexistent/host-binary`"),
        "{stderr}"
    );
}

/// Each config format puts the servers where its host reads them.
#[test]
fn every_format_writes_the_servers_where_the_host_reads_them() {
    for (format, file, probe) in [
        ("claude-json", "home/.claude.json", "\"mcpServers\""),
        (
            "codex-toml",
            "home/.codex/config.toml",
            "[mcp_servers.\"escaping\"]",
        ),
        (
            "gemini-settings",
            "home/.gemini/settings.json",
            "\"trust\": true",
        ),
        (
            "qwen-settings",
            "home/.qwen/settings.json",
            "\"mcpServers\"",
        ),
        ("opencode-json", "work/opencode.json", "\"type\": \"local\""),
        ("mcp-json", "mcp.json", "\"mcpServers\""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let output = Command::new(CLI)
            .args([
                "host",
                "--json",
                "--model-api",
                "openai-responses",
                "--format",
                format,
                "--dir",
            ])
            .arg(dir.path())
            .args(["--", "test", "-f", "{config}"])
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        // `test -f {config}` exits 0 only when {config} is the file written.
        assert_eq!(
            report["checks"][0]["verdict"], "pass",
            "{format}: {report:#}"
        );
        let text = std::fs::read_to_string(dir.path().join(file))
            .unwrap_or_else(|e| panic!("{format}: {file}: {e}"));
        assert!(text.contains(probe), "{format}: {text}");
        assert!(text.contains("well-behaved"), "{format}: {text}");
    }
}

/// A server the host started and listed but whose tools never reached the
/// model: `host.tools_called` says which, and `stdout.tolerant` (the banner
/// server) warns instead of passing on the ledger alone.
#[test]
fn a_server_the_model_never_saw_is_named() {
    let run = Run::host_with("anthropic", "careful", &[], &["--hide", "stdout-banner"]);
    let verdicts = run.verdicts();
    assert_eq!(verdicts["host.tools_called"], "error", "{}", run.stderr);
    let said = run.summary("host.tools_called");
    assert!(
        said.contains("never offered the tools of: stdout-banner"),
        "{said}"
    );
    assert_eq!(verdicts["stdout.tolerant"], "warn");
    assert!(
        run.summary("stdout.tolerant")
            .contains("never offered its tools to the model"),
        "{}",
        run.summary("stdout.tolerant")
    );
    assert_eq!(run.code, 3, "an error and no failure: no verdict");
    run.nothing_left();
}

/// SIGTERM to `mcp-conformance host` while its host hangs: it ends the host
/// (a group of its own, which no terminal signal reaches) and every server,
/// and exits 128 + 15.
#[test]
fn a_signal_to_the_run_ends_the_host_and_its_servers() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("host.pid");
    let mut child = Command::new(CLI)
        .args(["host", "--json", "--model-api", "anthropic", "--dir"])
        .arg(dir.path())
        .arg("--")
        .arg("python3")
        .arg(data("scripted_host.py"))
        .args([
            "--config",
            "{config}",
            "--api",
            "anthropic",
            "--close",
            "hang",
        ])
        .arg("--pid-file")
        .arg(&pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let cli = child.id();
    // Whatever happens, the CLI goes, and the run's servers with it.
    struct Guard(u32, PathBuf);
    impl Drop for Guard {
        fn drop(&mut self) {
            let _ =
                mcp_stdio_process::signal::signal_pid(self.0, mcp_stdio_process::Signal::SIGKILL);
            for marker in markers_in(&self.1) {
                drop(MarkerGuard::new(
                    Marker::from_value(marker),
                    Duration::from_secs(5),
                ));
            }
        }
    }
    let _guard = Guard(cli, dir.path().to_owned());
    // The host has called the tools (the well-behaved server's ledger says
    // so) and hangs: now the signal.
    let ledger = dir.path().join("ledgers/well-behaved.jsonl");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&ledger)
        .unwrap_or_default()
        .contains("tools/call")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no tool call within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let host: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        mcp_stdio_process::signal::signal_pid(cli, mcp_stdio_process::Signal::SIGTERM).unwrap(),
        "the CLI is alive"
    );
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(143));
    assert!(
        !mcp_stdio_process::table::is_alive(host as u32),
        "the hung host {host} outlived the run"
    );
    let markers = markers_in(dir.path());
    assert_eq!(markers.len(), 9);
    for marker in markers {
        let left = mcp_stdio_process::marker::marked(&marker);
        assert!(left.is_empty(), "{marker}: {left:?}");
    }
}
