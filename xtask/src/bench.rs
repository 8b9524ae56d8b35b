//! `cargo xtask bench`: every performance figure beside its reference, measured in one run.
//!
//! Builds in release, runs the client's comparison benchmark (`client/benches/compare.rs`:
//! start-up, calls, close, many servers, memory; each against rmcp's own client, a floor, the
//! child's own exit or the graces), times the harness itself (`mcp-conformance server` on a
//! server and on a launcher tree, `cargo xtask conformance` after its build), then prints one
//! table and writes `target/bench/bench.json` with the machine it ran on. It never fails on a
//! figure: a missed target is printed as such (docs/benchmarks.md explains each).

use std::{
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::{cargo, root, run_checked};

const HELP: &str = "\
usage: cargo xtask bench [--quick] [--skip-conformance]

Builds in release, measures every figure beside its reference, prints a table
and writes target/bench/bench.json (see docs/benchmarks.md).

  --quick              fewer samples and N <= 32: a smoke run of the benchmark
  --skip-conformance   do not time `cargo xtask conformance` (the longest row)
";

pub fn run(args: Vec<String>) -> Result<()> {
    let mut quick = false;
    let mut skip_conformance = false;
    for arg in &args {
        match arg.as_str() {
            "--quick" => quick = true,
            "--skip-conformance" => skip_conformance = true,
            "-h" | "--help" => {
                print!("{HELP}");
                return Ok(());
            }
            other => {
                return Err(crate::outcome::usage(anyhow::anyhow!(
                    "unknown argument `{other}`\n\n{HELP}"
                )));
            }
        }
    }
    let out_dir = root().join("target").join("bench");
    std::fs::create_dir_all(&out_dir)
        .with_context(|| format!("cannot create {}", out_dir.display()))?;
    let load_before = load_average();

    let mut build = cargo();
    build.args([
        "build",
        "--release",
        "--package",
        "mcp-fixtures",
        "--bins",
        "--package",
        "mcp-conformance",
        "--bin",
        "mcp-conformance",
    ]);
    run_checked(
        build,
        "building the fixtures and mcp-conformance in release",
    )?;

    // From here on, everything the bench runs is a waited-for descendant of this process: what
    // the machine spent beyond that was someone else's.
    let cpu_before = CpuMark::now();

    // The client's figures: the bench profile is the release profile.
    let client_json = out_dir.join("client.json");
    let mut bench = cargo();
    bench.args([
        "bench",
        "--package",
        "mcp-stdio-client",
        "--bench",
        "compare",
        "--",
    ]);
    bench.arg("--json").arg(&client_json);
    if quick {
        bench.arg("--quick");
    }
    bench.env("MCP_FIXTURES_DIR", root().join("target").join("release"));
    run_checked(bench, "the client benchmark (cargo bench --bench compare)")?;
    let client: Value = serde_json::from_str(
        &std::fs::read_to_string(&client_json)
            .with_context(|| format!("cannot read {}", client_json.display()))?,
    )
    .with_context(|| format!("{} is not the benchmark's JSON", client_json.display()))?;
    let mut rows: Vec<Value> = client["rows"].as_array().cloned().unwrap_or_default();

    eprintln!("timing the harness itself");
    rows.extend(server_check_rows(quick)?);
    if !skip_conformance {
        rows.extend(conformance_rows()?);
    }

    let others_cpus = cpu_before.others_since();
    let document = json!({
        "machine": machine(load_before, others_cpus),
        "rows": rows,
    });
    let path = out_dir.join("bench.json");
    std::fs::write(&path, serde_json::to_string_pretty(&document)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    let table = render(&document);
    print!("{table}");
    eprintln!("wrote {}", path.display());
    if quick {
        eprintln!("docs/benchmarks.md left as it is: a --quick run is a smoke run");
    } else {
        let doc = root().join("docs").join("benchmarks.md");
        let text = std::fs::read_to_string(&doc)
            .with_context(|| format!("cannot read {}", doc.display()))?;
        let updated = with_table(&text, &table)
            .with_context(|| format!("cannot place the table in {}", doc.display()))?;
        std::fs::write(&doc, updated).with_context(|| format!("cannot write {}", doc.display()))?;
        eprintln!("wrote the table into {}", doc.display());
    }
    Ok(())
}

/// The lines between which `cargo xtask bench` writes its table in docs/benchmarks.md: the
/// table there is only ever the output of a run, never edited by hand.
const TABLE_BEGIN: &str = "<!-- cargo xtask bench: table begin (generated, do not edit) -->";
const TABLE_END: &str = "<!-- cargo xtask bench: table end -->";

/// `doc` with the text between [`TABLE_BEGIN`] and [`TABLE_END`] replaced by `table`.
fn with_table(doc: &str, table: &str) -> Result<String> {
    let Some(begin) = doc.find(TABLE_BEGIN) else {
        bail!("no line `{TABLE_BEGIN}`: put it and `{TABLE_END}` where the table belongs");
    };
    let after_begin = begin + TABLE_BEGIN.len();
    let Some(end) = doc[after_begin..]
        .find(TABLE_END)
        .map(|at| after_begin + at)
    else {
        bail!("no line `{TABLE_END}` after `{TABLE_BEGIN}`");
    };
    Ok(format!(
        "{}\n\n```text\n{}```\n\n{}",
        &doc[..after_begin],
        table,
        &doc[end..]
    ))
}

/// Above this many CPUs' worth of others' work on average during the run, the run is flagged.
/// Quiet runs read 0.00-0.01; two runs at 0.24 and 0.34 (the host stealing a quarter to a third
/// of our CPUs during the call rows) moved the sequential legacy p50 to 1.12x and 1.25x rmcp
/// while its A/A control read 1.00x and 1.02x (docs/benchmarks.md, "Reading the call rows").
const OTHERS_CPUS_HIGH: f64 = 0.2;

/// True when the 1-minute load average before the run was above the number of CPUs, or when
/// other processes than the bench's own used more than [`OTHERS_CPUS_HIGH`] CPUs on average
/// during it: the machine was shared, and only ratios measured in the same run mean anything.
/// The load average after the run is not a test: the bench's own N = 1024 servers raise it.
fn high_load(machine: &Value) -> bool {
    let cpus = machine["cpus"].as_f64().unwrap_or(1.0).max(1.0);
    let busy_before = machine["load_before"]
        .as_str()
        .and_then(|load| load.split_whitespace().next()?.parse::<f64>().ok())
        .is_some_and(|one_minute| one_minute > cpus);
    let others = machine["others_cpus"]
        .as_f64()
        .is_some_and(|others| others > OTHERS_CPUS_HIGH);
    busy_before || others
}

/// The machine's busy CPU time and this process's waited-for descendants' CPU time, at one
/// instant: two marks tell how much CPU others than the bench used in between.
struct CpuMark {
    at: Instant,
    /// `None` when `/proc/stat` could not be read: then others' work is unknown, not zero.
    machine: Option<Duration>,
    ours: Duration,
}

impl CpuMark {
    fn now() -> Self {
        Self {
            at: Instant::now(),
            machine: machine_busy(),
            ours: children_cpu(),
        }
    }

    /// Others' CPU time since this mark over the wall time, in CPUs, if it could be measured.
    /// Slightly negative figures (the two clocks' ticks) read as 0.
    fn others_since(&self) -> Option<f64> {
        let now = Self::now();
        let wall = now.at.duration_since(self.at).as_secs_f64();
        let machine = now.machine?.saturating_sub(self.machine?).as_secs_f64();
        let ours = now.ours.saturating_sub(self.ours).as_secs_f64();
        (wall > 0.0).then(|| ((machine - ours) / wall).max(0.0))
    }
}

/// Busy and stolen CPU time of the whole machine, ours included (`/proc/stat`: user, nice,
/// system, irq and softirq, guest time being inside user; and steal, on a virtual machine the
/// time a neighbour on the host held our CPUs). Not idle or iowait.
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .find_map(|line| line.strip_prefix("cpu "))?
        .split_whitespace()
        .map(|field| field.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let ticks: u64 = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&at| fields.get(at).copied().unwrap_or(0))
        .sum();
    // SAFETY: sysconf reads a constant of the system.
    let per_second = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_micros(ticks * 1_000_000 / per_second))
}

