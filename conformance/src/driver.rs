//! The harness's side of the driver protocol (`docs/client-check.md`): a
//! driver is a small program in the client's own language that drives the
//! client under test on command, one JSON object per line over the driver's
//! own stdin and stdout.
//!
//! Below both users of a driver: `client` mode (`client_check`) and the
//! scenario runner's external subject (`runner::subject::external`), which
//! register the driver in use here so an interrupt can end it
//! ([`interrupted`]).

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::ChildStdin,
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use mcp_stdio_process::{ChildExit, ExitWatch, Signal, SpawnOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::observer;

/// The newest protocol version this harness speaks; it still speaks every
/// older one (a version 1 driver answers `hello` with an error).
pub const PROTOCOL: u32 = 2;

/// How long a driver may take to load its client library and answer
/// `hello`: a cold interpreter importing an SDK takes seconds, a loaded
/// machine several times that. Past it the run cannot go on ("could not
/// run", exit 2), never a column of failed checks.
pub const HELLO_BOUND: Duration = Duration::from_secs(60);

/// How much of the driver's stderr is kept for messages.
const STDERR_KEPT: usize = 16 << 10;

/// How long the harness waits, once the driver has ended, for the last of
/// its stderr and for its exit status, so the message carries the driver's
/// own last words.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// What a version 2 driver says about its client in answer to `hello`
/// (`docs/client-check.md`, "The driver protocol, version 2").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The protocol version the driver speaks (2).
    pub protocol: u32,
    /// The client under test: its library's name and version.
    pub client: ClientInfo,
    /// The protocol eras the client speaks (`modern`, `legacy`).
    pub eras: Vec<String>,
    /// What the client really does, whatever the harness asks.
    pub settings: Settings,
}

/// The client library under test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
}

/// The settings a client really uses: the harness grades it by them (close
/// times, waits), not by what it asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Whether the client takes the `eof_grace_ms` and `term_grace_ms` of
    /// each `connect` (`asked`) or closes on a schedule of its own (`fixed`).
    pub graces: Graces,
    /// The fixed EOF grace: how long close waits after closing stdin before
    /// it signals; `null` when the client has no such wait. With `asked`,
    /// its default (information only).
    #[serde(default)]
    pub eof_grace_ms: Option<u64>,
    /// The fixed SIGTERM grace: how long close waits after SIGTERM before
    /// SIGKILL; `null` when the client sends no SIGTERM.
    #[serde(default)]
    pub term_grace_ms: Option<u64>,
    /// How the client starts a server.
    pub leader: LeaderKind,
    /// Whether the client bounds start-up (the handshake) by a timeout.
    pub handshake_bound: bool,
    /// Whether the client turns containment on when `connect` asks for it
    /// (the claim `close.escaped` holds it to).
    pub contain: bool,
}

/// Whether a client takes the graces the harness asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Graces {
    Asked,
    Fixed,
}

/// How a client starts a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaderKind {
    /// In a process group of its own (`setpgid(0, 0)`), in the client's session.
    Group,
    /// In a session of its own (`setsid`): it leads its group too, and can
    /// no longer move to another group (`setpgid` fails with EPERM).
    Session,
    /// In the client's own process group.
    None,
}

impl Hello {
    /// The graces the client really closes with, given `asked`: the asked
    /// ones for a client that takes them, else the ones it declared (a step
    /// it does not have counts as no wait at all).
    pub fn graces(&self, asked: (Duration, Duration)) -> (Duration, Duration) {
        match self.settings.graces {
            Graces::Asked => asked,
            Graces::Fixed => {
                let ms = |value: Option<u64>| Duration::from_millis(value.unwrap_or(0));
                (
                    ms(self.settings.eof_grace_ms),
                    ms(self.settings.term_grace_ms),
                )
            }
        }
    }

