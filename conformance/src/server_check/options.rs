//! The command line of `mcp-conformance server`, its defaults, and the check ids.

use std::{fmt, path::PathBuf, time::Duration};

use mcp_stdio_client::config::parse_duration;

/// Every check, in report order. The ids are stable: the JSON and JUnit
/// reports, `--check` and the docs use them as written here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CheckId {
    /// `handshake.responds`.
    HandshakeResponds,
    /// `handshake.discover`.
    HandshakeDiscover,
    /// `handshake.legacy`.
    HandshakeLegacy,
    /// `handshake.latency`.
    HandshakeLatency,
    /// `stdout.purity`.
    StdoutPurity,
    /// `eof.exit`.
    EofExit,
    /// `eof.descendants`.
    EofDescendants,
    /// `eof.cpu`.
    EofCpu,
    /// `host_death.exit`.
    HostDeathExit,
    /// `epipe.exit`.
    EpipeExit,
    /// `epipe.cpu`.
    EpipeCpu,
    /// `sigterm.exit`.
    SigtermExit,
    /// `idle.alive`.
    IdleAlive,
    /// `stderr`.
    Stderr,
}

impl CheckId {
    /// Every check, in report order.
    pub const ALL: [CheckId; 14] = [
        CheckId::HandshakeResponds,
        CheckId::HandshakeDiscover,
        CheckId::HandshakeLegacy,
        CheckId::HandshakeLatency,
        CheckId::StdoutPurity,
        CheckId::EofExit,
        CheckId::EofDescendants,
        CheckId::EofCpu,
        CheckId::HostDeathExit,
        CheckId::EpipeExit,
        CheckId::EpipeCpu,
        CheckId::SigtermExit,
        CheckId::IdleAlive,
        CheckId::Stderr,
    ];

    /// The id as reports, `--check` and the docs write it (`eof.exit`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::HandshakeResponds => "handshake.responds",
            CheckId::HandshakeDiscover => "handshake.discover",
            CheckId::HandshakeLegacy => "handshake.legacy",
            CheckId::HandshakeLatency => "handshake.latency",
            CheckId::StdoutPurity => "stdout.purity",
            CheckId::EofExit => "eof.exit",
            CheckId::EofDescendants => "eof.descendants",
            CheckId::EofCpu => "eof.cpu",
            CheckId::HostDeathExit => "host_death.exit",
            CheckId::EpipeExit => "epipe.exit",
            CheckId::EpipeCpu => "epipe.cpu",
            CheckId::SigtermExit => "sigterm.exit",
            CheckId::IdleAlive => "idle.alive",
            CheckId::Stderr => "stderr",
        }
    }

    /// Whether a failure of this check fails the run (exit code 1).
    /// `handshake.latency` only warns and `stderr` only informs: a slow cold
    /// start or a chatty stderr is not a protocol violation.
    pub fn required(self) -> bool {
        !matches!(self, CheckId::HandshakeLatency | CheckId::Stderr)
    }
}

impl fmt::Display for CheckId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for CheckId {
    type Err = OptionsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        CheckId::ALL
            .into_iter()
            .find(|id| id.as_str() == text)
            .ok_or_else(|| OptionsError::UnknownCheck(text.to_owned()))
    }
}

/// Why the command line is unusable (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    #[error(
        "unknown check id `{0}`; known ids: handshake.responds, handshake.discover, handshake.legacy, \
         handshake.latency, stdout.purity, eof.exit, eof.descendants, eof.cpu, host_death.exit, \
         epipe.exit, epipe.cpu, sigterm.exit, idle.alive, stderr"
    )]
    UnknownCheck(String),
    #[error(
        "--slow-tool takes NAME or NAME=JSON_ARGUMENTS, and the arguments must be a JSON object"
    )]
    SlowTool(#[source] Option<serde_json::Error>),
    #[error("--repeat must be at least 1")]
    Repeat,
    #[error("--jobs must be at least 1")]
    Jobs,
}

