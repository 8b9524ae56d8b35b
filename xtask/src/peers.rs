//! `cargo xtask peers [--runs N]`: the SDKs side by side. Installs the Python
//! and TypeScript MCP SDKs under `target/peers/` from the drivers' pinned
//! manifests (`drivers/python/requirements.txt`,
//! `drivers/typescript/package-lock.json`), builds the Rust drivers, grades
//! every client N times (default 3) with `mcp-conformance client --scenarios`,
//! and writes `target/peers/peers.json` (every run) and `docs/peers.md` (a
//! cell whose verdict differs between runs is marked unstable). It needs the
//! package registries, so it is not part of the default test command.

use std::{fmt::Write as _, path::Path, process::Command, time::Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::{cargo, root, run_checked};

const HELP: &str = "\
usage: cargo xtask peers [--runs N]
       cargo xtask peers --render-only

Installs the Python and TypeScript MCP SDKs under target/peers from the
drivers' pinned manifests, builds the Rust drivers in release, grades each
client N times (default 3, at least 3) with `mcp-conformance client
--scenarios`, and writes target/peers/peers.json (every run) and
docs/peers.md. A cell whose verdict differs between runs is shown as
unstable with the count of each verdict, never as one run's verdict.

--render-only rewrites docs/peers.md from target/peers/peers.json, running
nothing.
";

/// Runs per client unless `--runs` says otherwise.
const DEFAULT_RUNS: u32 = 3;
/// Fewer runs than this cannot tell a stable verdict from a coin flip that
/// came up the same twice.
const MIN_RUNS: u32 = 3;
/// The version of `target/peers/peers.json`; 2 holds every run per client
/// (1 held one report); 3 holds client reports of report schema 2.
const SCHEMA: u32 = 3;
/// The manifest of the Python driver (pip requirements).
const PYTHON_REQUIREMENTS: &str = "drivers/python/requirements.txt";
/// The directory of the TypeScript driver: its `package.json`, its
/// `package-lock.json` and the driver itself.
const TYPESCRIPT_DIR: &str = "drivers/typescript";
const TYPESCRIPT_FILES: [&str; 3] = ["package.json", "package-lock.json", "driver.mjs"];
const TYPESCRIPT_SDK: &str = "@modelcontextprotocol/sdk";
/// The id prefix of a scenario row in a client report.
const SCENARIO_PREFIX: &str = "scenario:";

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Options {
    runs: u32,
    render_only: bool,
}

fn parse(args: &[String]) -> Result<Option<Options>> {
    let mut options = Options {
        runs: DEFAULT_RUNS,
        render_only: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--runs" => {
                let text = args
                    .next()
                    .with_context(|| format!("--runs needs a number\n\n{HELP}"))?;
                options.runs = text
                    .parse()
                    .ok()
                    .with_context(|| format!("--runs takes a number, not `{text}`"))?;
                if options.runs < MIN_RUNS {
                    bail!(
                        "--runs must be at least {MIN_RUNS}: fewer runs cannot show which \
                         verdicts are stable"
                    );
                }
            }
            "--render-only" => options.render_only = true,
            other => bail!("unknown argument `{other}`\n\n{HELP}"),
        }
    }
    Ok(Some(options))
}

/// One client graded: how it is named in the table and how its driver runs.
struct Client {
    name: &'static str,
    version: String,
    driver: Vec<String>,
}

