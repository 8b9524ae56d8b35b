//! Every scenario in `scenarios/` as its own test (libtest-mimic), named
//! `scenarios::<group>/<name>`, runnable under `cargo test` and `cargo
//! nextest run`.
//!
//! Each trial checks the scenario's explicit expectations and compares its
//! normalized outcome with an insta snapshot in `scenarios/snapshots/`. A
//! scenario that applies to external clients also runs through this
//! project's driver, `mcp-conformance driver stdio-client`, as
//! `scenarios::external/<group>/<name>` (expectations only, no snapshot). With
//! `MCP_CONFORMANCE_RESULTS_DIR` set, each trial also writes a JSON result
//! file there (`cargo xtask conformance` builds its reports from them).

use std::{
    panic::AssertUnwindSafe,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Instant,
};

use libtest_mimic::{Arguments, Failed, Trial};
use mcp_conformance::{
    Check, discover_scenarios, failure_log, load_scenario, run_scenario, run_scenario_external,
    scenarios_root,
};

const PREFIX: &str = "scenarios::";
/// The external trials' names: `scenarios::external/<group>/<name>`.
const EXTERNAL: &str = "external/";

/// The subject of a trial.
#[derive(Clone, Copy, PartialEq)]
enum Subject {
    /// The library in process: `scenarios::<group>/<name>`, with a snapshot.
    Library,
    /// This project's client through its driver, `mcp-conformance driver stdio-client`:
    /// `scenarios::external/<group>/<name>`, for each scenario that applies
    /// to external subjects; graded by its expectations, no snapshot.
    External,
}

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let root = scenarios_root();
    if root.join(EXTERNAL).exists() {
        eprintln!(
            "{}: `external/` names the external trials; no scenario group may use it",
            root.join(EXTERNAL).display()
        );
        return ExitCode::FAILURE;
    }
    let trials: Vec<(String, PathBuf, Subject)> = match (&args.filter, args.exact) {
        // nextest runs one process per test with `--exact NAME`: map the
        // name straight to its file instead of scanning the whole tree.
        (Some(name), true) => exact(&root, name).into_iter().collect(),
        _ => match discover_scenarios(&root) {
            Ok(found) if !found.is_empty() => {
                let mut trials: Vec<_> = found
                    .iter()
                    .map(|(name, file)| (name.clone(), file.clone(), Subject::Library))
                    .collect();
                // A file that does not load is listed once, as its library
                // trial, which fails with the error. Only the files whose
                // external trial the filter can select are read: the rest
                // would be filtered out anyway (libtest-mimic filters the
                // same names again).
                trials.extend(
                    found
                        .into_iter()
                        .filter(|(name, _)| {
                            args.filter.as_ref().is_none_or(|filter| {
                                format!("{PREFIX}{EXTERNAL}{name}").contains(filter.as_str())
                            })
                        })
                        .filter(|(_, file)| applies_to_external(file))
                        .map(|(name, file)| (name, file, Subject::External)),
                );
                trials
            }
            Ok(_) => {
                eprintln!("no scenario files (*.yaml) found under {}", root.display());
                return ExitCode::FAILURE;
            }
            Err(error) => {
                eprintln!("cannot read {}: {error}", root.display());
                return ExitCode::FAILURE;
            }
        },
    };
    let trials = trials
        .into_iter()
        .map(|(name, file, subject)| {
            let name = match subject {
                Subject::Library => name,
                Subject::External => format!("{EXTERNAL}{name}"),
            };
            Trial::test(format!("{PREFIX}{name}"), move || {
                trial(&name, &file, subject)
            })
        })
        .collect();
    // A test process killed mid-run (nextest's timeout, a mutation run)
    // leaves nothing: its fixtures end themselves (the anchor), and the
    // keeper removes its scenarios' directories.
    let _keeper = (!args.list).then(|| {
        mcp_conformance::start_keeper(
            Path::new(env!("CARGO_BIN_EXE_mcp-conformance")),
            "scenarios test",
        )
    });
    libtest_mimic::run(&args, trials).exit_code()
}

