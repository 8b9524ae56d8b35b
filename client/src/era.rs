//! The two protocol eras, as a host configures them and as a connection reports them.
//!
//! MCP 2026-07-28 removed the `initialize` handshake: a modern client asks
//! `server/discover` and then sends its protocol version and capabilities in
//! the `_meta` of every request. Older servers know only `initialize`. How
//! start-up picks one is `handshake`'s; this module holds only the data both
//! sides name (settings, outcomes, the fallback's reason), so that the event
//! log can name them without depending on the start-up machinery.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Which era a client speaks to a server in: set per server in the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EraSetting {
    /// Probe with `server/discover`, fall back to `initialize` (the default).
    #[default]
    Auto,
    /// `server/discover` only: for servers known to be modern.
    Modern,
    /// `initialize` only: for servers known to be legacy (no probe to pay).
    Legacy,
}

impl EraSetting {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EraSetting::Auto => "auto",
            EraSetting::Modern => "modern",
            EraSetting::Legacy => "legacy",
        }
    }

    /// Parses the config spelling (case-insensitive).
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "auto" => Some(EraSetting::Auto),
            "modern" => Some(EraSetting::Modern),
            "legacy" => Some(EraSetting::Legacy),
            _ => None,
        }
    }
}

impl std::fmt::Display for EraSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The era a server is actually spoken to in, chosen at start-up and kept
/// for the life of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Era {
    /// 2026-07-28 and later: `server/discover`, `_meta` on every request.
    Modern,
    /// The `initialize` handshake.
    Legacy,
}

impl Era {
    /// `modern` or `legacy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }
}

impl std::fmt::Display for Era {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether, and how often, a server that exits unexpectedly is started
/// again (RESTART, RESTART_BACKOFF). Off by default: a dead server stays dead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed over the client's life; 0 means never.
    pub attempts: u32,
    /// The wait before the first restart; it doubles for each later one, so
    /// a crash loop cannot storm.
    pub backoff: Duration,
}

/// The wait before a first restart.
pub const DEFAULT_RESTART_BACKOFF: Duration = Duration::from_millis(500);

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            attempts: 0,
            backoff: DEFAULT_RESTART_BACKOFF,
        }
    }
}

impl RestartPolicy {
    /// The wait before restart number `done + 1`.
    pub fn delay(&self, done: u32) -> Duration {
        self.backoff.saturating_mul(1u32 << done.min(16))
    }
}

/// Default bound on the `server/discover` probe in `auto`: long enough for a
/// server that is merely slow to start, short enough that a legacy server
/// that stays silent before `initialize` costs seconds, not rmcp's 10.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why an `auto` start-up fell back to the legacy handshake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum Fallback {
    /// `server/discover` was answered with a (non-modern) JSON-RPC error.
    Error {
        /// The JSON-RPC error code.
        code: i32,
        /// The error's message.
        message: String,
    },
    /// No answer within the probe bound.
    Silent {
        /// How long the probe waited, in milliseconds.
        waited_ms: u64,
    },
}
