//! `cargo xtask dist`'s artifacts, installed as a user would install them and
//! run with no cargo in reach: the wheel in a fresh virtual environment, the
//! npm tarballs in an empty prefix (offline), the archive unpacked where
//! `[package.metadata.binstall]` says the binary is. Each grades the
//! built-in fixtures and a small server written with its language's
//! standard library (`tests/data/`) from an empty directory.
//!
//! These tests rebuild `target/debug/mcp-conformance` with the package's own
//! features (as `cargo install` and maturin build it), so they run after the
//! rest of the suite, not beside tests that execute that file: the nextest
//! default filter leaves them out and `cargo xtask test` runs them on their
//! own (`.config/nextest.toml`).

use std::{
    ffi::OsString,
    io::{BufRead, BufReader, Write},
    os::unix::process::{CommandExt, ExitStatusExt},
    path::{Path, PathBuf},
    process::{Command, ExitStatus, Output, Stdio},
    time::Duration,
};

use nix::{
    errno::Errno,
    sys::signal::{Signal, kill},
    unistd::Pid,
};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The directory holding `program` on this process's `PATH`; a missing
/// tool fails the test, saying what to install.
fn tool_dir(program: &str, install: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join(program).is_file())
        .unwrap_or_else(|| panic!("`{program}` is not on PATH: this test needs {install}"))
}

/// `cargo xtask dist --only KIND --out DIR`, the artifacts it printed.
fn dist(kind: &str, out: &Path) -> Vec<PathBuf> {
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["dist", "--only", kind, "--out"])
        .arg(out)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo xtask dist --only {kind} failed"
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(PathBuf::from)
        .collect()
}

/// A scratch tree: the artifacts, the install, an empty working directory
/// and a home of its own.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["dist", "home", "empty"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// `program` run from the empty directory with only `path` to find
    /// commands: no cargo, no checkout.
    fn command(&self, program: &Path, path: &[PathBuf]) -> Command {
        let mut command = Command::new(program);
        let mut dirs: Vec<PathBuf> = path.to_vec();
        dirs.extend(["/usr/bin".into(), "/bin".into()]);
        command
            .current_dir(self.path("empty"))
            .env_clear()
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("HOME", self.path("home"))
            .env("CARGO", "/nonexistent/cargo");
        command
    }
}

fn text(output: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The checks every installed form must pass: the built-in well-behaved
/// fixture passes (0), the EOF-ignoring one fails its check (1), a command
/// that is not there is a usage error (2), and `server` passes.
fn grades(scratch: &Scratch, exe: &Path, path: &[PathBuf], server: &[&str]) {
    let exe_text = exe.to_str().unwrap();
    let run = |args: &[&str]| {
        let output = scratch.command(exe, path).args(args).output().unwrap();
        (output.status.code(), text(&output))
    };

    let (code, report) = run(&["server", "--", exe_text, "fixture", "well-behaved"]);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("verdict: pass"), "{report}");

    let (code, report) = run(&[
        "server",
        "--check",
        "eof.exit",
        "--eof-grace",
        "500ms",
        "--",
        exe_text,
        "fixture",
        "eof-ignoring",
    ]);
    assert_eq!(code, Some(1), "{report}");
    assert!(report.contains("verdict: FAIL"), "{report}");

    let (code, report) = run(&["server", "--", "no-such-server-command"]);
    assert_eq!(code, Some(2), "{report}");

    let mut args = vec!["server", "--"];
    args.extend(server);
    let (code, report) = run(&args);
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("verdict: pass"), "{report}");
    assert!(report.contains("server: stdlib-"), "{report}");
}

