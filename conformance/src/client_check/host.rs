//! Real hosts, by hand: `mcp-conformance client --host DIR` writes a
//! desktop-format config naming fixture servers that record what happens to
//! them, and `--grade DIR` grades what the host did to them, with the check
//! ids of client mode where they apply, then ends whatever the host left.
//!
//! Every process a fixture starts (server, launcher child, sidecar) carries
//! its server's marker as `--marker=<marker>` in argv, so it is found
//! wherever it was re-parented; the ledgers (one per server) record each
//! one's pid, its start, what it saw and how it ended. Nothing is signalled
//! unless it still carries the marker, checked through a pidfd, so a
//! recycled pid is never hit.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use super::{
    checks::{CHECK_IDS, era_of},
    report::{CheckResult, Report, Verdict},
};
use crate::observer::{self, MARKER_ENV};

/// The config a host is started with.
pub const CONFIG: &str = "mcp.json";
/// What `--grade` needs to know about the servers `--host` wrote.
const STATE: &str = "host.json";
/// The ledgers' directory under DIR.
const LEDGERS: &str = "ledgers";
/// What `--grade` ended (pid, server), so a later grade still counts it as
/// a survivor of the host.
const ENDED: &str = "ended.jsonl";

/// A stderr flood slower than this is a stall (a warning).
const STALL: Duration = Duration::from_secs(1);
/// A stderr flood slower than this failed `stderr.drained`: the client-mode
/// bound (its 5 s timeout).
const STUCK: Duration = Duration::from_secs(5);

/// One server of the config: its name in `mcpServers`, the fixture it runs,
/// the fixture's flags, and what it does (for the instructions).
pub struct Server {
    name: &'static str,
    fixture: &'static str,
    flags: &'static [&'static str],
    does: &'static str,
}

const SERVERS: &[Server] = &[
    Server {
        name: "well-behaved",
        fixture: "well-behaved",
        flags: &[],
        does: "exits on stdin EOF (close.graceful)",
    },
    Server {
        name: "eof-ignoring",
        fixture: "eof-ignoring",
        flags: &[],
        does: "ignores stdin EOF, exits on SIGTERM (close.eof_first, close.sigterm)",
    },
    Server {
        name: "term-ignoring",
        fixture: "term-ignoring",
        flags: &[],
        does: "ignores stdin EOF and SIGTERM (close.sigkill)",
    },
    Server {
        name: "launcher",
        fixture: "launcher",
        flags: &[],
        does: "an npx-like launcher whose child ignores EOF (close.group)",
    },
    Server {
        name: "sidecar",
        fixture: "lingering",
        flags: &[],
        does: "exits on EOF but leaves a sidecar in its group (close.sidecar)",
    },
    Server {
        name: "crash",
        fixture: "crash",
        flags: &["--on-call", "1", "--exit-code", "3"],
        does: "dies with exit code 3 on its first tool call (death.fast)",
    },
    Server {
        name: "stderr-flood",
        fixture: "stderr-flooding",
        flags: &[
            "--bytes",
            "4194304",
            "--per-call-bytes",
            "1048576",
            "--record-call-floods",
        ],
        does: "writes 4 MiB to stderr before its handshake answer, 1 MiB per call (stderr.drained)",
    },
    Server {
        name: "stdout-banner",
        fixture: "stdout-polluting",
        flags: &[],
        does: "prints banner and log lines on stdout (stdout.tolerant)",
    },
];

/// Why `--host` or `--grade` could not run (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("cannot find this executable (the fixtures run from it)")]
    CurrentExe(#[source] std::io::Error),
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot read {}: run `mcp-conformance client --host {}` first",
        path.display(),
        dir.display()
    )]
    NoState {
        path: PathBuf,
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a state file written by `--host`", path.display())]
    BadState { path: PathBuf },
}

/// The escaping server `mcp-conformance host` adds to the set: a setsid
/// sidecar only containment can end (`close.escaped`).
pub const ESCAPING: Server = Server {
    name: "escaping",
    fixture: "escaping",
    flags: &[],
    does: "exits on EOF but leaves a setsid sidecar outside its group (close.escaped)",
};

/// One server of a written config, for a host's own config format.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Its name in the config (`mcpServers` key).
    pub name: String,
    pub command: PathBuf,
    pub args: Vec<String>,
    /// The ledger and the marker: a host must pass them on.
    pub env: BTreeMap<String, String>,
}

/// The servers of `client --host`, and with `escaping` the escaping one.
pub fn servers(escaping: bool) -> Vec<&'static Server> {
    SERVERS
        .iter()
        .chain(escaping.then_some(&ESCAPING))
        .collect()
}

