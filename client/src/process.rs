//! The child process: spawned in a process group of its own, its exit watched
//! by a reaper thread from the moment of spawn, signalled only while its pid
//! is still reserved.
//!
//! The reaper is a plain thread rather than a tokio task: it needs no
//! runtime, so `Drop` can kill the group and wait for the reaper's verdict
//! even on a current-thread runtime or during runtime shutdown.
//!
//! # Never signal a recycled pid
//!
//! The child's pid is also its process group id. Once a process is reaped its
//! pid is free, and the kernel may give it to an unrelated process that then
//! makes itself a group leader: a `killpg` with the old id would hit a
//! stranger's group. So the reaper *observes* the exit without reaping it
//! (`waitid` with `WNOWAIT`): the exit is known at once (fast failure stays
//! instant), while the zombie keeps the pid, and with it the group id,
//! reserved. The owner sweeps the group and then calls
//! [`ExitWatch::release`]; only then is the zombie reaped, and from then on
//! every signalling method refuses to send anything. Signals and the release
//! take one lock, so no signal can race the reap.

use std::{
    collections::BTreeMap,
    io,
    os::unix::process::CommandExt,
    path::Path,
    process::{Command, Stdio},
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, kill, killpg},
    unistd::Pid,
};
use tokio::{
    process::{ChildStderr, ChildStdin, ChildStdout},
    sync::watch,
};

use crate::events::ChildExit;

/// How long [`ExitWatch::release`] waits for the reaper to reap a child that
/// has exited: reaping a zombie takes microseconds; this only bounds a stuck
/// reaper thread.
pub const REAP_BOUND: Duration = Duration::from_secs(1);

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
/// `on_exit` runs on the reaper thread the moment the child exits.
///
/// The child stays unreaped (a zombie once it has exited) until
/// [`ExitWatch::release`] is called or every [`ExitWatch`] is dropped.
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
    // A host that blocks SIGTERM on its own threads (to take it with
    // sigwait, say) would otherwise start servers that can never see the
    // close ladder's SIGTERM.
    with_empty_signal_mask(&mut command);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    // From here on the child exists: whatever fails must not leak it.
    let exit = ExitWatch::new(pid as i32);
    let pipes = (|| {
        let stdin = ChildStdin::from_std(child.stdin.take().expect("stdin is piped"))?;
        let stdout = ChildStdout::from_std(child.stdout.take().expect("stdout is piped"))?;
        let stderr = ChildStderr::from_std(child.stderr.take().expect("stderr is piped"))?;
        io::Result::Ok((stdin, stdout, stderr))
    })();
    let reaper_exit = exit.clone();
    // A thread name may not hold a NUL; the name is only for debuggers.
    let thread_name = format!("reaper-{}", reaper_name.replace('\0', ""));
    let reaper = std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || {
            let status = observe_exit(pid as i32);
            on_exit(status);
            reaper_exit.publish(status);
            let shared = reaper_exit.shared.clone();
            drop(reaper_exit);
            // Hold the zombie until the owner has swept the group with the
            // id still reserved, then reap.
            shared.wait_released();
            let _ = child.wait();
            shared.lock().reaped = true;
            shared.cond.notify_all();
        });
    if let Err(error) = reaper {
        // No reaper means nobody will ever reap: kill and reap here.
        // `child` moved into the failed closure and was dropped with it, so
        // reap by pid; the pid is ours and unreaped, so the signal is safe.
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(Pid::from_raw(pid as i32), None);
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
            let _ = exit.signal_all(Signal::SIGKILL);
            exit.wait_blocking(Duration::from_secs(5));
            exit.release();
            Err(error)
        }
    }
}

/// Makes `command` start its process with no signal blocked: a blocked
/// signal mask survives exec, so whatever the spawning thread blocks would
/// otherwise be blocked in the child for good.
pub fn with_empty_signal_mask(command: &mut Command) {
    // SAFETY: sigprocmask is async-signal-safe and touches no Rust state.
    unsafe {
        command.pre_exec(|| {
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&nix::sys::signal::SigSet::empty()),
                None,
            )
            .map_err(io::Error::from)
        });
    }
}