    /// Where a client's graces come from, for messages.
    pub fn graces_source(hello: Option<&Hello>) -> &'static str {
        match hello.map(|h| h.settings.graces) {
            Some(Graces::Fixed) => "as the client declared them",
            Some(Graces::Asked) => "as asked of the client",
            None => "as asked of the client (a version 1 driver declares none)",
        }
    }
}

/// A failure of the driver itself (not of the client it drives).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error(
        "cannot start the driver `{program}`{}: {}",
        arguments_suffix(*args),
        start_reason(program, io)
    )]
    Start {
        /// The program as given; its arguments are counted, never printed.
        program: String,
        args: usize,
        /// Said in the message (not a `source`, so a chain does not say it
        /// twice).
        io: std::io::Error,
    },
    #[error("the driver did not answer `{op}` within {}", crate::units::human(*within))]
    NoAnswer { op: String, within: Duration },
    #[error(
        "the driver ended before it answered `{op}`{}{}",
        status.as_deref().map(|s| format!(" ({s})")).unwrap_or_default(),
        stderr_suffix(stderr)
    )]
    Ended {
        op: String,
        /// How the driver ended, when it was seen to (`exit status 1`).
        status: Option<String>,
        stderr: String,
    },
    #[error("the driver's answer to `hello` is not a version {PROTOCOL} hello: {detail}")]
    Hello { detail: String },
}

/// Why `program` could not be started, in the command line's terms: a bare
/// name that is nowhere on the PATH is said to be so, with what to do.
fn start_reason(program: &str, error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound && !program.contains('/') {
        format!(
            "`{program}` is not on the PATH; fix: install it or add its directory to PATH, or \
             give the program's path (`./{program}` for one in the current directory)"
        )
    } else {
        error.to_string()
    }
}

/// How many of the driver's last stderr lines a message shows.
const TAIL_LINES: usize = 5;

/// The driver's last stderr lines, and its error line above them when the
/// tail does not hold it: an interpreter that cannot load a package prints
/// the error first and a stack trace after it (node: `Error
/// [ERR_MODULE_NOT_FOUND]: Cannot find package ...`, then ten `at` lines),
/// and the error line is the one that says what to do.
fn stderr_suffix(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return String::new();
    }
    let lines: Vec<&str> = stderr.lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let mut shown: Vec<&str> = Vec::new();
    if let Some(error) = lines[..start].iter().rev().find(|line| error_line(line)) {
        shown.push(error);
        shown.push("...");
    }
    shown.extend(&lines[start..]);
    format!("; its last stderr lines:\n  {}", shown.join("\n  "))
}

/// A line that states an error (`ModuleNotFoundError: ...`, `Error
/// [ERR_...]: ...`, `error: ...`), not a frame of a stack trace.
fn error_line(line: &str) -> bool {
    let trimmed = line.trim_start();
    !trimmed.starts_with("at ")
        && !trimmed.starts_with("File ")
        && trimmed.to_lowercase().contains("error")
}

/// What the client answered: its result, or its own error message.
pub type Answer = Result<Value, String>;

/// How long the harness waits for a driver it SIGKILLed to be seen gone:
/// the kernel ends it at once, this only bounds a process stuck in the
/// kernel (it is then reaped by its observer whenever it does exit).
const KILLED_BOUND: Duration = Duration::from_secs(10);

/// A running driver.
pub struct Driver {
    /// Its pid, which is its process group id.
    pid: u32,
    /// Its exit, and the only way to signal it and its group.
    exit: ExitWatch,
    /// [`Driver::finish`] has ended and released it: nothing is left for
    /// the drop to do.
    finished: bool,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Told when the driver's stderr reaches EOF.
    stderr_done: Option<mpsc::Receiver<()>>,
    next_id: u64,
    /// What the driver said in answer to `hello`; `None` for a version 1
    /// driver.
    hello: Option<Hello>,
    /// Lines on the driver's stdout that were not protocol answers.
    pub stray_lines: Vec<String>,
}

