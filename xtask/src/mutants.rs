//! `cargo xtask mutants`: how strong the scenario suite is, measured with
//! cargo-mutants on the client's lifecycle code (docs/mutants.md).
//!
//! The scenario suite is the only test: a mutant of the close ladder that
//! only a unit test notices is a mutant the suite would let through in
//! somebody else's client. The rest of the setup (test package, test target,
//! exclusions with their reasons) lives in `.cargo/mutants.toml`, so a plain
//! `cargo mutants` run agrees with this one.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::{cargo, root, run_checked};

/// The client's lifecycle code: spawn, reaper, exit watch, kill guard, close
/// ladder, sweep, fast failure, transport failure. The one place the list is
/// written: move a file, change it here.
///
/// The close ladder, sweep, fast and transport failure are the client's
/// (`stdio.rs`); spawn, reaper, exit watch, kill guard and the group-empty
/// watcher are `mcp-stdio-process`'s. That crate's `table.rs` and
/// `marker.rs` are left out on purpose: the harness observes with them (the
/// runner's process table and cleanup), so a mutant there breaks the
/// observer, not the client, and one of `marker::kill_and_reap` could make
/// the cleanup SIGKILL processes that are not the run's.
pub const LIFECYCLE_FILES: &[&str] = &[
    "client/src/stdio.rs",
    "process/src/exit.rs",
    "process/src/spawn.rs",
    "process/src/group.rs",
];

/// The test command, as `.cargo/mutants.toml` gives it to cargo-mutants
/// (`test_package`, `additional_cargo_test_args`).
const SUITE: &[&str] = &["-p", "mcp-conformance", "--test", "scenarios"];

/// The mutants' test timeout: this many times the baseline's duration...
const TIMEOUT_FACTOR: f64 = 5.0;
/// ...and never less than this many seconds.
const MIN_TIMEOUT_SECS: f64 = 60.0;

/// Where the run's output (`mutants.out/`) and its own build go, under the
/// workspace's target directory.
const OUT_DIR: &str = "mutants";

pub fn run(args: Vec<String>) -> Result<()> {
    // `cargo xtask mutants -- --file X`: everything after `--` is
    // cargo-mutants' own; a bare flag is taken the same way.
    let extra: Vec<String> = match args.first().map(String::as_str) {
        Some("--help" | "-h") => {
            print!("{USAGE}");
            return Ok(());
        }
        Some("--") => args[1..].to_vec(),
        _ => args,
    };
    ensure_cargo_mutants()?;

    // The fixtures do not depend on the client, so no mutant changes them:
    // build them once here and point every mutant's test run at them, rather
    // than have each copied tree find (or build) its own.
    let mut fixtures = cargo();
    fixtures.args(["build", "--quiet", "-p", "mcp-fixtures", "--bins"]);
    run_checked(fixtures, "building the fixtures")?;
    let target = target_dir();
    let out = target.join(OUT_DIR);
    let fixtures_dir = target.join("debug");

    // cargo-mutants' own baseline would test the mutated packages
    // (mcp-stdio-client, mcp-stdio-process), which have no scenario suite
    // (.cargo/mutants.toml): the unmutated suite runs here, and its duration
    // sets the mutants' timeout.
    let listing = extra.iter().any(|a| a == "--list" || a == "--list-files");
    let mut timeout = None;
    if !listing && !extra.iter().any(|a| a.starts_with("--baseline")) {
        eprintln!("baseline: the scenario suite on the unmutated client");
        let mut baseline = cargo();
        baseline
            .args(["test", "--quiet"])
            .args(SUITE)
            .args(["--", "--quiet"])
            .env("MCP_FIXTURES_DIR", &fixtures_dir)
            .env("INSTA_UPDATE", "no");
        // The build is not part of the suite's duration.
        let mut build = cargo();
        build.args(["test", "--no-run", "--quiet"]).args(SUITE);
        run_checked(build, "building the scenario suite")?;
        let start = Instant::now();
        run_checked(
            baseline,
            "the scenario suite on the unmutated client (baseline)",
        )?;
        let took = start.elapsed();
        // A mutant that hangs the suite is a timeout (it counts as caught);
        // generous, so that a loaded machine does not turn a slow pass into
        // one.
        let secs = (took.as_secs_f64() * TIMEOUT_FACTOR)
            .max(MIN_TIMEOUT_SECS)
            .ceil();
        eprintln!(
            "baseline passed in {:.1}s: mutants' test timeout {secs}s",
            took.as_secs_f64()
        );
        timeout = Some(secs);
    }

    let run_id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    let mut mutants = cargo();
    mutants.arg("mutants").arg("--output").arg(&out);
    let chooses_files = extra
        .iter()
        .any(|a| a == "-f" || a == "--file" || a.starts_with("--file="));
    if !chooses_files {
        for file in LIFECYCLE_FILES {
            mutants.args(["--file", file]);
        }
    }
    if let Some(secs) = timeout {
        mutants.args(["--baseline", "skip"]);
        // A timeout given after `--` wins.
        if !extra
            .iter()
            .any(|a| a == "-t" || a == "--timeout" || a.starts_with("--timeout="))
        {
            mutants.args(["--timeout", &secs.to_string()]);
        }
    }
    mutants.args(&extra);
    mutants
        .env("MCP_FIXTURES_DIR", &fixtures_dir)
        // The mutants' builds get a target directory of their own: cargo
        // mutants builds with other RUSTFLAGS (every dependency would be
        // rebuilt in the shared one, back and forth), and it stays across
        // runs, so only the first run builds the dependencies.
        .env("CARGO_TARGET_DIR", out.join("build"))
        // A changed snapshot fails the test and writes nothing.
        .env("INSTA_UPDATE", "no")
        .env(RUN_ENV, &run_id);
    eprintln!(
        "running cargo mutants on {} (minutes; the output is in {})",
        if chooses_files {
            "the files given".to_owned()
        } else {
            LIFECYCLE_FILES.join(", ")
        },
        out.join("mutants.out").display()
    );
    let status = mutants.status().context("cannot run cargo mutants");
    // A test that timed out was killed with its process group, but the
    // servers it had started live in groups of their own and outlive it.
    let leftovers = sweep_leftovers(&run_id);
    if leftovers > 0 {
        eprintln!("killed {leftovers} process(es) left behind by timed-out test runs");
    }
    let status = status?;
    // Exit codes of cargo-mutants: 0 all caught, 2 some missed, 3 some timed
    // out (and none missed), 4 the baseline failed; anything else is an error
    // before or instead of a run.
    let code = status.code();
    if !matches!(code, Some(0 | 2 | 3)) {
        bail!("cargo mutants failed ({status})");
    }
    if listing {
        return Ok(());
    }
    let summary = Summary::read(&out.join("mutants.out"))?;
    summary.print();
    if !summary.missed.is_empty() {
        bail!(
            "{} mutant(s) survived the scenario suite: add a scenario that catches each, \
             or exclude it in .cargo/mutants.toml with the reason it cannot be observed \
             (docs/mutants.md)",
            summary.missed.len()
        );
    }
    Ok(())
}

