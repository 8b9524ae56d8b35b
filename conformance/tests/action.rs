//! The composite GitHub Action at the repository root (`action.yml`), run
//! locally: each `run:` step goes through bash with its inputs substituted,
//! `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY` as files, and the install step
//! replaced by the `mcp-conformance` built here on `PATH`. The server it
//! grades is that executable's own fixture. Also checks that the install
//! step and the README's CI snippet use the workspace's one `repository`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use serde::Deserialize;

#[derive(Deserialize)]
struct Action {
    inputs: BTreeMap<String, Input>,
    runs: Runs,
}

#[derive(Deserialize)]
struct Input {
    #[serde(default)]
    default: Option<String>,
}

#[derive(Deserialize)]
struct Runs {
    using: String,
    steps: Vec<Step>,
}

#[derive(Deserialize)]
struct Step {
    name: String,
    id: Option<String>,
    shell: Option<String>,
    run: Option<String>,
    uses: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    with: BTreeMap<String, String>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn action() -> Action {
    let text = std::fs::read_to_string(workspace().join("action.yml")).unwrap();
    yaml_serde::from_str(&text).expect("action.yml parses")
}

/// The workspace's `repository` (the one place it is written).
fn repository() -> String {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    manifest
        .lines()
        .find_map(|line| line.strip_prefix("repository = "))
        .expect("the workspace has a repository")
        .trim_matches('"')
        .to_owned()
}

/// What one run of the action left behind.
struct Ran {
    /// Exit code of each step that ran, by name.
    codes: Vec<(String, i32)>,
    summary: String,
    junit: Option<String>,
    log: String,
}

/// Runs the action's steps with `inputs` (defaults filled in) in a fresh
/// workspace directory, as GitHub would: every step runs, the last one
/// turns the check's exit code into the job's.
fn run_action(inputs: &[(&str, &str)]) -> Ran {
    let action = action();
    assert_eq!(action.runs.using, "composite");
    let mut values: BTreeMap<String, String> = action
        .inputs
        .iter()
        .map(|(name, input)| (name.clone(), input.default.clone().unwrap_or_default()))
        .collect();
    for (name, value) in inputs {
        assert!(values.contains_key(*name), "action.yml has no input {name}");
        values.insert((*name).to_owned(), (*value).to_owned());
    }

    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("tool bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::copy(
        env!("CARGO_BIN_EXE_mcp-conformance"),
        bin.join("mcp-conformance"),
    )
    .unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let summary = dir.path().join("summary.md");
    let path = format!("{}:/usr/bin:/bin", bin.display());

    let mut outputs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut ran = Ran {
        codes: Vec::new(),
        summary: String::new(),
        junit: None,
        log: String::new(),
    };
    for (index, step) in action.runs.steps.iter().enumerate() {
        let substitute = |text: &str| substitute(text, &values, &outputs);
        if step.id.as_deref() == Some("install") {
            let run = step
                .run
                .as_deref()
                .expect("the install step runs a command");
            let expected = format!(
                "cargo install --locked --git {} mcp-conformance",
                repository()
            );
            assert!(run.contains(&expected), "{run}");
            continue;
        }
        if let Some(uses) = &step.uses {
            assert!(uses.starts_with("actions/upload-artifact@"), "{uses}");
            assert_eq!(substitute(&step.with["path"]), values["junit"]);
            continue;
        }
        assert_eq!(step.shell.as_deref(), Some("bash"), "{}", step.name);
        let script = substitute(step.run.as_deref().expect("a run step"));
        let output_file = dir.path().join(format!("output-{index}"));
        std::fs::write(&output_file, "").unwrap();
        let mut command = Command::new("bash");
        // GitHub's own invocation of a `shell: bash` step.
        command
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(&work)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path())
            .env("GITHUB_OUTPUT", &output_file)
            .env("GITHUB_STEP_SUMMARY", &summary);
        for (name, value) in &step.env {
            command.env(name, substitute(value));
        }
        let output = command.output().unwrap();
        ran.log.push_str(&format!(
            "--- {} ({:?})\n{}{}",
            step.name,
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
        ran.codes
            .push((step.name.clone(), output.status.code().unwrap_or(-1)));
        if let Some(id) = &step.id {
            let written = std::fs::read_to_string(&output_file).unwrap();
            let parsed = written
                .lines()
                .filter_map(|line| line.split_once('='))
                .map(|(key, value)| (key.to_owned(), value.to_owned()))
                .collect();
            outputs.insert(id.clone(), parsed);
        }
    }
    ran.summary = std::fs::read_to_string(&summary).unwrap_or_default();
    ran.junit = std::fs::read_to_string(work.join(&values["junit"])).ok();
    ran
}

/// `${{ inputs.NAME }}` and `${{ steps.ID.outputs.NAME }}`; any other
/// expression fails the test, so the action stays runnable here.
fn substitute(
    text: &str,
    inputs: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        let expression = rest[start + 3..end].trim();
        let value = if let Some(name) = expression.strip_prefix("inputs.") {
            inputs[name].clone()
        } else if let Some(path) = expression.strip_prefix("steps.") {
            let (id, name) = path.split_once(".outputs.").expect("steps.ID.outputs.NAME");
            outputs
                .get(id)
                .and_then(|values| values.get(name))
                .cloned()
                .unwrap_or_default()
        } else {
            panic!("action.yml uses `{expression}`, which this test cannot evaluate");
        };
        out.push_str(&value);
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The fixture as a command line, through the executable on `PATH`, the
/// way a workflow names its server.
fn fixture(name: &str) -> String {
    format!("mcp-conformance fixture {name}")
}

#[test]
fn a_well_behaved_server_passes_with_a_report_and_a_summary() {
    let ran = run_action(&[
        ("command", &fixture("well-behaved")),
        ("junit", "reports/server.xml"),
    ]);
    // The report's directory is made for it.
    assert!(ran.junit.is_some(), "{}", ran.log);

    let ran = run_action(&[("command", &fixture("well-behaved")), ("repeat", "2")]);
    let log = &ran.log;
    assert!(ran.codes.iter().all(|(_, code)| *code == 0), "{log}");
    assert!(
        ran.summary.contains("Verdict: **pass**."),
        "{}",
        ran.summary
    );
    assert!(ran.summary.contains("verdict: pass"), "{}", ran.summary);
    assert!(
        ran.summary
            .contains("Server: `mcp-conformance fixture well-behaved`"),
        "{}",
        ran.summary
    );
    let junit = ran.junit.expect("the JUnit report is written");
    assert!(
        junit.contains(r#"<testcase classname="mcp-conformance.server" name="eof.exit">"#),
        "{junit}"
    );
}

#[test]
fn a_failing_server_fails_the_job_after_the_summary_and_report() {
    let ran = run_action(&[
        ("command", &fixture("eof-ignoring")),
        ("args", "--check 'eof.exit' --eof-grace 500ms"),
    ]);
    let log = &ran.log;
    let (last, code) = ran.codes.last().unwrap();
    assert_eq!(
        (last.as_str(), *code),
        ("Fail when the check failed", 1),
        "{log}"
    );
    assert!(ran.summary.contains("Verdict: **fail**"), "{}", ran.summary);
    assert!(ran.summary.contains("eof.exit"), "{}", ran.summary);
    let junit = ran.junit.expect("the JUnit report is written");
    assert!(junit.contains("<failure"), "{junit}");
}

/// A command quoted as in a shell keeps its quoted words whole.
#[test]
fn the_command_is_split_as_a_shell_splits_it() {
    let ran = run_action(&[(
        "command",
        "mcp-conformance fixture well-behaved --marker='two words'",
    )]);
    assert_eq!(ran.codes.last().unwrap().1, 0, "{}", ran.log);
}

/// The README's CI snippet names this action and the install step by the
/// workspace's repository, and has no placeholder left.
#[test]
fn the_readme_snippet_uses_the_workspace_repository() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let repository = repository();
    let slug = repository
        .strip_prefix("https://github.com/")
        .expect("a GitHub repository");
    assert!(
        readme.contains(&format!("uses: {slug}@")),
        "README.md has no `uses: {slug}@...` step"
    );
    assert!(
        readme.contains(&format!(
            "cargo install --locked --git {repository} mcp-conformance"
        )),
        "README.md does not install from {repository}"
    );
    for placeholder in ["OWNER", "TODO", "XXX"] {
        assert!(
            !readme.contains(placeholder),
            "README.md still says {placeholder}"
        );
    }
}
