//! The process observer: finds every live process a scenario started by its
//! marker (in argv or the environment), tells which left the server's group,
//! finds zombies, and always kills and reaps what it finds.
//!
//! The scans themselves are `mcp-stdio-process`'s (`marker`, `table`), the
//! same the client, the server check and every test use; this module keeps
//! the runner's and the client check's view of them (whole names). A
//! process is the scenario's if it carries the scenario's unique marker: no
//! pid the client reports is trusted.

use std::{collections::BTreeSet, time::Duration, time::Instant};

pub use mcp_stdio_process::MARKER_ENV;
use mcp_stdio_process::{marker, table};
use serde::Serialize;

/// A live process that carries the marker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marked {
    pub pid: u32,
    pub name: String,
    pub pgid: Option<u32>,
}

impl From<marker::Marked> for Marked {
    fn from(marked: marker::Marked) -> Self {
        Marked {
            pid: marked.pid,
            name: whole_name(marked.pid, marked.name),
            pgid: marked.pgid,
        }
    }
}

/// The kernel truncates a process's name to 15 bytes (`fixture-eof-ign`);
/// when `name` may be truncated and argv[0]'s file name continues it, that
/// file name, whole: names in reports are whole.
pub(crate) fn whole_name(pid: u32, name: String) -> String {
    if name.len() < 15 {
        return name;
    }
    let Some(argv0) = table::cmdline(pid).and_then(|argv| argv.into_iter().next()) else {
        return name;
    };
    let first = argv0.split_whitespace().next().unwrap_or_default();
    let base = first.rsplit('/').next().unwrap_or(first);
    if base.starts_with(&name) {
        base.to_owned()
    } else {
        name
    }
}

/// A pid as a ledger or a report writes it: a JSON number that fits a
/// pid (`u32`), else `None`.
pub fn pid_in(value: &serde_json::Value) -> Option<u32> {
    value.as_u64().and_then(|pid| u32::try_from(pid).ok())
}

/// Makes this process a child subreaper (Linux), so orphans of a scenario
/// re-parent to the runner, which can then reap them by pid.
pub fn become_subreaper() {
    mcp_stdio_process::become_subreaper();
}

/// Live (non-zombie) processes carrying `marker` as `--marker=<marker>` in
/// argv or as the value of an environment variable, ordered by pid.
pub fn marked(marker: &str) -> Vec<Marked> {
    marker::marked(marker)
        .into_iter()
        .map(Marked::from)
        .collect()
}

/// True when `pid` is a zombie (exited, not yet reaped).
pub fn is_zombie(pid: u32) -> bool {
    table::is_zombie(pid)
}

/// The parent of `pid`, if it is still in the process table.
pub fn parent_of(pid: u32) -> Option<u32> {
    table::parent_of(pid)
}

/// Kills every process carrying `marker` (by pid, SIGKILL) until none is
/// left or `within` passes, then reaps whatever of `pids` (and of the killed)
/// became this process's zombie through the subreaper. Returns the pids
/// that were killed.
pub fn kill_and_reap(marker: &str, pids: &BTreeSet<u32>, within: Duration) -> Vec<u32> {
    marker::kill_and_reap(marker, pids, within)
}

/// Reaps each of `pids` that is (or becomes, before `deadline`) a zombie
/// child of this process. Pids that are not our children are skipped.
pub fn reap(pids: impl Iterator<Item = u32>, deadline: Instant) {
    marker::reap(pids, deadline);
}