pub fn run(args: Vec<String>) -> Result<()> {
    let Some(options) = parse(&args).map_err(crate::outcome::usage)? else {
        print!("{HELP}");
        return Ok(());
    };
    let root = root();
    let peers = root.join("target/peers");
    if options.render_only {
        let path = peers.join("peers.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (run `cargo xtask peers`)", path.display()))?;
        let data: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        return write_markdown(&root, &data);
    }
    std::fs::create_dir_all(&peers).context("cannot create target/peers")?;

    let mut build = cargo();
    build.args(["build", "--release", "-p", "mcp-conformance", "--bins"]);
    run_checked(build, "cargo build --release -p mcp-conformance")?;
    let bin = root.join("target/release");

    let venv = peers.join("python");
    if !venv.join("bin/python").exists() {
        let mut command = Command::new("python3");
        command.args(["-m", "venv"]).arg(&venv);
        run_checked(command, "python3 -m venv")?;
    }
    run_checked(
        pip_install(&venv, &root),
        &format!("pip install -r {PYTHON_REQUIREMENTS}"),
    )?;

    let node = peers.join("typescript");
    std::fs::create_dir_all(&node)?;
    // The driver is copied beside the manifests so that its imports resolve
    // to the SDK installed here, not to one installed in the checkout.
    for file in TYPESCRIPT_FILES {
        let from = root.join(TYPESCRIPT_DIR).join(file);
        std::fs::copy(&from, node.join(file))
            .with_context(|| format!("cannot copy {}", from.display()))?;
    }
    run_checked(
        npm_ci(&node),
        &format!("npm ci (from {TYPESCRIPT_DIR}/package-lock.json)"),
    )?;

    let clients = [
        Client {
            name: "mcp-stdio-client (this project)",
            version: env_version(&root),
            driver: vec![
                bin.join("mcp-conformance").display().to_string(),
                "driver".into(),
                "stdio-client".into(),
            ],
        },
        Client {
            name: "rmcp TokioChildProcess",
            version: lock_version(&root, "rmcp"),
            driver: vec![
                bin.join("mcp-conformance").display().to_string(),
                "driver".into(),
                "rmcp".into(),
            ],
        },
        Client {
            name: "Python SDK (mcp)",
            version: python_version(&venv)?,
            driver: vec![
                venv.join("bin/python").display().to_string(),
                root.join("drivers/python/mcp_driver.py")
                    .display()
                    .to_string(),
            ],
        },
        Client {
            name: "TypeScript SDK (@modelcontextprotocol/sdk)",
            version: node_version(&node)?,
            driver: vec!["node".into(), node.join("driver.mjs").display().to_string()],
        },
        Client {
            name: "mcp-conformance driver naive (reference, correct mode)",
            version: env_version(&root),
            driver: vec![
                bin.join("mcp-conformance").display().to_string(),
                "driver".into(),
                "naive".into(),
            ],
        },
    ];
    let mut records: Vec<Value> = clients
        .iter()
        .map(|c| json!({ "name": c.name, "version": c.version, "runs": [] }))
        .collect();
    // Round by round rather than client by client, so a burst of load on
    // the shared machine falls on one run of several clients, not on every
    // run of one.
    for round in 1..=options.runs {
        for (client, record) in clients.iter().zip(records.iter_mut()) {
            eprintln!(
                "run {round}/{}: grading {} {} ...",
                options.runs, client.name, client.version
            );
            let started = Instant::now();
            let graded = grade(&bin, client)?;
            eprintln!(
                "run {round}/{}: {} done in {} s (exit {})",
                options.runs,
                client.name,
                started.elapsed().as_secs(),
                graded["exit"]
            );
            if let Some(runs) = record["runs"].as_array_mut() {
                runs.push(graded);
            }
        }
        // Written after each round, so an interrupted run keeps what it has.
        let data = json!({ "schema": SCHEMA, "runs": round, "clients": records });
        std::fs::write(
            peers.join("peers.json"),
            serde_json::to_string_pretty(&data)?,
        )?;
    }
    let data = json!({ "schema": SCHEMA, "runs": options.runs, "clients": records });
    write_markdown(&root, &data)
}

fn write_markdown(root: &Path, data: &Value) -> Result<()> {
    if data["schema"] != json!(SCHEMA) {
        bail!(
            "target/peers/peers.json has schema {}, not {SCHEMA}: run `cargo xtask peers`",
            data["schema"]
        );
    }
    let markdown = render(data);
    std::fs::write(root.join("docs/peers.md"), &markdown)?;
    print!("{markdown}");
    eprintln!("wrote target/peers/peers.json and docs/peers.md");
    Ok(())
}

/// `pip install -r drivers/python/requirements.txt` into the venv.
fn pip_install(venv: &Path, root: &Path) -> Command {
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--quiet", "-r"])
        .arg(root.join(PYTHON_REQUIREMENTS));
    pip
}

/// `npm ci` in `dir`: exactly what the copied lock file records.
fn npm_ci(dir: &Path) -> Command {
    let mut npm = Command::new("npm");
    npm.current_dir(dir)
        .args(["ci", "--silent", "--no-audit", "--no-fund"]);
    npm
}

