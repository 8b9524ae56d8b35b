//! `cargo xtask stress [--runs N] [--hogs K] [FILTER]`: finds the scenarios
//! that flake under load. Builds the scenario runner once, then runs it N
//! times with K busy-loop processes spinning beside it, and prints each
//! scenario's pass rate, the flakiest first (docs/scenarios.md).
//!
//! The runner is the `scenarios` test binary itself, run directly (no cargo
//! per run), with its per-scenario result files (`MCP_CONFORMANCE_RESULTS_DIR`,
//! as `cargo xtask conformance` reads them) giving each verdict; a scenario
//! listed but without a result file counts as failed. The hogs are this
//! executable's hidden `stress-hog` command, each in its own process group,
//! killed by group when the runs end, on an error, and on Ctrl-C.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicI32, Ordering},
    time::Instant,
};

use anyhow::{Context, Result, bail};
use mcp_conformance_report::results::{self, ScenarioResult};
use nix::{
    sys::signal::{self, SigHandler, Signal},
    unistd::Pid,
};

use crate::{cargo, root};

const HELP: &str = "\
usage: cargo xtask stress [--runs N] [--hogs K] [FILTER]

Builds the scenario runner once, runs the scenario suite N times (default 5)
with K busy-loop processes beside it (default 2), and prints each scenario's
pass rate, the flakiest first. Exits non-zero if any scenario failed any run.
FILTER selects scenarios as the runner's own filter does (a substring of
`scenarios::<group>/<name>`; `external/` for the driver trials). Each run's
output is kept in target/stress/run-<i>.log.
";

/// The hidden command a hog runs (`cargo xtask stress-hog`).
pub const HOG_COMMAND: &str = "stress-hog";

const DEFAULT_RUNS: u32 = 5;
const DEFAULT_HOGS: usize = 2;
/// The most hogs: the process groups the signal handler kills live in a
/// fixed table (a handler may not allocate).
const MAX_HOGS: usize = 64;
/// Every trial name starts with this; scenario names are what follows.
const PREFIX: &str = "scenarios::";
const RESULTS_ENV: &str = "MCP_CONFORMANCE_RESULTS_DIR";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    runs: u32,
    hogs: usize,
    filter: Option<String>,
}

pub fn run(args: Vec<String>) -> Result<()> {
    let Some(options) = parse(&args).map_err(crate::outcome::usage)? else {
        print!("{HELP}");
        return Ok(());
    };
    let runner = build()?;
    let names = list(&runner, options.filter.as_deref())?;
    let out_dir = root().join("target").join("stress");
    if out_dir.exists() {
        std::fs::remove_dir_all(&out_dir)
            .with_context(|| format!("cannot empty {}", out_dir.display()))?;
    }
    let hog = std::env::current_exe().context("cannot find this executable to run the hogs")?;
    let hogs = Hogs::start(options.hogs, || {
        let mut command = Command::new(&hog);
        command.arg(HOG_COMMAND);
        command
    })?;
    eprintln!(
        "stress: {} scenario trials, {} runs, {} hogs (pids {:?})",
        names.len(),
        options.runs,
        options.hogs,
        hogs.pids()
    );
    let mut runs = Vec::new();
    for number in 1..=options.runs {
        let started = Instant::now();
        let results = run_once(&runner, &options, &out_dir, number)?;
        let failed = names
            .iter()
            .filter(|name| results.get(*name).is_none_or(|r| !r.passed))
            .count();
        eprintln!(
            "run {number}/{}: {} passed, {failed} failed ({:.0} s)",
            options.runs,
            names.len() - failed,
            started.elapsed().as_secs_f64()
        );
        runs.push(results);
    }
    drop(hogs);
    let rows = tally(&names, &runs);
    print!("{}", render(&rows, options.runs));
    let flaky = rows.iter().filter(|row| row.passed < row.runs).count();
    if flaky > 0 {
        bail!(
            "{flaky} of {} scenario trials failed at least one of {} runs under {} hogs; \
             each run's output is in {}",
            rows.len(),
            options.runs,
            options.hogs,
            out_dir.display()
        );
    }
    Ok(())
}