#[test]
fn the_wheel_in_a_fresh_venv_grades_the_fixtures_and_a_python_server() {
    tool_dir("python3", "Python 3 with venv");
    let scratch = Scratch::new();
    let made = dist("wheel", &scratch.path("dist"));
    let [wheel] = made.as_slice() else {
        panic!("one wheel expected, dist made {made:?}");
    };
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("mcp_conformance-"), "{name}");
    assert!(name.ends_with(".whl"), "{name}");

    let venv = scratch.path("venv");
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(status.success(), "python3 -m venv failed");
    // From the file alone: no index, so nothing but the wheel is installed.
    let output = scratch
        .command(&venv.join("bin/pip"), &[])
        .args([
            "install",
            "--no-index",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg(wheel)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));

    let bin = venv.join("bin");
    let exe = bin.join("mcp-conformance");
    assert!(exe.is_file(), "the wheel installed no mcp-conformance");
    // Only the tool reaches the user's PATH: no test equipment.
    let installed: Vec<OsString> = std::fs::read_dir(&bin)
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name.to_string_lossy().starts_with("mcp-"))
        .collect();
    assert_eq!(installed, [OsString::from("mcp-conformance")]);

    // `python` is the venv's, as after `source venv/bin/activate`.
    let server = data("stdio_server.py");
    grades(
        &scratch,
        &exe,
        std::slice::from_ref(&bin),
        &["python", server.to_str().unwrap()],
    );

    // The commands a Python developer types, on the wheel file: pipx's
    // grades the whole lifecycle (the issue's own command), uvx's one check.
    let runners = python_runners();
    let wheel_arg = wheel.display().to_string();
    for (runner, args) in [
        (
            "uvx",
            vec![
                "--offline",
                "--from",
                &wheel_arg,
                "mcp-conformance",
                "server",
                "--check",
                "handshake.responds",
            ],
        ),
        (
            "pipx",
            vec!["run", "--spec", &wheel_arg, "mcp-conformance", "server"],
        ),
    ] {
        let output = scratch
            .command(&runners.join(runner), &[bin.clone(), runners.clone()])
            .env("UV_CACHE_DIR", scratch.path("uv-cache"))
            // pipx's shared pip, fetched once, is kept beside the runners.
            .env("PIPX_HOME", runners.parent().unwrap().join("pipx-home"))
            .args(&args)
            .args(["--", "python"])
            .arg(&server)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{runner}: {}", text(&output));
        assert!(
            String::from_utf8_lossy(&output.stdout).contains("verdict: pass"),
            "{runner}: {}",
            text(&output)
        );
    }
}

/// The pinned pipx and uv, pip-installed the first time into
/// `target/dist-tools/runners` (PyPI); their `bin` directory.
fn python_runners() -> PathBuf {
    let target = Path::new(env!("CARGO_BIN_EXE_xtask"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned();
    let venv = target.join("dist-tools").join("runners");
    let bin = venv.join("bin");
    if bin.join("uvx").exists() && bin.join("pipx").exists() {
        return bin;
    }
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(
        status.success(),
        "python3 -m venv {} failed",
        venv.display()
    );
    let status = Command::new(bin.join("pip"))
        .args(["install", "--quiet", "pipx==1.8.0", "uv==0.11.20"])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "pip install pipx uv failed (PyPI is needed once)"
    );
    bin
}

/// The npm packages, installed offline from their tarballs into an empty
/// prefix: the launcher and the platform package it finds the binary in.
struct NpmInstall {
    scratch: Scratch,
    node_dir: PathBuf,
    launcher: PathBuf,
    tarballs: Vec<PathBuf>,
}

impl NpmInstall {
    fn new() -> Self {
        let node_dir = tool_dir("node", "Node.js with npm");
        let scratch = Scratch::new();
        let tarballs = dist("npm", &scratch.path("dist"));
        let names: Vec<String> = tarballs
            .iter()
            .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[0].starts_with("mcp-stdio-conformance-0"), "{names:?}");
        assert!(
            names[1].starts_with("mcp-stdio-conformance-linux-x64-"),
            "{names:?}"
        );
        let prefix = scratch.path("prefix");
        let output = scratch
            .command(&node_dir.join("npm"), std::slice::from_ref(&node_dir))
            .args([
                "install",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--prefix",
            ])
            .arg(&prefix)
            .arg("--cache")
            .arg(scratch.path("npm-cache"))
            .args(&tarballs)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", text(&output));
        let launcher = prefix.join("node_modules/.bin/mcp-stdio-conformance");
        assert!(launcher.exists(), "npm installed no mcp-stdio-conformance");
        Self {
            scratch,
            node_dir,
            launcher,
            tarballs,
        }
    }
}

/// One install (packing and installing a debug binary takes a while) for
/// the checks of the npm packages.
#[test]
fn the_npm_packages_installed_offline_grade_a_node_server_and_pass_signals() {
    let npm = NpmInstall::new();
    the_npm_packages_grade_the_fixtures_and_a_node_server(&npm);
    npx_runs_the_tarballs_from_an_empty_directory(&npm);
    the_launcher_passes_signals_and_exit_statuses_through(&npm);
    without_the_platform_package_the_launcher_says_what_to_do(&npm);
}

