//! Processes that outlived stdin EOF or the server itself: who they are,
//! whether they left the server's process group, and how busy they are.

use std::{collections::BTreeMap, time::Duration};

use serde::Serialize;
use sysinfo::{ProcessRefreshKind, ProcessesToUpdate, System};

use super::instance::Instance;
use crate::observer::Marked;

/// A live process that carries the run's marker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Survivor {
    pub pid: i32,
    pub name: String,
    /// True when it is in another process group than the server's (it
    /// called `setsid` or `setpgid`): no group signal can reach it.
    pub left_group: bool,
    /// True for the server process itself.
    pub is_server: bool,
    /// True when it no longer carries the marker (it was exec'd with
    /// another environment): found as a member of the server's group, under
    /// the server, or re-parented to the checker.
    pub unmarked: bool,
    /// Percent of one core over the sampling window, when sampled.
    pub cpu_percent: Option<f64>,
}

impl Survivor {
    pub fn from_marked(marked: &Marked, instance: &Instance) -> Survivor {
        Survivor {
            pid: marked.pid,
            name: display_name(marked),
            left_group: marked.pgid != Some(instance.pgid),
            is_server: marked.pid == instance.pid,
            unmarked: instance.is_unmarked(marked.pid),
            cpu_percent: None,
        }
    }
}

/// The kernel truncates a process's name to 15 bytes (`fixture-lingeri`);
/// when it looks truncated, the first word of argv[0] gives it whole.
fn display_name(marked: &Marked) -> String {
    if marked.name.len() < 15 {
        return marked.name.clone();
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", marked.pid)) else {
        return marked.name.clone();
    };
    let argv0 =
        String::from_utf8_lossy(cmdline.split(|b| *b == 0).next().unwrap_or_default()).into_owned();
    let first = argv0.split_whitespace().next().unwrap_or_default();
    let base = first.rsplit('/').next().unwrap_or(first);
    if base.starts_with(&marked.name) {
        base.to_owned()
    } else {
        marked.name.clone()
    }
}

/// Samples the CPU time of each survivor over `window` (an observation
/// window: how much CPU they burn while nobody talks to them).
pub async fn sample_cpu(survivors: &mut [Survivor], window: Duration) {
    let pids: Vec<sysinfo::Pid> = survivors
        .iter()
        .map(|s| sysinfo::Pid::from_u32(s.pid as u32))
        .collect();
    let Ok(mut system) = System::new() else {
        return;
    };
    let before = cpu_times(&mut system, &pids);
    let started = std::time::Instant::now();
    tokio::time::sleep(window).await;
    let after = cpu_times(&mut system, &pids);
    let elapsed_ms = started.elapsed().as_millis().max(1) as f64;
    for survivor in survivors {
        let pid = sysinfo::Pid::from_u32(survivor.pid as u32);
        if let (Some(a), Some(b)) = (before.get(&pid), after.get(&pid)) {
            survivor.cpu_percent = Some(b.saturating_sub(*a) as f64 * 100.0 / elapsed_ms);
        }
    }
}

/// Accumulated CPU milliseconds of each pid still present.
fn cpu_times(system: &mut System, pids: &[sysinfo::Pid]) -> BTreeMap<sysinfo::Pid, u64> {
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(pids),
        true,
        ProcessRefreshKind::nothing().with_cpu(),
    );
    pids.iter()
        .filter_map(|pid| Some((*pid, system.process(*pid)?.accumulated_cpu_time())))
        .collect()
}
