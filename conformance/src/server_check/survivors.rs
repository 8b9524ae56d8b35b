//! Processes that outlived stdin EOF or the server itself: who they are,
//! whether they left the server's process group, and how busy they are.

use std::time::Duration;

use mcp_stdio_process::table;
use serde::Serialize;

use super::instance::Instance;
use crate::observer::Marked;

/// A live process that carries the run's marker.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Survivor {
    pub pid: u32,
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
    /// Percent of the sampling window it was busy (running or ready to
    /// run), when sampled: see [`sample_cpu`].
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

/// The kernel truncates a process's name to 15 bytes (`fixture-lingeri`):
/// the observer's whole name (argv[0]'s file name when it continues it).
fn display_name(marked: &Marked) -> String {
    crate::observer::whole_name(marked.pid, marked.name.clone())
}

/// How often [`sample_cpu`] looks at each survivor's threads.
const SAMPLE_EVERY: Duration = Duration::from_millis(5);

/// Samples how busy each survivor is over `window` (an observation window:
/// how much CPU they want while nobody talks to them): the share of samples
/// in which one of its threads was running or ready to run. A busy loop
/// reads about 100% even on a machine so loaded that it got a sliver of a
/// core (its CPU time would say "idle"), and an idle process about 0%.
pub async fn sample_cpu(survivors: &mut [Survivor], window: Duration) {
    let mut samples = vec![(0u32, 0u32); survivors.len()];
    let started = std::time::Instant::now();
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for (survivor, (runnable, seen)) in survivors.iter().zip(samples.iter_mut()) {
            if let Some(now) = table::runnable(survivor.pid) {
                *seen += 1;
                *runnable += u32::from(now);
            }
        }
        if started.elapsed() >= window {
            break;
        }
    }
    for (survivor, (runnable, seen)) in survivors.iter_mut().zip(samples) {
        if seen > 0 {
            survivor.cpu_percent = Some(f64::from(runnable) * 100.0 / f64::from(seen));
        }
    }
}
