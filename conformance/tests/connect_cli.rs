//! `mcp-conformance connect` as a user runs it: a real config, real fixture
//! servers, the printed lifecycle, and the exit codes.

use std::{
    io::Read,
    os::unix::process::CommandExt,
    process::{Child, Command, Output, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use mcp_conformance_report::exit;
use mcp_stdio_process::{
    Signal, marker,
    signal::{signal_group, signal_pid},
};
use serde_json::Value;

/// Generous bound for anything that should happen promptly on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(20);

struct Setup {
    dir: tempfile::TempDir,
    marker: String,
}

impl Setup {
    fn new(name: &str) -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            marker: format!("connect-cli-{name}-{}", std::process::id()),
        }
    }

    /// Writes a config with a well-behaved and an eof-ignoring server (and
    /// `extra` YAML appended under MCP_SERVERS).
    fn config(&self, extra: &str) -> std::path::PathBuf {
        let fixtures = mcp_fixtures::locate::fixtures_dir().unwrap();
        let text = format!(
            "MCP_SERVERS:\n  good:\n    COMMAND: {f}/fixture-well-behaved\n    ENV: {{MCP_CONFORMANCE_MARKER: {m}}}\n  deaf:\n    COMMAND: {f}/fixture-eof-ignoring\n    ENV: {{MCP_CONFORMANCE_MARKER: {m}}}\n    EOF_GRACE: 200ms\n{extra}",
            f = fixtures.display(),
            m = self.marker
        );
        let path = self.dir.path().join("mcp.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes a config of `servers`, each `(name, fixture, extra YAML lines)`;
    /// every server carries the marker and writes to this setup's ledger.
    fn config_of(&self, servers: &[(&str, &str, &str)]) -> std::path::PathBuf {
        let fixtures = mcp_fixtures::locate::fixtures_dir().unwrap();
        let mut text = String::from("MCP_SERVERS:\n");
        for (name, fixture, extra) in servers {
            text.push_str(&format!(
                "  {name}:\n    COMMAND: {f}/{fixture}\n    ENV: {{MCP_CONFORMANCE_MARKER: {m}, MCP_FIXTURE_LEDGER: {l}}}\n",
                f = fixtures.display(),
                m = self.marker,
                l = self.ledger().display(),
            ));
            for line in extra.lines() {
                text.push_str(&format!("    {line}\n"));
            }
        }
        let path = self.dir.path().join("mcp.yaml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn ledger(&self) -> std::path::PathBuf {
        self.dir.path().join("ledger.jsonl")
    }

    /// Waits for a ledger record matching `matches`.
    fn wait_ledger(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let records: Vec<Value> = std::fs::read_to_string(self.ledger())
                .unwrap_or_default()
                .lines()
                .map(|line| serde_json::from_str(line).unwrap())
                .collect();
            if let Some(found) = records.iter().find(|r| matches(r)) {
                return found.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no ledger record for {what}: {records:#?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Starts the CLI as a shell starts a foreground job: in a process group
    /// of its own, which a Ctrl-C at the terminal signals as a whole.
    fn start(&self, args: &[&str]) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let stderr_text = Arc::new(Mutex::new(String::new()));
        let mut stderr = child.stderr.take().unwrap();
        let collected = stderr_text.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                collected
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Running {
            child,
            stdout: Some(stdout),
            stderr: stderr_text,
        }
    }

    /// Live processes carrying this setup's marker.
    fn survivors(&self) -> Vec<marker::Marked> {
        marker::marked(&self.marker)
    }

    fn run(&self, args: &[&str]) -> Output {
        let output = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
            .args(args)
            .output()
            .unwrap();
        eprintln!(
            "stdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let left = marker::kill_and_reap(
            &self.marker,
            &Default::default(),
            std::time::Duration::from_secs(5),
        );
        assert!(
            left.is_empty() || std::thread::panicking(),
            "processes left behind: {left:?}"
        );
    }
}

/// The CLI running in its own process group.
struct Running {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Arc<Mutex<String>>,
}

/// How the CLI ended.
struct Ended {
    code: Option<i32>,
    stdout: String,
}

impl Running {
    /// A Ctrl-C: `signal` to the CLI's whole process group.
    fn signal_group(&self, signal: Signal) {
        assert!(
            signal_group(self.child.id(), signal).unwrap(),
            "the CLI's group exists"
        );
    }

    /// `kill -SIG <pid>`: `signal` to the CLI alone.
    fn signal(&self, signal: Signal) {
        assert!(
            signal_pid(self.child.id(), signal).unwrap(),
            "the CLI is alive"
        );
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the CLI has said `needle` on stderr.
    fn wait_stderr(&self, needle: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.stderr().contains(needle) {
            assert!(
                Instant::now() < deadline,
                "the CLI never said {needle:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits (up to `within`) for the CLI to exit.
    fn finish(&mut self, within: Duration) -> Ended {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < within,
                "the CLI did not exit within {within:?}; stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(5));
        };
        let stdout = self.stdout.take().unwrap().join().unwrap();
        eprintln!("stdout:\n{stdout}\nstderr:\n{}", self.stderr());
        Ended {
            code: status.code(),
            stdout,
        }
    }
}

impl Drop for Running {
    /// A test that failed half-way still leaves no CLI behind.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = signal_group(self.child.id(), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn list_tools_prints_qualified_names_and_each_close() {
    let setup = Setup::new("list");
    let config = setup.config("");
    let output = setup.run(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "list-tools",
    ]);
    assert_eq!(output.status.code(), Some(exit::SUCCESS as i32));
    let text = stdout(&output);
    assert!(text.contains("mcp_good_echo  [consent, serial]"), "{text}");
    assert!(text.contains("mcp_deaf_pid"), "{text}");
    assert!(text.contains("good: closed by eof in "), "{text}");
    assert!(text.contains("deaf: closed by sigterm in "), "{text}");
    assert!(text.contains("spawned pid "), "{text}");
    assert!(text.contains("close: sigterm"), "{text}");
}

#[test]
fn call_with_a_server_and_a_plain_tool_name() {
    let setup = Setup::new("call");
    let config = setup.config("");
    let output = setup.run(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "--server",
        "good",
        "call",
        "add",
        r#"{"a": 40, "b": 2}"#,
    ]);
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout(&output).starts_with("42\n"), "{}", stdout(&output));
    assert!(
        !stdout(&output).contains("deaf"),
        "only the chosen server starts"
    );
}

#[test]
fn a_tool_error_and_a_failed_server_exit_one() {
    let setup = Setup::new("fail");
    let config = setup.config("  missing:\n    COMMAND: no-such-mcp-server\n");
    let output = setup.run(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "call",
        "mcp_good_fail",
        r#"{"message": "nope"}"#,
    ]);
    assert_eq!(output.status.code(), Some(exit::FAILURE as i32));
    let text = stdout(&output);
    assert!(
        text.contains("missing: did not start: cannot start stdio server \"missing\""),
        "{text}"
    );
    assert!(
        text.contains("nope\n(the tool reported an error)"),
        "{text}"
    );
}

#[test]
fn usage_errors_exit_two_with_a_message() {
    let setup = Setup::new("usage");
    let config = setup.config("");
    let config = config.to_str().unwrap();
    let unknown = setup.run(&["connect", "--config", config, "--server", "nope", "close"]);
    assert_eq!(unknown.status.code(), Some(exit::USAGE as i32));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no server named `nope`"));

    let bad_json = setup.run(&[
        "connect",
        "--config",
        config,
        "call",
        "mcp_good_echo",
        "[1]",
    ]);
    assert_eq!(bad_json.status.code(), Some(exit::USAGE as i32));

    let broken = setup.dir.path().join("broken.yaml");
    std::fs::write(&broken, "MCP_SERVERS:\n  Bad_Name:\n    COMMAND: x\n").unwrap();
    let output = setup.run(&["connect", "--config", broken.to_str().unwrap(), "close"]);
    assert_eq!(output.status.code(), Some(exit::USAGE as i32));
    assert!(String::from_utf8_lossy(&output.stderr).contains("server \"Bad_Name\""));

    let no_args = setup.run(&["connect"]);
    assert_eq!(no_args.status.code(), Some(exit::USAGE as i32));
}

/// The ledger record of a `tools/call` of `tool` that has arrived.
fn called(tool: &'static str) -> impl Fn(&Value) -> bool {
    move |r| r["event"] == "request" && r["tool"] == tool
}

#[test]
fn ctrl_c_during_a_call_closes_every_server_and_exits_130() {
    let setup = Setup::new("ctrl-c");
    let config = setup.config_of(&[
        ("good", "fixture-well-behaved", ""),
        ("deaf", "fixture-eof-ignoring", "EOF_GRACE: 200ms"),
    ]);
    let mut cli = setup.start(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "call",
        "mcp_deaf_sleep_ms",
        r#"{"ms": 600000}"#,
    ]);
    setup.wait_ledger("the call", called("sleep_ms"));
    cli.signal_group(Signal::SIGINT);
    let ended = cli.finish(DEADLINE);
    assert_eq!(ended.code, Some(130));
    assert_eq!(setup.survivors(), [], "every server was closed");
    assert!(
        ended.stdout.contains("good: closed by eof"),
        "{}",
        ended.stdout
    );
    assert!(
        ended.stdout.contains("deaf: closed by sigterm"),
        "the normal ladder: {}",
        ended.stdout
    );
}

#[test]
fn sigterm_while_servers_start_closes_them_and_exits_143() {
    let setup = Setup::new("sigterm-start");
    let config = setup.config_of(&[
        ("deaf", "fixture-eof-ignoring", "EOF_GRACE: 200ms"),
        (
            "late",
            "fixture-eof-ignoring",
            "ARGS: [--handshake-delay-ms, '600000']\nTIMEOUT: 600s",
        ),
    ]);
    // -v: the client logs each completed connect ("start-up complete"), in
    // the same poll that hands the connected client to the session.
    let mut cli = setup.start(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "-v",
        "close",
    ]);
    // One server is connected, the other is still in its handshake.
    cli.wait_stderr("start-up complete");
    // Both got their first handshake request (`server/discover`); only one
    // answered it.
    let probes = |records: &str| records.matches("\"server/discover\"").count();
    setup.wait_ledger("late's server/discover", |_| {
        probes(&std::fs::read_to_string(setup.ledger()).unwrap_or_default()) == 2
    });
    assert_eq!(
        cli.stderr().matches("start-up complete").count(),
        1,
        "late is still starting: {}",
        cli.stderr()
    );
    cli.signal(Signal::SIGTERM);
    let ended = cli.finish(DEADLINE);
    assert_eq!(ended.code, Some(143));
    assert_eq!(setup.survivors(), []);
    assert!(
        ended.stdout.contains("deaf: closed by sigterm"),
        "the connected server gets the normal ladder: {}",
        ended.stdout
    );
    assert!(
        ended.stdout.contains("late: interrupted while starting"),
        "{}",
        ended.stdout
    );
}

#[test]
fn sighup_during_close_finishes_the_close_and_exits_129() {
    let setup = Setup::new("sighup-close");
    let config = setup.config_of(&[("deaf", "fixture-eof-ignoring", "EOF_GRACE: 4s")]);
    let mut cli = setup.start(&["connect", "--config", config.to_str().unwrap(), "close"]);
    setup.wait_ledger("the close's EOF", |r| r["event"] == "stdin_eof");
    cli.signal(Signal::SIGHUP);
    let ended = cli.finish(DEADLINE);
    assert_eq!(ended.code, Some(129));
    assert_eq!(setup.survivors(), []);
    assert!(
        ended.stdout.contains("deaf: closed by sigterm"),
        "the close went on with its ladder: {}",
        ended.stdout
    );
}

#[test]
fn a_second_ctrl_c_kills_the_groups_at_once() {
    let setup = Setup::new("double-ctrl-c");
    let config = setup.config_of(&[(
        "stubborn",
        "fixture-term-ignoring",
        "EOF_GRACE: 30s\nTERM_GRACE: 30s",
    )]);
    let mut cli = setup.start(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "call",
        "mcp_stubborn_sleep_ms",
        r#"{"ms": 600000}"#,
    ]);
    setup.wait_ledger("the call", called("sleep_ms"));
    let first = Instant::now();
    cli.signal_group(Signal::SIGINT);
    // The CLI has begun the close ladder: the server saw its stdin close.
    setup.wait_ledger("the close's EOF", |r| r["event"] == "stdin_eof");
    cli.signal_group(Signal::SIGINT);
    let ended = cli.finish(DEADLINE);
    assert_eq!(ended.code, Some(130));
    assert!(
        first.elapsed() < Duration::from_secs(15),
        "{:?}: the second Ctrl-C did not skip the 60 s of graces",
        first.elapsed()
    );
    assert_eq!(setup.survivors(), []);
    assert!(
        ended
            .stdout
            .contains("(signal 9 (SIGKILL)); its group was killed at once on the second signal"),
        "{}",
        ended.stdout
    );
}

/// The CLI's log (stderr, default level and -vv) and its report never show the user-info,
/// query or fragment of a URL, even in rmcp's ERROR line quoting reqwest's normalized URL.
#[test]
fn url_secrets_appear_nowhere_in_the_output() {
    let setup = Setup::new("url-secrets");
    let path = setup.dir.path().join("remote.yaml");
    std::fs::write(
        &path,
        "MCP_SERVERS:\n  gone:\n    URL: \"http://alice:pw-secret@LOCALHOST:9/a/../mcp?token=secret-q#frag-secret\"\n    AUTH: none\n",
    )
    .unwrap();
    for verbose in [None, Some("-vv")] {
        let mut args = vec!["connect", "--config", path.to_str().unwrap()];
        args.extend(verbose);
        args.push("close");
        let output = setup.run(&args);
        let everything = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(everything.contains("localhost:9/mcp"), "{everything}");
        for secret in ["pw-secret", "secret-q", "frag-secret"] {
            assert!(!everything.contains(secret), "{secret}: {everything}");
        }
    }
}

/// Log lines on stderr carry ANSI colour only when stderr is a terminal, or when
/// CLICOLOR_FORCE (non-zero) asks for it; NO_COLOR (non-empty) turns colour off whatever else
/// says. Here stderr is a pipe, as when it is redirected to a file or piped to another tool.
#[test]
fn log_lines_on_a_pipe_have_no_colour_unless_forced() {
    let setup = Setup::new("colour");
    let path = setup.dir.path().join("mcp.yaml");
    // A stray TOKEN on a stdio server is logged as a warning when the config loads; the server
    // itself cannot start, so nothing is left running.
    std::fs::write(
        &path,
        "MCP_SERVERS:\n  local:\n    COMMAND: /nonexistent/mcp-server\n    TOKEN: t\n",
    )
    .unwrap();
    let stderr_with = |env: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"));
        command
            .args(["connect", "--config", path.to_str().unwrap(), "close"])
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env_remove("CLICOLOR")
            .stdin(Stdio::null());
        for (name, value) in env {
            command.env(name, value);
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        eprintln!("{env:?}:\n{stderr}");
        assert!(stderr.contains("WARN"), "a log line was written: {stderr}");
        stderr
    };
    for env in [
        &[][..],
        &[("CLICOLOR_FORCE", "0")],
        &[("CLICOLOR_FORCE", "")],
        &[("NO_COLOR", "1")],
        &[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")],
    ] {
        let stderr = stderr_with(env);
        assert!(!stderr.contains('\x1b'), "{env:?}: ESC in {stderr:?}");
    }
    for env in [
        &[("CLICOLOR_FORCE", "1")][..],
        &[("NO_COLOR", ""), ("CLICOLOR_FORCE", "yes")],
    ] {
        let stderr = stderr_with(env);
        assert!(stderr.contains('\x1b'), "{env:?}: no colour in {stderr:?}");
    }
}

/// `--config` may name a FIFO or `/dev/stdin` (`--config <(make-config)`), whose read blocks
/// until a writer comes. SIGTERM (and SIGINT, SIGHUP) must end the CLI during that read too,
/// with the conventional code.
#[test]
fn sigterm_while_the_config_read_blocks_exits_143() {
    let setup = Setup::new("fifo");
    let fifo = setup.dir.path().join("mcp.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let mut running = setup.start(&["connect", "--config", fifo.to_str().unwrap(), "list-tools"]);
    let pid = running.child.id();
    // Blocked: one of the CLI's threads sleeps in the FIFO's open (`wait_for_partner`: no
    // writer yet) or read (`pipe_read`, `pipe_wait...`); nobody ever writes to it.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let waits: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter_map(|task| std::fs::read_to_string(task.path().join("wchan")).ok())
                    .collect()
            })
            .unwrap_or_default();
        if waits
            .iter()
            .any(|wchan| wchan.contains("wait_for_partner") || wchan.starts_with("pipe_"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the CLI never blocked on the FIFO: {waits:?}; stderr:\n{}",
            running.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    running.signal(Signal::SIGTERM);
    let ended = running.finish(Duration::from_secs(5));
    assert_eq!(ended.code, Some(143), "stderr:\n{}", running.stderr());
}

/// A FIFO is a legitimate config (`--config <(make-config)`): read through the interruptible
/// path, it loads and the servers in it run and close as from a file.
#[test]
fn a_config_from_a_fifo_loads() {
    let setup = Setup::new("fifo-loads");
    let text =
        std::fs::read_to_string(setup.config_of(&[("good", "fixture-well-behaved", "")])).unwrap();
    let fifo = setup.dir.path().join("mcp.fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // Opening a FIFO for writing waits for its reader: the CLI.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, text))
    };
    let output = setup.run(&["connect", "--config", fifo.to_str().unwrap(), "close"]);
    if !writer.is_finished() {
        // The CLI never opened the FIFO: open it here so that the writer does not wait for
        // ever, and fail below.
        use std::os::unix::fs::OpenOptionsExt;
        let _reader = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&fifo);
    }
    let written = writer.join().unwrap();
    assert_eq!(output.status.code(), Some(0));
    written.unwrap();
    assert!(
        stdout(&output).contains("good: closed by eof"),
        "{}",
        stdout(&output)
    );
}