/// Writes `DIR/mcp.json` and `DIR/host.json` for `servers`, empties the
/// ledgers; returns the path of `mcp.json` and the servers as written.
pub fn prepare(dir: &Path, servers: &[&Server]) -> Result<(PathBuf, Vec<Entry>), HostError> {
    let written = |path: &Path| {
        let path = path.to_owned();
        move |source| HostError::Write { path, source }
    };
    let ledgers = dir.join(LEDGERS);
    std::fs::create_dir_all(&ledgers).map_err(written(&ledgers))?;
    let dir = dir.canonicalize().map_err(written(dir))?;
    let ledgers = dir.join(LEDGERS);
    let ended = dir.join(ENDED);
    if ended.exists() {
        std::fs::remove_file(&ended).map_err(written(&ended))?;
    }
    let exe = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .map_err(HostError::CurrentExe)?;
    // Unique per `--host`, so processes of an earlier session are not
    // taken for this one's.
    let nonce = format!(
        "{:x}{:x}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let mut entries = Vec::new();
    let mut state = Vec::new();
    for server in servers {
        let marker = format!("mcp-host-{nonce}-{}", server.name);
        let ledger = ledgers.join(format!("{}.jsonl", server.name));
        if ledger.exists() {
            std::fs::remove_file(&ledger).map_err(written(&ledger))?;
        }
        let mut args = vec![
            "fixture".to_owned(),
            server.fixture.to_owned(),
            format!("--marker={marker}"),
        ];
        args.extend(server.flags.iter().map(|f| (*f).to_owned()));
        if server.fixture == "launcher" {
            // The launcher's child: the same executable, the same marker.
            args.extend([
                "--".to_owned(),
                exe.display().to_string(),
                "fixture".to_owned(),
                "eof-ignoring".to_owned(),
                format!("--marker={marker}"),
            ]);
        }
        entries.push(Entry {
            name: server.name.to_owned(),
            command: exe.clone(),
            args,
            env: BTreeMap::from([
                (
                    mcp_fixtures::ledger::LEDGER_ENV.to_owned(),
                    ledger.display().to_string(),
                ),
                (MARKER_ENV.to_owned(), marker.clone()),
            ]),
        });
        state.push(json!({
            "name": server.name,
            "fixture": format!("fixture-{}", server.fixture),
            "marker": marker,
            "ledger": ledger,
        }));
    }
    let servers_json: serde_json::Map<String, Value> = entries
        .iter()
        .map(|e| {
            (
                e.name.clone(),
                json!({ "command": e.command, "args": e.args, "env": e.env }),
            )
        })
        .collect();
    let config = dir.join(CONFIG);
    let text = serde_json::to_string_pretty(&json!({ "mcpServers": servers_json }))
        .expect("a config serializes");
    std::fs::write(&config, text + "\n").map_err(written(&config))?;
    let state_path = dir.join(STATE);
    let text = serde_json::to_string_pretty(&json!({ "schema": 1, "servers": state }))
        .expect("the state serializes");
    std::fs::write(&state_path, text + "\n").map_err(written(&state_path))?;
    Ok((config, entries))
}

/// `--host DIR`: writes `DIR/mcp.json` and `DIR/host.json`, empties the
/// ledgers, and returns the instructions to print.
pub fn write(dir: &Path) -> Result<String, HostError> {
    let (config, _) = prepare(dir, &servers(false))?;
    let dir = config.parent().unwrap_or(dir).to_owned();
    let ledgers = dir.join(LEDGERS);
    let mut out = format!(
        "wrote {}: {} fixture servers, each recording what happens to it in {}/\n\n",
        config.display(),
        SERVERS.len(),
        ledgers.display()
    );
    for server in SERVERS {
        out += &format!("  {:<15}{}\n", server.name, server.does);
    }
    out += &format!(
        "\n1. Start your host with this config (point it at {config} or copy its\n   \
         mcpServers into the host's own config; keep `env`: the ledgers need it).\n\
         2. Use the tools: let the host list them, call `echo` on each server (any\n   \
         text), and call it on `crash` too (it dies on that call).\n\
         3. Quit the host the way a user does.\n\
         4. Grade what happened: mcp-conformance client --grade {dir}\n   \
         (it then ends whatever the host left running)\n",
        config = config.display(),
        dir = dir.display()
    );
    Ok(out)
}

/// One server as `--host` wrote it.
struct Written {
    name: String,
    fixture: String,
    marker: String,
    ledger: PathBuf,
}

fn read_state(dir: &Path) -> Result<Vec<Written>, HostError> {
    let path = dir.join(STATE);
    let text = std::fs::read_to_string(&path).map_err(|source| HostError::NoState {
        path: path.clone(),
        dir: dir.to_owned(),
        source,
    })?;
    let bad = || HostError::BadState { path: path.clone() };
    let state: Value = serde_json::from_str(&text).map_err(|_| bad())?;
    state["servers"]
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|server| {
            let field = |key: &str| server[key].as_str().map(str::to_owned).ok_or_else(bad);
            Ok(Written {
                name: field("name")?,
                fixture: field("fixture")?,
                marker: field("marker")?,
                ledger: PathBuf::from(field("ledger")?),
            })
        })
        .collect()
}

/// One fixture process, from its ledger records and the process table.
#[derive(Debug)]
struct Proc {
    pid: u32,
    fixture: String,
    sidecar: bool,
    records: Vec<Value>,
    alive: bool,
    /// Alive after the host, then ended by an earlier `--grade`.
    ended_by_grade: bool,
    zombie_of: Option<u32>,
    /// The host's first teardown action (its first stdin close or signal
    /// to any server), the zero of the story's times.
    t0: Option<u64>,
}

impl Proc {
    /// Outlived the host (alive now, or ended by an earlier `--grade`).
    fn survived(&self) -> bool {
        self.alive || self.ended_by_grade
    }

