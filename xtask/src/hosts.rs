//! `cargo xtask hosts [--offline] [HOST...]`: installs the pinned real hosts
//! (`xtask/hosts/package.json`) from the npm registry into `target/hosts/`,
//! grades each with `mcp-conformance host` by its recipe, and writes
//! `target/hosts/hosts.json` and the verdict table of `docs/hosts.md`
//! (between its `hosts:begin`/`hosts:end` markers). `--offline` uses what is
//! installed. The way `cargo xtask peers` produces `docs/peers.md`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::{cargo, root, run_checked};

/// The pinned hosts' manifest, copied into `target/hosts/`.
const MANIFEST: &str = "xtask/hosts/package.json";
const BEGIN: &str = "<!-- hosts:begin (cargo xtask hosts writes this table) -->";
const END: &str = "<!-- hosts:end -->";

/// How one host is graded: its package, the executable it installs, and the
/// `mcp-conformance host` options and command (docs/hosts.md explains each).
pub struct Recipe {
    pub name: &'static str,
    pub package: &'static str,
    pub bin: &'static str,
    pub format: &'static str,
    pub model_api: &'static str,
    /// Environment the host needs besides the endpoint's (`env` prefix).
    pub env: &'static [&'static str],
    pub args: &'static [&'static str],
}

pub const RECIPES: &[Recipe] = &[
    Recipe {
        name: "Claude Code",
        package: "@anthropic-ai/claude-code",
        bin: "claude",
        format: "mcp-json",
        model_api: "anthropic",
        // Root may skip permissions only in a sandbox; no telemetry or
        // update traffic (this machine reaches only the registries).
        env: &["IS_SANDBOX=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"],
        args: &[
            "-p",
            "use every tool",
            "--mcp-config",
            "{config}",
            "--strict-mcp-config",
            "--dangerously-skip-permissions",
        ],
    },
    Recipe {
        name: "Gemini CLI",
        package: "@google/gemini-cli",
        bin: "gemini",
        format: "gemini-settings",
        model_api: "gemini",
        env: &[],
        args: &["-p", "use every tool", "--yolo"],
    },
    Recipe {
        name: "Qwen Code",
        package: "@qwen-code/qwen-code",
        bin: "qwen",
        format: "qwen-settings",
        model_api: "openai",
        env: &["OPENAI_MODEL=mcp-conformance-stand-in"],
        args: &["-p", "use every tool", "--yolo", "--auth-type", "openai"],
    },
    Recipe {
        name: "Codex",
        package: "@openai/codex",
        bin: "codex",
        format: "codex-toml",
        model_api: "openai-responses",
        env: &[],
        args: &[
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "use every tool",
        ],
    },
    Recipe {
        name: "opencode",
        package: "opencode-ai",
        bin: "opencode",
        format: "opencode-json",
        model_api: "openai",
        // models.dev is out of reach here; the config names the model.
        env: &[
            "OPENCODE_DISABLE_MODELS_FETCH=1",
            "OPENCODE_DISABLE_AUTOUPDATE=1",
        ],
        args: &[
            "run",
            "-m",
            "mcp-conformance/mcp-conformance-stand-in",
            "use every tool",
        ],
    },
];

