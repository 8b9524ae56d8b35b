//! `mcp-conformance client`: grades any MCP stdio client program, through a
//! driver (`docs/client-check.md`), against the fixtures: how it starts,
//! fails and, above all, shuts down servers. Every verdict comes from what
//! the harness observes itself.

pub mod checks;
pub mod host;
pub mod report;

use std::path::PathBuf;

use checks::{CHECK_IDS, Run, Timing};
use report::{CheckResult, Report, Verdict};

use mcp_conformance_report::exit;

use crate::observer;

/// `mcp-conformance client [OPTIONS] [FILTER] -- <driver command>`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the report as JSON (schema 2) on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Also write the report as JUnit XML to PATH.
    #[arg(long, value_name = "PATH")]
    pub junit: Option<PathBuf>,

    /// Run only the checks whose id contains FILTER (`close.`, `wedge`).
    pub filter: Option<String>,

    /// Also run, through the driver, every built-in scenario that applies to
    /// external clients (`scenario:<group>/<name>` rows), graded by its
    /// expectations on what the harness observes.
    #[arg(long, conflicts_with_all = ["host", "grade"])]
    pub scenarios: bool,

    /// For a host that cannot run a driver: write DIR/mcp.json, a
    /// desktop-format config of fixture servers that record what happens to
    /// them, and say what to do next.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["grade", "driver", "json", "junit"])]
    pub host: Option<PathBuf>,

    /// Grade what the host did to the servers of `--host DIR`, then end
    /// whatever it left running.
    #[arg(long, value_name = "DIR", conflicts_with = "driver")]
    pub grade: Option<PathBuf>,

    /// The driver program and its arguments.
    #[arg(last = true, required_unless_present_any = ["host", "grade"], value_name = "DRIVER")]
    pub driver: Vec<String>,
}

/// One run of the driver against one fixture, and the check ids it grades.
type RunFn = fn(&mut Run, &mut String) -> Vec<CheckResult>;

fn runs() -> Vec<(&'static [&'static str], RunFn)> {
    vec![
        (&["close.graceful", "exit.clean"], |run, era| {
            checks::graceful(run, era)
        }),
        (&["close.eof_first", "close.sigterm"], |run, _| {
            checks::sigterm(run)
        }),
        (&["close.sigkill"], |run, _| checks::sigkill(run)),
        (&["close.group"], |run, _| checks::group(run)),
        (&["close.sidecar"], |run, _| checks::sidecar(run)),
        (&["close.escaped"], |run, _| checks::escaped(run)),
        (&["handshake.bounded"], |run, _| checks::handshake(run)),
        (&["death.fast"], |run, _| checks::death(run)),
        (&["wedge.no_kill", "wedge.cancel"], |run, _| {
            checks::wedge(run)
        }),
        (&["stderr.drained"], |run, _| checks::stderr(run)),
        (&["stdout.tolerant"], |run, _| checks::stdout(run)),
        (&["exit.abrupt"], |run, _| checks::abrupt(run)),
    ]
}

/// Why the check could not run at all (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ClientCheckError {
    #[error("cannot find the fixture binaries: {0}")]
    Fixtures(String),
    #[error(transparent)]
    Driver(#[from] crate::driver::DriverError),
    #[error("no check id contains `{0}`; the ids are: {ids}", ids = CHECK_IDS.join(", "))]
    Filter(String),
}

/// Runs every check that `filter` selects against `driver`, and with
/// `scenarios` the built-in scenarios that apply to external clients too.
pub fn run_with(
    driver: &[String],
    filter: Option<&str>,
    timing: Timing,
    scenarios: bool,
) -> Result<Report, ClientCheckError> {
    // The fixtures are this executable's own, so an installed tool needs
    // no checkout.
    crate::suite::provide_own_fixtures()
        .map_err(|error| ClientCheckError::Fixtures(error.to_string()))?;
    let fixtures = mcp_fixtures::locate::fixtures_dir().map_err(ClientCheckError::Fixtures)?;
    let selected = |id: &str| filter.is_none_or(|f| id.contains(f));
    let scenario_rows: Vec<(String, &crate::suite::Embedded)> = if scenarios {
        crate::suite::EMBEDDED
            .iter()
            .map(|embedded| (format!("{SCENARIO_PREFIX}{}", embedded.name), embedded))
            .filter(|(id, _)| selected(id))
            .collect()
    } else {
        Vec::new()
    };
    if !CHECK_IDS.iter().any(|id| selected(id)) && scenario_rows.is_empty() {
        return Err(ClientCheckError::Filter(
            filter.unwrap_or_default().to_owned(),
        ));
    }
    // Orphans of the client's servers re-parent to the harness, so they are
    // seen (and reaped) here rather than by a container's init.
    observer::become_subreaper();
    // Whether the driver runs at all, and what it says of its client, before
    // any check: a driver that cannot load its client library ends before
    // it answers `hello`, and that is "could not run" (exit 2) with the
    // driver's own error, never a column of failed checks. This first
    // driver then serves the first check.
    let mut first = Some(Run::start(driver, fixtures, timing)?);
    let (protocol, hello) = first
        .as_ref()
        .map(|run| (run.driver.protocol(), run.driver.hello_said().cloned()))
        .unwrap_or((1, None));
    let mut era = "unknown".to_owned();
    let mut results = Vec::new();
    for (ids, check) in runs() {
        if !ids.iter().any(|id| selected(id)) {
            continue;
        }
        let mut run = match first.take() {
            Some(run) => run,
            None => Run::start(driver, fixtures, timing)?,
        };
        let graded = check(&mut run, &mut era);
        run.finish();
        results.extend(graded.into_iter().filter(|r| selected(&r.id)));
    }
    if let Some(unused) = first {
        unused.finish();
    }
    results.sort_by_key(|r| CHECK_IDS.iter().position(|id| r.id == *id));
    for (id, embedded) in scenario_rows {
        if let Some(result) = scenario_row(id, embedded, driver) {
            results.push(result);
        }
    }
    let mut report = Report::about(driver, era, results);
    report.protocol = Some(protocol);
    report.hello = hello;
    Ok(report)
}

