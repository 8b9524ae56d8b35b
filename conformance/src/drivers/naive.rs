//! `mcp-conformance driver naive`: a deliberately simple client behind the
//! driver protocol (`docs/client-check.md`), with one lifecycle mistake chosen by `--mode`,
//! so each check of `mcp-conformance client` is shown to fail for the
//! reason it names. Without `--mode` it does everything right: its own
//! process group per server, EOF first, SIGTERM then SIGKILL to the group,
//! a sweep, bounded start-up, cancellation, fast failure on a dead server.
//!
//! Modes: `kill-pid` (close = SIGKILL to the pid, no EOF), `no-escalation`
//! (close = EOF only, then give up), `pid-signals` (signals the pid, never
//! the group), `exit-without-close` (close and exit leave the server),
//! `no-handshake-timeout` (waits for `initialize` forever),
//! `claims-containment` (says `"contain": true` in its `connect` answer, but
//! ends only the group, so a `setsid` sidecar outlives close),
//! `cleanup-later` (not a mistake: after a failed start it answers at once
//! and ends the server on its close schedule afterwards, on a thread of its
//! own, as the TypeScript SDK does), `ladder-on-exit` (not a mistake
//! either: a program that ends without close runs the whole close ladder,
//! EOF first, rather than killing the group at once).
//! `unread-stderr` (never reads the server's stderr, and gives up on it:
//! closes its end of the pipe a second after the start, so the server's
//! writes to stderr fail), `zombie` (closes correctly but never reaps the
//! server: it stays a zombie of the client while the client runs).
//! Modes that are not mistakes, only other choices a client may make, so
//! that the harness is shown to grade them fairly: `same-group` (servers
//! stay in the client's own process group, as the TypeScript SDK leaves
//! them; signals go to the pid), `session-leader` (servers are started as
//! session leaders with `setsid`, as the Python SDK starts them).
//! It speaks the legacy `initialize` era only.
//!
//! How it presents itself, for the tests of the driver protocol:
//! `--protocol 1` (a version 1 driver: no `hello`), `--startup-delay MS`
//! (a slow interpreter: sleeps before it reads its first request),
//! `--fixed-graces EOF_MS,TERM_MS` (ignores the graces asked of it and
//! closes on its own schedule, as the SDKs do, and declares it),
//! `--declare-graces EOF_MS,TERM_MS` (declares those graces, whatever it
//! does), `--cannot-load` (a driver whose client library is missing: it
//! prints an error and a stack trace, as node does, and exits 1).

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Read, Write},
    os::unix::process::CommandExt,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use super::protocol::{answer, millis};
use crate::driver::{ClientInfo, Graces, Hello, LeaderKind, Settings};
use mcp_stdio_process::{
    Signal,
    signal::{signal_group, signal_pid},
};
use serde_json::{Value, json};

/// `mcp-conformance driver naive [OPTIONS]`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lifecycle mistake (or other choice) to make; without it, none.
    #[arg(long, value_enum)]
    mode: Option<Mode>,

    /// The driver protocol version to speak: 1 knows no `hello`.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=2))]
    protocol: u32,

    /// Sleep MS before reading the first request (a slow interpreter).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    startup_delay: u64,

    /// Ignore the graces asked and close on this schedule, and declare it.
    #[arg(long, value_name = "EOF_MS,TERM_MS", value_parser = graces)]
    fixed_graces: Option<(u64, u64)>,

    /// Declare these graces in `hello`, whatever the driver does.
    #[arg(long, value_name = "EOF_MS,TERM_MS", value_parser = graces)]
    declare_graces: Option<(u64, u64)>,

    /// Be a driver whose client library is missing: print an error and a
    /// stack trace, as node does, and exit 1.
    #[arg(long)]
    cannot_load: bool,
}

/// `EOF_MS,TERM_MS`.
fn graces(text: &str) -> Result<(u64, u64), String> {
    text.split_once(',')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| format!("takes EOF_MS,TERM_MS, got `{text}`"))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    /// No mistake: what runs without `--mode`.
    #[value(skip)]
    Correct,
    KillPid,
    NoEscalation,
    PidSignals,
    ExitWithoutClose,
    NoHandshakeTimeout,
    ClaimsContainment,
    CleanupLater,
    LadderOnExit,
    UnreadStderr,
    Zombie,
    SameGroup,
    SessionLeader,
    /// Closes correctly, then says in its close answer that it had not
    /// reaped the server yet (`reaped: false`): the harness must take the
    /// client's word, as it does for an SDK that returns before reaping.
    SaysUnreaped,
}

