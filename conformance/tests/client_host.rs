//! `mcp-conformance client --host DIR` / `--grade DIR`, end to end: this
//! project's client acting as the host (`mcp-conformance connect` over
//! DIR/mcp.json) passes; a broken host that only SIGKILLs the pids it
//! started fails exactly the checks that mistake should fail, and `--grade`
//! ends what it left. A test of its own: it makes the test process a child
//! subreaper, so the broken host's orphans come back to it to be reaped.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use mcp_stdio_process::{Signal, signal::signal_pid};
use serde_json::{Value, json};

const CLI: &str = env!("CARGO_BIN_EXE_mcp-conformance");

/// The markers `--host` gave the servers of `dir`.
fn markers(dir: &Path) -> Vec<String> {
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("host.json")).unwrap_or_default())
            .unwrap_or(Value::Null);
    state["servers"]
        .as_array()
        .map(|servers| {
            servers
                .iter()
                .filter_map(|s| s["marker"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Live (non-zombie) processes carrying one of `dir`'s markers (the process crate's marker scan).
fn marked(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = markers(dir)
        .iter()
        .flat_map(|m| mcp_stdio_process::marker::marked(m))
        .map(|m| m.pid)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Every pid the ledgers of `dir` name.
fn ledger_pids(dir: &Path) -> Vec<u32> {
    let mut pids: Vec<u32> = std::fs::read_dir(dir.join("ledgers"))
        .map(|entries| {
            entries
                .flatten()
                .flat_map(|entry| {
                    std::fs::read_to_string(entry.path())
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                        .filter_map(|r| r["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
                        .collect::<Vec<_>>()
                })
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// Ends whatever `dir`'s servers left, even when the test fails, and reaps
/// what came back to this (subreaper) process.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for pid in marked(&self.0) {
            let _ = signal_pid(pid, Signal::SIGKILL);
        }
        reap(&self.0);
    }
}

/// Reaps each ledger pid that is (or becomes within a second) our zombie.
fn reap(dir: &Path) {
    let deadline = Instant::now() + Duration::from_secs(1);
    mcp_stdio_process::marker::reap(ledger_pids(dir), deadline);
}

fn host(dir: &Path) -> String {
    let output = Command::new(CLI)
        .args(["client", "--host"])
        .arg(dir)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// `--grade DIR --json`: exit code, report, stderr.
fn grade(dir: &Path) -> (i32, Value, String) {
    let output = Command::new(CLI)
        .args(["client", "--json", "--grade"])
        .arg(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not a JSON report ({error}); stderr: {stderr}"));
    let code = output.status.code().unwrap_or(-1);
    (code, of_the_schema(report), stderr)
}

/// `report`, checked against the published JSON Schema: every report a
/// test here reads is one of `report/schema/report-v2.schema.json`.
fn of_the_schema(report: Value) -> Value {
    let errors = mcp_conformance_report::schema::validate(&report).err();
    assert_eq!(errors, None, "not of the schema: {report:#}");
    report
}

fn verdicts(report: &Value) -> BTreeMap<String, String> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn summary<'a>(report: &'a Value, id: &str) -> &'a str {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .and_then(|c| c["summary"].as_str())
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

fn expected(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(id, verdict)| (id.to_string(), verdict.to_string()))
        .collect()
}

#[test]
fn host_writes_a_desktop_config_of_fixtures_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(dir.path().to_owned());
    let said = host(dir.path());
    for step in ["Start your host", "call `echo`", "Quit the host", "--grade"] {
        assert!(said.contains(step), "{step}: {said}");
    }
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mcp.json")).unwrap())
            .unwrap();
    let servers = config["mcpServers"].as_object().unwrap();
    let names: Vec<&str> = servers.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "crash",
            "eof-ignoring",
            "launcher",
            "sidecar",
            "stderr-flood",
            "stdout-banner",
            "term-ignoring",
            "well-behaved"
        ]
    );
    for (name, server) in servers {
        // The installed executable's own fixtures: no checkout needed.
        assert_eq!(
            Path::new(server["command"].as_str().unwrap()),
            Path::new(CLI).canonicalize().unwrap(),
            "{name}"
        );
        assert_eq!(server["args"][0], "fixture", "{name}");
        let ledger = server["env"]["MCP_FIXTURE_LEDGER"].as_str().unwrap();
        assert!(
            Path::new(ledger).starts_with(dir.path().canonicalize().unwrap()),
            "{ledger}"
        );
    }
    // Nothing was started yet: every server-specific check is a skip.
    let (code, report, _) = grade(dir.path());
    assert_eq!(code, 0, "{report:#}");
    assert!(
        summary(&report, "close.graceful").contains("never started `well-behaved`"),
        "{report:#}"
    );
}

#[test]
fn grade_needs_host_first() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(CLI)
        .args(["client", "--grade"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("run `mcp-conformance client --host"),
        "{stderr}"
    );
}

/// This project's client as the host: `mcp-conformance connect` over
/// DIR/mcp.json, with short graces (a host setting) so the test is quick.
#[test]
fn this_projects_client_as_the_host_passes() {
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(dir.path().to_owned());
    host(dir.path());
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("mcp.json")).unwrap())
            .unwrap();
    for server in config["mcpServers"].as_object_mut().unwrap().values_mut() {
        server["eofGrace"] = json!("300ms");
        server["termGrace"] = json!("300ms");
    }
    let quick = dir.path().join("quick.json");
    std::fs::write(&quick, config.to_string()).unwrap();
    let connect = |args: &[&str]| {
        let output = Command::new(CLI)
            .arg("connect")
            .arg("--config")
            .arg(&quick)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        output.code()
    };
    assert_eq!(connect(&["list-tools"]), Some(0));
    connect(&["--server", "crash", "call", "echo", r#"{"text": "x"}"#]);
    assert_eq!(
        connect(&[
            "--server",
            "stderr-flood",
            "call",
            "echo",
            r#"{"text": "x"}"#
        ]),
        Some(0)
    );
    let (code, report, stderr) = grade(dir.path());
    assert_eq!(
        verdicts(&report),
        expected(&[
            ("close.eof_first", "pass"),
            ("close.graceful", "pass"),
            ("close.sigterm", "pass"),
            ("close.sigkill", "pass"),
            ("close.group", "pass"),
            ("close.sidecar", "pass"),
            ("death.fast", "info"),
            ("stderr.drained", "pass"),
            ("stdout.tolerant", "pass"),
            ("exit.clean", "pass"),
        ]),
        "{report:#}"
    );
    assert_eq!(code, 0);
    assert_eq!(report["subject"]["era"], "modern");
    let sigterm = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "close.sigterm")
        .unwrap();
    // After the host's 300 ms EOF grace (the two clocks are the fixture's
    // and the client's: a few ms either way).
    let after = sigterm["figures"]["eof_to_sigterm"]["value"]
        .as_u64()
        .unwrap();
    assert!((250..2000).contains(&after), "{sigterm}");
    assert!(
        summary(&report, "close.sigterm").contains("ms after EOF, exited on the signal"),
        "{sigterm}"
    );
    assert!(summary(&report, "death.fast").contains("died on its tool call in 1 of 2"));
    assert!(!stderr.contains("ended"), "nothing to end: {stderr}");
}

/// One server started by the broken host, with its answers on a channel.
struct Started {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Started {
    fn send(&mut self, message: Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the answer to `id`, skipping anything else.
    fn answer(&self, id: u64) -> Option<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            if let Ok(value) = serde_json::from_str::<Value>(&line)
                && value["id"] == json!(id)
            {
                return Some(value);
            }
        }
    }
}

/// A broken host: starts every server of DIR/mcp.json (stderr to
/// /dev/null), does the legacy handshake, lists tools, calls `echo` on
/// `crash`, then "quits" by SIGKILL to each pid it started, no EOF, no
/// group, and reaps them.
fn kill_only_the_pids_host(config: &Path) {
    let config: Value = serde_json::from_str(&std::fs::read_to_string(config).unwrap()).unwrap();
    let mut started = Vec::new();
    for (name, server) in config["mcpServers"].as_object().unwrap() {
        let mut command = Command::new(server["command"].as_str().unwrap());
        for arg in server["args"].as_array().unwrap() {
            command.arg(arg.as_str().unwrap());
        }
        for (key, value) in server["env"].as_object().unwrap() {
            command.env(key, value.as_str().unwrap());
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        started.push((name.clone(), Started { child, lines }));
    }
    for (name, server) in &mut started {
        server.send(json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "broken-host", "version": "1"}
            }
        }));
        assert!(server.answer(1).is_some(), "{name}: no initialize answer");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        assert!(server.answer(2).is_some(), "{name}: no tools/list answer");
        if name == "crash" {
            server.send(json!({
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}}
            }));
            assert!(server.answer(3).is_none(), "crash answered its call");
        }
    }
    for (_, server) in &mut started {
        let _ = signal_pid(server.child.id(), Signal::SIGKILL);
        let _ = server.child.wait();
    }
}

