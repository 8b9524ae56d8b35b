//! Signals to processes and groups by number, with the guards every caller
//! needs: never pid or group 0 or 1, never this process or its own group
//! (`kill(0)`, `kill(-1)` and `killpg(own group)` would reach the harness
//! itself or every process it may signal). And pidfds, which name one
//! process for good: a signal sent through one cannot reach a recycled pid.
//!
//! For a child this crate spawned, [`crate::ExitWatch`] is the better handle
//! (it keeps the pid reserved until released); this module is for the pids
//! and groups a caller learned otherwise (a ledger, the process table, a
//! child it holds as a [`std::process::Child`]).

use std::{
    io,
    os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use nix::{
    errno::Errno,
    poll::{PollFd, PollFlags, PollTimeout, poll},
};

pub use nix::sys::signal::Signal;

/// How often the table is polled where there are no pidfds.
const FALLBACK_POLL: Duration = Duration::from_millis(100);

/// True when `pid` may be signalled at all: not 0 or 1, not this process.
fn may_signal_pid(pid: u32) -> bool {
    pid > 1 && pid <= i32::MAX as u32 && pid != std::process::id()
}

/// True when group `pgid` may be signalled at all: not 0 or 1, not this
/// process's own group.
fn may_signal_group(pgid: u32) -> bool {
    pgid > 1
        && pgid <= i32::MAX as u32
        && i64::from(pgid) != i64::from(nix::unistd::getpgrp().as_raw())
}

/// Sends `signal` to every process of group `pgid` (`killpg`). `Ok(false)`
/// without sending when the group is 0, 1 or this process's own group;
/// the system's error when the signal cannot be sent (no such group, not
/// permitted).
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<bool> {
    if !may_signal_group(pgid) {
        return Ok(false);
    }
    nix::sys::signal::killpg(crate::raw(pgid), signal)?;
    Ok(true)
}

/// Sends `signal` to process `pid` (`kill`). `Ok(false)` without sending
/// when the pid is 0, 1 or this process; the system's error when the
/// signal cannot be sent.
pub fn signal_pid(pid: u32, signal: Signal) -> io::Result<bool> {
    if !may_signal_pid(pid) {
        return Ok(false);
    }
    nix::sys::signal::kill(crate::raw(pid), signal)?;
    Ok(true)
}

/// A pidfd (Linux 5.3 and later): a handle on one process that stays
/// with it, so a check made after opening it (its argv, its start time)
/// holds for the process the signal reaches.
#[derive(Debug)]
pub struct Pidfd {
    pid: u32,
    fd: OwnedFd,
}

impl Pidfd {
    /// A pidfd for `pid`, or `None` when there is no such process or the
    /// kernel offers no pidfds (the caller then polls the table).
    pub fn open(pid: u32) -> Option<Self> {
        #[cfg(target_os = "linux")]
        {
            if pid <= i32::MAX as u32 {
                // SAFETY: pidfd_open takes a pid and flags and returns a
                // new fd or -1; it touches no memory of ours.
                let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as i32, 0) };
                if fd >= 0 {
                    // SAFETY: the fd was just returned to us and is owned
                    // by no one else.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
                    return Some(Self { pid, fd });
                }
            }
        }
        let _ = pid;
        None
    }

    /// The pid this pidfd was opened for.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to the process (`pidfd_send_signal`); a process that
    /// has exited is not signalled (the kernel's `ESRCH`). `Ok(false)`
    /// without sending when the pid is 0, 1 or this process.
    pub fn send_signal(&self, signal: Signal) -> io::Result<bool> {
        if !may_signal_pid(self.pid) {
            return Ok(false);
        }
        #[cfg(target_os = "linux")]
        {
            // SAFETY: a valid pidfd, a signal number, no siginfo, no flags.
            let sent = unsafe {
                nix::libc::syscall(
                    nix::libc::SYS_pidfd_send_signal,
                    self.fd.as_raw_fd(),
                    signal as nix::libc::c_int,
                    std::ptr::null::<nix::libc::siginfo_t>(),
                    0,
                )
            };
            if sent == 0 {
                Ok(true)
            } else {
                Err(io::Error::last_os_error())
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = signal;
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    /// Waits at most `within` until the process has exited (the pidfd is
    /// readable): true when it has.
    pub fn wait_exited_within(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let millis = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(millis)) {
                Ok(n) if n > 0 => return true,
                Err(Errno::EINTR) => continue,
                Ok(_) if left.is_zero() => return false,
                Ok(_) => continue,
                // A pidfd that cannot be polled says nothing: not known to have exited.
                Err(_) => return false,
            }
        }
    }

    /// Waits until the process has exited (the pidfd is readable).
    pub fn wait_exited(&self) {
        loop {
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(n) if n > 0 => return,
                Err(Errno::EINTR) | Ok(_) => continue,
                // A pidfd that cannot be polled: fall back to "gone" rather
                // than block for ever on something that never says so.
                Err(_) => return,
            }
        }
    }
}

