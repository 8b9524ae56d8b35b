//! `mcp-conformance scenarios [FILTER]`: the scenario suite as the installed
//! tool carries it, with no source tree and no cargo.
//!
//! The scenarios and their snapshots are embedded at build time (see
//! `build.rs`); the fixtures are this executable itself, reached through a
//! temporary directory of `fixture-*` links to it. The suite's main
//! interface stays `cargo xtask conformance` (reports, baselines, nextest):
//! this is the same runner and the same verdict — every expectation holds
//! and the outcome matches its snapshot — in one command anywhere.

use std::path::Path;

#[cfg(test)]
mod embed;

use mcp_conformance_report::exit;

use crate::{runner, scenario};

/// One scenario as built into the executable.
#[derive(Debug, Clone, Copy)]
pub struct Embedded {
    /// `group/name`, as `scenario::discover` names the file.
    pub name: &'static str,
    /// The scenario file, as bytes: one that is not UTF-8 fails as its own
    /// scenario ([`Embedded::load`]), not the build.
    pub yaml: &'static [u8],
    /// Its insta snapshot file, header included, when it has one.
    pub snapshot: Option<&'static [u8]>,
}

impl Embedded {
    /// The path the scenario is named by in errors (`scenarios/<name>.yaml`).
    pub fn file(&self) -> std::path::PathBuf {
        Path::new("scenarios").join(format!("{}.yaml", self.name))
    }

    /// Loads the scenario, as `scenario::load` loads a file.
    pub fn load(&self) -> Result<scenario::Scenario, scenario::ScenarioError> {
        scenario::parse_bytes(self.yaml, &self.file())
    }

    /// The snapshot's text, or why it cannot be read.
    fn snapshot_text(&self) -> Option<Result<&'static str, String>> {
        self.snapshot.map(|bytes| {
            std::str::from_utf8(bytes).map_err(|error| {
                format!(
                    "scenarios/snapshots/{}.snap is not UTF-8: {error}; accept the snapshot again \
                     (cargo insta review)",
                    self.name.replace('/', "__")
                )
            })
        })
    }
}

/// Every scenario of the workspace this executable was built from, sorted
/// by name.
pub const EMBEDDED: &[Embedded] = include!(concat!(env!("OUT_DIR"), "/embedded_scenarios.rs"));

/// `mcp-conformance scenarios`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run only the scenarios whose name contains this (`lifecycle/`,
    /// `eof-close`).
    pub filter: Option<String>,
    /// List the selected scenarios instead of running them.
    #[arg(long)]
    pub list: bool,
}