#[test]
fn a_host_that_kills_only_the_pids_fails_the_eof_group_and_exit_checks() {
    // The broken host's orphans (the launcher's child, the sidecar) come
    // back to this process, which reaps them once `--grade` ends them.
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _cleanup = Cleanup(dir.path().to_owned());
    host(dir.path());
    kill_only_the_pids_host(&dir.path().join("mcp.json"));
    let left_by_host = marked(dir.path());
    assert_eq!(
        left_by_host.len(),
        2,
        "the launcher's child and the sidecar"
    );

    let (code, report, stderr) = grade(dir.path());
    assert_eq!(
        verdicts(&report),
        expected(&[
            ("close.eof_first", "fail"),
            ("close.graceful", "fail"),
            ("close.sigterm", "fail"),
            ("close.sigkill", "pass"),
            ("close.group", "fail"),
            ("close.sidecar", "fail"),
            ("death.fast", "info"),
            ("stderr.drained", "pass"),
            ("stdout.tolerant", "pass"),
            ("exit.clean", "fail"),
        ]),
        "{report:#}"
    );
    assert_eq!(code, 1);
    assert_eq!(report["subject"]["era"], "legacy");
    let graceful = summary(&report, "close.graceful");
    assert!(
        graceful.contains("no stdin EOF") && graceful.contains("killed (SIGKILL"),
        "{graceful}"
    );
    assert!(
        summary(&report, "close.group")
            .contains("the launcher's child survived the host: fixture-eof-ignoring"),
        "{report:#}"
    );
    assert!(
        summary(&report, "close.sidecar").contains("left in the server's group after the host"),
        "{report:#}"
    );
    for check in report["checks"].as_array().unwrap() {
        if check["verdict"] == "fail" {
            assert!(check["fix"].is_string(), "{check}");
        }
    }
    // Then `--grade` ended what the host left, by pid, after checking it.
    for pid in &left_by_host {
        assert!(stderr.contains(&format!("(pid {pid})")), "{pid}: {stderr}");
    }
    reap(dir.path());
    assert_eq!(marked(dir.path()), Vec::<u32>::new());
    // A second grade finds nothing left to end, and still grades what the
    // host did: the survivors it ended count as survivors.
    let (code, again, stderr) = grade(dir.path());
    assert!(!stderr.contains("ended"), "{stderr}");
    assert_eq!(verdicts(&again), verdicts(&report), "{again:#}");
    assert_eq!(code, 1);
    assert!(
        summary(&again, "close.group").contains("ended by an earlier --grade"),
        "{again:#}"
    );
}