impl Driver {
    /// Starts `argv` in a process group of its own (so the harness can end
    /// it, and everything it left in its group, whatever happens), without
    /// waiting for it to be ready: the caller registers it (so an interrupt
    /// ends it) before [`Driver::hello`].
    pub fn spawn(argv: &[String]) -> Result<Driver, DriverError> {
        let mut options = SpawnOptions::new();
        // The harness's anchor: the keeper ends the driver, and whatever
        // inherits its environment, if the harness is SIGKILLed.
        if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
            options = options.env(mcp_stdio_process::ANCHOR_ENV, anchor.to_string());
        }
        // Its own group (spawn's default), so ending it ends what it left
        // there. And the harness blocks SIGINT, SIGTERM and SIGHUP to take
        // them on a thread of its own: the driver, and every server its
        // client starts, must not inherit that (spawn starts it with an
        // empty mask).
        let mut child = mcp_stdio_process::spawn_blocking_with(
            Path::new(&argv[0]),
            &argv[1..],
            &options,
            "driver",
            |_| {},
        )
        .map_err(|io| DriverError::Start {
            program: argv[0].clone(),
            args: argv.len() - 1,
            io,
        })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        let (done, stderr_done) = mpsc::channel();
        std::thread::spawn(move || {
            let _done = Defer(Some(move || {
                let _ = done.send(());
            }));
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = sink.lock().unwrap_or_else(|e| e.into_inner());
                kept.extend_from_slice(&buf[..n]);
                if kept.len() > STDERR_KEPT {
                    let cut = kept.len() - STDERR_KEPT;
                    kept.drain(..cut);
                }
            }
        });
        Ok(Driver {
            pid: child.pid,
            exit: child.exit,
            finished: false,
            stdin: Some(child.stdin),
            lines,
            stderr,
            stderr_done: Some(stderr_done),
            next_id: 1,
            hello: None,
            stray_lines: Vec::new(),
        })
    }

    /// The start-up handshake: `{"id": 0, "op": "hello", "protocol": 2}`.
    /// A version 2 driver answers with its [`Hello`]; a version 1 driver,
    /// which knows no `hello`, answers with an error (or with a result that
    /// has no `protocol`). Either way the answer comes only once the driver
    /// reads its stdin, after its client library is loaded: the harness
    /// sends nothing else before it, so no timing includes the driver's
    /// start-up.
    pub fn hello(&mut self) -> Result<(), DriverError> {
        let answer = self.exchange(0, "hello", json!({ "protocol": PROTOCOL }), HELLO_BOUND)?;
        let result = match answer {
            Ok(result) if result.get("protocol").is_some() => result,
            // Version 1.
            Ok(_) | Err(_) => return Ok(()),
        };
        let hello: Hello = serde_json::from_value(result).map_err(|error| DriverError::Hello {
            detail: error.to_string(),
        })?;
        if hello.protocol < 2 || hello.protocol > PROTOCOL {
            return Err(DriverError::Hello {
                detail: format!(
                    "it says protocol {}; this harness speaks 1 to {PROTOCOL}",
                    hello.protocol
                ),
            });
        }
        self.hello = Some(hello);
        Ok(())
    }

    /// What the driver said about its client (`None`: a version 1 driver).
    pub fn hello_said(&self) -> Option<&Hello> {
        self.hello.as_ref()
    }

    /// The protocol version the driver speaks.
    pub fn protocol(&self) -> u32 {
        self.hello.as_ref().map_or(1, |hello| hello.protocol)
    }

    /// The driver ended before it answered `op`: its exit status and its
    /// last words, once its stderr is read to the end (bounded: a server
    /// that inherited the driver's stderr may hold it open).
    fn ended(&mut self, op: &str) -> DriverError {
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(LAST_WORDS);
        }
        let status = self
            .exit
            .wait_blocking(LAST_WORDS)
            .and_then(describe_status);
        DriverError::Ended {
            op: op.to_owned(),
            status,
            stderr: self.stderr(),
        }
    }

    /// The driver's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The driver's exit watch: how an interrupt signals its group while
    /// the pid is still the driver's.
    pub(crate) fn exit(&self) -> &ExitWatch {
        &self.exit
    }

    /// The driver's stderr so far (its tail).
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// Sends `op` with `fields` and waits up to `within` for its answer.
    pub fn request(
        &mut self,
        op: &str,
        fields: Value,
        within: Duration,
    ) -> Result<Answer, DriverError> {
        let id = self.next_id;
        self.next_id += 1;
        self.exchange(id, op, fields, within)
    }

    fn exchange(
        &mut self,
        id: u64,
        op: &str,
        fields: Value,
        within: Duration,
    ) -> Result<Answer, DriverError> {
        let mut message = json!({ "id": id, "op": op });
        if let (Some(message), Value::Object(fields)) = (message.as_object_mut(), fields) {
            message.extend(fields);
        }
        let line = format!("{message}\n");
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if written.is_err() {
            return Err(self.ended(op));
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(DriverError::NoAnswer {
                        op: op.to_owned(),
                        within,
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(self.ended(op)),
            };
            let Ok(answer) = serde_json::from_str::<Value>(&line) else {
                self.stray_lines.push(line);
                continue;
            };
            if answer["id"] != json!(id) {
                self.stray_lines.push(line);
                continue;
            }
            return Ok(if answer["ok"] == json!(true) {
                Ok(answer.get("result").cloned().unwrap_or(Value::Null))
            } else {
                Err(answer["error"]
                    .as_str()
                    .unwrap_or("(the driver gave no message)")
                    .to_owned())
            });
        }
    }

    /// Waits up to `within` for the driver to exit by itself; true if it did.
    pub fn wait_exit(&mut self, within: Duration) -> bool {
        self.exit.wait_blocking(within).is_some()
    }

    /// Ends the driver: stdin closed, a moment to exit, then SIGKILL to its
    /// whole group; always reaped (once it has exited).
    pub fn finish(&mut self, within: Duration) {
        self.stdin = None;
        if !self.wait_exit(within) {
            // Through the exit watch: the pid is unreaped, so the group id
            // is still the driver's.
            let _ = self.exit.signal_group(Signal::SIGKILL);
            self.exit.wait_blocking(KILLED_BOUND);
        }
        self.exit.release();
        self.finished = true;
    }
}

