//! Containment, the opt-in that ends at close everything a server started,
//! processes that left its process group or session included (docs/client.md,
//! "Containment"; the machinery is `mcp_stdio_process::contain`).

use mcp_stdio_process::contain::{self, Prefer};

/// How a server is contained: [`crate::ConnectOptions::contain`],
/// [`crate::SessionOptions::contain`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Contain {
    /// Only the process group is ended at close (the default): a descendant
    /// that left the group (`setsid`, a daemon) outlives close.
    #[default]
    Off,
    /// Everything the server started is ended at close: in a cgroup v2 of
    /// its own where this process may make one (with `cgroup.kill`), else by
    /// tracking its descendants through the process table, as a child
    /// subreaper. `MCP_STDIO_CONTAIN=tracked` in the environment makes it
    /// track everywhere.
    On,
    /// As [`Contain::On`], always by tracking, even where a cgroup could be
    /// made (tests of the fallback; a host that must not make cgroups).
    Tracked,
}

impl From<bool> for Contain {
    fn from(on: bool) -> Self {
        if on { Contain::On } else { Contain::Off }
    }
}

impl Contain {
    /// The containment of one server about to be spawned, or `None` when off.
    pub(crate) fn prepare(self) -> Option<contain::Containment> {
        match self {
            Contain::Off => None,
            Contain::On => Some(contain::Containment::new(Prefer::Cgroup)),
            Contain::Tracked => Some(contain::Containment::new(Prefer::Tracked)),
        }
    }
}

/// How a server was contained.
pub use mcp_stdio_process::contain::Method as ContainMethod;

/// What containment ended at close ([`crate::CloseOutcome::contained`]): the
/// method, and how many live processes it killed (whatever the server
/// started that outlived the end of its process group).
pub use mcp_stdio_process::contain::Ended as Contained;
