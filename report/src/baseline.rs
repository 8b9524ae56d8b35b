//! The expected-failures baseline (`--expected-failures FILE`): scenarios
//! known to fail, each with the reason.

use std::{collections::BTreeMap, path::Path};

use crate::{Context, Result, bail};
use serde::Deserialize;

/// A parsed baseline: scenario name to reason, plus where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The file as the user named it, for messages and reports.
    pub origin: String,
    /// Each listed scenario's name, to the reason it is expected to fail.
    pub entries: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    expected_failures: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    scenario: String,
    reason: String,
}

impl Baseline {
    /// Reads and parses the baseline at `path`.
    pub fn load(path: &Path) -> Result<Self> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the expected-failures file {origin}"))?;
        Self::parse(&text, &origin)
    }

    /// Parses baseline `text`; `origin` names the file in errors. Unknown
    /// keys, duplicate scenarios and empty reasons are errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let file: File = yaml_serde::from_str(text)
            .with_context(|| format!("invalid expected-failures file {origin}"))?;
        let mut entries = BTreeMap::new();
        for Entry { scenario, reason } in file.expected_failures {
            if scenario.trim().is_empty() {
                bail!("invalid expected-failures file {origin}: an entry has an empty `scenario`");
            }
            if reason.trim().is_empty() {
                bail!(
                    "invalid expected-failures file {origin}: `{scenario}` has an empty `reason`"
                );
            }
            if entries.insert(scenario.clone(), reason).is_some() {
                bail!("invalid expected-failures file {origin}: `{scenario}` is listed twice");
            }
        }
        Ok(Self {
            origin: origin.to_owned(),
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::chain;

    #[test]
    fn parses_entries_and_comments() {
        let baseline = Baseline::parse(
            "# known failures\nexpected_failures:\n  - scenario: lifecycle/a\n    reason: \"not yet\"\n",
            "ef.yaml",
        )
        .unwrap();
        assert_eq!(
            baseline.entries.get("lifecycle/a").map(String::as_str),
            Some("not yet")
        );
        assert_eq!(baseline.origin, "ef.yaml");
    }

    #[test]
    fn empty_list_is_allowed() {
        let baseline = Baseline::parse("expected_failures: []\n", "ef.yaml").unwrap();
        assert!(baseline.entries.is_empty());
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_file() {
        for text in [
            "expected_failures: []\nextra: 1\n",
            "expected_failures:\n  - scenario: a/b\n    reason: r\n    ticket: 12\n",
            "expected_failure: []\n",
        ] {
            let error = chain(&Baseline::parse(text, "ci/expected.yaml").unwrap_err());
            assert!(error.contains("ci/expected.yaml"), "{error}");
            assert!(
                error.contains("unknown field") || error.contains("missing field"),
                "{error}"
            );
        }
    }

    #[test]
    fn duplicates_and_empty_reasons_are_errors() {
        let twice =
            "expected_failures:\n  - {scenario: a/b, reason: r}\n  - {scenario: a/b, reason: s}\n";
        let error = chain(&Baseline::parse(twice, "ef.yaml").unwrap_err());
        assert!(error.contains("`a/b` is listed twice"), "{error}");
        let empty = "expected_failures:\n  - {scenario: a/b, reason: \"\"}\n";
        let error = chain(&Baseline::parse(empty, "ef.yaml").unwrap_err());
        assert!(error.contains("empty `reason`"), "{error}");
    }

    #[test]
    fn load_names_a_missing_file() {
        let error = chain(&Baseline::load(Path::new("/nonexistent/ef.yaml")).unwrap_err());
        assert!(error.contains("/nonexistent/ef.yaml"), "{error}");
    }
}
