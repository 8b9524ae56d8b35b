//! The environment a scenario runs in: its marker, its temporary directory
//! and the ledger in it, the fixture directory, and the process table as
//! seen through the marker. Nothing here depends on the subject under test.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use mcp_stdio_client::config::StdioConfig;
use serde_json::Value;

use crate::{
    observer::{self, MARKER_ENV},
    outcome::SurvivorOutcome,
};

pub(crate) struct Env {
    /// Unique to the run: every process the scenario starts carries it.
    pub marker: String,
    pub tmp: PathBuf,
    pub fixtures: Result<PathBuf, String>,
}

/// One ledger record, with the fields the runner reads.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub pid: u32,
    pub ppid: u32,
    pub pgid: u32,
    /// Wall-clock milliseconds (comparable across processes).
    pub t_ms: u64,
    pub fixture: String,
    pub event: String,
    pub raw: Value,
}

impl Env {
    pub fn new(marker: String, tmp: PathBuf) -> Self {
        let fixtures = mcp_fixtures::locate::fixtures_dir().map(Path::to_path_buf);
        Self {
            marker,
            tmp,
            fixtures,
        }
    }

    pub fn ledger_path(&self) -> PathBuf {
        self.tmp.join("ledger.jsonl")
    }

    pub fn fixtures_dir(&self) -> String {
        self.fixtures
            .as_deref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// `{fixtures}`, `{marker}` and `{tmp}` in a scenario string.
    pub fn substitute(&self, text: &str) -> String {
        text.replace("{fixtures}", &self.fixtures_dir())
            .replace("{marker}", &self.marker)
            .replace("{tmp}", &self.tmp.to_string_lossy())
    }

    /// Every scenario process carries the marker in its environment, the
    /// ledger path, and this process as the anchor that ends a fixture when
    /// the harness is gone (SIGKILLed mid-run); fixtures also get the marker
    /// in argv.
    pub fn mark(&self, stdio: &mut StdioConfig) {
        stdio.env.insert(MARKER_ENV.into(), self.marker.clone());
        if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
            stdio
                .env
                .insert(mcp_stdio_process::ANCHOR_ENV.into(), anchor.to_string());
        }
        stdio.env.insert(
            mcp_fixtures::ledger::LEDGER_ENV.into(),
            self.ledger_path().to_string_lossy().into_owned(),
        );
    }

    /// The ledger so far, in the order it was written.
    pub fn ledger(&self) -> Vec<Record> {
        std::fs::read_to_string(self.ledger_path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|raw| Record {
                pid: observer::pid_in(&raw["pid"]).unwrap_or(0),
                ppid: observer::pid_in(&raw["ppid"]).unwrap_or(0),
                pgid: observer::pid_in(&raw["pgid"]).unwrap_or(0),
                t_ms: raw["t_ms"].as_u64().unwrap_or(0),
                fixture: raw["fixture"].as_str().unwrap_or("?").to_owned(),
                event: raw["event"].as_str().unwrap_or("?").to_owned(),
                raw,
            })
            .collect()
    }

    /// pid → fixture name, from the ledger's records.
    pub fn fixture_of(&self) -> BTreeMap<u32, String> {
        let mut fixture_of = BTreeMap::new();
        for record in self.ledger() {
            fixture_of.entry(record.pid).or_insert(record.fixture);
        }
        fixture_of
    }

    /// Marked processes alive right now, named by their ledger fixture, with
    /// whether they left every one of `groups`.
    pub fn alive(&self, groups: &[u32]) -> Vec<SurvivorOutcome> {
        let fixture_of = self.fixture_of();
        let mut alive: Vec<SurvivorOutcome> = observer::marked(&self.marker)
            .iter()
            .map(|s| SurvivorOutcome {
                name: fixture_of
                    .get(&s.pid)
                    .cloned()
                    .unwrap_or_else(|| s.name.clone()),
                left_group: !s.pgid.is_some_and(|pgid| groups.contains(&pgid)),
            })
            .collect();
        alive.sort();
        alive
    }
}

/// Live (not zombie) processes of group `pgid` right now, and the state
/// letter of `pid` (`None` when it is gone from the table). The harness's
/// own reading of `/proc/<pid>/stat`, one pass, no allocation per process
/// beyond the read: fast enough to be the observation "at the instant" a
/// close returns, and independent of the client's process code it checks.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| stat(*pid).is_some_and(|(state, group)| group == pgid && state != 'Z'))
        .collect()
}

/// `pid` and its ancestors up to init, right now: the client's own line of
/// processes (the program that started a server, the driver that runs it,
/// the harness and up). A client that leaves its servers in its own process
/// group (the TypeScript SDK does) shares that group with them, so a check
/// on the server's group must not count this line as the server's members.
pub(crate) fn ancestry(pid: u32) -> Vec<u32> {
    let mut line = Vec::new();
    let mut next = pid;
    while next > 1 && !line.contains(&next) {
        line.push(next);
        let Some(parent) = parent(next) else { break };
        next = parent;
    }
    line
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The children of `parent` right now, with their state letters.
pub(crate) fn children_of(parent: u32) -> Vec<(u32, char)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let ppid: u32 = fields.next()?.parse().ok()?;
            (ppid == parent).then_some((pid, state))
        })
        .collect()
}

/// The state letter of `pid` (`Z` for a zombie), `None` when it is gone.
pub(crate) fn state_of(pid: u32) -> Option<char> {
    stat(pid).map(|(state, _)| state)
}

fn stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: split after the last ')'.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let pgid = fields.nth(1)?.parse().ok()?;
    Some((state, pgid))
}

/// Wall-clock milliseconds, as the ledger writes them.
pub(crate) fn now_ms() -> u64 {
    mcp_fixtures::ledger::now_ms()
}