const USAGE: &str = "\
usage: cargo xtask mutants [-- CARGO-MUTANTS-ARGS...]

Runs cargo-mutants (installed if missing) on the client's lifecycle code with
the scenario suite as the only test, then prints the score and every
surviving mutant. Exits non-zero when a mutant survives. Examples:

  cargo xtask mutants
  cargo xtask mutants -- --file client/src/stdio.rs
  cargo xtask mutants -- --re 'sweep_group' -j 2
  cargo xtask mutants -- --list

See docs/mutants.md.
";

/// The target directory of the workspace (`CARGO_TARGET_DIR` if set).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => root().join(dir),
        None => root().join("target"),
    }
}

/// Set, with a value unique to the run, in the environment of cargo-mutants:
/// every process of the run inherits it (cargo, the suite, the client's
/// servers and their children), so what a killed test left behind can be
/// found, and only that.
const RUN_ENV: &str = "MCP_XTASK_MUTANTS_RUN";

/// SIGKILLs, by pid, every process whose environment carries this run's
/// [`RUN_ENV`]; returns how many. Linux only (`/proc`); a no-op elsewhere.
fn sweep_leftovers(run_id: &str) -> usize {
    let needle = format!("{RUN_ENV}={run_id}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // Unreadable (another user's process, or gone): not ours.
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            let sent = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
            if sent.is_ok_and(|status| status.success()) {
                killed += 1;
            }
        }
    }
    killed
}

/// Installs cargo-mutants with `cargo install --locked` when `cargo mutants`
/// does not run.
fn ensure_cargo_mutants() -> Result<()> {
    let present = cargo()
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !present {
        eprintln!("cargo-mutants is missing: installing it (cargo install cargo-mutants --locked)");
        let mut install = cargo();
        install.args(["install", "cargo-mutants", "--locked"]);
        run_checked(install, "installing cargo-mutants")?;
    }
    Ok(())
}

/// The outcome files cargo-mutants writes: one mutant per line.
struct Summary {
    caught: Vec<String>,
    missed: Vec<String>,
    timeout: Vec<String>,
    unviable: Vec<String>,
}

impl Summary {
    fn read(dir: &Path) -> Result<Summary> {
        let read = |name: &str| -> Result<Vec<String>> {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Ok(text) => Ok(text.lines().map(str::to_owned).collect()),
                // A run of only unviable mutants writes no caught.txt, say.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
            }
        };
        Ok(Summary {
            caught: read("caught.txt")?,
            missed: read("missed.txt")?,
            timeout: read("timeout.txt")?,
            unviable: read("unviable.txt")?,
        })
    }

    fn print(&self) {
        let viable = self.caught.len() + self.missed.len() + self.timeout.len();
        let score = if viable == 0 {
            100.0
        } else {
            100.0 * (self.caught.len() + self.timeout.len()) as f64 / viable as f64
        };
        println!();
        println!(
            "mutants: {} caught, {} missed, {} timeout, {} unviable",
            self.caught.len(),
            self.missed.len(),
            self.timeout.len(),
            self.unviable.len()
        );
        println!(
            "score: {score:.1}% of {viable} viable mutants caught (a timeout counts as caught)"
        );
        if !self.timeout.is_empty() {
            println!("\ntimed out (the suite hung on them, which fails it too):");
            for mutant in &self.timeout {
                println!("  {mutant}");
            }
        }
        if !self.missed.is_empty() {
            println!("\nsurvived:");
            for mutant in &self.missed {
                println!("  {mutant}");
            }
        }
    }
}
