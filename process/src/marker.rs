//! Markers: how a test or a check finds every process it started, wherever
//! it went (another process group, another parent, a new session).
//!
//! A marker is a unique string. The processes under test carry it in argv
//! as `--marker=<marker>` or in the environment as the value of any
//! variable (conventionally [`MARKER_ENV`]), and pass it on to whatever
//! they start. A scan of the process table ([`Marker::processes`]) finds
//! its live carriers without trusting any pid a process reported;
//! [`Marker::kill_leftovers`] kills them by pid until none is left, and
//! [`reap`] collects those re-parented to this process (a subreaper).
//! [`MarkerGuard`] does the cleanup on drop, also when a test fails.

use std::{
    collections::BTreeSet,
    fmt,
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{Signal, kill},
        wait::{WaitPidFlag, WaitStatus, waitpid},
    },
    unistd::Pid,
};

use crate::{raw, table};

/// The environment variable every process under test carries its marker in.
pub const MARKER_ENV: &str = "MCP_CONFORMANCE_MARKER";

/// How often the cleanup looks at the table again while killing.
const POLL: Duration = Duration::from_millis(5);

/// A unique marker for one process tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Marker(String);

impl Marker {
    /// A marker no other process tree has: `<prefix>-<our pid>-<n>-<nanos>`.
    pub fn new(prefix: &str) -> Marker {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        Marker(format!("{prefix}-{}-{n}-{nanos:08x}", std::process::id()))
    }

    /// A marker with exactly this value (one handed over by another process).
    pub fn from_value(value: impl Into<String>) -> Marker {
        Marker(value.into())
    }

    /// The marker itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The marker as an argument: `--marker=<marker>`.
    pub fn arg(&self) -> String {
        format!("--marker={}", self.0)
    }

    /// Live processes carrying the marker, by pid.
    pub fn processes(&self) -> Vec<Marked> {
        marked(&self.0)
    }

    /// The pids of [`Marker::processes`].
    pub fn pids(&self) -> Vec<u32> {
        self.processes().into_iter().map(|m| m.pid).collect()
    }

    /// Waits up to `within` until no live process carries the marker;
    /// returns what is left.
    pub fn wait_gone(&self, within: Duration) -> Vec<Marked> {
        let deadline = Instant::now() + within;
        loop {
            let left = self.processes();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(POLL);
        }
    }

    /// SIGKILLs every carrier by pid until none is left or `within` passes,
    /// then reaps those that became this process's zombies. Returns the
    /// pids that were killed.
    pub fn kill_leftovers(&self, within: Duration) -> Vec<u32> {
        kill_and_reap(&self.0, &BTreeSet::new(), within)
    }
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Kills every carrier of its marker when dropped: whatever a test did, and
/// however it failed, nothing it started outlives it.
pub struct MarkerGuard {
    marker: Marker,
    within: Duration,
}

impl MarkerGuard {
    /// Guards `marker`; the cleanup on drop gives up after `within`.
    pub fn new(marker: Marker, within: Duration) -> MarkerGuard {
        MarkerGuard { marker, within }
    }

    /// The guarded marker.
    pub fn marker(&self) -> &Marker {
        &self.marker
    }
}

impl Drop for MarkerGuard {
    fn drop(&mut self) {
        self.marker.kill_leftovers(self.within);
    }
}

/// A live process that carries a marker.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Marked {
    /// Its pid.
    pub pid: u32,
    /// The kernel's name for it (15 bytes at most).
    pub name: String,
    /// Its process group, if it could be read.
    pub pgid: Option<u32>,
}

/// Live (non-zombie) processes carrying `marker` as `--marker=<marker>` in
/// argv or as the value of an environment variable, ordered by pid.
pub fn marked(marker: &str) -> Vec<Marked> {
    // One scan of the table, the one every survivor verdict rests on; the
    // marker is read only for the living.
    let mut found: Vec<Marked> = table::snapshot()
        .into_iter()
        .filter(|(_, stat)| stat.is_alive())
        .filter(|(pid, _)| carries(*pid, marker))
        .map(|(pid, stat)| Marked {
            pid,
            name: table::name(pid).unwrap_or_else(|| "?".into()),
            pgid: Some(stat.pgid),
        })
        .collect();
    found.sort_by_key(|m| m.pid);
    found
}

/// True when `pid` carries `marker`: `--marker=<marker>` in its argv, or
/// `marker` as the value of one of its environment variables.
pub fn carries(pid: u32, marker: &str) -> bool {
    let arg = format!("--marker={marker}");
    let in_argv = std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).any(|a| a == arg.as_bytes()));
    in_argv
        || std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
            environ
                .split(|b| *b == 0)
                .any(|var| var.splitn(2, |b| *b == b'=').nth(1) == Some(marker.as_bytes()))
        })
}

/// Kills every process carrying `marker` (by pid, SIGKILL) until none is
/// left or `within` passes, then reaps whatever of `pids` (and of the
/// killed) became this process's zombie through the subreaper. Returns the
/// pids that were killed.
pub fn kill_and_reap(marker: &str, pids: &BTreeSet<u32>, within: Duration) -> Vec<u32> {
    let deadline = Instant::now() + within;
    let mut killed = BTreeSet::new();
    loop {
        let left = marked(marker);
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        for process in left {
            let _ = kill(raw(process.pid), Signal::SIGKILL);
            killed.insert(process.pid);
        }
        std::thread::sleep(POLL);
    }
    reap(pids.iter().chain(&killed).copied(), deadline);
    killed.into_iter().collect()
}

/// Reaps each of `pids` that is (or becomes, before `deadline`) a zombie
/// child of this process. Pids that are not our children are skipped, so
/// no other owner's child is ever reaped from under it.
pub fn reap(pids: impl IntoIterator<Item = u32>, deadline: Instant) {
    let me = std::process::id();
    for pid in pids {
        loop {
            if table::parent_of(pid) != Some(me) {
                break;
            }
            match waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => break,
            }
        }
    }
}

/// Reaps the zombies of process group `pgid` that were re-parented to this
/// process (a subreaper) and exited before any scan saw them alive, such as
/// a launcher's grandchild that exited on EOF. Only members of `pgid` whose
/// parent is this process are touched, and never `leader` (its
/// [`crate::ExitWatch`] reaps it, after the last signal to the group).
pub fn reap_group_zombies(pgid: u32, leader: u32) {
    let me = std::process::id();
    for (pid, stat) in table::snapshot() {
        if stat.state == 'Z' && pid != leader && stat.ppid == me && stat.pgid == pgid {
            let _ = waitpid(Pid::from_raw(pid as i32), Some(WaitPidFlag::WNOHANG));
        }
    }
}