/// One run of `mcp-conformance client --scenarios` on `client`: its exit
/// code and its report, or, when there is no report (exit 2, "could not
/// run"), what it said on stderr.
fn grade(bin: &Path, client: &Client) -> Result<Value> {
    let output = Command::new(bin.join("mcp-conformance"))
        .args(["client", "--json", "--scenarios", "--"])
        .args(&client.driver)
        .output()
        .with_context(|| format!("cannot run mcp-conformance client for {}", client.name))?;
    let exit = output.status.code();
    Ok(match serde_json::from_slice::<Value>(&output.stdout) {
        Ok(report) => json!({ "exit": exit, "report": report }),
        Err(_) => json!({
            "exit": exit,
            "error": String::from_utf8_lossy(&output.stderr).trim(),
        }),
    })
}

/// The installed Python SDK's version, as the venv's Python sees it.
fn python_version(venv: &Path) -> Result<String> {
    let output = Command::new(venv.join("bin/python"))
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .context("cannot ask the venv's Python for the mcp version")?;
    if !output.status.success() {
        bail!(
            "the venv has no `mcp` package: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The installed TypeScript SDK's version, from its own package.json.
fn node_version(dir: &Path) -> Result<String> {
    let path = dir
        .join("node_modules")
        .join(TYPESCRIPT_SDK)
        .join("package.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let manifest: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    Ok(manifest["version"].as_str().unwrap_or_default().to_owned())
}

fn env_version(root: &Path) -> String {
    std::fs::read_to_string(root.join("conformance/Cargo.toml"))
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("version"))
                .and_then(|line| line.split('"').nth(1))
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// The version of `package` in the workspace's Cargo.lock (rmcp is graded
/// as the workspace builds it).
fn lock_version(root: &Path, package: &str) -> String {
    let lock = std::fs::read_to_string(root.join("Cargo.lock")).unwrap_or_default();
    let name = format!("name = \"{package}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == name
            && let Some(version) = lines.next().and_then(|l| l.split('"').nth(1))
        {
            return version.to_owned();
        }
    }
    String::new()
}

/// What one client's runs say about one check id: per run, the check's
/// object in that run's report (`None` when the run has no such check, or
/// no report at all).
struct Cell<'a> {
    runs: Vec<Option<&'a Value>>,
}

impl<'a> Cell<'a> {
    fn of(client: &'a Value, id: &str) -> Cell<'a> {
        Cell {
            runs: runs(client)
                .iter()
                .map(|run| {
                    run["report"]["checks"]
                        .as_array()
                        .and_then(|checks| checks.iter().find(|c| c["id"] == json!(id)))
                })
                .collect(),
        }
    }

    /// Each run's verdict (`not run` when the run has none for this id).
    fn verdicts(&self) -> Vec<&'a str> {
        self.runs
            .iter()
            .map(|check| {
                check
                    .and_then(|c| c["verdict"].as_str())
                    .unwrap_or("not run")
            })
            .collect()
    }

    /// The verdict every run gave, or `None` when they differ.
    fn stable(&self) -> Option<&'a str> {
        let verdicts = self.verdicts();
        let first = *verdicts.first()?;
        verdicts.iter().all(|v| *v == first).then_some(first)
    }

    /// The first run whose verdict is `verdict`, with its number (from 1).
    fn first_with(&self, verdict: &str) -> Option<(usize, &'a Value)> {
        self.runs.iter().enumerate().find_map(|(i, check)| {
            check
                .filter(|c| c["verdict"] == json!(verdict))
                .map(|c| (i + 1, c))
        })
    }

    /// `unstable: pass 2/3, FAIL 1/3`: each verdict with how many runs gave
    /// it, in the order they first appeared.
    fn unstable_text(&self) -> String {
        format!("unstable: {}", counted(&self.verdicts()))
    }

    /// The cell of the main table: the verdict and the figures measured
    /// (each as the range over the runs), or the unstable count.
    fn text(&self) -> String {
        let Some(verdict) = self.stable() else {
            return format!("**{}**", self.unstable_text());
        };
        let label = match verdict {
            "fail" => "**FAIL**",
            other => other,
        };
        let figures = self.figures();
        if figures.is_empty() {
            label.to_owned()
        } else {
            format!("{label} ({})", figures.join(", "))
        }
    }

    /// Each figure (milliseconds) as `name N ms`, or `name LOW–HIGH ms`
    /// when the runs measured different values.
    fn figures(&self) -> Vec<String> {
        let mut names: Vec<&str> = Vec::new();
        for check in self.runs.iter().flatten() {
            for name in check["figures"]
                .as_object()
                .into_iter()
                .flat_map(|f| f.keys())
            {
                if !names.contains(&name.as_str()) {
                    names.push(name);
                }
            }
        }
        names
            .iter()
            .filter_map(|name| {
                let values: Vec<u64> = self
                    .runs
                    .iter()
                    .flatten()
                    .filter_map(|check| check["figures"][*name]["value"].as_u64())
                    .collect();
                let low = values.iter().min()?;
                let high = values.iter().max()?;
                let label = name.replace('_', " ");
                Some(if low == high {
                    format!("{label} {low} ms")
                } else {
                    format!("{label} {low}–{high} ms")
                })
            })
            .collect()
    }
}

/// `pass 2/3, FAIL 1/3`.
fn counted(values: &[&str]) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for value in values {
        match counts.iter_mut().find(|(v, _)| v == value) {
            Some((_, count)) => *count += 1,
            None => counts.push((value, 1)),
        }
    }
    counts
        .iter()
        .map(|(value, count)| {
            let value = if *value == "fail" { "FAIL" } else { value };
            format!("{value} {count}/{}", values.len())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn runs(client: &Value) -> &[Value] {
    client["runs"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn clients(data: &Value) -> &[Value] {
    data["clients"].as_array().map(Vec::as_slice).unwrap_or(&[])
}

fn title(client: &Value) -> String {
    format!(
        "{} {}",
        client["name"].as_str().unwrap_or("?"),
        client["version"].as_str().unwrap_or("")
    )
}

/// Text fit for one table cell: one line, with `|` escaped. Never cut short.
fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// Every check id any run of any client reported, in the order first seen
/// (the reports list the fifteen checks, then the scenario rows).
fn check_ids(data: &Value) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for client in clients(data) {
        for run in runs(client) {
            for check in run["report"]["checks"].as_array().into_iter().flatten() {
                if let Some(id) = check["id"].as_str()
                    && !ids.iter().any(|known| known == id)
                {
                    ids.push(id.to_owned());
                }
            }
        }
    }
    ids
}

fn render(data: &Value) -> String {
    let clients = clients(data);
    let total = data["runs"].as_u64().unwrap_or(0);
    let ids = check_ids(data);
    let (scenarios, checks): (Vec<&String>, Vec<&String>) =
        ids.iter().partition(|id| id.starts_with(SCENARIO_PREFIX));
    let header = |first: &str| {
        let mut out = format!(
            "| {first} | {} |\n",
            clients.iter().map(title).collect::<Vec<_>>().join(" | ")
        );
        let _ = writeln!(out, "|---|{}", "---|".repeat(clients.len()));
        out
    };

    let mut out = String::new();
    let _ = writeln!(out, "# MCP stdio clients side by side\n");
    let _ = writeln!(
        out,
        "Written by `cargo xtask peers`: each client graded {total} times by\n\
         `mcp-conformance client --scenarios` (`docs/client-check.md`) through its\n\
         driver, against the same fixtures, with the same graces asked (500 ms for\n\
         EOF and for SIGTERM, where the client has such settings); the SDKs installed\n\
         from the drivers' pinned manifests. Cells: the verdict every run gave, and\n\
         the figures measured (a range when the runs differ). A cell whose verdict\n\
         differs between runs is **unstable**, with how many runs gave each verdict:\n\
         no one run's verdict is published as the client's. rmcp and the SDKs take\n\
         no graces: rmcp closes with its fixed 3 s and 3 s, the SDKs with 2 s and 2 s.\n\
         `close` is how long the client's own close call took, the server's exit\n\
         included; this project's client also sweeps the server's process group (one\n\
         process-table scan) before it returns, which rmcp and the SDKs do not. A few\n\
         milliseconds are within the noise of a shared machine.\n"
    );
    out.push_str(&header("check"));
    let eras: Vec<String> = clients
        .iter()
        .map(|client| {
            let eras: Vec<&str> = runs(client)
                .iter()
                .map(|run| {
                    run["report"]["subject"]["era"]
                        .as_str()
                        .unwrap_or("not run")
                })
                .collect();
            match eras.first() {
                Some(first) if eras.iter().all(|era| era == first) => (*first).to_owned(),
                _ => format!("**unstable: {}**", counted(&eras)),
            }
        })
        .collect();
    let _ = writeln!(out, "| era | {} |", eras.join(" | "));
    for id in &checks {
        let cells: Vec<String> = clients
            .iter()
            .map(|client| Cell::of(client, id).text())
            .collect();
        let _ = writeln!(out, "| `{id}` | {} |", cells.join(" | "));
    }

    let _ = writeln!(out, "\n## What each failing client would need to change\n");
    let _ = writeln!(
        out,
        "Checks that failed (or warned) in every run, with the first run's text.\n"
    );
    for client in clients {
        let failing: Vec<&Value> = checks
            .iter()
            .filter_map(|id| {
                let cell = Cell::of(client, id);
                let verdict = cell.stable().filter(|v| *v == "fail" || *v == "warn")?;
                cell.first_with(verdict).map(|(_, check)| check)
            })
            .collect();
        if failing.is_empty() {
            continue;
        }
        let _ = writeln!(out, "**{}**\n", title(client));
        for check in failing {
            let _ = writeln!(
                out,
                "- `{}`: {}. Fix: {}",
                check["id"].as_str().unwrap_or("?"),
                one_line(check["summary"].as_str().unwrap_or("")),
                check["fix"].as_str().unwrap_or("")
            );
        }
        let _ = writeln!(out);
    }

    render_unstable(&mut out, clients, &ids);
    render_scenarios(&mut out, clients, &scenarios, &header);
    render_not_run(&mut out, clients);
    out
}

/// The cells that differ between runs, each with the text of the first run
/// of each verdict that is not a pass.
fn render_unstable(out: &mut String, clients: &[Value], ids: &[String]) {
    let mut lines = Vec::new();
    for client in clients {
        for id in ids {
            let cell = Cell::of(client, id);
            if cell.stable().is_some() {
                continue;
            }
            let mut texts = Vec::new();
            let mut seen: Vec<&str> = Vec::new();
            for verdict in cell.verdicts() {
                if verdict == "pass" || verdict == "not run" || seen.contains(&verdict) {
                    continue;
                }
                seen.push(verdict);
                if let Some((number, check)) = cell.first_with(verdict) {
                    texts.push(format!(
                        " run {number}: {}",
                        one_line(check["summary"].as_str().unwrap_or(""))
                    ));
                }
            }
            lines.push(format!(
                "- {}, `{id}`: {}.{}",
                title(client),
                cell.unstable_text(),
                texts.join(";")
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Unstable cells\n");
    let _ = writeln!(
        out,
        "A verdict that differs between runs of the same client is a defect of the\n\
         check (a wait without enough slack over what the client does, or a race it\n\
         loses), not a fact about the client (`docs/client-check.md`, \"Races\").\n"
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

/// The second table: the scenario rows per client, then, per client, every
/// row that did not pass in every run with its one-line reason.
fn render_scenarios(
    out: &mut String,
    clients: &[Value],
    scenarios: &[&String],
    header: &dyn Fn(&str) -> String,
) {
    if scenarios.is_empty() {
        return;
    }
    let _ = writeln!(out, "## The scenario rows\n");
    let _ = writeln!(
        out,
        "`mcp-conformance client --scenarios`: each built-in scenario that applies\n\
         to external clients, run through the client's driver and graded by the\n\
         scenario's own expectations on what the harness observes (row id\n\
         `{SCENARIO_PREFIX}<group>/<name>`, shown without its prefix). Cells as above.\n"
    );
    out.push_str(&header("scenario"));
    for id in scenarios {
        let cells: Vec<String> = clients
            .iter()
            .map(|client| Cell::of(client, id).text())
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} |",
            id.trim_start_matches(SCENARIO_PREFIX),
            cells.join(" | ")
        );
    }
    let _ = writeln!(out, "\n### Why each scenario row did not pass\n");
    let _ = writeln!(
        out,
        "Per client, each row that did not pass in every run, with its reason: the\n\
         report's text, each failed expectation and its first line (of the first\n\
         run with that verdict), whole.\n"
    );
    for client in clients {
        let mut rows = Vec::new();
        for id in scenarios {
            let cell = Cell::of(client, id);
            let (verdict, reason) = match cell.stable() {
                Some("pass") => continue,
                Some(verdict) => {
                    let label = if verdict == "fail" {
                        "**FAIL**"
                    } else {
                        verdict
                    };
                    let reason = cell
                        .first_with(verdict)
                        .map(|(_, check)| one_line(check["summary"].as_str().unwrap_or("")))
                        .unwrap_or_default();
                    (label.to_owned(), reason)
                }
                None => {
                    let reasons: Vec<String> = ["fail", "warn", "skip", "info"]
                        .iter()
                        .filter_map(|verdict| {
                            let (number, check) = cell.first_with(verdict)?;
                            Some(format!(
                                "run {number}: {}",
                                one_line(check["summary"].as_str().unwrap_or(""))
                            ))
                        })
                        .collect();
                    (format!("**{}**", cell.unstable_text()), reasons.join("; "))
                }
            };
            rows.push(format!(
                "| `{}` | {verdict} | {reason} |",
                id.trim_start_matches(SCENARIO_PREFIX)
            ));
        }
        let _ = writeln!(out, "**{}**\n", title(client));
        if rows.is_empty() {
            let _ = writeln!(out, "Every row passed in every run.\n");
            continue;
        }
        let _ = writeln!(out, "| scenario | verdict | reason |\n|---|---|---|");
        for row in rows {
            let _ = writeln!(out, "{row}");
        }
        let _ = writeln!(out);
    }
}

/// Runs that produced no report (`mcp-conformance client` exit 2: the
/// driver could not run), with what the harness said.
fn render_not_run(out: &mut String, clients: &[Value]) {
    let mut lines = Vec::new();
    for client in clients {
        for (number, run) in runs(client).iter().enumerate() {
            if run["report"].is_object() {
                continue;
            }
            lines.push(format!(
                "- {}, run {}: exit {}: {}",
                title(client),
                number + 1,
                run["exit"],
                one_line(run["error"].as_str().unwrap_or(""))
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Runs that could not run\n");
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A manifest of the checkout.
    fn manifest(path: &str) -> PathBuf {
        root().join(path)
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn check(id: &str, verdict: &str, summary: &str, figures: Value) -> Value {
        json!({ "id": id, "verdict": verdict, "summary": summary, "figures": figures,
                "fix": "do the right thing" })
    }

    /// peers.json data: one client per entry, each a list of runs, each run
    /// a list of checks.
    fn data(clients: &[(&str, Vec<Vec<Value>>)]) -> Value {
        let clients: Vec<Value> = clients
            .iter()
            .map(|(name, runs)| {
                let runs: Vec<Value> = runs
                    .iter()
                    .map(|checks| json!({ "exit": 1, "report": { "subject": { "era": "legacy" }, "checks": checks } }))
                    .collect();
                json!({ "name": name, "version": "1.0", "runs": runs })
            })
            .collect();
        let total = clients[0]["runs"].as_array().unwrap().len();
        json!({ "schema": SCHEMA, "runs": total, "clients": clients })
    }

    #[test]
    fn runs_default_to_three_and_fewer_than_three_are_refused() {
        assert_eq!(
            parse(&[]).unwrap(),
            Some(Options {
                runs: 3,
                render_only: false
            })
        );
        assert_eq!(parse(&args(&["--runs", "5"])).unwrap().unwrap().runs, 5);
        let error = parse(&args(&["--runs", "2"])).unwrap_err().to_string();
        assert!(error.contains("at least 3"), "{error}");
        let error = parse(&args(&["--runs", "many"])).unwrap_err().to_string();
        assert!(error.contains("not `many`"), "{error}");
        let error = parse(&args(&["--run"])).unwrap_err().to_string();
        assert!(error.contains("unknown argument `--run`"), "{error}");
        assert!(
            parse(&args(&["--render-only"]))
                .unwrap()
                .unwrap()
                .render_only
        );
        assert_eq!(parse(&args(&["--help"])).unwrap(), None);
    }

    #[test]
    fn a_cell_that_differs_between_runs_is_unstable_never_one_runs_verdict() {
        let bounded = |verdict| check("handshake.bounded", verdict, "left the server", json!({}));
        let data = data(&[(
            "TypeScript SDK",
            vec![
                vec![bounded("fail")],
                vec![bounded("pass")],
                vec![bounded("pass")],
            ],
        )]);
        let markdown = render(&data);
        eprintln!("{markdown}");
        assert!(
            markdown.contains("| `handshake.bounded` | **unstable: FAIL 1/3, pass 2/3** |"),
            "{markdown}"
        );
        // Not published as a failure with a fix, but as an unstable cell
        // with the failing run's text.
        assert!(!markdown.contains("Fix: do the right thing"), "{markdown}");
        assert!(
            markdown.contains(
                "- TypeScript SDK 1.0, `handshake.bounded`: unstable: FAIL 1/3, pass 2/3. \
                 run 1: left the server"
            ),
            "{markdown}"
        );
    }

    #[test]
    fn a_stable_cell_shows_its_verdict_and_the_range_of_its_figures() {
        let close = |ms: u64| {
            check(
                "close.sigkill",
                "pass",
                "",
                json!({ "close": { "value": ms, "unit": "ms" } }),
            )
        };
        let same = |ms: u64| {
            check(
                "close.sigterm",
                "fail",
                "too soon",
                json!({ "eof_to_sigterm": { "value": ms, "unit": "ms" } }),
            )
        };
        let data = data(&[(
            "client",
            vec![
                vec![close(1012), same(501)],
                vec![close(1004), same(501)],
                vec![close(1030), same(501)],
            ],
        )]);
        let markdown = render(&data);
        assert!(
            markdown.contains("| `close.sigkill` | pass (close 1004–1030 ms) |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("| `close.sigterm` | **FAIL** (eof to sigterm 501 ms) |"),
            "{markdown}"
        );
        assert!(
            markdown.contains("- `close.sigterm`: too soon. Fix: do the right thing"),
            "{markdown}"
        );
        assert!(!markdown.contains("Unstable cells"), "{markdown}");
    }

    #[test]
    fn the_scenario_table_gives_every_row_that_did_not_pass_its_whole_reason() {
        let reason = "1 of 9 expectations failed: at_return.group_empty: alive at return: \
                      fixture-eof-ignoring-server (pid 4242), a | in the text";
        let rows = |second: &str| {
            vec![
                check("close.eof_first", "pass", "", json!({})),
                check(
                    "scenario:lifecycle/eof-ignored-sigterm",
                    "fail",
                    reason,
                    json!({}),
                ),
                check(
                    "scenario:lifecycle/graceful-close",
                    "pass",
                    "9 expectations hold",
                    json!({}),
                ),
                check(
                    "scenario:streams/stderr-flood",
                    second,
                    "timed out",
                    json!({}),
                ),
            ]
        };
        let data = data(&[
            (
                "Python SDK (mcp)",
                vec![rows("pass"), rows("fail"), rows("pass")],
            ),
            (
                "mcp-stdio-client",
                vec![rows("pass"), rows("pass"), rows("pass")],
            ),
        ]);
        let markdown = render(&data);
        eprintln!("{markdown}");
        let second = markdown
            .split("## The scenario rows")
            .nth(1)
            .expect("a second table");
        assert!(
            second.contains("| scenario | Python SDK (mcp) 1.0 | mcp-stdio-client 1.0 |"),
            "{second}"
        );
        assert!(
            second.contains("| `lifecycle/eof-ignored-sigterm` | **FAIL** | **FAIL** |"),
            "{second}"
        );
        assert!(
            second.contains("| `streams/stderr-flood` | **unstable: pass 2/3, FAIL 1/3** | pass |"),
            "{second}"
        );
        // The reasons: whole names, the pipe escaped, one row per failing
        // scenario; passing rows have none.
        assert!(
            second.contains(
                "| `lifecycle/eof-ignored-sigterm` | **FAIL** | 1 of 9 expectations failed: \
                 at_return.group_empty: alive at return: fixture-eof-ignoring-server \
                 (pid 4242), a \\| in the text |"
            ),
            "{second}"
        );
        assert!(
            second.contains(
                "| `streams/stderr-flood` | **unstable: pass 2/3, FAIL 1/3** | run 2: timed out |"
            ),
            "{second}"
        );
        let reasons = second
            .split("### Why each scenario row did not pass")
            .nth(1)
            .expect("the reasons");
        assert!(!reasons.contains("graceful-close"), "{reasons}");
        // The scenario rows stay out of the first table.
        let first = markdown.split("## The scenario rows").next().unwrap();
        assert!(!first.contains("| `scenario:"), "{first}");
    }

    #[test]
    fn a_run_without_a_report_is_not_run_and_says_why() {
        let mut data = data(&[(
            "Python SDK (mcp)",
            vec![
                vec![check("close.eof_first", "pass", "", json!({}))],
                vec![check("close.eof_first", "pass", "", json!({}))],
                vec![check("close.eof_first", "pass", "", json!({}))],
            ],
        )]);
        data["clients"][0]["runs"][2] = json!({
            "exit": 2,
            "error": "mcp-conformance client: the driver could not run: ModuleNotFoundError: No module named 'mcp'"
        });
        let markdown = render(&data);
        assert!(
            markdown.contains("| `close.eof_first` | **unstable: pass 2/3, not run 1/3** |"),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "- Python SDK (mcp) 1.0, run 3: exit 2: mcp-conformance client: the driver \
                 could not run: ModuleNotFoundError: No module named 'mcp'"
            ),
            "{markdown}"
        );
    }

    #[test]
    fn the_sdks_are_installed_from_the_drivers_manifests() {
        let root = root();
        let pip = pip_install(Path::new("/venv"), &root);
        let argv: Vec<String> = pip
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "install",
                "--quiet",
                "-r",
                &manifest(PYTHON_REQUIREMENTS).display().to_string()
            ]
        );
        let npm = npm_ci(Path::new("/node"));
        assert_eq!(npm.get_args().next().unwrap(), "ci");
    }

    /// The manifests pin exactly one version of each SDK, and the lock file
    /// agrees with its package.json and names no host: `npm ci` fetches
    /// from the registry npm is configured with, and the integrity hashes
    /// pin what it may accept.
    #[test]
    fn the_drivers_manifests_pin_the_sdks_exactly() {
        let requirements = std::fs::read_to_string(manifest(PYTHON_REQUIREMENTS))
            .expect("drivers/python/requirements.txt exists");
        let pins: Vec<&str> = requirements
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .collect();
        assert_eq!(pins.len(), 1, "{requirements}");
        let version = pins[0].strip_prefix("mcp==").expect("mcp pinned with ==");
        assert!(
            version.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "{version}"
        );

        let read = |file: &str| -> Value {
            let path = manifest(&format!("{TYPESCRIPT_DIR}/{file}"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            serde_json::from_str(&text).unwrap()
        };
        let package = read("package.json");
        let lock = read("package-lock.json");
        let pin = package["dependencies"][TYPESCRIPT_SDK]
            .as_str()
            .expect("the SDK is a dependency");
        assert!(
            pin.chars().all(|c| c.is_ascii_digit() || c == '.'),
            "`{pin}` is not an exact version"
        );
        assert_eq!(
            lock["packages"][""]["dependencies"], package["dependencies"],
            "package-lock.json is stale: run `npm install --package-lock-only` in {TYPESCRIPT_DIR}"
        );
        assert_eq!(
            lock["packages"][format!("node_modules/{TYPESCRIPT_SDK}")]["version"],
            json!(pin)
        );
        for (path, entry) in lock["packages"].as_object().unwrap() {
            if path.is_empty() {
                continue;
            }
            assert!(
                entry["integrity"]
                    .as_str()
                    .is_some_and(|i| i.starts_with("sha512-")),
                "{path} has no sha512 integrity"
            );
            assert!(
                entry.get("resolved").is_none(),
                "{path} records a tarball URL: regenerate the lock with \
                 `npm install --package-lock-only --omit-lockfile-registry-resolved`"
            );
        }
    }
}