    fn at(&self, event: &str) -> Option<u64> {
        self.records
            .iter()
            .find(|r| r["event"] == event)
            .and_then(|r| r["t_ms"].as_u64())
    }

    fn signals(&self) -> Vec<(String, u64)> {
        self.records
            .iter()
            .filter(|r| r["event"] == "signal")
            .map(|r| {
                (
                    r["signal"].as_str().unwrap_or("?").to_owned(),
                    r["t_ms"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    }

    fn exit(&self) -> Option<&Value> {
        self.records.iter().find(|r| r["event"] == "exit")
    }

    /// `at +T ms`: a time from the host's first teardown action.
    fn when(&self, at: u64) -> String {
        match self.t0 {
            Some(t0) if at >= t0 => format!(" at +{} ms", at - t0),
            Some(t0) => format!(" at -{} ms", t0 - at),
            None => String::new(),
        }
    }

    /// What it saw and how it ended, in one phrase: its events in their
    /// true order, each with its time from the host's first teardown
    /// action, and signals also from its EOF.
    fn story(&self) -> String {
        let mut parts = Vec::new();
        let eof = self.at("stdin_eof");
        // A sidecar has no stdin of the host's: only its signals and end count.
        let mut events: Vec<(u64, String)> = Vec::new();
        match eof {
            Some(at) => events.push((at, format!("stdin EOF{}", self.when(at)))),
            None if !self.sidecar => parts.push("no stdin EOF".to_owned()),
            None => {}
        }
        for (signal, at) in self.signals() {
            let from_eof = match eof {
                Some(eof) if at >= eof => format!(", {} ms after EOF", at - eof),
                Some(eof) => format!(", {} ms before EOF", eof - at),
                None => String::new(),
            };
            events.push((at, format!("{signal}{}{from_eof}", self.when(at))));
        }
        // Stable: an EOF and a signal in the same millisecond keep the
        // order the ledger wrote them in.
        events.sort_by_key(|(at, _)| *at);
        parts.extend(events.into_iter().map(|(_, event)| event));
        let end = if self.alive {
            "still running".to_owned()
        } else if self.ended_by_grade {
            "outlived the host (ended by an earlier --grade)".to_owned()
        } else if let Some(parent) = self.zombie_of {
            format!("exited, never reaped by its parent (pid {parent})")
        } else {
            match self.exit() {
                Some(exit) => {
                    let at = exit["t_ms"]
                        .as_u64()
                        .map(|at| self.when(at))
                        .unwrap_or_default();
                    match exit["reason"].as_str() {
                        Some("stdin_eof") => format!("exited on EOF{at}"),
                        Some("signal") => format!("exited on the signal{at}"),
                        Some("crash") => format!("crashed (exit code {}){at}", exit["code"]),
                        Some(other) => format!("exited ({other}){at}"),
                        None => format!("exited{at}"),
                    }
                }
                None => "killed (SIGKILL: it recorded no end)".to_owned(),
            }
        };
        parts.push(end);
        format!("{} (pid {}): {}", self.fixture, self.pid, parts.join(", "))
    }
}

/// Every process of one server, from its ledger, with what the process
/// table says now.
fn processes(server: &Written, alive: &[observer::Marked], ended: &[Value]) -> Vec<Proc> {
    let records: Vec<Value> = std::fs::read_to_string(&server.ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let mut by_pid: BTreeMap<u32, Proc> = BTreeMap::new();
    for record in records {
        let Some(pid) = observer::pid_in(&record["pid"]) else {
            continue;
        };
        let proc = by_pid.entry(pid).or_insert_with(|| Proc {
            pid,
            fixture: record["fixture"].as_str().unwrap_or("?").to_owned(),
            sidecar: false,
            records: Vec::new(),
            alive: alive.iter().any(|m| m.pid == pid),
            ended_by_grade: ended
                .iter()
                .any(|e| e["pid"] == json!(pid) && e["server"] == json!(server.name)),
            zombie_of: None,
            t0: None,
        });
        if record["event"] == "started" && record.get("kind").is_some() {
            proc.sidecar = true;
        }
        proc.records.push(record);
    }
    let mut procs: Vec<Proc> = by_pid.into_values().collect();
    for proc in &mut procs {
        let started = proc.at("started").unwrap_or(0);
        // A zombie is its starter's fault only while the starter holds it:
        // one re-parented to init or a subreaper (the harness, a test) is
        // reaped by that one, not by the host.
        let starter = proc
            .records
            .iter()
            .find(|r| r["event"] == "started")
            .and_then(|r| observer::pid_in(&r["ppid"]));
        if !proc.survived() && is_same_zombie(proc.pid, started) {
            proc.zombie_of = observer::parent_of(proc.pid)
                .filter(|parent| *parent != 1 && Some(*parent) == starter);
        }
    }
    procs.sort_by_key(|p| p.at("started").unwrap_or(0));
    procs
}

/// `--grade DIR`: the report, and the processes still alive (to end).
pub fn grade(dir: &Path, filter: Option<&str>) -> Result<(Report, Vec<Survivor>), HostError> {
    let servers = read_state(dir)?;
    let ended: Vec<Value> = std::fs::read_to_string(dir.join(ENDED))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let mut all: BTreeMap<String, Vec<Proc>> = BTreeMap::new();
    let mut survivors = Vec::new();
    for server in &servers {
        let alive = observer::marked(&server.marker);
        survivors.extend(alive.iter().map(|m| Survivor {
            pid: m.pid,
            name: m.name.clone(),
            server: server.name.clone(),
            marker: server.marker.clone(),
        }));
        let procs = processes(server, &alive, &ended);
        for survivor in survivors.iter_mut().filter(|s| s.server == server.name) {
            if let Some(proc) = procs.iter().find(|p| p.pid == survivor.pid) {
                survivor.name.clone_from(&proc.fixture);
            }
        }
        all.insert(server.name.clone(), procs);
    }
    // The zero of every story: the host's first teardown action.
    let t0 = all
        .values()
        .flatten()
        .filter(|p| !p.sidecar)
        .flat_map(|p| {
            p.records
                .iter()
                .filter(|r| r["event"] == "stdin_eof" || r["event"] == "signal")
                .filter_map(|r| r["t_ms"].as_u64())
        })
        .min();
    for proc in all.values_mut().flatten() {
        proc.t0 = t0;
    }
    let top = |name: &str| -> Vec<&Proc> {
        let fixture = servers
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.fixture.as_str())
            .unwrap_or("");
        all.get(name)
            .map(|procs| {
                procs
                    .iter()
                    .filter(|p| p.fixture == fixture && !p.sidecar)
                    .collect()
            })
            .unwrap_or_default()
    };
    let era = top("well-behaved")
        .first()
        .map(|p| era_of(&p.records))
        .unwrap_or("unknown")
        .to_owned();

    let mut checks = vec![
        graceful(&top("well-behaved")),
        eof_first(&top("eof-ignoring")),
        sigterm(&top("eof-ignoring"), &top("term-ignoring")),
        sigkill(&top("term-ignoring")),
        group(&top("launcher"), all.get("launcher")),
        sidecar(&top("sidecar"), all.get("sidecar")),
        death(&top("crash")),
        stderr(&top("stderr-flood")),
        stdout(&top("stdout-banner")),
        exit_clean(&all),
    ];
    // Only in the set of `mcp-conformance host`.
    if servers.iter().any(|s| s.name == ESCAPING.name) {
        checks.push(escaped(&top(ESCAPING.name), all.get(ESCAPING.name)));
    }
    checks.retain(|c| filter.is_none_or(|f| c.id.contains(f)));
    checks.sort_by_key(|c| CHECK_IDS.iter().position(|id| c.id == *id));
    let report = Report {
        driver: format!("host, graded from {}", dir.display()),
        args: 0,
        era,
        host: true,
        checks,
        ..Report::default()
    };
    Ok((report, survivors))
}

fn never_started(id: &'static str, server: &str) -> CheckResult {
    CheckResult::new(
        id,
        Verdict::Skip,
        format!("the host never started `{server}` (is it enabled, and was `env` kept?)"),
    )
}

/// "2 of 3 starts: ..." when a server was started more than once.
fn of_starts(failed: usize, starts: usize, story: String) -> String {
    if starts > 1 {
        format!("{failed} of {starts} starts; first: {story}")
    } else {
        story
    }
}

/// Grades each start of a server: the first failing one (with its fix)
/// stands for all; otherwise a pass built from the first.
fn each(
    id: &'static str,
    server: &str,
    procs: &[&Proc],
    judge: impl Fn(&Proc) -> Result<(String, Value), (String, &'static str)>,
) -> CheckResult {
    if procs.is_empty() {
        return never_started(id, server);
    }
    let judged: Vec<_> = procs.iter().map(|p| judge(p)).collect();
    let failed: Vec<_> = judged.iter().filter_map(|j| j.as_ref().err()).collect();
    if let Some((story, fix)) = failed.first() {
        return CheckResult::new(
            id,
            Verdict::Fail,
            of_starts(failed.len(), procs.len(), story.clone()),
        )
        .fix(fix);
    }
    match &judged[0] {
        Ok((story, figures)) => CheckResult::new(id, Verdict::Pass, story.clone())
            .figures(figures.clone())
            .summary_prefix(procs.len()),
        Err(_) => unreachable!("no start failed"),
    }
}

impl CheckResult {
    /// Says how many times the server was started, when more than once.
    fn summary_prefix(mut self, starts: usize) -> CheckResult {
        if starts > 1 && self.verdict == Verdict::Pass {
            self.summary = format!("all {starts} starts; first: {}", self.summary);
        }
        self
    }
}

fn graceful(procs: &[&Proc]) -> CheckResult {
    each("close.graceful", "well-behaved", procs, |p| {
        let eof = p.at("stdin_eof");
        if p.survived() || p.zombie_of.is_some() || !p.signals().is_empty() || eof.is_none() {
            return Err((
                p.story(),
                "close the server's stdin first and wait for it to exit before any signal",
            ));
        }
        match p.exit() {
            Some(exit) if exit["reason"] == "stdin_eof" => {
                let eof_to_exit = exit["t_ms"]
                    .as_u64()
                    .unwrap_or(0)
                    .saturating_sub(eof.unwrap_or(0));
                Ok((p.story(), json!({ "eof_to_exit_ms": eof_to_exit })))
            }
            _ => Err((
                p.story(),
                "after closing stdin, give the server a grace to exit before killing it",
            )),
        }
    })
}

/// The least time between a server's stdin EOF and the first signal that
/// counts as "EOF first": a signal in the same instant as the EOF gives the
/// server no chance to exit on it, and which of the two the server happens
/// to see first is a race that must not decide the verdict
/// (docs/contract.md, 4.close.eof).
pub const EOF_GAP_MIN: Duration = Duration::from_millis(100);

fn eof_first(procs: &[&Proc]) -> CheckResult {
    let min = EOF_GAP_MIN.as_millis() as u64;
    each("close.eof_first", "eof-ignoring", procs, |p| {
        let first_signal = p.signals().first().map(|(_, at)| *at);
        match (p.at("stdin_eof"), first_signal) {
            (Some(eof), Some(signal)) if signal >= eof + min => {
                Ok((p.story(), json!({ "eof_to_signal_ms": signal - eof })))
            }
            (Some(eof), Some(signal)) => Err((
                format!(
                    "the first signal came {} EOF, under the {min} ms that make EOF first; {}",
                    if signal >= eof {
                        format!("{} ms after", signal - eof)
                    } else {
                        format!("{} ms before", eof - signal)
                    },
                    p.story()
                ),
                "close stdin, then wait a grace (the contract's EOF_GRACE, 2 s) for the server to exit before any signal",
            )),
            (Some(_), None) => Ok((p.story(), Value::Null)),
            _ => Err((
                p.story(),
                "close the server's stdin first: EOF is the stdio transport's shutdown signal",
            )),
        }
    })
}

/// The host's signal ladder as a server that ignores every polite signal
/// saw it: `SIGINT, SIGTERM` (SIGKILL leaves no record).
fn ladder(procs: &[&Proc]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for p in procs {
        for (signal, _) in p.signals() {
            if seen.last() != Some(&signal) {
                seen.push(signal);
            }
        }
        if !seen.is_empty() {
            break;
        }
    }
    seen
}

fn sigterm(procs: &[&Proc], term_ignoring: &[&Proc]) -> CheckResult {
    // What the host sends after SIGINT is seen on the server that ignores
    // SIGINT too: the EOF-ignoring server exits on the first polite signal.
    let ladder = ladder(term_ignoring);
    let ladder_has_term = ladder.iter().any(|s| s == "SIGTERM");
    each("close.sigterm", "eof-ignoring", procs, |p| {
        let signals = p.signals();
        let term = signals.iter().find(|(s, _)| s == "SIGTERM");
        let eof = p.at("stdin_eof");
        if p.survived() {
            return Err((
                p.story(),
                "after the EOF grace, send SIGTERM to the server's process group",
            ));
        }
        if let Some((_, at)) = term {
            let figures = match eof {
                Some(eof) => json!({ "eof_to_sigterm_ms": at.saturating_sub(eof) }),
                None => Value::Null,
            };
            return Ok((p.story(), figures));
        }
        match signals.first().map(|(s, _)| s.as_str()) {
            // A ladder that starts with SIGINT: graded on the rest of it.
            Some(first @ ("SIGINT" | "SIGHUP")) if ladder_has_term => Ok((
                format!(
                    "{}; the host's ladder is {} (as the SIGTERM-ignoring server saw it), and this server exited on {first}",
                    p.story(),
                    ladder.join(" → ")
                ),
                Value::Null,
            )),
            Some(first @ ("SIGINT" | "SIGHUP")) => Err((
                format!(
                    "{}; the host sent {first} and never SIGTERM (the SIGTERM-ignoring server saw {})",
                    p.story(),
                    if ladder.is_empty() {
                        "no signal".to_owned()
                    } else {
                        ladder.join(" → ")
                    }
                ),
                "after that signal's grace, send SIGTERM to the group, and give it a grace, before SIGKILL",
            )),
            Some(_) => Err((
                p.story(),
                "escalate with SIGTERM, and give it a grace, before SIGKILL",
            )),
            // No polite signal at all: it exited by other means or was killed.
            None if p.exit().is_none() => Err((
                p.story(),
                "the host went straight to SIGKILL: send SIGTERM to the group, and give it a grace, first",
            )),
            None => Err((
                p.story(),
                "escalate with SIGTERM, and give it a grace, before SIGKILL",
            )),
        }
    })
}

fn sigkill(procs: &[&Proc]) -> CheckResult {
    each("close.sigkill", "term-ignoring", procs, |p| {
        if p.survived() {
            Err((
                p.story(),
                "after the SIGTERM grace, send SIGKILL to the process group",
            ))
        } else {
            Ok((p.story(), Value::Null))
        }
    })
}

/// The processes of a server other than `top`'s: a launcher's child, a sidecar.
fn others<'a>(all: Option<&'a Vec<Proc>>, top: &[&Proc]) -> Vec<&'a Proc> {
    all.map(|procs| {
        procs
            .iter()
            .filter(|p| !top.iter().any(|t| t.pid == p.pid))
            .collect()
    })
    .unwrap_or_default()
}

fn group(launchers: &[&Proc], all: Option<&Vec<Proc>>) -> CheckResult {
    let children = others(all, launchers);
    if launchers.is_empty() {
        return never_started("close.group", "launcher");
    }
    let left: Vec<&Proc> = launchers
        .iter()
        .copied()
        .chain(children.iter().copied())
        .filter(|p| p.survived())
        .collect();
    if left.is_empty() {
        let seen: Vec<String> = children.iter().map(|c| c.story()).collect();
        CheckResult::new(
            "close.group",
            Verdict::Pass,
            format!("the launcher's child was ended too: {}", seen.join("; ")),
        )
    } else {
        CheckResult::new(
            "close.group",
            Verdict::Fail,
            format!(
                "the launcher's child survived the host: {}",
                left.iter()
                    .map(|p| p.story())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .fix("signal the server's whole process group (kill(-pgid)), not only its pid")
    }
}

fn sidecar(servers: &[&Proc], all: Option<&Vec<Proc>>) -> CheckResult {
    if servers.is_empty() {
        return never_started("close.sidecar", "sidecar");
    }
    let sidecars = others(all, servers);
    let left: Vec<&Proc> = sidecars.iter().copied().filter(|p| p.survived()).collect();
    if left.is_empty() {
        let seen: Vec<String> = sidecars.iter().map(|p| p.story()).collect();
        CheckResult::new(
            "close.sidecar",
            Verdict::Pass,
            if seen.is_empty() {
                format!("no sidecar recorded; {}", servers[0].story())
            } else {
                format!("the sidecar was ended too: {}", seen.join("; "))
            },
        )
    } else {
        CheckResult::new(
            "close.sidecar",
            Verdict::Fail,
            format!(
                "left in the server's group after the host: {}",
                left.iter()
                    .map(|p| p.story())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .fix("after the server exits, sweep its process group (SIGTERM, grace, SIGKILL)")
    }
}

/// Information only: how fast the host saw the crash is not visible from
/// outside; what is: that it crashed, and whether the host started it again.
fn death(procs: &[&Proc]) -> CheckResult {
    if procs.is_empty() {
        return never_started("death.fast", "crash");
    }
    let crashed = procs
        .iter()
        .filter(|p| p.exit().is_some_and(|e| e["reason"] == "crash"))
        .count();
    CheckResult::new(
        "death.fast",
        Verdict::Info,
        if crashed == 0 {
            "the host never called a tool of `crash` (call `echo` on it to see it die)".to_owned()
        } else {
            format!(
                "`crash` died on its tool call in {crashed} of {} start(s); how fast the host noticed is not visible from outside (a driver measures it)",
                procs.len()
            )
        },
    )
}

fn stderr(procs: &[&Proc]) -> CheckResult {
    let fix =
        "read the server's stderr continuously (or inherit it); a full pipe blocks the server";
    each("stderr.drained", "stderr-flood", procs, |p| {
        // Each flood: the request it answers, and when it was written out.
        let requests: Vec<&Value> = p
            .records
            .iter()
            .filter(|r| r["event"] == "request")
            .collect();
        let handshake = requests
            .iter()
            .find(|r| r["method"] == "initialize" || r["method"] == "server/discover");
        let calls: Vec<&&Value> = requests
            .iter()
            .filter(|r| r["method"] == "tools/call")
            .collect();
        let floods: Vec<&Value> = p
            .records
            .iter()
            .filter(|r| r["event"] == "stderr_flood")
            .collect();
        let mut waits = Vec::new();
        if let Some(handshake) = handshake {
            let done = floods.iter().find(|f| f.get("call").is_none());
            waits.push(("its handshake answer".to_owned(), handshake, done.copied()));
        }
        for (n, call) in calls.iter().enumerate() {
            let done = floods.iter().find(|f| f["call"] == json!(n + 1));
            waits.push((format!("call {}", n + 1), call, done.copied()));
        }
        let mut worst = 0u64;
        for (what, request, done) in &waits {
            let asked = request["t_ms"].as_u64().unwrap_or(0);
            if let Some(done) = done.filter(|d| d["cut_short"] == json!(true)) {
                return Err((
                    format!(
                        "the host stopped reading the server's stderr: before {what} the server could write only {} of {} bytes ({}); {}",
                        done["bytes"],
                        done["requested"],
                        done["error"].as_str().unwrap_or("write failed"),
                        p.story()
                    ),
                    fix,
                ));
            }
            match done.and_then(|d| d["t_ms"].as_u64()) {
                None => {
                    return Err((
                        format!(
                            "the server blocked writing stderr before {what} and never finished: the host does not read it; {}",
                            p.story()
                        ),
                        fix,
                    ));
                }
                Some(at) => worst = worst.max(at.saturating_sub(asked)),
            }
        }
        if waits.is_empty() {
            return Ok((
                "started, but the host never asked anything".to_owned(),
                Value::Null,
            ));
        }
        if worst > STUCK.as_millis() as u64 {
            return Err((
                format!("the server stalled {worst} ms behind its own stderr"),
                fix,
            ));
        }
        let stalled = if worst > STALL.as_millis() as u64 {
            " (a stall: the host reads stderr slowly)"
        } else {
            ""
        };
        Ok((
            format!(
                "{} stderr flood(s) (handshake and calls) written out, the slowest in {worst} ms{stalled}",
                waits.len()
            ),
            json!({ "slowest_flood_ms": worst }),
        ))
    })
}

fn stdout(procs: &[&Proc]) -> CheckResult {
    if procs.is_empty() {
        return never_started("stdout.tolerant", "stdout-banner");
    }
    let used = procs.iter().any(|p| {
        p.records.iter().any(|r| {
            r["event"] == "request"
                && matches!(r["method"].as_str(), Some("tools/list" | "tools/call"))
        })
    });
    if used {
        CheckResult::new(
            "stdout.tolerant",
            Verdict::Pass,
            "the host used the session past the banner lines on stdout",
        )
    } else {
        CheckResult::new(
            "stdout.tolerant",
            Verdict::Warn,
            "the host never listed or called tools after the handshake: banner lines on stdout may have broken the session",
        )
        .fix("skip (and log) stdout lines that are not JSON-RPC instead of failing")
    }
}

/// `close.escaped` (information, as in client mode): whether the setsid
/// sidecar outlived the host. No group signal reaches it; only a host that
/// contains its servers (a cgroup, a subreaper) ends it.
fn escaped(servers: &[&Proc], all: Option<&Vec<Proc>>) -> CheckResult {
    if servers.is_empty() {
        return never_started("close.escaped", ESCAPING.name);
    }
    let sidecars = others(all, servers);
    let left: Vec<String> = sidecars
        .iter()
        .filter(|p| p.survived())
        .map(|p| p.story())
        .collect();
    CheckResult::new(
        "close.escaped",
        Verdict::Info,
        if sidecars.is_empty() {
            format!("no setsid sidecar recorded; {}", servers[0].story())
        } else if left.is_empty() {
            format!(
                "the host swept the setsid sidecar too: {}",
                sidecars
                    .iter()
                    .map(|p| p.story())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        } else {
            format!(
                "the setsid sidecar outlived the host (expected of a host without containment: no group signal reaches it): {}",
                left.join("; ")
            )
        },
    )
}

fn exit_clean(all: &BTreeMap<String, Vec<Proc>>) -> CheckResult {
    let mut left = Vec::new();
    let mut zombies = Vec::new();
    for (server, procs) in all {
        for p in procs {
            // The escaped sidecar is `close.escaped`'s (information): no
            // group signal reaches it, and the contract asks none.
            if server == ESCAPING.name && p.sidecar {
                continue;
            }
            if p.survived() {
                left.push(format!("{} [{server}]", p.story()));
            } else if p.zombie_of.is_some() {
                zombies.push(format!("{} [{server}]", p.story()));
            }
        }
    }
    if all.values().all(Vec::is_empty) {
        return CheckResult::new(
            "exit.clean",
            Verdict::Skip,
            "the host started none of the servers (empty ledgers)",
        );
    }
    if !left.is_empty() {
        CheckResult::new(
            "exit.clean",
            Verdict::Fail,
            format!("alive after the host: {}", left.join("; ")),
        )
        .fix("end every process the host started (each server's whole process group) before it exits")
    } else if !zombies.is_empty() {
        CheckResult::new(
            "exit.clean",
            Verdict::Fail,
            format!("zombies: {}", zombies.join("; ")),
        )
        .fix("wait for (reap) each server process after it exits")
    } else {
        CheckResult::new(
            "exit.clean",
            Verdict::Pass,
            "nothing the servers started is alive or a zombie",
        )
    }
}

/// A live process of a fixture, to end after grading.
#[derive(Debug, Clone)]
pub struct Survivor {
    pub pid: u32,
    pub name: String,
    pub server: String,
    marker: String,
}

/// Ends every survivor with SIGKILL, each only if it still carries its
/// marker (a recycled pid is never signalled), and waits up to `within` for
/// them to be gone. Returns what was ended.
pub fn end(dir: &Path, survivors: &[Survivor], within: Duration) -> Vec<Survivor> {
    let ended: Vec<Survivor> = survivors
        .iter()
        .filter(|s| kill_if_marked(s.pid, &s.marker))
        .cloned()
        .collect();
    let lines: String = ended
        .iter()
        .map(|s| format!("{}\n", json!({ "pid": s.pid, "server": s.server })))
        .collect();
    if !lines.is_empty() {
        use std::io::Write as _;
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(ENDED))
            .and_then(|mut file| file.write_all(lines.as_bytes()));
        if let Err(error) = appended {
            eprintln!("mcp-conformance client: cannot record what was ended: {error}");
        }
    }
    let deadline = Instant::now() + within;
    while Instant::now() < deadline
        && ended
            .iter()
            .any(|s| observer::marked(&s.marker).iter().any(|m| m.pid == s.pid))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    ended
}

/// SIGKILL to `pid` if, and only if, it carries `--marker=<marker>`. The
/// pidfd is opened first and the marker checked after: if the pid was
/// recycled in between, the pidfd names the old (dead) process and the
/// signal goes nowhere.
fn kill_if_marked(pid: u32, marker: &str) -> bool {
    use mcp_stdio_process::signal::{Pidfd, Signal};
    let Some(fd) = Pidfd::open(pid) else {
        return false;
    };
    if !carries_marker(pid, marker) {
        return false;
    }
    fd.send_signal(Signal::SIGKILL).unwrap_or(false)
}

fn carries_marker(pid: u32, marker: &str) -> bool {
    let arg = format!("--marker={marker}");
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|cmdline| cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()))
        .unwrap_or(false)
}

/// True when `pid` is a zombie that started when the ledger says its
/// process started (so not a recycled pid): a zombie's argv is gone, its
/// start time is not.
fn is_same_zombie(pid: u32, started_ms: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, starttime field 22 (1-based).
    if fields.first() != Some(&"Z") {
        return false;
    }
    let Some(ticks) = fields.get(19).and_then(|t| t.parse::<u64>().ok()) else {
        return false;
    };
    let Some(boot_ms) = boot_epoch_ms() else {
        return false;
    };
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;
    let start_ms = boot_ms + ticks * 1000 / hz;
    // It started before it wrote `started` (a tick's rounding allowed), and
    // not long before.
    start_ms <= started_ms + 50 && started_ms.saturating_sub(start_ms) < 10_000
}

/// The time of boot, in milliseconds since the epoch (CLOCK_BOOTTIME is
/// the clock of /proc/<pid>/stat's start time).
fn boot_epoch_ms() -> Option<u64> {
    let mut since_boot = nix::libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a pointer to a timespec we own.
    if unsafe { nix::libc::clock_gettime(nix::libc::CLOCK_BOOTTIME, &mut since_boot) } != 0 {
        return None;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    let since_boot = Duration::new(since_boot.tv_sec as u64, since_boot.tv_nsec as u32);
    Some(now.checked_sub(since_boot)?.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that is gone, from its ledger records `(t_ms, event, extra)`.
    fn gone(fixture: &str, t0: u64, events: &[(u64, &str, Value)]) -> Proc {
        Proc {
            pid: 100,
            fixture: fixture.to_owned(),
            sidecar: false,
            records: events
                .iter()
                .map(|(t, event, extra)| {
                    let mut record = json!({ "t_ms": t, "event": event });
                    if let Value::Object(extra) = extra {
                        record.as_object_mut().unwrap().extend(extra.clone());
                    }
                    record
                })
                .collect(),
            alive: false,
            ended_by_grade: false,
            zombie_of: None,
            t0: Some(t0),
        }
    }

    fn signal(name: &str) -> Value {
        json!({ "signal": name })
    }

    #[test]
    fn a_signal_in_the_instant_of_the_eof_is_not_eof_first() {
        for gap in [0, 1, EOF_GAP_MIN.as_millis() as u64 - 1] {
            let p = gone(
                "fixture-eof-ignoring",
                1000,
                &[
                    (1000, "stdin_eof", Value::Null),
                    (1000 + gap, "signal", signal("SIGTERM")),
                    (1000 + gap, "exit", json!({ "reason": "signal" })),
                ],
            );
            let result = eof_first(&[&p]);
            assert_eq!(result.verdict, Verdict::Fail, "{gap}: {}", result.summary);
            assert!(
                result.summary.contains("under the 100 ms"),
                "{}",
                result.summary
            );
        }
        let p = gone(
            "fixture-eof-ignoring",
            1000,
            &[
                (1000, "stdin_eof", Value::Null),
                (1100, "signal", signal("SIGTERM")),
            ],
        );
        assert_eq!(eof_first(&[&p]).verdict, Verdict::Pass);
    }

    #[test]
    fn a_sigint_ladder_is_graded_by_what_the_term_ignoring_server_saw() {
        let eof_ignoring = gone(
            "fixture-eof-ignoring",
            0,
            &[
                (0, "stdin_eof", Value::Null),
                (300, "signal", signal("SIGINT")),
                (300, "exit", json!({ "reason": "signal" })),
            ],
        );
        let ladder = gone(
            "fixture-term-ignoring",
            0,
            &[
                (0, "stdin_eof", Value::Null),
                (300, "signal", signal("SIGINT")),
                (600, "signal", signal("SIGTERM")),
            ],
        );
        let result = sigterm(&[&eof_ignoring], &[&ladder]);
        assert_eq!(result.verdict, Verdict::Pass, "{}", result.summary);
        assert!(
            result.summary.contains("SIGINT → SIGTERM"),
            "{}",
            result.summary
        );
        // SIGINT only: the fix says what is missing after it.
        let no_term = gone(
            "fixture-term-ignoring",
            0,
            &[
                (0, "stdin_eof", Value::Null),
                (300, "signal", signal("SIGINT")),
            ],
        );
        let result = sigterm(&[&eof_ignoring], &[&no_term]);
        assert_eq!(result.verdict, Verdict::Fail);
        assert!(result.fix.unwrap().contains("send SIGTERM"), "{result:?}");
        // Straight to SIGKILL: nothing recorded, no end.
        let killed = gone("fixture-eof-ignoring", 0, &[(0, "stdin_eof", Value::Null)]);
        let result = sigterm(&[&killed], &[]);
        assert!(
            result.fix.unwrap().contains("straight to SIGKILL"),
            "{result:?}"
        );
    }

    #[test]
    fn a_story_is_in_true_order_with_times_from_the_first_teardown_action() {
        let p = gone(
            "fixture-term-ignoring",
            500,
            &[
                (520, "signal", signal("SIGTERM")),
                (700, "stdin_eof", Value::Null),
            ],
        );
        assert_eq!(
            p.story(),
            "fixture-term-ignoring (pid 100): SIGTERM at +20 ms, 180 ms before EOF, \
             stdin EOF at +200 ms, killed (SIGKILL: it recorded no end)"
        );
    }
}