fn parse(args: &[String]) -> Result<Option<Options>> {
    let mut options = Options {
        runs: DEFAULT_RUNS,
        hogs: DEFAULT_HOGS,
        filter: None,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .with_context(|| format!("{flag} needs a number\n\n{HELP}"))
                .cloned()
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--runs" => {
                options.runs = number(&value("--runs")?, "--runs")?;
                if options.runs == 0 {
                    bail!("--runs must be at least 1");
                }
            }
            "--hogs" => {
                options.hogs = number(&value("--hogs")?, "--hogs")?;
                if options.hogs > MAX_HOGS {
                    bail!("--hogs is at most {MAX_HOGS}");
                }
            }
            flag if flag.starts_with('-') => bail!("unknown argument `{flag}`\n\n{HELP}"),
            filter if options.filter.is_none() => options.filter = Some(filter.to_owned()),
            extra => bail!("one FILTER only; `{extra}` is a second one\n\n{HELP}"),
        }
    }
    Ok(Some(options))
}

fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T> {
    text.parse()
        .ok()
        .with_context(|| format!("{flag} takes a number, not `{text}`"))
}

/// Builds the fixtures and the scenario runner as `cargo xtask conformance`
/// does (same packages and features, so nothing rebuilds between the two),
/// and returns the runner's executable.
fn build() -> Result<PathBuf> {
    let mut fixtures = cargo();
    fixtures.args(["build", "--package", "mcp-fixtures", "--bins"]);
    crate::run_checked(fixtures, "building the fixtures")?;
    let output = cargo()
        .args([
            "test",
            "--package",
            "mcp-conformance",
            "--test",
            "scenarios",
        ])
        .args(["--no-run", "--message-format", "json-render-diagnostics"])
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo to build the scenario runner")?;
    if !output.status.success() {
        bail!("building the scenario runner failed ({})", output.status);
    }
    executable(&String::from_utf8_lossy(&output.stdout))
        .context("cargo built no `scenarios` test executable")
}

/// The `scenarios` test executable in cargo's JSON messages.
fn executable(messages: &str) -> Option<PathBuf> {
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|message| {
            message["reason"] == "compiler-artifact"
                && message["target"]["name"] == "scenarios"
                && message["profile"]["test"] == true
        })
        .and_then(|message| message["executable"].as_str().map(PathBuf::from))
}

/// The scenario trials `filter` selects, as the runner lists them, without
/// the `scenarios::` prefix.
fn list(runner: &Path, filter: Option<&str>) -> Result<Vec<String>> {
    let output = Command::new(runner)
        .args(["--list", "--format", "terse"])
        .args(filter)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run {}", runner.display()))?;
    if !output.status.success() {
        bail!("listing the scenarios failed ({})", output.status);
    }
    let names: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_suffix(": test")?.strip_prefix(PREFIX))
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        bail!(
            "no scenario matches `{}`; `cargo test -p mcp-conformance --test scenarios -- --list` \
             lists them",
            filter.unwrap_or_default()
        );
    }
    Ok(names)
}

/// One run of the runner; its output goes to `run-<number>.log`. Returns
/// the results it wrote, by scenario name. The runner's own status is not
/// the verdict (a failing scenario fails it too): the result files are.
fn run_once(
    runner: &Path,
    options: &Options,
    out_dir: &Path,
    number: u32,
) -> Result<BTreeMap<String, ScenarioResult>> {
    let results_dir = out_dir.join(format!("run-{number}"));
    std::fs::create_dir_all(&results_dir)
        .with_context(|| format!("cannot create {}", results_dir.display()))?;
    let log_path = out_dir.join(format!("run-{number}.log"));
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut child = Command::new(runner)
        .args(options.filter.as_deref())
        .env(RESULTS_ENV, &results_dir)
        // A snapshot that differs under load is a finding, not a new
        // snapshot: no `.snap.new` is left in the source tree.
        .env("INSTA_UPDATE", "no")
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("cannot share the log file")?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot run {}", runner.display()))?;
    // A signal meant for this process alone (a supervisor's SIGTERM) is
    // passed on to the runner, which cleans up its own scenarios.
    RUNNER.store(child.id() as i32, Ordering::SeqCst);
    let status = child.wait();
    RUNNER.store(0, Ordering::SeqCst);
    let status = status.with_context(|| format!("cannot wait for {}", runner.display()))?;
    let found = results::read_dir(&results_dir)?;
    if found.is_empty() {
        bail!(
            "run {number} wrote no result file ({status}); see {}",
            log_path.display()
        );
    }
    Ok(found
        .into_iter()
        .map(|result| (result.name.clone(), result))
        .collect())
}