pub fn run(args: Vec<String>) -> Result<()> {
    let mut offline = false;
    let mut render_only = false;
    let mut only: Vec<String> = Vec::new();
    for arg in args {
        match arg.as_str() {
            "--offline" => offline = true,
            "--render-only" => render_only = true,
            "--help" | "-h" => {
                println!(
                    "usage: cargo xtask hosts [--offline | --render-only] [BIN...]\n\n\
                     install the hosts pinned in {MANIFEST} into target/hosts (not with\n\
                     --offline), grade each (or each BIN named: claude, gemini, qwen, codex,\n                     opencode)\n\
                     with `mcp-conformance host`, write target/hosts/hosts.json and the\n\
                     table of docs/hosts.md (--render-only: the table from hosts.json)"
                );
                return Ok(());
            }
            flag if flag.starts_with('-') => {
                return Err(crate::outcome::usage(anyhow::anyhow!(
                    "unknown option `{flag}` (try --help)"
                )));
            }
            bin => {
                if !RECIPES.iter().any(|r| r.bin == bin) {
                    return Err(crate::outcome::usage(anyhow::anyhow!(
                        "no host `{bin}`; the hosts are: {}",
                        RECIPES.iter().map(|r| r.bin).collect::<Vec<_>>().join(", ")
                    )));
                }
                only.push(bin.to_owned());
            }
        }
    }
    let root = root();
    let hosts = root.join("target/hosts");
    if render_only {
        let path = hosts.join("hosts.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {} (run `cargo xtask hosts`)", path.display()))?;
        return write_table(&root, &serde_json::from_str(&text)?);
    }
    std::fs::create_dir_all(&hosts).context("cannot create target/hosts")?;
    if !offline {
        std::fs::copy(root.join(MANIFEST), hosts.join("package.json"))
            .with_context(|| format!("cannot copy {MANIFEST}"))?;
        let mut npm = Command::new("npm");
        npm.current_dir(&hosts)
            .args(["install", "--no-audit", "--no-fund", "--silent"]);
        run_checked(npm, "npm install (the pinned hosts)")?;
    }
    let mut build = cargo();
    build.args(["build", "-p", "mcp-conformance", "--bin", "mcp-conformance"]);
    run_checked(build, "cargo build -p mcp-conformance")?;
    let cli = root.join("target/debug/mcp-conformance");

    let mut records = Vec::new();
    for recipe in RECIPES {
        if !only.is_empty() && !only.iter().any(|b| b == recipe.bin) {
            continue;
        }
        let bin = hosts.join("node_modules/.bin").join(recipe.bin);
        let version = installed_version(&hosts, recipe.package);
        if !bin.exists() {
            eprintln!("{}: not installed ({})", recipe.name, bin.display());
            records.push(json!({ "name": recipe.name, "package": recipe.package,
                "error": format!("not installed under {}", hosts.display()) }));
            continue;
        }
        eprintln!(
            "grading {} {} ...",
            recipe.name,
            version.as_deref().unwrap_or("?")
        );
        let started = Instant::now();
        let graded = grade(&cli, &bin, recipe, &hosts.join(recipe.bin))?;
        eprintln!(
            "{}: done in {} s (exit {})",
            recipe.name,
            started.elapsed().as_secs(),
            graded["exit"]
        );
        records.push(json!({
            "name": recipe.name, "package": recipe.package, "version": version, "graded": graded,
        }));
    }
    let data = json!({ "schema": 1, "hosts": records });
    std::fs::write(
        hosts.join("hosts.json"),
        serde_json::to_string_pretty(&data)?,
    )?;
    write_table(&root, &data)
}

/// Writes the table of `data` into docs/hosts.md.
fn write_table(root: &Path, data: &Value) -> Result<()> {
    let docs = root.join("docs/hosts.md");
    let text = std::fs::read_to_string(&docs).context("cannot read docs/hosts.md")?;
    let updated = splice(&text, &render(data)).context("docs/hosts.md has no table markers")?;
    std::fs::write(&docs, updated)?;
    eprintln!("wrote target/hosts/hosts.json and docs/hosts.md");
    Ok(())
}

/// One `mcp-conformance host --json` run of `recipe`.
fn grade(cli: &Path, bin: &Path, recipe: &Recipe, dir: &Path) -> Result<Value> {
    let _ = std::fs::remove_dir_all(dir);
    let mut command = Command::new(cli);
    command
        .args([
            "host",
            "--json",
            "--host-timeout",
            "90s",
            "--format",
            recipe.format,
        ])
        .args(["--model-api", recipe.model_api, "--dir"])
        .arg(dir)
        .arg("--");
    if !recipe.env.is_empty() {
        command.arg("env").args(recipe.env);
    }
    command.arg(bin).args(recipe.args);
    let output = command
        .output()
        .with_context(|| format!("cannot run mcp-conformance host for {}", recipe.name))?;
    let exit = output.status.code();
    Ok(match serde_json::from_slice::<Value>(&output.stdout) {
        Ok(report) => json!({ "exit": exit, "report": report }),
        Err(_) => json!({ "exit": exit, "error": String::from_utf8_lossy(&output.stderr).trim() }),
    })
}