/// How the driver presents itself (the flags besides `--mode`).
struct Presentation {
    protocol: u32,
    startup_delay: Duration,
    fixed_graces: Option<(u64, u64)>,
    declared_graces: Option<(u64, u64)>,
    cannot_load: bool,
}

impl Presentation {
    fn from_args(args: &Args) -> Self {
        Presentation {
            protocol: args.protocol,
            startup_delay: Duration::from_millis(args.startup_delay),
            fixed_graces: args.fixed_graces,
            declared_graces: args.declare_graces,
            cannot_load: args.cannot_load,
        }
    }

    /// The answer to `hello`: version 2 says what it does; version 1 knows
    /// no such op.
    fn hello(&self, mode: Mode) -> Result<Value, String> {
        if self.protocol == 1 {
            return Err("unknown op `hello`".to_owned());
        }
        let declared = self.declared_graces.or(self.fixed_graces);
        Ok(json!(Hello {
            protocol: 2,
            client: ClientInfo {
                name: "mcp-driver-naive".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            eras: vec!["legacy".into()],
            settings: Settings {
                graces: if declared.is_some() {
                    Graces::Fixed
                } else {
                    Graces::Asked
                },
                eof_grace_ms: Some(declared.map_or(2000, |(eof, _)| eof)),
                term_grace_ms: Some(declared.map_or(2000, |(_, term)| term)),
                leader: match mode {
                    Mode::SameGroup => LeaderKind::None,
                    Mode::SessionLeader => LeaderKind::Session,
                    _ => LeaderKind::Group,
                },
                handshake_bound: mode != Mode::NoHandshakeTimeout,
                contain: mode == Mode::ClaimsContainment,
            },
        }))
    }
}

/// What a node program whose package is not installed prints.
const CANNOT_LOAD: &str = "node:internal/modules/esm/resolve:873
  throw new ERR_MODULE_NOT_FOUND(packageName, fileURLToPath(base), null);
        ^

Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@example/mcp-sdk' imported from /drivers/naive/driver.mjs
    at packageResolveSync (node:internal/modules/esm/resolve:873:9)
    at moduleResolve (node:internal/modules/esm/resolve:946:18)
    at defaultResolve (node:internal/modules/esm/resolve:1188:11)
    at ModuleLoader.defaultResolve (node:internal/modules/esm/loader:642:12)
    at #cachedDefaultResolve (node:internal/modules/esm/loader:591:25)
    at ModuleLoader.resolve (node:internal/modules/esm/loader:574:38)
    at ModuleLoader.getModuleJobForImport (node:internal/modules/esm/loader:236:38)
    at ModuleJob._link (node:internal/modules/esm/module_job:130:49) {
  code: 'ERR_MODULE_NOT_FOUND'
}

Node.js v22.11.0
";

/// How long `unread-stderr` holds the server's stderr unread before it
/// closes its end.
const STDERR_GIVEN_UP_AFTER: Duration = Duration::from_secs(1);

type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Value, String>>>>>;

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    pending: Pending,
    dead: Arc<Mutex<bool>>,
    next_id: u64,
    timeout: Duration,
    eof_grace: Duration,
    term_grace: Duration,
    /// `zombie`: the child is never waited for.
    never_reaps: bool,
    /// `same-group`: the server is in the client's own group.
    same_group: bool,
}

/// True when `pid` has exited (a zombie) or is gone, without reaping it.
fn exited_unreaped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            == Some("Z")
    })
}