/// `exit status 1`, `killed by SIGKILL`; `None` when the status is unknown
/// (the driver was reaped elsewhere).
fn describe_status(status: ChildExit) -> Option<String> {
    match status {
        ChildExit::UNKNOWN => None,
        ChildExit::Code(code) => Some(format!("exit status {code}")),
        ChildExit::Signal(signal) => Some(match Signal::try_from(signal) {
            Ok(signal) => format!("killed by {signal}"),
            Err(_) => format!("killed by signal {signal}"),
        }),
    }
}

/// Runs its closure when dropped: the stderr reader says it is done however
/// its loop ends.
struct Defer<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for Defer<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if self.exit.now().is_none() {
            let _ = self.exit.signal_group(Signal::SIGKILL);
            self.exit.wait_blocking(KILLED_BOUND);
        }
        self.exit.release();
    }
}

/// ` (+N arguments)` (` (+1 argument)`), or nothing without arguments: the words `server`
/// mode uses for its server's arguments.
pub fn arguments_suffix(args: usize) -> String {
    match args {
        0 => String::new(),
        1 => " (+1 argument)".to_owned(),
        n => format!(" (+{n} arguments)"),
    }
}

// The driver in use, for an interrupt to end.

/// The run in progress: its driver's exit watch (its pid is its process
/// group) and its marker, for [`interrupted`].
static CURRENT: std::sync::Mutex<Option<(ExitWatch, String)>> = std::sync::Mutex::new(None);