/// The id prefix of a scenario's row.
pub const SCENARIO_PREFIX: &str = "scenario:";

/// One built-in scenario through the driver, as a row; `None` when it does
/// not apply to external clients.
fn scenario_row(
    id: String,
    embedded: &crate::suite::Embedded,
    driver: &[String],
) -> Option<CheckResult> {
    let scenario = match embedded.load() {
        Ok(scenario) => scenario,
        Err(error) => return Some(CheckResult::new(id, Verdict::Fail, error.to_string())),
    };
    if !scenario.applies_to_external() {
        return None;
    }
    let run = crate::runner::run_external(embedded.name, &scenario, driver);
    // A precondition this client does not meet (a server it started as a
    // session leader cannot leave its group): not a verdict on the client.
    if let Some(why) = &run.skipped {
        return Some(CheckResult::new(id, Verdict::Skip, why.clone()));
    }
    let failed: Vec<&crate::runner::Check> =
        run.checks.iter().filter(|check| !check.passed).collect();
    Some(if failed.is_empty() {
        CheckResult::new(
            id,
            Verdict::Pass,
            format!("{} expectations hold", run.checks.len()),
        )
    } else {
        // Each failed expectation by its id within the scenario, with the
        // first line of its message.
        let each: Vec<String> = failed
            .iter()
            .map(|check| {
                let short = check.id.rsplit("::").next().unwrap_or(&check.id);
                format!(
                    "{short}: {}",
                    check.message.lines().next().unwrap_or_default()
                )
            })
            .collect();
        CheckResult::new(
            id,
            Verdict::Fail,
            format!(
                "{} of {} expectations failed: {}",
                failed.len(),
                run.checks.len(),
                each.join("; ")
            ),
        )
    })
}

/// The whole subcommand; returns the exit code.
pub fn main(args: Args) -> u8 {
    if let Some(dir) = &args.host {
        return match host::write(dir) {
            Ok(instructions) => {
                print!("{instructions}");
                exit::SUCCESS
            }
            Err(error) => {
                eprintln!(
                    "mcp-conformance client: {}",
                    mcp_stdio_client::error_chain(&error)
                );
                exit::USAGE
            }
        };
    }
    if let Some(dir) = &args.grade {
        let (report, survivors) = match host::grade(dir, args.filter.as_deref()) {
            Ok(graded) => graded,
            Err(error) => {
                eprintln!(
                    "mcp-conformance client: {}",
                    mcp_stdio_client::error_chain(&error)
                );
                return exit::USAGE;
            }
        };
        let code = emit(&report, &args);
        // Graded first, then ended: what the host left is part of the grade.
        for ended in host::end(dir, &survivors, std::time::Duration::from_secs(5)) {
            eprintln!(
                "mcp-conformance client: ended {} (pid {}) of `{}`, left running by the host",
                ended.name, ended.pid, ended.server
            );
        }
        return code;
    }
    // The driver and the servers live in process groups of their own, so a
    // Ctrl-C at the terminal never reaches them: the harness ends them.
    crate::interrupt::end_on_signal("mcp-conformance client", crate::driver::interrupted);
    // And if this process is SIGKILLed, the keeper ends them.
    let _keeper = crate::keeper::start_until_dropped("mcp-conformance client");
    let outcome = run_with(
        &args.driver,
        args.filter.as_deref(),
        Timing::default(),
        args.scenarios,
    );
    crate::interrupt::wait_if_ending();
    let report = match outcome {
        Ok(report) => report,
        Err(error) => {
            eprintln!("mcp-conformance client: {error}");
            return exit::USAGE;
        }
    };
    emit(&report, &args)
}

/// Prints `report` as `args` asks and writes its JUnit file; the exit code.
fn emit(report: &Report, args: &Args) -> u8 {
    if args.json {
        print!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    if let Some(path) = &args.junit
        && let Err(error) = std::fs::write(path, report.to_junit())
    {
        eprintln!(
            "mcp-conformance client: cannot write {}: {error}",
            path.display()
        );
        return exit::USAGE;
    }
    if report.passed() {
        exit::SUCCESS
    } else {
        exit::FAILURE
    }
}

#[cfg(test)]
mod tests {
    /// The number of `--scenarios` rows docs/client-check.md gives is the
    /// real one: the built-in scenarios that apply to external clients.
    #[test]
    fn the_docs_count_the_scenario_rows() {
        let rows = crate::suite::EMBEDDED
            .iter()
            .filter(|embedded| embedded.load().is_ok_and(|s| s.applies_to_external()))
            .count();
        let docs = include_str!("../../docs/client-check.md");
        let said = format!("today {rows} of them");
        assert!(
            docs.contains(&said),
            "docs/client-check.md must say `{said}`"
        );
    }
}