/// `mcp-conformance driver naive`; returns the exit code (or exits at once
/// on `exit`, as a program that ends there).
pub fn main(args: &Args) -> u8 {
    let mode = args.mode.unwrap_or(Mode::Correct);
    let presentation = Presentation::from_args(args);
    if presentation.cannot_load {
        let _ = std::io::stderr().write_all(CANNOT_LOAD.as_bytes());
        return 1;
    }
    // A slow interpreter loading its SDK, before it reads anything.
    std::thread::sleep(presentation.startup_delay);
    let mut server: Option<Server> = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let id = request["id"].clone();
        let result = match request["op"].as_str().unwrap_or("") {
            "hello" => presentation.hello(mode),
            "connect" => connect(&request, mode, presentation.fixed_graces).map(|s| {
                server = Some(s);
                // The claim without the deed.
                if mode == Mode::ClaimsContainment {
                    json!({ "contain": true })
                } else {
                    json!({})
                }
            }),
            "exit" => {
                answer(&id, Ok(json!({})));
                if let Some(server) = &mut server {
                    match mode {
                        Mode::ExitWithoutClose => {}
                        Mode::LadderOnExit => close(server, Mode::Correct),
                        _ => {
                            kill_group(server, Signal::SIGKILL);
                            if mode != Mode::Zombie {
                                let _ = server.child.wait();
                            }
                        }
                    }
                }
                std::process::exit(0);
            }
            op => match &mut server {
                None => Err("not connected".to_owned()),
                Some(server) => act(server, op, &request, mode),
            },
        };
        answer(&id, result);
    }
    0
}

fn connect(
    request: &Value,
    mode: Mode,
    fixed_graces: Option<(u64, u64)>,
) -> Result<Server, String> {
    let spec = &request["server"];
    let mut command = Command::new(spec["command"].as_str().unwrap_or(""));
    for arg in spec["args"].as_array().into_iter().flatten() {
        command.arg(arg.as_str().unwrap_or(""));
    }
    for (key, value) in spec["env"].as_object().into_iter().flatten() {
        command.env(key, value.as_str().unwrap_or(""));
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match mode {
        Mode::SameGroup => {}
        Mode::SessionLeader => {
            // SAFETY: setsid is async-signal-safe and touches no Rust state.
            unsafe {
                command.pre_exec(|| {
                    nix::unistd::setsid()
                        .map(drop)
                        .map_err(std::io::Error::from)
                });
            }
        }
        _ => {
            command.process_group(0);
        }
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start the server: {e}"))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    if mode == Mode::UnreadStderr {
        // Never read; closed after a while, as a host that gives up on a
        // stream it does not want.
        std::thread::spawn(move || {
            std::thread::sleep(STDERR_GIVEN_UP_AFTER);
            drop(stderr);
        });
    } else {
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while matches!(stderr.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    let pending: Pending = Arc::default();
    let dead = Arc::new(Mutex::new(false));
    {
        let pending = pending.clone();
        let dead = dead.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue; // not JSON: skipped
                };
                let Some(id) = message["id"].as_u64() else {
                    continue;
                };
                if message.get("method").is_some() {
                    continue; // a request from the server: not answered
                }
                if let Some(tx) = pending.lock().unwrap().remove(&id) {
                    let _ = tx.send(match message.get("error") {
                        Some(error) => Err(error.to_string()),
                        None => Ok(message["result"].clone()),
                    });
                }
            }
            // Stdout closed: the server is gone; fail everything in flight.
            *dead.lock().unwrap() = true;
            for (_, tx) in pending.lock().unwrap().drain() {
                let _ = tx.send(Err("the server exited".into()));
            }
        });
    }
    let mut server = Server {
        stdin: child.stdin.take(),
        child,
        pending,
        dead,
        next_id: 1,
        timeout: millis(&request["timeout_ms"], 30_000),
        eof_grace: millis(&request["eof_grace_ms"], 2000),
        term_grace: millis(&request["term_grace_ms"], 2000),
        never_reaps: mode == Mode::Zombie,
        same_group: mode == Mode::SameGroup,
    };
    // Its own schedule, whatever is asked.
    if let Some((eof, term)) = fixed_graces {
        server.eof_grace = Duration::from_millis(eof);
        server.term_grace = Duration::from_millis(term);
    }
    let timeout = if mode == Mode::NoHandshakeTimeout {
        Duration::from_secs(24 * 3600)
    } else {
        server.timeout
    };
    let init = json!({
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": { "name": "mcp-driver-naive", "version": "1" },
    });
    match server.request("initialize", init, timeout) {
        Ok(_) => {
            server.notify("notifications/initialized", json!({}));
            Ok(server)
        }
        Err(error) if mode == Mode::CleanupLater => {
            std::thread::spawn(move || close(&mut server, Mode::Correct));
            Err(format!("start-up failed: {error}"))
        }
        Err(error) => {
            kill_group(&mut server, Signal::SIGKILL);
            let _ = server.child.wait();
            Err(format!("start-up failed: {error}"))
        }
    }
}

