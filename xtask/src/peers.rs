//! `cargo xtask peers`: the SDKs side by side. Installs pinned versions of
//! the Python and TypeScript MCP SDKs under `target/peers/` from their
//! registries, builds the Rust drivers, grades every client with
//! `mcp-conformance client`, and writes `target/peers/peers.json` and
//! `docs/peers.md`. It needs the package registries, so it is not part of
//! the default test command.

use std::{fmt::Write as _, path::Path, process::Command};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::{cargo, root, run_checked};

/// The Python SDK version graded.
const PYTHON_SDK: &str = "mcp==2.3.0";
/// The TypeScript SDK version graded.
const TYPESCRIPT_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";

pub fn run(args: Vec<String>) -> Result<()> {
    if let Some(arg) = args.first() {
        bail!("`cargo xtask peers` takes no arguments (got `{arg}`)");
    }
    let root = root();
    let peers = root.join("target/peers");
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
    let mut pip = Command::new(venv.join("bin/pip"));
    pip.args(["install", "--quiet", PYTHON_SDK]);
    run_checked(pip, &format!("pip install {PYTHON_SDK}"))?;

    let node = peers.join("typescript");
    std::fs::create_dir_all(&node)?;
    if !node.join("package.json").exists() {
        std::fs::write(
            node.join("package.json"),
            "{\"private\": true, \"type\": \"module\"}\n",
        )?;
    }
    let mut npm = Command::new("npm");
    npm.current_dir(&node).args([
        "install",
        "--silent",
        "--no-audit",
        "--no-fund",
        TYPESCRIPT_SDK,
    ]);
    run_checked(npm, &format!("npm install {TYPESCRIPT_SDK}"))?;
    std::fs::copy(
        root.join("drivers/typescript/driver.mjs"),
        node.join("driver.mjs"),
    )?;

    let clients: Vec<(&str, String, Vec<String>)> = vec![
        (
            "mcp-stdio-client (this project)",
            env_version(&root),
            vec![bin.join("mcp-driver-stdio-client").display().to_string()],
        ),
        (
            "rmcp TokioChildProcess",
            lock_version(&root, "rmcp"),
            vec![bin.join("mcp-driver-rmcp").display().to_string()],
        ),
        (
            "Python SDK (mcp)",
            PYTHON_SDK.trim_start_matches("mcp==").to_owned(),
            vec![
                venv.join("bin/python").display().to_string(),
                root.join("drivers/python/mcp_driver.py")
                    .display()
                    .to_string(),
            ],
        ),
        (
            "TypeScript SDK (@modelcontextprotocol/sdk)",
            TYPESCRIPT_SDK.rsplit('@').next().unwrap_or("").to_owned(),
            vec!["node".into(), node.join("driver.mjs").display().to_string()],
        ),
        (
            "mcp-driver-naive (reference, correct mode)",
            env_version(&root),
            vec![bin.join("mcp-driver-naive").display().to_string()],
        ),
    ];
    let mut results = Vec::new();
    for (name, version, driver) in clients {
        eprintln!("grading {name} {version} ...");
        let output = Command::new(bin.join("mcp-conformance"))
            .args(["client", "--json", "--"])
            .args(&driver)
            .output()
            .with_context(|| format!("cannot run mcp-conformance client for {name}"))?;
        let report: Value = serde_json::from_slice(&output.stdout).with_context(|| {
            format!(
                "no JSON report for {name}: {}",
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        results.push(json!({ "name": name, "version": version, "report": report }));
    }
    let json = serde_json::to_string_pretty(&json!({ "schema": 1, "clients": results }))?;
    std::fs::write(peers.join("peers.json"), &json)?;
    let markdown = render(&results);
    std::fs::write(root.join("docs/peers.md"), &markdown)?;
    print!("{markdown}");
    eprintln!("wrote target/peers/peers.json and docs/peers.md");
    Ok(())
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

/// The cell of one check: the verdict and its figures.
fn cell(check: &Value) -> String {
    let verdict = check["verdict"].as_str().unwrap_or("?");
    let label = match verdict {
        "pass" => "pass",
        "fail" => "**FAIL**",
        other => other,
    };
    let figures: Vec<String> = check["figures"]
        .as_object()
        .map(|figures| {
            figures
                .iter()
                .filter_map(|(k, v)| {
                    Some(format!(
                        "{} {} ms",
                        k.trim_end_matches("_ms").replace('_', " "),
                        v.as_u64()?
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if figures.is_empty() {
        label.to_owned()
    } else {
        format!("{label} ({})", figures.join(", "))
    }
}

fn render(results: &[Value]) -> String {
    let ids: Vec<String> = results
        .first()
        .and_then(|r| r["report"]["checks"].as_array())
        .map(|checks| {
            checks
                .iter()
                .filter_map(|c| c["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut out = String::new();
    let _ = writeln!(out, "# MCP stdio clients side by side\n");
    let _ = writeln!(
        out,
        "Written by `cargo xtask peers`: each client graded by `mcp-conformance client`\n\
         (`docs/client-check.md`) through its driver, against the same fixtures, with\n\
         the same graces asked (500 ms for EOF and for SIGTERM, where the client has such\n\
         settings). Cells: the verdict and the figures measured. rmcp and the SDKs take\n\
         no graces: rmcp closes with its fixed 3 s and 3 s, the SDKs with 2 s and 2 s.\n\
         `close` is how long the client's own close call took, the server's exit included;\n\
         this project's client also sweeps the server's process group (one process-table\n\
         scan) before it returns, which rmcp and the SDKs do not. A single run's few\n\
         milliseconds are within the noise of a shared machine.\n"
    );
    let _ = writeln!(
        out,
        "| check | {} |",
        results
            .iter()
            .map(|r| format!(
                "{} {}",
                r["name"].as_str().unwrap_or("?"),
                r["version"].as_str().unwrap_or("")
            ))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    let _ = writeln!(out, "|---|{}", "---|".repeat(results.len()));
    let _ = writeln!(
        out,
        "| era | {} |",
        results
            .iter()
            .map(|r| r["report"]["era"].as_str().unwrap_or("?").to_owned())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    for id in &ids {
        let cells: Vec<String> = results
            .iter()
            .map(|r| {
                r["report"]["checks"]
                    .as_array()
                    .and_then(|checks| checks.iter().find(|c| c["id"] == json!(id)))
                    .map(cell)
                    .unwrap_or_else(|| "—".into())
            })
            .collect();
        let _ = writeln!(out, "| `{id}` | {} |", cells.join(" | "));
    }
    let _ = writeln!(out, "\n## What each failing client would need to change\n");
    for result in results {
        let failing: Vec<&Value> = result["report"]["checks"]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .filter(|c| c["verdict"] == "fail" || c["verdict"] == "warn")
                    .collect()
            })
            .unwrap_or_default();
        if failing.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "**{} {}**\n",
            result["name"].as_str().unwrap_or("?"),
            result["version"].as_str().unwrap_or("")
        );
        for check in failing {
            let _ = writeln!(
                out,
                "- `{}`: {}. Fix: {}",
                check["id"].as_str().unwrap_or("?"),
                check["summary"].as_str().unwrap_or(""),
                check["fix"].as_str().unwrap_or("")
            );
        }
        let _ = writeln!(out);
    }
    out
}