/// Waits, at most `within`, until process `pid` has exited (it is a zombie
/// or gone): true when it has. A pidfd wait, for any pid, the caller's
/// child or not; without pidfds, the table is polled. For a caller that
/// signalled `pid` itself and must not read the process table before the
/// signal took effect (a SIGKILL is delivered asynchronously: the process
/// may still show as running for a moment).
pub fn wait_exited(pid: u32, within: Duration) -> bool {
    match Pidfd::open(pid) {
        Some(fd) => fd.wait_exited_within(within),
        None => {
            let deadline = Instant::now() + within;
            loop {
                if !crate::table::is_alive(pid) {
                    return true;
                }
                if Instant::now() >= deadline {
                    return false;
                }
                std::thread::sleep(FALLBACK_POLL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_and_group_zero_one_and_our_own_are_refused() {
        let me = std::process::id();
        let own_group = nix::unistd::getpgrp().as_raw() as u32;
        // SIGCONT harms no one should a guard fail; `Ok(true)` would say
        // it was sent.
        for pid in [0, 1, me, u32::MAX] {
            assert!(!signal_pid(pid, Signal::SIGCONT).unwrap(), "pid {pid}");
        }
        for pgid in [0, 1, own_group, u32::MAX] {
            assert!(
                !signal_group(pgid, Signal::SIGCONT).unwrap(),
                "group {pgid}"
            );
        }
        let own = Pidfd::open(me).expect("a pidfd for this process");
        assert!(!own.send_signal(Signal::SIGCONT).unwrap());
    }

    #[test]
    fn a_child_and_its_group_are_signalled_and_seen_to_exit() {
        use std::os::unix::process::CommandExt;
        for how in ["pid", "group", "pidfd"] {
            let mut child = std::process::Command::new("sleep")
                .arg("60")
                .process_group(0)
                .spawn()
                .expect("spawn sleep");
            let pid = child.id();
            let pidfd = Pidfd::open(pid).expect("a pidfd for the child");
            assert_eq!(pidfd.pid(), pid);
            let sent = match how {
                "pid" => signal_pid(pid, Signal::SIGKILL),
                "group" => signal_group(pid, Signal::SIGKILL),
                _ => pidfd.send_signal(Signal::SIGKILL),
            };
            let exited = pidfd.wait_exited_within(Duration::from_secs(10));
            if !exited {
                let _ = child.kill();
            }
            let status = child.wait().expect("reap the child");
            assert!(sent.unwrap(), "{how}: not sent");
            assert!(exited, "{how}: not seen to exit");
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "{how}");
        }
    }

    #[test]
    fn a_reaped_child_cannot_be_signalled_through_its_pidfd() {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pidfd = Pidfd::open(child.id()).expect("a pidfd for the child");
        child.wait().expect("reap the child");
        assert!(pidfd.wait_exited_within(Duration::from_secs(10)));
        let sent = pidfd.send_signal(Signal::SIGKILL);
        assert_eq!(sent.unwrap_err().raw_os_error(), Some(nix::libc::ESRCH));
    }

    #[test]
    fn wait_exited_gives_up_at_its_deadline_on_a_live_process() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .expect("spawn sleep");
        let exited = wait_exited(child.id(), Duration::from_millis(50));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!exited);
    }
}
