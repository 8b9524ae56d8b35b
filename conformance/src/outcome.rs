//! What a scenario run produced, normalized so two runs on two machines
//! render the same text: the insta snapshot of a scenario.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::scenario::Bucket;

/// The normalized outcome of one scenario.
#[derive(Debug, Default, Serialize)]
pub struct Outcome {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadOutcome>,
    pub steps: Vec<StepOutcome>,
    /// The client's lifecycle events, in order (skipped stdout lines are
    /// counted in `stdout_skipped` instead).
    pub events: Vec<String>,
    /// Each fixture process's ledger events, by fixture name.
    pub ledger: BTreeMap<String, Vec<String>>,
    pub survivors: Vec<SurvivorOutcome>,
    pub zombies: u32,
    pub stdout_skipped: u64,
    /// Skipped stdout lines by reason (`not_json`, `not_json_rpc`, `oversized`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub stdout_skipped_by_reason: BTreeMap<String, u64>,
    pub stderr_forwarded: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct LoadOutcome {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<LoadedServer>,
}

#[derive(Debug, Serialize)]
pub struct LoadedServer {
    pub name: String,
    pub transport: String,
    pub requires_consent: bool,
    pub serial: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct StepOutcome {
    pub step: String,
    /// `ok` or `error`.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The first line of the error message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_swept: Option<bool>,
    /// Only when the scenario asserts it: live processes containment killed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contained: Option<u32>,
    /// Only when the scenario asserts a bucket: the bucket it landed in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<Bucket>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct SurvivorOutcome {
    /// The fixture name it recorded in the ledger, else its process name.
    pub name: String,
    pub left_group: bool,
}

impl Outcome {
    /// The snapshot text.
    pub fn render(&self) -> String {
        yaml_serde::to_string(self)
            .unwrap_or_else(|error| format!("cannot render the outcome: {error}"))
    }
}

/// Replaces what varies between runs (temp paths, the fixture directory, the
/// marker, pids, the inherited PATH) with fixed placeholders: exact known
/// values first, longest first, so a path is replaced before its parts.
#[derive(Debug, Default)]
pub struct Normalizer {
    filters: Vec<(String, String)>,
}

impl Normalizer {
    pub fn add(&mut self, value: impl Into<String>, placeholder: &str) {
        let value = value.into();
        if !value.is_empty() {
            self.filters.push((value, placeholder.to_owned()));
            self.filters
                .sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        }
    }

    /// Pids are replaced only as whole numbers.
    pub fn add_pid(&mut self, pid: u32) {
        self.add(format!("pid {pid}"), "pid [PID]");
        self.add(format!("({pid})"), "([PID])");
    }

    pub fn apply(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (value, placeholder) in &self.filters {
            text = text.replace(value, placeholder);
        }
        text
    }
}
