//! Test support: fixture server configs with a unique marker and ledger, and
//! the process-table checks that prove nothing was left behind.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use mcp_fixtures::locate;
use mcp_stdio_client::config::{ServerConfig, StdioConfig};
use mcp_stdio_process::{MARKER_ENV, Marker, table};
use serde_json::Value;

/// Generous bound for anything that should happen "promptly" on a loaded machine.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// One test's processes: a unique marker and a ledger in a temp dir.
pub struct Case {
    pub marker: String,
    pub dir: tempfile::TempDir,
}

impl Case {
    pub fn new() -> Self {
        Self {
            marker: Marker::new("client-test").as_str().to_owned(),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn ledger_path(&self) -> PathBuf {
        self.dir.path().join("ledger.jsonl")
    }

    /// A stdio config that runs `fixture` with the marker first, then `args`
    /// (in which `{marker}` and `{fixtures}` are substituted), short graces.
    pub fn stdio(&self, fixture: &str, args: &[&str]) -> StdioConfig {
        let dir = locate::fixtures_dir().expect("fixture binaries");
        let mut stdio = StdioConfig::new(dir.join(fixture).to_string_lossy());
        stdio.args = std::iter::once(format!("--marker={}", self.marker))
            .chain(args.iter().map(|arg| {
                arg.replace("{marker}", &self.marker)
                    .replace("{fixtures}", &dir.to_string_lossy())
            }))
            .collect();
        stdio.env.insert(
            "MCP_FIXTURE_LEDGER".into(),
            self.ledger_path().to_string_lossy().into_owned(),
        );
        stdio.env.insert(MARKER_ENV.into(), self.marker.clone());
        // A test process killed by nextest's timeout takes its fixtures with it.
        if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
            stdio
                .env
                .insert(mcp_stdio_process::ANCHOR_ENV.into(), anchor.to_string());
        }
        stdio.eof_grace = Duration::from_millis(1500);
        stdio.term_grace = Duration::from_millis(1500);
        stdio
    }

    pub fn server(&self, name: &str, stdio: StdioConfig, timeout: Duration) -> ServerConfig {
        let mut server = ServerConfig::stdio(name, stdio);
        server.timeout = timeout;
        server
    }

    pub fn ledger(&self) -> Vec<Value> {
        let Ok(text) = std::fs::read_to_string(self.ledger_path()) else {
            return Vec::new();
        };
        text.lines()
            .map(|line| serde_json::from_str(line).expect("ledger lines are JSON"))
            .collect()
    }

    /// Events recorded by `pid`, in order.
    pub fn events_of(&self, pid: u32) -> Vec<String> {
        self.ledger()
            .iter()
            .filter(|r| r["pid"] == serde_json::json!(pid))
            .map(|r| r["event"].as_str().unwrap_or("?").to_owned())
            .collect()
    }

    /// Waits for a ledger record matching `matches`.
    pub fn wait_ledger(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(found) = self.ledger().into_iter().find(|r| matches(r)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no ledger record for {what}: {:#?}",
                self.ledger()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// [`Case::wait_ledger`] for async tests that must keep their runtime
    /// running while they wait.
    pub async fn wait_ledger_async(&self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(found) = self.ledger().into_iter().find(|r| matches(r)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "no ledger record for {what}: {:#?}",
                self.ledger()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Live processes carrying this case's marker.
    pub fn survivors(&self) -> Vec<u32> {
        self.probe().pids()
    }

    /// The marker, for the probe's scans and cleanup.
    fn probe(&self) -> Marker {
        Marker::from_value(self.marker.as_str())
    }

    /// Asserts that no marked process is alive. Close has already waited for
    /// the group to go, so this is checked at once, not polled.
    pub fn assert_no_survivors(&self) {
        let survivors = self.survivors();
        assert!(
            survivors.is_empty(),
            "processes left behind: {}",
            describe(&survivors)
        );
    }
}

impl Drop for Case {
    /// Whatever the test did, kill every marked process by pid.
    fn drop(&mut self) {
        self.probe().kill_leftovers(DEADLINE);
    }
}

fn describe(pids: &[u32]) -> String {
    pids.iter()
        .map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            format!("{pid} (pgid {:?}): {cmdline}", table::pgid_of(*pid))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `{"key": value}` as tool arguments.
pub fn args(value: Value) -> Option<serde_json::Map<String, Value>> {
    match value {
        Value::Object(map) => Some(map),
        _ => panic!("tool arguments must be an object"),
    }
}

/// The text of the first content block of a tool result.
pub fn text(result: &rmcp::model::CallToolResult) -> String {
    let value = serde_json::to_value(result).expect("serializable");
    value["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Waits until no marked process is alive. For the grandchildren that a
/// group SIGKILL on drop ends asynchronously (drop waits for the direct child
/// only).
pub fn wait_gone(case: &Case) -> bool {
    case.probe().wait_gone(DEADLINE).is_empty()
}

/// Captures everything logged at TRACE on the thread where its subscriber
/// is installed (tests that use it run on a current-thread runtime).
#[derive(Clone, Default)]
pub struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + use<> {
        let captured = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || captured.clone())
            .finish()
    }
}
