//! `mcp-conformance host [OPTIONS] -- <host command> [args...]`: grades a
//! real host unattended (docs/hosts.md). It writes the fixture servers of
//! `client --host` (plus an escaping one) into the host's own config format,
//! starts a stand-in model endpoint that asks the host to call every fixture
//! tool, runs the host with stdin closed, in its own process group, with a
//! deadline, then grades what the host did to the servers as `client
//! --grade` does, plus `host.exit` and `host.tools_called`, and ends
//! whatever the host left, by pid with the marker checked.

pub mod config;
pub mod model;

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Read,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use mcp_conformance_report::exit;
use mcp_stdio_process::{ChildExit, Signal};
use serde_json::{Value, json};

use crate::client_check::{
    host::{self, Entry},
    report::{CheckResult, Report, Verdict},
};
use config::{Format, Layout, ModelApi};
use model::{Endpoint, Exchange};

/// `mcp-conformance host [OPTIONS] -- <host command> [args...]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The host's config format: where and how the fixture servers are
    /// written (`{config}` in the command names the file).
    #[arg(long, value_enum, default_value = "mcp-json")]
    pub format: Format,

    /// The model API the host speaks: sets the variables its SDK reads for a
    /// base URL and a key, pointing at the stand-in endpoint (which speaks
    /// every format whatever this says).
    #[arg(long, value_enum)]
    pub model_api: Option<ModelApi>,

    /// How long the host may run before it counts as hung (`120s`, `90`,
    /// `500ms`).
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration)]
    pub host_timeout: Duration,

    /// Keep the run's files (config, home, ledgers, the endpoint's log, the
    /// host's output) in DIR instead of a temporary directory.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Print the report as JSON (schema 1) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Also write the report as JUnit XML to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// The host command; `{config}`, `{dir}`, `{home}` and `{model_url}` are
    /// replaced in each argument.
    #[arg(last = true, required = true, value_name = "HOST")]
    pub command: Vec<String>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("`{text}` is not a duration: write 120s, 90 or 500ms");
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1000)
    } else {
        (text, 1000)
    };
    let n: u64 = number.trim().parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(format!(
            "`{text}`: the host timeout must be greater than zero"
        ));
    }
    Ok(Duration::from_millis(n * scale))
}

