//! The composite GitHub Action at the repository root (`action.yml`), run
//! locally: each `run:` step goes through bash with its inputs substituted,
//! `GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY` and `GITHUB_PATH` as files. The
//! install step downloads the release archive from a real HTTP server on
//! loopback (`python3 -m http.server`) standing in for the release's
//! address: an archive of the `mcp-conformance` built here in the layout
//! `cargo xtask dist` makes, with its sha256. The server it grades is that
//! executable's own fixture. Also checks that the pinned version is the
//! crate's and that the README's CI snippet uses the workspace's one
//! `repository`.

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
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

/// The crate's version, which the action pins.
fn crate_version() -> String {
    env!("CARGO_PKG_VERSION").to_owned()
}

/// What the release holds for the runner (Linux X64 here).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    /// The archive and its sha256, as `cargo xtask dist` makes them.
    Published,
    /// The archive with a sha256 that is not its own.
    BadChecksum,
    /// No archive for this runner (HTTP 404).
    Missing,
}

const TARGET: &str = "x86_64-unknown-linux-gnu";

/// A release directory served over HTTP on loopback, killed when dropped.
struct ReleaseServer {
    child: Child,
    url: String,
}

impl Drop for ReleaseServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Lays out `root/v{version}/mcp-conformance-{version}-{target}.tar.gz` (a
/// directory of that name holding the executable) and its `.sha256`, and
/// serves `root` with `python3 -m http.server` on a free loopback port.
fn release_server(root: &Path, release: Release) -> ReleaseServer {
    let version = crate_version();
    let dir = root.join(format!("v{version}"));
    std::fs::create_dir_all(&dir).unwrap();
    if release != Release::Missing {
        let name = format!("mcp-conformance-{version}-{TARGET}");
        let staging = root.join("staging");
        std::fs::create_dir_all(staging.join(&name)).unwrap();
        std::fs::copy(
            env!("CARGO_BIN_EXE_mcp-conformance"),
            staging.join(&name).join("mcp-conformance"),
        )
        .unwrap();
        let archive = dir.join(format!("{name}.tar.gz"));
        // Fast compression: the debug executable is large.
        let status = Command::new("tar")
            .args(["-I", "gzip -1", "-cf"])
            .arg(&archive)
            .arg("-C")
            .arg(&staging)
            .arg(&name)
            .status()
            .unwrap();
        assert!(status.success(), "tar failed");
        let output = Command::new("sha256sum")
            .arg(format!("{name}.tar.gz"))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(output.status.success(), "sha256sum failed");
        let mut line = String::from_utf8(output.stdout).unwrap();
        if release == Release::BadChecksum {
            // Another file's digest under the archive's name.
            let other = "0".repeat(64);
            line = format!("{other}{}", &line[64..]);
        }
        std::fs::write(dir.join(format!("{name}.tar.gz.sha256")), line).unwrap();
    }
    let child = Command::new("python3")
        .args([
            "-u",
            "-m",
            "http.server",
            "0",
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs (the release stand-in is python3 -m http.server)");
    // Owned by the guard before anything can fail.
    let mut server = ReleaseServer {
        child,
        url: String::new(),
    };
    // "Serving HTTP on 127.0.0.1 port N (http://127.0.0.1:N/) ...": once it
    // is printed, the socket listens.
    let mut first = String::new();
    BufReader::new(server.child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port = first
        .split(" port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("http.server said {first:?}"));
    server.url = format!("http://127.0.0.1:{port}");
    server
}

/// What one run of the action left behind.
struct Ran {
    /// Exit code of each step that ran, by name.
    codes: Vec<(String, i32)>,
    summary: String,
    junit: Option<String>,
    log: String,
    /// The arguments of each `cargo` the steps ran, a line each.
    cargo_calls: String,
}

/// Runs the action's steps with `inputs` (defaults filled in) in a fresh
/// workspace directory, as GitHub would: every step runs, the last one
/// turns the check's exit code into the job's.
fn run_action(inputs: &[(&str, &str)]) -> Ran {
    run_action_with(inputs, Release::Published)
}

fn run_action_with(inputs: &[(&str, &str)], release: Release) -> Ran {
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
    let server = release_server(&dir.path().join("releases"), release);
    // Where the fallback's `cargo` is: a stand-in that records its
    // arguments and installs the executable built here, since a real
    // `cargo install` of this crate takes many minutes.
    let bin = dir.path().join("tool bin");
    std::fs::create_dir(&bin).unwrap();
    let cargo_home = dir.path().join("cargo home");
    std::fs::create_dir_all(cargo_home.join("bin")).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >>'{}'\ncp '{}' '{}'\n",
            dir.path().join("cargo-calls").display(),
            env!("CARGO_BIN_EXE_mcp-conformance"),
            cargo_home.join("bin/mcp-conformance").display(),
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cargo, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let runner_temp = dir.path().join("runner temp");
    std::fs::create_dir(&runner_temp).unwrap();
    let summary = dir.path().join("summary.md");
    let github_path = dir.path().join("github-path");
    std::fs::write(&github_path, "").unwrap();
    // As on a GitHub runner, where ~/.cargo/bin is on PATH.
    let base_path = format!(
        "{}:{}:/usr/bin:/bin",
        bin.display(),
        cargo_home.join("bin").display()
    );

    let mut outputs: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut ran = Ran {
        codes: Vec::new(),
        summary: String::new(),
        junit: None,
        log: String::new(),
        cargo_calls: String::new(),
    };
    for (index, step) in action.runs.steps.iter().enumerate() {
        let substitute = |text: &str| substitute(text, &values, &outputs);
        if let Some(uses) = &step.uses {
            assert!(uses.starts_with("actions/upload-artifact@"), "{uses}");
            assert_eq!(substitute(&step.with["path"]), values["junit"]);
            continue;
        }
        assert_eq!(step.shell.as_deref(), Some("bash"), "{}", step.name);
        let script = substitute(step.run.as_deref().expect("a run step"));
        let output_file = dir.path().join(format!("output-{index}"));
        std::fs::write(&output_file, "").unwrap();
        // What earlier steps appended to GITHUB_PATH comes first, as on GitHub.
        let added: Vec<String> = std::fs::read_to_string(&github_path)
            .unwrap()
            .lines()
            .rev()
            .map(str::to_owned)
            .collect();
        let path = added
            .into_iter()
            .chain([base_path.clone()])
            .collect::<Vec<_>>()
            .join(":");
        let mut command = Command::new("bash");
        // GitHub's own invocation of a `shell: bash` step.
        command
            .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", &script])
            .current_dir(&work)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path())
            .env("GITHUB_OUTPUT", &output_file)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_PATH", &github_path)
            .env("GITHUB_ACTION_PATH", workspace())
            .env("RUNNER_OS", "Linux")
            .env("RUNNER_ARCH", "X64")
            .env("RUNNER_TEMP", &runner_temp);
        for (name, value) in &step.env {
            command.env(name, substitute(value));
        }
        if step.env.contains_key("MCP_CONFORMANCE_RELEASES") {
            // The release's address, pointed at the stand-in.
            assert_eq!(step.env["MCP_CONFORMANCE_RELEASES"], releases_url());
            command.env("MCP_CONFORMANCE_RELEASES", &server.url);
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
    ran.cargo_calls = std::fs::read_to_string(dir.path().join("cargo-calls")).unwrap_or_default();
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

/// Where the releases of the workspace's repository are downloaded from.
fn releases_url() -> String {
    format!("{}/releases/download", repository())
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

/// The install step pins the crate's own version, and downloads from the
/// workspace's repository.
#[test]
fn the_action_pins_the_crates_version() {
    let action = action();
    let install = action
        .runs
        .steps
        .iter()
        .find(|step| step.id.as_deref() == Some("install"))
        .expect("an install step");
    assert_eq!(install.env["MCP_CONFORMANCE_VERSION"], crate_version());
    assert_eq!(install.env["MCP_CONFORMANCE_RELEASES"], releases_url());
}

/// The prebuilt binary is installed, its checksum checked, and put on
/// `PATH` through `GITHUB_PATH`; cargo is never run.
#[test]
fn the_release_binary_is_downloaded_checked_and_used() {
    let ran = run_action(&[("command", &fixture("well-behaved"))]);
    let log = &ran.log;
    assert!(ran.codes.iter().all(|(_, code)| *code == 0), "{log}");
    assert!(
        log.contains(&format!(
            "mcp-conformance-{}-{TARGET}.tar.gz: OK",
            crate_version()
        )),
        "{log}"
    );
    assert!(
        log.contains("installed the prebuilt mcp-conformance"),
        "{log}"
    );
    assert_eq!(ran.cargo_calls, "", "{log}");
    assert!(
        ran.summary.contains("Verdict: **pass**."),
        "{}",
        ran.summary
    );
}

/// An archive that does not match its published sha256 is not installed,
/// and the job fails at the install step.
#[test]
fn an_archive_that_fails_its_checksum_fails_the_install() {
    let ran = run_action_with(
        &[("command", &fixture("well-behaved"))],
        Release::BadChecksum,
    );
    let log = &ran.log;
    let (first, code) = &ran.codes[0];
    assert_eq!(
        (first.as_str(), *code),
        ("Install mcp-conformance", 1),
        "{log}"
    );
    assert!(log.contains("does not match its published sha256"), "{log}");
    assert_eq!(ran.cargo_calls, "", "{log}");
}

/// With no binary in the release for the runner (404), the tool is built
/// from the action's own source, the tool alone.
#[test]
fn without_a_release_binary_the_action_builds_from_its_source() {
    let ran = run_action_with(&[("command", &fixture("well-behaved"))], Release::Missing);
    let log = &ran.log;
    assert!(ran.codes.iter().all(|(_, code)| *code == 0), "{log}");
    assert!(
        log.contains("building it from the action's source"),
        "{log}"
    );
    assert_eq!(
        ran.cargo_calls,
        format!(
            "install --locked --path {}/conformance --bin mcp-conformance\n",
            workspace().display()
        ),
        "{log}"
    );
    assert!(
        ran.summary.contains("Verdict: **pass**."),
        "{}",
        ran.summary
    );
}