/// The trial `--exact NAME` names, from its file alone.
fn exact(root: &Path, name: &str) -> Option<(String, PathBuf, Subject)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (rest, subject) = match rest.strip_prefix(EXTERNAL) {
        Some(rest) => (rest, Subject::External),
        None => (rest, Subject::Library),
    };
    let file = root.join(format!("{rest}.yaml"));
    if !file.is_file() || (subject == Subject::External && !applies_to_external(&file)) {
        return None;
    }
    Some((rest.to_owned(), file, subject))
}

fn applies_to_external(file: &Path) -> bool {
    load_scenario(file).is_ok_and(|s| s.applies_to_external())
}

/// The result file `cargo xtask conformance` reads (schema 1).
#[derive(serde::Serialize)]
struct ResultFile<'a> {
    schema: u32,
    name: &'a str,
    description: String,
    rules: Vec<String>,
    passed: bool,
    duration_ms: u64,
    checks: Vec<Check>,
    failure: Option<String>,
}

fn trial(name: &str, file: &Path, subject: Subject) -> Result<(), Failed> {
    let start = Instant::now();
    let mut result = ResultFile {
        schema: 1,
        name,
        description: String::new(),
        rules: Vec::new(),
        passed: false,
        duration_ms: 0,
        checks: Vec::new(),
        failure: None,
    };
    let verdict =
        std::panic::catch_unwind(AssertUnwindSafe(|| run(name, file, subject, &mut result)))
            .unwrap_or_else(|panic| Err(format!("the runner panicked: {}", panic_text(&panic))));
    result.duration_ms = start.elapsed().as_millis() as u64;
    result.passed = verdict.is_ok();
    result.failure = verdict.as_ref().err().cloned();
    write_result(&result);
    verdict.map_err(Failed::from)
}

fn run(name: &str, file: &Path, subject: Subject, result: &mut ResultFile) -> Result<(), String> {
    let scenario = load_scenario(file).map_err(|error| error.to_string())?;
    result.description = scenario.description.clone();
    result.rules = scenario.rules.clone();
    let run = match subject {
        Subject::Library => run_scenario(name, &scenario),
        Subject::External => run_scenario_external(
            name,
            &scenario,
            &[
                env!("CARGO_BIN_EXE_mcp-conformance"),
                "driver",
                "stdio-client",
            ]
            .map(str::to_owned),
        ),
    };
    result.checks = run.checks.clone();
    let snapshot = run.outcome.render();
    let mut failure = String::new();
    if !run.passed() {
        failure.push_str(&format!("expectations failed:\n{}\n", run.failures()));
    }
    // External trials have no snapshot: an external client reports no
    // events, error kinds or exit status, and what the harness observes of
    // it (ledger, survivors, timings) is what the expectations check.
    if subject == Subject::Library
        && let Err(mismatch) = compare_snapshot(name, file, &snapshot)
    {
        failure.push_str(&format!("snapshot mismatch:\n{mismatch}\n"));
    }
    if failure.is_empty() {
        return Ok(());
    }
    // What failed first, then the log records that matter; the whole log
    // (thousands of lines at DEBUG) goes to a file, and the outcome last,
    // unfiltered, so a failure can be read.
    let log = failure_log(
        &Path::new(env!("CARGO_TARGET_TMPDIR")).join("scenario-logs"),
        name,
        &run.log,
        &run.failures(),
    );
    eprintln!(
        "--- {name}: failed ---\n{failure}--- {name}: client log, WARN and lifecycle records ---\n{log}--- {name}: outcome ---\n{snapshot}"
    );
    Err(failure)
}

fn compare_snapshot(name: &str, file: &Path, snapshot: &str) -> Result<(), String> {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(scenarios_root().join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(file);
    settings.set_omit_expression(true);
    settings.set_description(format!("outcome of scenario {name}"));
    let snapshot_name = name.replace('/', "__");
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        settings.bind(|| insta::assert_snapshot!(snapshot_name, snapshot));
    }))
    .map_err(|panic| panic_text(&panic))
}

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "(no message)".to_owned())
}

fn write_result(result: &ResultFile) {
    let Some(dir) = std::env::var_os("MCP_CONFORMANCE_RESULTS_DIR") else {
        return;
    };
    let dir = PathBuf::from(dir);
    let file = dir.join(format!("{}.json", result.name.replace('/', "__")));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(&file, serde_json::to_vec_pretty(result).unwrap_or_default())
    });
    if let Err(error) = written {
        eprintln!("cannot write {}: {error}", file.display());
    }
}