/// `mcp-conformance server [OPTIONS] -- <COMMAND> [ARGS]...`
#[derive(Debug, Clone, clap::Args)]
#[command(
    args_override_self = true,
    about = "Grade an MCP stdio server's lifecycle: handshake, stdout purity, stdin EOF, host death, SIGTERM, idling",
    after_help = "Exit status: 0 when every required check passes, 1 when one fails, 2 on a usage error.\n\
                  Check ids: handshake.responds handshake.discover handshake.legacy handshake.latency stdout.purity eof.exit eof.descendants \
                  eof.cpu host_death.exit epipe.exit epipe.cpu sigterm.exit idle.alive stderr. See docs/server-check.md."
)]
pub struct Args {
    /// Print the report as JSON (schema 2) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Also write the report as JUnit XML to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Run every check N times, each in a fresh process (the first start is
    /// cold, the others warm); timings are reported as min/median/max.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,

    /// Run at most N server starts at once. By default every run that does
    /// not need another's result runs at the same time (and, with
    /// --repeat, the repetitions overlap); 1 runs them one after another.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,

    /// Run only this check (repeatable, or comma-separated).
    #[arg(long = "check", value_name = "ID", value_delimiter = ',')]
    pub checks: Vec<String>,

    /// Bound on the handshake (`server/discover` or `initialize`) and `tools/list` answers.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration)]
    pub timeout: Duration,

    /// Bound on the `server/discover` probe: with no answer within it, the
    /// check falls back to `initialize` as a dual-era client does, and
    /// `handshake.discover` warns that every probing client loses this long.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration)]
    pub probe_timeout: Duration,

    /// `handshake.latency` warns when the median time to the initialize answer exceeds this.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration)]
    pub latency_bound: Duration,

    /// How long the server may take to exit after its stdin closes (or its
    /// host dies, or its write to a closed stdout fails).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub eof_grace: Duration,

    /// How long the server may take to exit after SIGTERM.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub term_grace: Duration,

    /// How long an idle server (stdin open, nobody talking) must stay alive.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub idle: Duration,

    /// After the server exits, how long its descendants may take to follow it.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub settle: Duration,

    /// How long the CPU of a process that survived EOF (or its host's death) is sampled.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = duration)]
    pub cpu_window: Duration,

    /// CPU use (percent of one core) over the window that counts as a busy loop.
    #[arg(long, value_name = "PERCENT", default_value_t = 50)]
    pub busy_percent: u32,

    /// The tool to keep in flight when stdin closes, as NAME or NAME=JSON_ARGUMENTS.
    /// Without it, a tool that can be slow (a name with sleep, delay or wait and
    /// one numeric argument) is picked from `tools/list`, if there is one.
    #[arg(long, value_name = "NAME[=JSON]")]
    pub slow_tool: Option<String>,

    /// How long the auto-picked slow tool is asked to take.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub in_flight: Duration,

    /// Show what the server wrote to stderr, and every offending stdout line.
    #[arg(short, long)]
    pub verbose: bool,

    /// Stable output for snapshots: times as buckets, no pids, the command's file name only.
    #[arg(long, hide = true)]
    pub stable: bool,