/// User + system CPU time of this process's descendants that have ended and been waited for
/// (each counts the descendants it waited for itself).
fn children_cpu() -> Duration {
    // SAFETY: getrusage only writes into the zeroed struct it is given.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_CHILDREN is always valid.
    unsafe { nix::libc::getrusage(nix::libc::RUSAGE_CHILDREN, &mut usage) };
    let tv = |t: nix::libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Wall time of `mcp-conformance server` on the plain fixture and on a launcher tree.
fn server_check_rows(quick: bool) -> Result<Vec<Value>> {
    let release = root().join("target").join("release");
    let exe = release.join("mcp-conformance");
    let fixture = |name: &str| release.join(name).to_string_lossy().into_owned();
    let runs = if quick { 1 } else { 3 };
    let time = |command: &[String]| -> Result<(f64, String)> {
        let mut best = f64::INFINITY;
        let mut verdict = String::new();
        for _ in 0..runs {
            let start = Instant::now();
            let output = Command::new(&exe)
                .arg("server")
                .arg("--")
                .args(command)
                .output()
                .with_context(|| format!("cannot run {}", exe.display()))?;
            best = best.min(start.elapsed().as_secs_f64() * 1e3);
            verdict = String::from_utf8_lossy(&output.stdout)
                .lines()
                .find_map(|line| line.strip_prefix("verdict: "))
                .unwrap_or("no verdict printed")
                .to_owned();
        }
        Ok((best, verdict))
    };
    let plain = [fixture("fixture-well-behaved")];
    let tree = [
        fixture("fixture-launcher"),
        "--".to_owned(),
        fixture("fixture-well-behaved"),
    ];
    let (plain_ms, plain_verdict) = time(&plain)?;
    let (tree_ms, tree_verdict) = time(&tree)?;
    let section = "the harness itself (wall time, best of runs)";
    // The check watches an idle server for --idle (2 s by default) on purpose: that window
    // is the floor of any run.
    let idle_ms = 2000.0;
    Ok(vec![
        row(
            section,
            "mcp-conformance server, fixture-well-behaved",
            "ms",
            plain_ms,
        )
        .with("reference", json!(idle_ms))
        .with("reference_name", json!("its deliberate --idle window"))
        .with("gap", json!(plain_ms - idle_ms))
        .with(
            "note",
            json!(format!("verdict: {plain_verdict}; best of {runs}")),
        ),
        row(
            section,
            "mcp-conformance server, launcher -> well-behaved",
            "ms",
            tree_ms,
        )
        .with("reference", json!(plain_ms))
        .with(
            "reference_name",
            json!("the same check on the plain server"),
        )
        .with("ratio", json!(tree_ms / plain_ms))
        .with(
            "note",
            json!(format!("verdict: {tree_verdict}; best of {runs}")),
        ),
    ])
}

/// Wall time of `cargo xtask conformance` once its build is done, beside the longest scenario
/// (the floor of a parallel run) and the sum of all (a serial run).
fn conformance_rows() -> Result<Vec<Value>> {
    // The build first, untimed: the figure is the run.
    let mut fixtures = cargo();
    fixtures.args(["build", "--package", "mcp-fixtures", "--bins"]);
    run_checked(fixtures, "building the fixtures")?;
    let mut runner = cargo();
    runner.args([
        "test",
        "--package",
        "mcp-conformance",
        "--test",
        "scenarios",
        "--no-run",
    ]);
    run_checked(runner, "building the scenario runner")?;

    let start = Instant::now();
    let mut run = cargo();
    run.args(["xtask", "conformance"]);
    // The runner's own output is long and not the point here.
    let output = run.output().context("cannot run cargo xtask conformance")?;
    let wall = start.elapsed().as_secs_f64() * 1e3;
    let report_path = root()
        .join("target")
        .join("conformance")
        .join("report.json");
    let report: Value = std::fs::read_to_string(&report_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null);
    // Report schema 2: each scenario is a check with a `duration` figure.
    let durations: Vec<f64> = report["checks"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|s| s["figures"]["duration"]["value"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    let longest = durations.iter().copied().fold(0.0, f64::max);
    let sum: f64 = durations.iter().sum();
    let verdict = report["verdict"].as_str().unwrap_or("no report");
    let section = "the harness itself (wall time, best of runs)";
    Ok(vec![
        row(
            section,
            "cargo xtask conformance, after the build",
            "ms",
            wall,
        )
        .with("reference", json!(longest))
        .with("reference_name", json!("its longest scenario (the floor)"))
        .with(
            "ratio",
            json!(if longest > 0.0 { wall / longest } else { 0.0 }),
        )
        .with(
            "note",
            json!(format!(
                "{} scenarios, verdict {verdict} (exit {}); their durations add up to {:.0} ms",
                durations.len(),
                output.status.code().unwrap_or(-1),
                sum
            )),
        ),
    ])
}

fn row(section: &str, figure: &str, unit: &str, ours: f64) -> Value {
    json!({
        "section": section, "figure": figure, "unit": unit, "ours": ours,
        "reference": null, "reference_name": "", "ratio": null, "gap": null,
        "target": "", "met": null, "note": "",
    })
}

trait With {
    fn with(self, key: &str, value: Value) -> Self;
}

impl With for Value {
    fn with(mut self, key: &str, value: Value) -> Self {
        self[key] = value;
        self
    }
}

/// What the figures were measured on.
fn machine(load_before: String, others_cpus: Option<f64>) -> Value {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_default();
    let memory_kib: u64 = read("/proc/meminfo")
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    json!({
        "date": date,
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": cpu,
        "memory_gib": (memory_kib as f64 / 1024.0 / 1024.0).round(),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "rustc": rustc,
        "load_before": load_before,
        "load_after": load_average(),
        "others_cpus": others_cpus.map(|others| (others * 100.0).round() / 100.0),
    })
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The table: one block per section, each figure beside its reference and how they compare.
pub fn render(document: &Value) -> String {
    let mut out = String::new();
    let machine = &document["machine"];
    out.push_str(&format!(
        "machine: {} CPUs ({}), {} GiB, Linux {}, {}; load {} -> {}; others' work during the \
         run {} CPUs; {}\n",
        machine["cpus"],
        machine["cpu"].as_str().unwrap_or("?"),
        machine["memory_gib"],
        machine["kernel"].as_str().unwrap_or("?"),
        machine["rustc"].as_str().unwrap_or("?"),
        machine["load_before"].as_str().unwrap_or("?"),
        machine["load_after"].as_str().unwrap_or("?"),
        machine["others_cpus"]
            .as_f64()
            .map_or("?".to_owned(), |others| format!("{others:.2}")),
        machine["date"].as_str().unwrap_or("?"),
    ));
    if high_load(machine) {
        out.push_str(
            "HIGH LOAD: the 1-minute load before the run was above the CPU count, or others \
             used more than a fifth of a CPU during it; read the ratios (both sides measured \
             in the same run, interleaved), not the absolute figures\n",
        );
    }
    let mut section = "";
    for row in document["rows"].as_array().into_iter().flatten() {
        let this = row["section"].as_str().unwrap_or("");
        if this != section {
            section = this;
            out.push_str(&format!("\n{section}\n"));
            out.push_str(&format!(
                "  {:<52} {:>14} {:<40} {:>10}  {}\n",
                "figure", "ours", "reference", "vs", "target"
            ));
        }
        let unit = row["unit"].as_str().unwrap_or("");
        let value = |v: &Value| v.as_f64().map(|v| format!("{} {unit}", number(v)));
        let reference = match value(&row["reference"]) {
            Some(v) => format!("{v} {}", row["reference_name"].as_str().unwrap_or("")),
            None => String::new(),
        };
        let versus = match (row["ratio"].as_f64(), row["gap"].as_f64()) {
            (Some(ratio), _) => format!("{ratio:.2}x"),
            (None, Some(gap)) => format!("{gap:+.2} {unit}"),
            _ => String::new(),
        };
        let target = match (row["target"].as_str().unwrap_or(""), row["met"].as_bool()) {
            ("", _) => String::new(),
            (target, Some(true)) => format!("{target}: met"),
            (target, Some(false)) => format!("{target}: MISSED"),
            (target, None) => target.to_owned(),
        };
        out.push_str(&format!(
            "  {:<52} {:>14} {:<40} {:>10}  {}\n",
            row["figure"].as_str().unwrap_or(""),
            value(&row["ours"]).unwrap_or_default(),
            reference,
            versus,
            target
        ));
        if let Some(note) = row["note"].as_str().filter(|n| !n.is_empty()) {
            out.push_str(&format!("  {:<52} {note}\n", ""));
        }
    }
    out
}

fn number(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_each_figure_beside_its_reference_and_the_target_verdict() {
        let document = json!({
            "machine": { "cpus": 2, "cpu": "X", "memory_gib": 24.0, "kernel": "6.1",
                         "rustc": "rustc 1.90", "load_before": "1", "load_after": "2",
                         "date": "2026-12-03" },
            "rows": [
                row("start", "ours", "ms", 1.5).with("reference", json!(1.6))
                    .with("reference_name", json!("rmcp")).with("ratio", json!(0.9375))
                    .with("target", json!("<= 1.05x rmcp")).with("met", json!(true)),
                row("start", "close", "ms", 101.0).with("reference", json!(100.0))
                    .with("reference_name", json!("the grace")).with("gap", json!(1.0))
                    .with("target", json!("gap <= 2 ms")).with("met", json!(false))
                    .with("note", json!("n=10")),
            ]
        });
        let table = render(&document);
        assert!(
            table.starts_with("machine: 2 CPUs (X), 24.0 GiB"),
            "{table}"
        );
        assert!(table.contains("\nstart\n"), "{table}");
        assert!(table.contains("1.500 ms"), "{table}");
        assert!(table.contains("1.600 ms rmcp"), "{table}");
        assert!(table.contains("0.94x"), "{table}");
        assert!(table.contains("<= 1.05x rmcp: met"), "{table}");
        assert!(table.contains("+1.00 ms"), "{table}");
        assert!(table.contains("gap <= 2 ms: MISSED"), "{table}");
        assert!(table.contains("n=10"), "{table}");
        assert!(!table.contains("HIGH LOAD"), "{table}");
        // The bench's own servers raise the load after the run: not a flag by itself.
        let mut own_load = document.clone();
        own_load["machine"]["load_after"] = json!("4.5 3.0 2.0");
        assert!(!render(&own_load).contains("HIGH LOAD"));
        let mut busy = document.clone();
        busy["machine"]["load_before"] = json!("2.5 1.0 0.5");
        assert!(render(&busy).contains("HIGH LOAD"));
        // A host that steals a quarter of a CPU moves the call rows: flagged.
        let mut stolen = document.clone();
        stolen["machine"]["others_cpus"] = json!(0.24);
        assert!(render(&stolen).contains("HIGH LOAD"));
        let mut quiet = document.clone();
        quiet["machine"]["others_cpus"] = json!(0.01);
        assert!(!render(&quiet).contains("HIGH LOAD"));
        let mut shared = document.clone();
        shared["machine"]["others_cpus"] = json!(0.8);
        let table = render(&shared);
        assert!(table.contains("HIGH LOAD"), "{table}");
        assert!(
            table.contains("others' work during the run 0.80 CPUs"),
            "{table}"
        );
    }

    #[test]
    fn the_table_replaces_only_what_lies_between_the_markers() {
        let doc = format!("# B\n\nprose\n{TABLE_BEGIN}\nold table\n{TABLE_END}\nmore prose\n");
        let updated = with_table(&doc, "new table\n").unwrap();
        assert_eq!(
            updated,
            format!(
                "# B\n\nprose\n{TABLE_BEGIN}\n\n```text\nnew table\n```\n\n{TABLE_END}\nmore prose\n"
            )
        );
        // Idempotent in shape: a second run replaces the first one's table.
        let again = with_table(&updated, "newer\n").unwrap();
        assert!(again.contains("newer") && !again.contains("new table"));
        assert!(with_table("no markers", "t").is_err());
    }
}