/// One scenario trial over all runs.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    name: String,
    passed: u32,
    runs: u32,
    /// The first line of each distinct failure, with the runs it happened in.
    failures: Vec<(String, Vec<u32>)>,
}

/// Each listed trial's pass count over `runs`, the flakiest first (lowest
/// pass count, then by name). A trial without a result in a run failed it.
fn tally(names: &[String], runs: &[BTreeMap<String, ScenarioResult>]) -> Vec<Row> {
    let mut rows: Vec<Row> = names
        .iter()
        .map(|name| {
            let mut row = Row {
                name: name.clone(),
                passed: 0,
                runs: runs.len() as u32,
                failures: Vec::new(),
            };
            for (index, run) in runs.iter().enumerate() {
                let missing;
                let result = match run.get(name) {
                    Some(result) => result,
                    None => {
                        missing = ScenarioResult::missing(name);
                        &missing
                    }
                };
                if result.passed {
                    row.passed += 1;
                    continue;
                }
                let why = first_failure(result);
                let number = index as u32 + 1;
                match row.failures.iter_mut().find(|(line, _)| *line == why) {
                    Some((_, numbers)) => numbers.push(number),
                    None => row.failures.push((why, vec![number])),
                }
            }
            row
        })
        .collect();
    rows.sort_by(|a, b| a.passed.cmp(&b.passed).then_with(|| a.name.cmp(&b.name)));
    rows
}

/// What failed, in one line: the first failed check, else the first line of
/// the failure.
fn first_failure(result: &ScenarioResult) -> String {
    if let Some(check) = result.checks.iter().find(|check| !check.passed) {
        let message = check.message.lines().next().unwrap_or_default();
        return format!("{}: {message}", check.id);
    }
    let failure = result.failure.as_deref().unwrap_or("failed");
    if failure.contains("snapshot mismatch:") {
        // insta's own words name only its assertion's line; the diff is in
        // the run's log.
        return "the outcome differs from its snapshot (the diff is in the run's log)".to_owned();
    }
    failure
        .lines()
        .find(|line| !line.trim().is_empty() && !line.ends_with(':'))
        .or_else(|| failure.lines().next())
        .unwrap_or("failed")
        .trim()
        .to_owned()
}

/// The table: one line per trial, flakiest first, each failure under it;
/// the trials that passed every run after, in one line each.
fn render(rows: &[Row], runs: u32) -> String {
    let mut out = format!("{:>5}  {:>7}  SCENARIO\n", "RATE", "PASSED");
    for row in rows {
        let rate = 100 * row.passed / row.runs.max(1);
        out.push_str(&format!(
            "{:>4}%  {:>7}  {}\n",
            rate,
            format!("{}/{}", row.passed, row.runs),
            row.name
        ));
        for (line, numbers) in &row.failures {
            let numbers: Vec<String> = numbers.iter().map(u32::to_string).collect();
            out.push_str(&format!(
                "                 run {}: {line}\n",
                numbers.join(", ")
            ));
        }
    }
    let flaky = rows.iter().filter(|row| row.passed < row.runs).count();
    out.push_str(&format!(
        "{flaky} of {} trials failed at least one of {runs} runs\n",
        rows.len()
    ));
    out
}

/// The running scenario runner's pid, for the signal handler (0: none).
static RUNNER: AtomicI32 = AtomicI32::new(0);

/// The process groups of the running hogs, for the signal handler: 0 is an
/// empty slot.
static HOG_GROUPS: [AtomicI32; MAX_HOGS] = [const { AtomicI32::new(0) }; MAX_HOGS];

