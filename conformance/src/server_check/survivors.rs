//! Processes that outlived stdin EOF or the server itself: who they are,
//! whether they left the server's process group, and how busy they are.

use std::{collections::BTreeMap, time::Duration};

use mcp_stdio_process::table;
use serde::Serialize;

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
    /// Percent of one core it wanted (ran or waited to run) over the
    /// sampling window, when sampled: see [`sample_cpu`].
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
    let Some(argv0) = table::cmdline(marked.pid as u32).and_then(|argv| argv.into_iter().next())
    else {
        return marked.name.clone();
    };
    let first = argv0.split_whitespace().next().unwrap_or_default();
    let base = first.rsplit('/').next().unwrap_or(first);
    if base.starts_with(&marked.name) {
        base.to_owned()
    } else {
        marked.name.clone()
    }
}

/// Samples how much CPU each survivor wants over `window` (an observation
/// window: how much CPU they burn while nobody talks to them). The figure
/// is the time it ran or waited to run, so a busy loop reads about 100% of
/// a core even on a machine so loaded that it got a fraction of one; where
/// the kernel keeps no such account, the CPU time it got.
pub async fn sample_cpu(survivors: &mut [Survivor], window: Duration) {
    let before = cpu_times(survivors);
    let started = std::time::Instant::now();
    tokio::time::sleep(window).await;
    let after = cpu_times(survivors);
    let elapsed = started.elapsed().max(Duration::from_millis(1));
    for survivor in survivors {
        if let (Some(a), Some(b)) = (before.get(&survivor.pid), after.get(&survivor.pid)) {
            survivor.cpu_percent =
                Some(b.saturating_sub(*a).as_secs_f64() * 100.0 / elapsed.as_secs_f64());
        }
    }
}

/// What each survivor still present has wanted of the CPU so far.
fn cpu_times(survivors: &[Survivor]) -> BTreeMap<i32, Duration> {
    survivors
        .iter()
        .filter_map(|s| {
            let pid = s.pid as u32;
            Some((
                s.pid,
                table::cpu_demand(pid).or_else(|| table::cpu_time(pid))?,
            ))
        })
        .collect()
}
