//! Child processes that leave nothing behind: the one place where this
//! workspace starts, watches, signals and looks for processes.
//!
//! - [`spawn`] starts a program (`posix_spawn`, no fork) in a **process
//!   group of its own** with an empty signal mask and piped stdio, and
//!   watches its pidfd on the tokio reactor, which observes its exit at once
//!   without reaping it ([`ExitWatch`]): the zombie keeps the pid, and so
//!   the group id, reserved until the owner calls [`ExitWatch::release`], so
//!   no signal can ever reach a recycled pid or group.
//! - [`ExitWatch`] is the only way to signal the child or its group
//!   ([`ExitWatch::signal_group`], [`ExitWatch::signal_child`],
//!   [`ExitWatch::signal_all`]) and to wait until the group has no live
//!   member ([`ExitWatch::wait_group_gone`]).
//! - [`signal`] signals a pid or group learned otherwise (a ledger, the
//!   process table), refusing 0, 1 and this process and its group, and
//!   opens pidfds ([`signal::Pidfd`]) that signal and wait for one process
//!   that cannot be recycled under them.
//! - [`table`] reads the process table (`/proc` on Linux): one process's
//!   state, group and parent, every pid, whether a group has a live member.
//!   [`group`] waits for groups to empty, for many waiters with one pass
//!   per tick.
//! - [`deadline`] sleeps until an instant to within tens of microseconds (a
//!   `timerfd` on the reactor for the last milliseconds), where tokio's
//!   timer rounds up to the next millisecond: the close ladder's graces.
//! - [`contain`] ends, at close, what a server started outside its group
//!   too: a cgroup v2 of its own where one can be made, else its
//!   descendants tracked through the process table ([`spawn_contained`]).
//! - [`marker`] is how tests and checks find every process they started,
//!   wherever it went: a unique value in argv (`--marker=<m>`) or in the
//!   environment ([`MARKER_ENV`]), a scan that finds its carriers, and a
//!   cleanup that kills and reaps them by pid.
//!
//! Pids and process group ids are `u32` in this API, as in
//! [`std::process::Child::id`]; they are converted at the system-call
//! boundary.

#![warn(missing_docs)]

pub mod anchor;
pub mod contain;
pub mod deadline;
mod exit;
pub mod group;
mod launch;
pub mod marker;
pub mod signal;
mod spawn;
pub mod table;

pub use anchor::{ANCHOR_ENV, Anchor};
pub use contain::{CONTAIN_ENV, Containment};
pub use exit::{ChildExit, ExitWatch, KillGuard, REAP_BOUND};
pub use marker::{MARKER_ENV, Marked, Marker, MarkerGuard};
pub use nix::sys::signal::Signal;
pub use spawn::{
    BlockingSpawned, SpawnOptions, Spawned, spawn, spawn_blocking, spawn_blocking_with,
    spawn_contained,
};

/// Makes this process a child subreaper (Linux), so orphans of the
/// processes it starts re-parent to it and can be reaped by pid. Elsewhere,
/// and if the call fails, orphans go to init as usual.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

/// A pid as the system calls take it. Pids never exceed `i32::MAX` (the
/// kernel's limit is far below), so the conversion cannot wrap for a pid
/// that came from the system.
pub(crate) fn raw(pid: u32) -> nix::unistd::Pid {
    nix::unistd::Pid::from_raw(pid as i32)
}