fn installed_version(hosts: &Path, package: &str) -> Option<String> {
    let path: PathBuf = hosts
        .join("node_modules")
        .join(package)
        .join("package.json");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// `text` with the table between the markers replaced by `table`.
fn splice(text: &str, table: &str) -> Option<String> {
    let begin = text.find(BEGIN)? + BEGIN.len();
    let end = text.find(END)?;
    (begin <= end).then(|| format!("{}\n{table}{}", &text[..begin], &text[end..]))
}

/// A table cell: the verdict, and for `close.escaped` (information) what
/// became of the setsid sidecar.
fn cell(check: &Value) -> String {
    let verdict = check["verdict"].as_str().unwrap_or("?");
    let summary = check["summary"].as_str().unwrap_or("");
    if check["id"] == "close.escaped" {
        if summary.contains("swept") {
            return format!("{verdict} (swept)");
        }
        if summary.contains("outlived") {
            return format!("{verdict} (left)");
        }
    }
    verdict.to_owned()
}

/// The verdict table: one column per host, one row per check id.
fn render(data: &Value) -> String {
    let hosts: Vec<&Value> = data["hosts"].as_array().into_iter().flatten().collect();
    let mut ids: Vec<String> = Vec::new();
    for host in &hosts {
        for check in host["graded"]["report"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(id) = check["id"].as_str()
                && !ids.iter().any(|i| i == id)
            {
                ids.push(id.to_owned());
            }
        }
    }
    let mut out = String::from("\n| check |");
    for host in &hosts {
        out += &format!(
            " {} {} |",
            host["name"].as_str().unwrap_or("?"),
            host["version"].as_str().unwrap_or("")
        );
    }
    out += "\n|---|";
    out += &"---|".repeat(hosts.len());
    out += "\n";
    for id in &ids {
        out += &format!("| `{id}` |");
        for host in &hosts {
            let verdict = host["graded"]["report"]["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["id"] == id.as_str())
                .map(cell)
                .unwrap_or_else(|| "—".to_owned());
            out += &format!(" {verdict} |");
        }
        out += "\n";
    }
    out += "| host time |";
    for host in &hosts {
        let ms = host["graded"]["report"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["id"] == "host.exit")
            // Report v2 figures are `{name: {unit, value}}`; the host's
            // `host_ms` is written as `host` in milliseconds.
            .and_then(|c| c["figures"]["host"]["value"].as_u64());
        match ms {
            Some(ms) => out += &format!(" {:.0} s |", ms as f64 / 1000.0),
            None => out += " deadline |",
        }
    }
    out += "\n| exit code |";
    for host in &hosts {
        match (&host["graded"]["exit"], &host["error"]) {
            (Value::Number(code), _) => out += &format!(" {code} |"),
            (_, Value::String(error)) => out += &format!(" not run: {error} |"),
            _ => out += " not run |",
        }
    }
    out += "\n\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_goes_between_the_markers() {
        let text = format!("# Hosts\n\n{BEGIN}\nold\n{END}\nafter\n");
        let data = json!({ "hosts": [{ "name": "H", "version": "1.0",
        "graded": { "exit": 1, "report": { "checks": [
            // A report v2 figure, as `client --host` writes it
            // (report/schema/report-v2.schema.json).
            { "id": "host.exit", "verdict": "pass",
              "figures": { "host": { "unit": "ms", "value": 3300 } } },
            { "id": "close.group", "verdict": "fail" },
        ]}}}]});
        let spliced = splice(&text, &render(&data)).unwrap();
        assert!(spliced.contains("| `close.group` | fail |"), "{spliced}");
        assert!(spliced.contains("| host time | 3 s |"), "{spliced}");
        assert!(spliced.contains("| exit code | 1 |"), "{spliced}");
        assert!(!spliced.contains("old"), "{spliced}");
        assert!(spliced.ends_with(&format!("{END}\nafter\n")), "{spliced}");
    }

    #[test]
    fn every_recipe_is_pinned_exactly() {
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(root().join(MANIFEST)).unwrap()).unwrap();
        for recipe in RECIPES {
            let pinned = manifest["dependencies"][recipe.package]
                .as_str()
                .unwrap_or_else(|| panic!("{} is not in {MANIFEST}", recipe.package));
            assert!(
                pinned.chars().all(|c| c.is_ascii_digit() || c == '.'),
                "{}: `{pinned}` is not an exact version",
                recipe.package
            );
        }
    }
}