/// Installed with `--omit=optional`, say: no binary, a message naming the
/// package and the way out, and 127 (not one of the tool's own codes).
fn without_the_platform_package_the_launcher_says_what_to_do(npm: &NpmInstall) {
    std::fs::remove_dir_all(
        npm.scratch
            .path("prefix/node_modules/@mcp-stdio-conformance/linux-x64"),
    )
    .unwrap();
    let output = npm
        .scratch
        .command(&npm.launcher, std::slice::from_ref(&npm.node_dir))
        .arg("--version")
        .output()
        .unwrap();
    let report = text(&output);
    assert_eq!(output.status.code(), Some(127), "{report}");
    assert!(
        report.contains("the package @mcp-stdio-conformance/linux-x64"),
        "{report}"
    );
    assert!(report.contains("MCP_CONFORMANCE_BINARY"), "{report}");
}

fn the_npm_packages_grade_the_fixtures_and_a_node_server(npm: &NpmInstall) {
    let server = data("stdio_server.js");
    grades(
        &npm.scratch,
        &npm.launcher,
        std::slice::from_ref(&npm.node_dir),
        &["node", server.to_str().unwrap()],
    );
    // The second name of the same launcher.
    let other = npm.launcher.with_file_name("mcp-conformance");
    let output = npm
        .scratch
        .command(&other, std::slice::from_ref(&npm.node_dir))
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).starts_with("mcp-conformance "),
        "{}",
        text(&output)
    );
}

/// `npx` with the two tarballs, as the release's `npx mcp-stdio-conformance`
/// but from the files: npx installs them in its own cache, offline.
fn npx_runs_the_tarballs_from_an_empty_directory(npm: &NpmInstall) {
    let server = data("stdio_server.js");
    let mut npx = npm.scratch.command(
        &npm.node_dir.join("npx"),
        std::slice::from_ref(&npm.node_dir),
    );
    npx.args(["--yes", "--offline", "--cache"])
        .arg(npm.scratch.path("npx-cache"));
    for tarball in &npm.tarballs {
        npx.arg(format!("--package={}", tarball.display()));
    }
    let output = npx
        .args([
            "mcp-stdio-conformance",
            "server",
            "--check",
            "handshake.responds",
            "--",
            "node",
        ])
        .arg(&server)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("verdict: pass"),
        "{}",
        text(&output)
    );
}

/// SIGKILLs a process group when dropped: what a test started ends with it,
/// passed or failed.
struct KillGroup(i32);

impl KillGroup {
    /// The group is gone: its id may be reused, never signal it.
    fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(-self.0), Signal::SIGKILL);
    }
}

/// The built-in fixture through `program`, answering `initialize`: it runs.
/// A process group of its own, so that after the test nothing of it may be
/// left: `kill(-group, 0)` finds no member.
fn spawn_fixture(
    npm: &NpmInstall,
    program: &Path,
) -> (
    std::process::Child,
    KillGroup,
    BufReader<std::process::ChildStdout>,
) {
    let mut child = npm
        .scratch
        .command(program, std::slice::from_ref(&npm.node_dir))
        .args(["fixture", "well-behaved"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let guard = KillGroup(child.id() as i32);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"dist-test","version":"1"}}}}}}"#
    )
    .unwrap();
    // Kept open: EOF would end the fixture on its own.
    std::mem::forget(stdin);
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains(r#""id":1"#), "no initialize answer: {line:?}");
    (child, guard, stdout)
}

/// Waits for `child` (on a thread, so the wait has a deadline); kills its
/// group if it does not end. Returns its status and its process group.
fn wait_with_deadline(mut child: std::process::Child, what: &str) -> (ExitStatus, i32) {
    let group = child.id() as i32;
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait());
    });
    match ended.recv_timeout(Duration::from_secs(30)) {
        Ok(status) => (status.unwrap(), group),
        Err(_) => {
            let _ = kill(Pid::from_raw(-group), Signal::SIGKILL);
            panic!("{what} did not end within 30 s");
        }
    }
}

fn group_is_empty(group: i32) -> bool {
    kill(Pid::from_raw(-group), None) == Err(Errno::ESRCH)
}

