//! The child's exit as the reaper saw it, and the handle that waits for it
//! and signals the child: see the crate docs for why signals go through it.

use std::{
    fmt, io,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, kill, killpg},
};
use serde::Serialize;
use tokio::sync::watch;

use crate::{Containment, group, raw};

/// How long [`ExitWatch::release`] waits for the reaper to reap a child that
/// has exited: reaping a zombie takes microseconds; this only bounds a stuck
/// reaper thread.
pub const REAP_BOUND: Duration = Duration::from_secs(1);

/// How a child process ended, as the reaper saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildExit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl ChildExit {
    /// The exit of a [`std::process::ExitStatus`].
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ChildExit::Code(code),
            (None, Some(signal)) => ChildExit::Signal(signal),
            // Stopped/continued statuses never reach a reaper that uses wait().
            (None, None) => ChildExit::Code(-1),
        }
    }

    /// True for exit code 0.
    pub fn success(self) -> bool {
        self == ChildExit::Code(0)
    }

    /// The exit code, if it exited rather than being killed.
    pub fn code(self) -> Option<i32> {
        match self {
            ChildExit::Code(code) => Some(code),
            ChildExit::Signal(_) => None,
        }
    }

    /// The signal that killed it, if one did.
    pub fn signal(self) -> Option<i32> {
        match self {
            ChildExit::Code(_) => None,
            ChildExit::Signal(signal) => Some(signal),
        }
    }
}

impl fmt::Display for ChildExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildExit::Code(code) => write!(f, "exit status {code}"),
            ChildExit::Signal(signal) => {
                let name = Signal::try_from(*signal)
                    .map(|s| s.as_str())
                    .unwrap_or("unknown");
                write!(f, "signal {signal} ({name})")
            }
        }
    }
}

/// The child's exit, published once by the reaper; readable from async code
/// and, for `Drop`, from blocking code. It is also the only way to signal the
/// child or its group: see the module docs for why.
pub struct ExitWatch {
    pub(crate) shared: Arc<ExitShared>,
    rx: watch::Receiver<Option<ChildExit>>,
}

pub(crate) struct ExitShared {
    /// The child's pid, which is also its process group id.
    pid: u32,
    state: Mutex<State>,
    pub(crate) cond: Condvar,
    tx: watch::Sender<Option<ChildExit>>,
}

#[derive(Default)]
pub(crate) struct State {
    status: Option<ChildExit>,
    /// No signal may be sent any more: the zombie may be reaped.
    released: bool,
    pub(crate) reaped: bool,
    /// How many `ExitWatch` handles the owner side still holds.
    handles: usize,
}

impl ExitShared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
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
    pub(crate) fn wait_released(&self) {
        let mut state = self.lock();
        while !state.released && state.handles > 0 {
            state = self.cond.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.released = true;
    }

    /// True when the kernel holds the child's exit (it is a zombie we have
    /// not reaped), whether or not the reaper has seen it yet. Asked under
    /// the lock, so the pid is still ours.
    fn exited_in_kernel(&self) -> bool {
        let state = self.lock();
        if state.status.is_some() {
            return true;
        }
        if state.released {
            return false;
        }
        crate::spawn::exited_now(self.pid).is_some()
    }

    /// Sends `signal` unless the child has been released; the lock is held
    /// across the send, so the reap cannot happen in between.
    fn send(&self, target: Target, signal: Signal) -> io::Result<bool> {
        let state = self.lock();
        if state.released {
            return Ok(false);
        }
        let pid = raw(self.pid);
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
    pub(crate) fn new(pid: u32) -> Self {
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

    pub(crate) fn publish(&self, status: ChildExit) {
        self.shared.lock().status = Some(status);
        self.shared.cond.notify_all();
        self.shared.tx.send_replace(Some(status));
    }

    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
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
    ///
    /// A child that has exited by then is waited for, up to [`REAP_BOUND`]
    /// more, even if the reaper has not published its exit yet: on a loaded
    /// machine the reaper thread can be scheduled late, and a caller asking
    /// "did it die?" (a handshake that saw stdout close) must get the kernel's
    /// answer, not the thread's timing.
    pub async fn wait_for(&self, within: Duration) -> Option<ChildExit> {
        if let Ok(status) = tokio::time::timeout(within, self.wait()).await {
            return Some(status);
        }
        if self.shared.exited_in_kernel() {
            return tokio::time::timeout(REAP_BOUND, self.wait()).await.ok();
        }
        None
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
        let own_group = nix::unistd::getpgid(Some(raw(self.shared.pid)))
            .is_ok_and(|pgid| pgid.as_raw() as u32 == self.shared.pid);
        if own_group && group {
            return true;
        }
        self.signal_child(signal).unwrap_or(false) || group
    }

    /// True while a live (not zombie) process is in the child's group: one
    /// scan of the process table, shared with every other caller asking at
    /// the same time (see [`group`]).
    pub async fn group_alive(&self) -> bool {
        group::alive(self.shared.pid).await
    }

    /// Waits until no live process is left in the child's group, or until
    /// `deadline`; returns true when the group is empty. However many
    /// groups are waited on at once, the process table is scanned once per
    /// tick for all of them (see [`group`]).
    pub async fn wait_group_gone(&self, deadline: Instant) -> bool {
        group::wait_gone(self.shared.pid, deadline).await
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
    containment: Option<Arc<Containment>>,
    armed: bool,
}

impl KillGuard {
    /// Arms a guard over the child that `exit` watches.
    pub fn new(exit: ExitWatch) -> Self {
        Self {
            exit,
            containment: None,
            armed: true,
        }
    }

    /// Arms a guard that also ends what `containment` holds, before the
    /// child is released (while its pid still names it).
    pub fn with_containment(exit: ExitWatch, containment: Option<Arc<Containment>>) -> Self {
        Self {
            exit,
            containment,
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
            if let Some(containment) = &self.containment {
                containment.track();
            }
            self.exit.signal_all(Signal::SIGKILL);
            self.exit.wait_blocking(Duration::from_secs(5));
            if let Some(containment) = &self.containment {
                containment.end(Duration::from_secs(1));
            }
            self.exit.release();
        }
    }
}
