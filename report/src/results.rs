//! The per-scenario result files the scenario runner writes into
//! `MCP_CONFORMANCE_RESULTS_DIR` (schema 1, see docs/conformance-report.md).

use std::path::Path;

use crate::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The result-file schema version this reader understands.
pub const RESULT_SCHEMA: u32 = 1;

/// One scenario's result, as the runner wrote it. Unknown fields are
/// ignored, so the runner may add fields without a schema bump; removing or
/// redefining one bumps `schema`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct ScenarioResult {
    /// The result file's schema ([`RESULT_SCHEMA`]).
    pub schema: u32,
    /// The scenario's name (`lifecycle/eof-close`).
    pub name: String,
    /// One sentence: what the scenario proves.
    #[serde(default)]
    pub description: String,
    /// The contract rules it cites.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Whether every check passed.
    pub passed: bool,
    /// How long the scenario ran.
    pub duration_ms: u64,
    /// Its checks, in the order they ran.
    #[serde(default)]
    pub checks: Vec<Check>,
    /// Why the scenario could not run to its end, if it could not.
    #[serde(default)]
    pub failure: Option<String>,
}

/// One check inside a scenario; `id` is stable across runs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Check {
    /// The check's id, stable across runs (`close.path`).
    pub id: String,
    /// Whether it passed.
    pub passed: bool,
    /// What it saw, when it failed.
    #[serde(default)]
    pub message: String,
}

impl ScenarioResult {
    /// Stands in for a scenario the runner selected but wrote no file for:
    /// its trial crashed, hung and was killed, or never started.
    pub fn missing(name: &str) -> Self {
        Self {
            schema: RESULT_SCHEMA,
            name: name.to_owned(),
            description: String::new(),
            rules: Vec::new(),
            passed: false,
            duration_ms: 0,
            checks: Vec::new(),
            failure: Some(format!(
                "the runner wrote no result file for `{name}`: its trial crashed, was killed \
                 (e.g. by a nextest timeout) or did not start; see the runner's output above"
            )),
        }
    }
}

/// The file name the runner uses for scenario `name`.
pub fn file_name(name: &str) -> String {
    format!("{}.json", name.replace('/', "__"))
}

/// Parses one result file's text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<ScenarioResult> {
    // Check the version before the shape, so a future schema fails with a
    // message about the version rather than about a missing field.
    let value: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{origin} is not JSON"))?;
    match value.get("schema").and_then(serde_json::Value::as_u64) {
        Some(schema) if schema == u64::from(RESULT_SCHEMA) => {}
        Some(schema) => bail!(
            "{origin} has result schema {schema}; this xtask reads schema {RESULT_SCHEMA} \
             (update mcp-conformance-report with the runner)"
        ),
        None => bail!("{origin} has no numeric `schema` field"),
    }
    serde_json::from_value(value)
        .with_context(|| format!("{origin} does not match result schema {RESULT_SCHEMA}"))
}

/// Reads every `*.json` file in `dir`, sorted by scenario name. Each file's
/// name must be the one the runner derives from the scenario name inside it.
pub fn read_dir(dir: &Path) -> Result<Vec<ScenarioResult>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the results directory {}", dir.display()))?;
    let mut results = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read the results directory {}", dir.display()))?
            .path();
        if path.extension().is_none_or(|extension| extension != "json") {
            continue;
        }
        let origin = format!("result file {}", path.display());
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {origin}"))?;
        let result = parse(&text, &origin)?;
        let expected = file_name(&result.name);
        if path
            .file_name()
            .is_none_or(|actual| actual != expected.as_str())
        {
            bail!(
                "{origin} holds scenario `{}`, whose file should be named {expected}",
                result.name
            );
        }
        results.push(result);
    }
    results.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(results)
}