/// SIGTERM to the launcher reaches the tool, and the launcher ends as the
/// tool does; a tool killed by a signal takes the launcher down with the
/// same signal. Nothing of either is left.
fn the_launcher_passes_signals_and_exit_statuses_through(npm: &NpmInstall) {
    let binary = npm
        .scratch
        .path("prefix/node_modules/@mcp-stdio-conformance/linux-x64/bin/mcp-conformance");

    // The tool alone, for the status to expect.
    let (direct, guard, _out) = spawn_fixture(npm, &binary);
    kill(Pid::from_raw(direct.id() as i32), Signal::SIGTERM).unwrap();
    let (expected, group) = wait_with_deadline(direct, "the fixture after SIGTERM");
    assert!(group_is_empty(group), "the fixture left something behind");
    guard.disarm();

    let (launched, guard, _out) = spawn_fixture(npm, &npm.launcher);
    kill(Pid::from_raw(launched.id() as i32), Signal::SIGTERM).unwrap();
    let (status, group) = wait_with_deadline(launched, "the launcher after SIGTERM");
    assert_eq!(status.code(), expected.code(), "{status:?} vs {expected:?}");
    assert_eq!(
        status.signal(),
        expected.signal(),
        "{status:?} vs {expected:?}"
    );
    assert!(group_is_empty(group), "the tool outlived its launcher");
    guard.disarm();

    // The tool killed under the launcher: the launcher dies of SIGKILL too.
    let (launched, guard, _out) = spawn_fixture(npm, &npm.launcher);
    let pid = launched.id();
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
    let tool: i32 = children
        .split_whitespace()
        .next()
        .expect("the launcher has started the tool")
        .parse()
        .unwrap();
    kill(Pid::from_raw(tool), Signal::SIGKILL).unwrap();
    let (status, group) = wait_with_deadline(launched, "the launcher after its tool was killed");
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32), "{status:?}");
    assert!(group_is_empty(group), "something outlived the launcher");
    guard.disarm();
}

#[test]
fn the_archive_unpacks_where_binstall_looks_and_matches_its_checksum() {
    let scratch = Scratch::new();
    let made = dist("archive", &scratch.path("dist"));
    let [archive, checksum] = made.as_slice() else {
        panic!("an archive and its checksum expected, dist made {made:?}");
    };
    let file = archive.file_name().unwrap().to_str().unwrap();
    assert_eq!(
        checksum.file_name().unwrap().to_str().unwrap(),
        format!("{file}.sha256")
    );
    // `sha256sum -c` as a user (and the Action) checks it.
    let output = Command::new("sha256sum")
        .arg("-c")
        .arg(checksum)
        .current_dir(scratch.path("dist"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));

    // Where [package.metadata.binstall] says the archive and binary are.
    let manifest = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/Cargo.toml"),
    )
    .unwrap();
    let setting = |key: &str| -> String {
        let section = manifest
            .split("[package.metadata.binstall]")
            .nth(1)
            .expect("conformance/Cargo.toml has [package.metadata.binstall]");
        section
            .lines()
            .find_map(|line| line.strip_prefix(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("binstall has no {key}"))
            .trim_matches('"')
            .to_owned()
    };
    let version = file
        .strip_prefix("mcp-conformance-")
        .and_then(|rest| rest.split_once('-'))
        .map(|(version, _)| version.to_owned())
        .unwrap();
    let target = file
        .strip_prefix(&format!("mcp-conformance-{version}-"))
        .and_then(|rest| rest.strip_suffix(".tar.gz"))
        .unwrap();
    let fill = |template: &str| {
        template
            .replace("{ name }", "mcp-conformance")
            .replace("{ version }", &version)
            .replace("{ target }", target)
            .replace("{ bin }", "mcp-conformance")
            .replace("{ binary-ext }", "")
            .replace("{ archive-suffix }", ".tar.gz")
    };
    assert_eq!(setting("pkg-fmt"), "tgz");
    let url = fill(&setting("pkg-url"));
    assert!(url.ends_with(&format!("/v{version}/{file}")), "{url}");

    let unpacked = scratch.path("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(status.success());
    let exe = unpacked.join(fill(&setting("bin-dir")));
    assert!(exe.is_file(), "no binary at {}", exe.display());
    let output = scratch
        .command(&exe, &[])
        .arg("--version")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("mcp-conformance {version}"),
        "{}",
        text(&output)
    );
}
