//! The harness's side of the driver protocol (`docs/client-check.md`): a
//! driver is a small program in the client's own language that drives the
//! client under test on command, one JSON object per line over the driver's
//! own stdin and stdout.

use std::{
    io::{BufRead, BufReader, Read, Write},
    os::unix::process::CommandExt,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use serde_json::{Value, json};

/// The protocol version this harness speaks.
pub const PROTOCOL: u32 = 1;

/// How much of the driver's stderr is kept for messages.
const STDERR_KEPT: usize = 16 << 10;

/// A failure of the driver itself (not of the client it drives).
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("cannot start the driver `{program}`{}", super::report::arguments_suffix(*args))]
    Start {
        /// The program as given; its arguments are counted, never printed.
        program: String,
        args: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("the driver did not answer `{op}` within {}", crate::server_check::report::human(*within))]
    NoAnswer { op: String, within: Duration },
    #[error("the driver ended before it answered `{op}`{}", stderr_suffix(stderr))]
    Ended { op: String, stderr: String },
}

fn stderr_suffix(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        String::new()
    } else {
        let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("; its last stderr lines:\n  {}", tail.join("\n  "))
    }
}

/// What the client answered: its result, or its own error message.
pub type Answer = Result<Value, String>;

/// A running driver.
pub struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    next_id: u64,
    /// Lines on the driver's stdout that were not protocol answers.
    pub stray_lines: Vec<String>,
}

impl Driver {
    /// Starts `argv` in a process group of its own (so the harness can end
    /// it, and everything it left in its group, whatever happens).
    pub fn start(argv: &[String]) -> Result<Driver, DriverError> {
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // The harness's anchor: the keeper ends the driver, and whatever
        // inherits its environment, if the harness is SIGKILLed.
        if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
            command.env(mcp_stdio_process::ANCHOR_ENV, anchor.to_string());
        }
        // The harness blocks SIGINT, SIGTERM and SIGHUP to take them on a
        // thread of its own: the driver, and every server its client
        // starts, must not inherit that.
        mcp_stdio_process::with_empty_signal_mask(&mut command);
        let mut child = command.spawn().map_err(|source| DriverError::Start {
            program: argv[0].clone(),
            args: argv.len() - 1,
            source,
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
        std::thread::spawn(move || {
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
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            next_id: 1,
            stray_lines: Vec::new(),
        })
    }

    /// The driver's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.child.id()
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
        let mut message = json!({ "id": id, "op": op });
        if let (Some(message), Value::Object(fields)) = (message.as_object_mut(), fields) {
            message.extend(fields);
        }
        let ended = |driver: &Driver| DriverError::Ended {
            op: op.to_owned(),
            stderr: driver.stderr(),
        };
        let line = format!("{message}\n");
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if written.is_err() {
            return Err(ended(self));
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
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(ended(self)),
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
        let deadline = Instant::now() + within;
        loop {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Ends the driver: stdin closed, a moment to exit, then SIGKILL to its
    /// whole group; always reaped.
    pub fn finish(&mut self, within: Duration) {
        self.stdin = None;
        if !self.wait_exit(within) {
            // Its pid is still ours (unreaped), so its group id is too.
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = killpg(Pid::from_raw(self.child.id() as i32), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}