impl Server {
    fn send(&mut self, message: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin is closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("cannot write to the server: {e}"))
    }

    fn notify(&mut self, method: &str, params: Value) {
        let _ = self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    fn request(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Value, String> {
        if *self.dead.lock().unwrap() {
            return Err("the server exited".into());
        }
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = mpsc::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))?;
        match rx.recv_timeout(timeout) {
            Ok(answer) => answer,
            Err(_) => {
                self.pending.lock().unwrap().remove(&id);
                self.notify(
                    "notifications/cancelled",
                    json!({ "requestId": id, "reason": "timed out" }),
                );
                Err(format!("{method} timed out"))
            }
        }
    }

    fn exited_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.never_reaps {
                // Seen exited, never waited for: it stays our zombie.
                if exited_unreaped(self.child.id()) {
                    return true;
                }
            } else if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Signals the server's group, or only its pid in `pid-signals` mode and
/// in `same-group` mode (its group is the client's own).
fn signal(server: &mut Server, signal: Signal, mode: Mode) {
    // The server is this driver's unreaped child, so its pid (and group id)
    // is still its own.
    let pid = server.child.id();
    if matches!(mode, Mode::PidSignals | Mode::SameGroup) {
        let _ = signal_pid(pid, signal);
    } else {
        let _ = signal_group(pid, signal);
    }
}

/// Signals the server's group; in `same-group` mode (its group is the
/// client's own) only the pid.
fn kill_group(server: &mut Server, signal: Signal) {
    let pid = server.child.id();
    if server.same_group {
        let _ = signal_pid(pid, signal);
    } else {
        let _ = signal_group(pid, signal);
    }
}

fn act(server: &mut Server, op: &str, request: &Value, mode: Mode) -> Result<Value, String> {
    match op {
        "list_tools" => {
            let timeout = server.timeout;
            server.request("tools/list", json!({}), timeout)
        }
        "call_tool" => {
            let timeout = millis(&request["timeout_ms"], server.timeout.as_millis() as u64);
            let params = json!({ "name": request["name"], "arguments": request["arguments"] });
            // The driver protocol's answer is `{"is_error": bool}`; the
            // result on the wire names it `isError` (absent means false).
            let result = server.request("tools/call", params, timeout)?;
            Ok(json!({ "is_error": result["isError"].as_bool().unwrap_or(false) }))
        }
        "close" => {
            close(server, mode);
            if mode == Mode::SaysUnreaped {
                Ok(json!({ "reaped": false }))
            } else {
                Ok(json!({}))
            }
        }
        other => Err(format!("unknown op `{other}`")),
    }
}

fn close(server: &mut Server, mode: Mode) {
    match mode {
        Mode::ExitWithoutClose => {}
        Mode::KillPid => {
            let _ = signal_pid(server.child.id(), Signal::SIGKILL);
            let _ = server.child.wait();
        }
        Mode::NoEscalation => {
            server.stdin = None;
            if server.exited_within(server.eof_grace + server.term_grace) {
                let _ = server.child.wait();
            }
        }
        Mode::Correct
        | Mode::PidSignals
        | Mode::NoHandshakeTimeout
        | Mode::ClaimsContainment
        | Mode::CleanupLater
        | Mode::LadderOnExit
        | Mode::UnreadStderr
        | Mode::Zombie
        | Mode::SameGroup
        | Mode::SessionLeader
        | Mode::SaysUnreaped => {
            server.stdin = None;
            if !server.exited_within(server.eof_grace) {
                signal(server, Signal::SIGTERM, mode);
                if !server.exited_within(server.term_grace) {
                    signal(server, Signal::SIGKILL, mode);
                }
            }
            // The leader is not yet reaped, so its group id is still ours:
            // sweep what it left behind, then reap.
            if !matches!(mode, Mode::PidSignals | Mode::SameGroup) {
                let _ = server.exited_within(server.term_grace);
                kill_group(server, Signal::SIGKILL);
            }
            if mode != Mode::Zombie {
                let _ = server.child.wait();
            }
        }
    }
}