/// Why the run could not start (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum HostRunError {
    #[error("cannot make the run directory {}", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Host(#[from] host::HostError),
    #[error("cannot start the stand-in model endpoint")]
    Model(#[from] model::ModelError),
    #[error("cannot write the {format:?} config")]
    Config {
        format: Format,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the host `{program}` (is it installed and on PATH?)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// How long servers get, after the host exited, to act on the EOF its exit
/// gave them before they are graded: a human's `--grade` comes much later.
const SETTLE: Duration = Duration::from_secs(1);
/// The host's grace between SIGTERM and SIGKILL when it hung.
const HOST_TERM_GRACE: Duration = Duration::from_secs(3);

/// What the run saw of the host itself.
pub struct HostRun {
    pub report: Report,
    /// The run's directory (kept with `--dir`).
    pub root: PathBuf,
    /// What was left running and then ended.
    pub ended: Vec<host::Survivor>,
    /// Anything still alive after the end (should be empty).
    pub left: Vec<u32>,
}

/// Runs the whole subcommand but printing: the report and what was ended.
pub fn run(args: &Args) -> Result<HostRun, HostRunError> {
    // Orphans of the host's servers re-parent here: seen, and reaped.
    mcp_stdio_process::become_subreaper();
    let temp;
    let root = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = crate::tempdirs::tempdir("host").map_err(|source| HostRunError::Dir {
                path: std::env::temp_dir(),
                source,
            })?;
            temp.path().to_owned()
        }
    };
    let made = |path: &Path| {
        let path = path.to_owned();
        move |source| HostRunError::Dir { path, source }
    };
    std::fs::create_dir_all(&root).map_err(made(&root))?;
    let root = root.canonicalize().map_err(made(&root))?;
    let layout = Layout {
        home: root.join("home"),
        dir: root.join("work"),
    };
    for dir in [&layout.home, &layout.dir] {
        std::fs::create_dir_all(dir).map_err(made(dir))?;
    }
    let (mcp_json, entries) = host::prepare(&root, &host::servers(true))?;
    let endpoint = Endpoint::start_keeping(
        &mcp_fixtures::server::TOOL_NAMES,
        Some(root.join("requests")),
    )?;
    let url = endpoint.url();
    let config = config::write(
        args.format,
        args.model_api,
        &url,
        &entries,
        &mcp_json,
        &layout,
    )
    .map_err(|source| HostRunError::Config {
        format: args.format,
        source,
    })?;
    let fill = |arg: &String| {
        arg.replace("{config}", &config.display().to_string())
            .replace("{dir}", &layout.dir.display().to_string())
            .replace("{home}", &layout.home.display().to_string())
            .replace("{model_url}", &url)
    };
    let mut command: Vec<String> = args.command.iter().map(fill).collect();
    // The host runs in `{dir}`: a program named by a relative path is the
    // caller's, so it is made absolute (its arguments are the host's own).
    if command[0].contains('/')
        && Path::new(&command[0]).is_relative()
        && let Ok(cwd) = std::env::current_dir()
    {
        command[0] = cwd.join(&command[0]).display().to_string();
    }
    let env = config::environment(args.model_api, &url, &layout);

    let started = Instant::now();
    let spawned = mcp_stdio_process::spawn_blocking(
        Path::new(&command[0]),
        &command[1..],
        Some(&layout.dir),
        &env,
        "host",
        |_| {},
    )
    .map_err(|source| HostRunError::Spawn {
        program: command[0].clone(),
        source,
    })?;
    // Stdin closed: a headless host must not wait for a person.
    drop(spawned.stdin);
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) =
        Some((spawned.exit.clone(), markers(&root)));
    let stdout = drain(spawned.stdout.expect("stdout is piped"));
    let stderr = drain(spawned.stderr.expect("stderr is piped"));
    let exited = spawned.exit.wait_blocking(args.host_timeout);
    let took = started.elapsed();
    let hung = exited.is_none().then(|| waiting_on(spawned.pid, &entries));
    if exited.is_some() {
        settle(&entries);
    }
    reap_ours(&root);
    // Graded before anything is ended: what the host left is the grade.
    let (mut report, survivors) = host::grade(&root, None)?;
    if hung.is_some() {
        // Ends the host's group (and whatever of its servers share it).
        let _ = spawned.exit.signal_all(Signal::SIGTERM);
        if spawned.exit.wait_blocking(HOST_TERM_GRACE).is_none() {
            let _ = spawned.exit.signal_all(Signal::SIGKILL);
            spawned.exit.wait_blocking(Duration::from_secs(5));
        }
    }
    CURRENT.lock().unwrap_or_else(|e| e.into_inner()).take();
    spawned.exit.release();
    let exchanges = endpoint.exchanges();
    drop(endpoint);
    let out = |what: &str, text: &Arc<Mutex<Vec<u8>>>| {
        let bytes = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let _ = std::fs::write(root.join(what), &bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    };
    let _ = out("host.stdout", &stdout);
    let stderr_text = out("host.stderr", &stderr);
    let log: String = exchanges
        .iter()
        .map(|e| format!("{}\n", serde_json::to_string(e).unwrap_or_default()))
        .collect();
    let _ = std::fs::write(root.join("model.jsonl"), log);

    let mut rows = vec![
        host_exit(
            exited,
            took,
            args.host_timeout,
            hung.as_deref(),
            &stderr_text,
        ),
        tools_called(&exchanges, &entries),
    ];
    rows.append(&mut report.checks);
    for row in &mut rows {
        if row.id == "stdout.tolerant" {
            sharpen_stdout(row, &exchanges, &entries);
        }
    }
    report.checks = rows;
    report.driver = command[0].clone();
    report.args = command.len() - 1;

    let ended = host::end(&root, &survivors, Duration::from_secs(5));
    // Anything else that carries a marker of the run (a process started
    // after the grade's scan) goes too.
    let markers = markers(&root);
    let mut left = Vec::new();
    for marker in &markers {
        mcp_stdio_process::marker::kill_and_reap(marker, &BTreeSet::new(), Duration::from_secs(5));
        left.extend(
            mcp_stdio_process::marker::marked(marker)
                .iter()
                .map(|m| m.pid),
        );
    }
    reap_ours(&root);
    Ok(HostRun {
        report,
        root,
        ended,
        left,
    })
}

