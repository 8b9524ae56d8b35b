//! The child's exit as first observed, and the handle that waits for it
//! and signals the child: see the crate docs for why signals go through it.

use std::{
    fmt, io,
    os::fd::OwnedFd,
    sync::{Arc, Condvar, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, kill, killpg},
};
use serde::Serialize;
use tokio::sync::watch;

use crate::{Containment, deadline, group, raw, spawn::Peek};

/// How long [`ExitWatch::release`] and [`ExitWatch::wait_for`] wait for an
/// exit the kernel holds to be published: observing it takes microseconds;
/// this only bounds an observer scheduled late or stuck in `on_exit`.
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
    /// An exit whose status nobody here saw: the child was reaped by
    /// someone else (a `waitpid(-1)` elsewhere in the process). No real
    /// exit has it: exit codes are 0 to 255.
    pub const UNKNOWN: ChildExit = ChildExit::Code(-1);

    /// The exit of a [`std::process::ExitStatus`].
    pub fn from_status(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ChildExit::Code(code),
            (None, Some(signal)) => ChildExit::Signal(signal),
            // Stopped/continued statuses never reach a reaper that uses wait().
            (None, None) => ChildExit::UNKNOWN,
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

/// The child's exit, published once by whoever observed it first; readable
/// from async code and, for `Drop`, from blocking code. It is also the only
/// way to signal the child or its group: see the module docs for why.
pub struct ExitWatch {
    pub(crate) shared: Arc<ExitShared>,
    rx: watch::Receiver<Option<ChildExit>>,
}

/// What runs the moment the child's exit is observed, before it is
/// published.
pub(crate) type OnExit = Box<dyn FnOnce(ChildExit) + Send>;

pub(crate) struct ExitShared {
    /// The child's pid, which is also its process group id.
    pub(crate) pid: u32,
    /// A pidfd of the child (Linux 5.3+), opened while it was unreaped, so
    /// it names the child and nobody else. `None` where the kernel has none:
    /// then a thread observes the exit (docs/process.md, "Exit watch").
    pub(crate) pidfd: Option<OwnedFd>,
    state: Mutex<State>,
    cond: Condvar,
    tx: watch::Sender<Option<ChildExit>>,
    /// Taken by the one observer that publishes the exit.
    on_exit: Mutex<Option<OnExit>>,
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

impl State {
    /// Nobody can signal the child any more.
    fn let_go(&self) -> bool {
        self.released || self.handles == 0
    }
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

    /// How the child ended if the kernel holds its exit, without reaping,
    /// or that it was reaped elsewhere ([`Peek::Gone`]); `None` while it
    /// runs. Never blocks. Asked under the lock and before the reap, so the
    /// pid (or pidfd) names the child.
    fn exit_in_kernel(&self, state: &State) -> Option<Peek> {
        if state.reaped {
            return None;
        }
        match crate::spawn::peek_exit(self.pid, self.pidfd.as_ref(), nix::libc::WNOHANG) {
            seen @ (Peek::Exited(_) | Peek::Gone) => Some(seen),
            Peek::Running | Peek::Failed => None,
        }
    }

    /// True when the kernel holds the child's exit (it is a zombie we have
    /// not reaped), whether or not it has been published yet.
    fn exited_in_kernel(&self) -> bool {
        let state = self.lock();
        state.status.is_some() || self.exit_in_kernel(&state).is_some()
    }

    /// Records an exit that was observed: the first observer runs
    /// `on_exit`, then publishes; the others leave it to that one (so
    /// nobody sees the exit before `on_exit` has run). A child reaped
    /// elsewhere ([`Peek::Gone`]) is published as [`ChildExit::UNKNOWN`]
    /// and counts as reaped: its pid may be a stranger's already, so
    /// nothing is reaped or signalled by it again.
    pub(crate) fn observe(&self, seen: Peek) {
        let status = match seen {
            Peek::Exited(status) => status,
            Peek::Gone => {
                self.lock().reaped = true;
                ChildExit::UNKNOWN
            }
            Peek::Running | Peek::Failed => return,
        };
        let hook = self
            .on_exit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(hook) = hook else {
            return;
        };
        hook(status);
        let mut state = self.lock();
        state.status = Some(status);
        if state.let_go() {
            self.reap(&mut state);
        }
        drop(state);
        self.cond.notify_all();
        self.tx.send_replace(Some(status));
    }

    /// Observes the exit now if the kernel holds it; true when it is
    /// published (by this call or earlier).
    pub(crate) fn observe_now(&self) -> bool {
        let state = self.lock();
        if state.status.is_some() {
            return true;
        }
        let found = self.exit_in_kernel(&state);
        drop(state);
        match found {
            Some(seen) => {
                self.observe(seen);
                self.lock().status.is_some()
            }
            None => false,
        }
    }

    /// Reaps the exited child. Only under the lock, after the exit was
    /// published and once no signal may be sent (`let_go`): the lock is held
    /// across every signal, so the reap cannot slip in before one.
    fn reap(&self, state: &mut MutexGuard<'_, State>) {
        if state.reaped || state.status.is_none() {
            return;
        }
        crate::spawn::reap(self.pid, self.pidfd.as_ref());
        state.reaped = true;
    }

    /// Sends `signal` unless the child has been released (or reaped
    /// elsewhere); the lock is held across the send, so the reap cannot
    /// happen in between.
    fn send(&self, target: Target, signal: Signal) -> io::Result<bool> {
        let state = self.lock();
        if state.released || state.reaped {
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
    pub(crate) fn new(pid: u32, pidfd: Option<OwnedFd>, on_exit: OnExit) -> Self {
        let (tx, rx) = watch::channel(None);
        Self {
            shared: Arc::new(ExitShared {
                pid,
                pidfd,
                state: Mutex::new(State {
                    handles: 1,
                    ..State::default()
                }),
                cond: Condvar::new(),
                tx,
                on_exit: Mutex::new(Some(on_exit)),
            }),
            rx,
        }
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

    /// Waits up to `within` for the child to exit: [`ExitWatch::wait_until`]
    /// `now + within`.
    pub async fn wait_for(&self, within: Duration) -> Option<ChildExit> {
        self.wait_until(Instant::now() + within).await
    }

    /// Waits until `deadline` for the child to exit. The deadline is kept to
    /// within tens of microseconds, not tokio's millisecond
    /// ([`crate::deadline`]): the close ladder's graces are timed by it.
    ///
    /// A child that has exited by then is waited for, up to [`REAP_BOUND`]
    /// more, even if its exit has not been published yet: on a loaded
    /// machine the observer can be scheduled late, and a caller asking "did
    /// it die?" (a handshake that saw stdout close) must get the kernel's
    /// answer, not the observer's timing.
    pub async fn wait_until(&self, deadline: Instant) -> Option<ChildExit> {
        if let Some(status) = deadline::timeout_at(deadline, self.wait()).await {
            return Some(status);
        }
        if self.shared.exited_in_kernel() {
            return tokio::time::timeout(REAP_BOUND, self.wait()).await.ok();
        }
        None
    }

    /// Blocks the thread up to `within` for the child to exit. With a
    /// pidfd it waits on the pidfd itself and publishes the exit if nobody
    /// has yet, so it needs no runtime to make progress (a `Drop` on a
    /// current-thread runtime blocks the only thread that would).
    pub fn wait_blocking(&self, within: Duration) -> Option<ChildExit> {
        let deadline = Instant::now() + within;
        if let Some(pidfd) = &self.shared.pidfd {
            while !self.shared.observe_now() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                crate::spawn::poll_readable(pidfd, left);
            }
        }
        let state = self.shared.lock();
        let state = self
            .shared
            .wait_while(state, deadline, |s| s.status.is_none());
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
    /// pass over the process table (see [`group::alive`]).
    pub async fn group_alive(&self) -> bool {
        group::alive(self.shared.pid).await
    }

    /// Waits until no live process is left in the child's group, or until
    /// `deadline`; returns true when the group is empty. However many
    /// groups are waited on at once, the process table is scanned once per
    /// tick for all of them (see [`group`]).
    pub async fn wait_group_gone(&self, deadline: Instant) -> bool {
        // A group that is already empty (the common case) is told by one
        // pass in this task, without a hop to the watcher and its tick.
        if !group::alive(self.shared.pid).await {
            return true;
        }
        group::wait_gone(self.shared.pid, deadline).await
    }

    /// Lets the child be reaped once it has exited. No signal is sent
    /// through any handle after this: the pid and group id may belong to
    /// someone else from then on. If the child has already exited, it is
    /// reaped before this returns (waiting up to [`REAP_BOUND`] for an
    /// observer that is publishing its exit), so that "closed" means "no
    /// zombie" to whoever looks at the process table next. One that has not
    /// is reaped by whoever observes its exit.
    pub fn release(&self) {
        let mut state = self.shared.lock();
        state.released = true;
        if state.status.is_none() && self.shared.exit_in_kernel(&state).is_some() {
            // Exited, not yet published: the observer holding `on_exit`
            // publishes (and so reaps) in a moment, or this call does.
            drop(state);
            self.shared.observe_now();
            state = self.shared.lock();
            state = self
                .shared
                .wait_while(state, Instant::now() + REAP_BOUND, |s| s.status.is_none());
        }
        self.shared.reap(&mut state);
        drop(state);
        self.shared.cond.notify_all();
    }

    /// True once the child has been reaped.
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
    /// child any more: it is reaped now if it has exited, else by whoever
    /// observes its exit.
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.handles -= 1;
        if state.handles == 0 {
            self.shared.reap(&mut state);
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
