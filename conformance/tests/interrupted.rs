//! Nothing outlives the harness: `mcp-conformance scenarios` and `client`
//! interrupted (SIGINT, SIGTERM) or killed (SIGKILL) in the middle of a run
//! leave no process they started alive a few seconds later, and nothing in
//! the temp directory (`server` mode's own tests are in `server_check.rs`).
//!
//! What the harness started is found without trusting the harness: every
//! process of a run carries the harness's anchor (`MCP_FIXTURE_ANCHOR` or
//! `--anchor=`), its pid and start time, which the test reads itself.

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use mcp_stdio_process::{Anchor, Signal, table};

const DEADLINE: Duration = Duration::from_secs(20);

/// A harness run in its own temp directory, ended by the test.
struct Harness {
    child: Child,
    anchor: Anchor,
    tmp: tempfile::TempDir,
}

impl Harness {
    fn start(args: &[&str]) -> Harness {
        let tmp = tempfile::tempdir().unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-conformance"))
            .args(args)
            .env("TMPDIR", tmp.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start_ticks = table::stat(child.id()).unwrap().start_ticks;
        let anchor = Anchor {
            pid: child.id(),
            start_ticks,
        };
        Harness { child, anchor, tmp }
    }

    /// Waits until the run has started a server (a fixture: not only a
    /// driver): then it is mid-run.
    fn wait_mid_run(&mut self) {
        let deadline = Instant::now() + DEADLINE;
        let fixture = |pid: &u32| {
            table::cmdline(*pid).is_some_and(|argv| argv.iter().any(|a| a.contains("fixture")))
        };
        while !self.anchor.carriers().iter().any(fixture) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the harness ended before it started a server"
            );
            assert!(
                Instant::now() < deadline,
                "no server started in {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The ledgers of the run's scenarios, in the run's temp directory.
    fn ledger_has(&self, event: &str) -> bool {
        let needle = format!("\"event\":\"{event}\"");
        entries(self.tmp.path()).iter().any(|dir| {
            std::fs::read_to_string(self.tmp.path().join(dir).join("ledger.jsonl"))
                .is_ok_and(|ledger| ledger.contains(&needle))
        })
    }

    fn wait_ledger(&mut self, event: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.ledger_has(event) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the harness ended before its server recorded {event}"
            );
            assert!(Instant::now() < deadline, "no {event} in {DEADLINE:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn signal(&self, signal: Signal) {
        assert!(
            mcp_stdio_process::signal::signal_pid(self.child.id(), signal).unwrap(),
            "the harness is alive"
        );
    }

    /// The harness's exit code, waited on with a deadline.
    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the harness did not exit");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Asserts that nothing the run started is alive, waiting a bounded
    /// time for processes that end themselves.
    fn assert_nothing_left(&self, why: &str) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = self.anchor.carriers();
            if left.is_empty() {
                return;
            }
            if Instant::now() > deadline {
                let names: Vec<String> = left
                    .iter()
                    .map(|pid| {
                        format!(
                            "{pid} {}",
                            table::cmdline(*pid).unwrap_or_default().join(" ")
                        )
                    })
                    .collect();
                panic!("{why}: still alive {DEADLINE:?} later: {names:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (bounded) until the run's temp directory is empty: after a
    /// SIGKILL, the keeper removes what the harness made.
    fn assert_temp_emptied(&self, why: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.temp_entries().is_empty() {
            assert!(
                Instant::now() < deadline,
                "{why}: left in the temp directory: {:?}",
                self.temp_entries()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn temp_entries(&self) -> Vec<String> {
        entries(self.tmp.path())
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.anchor.kill_carriers(Duration::from_secs(5));
    }
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn interrupted_scenarios_leave_nothing(signal: Signal) {
    let mut harness = Harness::start(&["scenarios", "lifecycle/sigkill-escalation"]);
    harness.wait_mid_run();
    harness.signal(signal);
    assert_eq!(harness.wait_exit(), Some(128 + signal as i32));
    harness.assert_nothing_left(&format!("after {signal} of `scenarios`"));
    assert_eq!(
        harness.temp_entries(),
        Vec::<String>::new(),
        "left in the temp directory after {signal}"
    );
}

#[test]
fn sigint_of_scenarios_ends_every_server_and_removes_its_directories() {
    interrupted_scenarios_leave_nothing(Signal::SIGINT);
}

#[test]
fn sigterm_of_scenarios_ends_every_server_and_removes_its_directories() {
    interrupted_scenarios_leave_nothing(Signal::SIGTERM);
}

/// The server ignores stdin EOF and the harness is frozen (SIGSTOP) right
/// after the handshake, before its close could send a signal, then killed:
/// the server gets its EOF and ignores it, as it would without the anchor.
#[test]
fn sigkill_of_scenarios_leaves_no_server_running() {
    let mut harness = Harness::start(&["scenarios", "lifecycle/connect-options"]);
    harness.wait_ledger("initialized");
    harness.signal(Signal::SIGSTOP);
    assert!(
        !harness.ledger_has("signal"),
        "the close had signalled the server before the harness was frozen"
    );
    harness.signal(Signal::SIGKILL);
    assert_eq!(harness.wait_exit(), None, "killed by the signal");
    harness.assert_nothing_left("after SIGKILL of `scenarios`");
    harness.assert_temp_emptied("after SIGKILL of `scenarios`");
}

/// `client` mode, SIGKILLed while its driver waits for ever on a server
/// that never answers: the driver (which never reads its stdin again) and
/// the server are ended, and the run's directories removed, by the keeper.
#[test]
fn sigkill_of_client_leaves_no_driver_server_or_directory() {
    let mut harness = Harness::start(&[
        "client",
        "handshake",
        "--",
        env!("CARGO_BIN_EXE_mcp-conformance"),
        "driver",
        "naive",
        "--mode",
        "no-handshake-timeout",
    ]);
    harness.wait_mid_run();
    harness.signal(Signal::SIGKILL);
    assert_eq!(harness.wait_exit(), None, "killed by the signal");
    harness.assert_nothing_left("after SIGKILL of `client`");
    harness.assert_temp_emptied("after SIGKILL of `client`");
}

#[test]
fn a_finished_scenarios_run_leaves_nothing_in_the_temp_directory() {
    let mut harness = Harness::start(&["scenarios", "lifecycle/eof-close"]);
    assert_eq!(harness.wait_exit(), Some(0));
    harness.assert_nothing_left("after a whole run");
    assert_eq!(harness.temp_entries(), Vec::<String>::new());
}

/// `connect`, SIGKILLed while it waits on a server that never answers and
/// ignores everything (not a fixture: a plain `sleep`, which no anchor of
/// its own ends): the keeper ends it, since it carries the harness's anchor.
#[test]
fn sigkill_of_connect_leaves_no_server_running() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.yaml");
    std::fs::write(
        &config,
        "MCP_SERVERS:\n  stuck:\n    COMMAND: sh\n    ARGS: [\"-c\", \"exec sleep 1000\"]\n    TIMEOUT: 60s\n",
    )
    .unwrap();
    let mut harness = Harness::start(&[
        "connect",
        "--config",
        config.to_str().unwrap(),
        "list-tools",
    ]);
    let deadline = Instant::now() + DEADLINE;
    let sleeper = |pid: &u32| {
        table::cmdline(*pid).is_some_and(|argv| argv.first().is_some_and(|a| a.ends_with("sleep")))
    };
    while !harness.anchor.carriers().iter().any(sleeper) {
        assert!(
            harness.child.try_wait().unwrap().is_none(),
            "connect ended early"
        );
        assert!(Instant::now() < deadline, "the server never started");
        std::thread::sleep(Duration::from_millis(5));
    }
    harness.signal(Signal::SIGKILL);
    assert_eq!(harness.wait_exit(), None, "killed by the signal");
    harness.assert_nothing_left("after SIGKILL of `connect`");
}