    /// The server's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

fn duration(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

/// The slow tool to call with a request in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowTool {
    pub name: String,
    pub arguments: Option<serde_json::Map<String, serde_json::Value>>,
}

impl SlowTool {
    pub fn parse(text: &str) -> Result<SlowTool, OptionsError> {
        let (name, json) = match text.split_once('=') {
            Some((name, json)) => (name, Some(json)),
            None => (text, None),
        };
        if name.is_empty() {
            return Err(OptionsError::SlowTool(None));
        }
        let arguments = match json {
            None => None,
            Some(json) => match serde_json::from_str::<serde_json::Value>(json) {
                Ok(serde_json::Value::Object(map)) => Some(map),
                Ok(_) => return Err(OptionsError::SlowTool(None)),
                Err(error) => return Err(OptionsError::SlowTool(Some(error))),
            },
        };
        Ok(SlowTool {
            name: name.to_owned(),
            arguments,
        })
    }
}

/// The validated options a check run uses.
#[derive(Debug, Clone)]
pub struct Options {
    /// The checks to run, in report order.
    pub checks: Vec<CheckId>,
    /// How many times each check runs, each in a fresh process (`--repeat`).
    pub repeat: u32,
    /// At most this many server starts at once; `None`: no bound.
    pub jobs: Option<usize>,
    /// Bound on the handshake and `tools/list` answers (`--timeout`).
    pub timeout: Duration,
    /// Bound on the `server/discover` probe (`--probe-timeout`).
    pub probe_timeout: Duration,
    /// `handshake.latency` warns above this median (`--latency-bound`).
    pub latency_bound: Duration,
    /// How long the server may take to exit after EOF (`--eof-grace`).
    pub eof_grace: Duration,
    /// How long the server may take to exit after SIGTERM (`--term-grace`).
    pub term_grace: Duration,
    /// How long an idle server must stay alive (`--idle`).
    pub idle: Duration,
    /// How long descendants may take to follow the server out (`--settle`).
    pub settle: Duration,
    /// How long a survivor's CPU is sampled (`--cpu-window`).
    pub cpu_window: Duration,
    /// CPU use (percent of one core) that counts as a busy loop (`--busy-percent`).
    pub busy_percent: u32,
    /// The tool kept in flight when stdin closes (`--slow-tool`); `None`: picked from `tools/list`.
    pub slow_tool: Option<SlowTool>,
    /// How long the auto-picked slow tool is asked to take (`--in-flight`).
    pub in_flight: Duration,
}

impl Options {
    /// The defaults of the command line, every check selected.
    pub fn defaults() -> Options {
        Options {
            checks: CheckId::ALL.to_vec(),
            repeat: 1,
            jobs: None,
            timeout: Duration::from_secs(30),
            probe_timeout: Duration::from_secs(3),
            latency_bound: Duration::from_secs(5),
            eof_grace: Duration::from_secs(2),
            term_grace: Duration::from_secs(2),
            idle: Duration::from_secs(2),
            settle: Duration::from_secs(1),
            cpu_window: Duration::from_millis(500),
            busy_percent: 50,
            slow_tool: None,
            in_flight: Duration::from_secs(1),
        }
    }

    /// The options `args` give, validated.
    pub(crate) fn from_args(args: &Args) -> Result<Options, OptionsError> {
        if args.repeat == 0 {
            return Err(OptionsError::Repeat);
        }
        if args.jobs == Some(0) {
            return Err(OptionsError::Jobs);
        }
        let mut checks = Vec::new();
        for text in &args.checks {
            let id: CheckId = text.trim().parse()?;
            if !checks.contains(&id) {
                checks.push(id);
            }
        }
        if checks.is_empty() {
            checks = CheckId::ALL.to_vec();
        }
        checks.sort();
        Ok(Options {
            checks,
            repeat: args.repeat,
            jobs: args.jobs,
            timeout: args.timeout,
            probe_timeout: args.probe_timeout,
            latency_bound: args.latency_bound,
            eof_grace: args.eof_grace,
            term_grace: args.term_grace,
            idle: args.idle,
            settle: args.settle,
            cpu_window: args.cpu_window,
            busy_percent: args.busy_percent,
            slow_tool: args.slow_tool.as_deref().map(SlowTool::parse).transpose()?,
            in_flight: args.in_flight,
        })
    }

    /// Whether check `id` is selected.
    pub(crate) fn wants(&self, id: CheckId) -> bool {
        self.checks.contains(&id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_ids_round_trip_and_unknown_ids_are_named() {
        for id in CheckId::ALL {
            assert_eq!(id.as_str().parse::<CheckId>().unwrap(), id);
        }
        let error = "nope".parse::<CheckId>().unwrap_err().to_string();
        assert!(
            error.contains("`nope`") && error.contains("eof.exit"),
            "{error}"
        );
    }

    #[test]
    fn slow_tool_parses_a_name_and_optional_json_object() {
        assert_eq!(
            SlowTool::parse("sleep").unwrap(),
            SlowTool {
                name: "sleep".into(),
                arguments: None
            }
        );
        let tool = SlowTool::parse(r#"sleep_ms={"ms":500}"#).unwrap();
        assert_eq!(tool.arguments.unwrap()["ms"], 500);
        assert!(SlowTool::parse("x=[1]").is_err());
        assert!(SlowTool::parse("x={").is_err());
        assert!(SlowTool::parse("=1").is_err());
    }
}
