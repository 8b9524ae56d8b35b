//! Synthetic results and reports shared by the conformance unit tests.

use crate::{
    baseline::Baseline,
    results::{Check, RESULT_SCHEMA, ScenarioResult},
    verdict::{Report, RunInfo, Selection},
};

pub fn result(name: &str, failure: Option<&str>) -> ScenarioResult {
    ScenarioResult {
        schema: RESULT_SCHEMA,
        name: name.to_owned(),
        description: format!("synthetic {name}"),
        rules: vec!["4.close.eof".to_owned()],
        passed: failure.is_none(),
        duration_ms: 10,
        checks: vec![check(
            &format!("{name}::close.path"),
            failure.is_none(),
            "close ended by eof",
        )],
        failure: failure.map(str::to_owned),
    }
}

pub fn passed(name: &str) -> ScenarioResult {
    result(name, None)
}

pub fn failed(name: &str, failure: &str) -> ScenarioResult {
    result(name, Some(failure))
}

pub fn check(id: &str, passed: bool, message: &str) -> Check {
    Check {
        id: id.to_owned(),
        passed,
        message: message.to_owned(),
    }
}

/// `all` as listed; `selected` defaults to all of them.
pub fn selection(all: &[&str], selected: Option<&[&str]>) -> Selection {
    Selection {
        all: all.iter().map(|name| (*name).to_owned()).collect(),
        selected: selected
            .unwrap_or(all)
            .iter()
            .map(|name| (*name).to_owned())
            .collect(),
    }
}

/// A baseline read from `ef.yaml`.
pub fn baseline(entries: &[(&str, &str)]) -> Baseline {
    Baseline {
        origin: "ef.yaml".to_owned(),
        entries: entries
            .iter()
            .map(|(name, reason)| ((*name).to_owned(), (*reason).to_owned()))
            .collect(),
    }
}

/// One scenario of each status, plus text that needs escaping everywhere.
pub fn sample_report() -> Report {
    let eof_close = ScenarioResult {
        rules: vec!["4.close.eof".into()],
        duration_ms: 120,
        checks: vec![
            check(
                "lifecycle/eof-close::close.path",
                true,
                "close ended by eof",
            ),
            check("lifecycle/eof-close::close.time", true, "< grace"),
        ],
        ..passed("lifecycle/eof-close")
    };
    let known = ScenarioResult {
        rules: vec!["4.close.sigterm".into()],
        duration_ms: 30,
        ..failed("lifecycle/known", "sigterm ignored")
    };
    let stale = ScenarioResult {
        rules: Vec::new(),
        duration_ms: 5,
        checks: Vec::new(),
        ..passed("lifecycle/stale")
    };
    let wedged = ScenarioResult {
        rules: vec!["4.close.kill".into(), "4.reap".into()],
        duration_ms: 2500,
        checks: vec![
            check("lifecycle/wedged::spawn", true, "spawned"),
            check(
                "lifecycle/wedged::close.path",
                false,
                "expected eof, got <sigkill>",
            ),
        ],
        ..failed(
            "lifecycle/wedged",
            "expected close by \"eof\", got <sigkill> & more\n  at check lifecycle/wedged::close.path\n\n\
             snapshot mismatch: \u{1b}[31m-old\u{1b}[0m\u{1}\n",
        )
    };
    let argv = ScenarioResult {
        rules: vec!["7.redact.argv".into()],
        duration_ms: 1,
        ..passed("redaction/argv-<&>\"'")
    };
    let results = vec![wedged, argv, stale, known, eof_close];
    let names: Vec<String> = results.iter().map(|result| result.name.clone()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let baseline = Baseline {
        origin: "ci/expected-failures.yaml".into(),
        entries: [
            (
                "lifecycle/known".to_owned(),
                "client ignores SIGTERM".to_owned(),
            ),
            ("lifecycle/stale".to_owned(), "fixed upstream?".to_owned()),
        ]
        .into(),
    };
    Report::new(
        RunInfo::default(),
        &selection(&names, None),
        results,
        Some(&baseline),
    )
}

/// An error and its causes, joined with `: ` (as anyhow's `{:#}` shows them).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