/// The running host and the run's markers: what a signal to this process
/// ends (the host lives in a group of its own, so a Ctrl-C never reaches it).
static CURRENT: Mutex<Option<(mcp_stdio_process::ExitWatch, Vec<String>)>> = Mutex::new(None);

/// Ends the running host's group and every process of the run's servers.
fn interrupted() {
    let current = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some((host, markers)) = current {
        // Unreleased: the host's pid (its group) cannot have been reused.
        host.signal_all(Signal::SIGKILL);
        host.wait_blocking(Duration::from_secs(5));
        for marker in markers {
            mcp_stdio_process::marker::kill_and_reap(
                &marker,
                &BTreeSet::new(),
                Duration::from_secs(5),
            );
        }
        host.release();
    }
}

/// Reads a pipe to its end on a thread of its own (a server left running
/// may hold it open: the thread is then left behind, never joined).
fn drain(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let text = Arc::new(Mutex::new(Vec::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buffer) {
            if n == 0 {
                break;
            }
            sink.lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend_from_slice(&buffer[..n]);
        }
    });
    text
}

/// The markers of the run's servers (every process they start carries one).
fn markers(root: &Path) -> Vec<String> {
    let state: Value = std::fs::read_to_string(root.join("host.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    state["servers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["marker"].as_str().map(str::to_owned))
        .collect()
}

fn alive(entries: &[Entry]) -> usize {
    entries
        .iter()
        .filter_map(|e| e.env.get(mcp_stdio_process::MARKER_ENV))
        .map(|marker| mcp_stdio_process::marker::marked(marker).len())
        .sum()
}

/// Waits up to [`SETTLE`] for the servers to act on the EOF the host's exit
/// gave them; returns as soon as none is left.
fn settle(entries: &[Entry]) {
    let deadline = Instant::now() + SETTLE;
    while alive(entries) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reaps every ledger pid that became this (subreaper) process's zombie: an
/// orphan of the host is not the host's zombie.
fn reap_ours(root: &Path) {
    let pids: BTreeSet<u32> = std::fs::read_dir(root.join("ledgers"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|entry| {
            std::fs::read_to_string(entry.path())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter_map(|r| crate::observer::pid_in(&r["pid"]))
                .collect::<Vec<_>>()
        })
        .collect();
    mcp_stdio_process::marker::reap(pids, Instant::now() + Duration::from_millis(200));
}

/// What a hung host was waiting on, as far as the process table shows: its
/// kernel wait channel and the fixture servers still alive.
fn waiting_on(pid: u32, entries: &[Entry]) -> String {
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan"))
        .ok()
        .filter(|w| !w.is_empty() && w != "0");
    let mut servers: Vec<String> = Vec::new();
    for entry in entries {
        let Some(marker) = entry.env.get(mcp_stdio_process::MARKER_ENV) else {
            continue;
        };
        for process in mcp_stdio_process::marker::marked(marker) {
            let parent = mcp_stdio_process::table::parent_of(process.pid);
            let whose = if parent == Some(pid) {
                "its child "
            } else {
                ""
            };
            servers.push(format!(
                "{whose}{} (pid {}) of `{}`",
                process.name, process.pid, entry.name
            ));
        }
    }
    let mut said = Vec::new();
    if let Some(wchan) = wchan {
        said.push(format!("its main thread sleeps in `{wchan}`"));
    }
    if servers.is_empty() {
        said.push("no fixture server is left".to_owned());
    } else {
        said.push(format!("still running: {}", servers.join(", ")));
    }
    said.join("; ")
}

fn host_exit(
    exited: Option<ChildExit>,
    took: Duration,
    timeout: Duration,
    hung: Option<&str>,
    stderr: &str,
) -> CheckResult {
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    match exited {
        None => CheckResult::new(
            "host.exit",
            Verdict::Fail,
            format!(
                "the host had not exited after {} (--host-timeout): {}",
                secs(timeout),
                hung.unwrap_or("nothing more is visible")
            ),
        )
        .fix("exit once the turn is done: end every server (EOF, grace, SIGTERM, grace, SIGKILL) without waiting on one that ignores them"),
        Some(status) if status.success() => CheckResult::new(
            "host.exit",
            Verdict::Pass,
            format!("the host exited by itself ({status}) after {}", secs(took)),
        )
        .figures(json!({ "host_ms": took.as_millis() as u64 })),
        Some(status) => {
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            CheckResult::new(
                "host.exit",
                Verdict::Warn,
                format!(
                    "the host exited by itself, with {status}, after {}{}",
                    secs(took),
                    if tail.is_empty() {
                        String::new()
                    } else {
                        format!("; its stderr ends: {}", tail.join(" | "))
                    }
                ),
            )
            .fix("see host.stderr in the run directory (--dir): a host that fails its turn proves little")
            .figures(json!({ "host_ms": took.as_millis() as u64 }))
        }
    }
}

/// Lowercase, every non-alphanumeric an underscore: how hosts sanitize
/// server names into tool names.
fn normal(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// The server and fixture tool a host's tool name stands for (the server
/// is unknown when the host does not prefix its tools).
fn resolve<'a>(name: &str, servers: &'a [Entry]) -> (Option<&'a str>, Option<&'static str>) {
    let tool = mcp_fixtures::server::TOOL_NAMES
        .iter()
        .copied()
        .find(|t| model::is_tool(name, t));
    let head = tool.map(|t| &name[..name.len() - t.len()]).unwrap_or(name);
    let head = normal(head);
    let server = servers
        .iter()
        .map(|e| e.name.as_str())
        .find(|s| head.contains(&normal(s)));
    (server, tool)
}

/// The tools/call requests each server's ledger recorded, by tool.
fn reached(root: &Path, server: &str) -> BTreeSet<String> {
    std::fs::read_to_string(root.join("ledgers").join(format!("{server}.jsonl")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] == "request" && r["method"] == "tools/call")
        .filter_map(|r| r["tool"].as_str().map(str::to_owned))
        .collect()
}

/// `host.tools_called`: every fixture tool the model asked for reached its
/// server; otherwise the run proves little, and says so as an error (the
/// run could not judge what it was meant to), never a pass.
pub fn tools_called_in(root: &Path, exchanges: &[Exchange], servers: &[Entry]) -> CheckResult {
    let mut offered: BTreeSet<&str> = BTreeSet::new();
    let mut asked: BTreeMap<&str, BTreeSet<&'static str>> = BTreeMap::new();
    let mut unresolved: BTreeSet<String> = BTreeSet::new();
    for exchange in exchanges {
        for name in &exchange.tools_offered {
            if let (Some(server), Some(_)) = resolve(name, servers) {
                offered.insert(server);
            }
        }
        for name in &exchange.called {
            match resolve(name, servers) {
                (Some(server), Some(tool)) => {
                    asked.entry(server).or_default().insert(tool);
                }
                (None, Some(_)) => {
                    unresolved.insert(name.clone());
                }
                // Not a fixture tool: a search for deferred tools.
                (_, None) => {}
            }
        }
    }
    let turns = exchanges.iter().filter(|e| e.api.is_some()).count();
    if asked.is_empty() && unresolved.is_empty() {
        let why = if turns == 0 {
            "the host never asked the stand-in model anything (is --model-api right, and does the host read its variables?)".to_owned()
        } else {
            format!(
                "the host asked the model {turns} time(s) but never offered a fixture tool: it did not start or list the servers"
            )
        };
        return CheckResult::new(
            "host.tools_called",
            Verdict::Error,
            format!("no tool was called, so the run proves little: {why}"),
        )
        .fix("make the host load the config (--format) and offer the servers' tools to the model");
    }
    let mut missing = Vec::new();
    let mut calls = 0;
    for (server, tools) in &asked {
        let got = reached(root, server);
        calls += tools.len();
        // The crash server dies on its first call by design: one is all
        // that can reach it (unless the host starts it again).
        let need: Vec<&&str> = if *server == "crash" {
            if got.is_empty() {
                tools.iter().take(1).collect()
            } else {
                Vec::new()
            }
        } else {
            tools.iter().filter(|t| !got.contains(**t)).collect()
        };
        missing.extend(need.iter().map(|t| format!("{server}/{t}")));
    }
    let silent: Vec<&str> = servers
        .iter()
        .map(|e| e.name.as_str())
        .filter(|s| !offered.contains(s))
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "asked for but never reached their server: {}",
            missing.join(", ")
        ));
    }
    if !silent.is_empty() {
        problems.push(format!(
            "the model was never offered the tools of: {}",
            silent.join(", ")
        ));
    }
    if !unresolved.is_empty() {
        problems.push(format!(
            "called under names that name no server: {}",
            unresolved.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let figures = json!({ "servers_offered": offered.len(), "tools_asked": calls });
    if problems.is_empty() {
        CheckResult::new(
            "host.tools_called",
            Verdict::Pass,
            format!(
                "the tools of all {} servers were offered, and each of the {calls} calls the model asked for reached its server",
                offered.len()
            ),
        )
        .figures(figures)
    } else {
        CheckResult::new(
            "host.tools_called",
            Verdict::Error,
            format!("the run proves less than it should: {}", problems.join("; ")),
        )
        .fix("allow the host to call the servers' tools unattended (a yolo/skip-permissions flag, an allow list) and keep each entry's `env`")
        .figures(figures)
    }
}

/// `stdout.tolerant` with what the model saw: a host that listed the
/// banner server's tools (the ledger) but never offered them to the model
/// dropped that server, most likely over its banner lines.
fn sharpen_stdout(row: &mut CheckResult, exchanges: &[Exchange], servers: &[Entry]) {
    const BANNER: &str = "stdout-banner";
    let offered = |server: &str| {
        exchanges
            .iter()
            .flat_map(|e| &e.tools_offered)
            .any(|name| resolve(name, servers).0 == Some(server))
    };
    let others_offered = servers.iter().any(|e| e.name != BANNER && offered(&e.name));
    if row.verdict == Verdict::Pass && others_offered && !offered(BANNER) {
        *row = CheckResult::new(
            "stdout.tolerant",
            Verdict::Warn,
            "the host started `stdout-banner` but never offered its tools to the model, while it offered other servers' tools: the banner lines on its stdout most likely broke the session",
        )
        .fix("skip (and log) stdout lines that are not JSON-RPC instead of failing");
    }
}

fn tools_called(exchanges: &[Exchange], servers: &[Entry]) -> CheckResult {
    let root = servers
        .first()
        .and_then(|e| e.env.get(mcp_fixtures::ledger::LEDGER_ENV))
        .and_then(|ledger| Path::new(ledger).parent()?.parent().map(Path::to_owned))
        .unwrap_or_default();
    tools_called_in(&root, exchanges, servers)
}

/// The whole subcommand; returns the exit code.
pub fn main(args: Args) -> u8 {
    crate::interrupt::end_on_signal("mcp-conformance host", interrupted);
    let outcome = run(&args);
    crate::interrupt::wait_if_ending();
    let run = match outcome {
        Ok(run) => run,
        Err(error) => {
            eprintln!(
                "mcp-conformance host: {}",
                mcp_stdio_client::error_chain(&error)
            );
            return exit::USAGE;
        }
    };
    if args.json {
        println!("{}", run.report.to_json());
    } else {
        print!("{}", run.report.to_table());
    }
    for ended in &run.ended {
        eprintln!(
            "mcp-conformance host: ended {} (pid {}) of `{}`, left running by the host",
            ended.name, ended.pid, ended.server
        );
    }
    if !run.left.is_empty() {
        eprintln!(
            "mcp-conformance host: could not end pids {:?} (they carry the run's marker)",
            run.left
        );
    }
    if args.dir.is_some() {
        eprintln!(
            "mcp-conformance host: the run's files are in {}",
            run.root.display()
        );
    }
    if let Some(path) = &args.junit
        && let Err(error) = std::fs::write(path, run.report.to_junit())
    {
        eprintln!(
            "mcp-conformance host: cannot write {}: {error}",
            path.display()
        );
        return exit::USAGE;
    }
    run.report.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn host_tool_names_resolve_to_servers() {
        let entry = |name: &str| Entry {
            name: name.to_owned(),
            command: PathBuf::new(),
            args: Vec::new(),
            env: BTreeMap::new(),
        };
        let servers = [entry("well-behaved"), entry("eof-ignoring"), entry("crash")];
        assert_eq!(
            resolve("mcp__well-behaved__echo", &servers),
            (Some("well-behaved"), Some("echo"))
        );
        assert_eq!(
            resolve("eof_ignoring_sleep_ms", &servers),
            (Some("eof-ignoring"), Some("sleep_ms"))
        );
        assert_eq!(resolve("echo", &servers), (None, Some("echo")));
    }
}