/// Why the suite could not run at all.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("no embedded scenario matches `{0}`; `mcp-conformance scenarios --list` shows them")]
    NoMatch(String),
    #[error("cannot find this executable to run the fixtures from it")]
    CurrentExe(#[source] std::io::Error),
    #[error("cannot make the fixture directory (links to this executable)")]
    FixtureDir(#[source] std::io::Error),
}

/// Makes this executable's own fixtures (`fixture-*` links to it, in a
/// temporary directory kept for the life of the process and removed at its
/// exit: see [`crate::tempdirs`]) the fixture directory, so nothing is
/// looked up in a checkout or built.
pub fn provide_own_fixtures() -> Result<(), SuiteError> {
    static LINKS: std::sync::OnceLock<crate::tempdirs::TempDir> = std::sync::OnceLock::new();
    if LINKS.get().is_some() {
        return Ok(());
    }
    let exe = std::env::current_exe().map_err(SuiteError::CurrentExe)?;
    let links = crate::tempdirs::tempdir("fixtures").map_err(SuiteError::FixtureDir)?;
    mcp_fixtures::locate::link_all(&exe, links.path()).map_err(SuiteError::FixtureDir)?;
    // Set once per process: a second call (in a test) finds the first
    // directory, and the one it made is removed when dropped.
    if mcp_fixtures::locate::provide(links.path().to_owned()) {
        let _ = LINKS.set(links);
    }
    Ok(())
}

/// Runs (or lists) the selected scenarios, printing one line each and a
/// `N passed, N failed` summary. Returns the exit code.
pub fn main(args: Args) -> u8 {
    // The fixtures live in process groups of their own, so a Ctrl-C at the
    // terminal never reaches them: the harness ends them, and the external
    // client of a scenario too.
    crate::interrupt::end_on_signal("mcp-conformance scenarios", crate::driver::interrupted);
    // And if this process is SIGKILLed, the keeper ends them.
    let _keeper =
        (!args.list).then(|| crate::keeper::start_until_dropped("mcp-conformance scenarios"));
    let outcome = run(&args, &mut std::io::stdout());
    crate::interrupt::wait_if_ending();
    match outcome {
        Ok(true) => exit::SUCCESS,
        Ok(false) => exit::FAILURE,
        Err(error) => {
            eprintln!(
                "mcp-conformance scenarios: {}",
                mcp_stdio_client::error_chain(&error)
            );
            exit::USAGE
        }
    }
}

/// The scenarios `filter` selects.
pub fn select(filter: Option<&str>) -> Vec<Embedded> {
    EMBEDDED
        .iter()
        .filter(|scenario| filter.is_none_or(|filter| scenario.name.contains(filter)))
        .copied()
        .collect()
}

fn run(args: &Args, out: &mut impl std::io::Write) -> Result<bool, SuiteError> {
    let selected = select(args.filter.as_deref());
    if selected.is_empty() {
        return Err(SuiteError::NoMatch(args.filter.clone().unwrap_or_default()));
    }
    if args.list {
        for scenario in &selected {
            let _ = writeln!(out, "{}", scenario.name);
        }
        return Ok(true);
    }
    provide_own_fixtures()?;
    let (mut passed, mut failed) = (0, 0);
    for scenario in &selected {
        match verdict(scenario) {
            Ok(()) => {
                passed += 1;
                let _ = writeln!(out, "ok      {}", scenario.name);
            }
            Err(why) => {
                failed += 1;
                let _ = writeln!(out, "FAILED  {}\n{}", scenario.name, indent(&why));
            }
        }
        let _ = out.flush();
    }
    let _ = writeln!(out, "{passed} passed, {failed} failed");
    Ok(failed == 0)
}

/// Runs one scenario: Ok when every expectation holds and the outcome
/// matches the snapshot, else what went wrong.
fn verdict(embedded: &Embedded) -> Result<(), String> {
    let scenario = embedded.load().map_err(|error| error.to_string())?;
    let run = runner::run(embedded.name, &scenario);
    let outcome = run.outcome.render();
    let mut why = String::new();
    if !run.passed() {
        why.push_str(&format!("expectations failed:\n{}\n", run.failures()));
    }
    match embedded.snapshot_text().map(|text| text.map(snapshot_body)) {
        Some(Ok(expected)) if expected.trim_end() == outcome.trim_end() => {}
        Some(Err(unreadable)) => why.push_str(&format!("{unreadable}\n")),
        Some(Ok(expected)) => why.push_str(&format!(
            "the outcome differs from its snapshot.\n--- expected ---\n{}\n--- got ---\n{}\n",
            expected.trim_end(),
            outcome.trim_end()
        )),
        None => why.push_str("no snapshot was built in for this scenario\n"),
    }
    if why.is_empty() {
        return Ok(());
    }
    if crate::interrupt::is_ending() {
        // Its servers were ended under it: nothing to keep.
        return Err(why);
    }
    // The log records that matter; the whole log to a file.
    let logs = std::env::temp_dir().join("mcp-conformance-logs");
    why.push_str(&format!(
        "client log, WARN and lifecycle records:\n{}",
        crate::failure_log::report(&logs, embedded.name, &run.log, &run.failures())
    ));
    Err(why)
}

/// An insta snapshot file without its `---` metadata header.
fn snapshot_body(file: &str) -> &str {
    file.strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map_or(file, |(_, body)| body)
}

fn indent(text: &str) -> String {
    text.trim_end()
        .lines()
        .map(|line| format!("    {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every scenario file of the workspace is built in, with its snapshot.
    #[test]
    fn every_scenario_is_embedded_with_its_snapshot() {
        let on_disk: Vec<String> = scenario::discover(&crate::scenarios_root())
            .unwrap()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        let embedded: Vec<&str> = EMBEDDED.iter().map(|s| s.name).collect();
        assert_eq!(embedded, on_disk);
        for scenario in EMBEDDED {
            assert!(
                scenario.snapshot.is_some(),
                "{} has no snapshot",
                scenario.name
            );
        }
    }

    #[test]
    fn the_header_is_cut_from_a_snapshot() {
        let file = "---\nsource: x\ndescription: y\n---\nsteps:\n- a\n";
        assert_eq!(snapshot_body(file), "steps:\n- a\n");
        assert_eq!(snapshot_body("no header\n"), "no header\n");
    }

    /// A scenario file that is not UTF-8 fails as that one scenario, named.
    #[test]
    fn an_embedded_file_that_is_not_utf8_fails_as_its_scenario() {
        let embedded = Embedded {
            name: "x/y",
            yaml: b"description: caf\xe9\nserver: {fixture: well-behaved}\n",
            snapshot: Some(b"---\nsource: x\n---\n\xff\n"),
        };
        let why = verdict(&embedded).unwrap_err();
        assert!(
            why.starts_with("scenarios/x/y.yaml is not UTF-8: "),
            "{why}"
        );
        let snapshot = embedded.snapshot_text().unwrap().unwrap_err();
        assert!(
            snapshot.starts_with("scenarios/snapshots/x__y.snap is not UTF-8: "),
            "{snapshot}"
        );
    }

    #[test]
    fn an_unmatched_filter_is_a_usage_error_naming_it() {
        let args = Args {
            filter: Some("no-such-scenario".into()),
            list: false,
        };
        let error = run(&args, &mut Vec::new()).unwrap_err().to_string();
        assert!(error.contains("no-such-scenario"), "{error}");
    }
}