/// Blocks until child `pid` has exited, without reaping it.
fn observe_exit(pid: i32) -> ChildExit {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid only writes into `info`.
        let rc = unsafe {
            nix::libc::waitid(
                nix::libc::P_PID,
                pid as nix::libc::id_t,
                &mut info,
                nix::libc::WEXITED | nix::libc::WNOWAIT,
            )
        };
        if rc == 0 {
            // SAFETY: waitid succeeded with WEXITED, so the SIGCHLD fields are set.
            let status = unsafe { info.si_status() };
            return match info.si_code {
                nix::libc::CLD_EXITED => ChildExit::Code(status),
                _ => ChildExit::Signal(status),
            };
        }
        match Errno::last() {
            Errno::EINTR => continue,
            // Only possible if someone else reaped our child.
            _ => return ChildExit::Code(-1),
        }
    }
}

/// The child's exit, published once by the reaper; readable from async code
/// and, for `Drop`, from blocking code. It is also the only way to signal the
/// child or its group: see the module docs for why.
pub struct ExitWatch {
    shared: Arc<ExitShared>,
    rx: watch::Receiver<Option<ChildExit>>,
}

struct ExitShared {
    /// The child's pid, which is also its process group id.
    pid: i32,
    state: Mutex<State>,
    cond: Condvar,
    tx: watch::Sender<Option<ChildExit>>,
}

#[derive(Default)]
struct State {
    status: Option<ChildExit>,
    /// No signal may be sent any more: the zombie may be reaped.
    released: bool,
    reaped: bool,
    /// How many `ExitWatch` handles the owner side still holds.
    handles: usize,
}

impl ExitShared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits on the condition variable while `waiting` holds, up to `deadline`.
    fn wait_while<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        deadline: Instant,
        waiting: impl Fn(&State) -> bool,
    ) -> MutexGuard<'a, State> {
        while waiting(&state) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = self
                .cond
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        state
    }

    /// Blocks the reaper until the owner releases the child, or until no
    /// handle is left to do so.
    fn wait_released(&self) {
        let mut state = self.lock();
        while !state.released && state.handles > 0 {
            state = self.cond.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.released = true;
    }

    /// Sends `signal` unless the child has been released; the lock is held
    /// across the send, so the reap cannot happen in between.
    fn send(&self, target: Target, signal: Signal) -> io::Result<bool> {
        let state = self.lock();
        if state.released {
            return Ok(false);
        }
        let pid = Pid::from_raw(self.pid);
        let sent = match target {
            Target::Group => killpg(pid, signal),
            Target::Child => kill(pid, signal),
        };
        drop(state);
        match sent {
            Ok(()) => Ok(true),
            Err(Errno::ESRCH) => Ok(false),
            Err(errno) => Err(io::Error::from(errno)),
        }
    }
}

#[derive(Clone, Copy)]
enum Target {
    Group,
    Child,
}

impl ExitWatch {
    fn new(pid: i32) -> Self {
        let (tx, rx) = watch::channel(None);
        Self {
            shared: Arc::new(ExitShared {
                pid,
                state: Mutex::new(State {
                    handles: 1,
                    ..State::default()
                }),
                cond: Condvar::new(),
                tx,
            }),
            rx,
        }
    }

    fn publish(&self, status: ChildExit) {
        self.shared.lock().status = Some(status);
        self.shared.cond.notify_all();
        self.shared.tx.send_replace(Some(status));
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> i32 {
        self.shared.pid
    }

    /// The exit status if the child has exited.
    pub fn now(&self) -> Option<ChildExit> {
        *self.rx.borrow()
    }

    /// Waits for the child to exit.
    pub async fn wait(&self) -> ChildExit {
        let mut rx = self.rx.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(status) => status.expect("waited for Some"),
            // The sender lives in `shared`, which we hold: it cannot close.
            Err(_) => unreachable!("the exit sender outlives every watcher"),
        }
    }