/// Ends the run in progress at once (SIGINT, SIGTERM or SIGHUP to the
/// harness): SIGKILL to the driver's group, then to every process the run
/// started, wherever it went; all reaped. The lock is held throughout, so
/// no run can finish (and release the driver) under it.
pub fn interrupted() {
    let current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((driver, marker)) = current.as_ref() {
        // Through the driver's exit watch: refused once it is released, so
        // a recycled group id is never signalled.
        let _ = driver.signal_group(Signal::SIGKILL);
        let killed = observer::kill_and_reap(marker, &Default::default(), Duration::from_secs(5));
        let deadline = Instant::now() + Duration::from_secs(1);
        observer::reap(killed.into_iter(), deadline);
        driver.wait_blocking(deadline.saturating_duration_since(Instant::now()));
        driver.release();
    }
}

/// Makes `driver` (its exit watch: its pid is its group) and `marker` what
/// an interrupt ends: `client` mode's runs and the scenario runner's
/// external subject register their driver here.
pub(crate) fn set_current(driver: &Driver, marker: String) {
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some((driver.exit().clone(), marker));
}

/// Runs `end` (which ends and reaps the current driver) with the current
/// run cleared under the lock, so no interrupt can signal a reaped group.
pub(crate) fn end_current(end: impl FnOnce()) {
    let mut current = CURRENT.lock().unwrap_or_else(|e| e.into_inner());
    *current = None;
    end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_line_above_a_stack_trace_is_kept() {
        let node = "node:internal/modules/esm/resolve:873\n\nError [ERR_MODULE_NOT_FOUND]: Cannot find package 'x'\n    at a (b:1:1)\n    at c (d:1:1)\n    at e (f:1:1)\n    at g (h:1:1) {\n  code: 'ERR_MODULE_NOT_FOUND'\n}\n\nNode.js v22";
        let suffix = stderr_suffix(node);
        assert!(
            suffix.contains("Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x'\n  ..."),
            "{suffix}"
        );
        assert!(suffix.ends_with("Node.js v22"), "{suffix}");
        // A Python traceback ends with its error: the tail holds it, once.
        let python = "Traceback (most recent call last):\n  File \"d.py\", line 1, in <module>\n    import mcp\nModuleNotFoundError: No module named 'mcp'";
        let suffix = stderr_suffix(python);
        assert_eq!(suffix.matches("ModuleNotFoundError").count(), 1, "{suffix}");
        assert!(!suffix.contains("..."), "{suffix}");
        assert_eq!(stderr_suffix("  \n"), "");
    }

    #[test]
    fn declared_graces_replace_the_asked_ones_only_when_fixed() {
        let ms = Duration::from_millis;
        let mut hello = Hello {
            protocol: 2,
            client: ClientInfo {
                name: "c".into(),
                version: "1".into(),
            },
            eras: vec!["legacy".into()],
            settings: Settings {
                graces: Graces::Asked,
                eof_grace_ms: Some(2000),
                term_grace_ms: None,
                leader: LeaderKind::Group,
                handshake_bound: true,
                contain: false,
            },
        };
        assert_eq!(hello.graces((ms(500), ms(500))), (ms(500), ms(500)));
        hello.settings.graces = Graces::Fixed;
        // No SIGTERM step: no SIGTERM grace.
        assert_eq!(hello.graces((ms(500), ms(500))), (ms(2000), ms(0)));
        // What a driver writes parses back; a missing field is an error.
        let written = serde_json::to_value(&hello).unwrap();
        assert_eq!(serde_json::from_value::<Hello>(written).unwrap(), hello);
        let mut missing = serde_json::to_value(&hello).unwrap();
        missing["settings"]
            .as_object_mut()
            .unwrap()
            .remove("leader");
        assert!(serde_json::from_value::<Hello>(missing).is_err());
    }
}