/// Busy-loop processes, each in its own process group; dropping this kills
/// every group with SIGKILL and reaps the hogs. A Ctrl-C, SIGTERM or SIGHUP
/// does the same before the signal ends this process.
struct Hogs {
    children: Vec<Child>,
}

impl Hogs {
    fn start(count: usize, command: impl Fn() -> Command) -> Result<Hogs> {
        install_handlers()?;
        let mut hogs = Hogs {
            children: Vec::new(),
        };
        for slot in HOG_GROUPS.iter().take(count) {
            use std::os::unix::process::CommandExt as _;
            let child = command()
                .process_group(0)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .context("cannot start a hog")?;
            // The child leads its own group: the pgid is its pid.
            slot.store(child.id() as i32, Ordering::SeqCst);
            hogs.children.push(child);
        }
        Ok(hogs)
    }

    fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        kill_hog_groups();
        for child in &mut self.children {
            let _ = child.wait();
        }
    }
}

/// Kills every hog group in [`HOG_GROUPS`] and empties the table. Only
/// async-signal-safe calls (atomics, `killpg`): it also runs in the signal
/// handler.
fn kill_hog_groups() {
    for slot in &HOG_GROUPS {
        let pgid = slot.swap(0, Ordering::SeqCst);
        if pgid > 0 {
            let _ = signal::killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

extern "C" fn on_signal(number: nix::libc::c_int) {
    kill_hog_groups();
    // Then what the signal would have done: end this process by it, and the
    // runner too (a Ctrl-C reaches it anyway, being in our group; a signal
    // sent to this pid alone would not).
    if let Ok(signal) = Signal::try_from(number) {
        let runner = RUNNER.swap(0, Ordering::SeqCst);
        if runner > 0 {
            let _ = signal::kill(Pid::from_raw(runner), signal);
        }
        // SAFETY: restoring the default action is async-signal-safe.
        unsafe {
            let _ = signal::signal(signal, SigHandler::SigDfl);
        }
        let _ = signal::raise(signal);
    }
}

fn install_handlers() -> Result<()> {
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler calls only async-signal-safe functions.
        unsafe { signal::signal(signal, SigHandler::Handler(on_signal)) }
            .with_context(|| format!("cannot handle {signal}"))?;
    }
    Ok(())
}

/// `cargo xtask stress-hog`: spins until its parent is gone (checked every
/// few milliseconds), so a hog never outlives a stress run, even one ended
/// by SIGKILL before it could kill its hogs.
pub fn hog() -> ! {
    let parent = std::os::unix::process::parent_id();
    loop {
        for spin in 0..1_000_000u32 {
            std::hint::black_box(spin);
        }
        if std::os::unix::process::parent_id() != parent {
            std::process::exit(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use mcp_conformance_report::results::Check;

    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn arguments() {
        assert_eq!(
            parse(&args("")).unwrap(),
            Some(Options {
                runs: 5,
                hogs: 2,
                filter: None
            })
        );
        assert_eq!(
            parse(&args("--runs 3 lifecycle/ --hogs 0")).unwrap(),
            Some(Options {
                runs: 3,
                hogs: 0,
                filter: Some("lifecycle/".into())
            })
        );
        assert_eq!(parse(&args("--help")).unwrap(), None);
        for (line, message) in [
            ("--runs", "--runs needs a number"),
            ("--runs x", "--runs takes a number, not `x`"),
            ("--runs 0", "--runs must be at least 1"),
            ("--hogs 65", "--hogs is at most 64"),
            ("--fast", "unknown argument `--fast`"),
            ("a b", "`b` is a second one"),
        ] {
            let error = parse(&args(line)).unwrap_err().to_string();
            assert!(error.contains(message), "{line}: {error}");
        }
    }

    #[test]
    fn the_runner_is_found_in_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"mcp_conformance","kind":["lib"]},"profile":{"test":true},"executable":"/t/deps/mcp_conformance-1"}
{"reason":"compiler-artifact","target":{"name":"scenarios","kind":["test"]},"profile":{"test":true},"executable":"/t/deps/scenarios-2"}
{"reason":"build-finished","success":true}"#;
        assert_eq!(
            executable(messages),
            Some(PathBuf::from("/t/deps/scenarios-2"))
        );
        assert_eq!(executable("not json\n"), None);
    }

    fn result(name: &str, passed: bool, check: Option<&str>) -> ScenarioResult {
        let mut result = ScenarioResult::missing(name);
        result.passed = passed;
        result.failure = (!passed).then(|| "expectations failed:\nx".to_owned());
        result.checks = check
            .map(|id| Check {
                id: id.to_owned(),
                passed: false,
                message: "too slow\nmore".to_owned(),
            })
            .into_iter()
            .collect();
        result
    }

    #[test]
    fn the_flakiest_come_first_and_a_missing_result_is_a_failure() {
        let names: Vec<String> = ["a/steady", "b/flaky", "c/broken"]
            .map(str::to_owned)
            .to_vec();
        let run = |flaky_passed: bool| -> BTreeMap<String, ScenarioResult> {
            [
                result("a/steady", true, None),
                result("b/flaky", flaky_passed, Some("b/flaky::close.path")),
            ]
            .into_iter()
            .map(|r| (r.name.clone(), r))
            .collect()
        };
        let rows = tally(&names, &[run(true), run(false), run(false)]);
        let order: Vec<(&str, u32)> = rows.iter().map(|r| (r.name.as_str(), r.passed)).collect();
        assert_eq!(order, [("c/broken", 0), ("b/flaky", 1), ("a/steady", 3)]);
        assert_eq!(
            rows[1].failures,
            [("b/flaky::close.path: too slow".to_owned(), vec![2, 3])]
        );
        assert!(rows[0].failures[0].0.contains("wrote no result file"));
        let mut mismatch = result("d/drift", false, None);
        mismatch.failure = Some(
            "snapshot mismatch:\nsnapshot assertion for 'd__drift' failed in line 207\n".into(),
        );
        assert_eq!(
            first_failure(&mismatch),
            "the outcome differs from its snapshot (the diff is in the run's log)"
        );
        let table = render(&rows, 3);
        assert!(table.contains("   0%      0/3  c/broken\n"), "{table}");
        assert!(
            table.contains("  33%      1/3  b/flaky\n                 run 2, 3: b/flaky::close.path: too slow\n"),
            "{table}"
        );
        assert!(
            table.ends_with("2 of 3 trials failed at least one of 3 runs\n"),
            "{table}"
        );
    }

    /// The hogs spin in their own groups, and dropping them kills each
    /// whole group: a process a hog started dies with it.
    #[test]
    fn hogs_are_killed_by_group() {
        use std::time::Duration;

        use mcp_stdio_process::marker::{MARKER_ENV, Marker, MarkerGuard};

        let marker = Marker::new("xtask-stress-hog");
        let guard = MarkerGuard::new(marker.clone(), Duration::from_secs(10));
        let hogs = Hogs::start(2, || {
            let mut command = Command::new("sh");
            // Each hog starts a spinning child of its own, in its group.
            command
                .args(["-c", "sh -c 'while :; do :; done' & while :; do :; done"])
                .env(MARKER_ENV, marker.as_str());
            command
        })
        .unwrap();
        let pids = hogs.pids();
        for pid in &pids {
            let pgid = nix::unistd::getpgid(Some(Pid::from_raw(*pid as i32))).unwrap();
            assert_eq!(pgid.as_raw(), *pid as i32, "a hog leads its own group");
        }
        // Bounded wait until each hog has started its child.
        let deadline = Instant::now() + Duration::from_secs(10);
        while marker.processes().len() < 4 {
            assert!(
                Instant::now() < deadline,
                "hogs and their children: {:?}",
                marker.processes()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(hogs);
        for pid in pids {
            // Reaped by the drop.
            assert_eq!(
                signal::kill(Pid::from_raw(pid as i32), None),
                Err(nix::errno::Errno::ESRCH)
            );
        }
        // The hogs' children died with their groups (SIGKILL is delivered
        // asynchronously: wait for it, bounded).
        let left = guard.marker().wait_gone(Duration::from_secs(10));
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}