    /// Waits up to `within` for the child to exit.
    pub async fn wait_for(&self, within: Duration) -> Option<ChildExit> {
        tokio::time::timeout(within, self.wait()).await.ok()
    }

    /// Blocks the thread up to `within` for the child to exit.
    pub fn wait_blocking(&self, within: Duration) -> Option<ChildExit> {
        let state = self.shared.lock();
        let state = self
            .shared
            .wait_while(state, Instant::now() + within, |s| s.status.is_none());
        state.status
    }

    /// Sends `signal` to every process in the child's group. Returns false
    /// when the group has no member left or the child has been released.
    pub fn signal_group(&self, signal: Signal) -> io::Result<bool> {
        self.shared.send(Target::Group, signal)
    }

    /// Sends `signal` to the child itself, by pid: this reaches a child that
    /// moved to another process group. Returns false once released.
    pub fn signal_child(&self, signal: Signal) -> io::Result<bool> {
        self.shared.send(Target::Child, signal)
    }

    /// Signals the child's whole group and, if the child has left that group,
    /// the child by pid as well: every escalation step reaches the direct
    /// child, and a child still in its group gets each signal once, not
    /// twice. Returns true when a signal was delivered.
    pub fn signal_all(&self, signal: Signal) -> bool {
        let group = self.signal_group(signal).unwrap_or(false);
        // The child is unreaped until release, so asking for its group
        // cannot be answered by a stranger.
        let own_group = nix::unistd::getpgid(Some(Pid::from_raw(self.shared.pid)))
            .is_ok_and(|pgid| pgid.as_raw() == self.shared.pid);
        if own_group && group {
            return true;
        }
        self.signal_child(signal).unwrap_or(false) || group
    }

    /// True while a live (not zombie) process is in the child's group.
    pub fn group_alive(&self) -> bool {
        group_alive(self.shared.pid)
    }

    /// Lets the reaper reap the child once it has exited. No signal is sent
    /// through any handle after this: the pid and group id may belong to
    /// someone else from then on. If the child has already exited, returns
    /// once it is reaped (bounded by [`REAP_BOUND`]), so that "closed" means
    /// "no zombie" to whoever looks at the process table next.
    pub fn release(&self) {
        let mut state = self.shared.lock();
        state.released = true;
        self.shared.cond.notify_all();
        let _reaped = self
            .shared
            .wait_while(state, Instant::now() + REAP_BOUND, |s| {
                s.status.is_some() && !s.reaped
            });
    }

    /// True once the reaper has reaped the child.
    pub fn reaped(&self) -> bool {
        self.shared.lock().reaped
    }
}

impl Clone for ExitWatch {
    fn clone(&self) -> Self {
        self.shared.lock().handles += 1;
        Self {
            shared: self.shared.clone(),
            rx: self.rx.clone(),
        }
    }
}

impl Drop for ExitWatch {
    /// When the last handle goes without a release, nobody can signal the
    /// child any more: the reaper may reap it.
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.handles -= 1;
        if state.handles == 0 {
            drop(state);
            self.shared.cond.notify_all();
        }
    }
}

/// Kills the child (by pid and group) and waits for its exit when dropped
/// armed: a `connect` future dropped half-way must not leak the child it
/// spawned.
pub struct KillGuard {
    exit: ExitWatch,
    armed: bool,
}

impl KillGuard {
    pub fn new(exit: ExitWatch) -> Self {
        Self { exit, armed: true }
    }

    /// Hands responsibility for the child to someone else.
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for KillGuard {
    fn drop(&mut self) {
        if self.armed {
            self.exit.signal_all(Signal::SIGKILL);
            self.exit.wait_blocking(Duration::from_secs(5));
            self.exit.release();
        }
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
