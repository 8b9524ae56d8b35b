//! `mcp-conformance connect` as a user runs it: a real config, real fixture
//! servers, the printed lifecycle, and the exit codes.

use std::process::{Command, Output};

use mcp_conformance::{exit, observer};

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
        let left = observer::kill_and_reap(
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
