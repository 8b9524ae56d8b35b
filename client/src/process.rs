//! The child process: spawned in a process group of its own, its exit owned by
//! a reaper thread from the moment of spawn, signalled only as a group.
//!
//! The reaper is a plain thread blocked in `wait()` rather than a tokio task:
//! it needs no runtime, so `Drop` can kill the group and wait for the reaper's
//! verdict even on a current-thread runtime or during runtime shutdown.

use std::{
    collections::BTreeMap,
    io,
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Stdio},
    sync::{Arc, Condvar, Mutex},
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, killpg},
    unistd::Pid,
};
use tokio::{
    process::{ChildStderr, ChildStdin, ChildStdout},
    sync::watch,
};

use crate::events::ChildExit;

/// A running child and its pipes.
pub struct Spawned {
    pub pid: u32,
    pub pgid: i32,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
    pub exit: ExitWatch,
}

/// Spawns `program` with piped stdio in a new process group, with the
/// inherited environment plus `env` (applied in key order) and in `dir`.
/// `on_exit` runs on the reaper thread the moment the child is reaped.
///
/// Must be called within a tokio runtime (the pipes are registered with it).
pub fn spawn(
    program: &Path,
    args: &[String],
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    reaper_name: &str,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<Spawned> {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    // From here on the child exists: whatever fails must not leak it.
    let exit = ExitWatch::new();
    let pipes = (|| {
        let stdin = ChildStdin::from_std(child.stdin.take().expect("stdin is piped"))?;
        let stdout = ChildStdout::from_std(child.stdout.take().expect("stdout is piped"))?;
        let stderr = ChildStderr::from_std(child.stderr.take().expect("stderr is piped"))?;
        io::Result::Ok((stdin, stdout, stderr))
    })();
    let reaper_exit = exit.clone();
    let reaper = std::thread::Builder::new()
        .name(format!("reaper-{reaper_name}"))
        .spawn(move || {
            let status = loop {
                match child.wait() {
                    Ok(status) => break ChildExit::from_status(status),
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    // Only possible if someone else reaped our child.
                    Err(_) => break ChildExit::Code(-1),
                }
            };
            on_exit(status);
            reaper_exit.publish(status);
        });
    if let Err(error) = reaper {
        let _ = signal_group(pid as i32, Signal::SIGKILL);
        return Err(error);
    }
    match pipes {
        Ok((stdin, stdout, stderr)) => Ok(Spawned {
            pid,
            pgid: pid as i32,
            stdin,
            stdout,
            stderr,
            exit,
        }),
        Err(error) => {
            let _ = signal_group(pid as i32, Signal::SIGKILL);
            exit.wait_blocking(Duration::from_secs(5));
            Err(error)
        }
    }
}

/// The child's exit status, published once by the reaper; readable from async
/// code and, for `Drop`, from blocking code.
#[derive(Clone)]
pub struct ExitWatch {
    shared: Arc<ExitShared>,
    rx: watch::Receiver<Option<ChildExit>>,
}

struct ExitShared {
    status: Mutex<Option<ChildExit>>,
    cond: Condvar,
    tx: watch::Sender<Option<ChildExit>>,
}

impl ExitWatch {
    fn new() -> Self {
        let (tx, rx) = watch::channel(None);
        Self {
            shared: Arc::new(ExitShared {
                status: Mutex::new(None),
                cond: Condvar::new(),
                tx,
            }),
            rx,
        }
    }

    fn publish(&self, status: ChildExit) {
        *self.shared.status.lock().unwrap_or_else(|e| e.into_inner()) = Some(status);
        self.shared.cond.notify_all();
        self.shared.tx.send_replace(Some(status));
    }

    /// The exit status if the child has been reaped.
    pub fn now(&self) -> Option<ChildExit> {
        *self.rx.borrow()
    }

    /// Waits for the child to be reaped.
    pub async fn wait(&self) -> ChildExit {
        let mut rx = self.rx.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(status) => status.expect("waited for Some"),
            // The sender lives in `shared`, which we hold: it cannot close.
            Err(_) => unreachable!("the exit sender outlives every watcher"),
        }
    }

    /// Waits up to `within` for the child to be reaped.
    pub async fn wait_for(&self, within: Duration) -> Option<ChildExit> {
        tokio::time::timeout(within, self.wait()).await.ok()
    }

    /// Blocks the thread up to `within` for the child to be reaped.
    pub fn wait_blocking(&self, within: Duration) -> Option<ChildExit> {
        let deadline = Instant::now() + within;
        let mut status = self.shared.status.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(exit) = *status {
                return Some(exit);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            status = self
                .shared
                .cond
                .wait_timeout(status, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

/// Kills the child's group and waits for the reaper when dropped armed: a
/// `connect` future dropped half-way must not leak the child it spawned.
pub struct KillGuard {
    pgid: i32,
    exit: ExitWatch,
    armed: bool,
}

impl KillGuard {
    pub fn new(pgid: i32, exit: ExitWatch) -> Self {
        Self {
            pgid,
            exit,
            armed: true,
        }
    }

    /// Hands responsibility for the child to someone else.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = signal_group(self.pgid, Signal::SIGKILL);
            self.exit.wait_blocking(Duration::from_secs(5));
        }
    }
}

/// Sends `signal` to every process in group `pgid`. Returns false when the
/// group has no member left.
pub fn signal_group(pgid: i32, signal: Signal) -> io::Result<bool> {
    match killpg(Pid::from_raw(pgid), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(errno) => Err(io::Error::from(errno)),
    }
}

/// True while a live (not zombie) process is in group `pgid`.
///
/// A killed orphan stays in the group as a zombie until its new parent reaps
/// it, and `kill(-pgid, 0)` counts zombies; on Linux the process table tells
/// the living from the dead, elsewhere the signal probe is the fallback.
pub fn group_alive(pgid: i32) -> bool {
    #[cfg(target_os = "linux")]
    if let Ok(entries) = std::fs::read_dir("/proc") {
        return entries.flatten().any(|entry| {
            let is_pid = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()));
            is_pid
                && stat_of(&entry.path())
                    .is_some_and(|(state, group)| group == pgid && state != 'Z')
        });
    }
    match killpg(Pid::from_raw(pgid), None) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        // EPERM: members exist that we may not signal.
        Err(_) => true,
    }
}

/// State letter and process group from `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
fn stat_of(proc_dir: &Path) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(proc_dir.join("stat")).ok()?;
    // The command name may contain spaces and parentheses: split after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgid = fields.nth(1)?.parse().ok()?;
    Some((state, pgid))
}
