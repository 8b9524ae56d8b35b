//! The process observer: finds every live process a scenario started by its
//! marker (in argv or the environment), tells which left the server's group,
//! finds zombies, and always kills and reaps what it finds.
//!
//! The scan uses sysinfo, so it does not trust pids the client reports: a
//! process is the scenario's if it carries the scenario's unique marker.

use std::{
    collections::BTreeSet,
    ffi::OsString,
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{Signal, kill},
        wait::{WaitPidFlag, waitpid},
    },
    unistd::{Pid, getpgid},
};
use serde::Serialize;
use sysinfo::{ProcessRefreshKind, ProcessStatus, ProcessesToUpdate, System, UpdateKind};

/// The environment variable every scenario process carries its marker in.
pub const MARKER_ENV: &str = "MCP_CONFORMANCE_MARKER";

/// A live process that carries the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marked {
    pub pid: i32,
    pub name: String,
    pub pgid: Option<i32>,
}

/// Makes this process a child subreaper (Linux), so orphans of a scenario
/// re-parent to the runner, which can then reap them by pid. Elsewhere, and
/// if the call fails, orphans go to init as usual.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_child_subreaper(true);
    }
}

/// Live (non-zombie) processes carrying `marker` as `--marker=<marker>` in
/// argv or as the value of an environment variable.
pub fn marked(marker: &str) -> Vec<Marked> {
    let Some(mut system) = system() else {
        return Vec::new();
    };
    system.refresh_processes_specifics(
        ProcessesToUpdate::All,
        true,
        ProcessRefreshKind::nothing()
            .with_cmd(UpdateKind::Always)
            .with_environ(UpdateKind::Always),
    );
    let arg: OsString = format!("--marker={marker}").into();
    let env_suffix = format!("={marker}");
    let mut found: Vec<Marked> = system
        .processes()
        .iter()
        // sysinfo lists a process's threads as tasks of their own: count processes.
        .filter(|(_, process)| process.thread_kind().is_none())
        .filter(|(_, process)| {
            !matches!(
                process.status(),
                ProcessStatus::Zombie | ProcessStatus::Dead
            )
        })
        .filter(|(_, process)| {
            process.cmd().contains(&arg)
                || process.environ().iter().any(|var| {
                    var.to_string_lossy().ends_with(&env_suffix)
                        && var.to_string_lossy().contains('=')
                })
        })
        .map(|(pid, process)| {
            let pid = pid.as_u32() as i32;
            Marked {
                pid,
                name: process.name().to_string_lossy().into_owned(),
                pgid: getpgid(Some(Pid::from_raw(pid))).ok().map(Pid::as_raw),
            }
        })
        .collect();
    found.sort_by_key(|m| m.pid);
    found
}

/// An empty process-table handle; `None` only where sysinfo cannot read the
/// process table at all (then there is nothing to observe).
fn system() -> Option<System> {
    match System::new() {
        Ok(system) => Some(system),
        Err(error) => {
            eprintln!("cannot read the process table: {error}");
            None
        }
    }
}

/// True when `pid` is a zombie (exited, not yet reaped).
pub fn is_zombie(pid: i32) -> bool {
    let Some(mut system) = system() else {
        return false;
    };
    let sys_pid = sysinfo::Pid::from_u32(pid as u32);
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[sys_pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system
        .process(sys_pid)
        .is_some_and(|process| process.status() == ProcessStatus::Zombie)
}

/// The parent of `pid`, if it is still in the process table.
pub fn parent_of(pid: i32) -> Option<i32> {
    let mut system = system()?;
    let sys_pid = sysinfo::Pid::from_u32(pid as u32);
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(&[sys_pid]),
        true,
        ProcessRefreshKind::nothing(),
    );
    system.process(sys_pid)?.parent().map(|p| p.as_u32() as i32)
}

/// Kills every process carrying `marker` (by pid, SIGKILL) until none is
/// left or `within` passes, then reaps whatever of `pids` (and of the killed)
/// became this process's zombie through the subreaper. Returns the pids
/// that were killed.
pub fn kill_and_reap(marker: &str, pids: &BTreeSet<i32>, within: Duration) -> Vec<i32> {
    let deadline = Instant::now() + within;
    let mut killed = BTreeSet::new();
    loop {
        let left = marked(marker);
        if left.is_empty() || Instant::now() > deadline {
            break;
        }
        for process in left {
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
            killed.insert(process.pid);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    reap(pids.iter().chain(&killed).copied(), deadline);
    killed.into_iter().collect()
}

/// Reaps each of `pids` that is (or becomes, before `deadline`) a zombie
/// child of this process. Pids that are not our children are skipped.
pub fn reap(pids: impl Iterator<Item = i32>, deadline: Instant) {
    let me = std::process::id() as i32;
    for pid in pids {
        loop {
            if parent_of(pid) != Some(me) {
                break;
            }
            match waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)) {
                Ok(nix::sys::wait::WaitStatus::StillAlive) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => break,
            }
        }
    }
}
