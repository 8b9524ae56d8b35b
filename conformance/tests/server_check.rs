//! `mcp-conformance server` against every fixture (and a few shell-script
//! servers that write exactly the bytes a test needs), through the built
//! binary: the grade each must get, its exit code, a snapshot of the
//! normalized (`--stable`) JSON report, and no process left behind.

use std::{
    path::Path,
    process::{Command, Output},
    time::{Duration, Instant},
};

use mcp_conformance::{
    ServerCheckId as CheckId, ServerOptions as Options, ServerReportFormat as Fmt, check_server,
    server_target,
};
use mcp_conformance_report::exit;
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-conformance");

/// Short windows, so the suite takes seconds. Failing servers cost one
/// EOF grace (plus one TERM grace) per case.
const FAST: &[&str] = &[
    "--timeout",
    "5s",
    "--probe-timeout",
    "300ms",
    "--eof-grace",
    "500ms",
    "--term-grace",
    "500ms",
    "--idle",
    "200ms",
    "--settle",
    "300ms",
    "--cpu-window",
    "300ms",
    "--in-flight",
    "200ms",
];

fn fixture(name: &str) -> String {
    let dir = mcp_fixtures::locate::fixtures_dir().expect("the fixtures are built");
    dir.join(name).to_string_lossy().into_owned()
}

/// Runs the binary; returns its output after checking that nothing it
/// started is still alive.
fn run(args: &[&str]) -> Output {
    let started = Instant::now();
    let child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let output = child.wait_with_output().expect("the binary runs");
    show(args, &output, started);
    let left = leftovers(pid);
    assert!(
        left.is_empty(),
        "processes left behind by pid {pid}: {left:?}"
    );
    output
}

/// Prints what the binary printed (its beginning: a report can be large).
fn show(args: &[&str], output: &Output, started: Instant) {
    let head = |bytes: &[u8]| {
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(20_000)]).into_owned();
        if bytes.len() > 20_000 {
            format!("{text}\n[... {} bytes in all]\n", bytes.len())
        } else {
            text
        }
    };
    eprintln!(
        "mcp-conformance {} -> {:?} in {:?}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        output.status.code(),
        started.elapsed(),
        head(&output.stdout),
        head(&output.stderr)
    );
}

/// Live processes whose marker says the server check run by `pid` started them.
fn leftovers(pid: u32) -> Vec<u32> {
    let prefix = format!("MCP_CONFORMANCE_MARKER=mcp-server-check-{pid}-");
    let scan = || {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let marked = std::fs::read(entry.path().join("environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|var| var.starts_with(prefix.as_bytes()))
            });
            if marked && mcp_stdio_process::table::is_alive(p) {
                found.push(p);
            }
        }
        found
    };
    // Processes SIGKILLed at the very end may take a moment to vanish.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let found = scan();
        if found.is_empty() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The stable JSON report of `command` graded with the fast options plus `extra`.
fn grade(extra: &[&str], command: &[&str]) -> (i32, Value) {
    let mut args = vec!["server", "--json", "--stable"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let output = run(&args);
    let report: Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    let code = output.status.code().expect("exited");
    (code, of_the_schema(report))
}

/// `report`, checked against the published JSON Schema: every report a
/// test here reads is one of `report/schema/report-v2.schema.json`.
fn of_the_schema(report: Value) -> Value {
    let errors = mcp_conformance_report::schema::validate(&report).err();
    assert_eq!(errors, None, "not of the schema: {report:#}");
    report
}

fn check<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id} in {report:#}"))
}

fn verdict<'a>(report: &'a Value, id: &str) -> &'a str {
    check(report, id)["verdict"].as_str().unwrap()
}

fn summary<'a>(report: &'a Value, id: &str) -> &'a str {
    check(report, id)["summary"].as_str().unwrap()
}

/// Asserts the verdict of every check at once, for a readable failure.
fn assert_grades(report: &Value, expected: &[(&str, &str)]) {
    let got: Vec<(String, String)> = expected
        .iter()
        .map(|(id, _)| ((*id).to_owned(), verdict(report, id).to_owned()))
        .collect();
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(id, v)| ((*id).to_owned(), (*v).to_owned()))
        .collect();
    assert_eq!(got, want, "{report:#}");
}

fn snapshot(name: &str, report: &Value) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    // Where the report was written is not the server's behaviour.
    let mut report = report.clone();
    for key in ["version", "os", "arch"] {
        report["environment"][key] = Value::from(format!("[{key}]"));
    }
    let text = serde_json::to_string_pretty(&report).unwrap();
    settings.bind(|| insta::assert_snapshot!(format!("server_check__{name}"), text));
}

const ALL_PASS: &[(&str, &str)] = &[
    ("handshake.responds", "pass"),
    ("handshake.discover", "pass"),
    ("handshake.legacy", "pass"),
    ("handshake.latency", "pass"),
    ("stdout.purity", "pass"),
    ("eof.exit", "pass"),
    ("eof.descendants", "pass"),
    ("eof.cpu", "pass"),
    ("host_death.exit", "pass"),
    ("epipe.exit", "pass"),
    ("epipe.cpu", "pass"),
    ("sigterm.exit", "pass"),
    ("idle.alive", "pass"),
    ("stderr", "info"),
];

fn with(overrides: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    ALL_PASS
        .iter()
        .map(|(id, v)| {
            (
                *id,
                overrides
                    .iter()
                    .find(|(o, _)| o == id)
                    .map_or(*v, |(_, v)| *v),
            )
        })
        .collect()
}

#[test]
fn well_behaved_passes_everything() {
    let (code, report) = grade(&[], &[&fixture("fixture-well-behaved")]);
    assert_grades(&report, ALL_PASS);
    assert_eq!(code, i32::from(exit::SUCCESS));
    assert_eq!(report["schema"], 2);
    assert_eq!(report["kind"], "server");
    assert_eq!(report["verdict"], "pass");
    let cases: Vec<&str> = check(&report, "eof.exit")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        cases,
        ["after-handshake", "before-handshake", "idle", "in-flight"]
    );
    snapshot("well-behaved", &report);
}

#[test]
fn eof_ignoring_fails_eof_exit_as_needed_sigterm() {
    let (code, report) = grade(&[], &[&fixture("fixture-eof-ignoring")]);
    assert_grades(
        &report,
        &with(&[("eof.exit", "fail"), ("host_death.exit", "fail")]),
    );
    assert!(
        summary(&report, "eof.exit").starts_with("needed SIGTERM"),
        "{report:#}"
    );
    assert!(check(&report, "eof.exit")["fix"].is_string());
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("eof-ignoring", &report);
}

#[test]
fn term_ignoring_fails_eof_exit_as_needed_sigkill_and_sigterm_exit() {
    let (code, report) = grade(&[], &[&fixture("fixture-term-ignoring")]);
    assert_grades(
        &report,
        &with(&[
            ("eof.exit", "fail"),
            ("host_death.exit", "fail"),
            ("sigterm.exit", "fail"),
        ]),
    );
    assert!(
        summary(&report, "eof.exit").starts_with("needed SIGKILL"),
        "{report:#}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("term-ignoring", &report);
}

#[test]
fn launcher_with_an_eof_ignoring_grandchild_fails_eof_exit() {
    let (code, report) = grade(
        &[],
        &[
            &fixture("fixture-launcher"),
            "--",
            &fixture("fixture-eof-ignoring"),
        ],
    );
    assert_grades(
        &report,
        &with(&[("eof.exit", "fail"), ("host_death.exit", "fail")]),
    );
    assert!(
        summary(&report, "eof.exit").starts_with("needed SIGTERM"),
        "{report:#}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("launcher-eof-ignoring", &report);
}

#[test]
fn launcher_with_a_well_behaved_grandchild_passes() {
    let (code, report) = grade(
        &[],
        &[
            &fixture("fixture-launcher"),
            "--",
            &fixture("fixture-well-behaved"),
        ],
    );
    assert_grades(&report, ALL_PASS);
    assert_eq!(code, i32::from(exit::SUCCESS));
}

#[test]
fn lingering_fails_eof_descendants_naming_the_sidecar_in_the_group() {
    let (code, report) = grade(&[], &[&fixture("fixture-lingering")]);
    assert_grades(
        &report,
        &with(&[
            ("eof.descendants", "fail"),
            ("host_death.exit", "fail"),
            ("epipe.exit", "fail"),
        ]),
    );
    let text = summary(&report, "eof.descendants");
    assert!(
        text.contains("fixture-lingering") && text.contains("still in the server's process group"),
        "{text}"
    );
    assert_eq!(
        check(&report, "eof.descendants")["details"]["survivors"][0]["left_group"],
        false
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("lingering", &report);
}

#[test]
fn escaping_fails_eof_descendants_saying_it_left_the_group() {
    let (code, report) = grade(&[], &[&fixture("fixture-escaping")]);
    assert_grades(
        &report,
        &with(&[
            ("eof.descendants", "fail"),
            ("host_death.exit", "fail"),
            ("epipe.exit", "fail"),
        ]),
    );
    let text = summary(&report, "eof.descendants");
    assert!(
        text.contains("fixture-escaping") && text.contains("left the process group"),
        "{text}"
    );
    assert_eq!(
        check(&report, "eof.descendants")["details"]["survivors"][0]["left_group"],
        true
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("escaping", &report);
}

#[test]
fn stdout_polluting_fails_stdout_purity_with_offsets() {
    // Unstable output on purpose: the offsets themselves are checked.
    let mut args = vec!["server", "--json", "--check", "stdout.purity"];
    args.extend_from_slice(FAST);
    let polluting = fixture("fixture-stdout-polluting");
    args.extend(["--", polluting.as_str()]);
    let output = run(&args);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(output.status.code(), Some(i32::from(exit::FAILURE)));
    assert_eq!(
        report["checks"].as_array().unwrap().len(),
        1,
        "--check runs only that check"
    );
    let offenders = check(&report, "stdout.purity")["details"]["offenders"]
        .as_array()
        .unwrap();
    let banner = offenders[0]["excerpt"].as_str().unwrap();
    assert_eq!(offenders[0]["offset"], 0);
    assert_eq!(offenders[0]["diagnoses"][0], "banner");
    // The second line starts right after the first one and its newline.
    assert_eq!(offenders[1]["offset"], banner.len() + 1);
    assert_eq!(offenders[1]["diagnoses"][0], "log_line");
    assert!(
        offenders.len() >= 3,
        "a log line after each message: {offenders:?}"
    );
    let stable = grade(&[], &[&polluting]).1;
    assert_grades(&stable, &with(&[("stdout.purity", "fail")]));
    snapshot("stdout-polluting", &stable);
}

#[test]
fn wedged_fails_the_handshake_and_skips_what_needs_it() {
    let (code, report) = grade(
        &["--timeout", "300ms"],
        &[&fixture("fixture-wedged"), "--never-initialize"],
    );
    assert_grades(
        &report,
        &with(&[
            ("handshake.responds", "fail"),
            ("handshake.discover", "fail"),
            ("handshake.legacy", "fail"),
            ("handshake.latency", "skip"),
            ("eof.exit", "fail"),
            ("host_death.exit", "skip"),
            ("epipe.exit", "skip"),
            ("epipe.cpu", "skip"),
            ("sigterm.exit", "skip"),
            ("idle.alive", "skip"),
        ]),
    );
    assert!(
        summary(&report, "handshake.responds").starts_with("no answer to initialize within 300 ms"),
        "{report:#}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("wedged", &report);
}

#[test]
fn a_busy_loop_after_eof_fails_eof_cpu() {
    let (code, report) = grade(
        &["--check", "eof.cpu", "--busy-percent", "25"],
        &[&fixture("fixture-eof-ignoring"), "--spin-after-eof"],
    );
    assert_eq!(verdict(&report, "eof.cpu"), "fail", "{report:#}");
    assert!(
        summary(&report, "eof.cpu").starts_with("busy loop after EOF: fixture-eof-ignoring"),
        "{report:#}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
}

/// Two busy loops of our own, pinned to CPU 0 at normal priority, so that a
/// server pinned there at the lowest priority gets almost no CPU: ended by
/// pid when dropped.
struct Hogs(Vec<std::process::Child>);

impl Hogs {
    fn on_cpu0() -> Hogs {
        Hogs(
            (0..2)
                .map(|_| {
                    Command::new("taskset")
                        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset runs")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_busy_loop_starved_of_cpu_still_fails_eof_cpu() {
    // A loaded machine must not hide a busy loop: the spinner gets a sliver
    // of CPU 0 here, yet it wants all of it, and that is what busy means.
    let _hogs = Hogs::on_cpu0();
    let spinner = fixture("fixture-eof-ignoring");
    let (_, report) = grade(
        &["--check", "eof.cpu", "--busy-percent", "25"],
        &[
            "nice",
            "-n",
            "19",
            "taskset",
            "-c",
            "0",
            &spinner,
            "--spin-after-eof",
        ],
    );
    assert_eq!(verdict(&report, "eof.cpu"), "fail", "{report:#}");
}

#[test]
fn stderr_floods_are_captured_and_never_an_error() {
    let (code, report) = grade(
        &["--check", "handshake.responds,stderr"],
        &[&fixture("fixture-stderr-flooding"), "--bytes", "2000000"],
    );
    assert_grades(
        &report,
        &[("handshake.responds", "pass"), ("stderr", "info")],
    );
    assert_eq!(code, i32::from(exit::SUCCESS));
}

#[test]
fn the_remaining_fixtures_get_their_grades() {
    // Crash on the first tools/call: the in-flight case finds it dead.
    let (_, report) = grade(&["--check", "eof.exit"], &[&fixture("fixture-crash")]);
    assert_eq!(verdict(&report, "eof.exit"), "pass", "{report:#}");
    // A slow tool in flight is finished before the exit: within the grace, that passes.
    for command in [
        vec![fixture("fixture-slow"), "--delay-ms".into(), "50".into()],
        vec![fixture("fixture-secret-echoing")],
    ] {
        let command: Vec<&str> = command.iter().map(String::as_str).collect();
        let (code, report) = grade(&[], &command);
        assert_grades(&report, ALL_PASS);
        assert_eq!(code, i32::from(exit::SUCCESS));
    }
}

/// The host-death checks, with a low busy bound: on a loaded two-core
/// machine a spinning fixture may get well under a whole core.
const HOST_DEATH: &[&str] = &[
    "--check",
    "host_death.exit,epipe.exit,epipe.cpu",
    "--busy-percent",
    "10",
];

#[test]
fn host_death_runs_pass_a_server_that_exits_on_a_failed_write_in_either_era() {
    for era in ["dual", "legacy"] {
        let (code, report) = grade(
            HOST_DEATH,
            &[&fixture("fixture-well-behaved"), "--era", era],
        );
        assert_grades(
            &report,
            &[
                ("host_death.exit", "pass"),
                ("epipe.exit", "pass"),
                ("epipe.cpu", "pass"),
            ],
        );
        assert!(
            summary(&report, "host_death.exit").contains("after its host died"),
            "{report:#}"
        );
        assert!(
            summary(&report, "epipe.exit").contains("after its write failed, before EOF"),
            "{report:#}"
        );
        assert_eq!(code, i32::from(exit::SUCCESS));
    }
}

#[test]
fn each_epipe_misbehaviour_fails_its_check() {
    let well = fixture("fixture-well-behaved");
    for (how, exit_verdict, cpu_verdict) in [
        ("spin", "fail", "fail"),
        ("ignore-eof", "fail", "pass"),
        ("keep-writing", "fail", "fail"),
    ] {
        let (code, report) = grade(HOST_DEATH, &[&well, "--on-epipe", how]);
        // No write fails when the host dies all at once: EOF ends each of them.
        assert_grades(
            &report,
            &[
                ("host_death.exit", "pass"),
                ("epipe.exit", exit_verdict),
                ("epipe.cpu", cpu_verdict),
            ],
        );
        assert!(
            summary(&report, "epipe.exit").starts_with(
                "needed SIGTERM: still running 500 ms after its write failed and then EOF"
            ),
            "{how}: {report:#}"
        );
        assert_eq!(
            check(&report, "epipe.exit")["fix"],
            "treat EPIPE / a closed stdout as shutdown: exit when a write fails"
        );
        if cpu_verdict == "fail" {
            assert!(
                summary(&report, "epipe.cpu")
                    .starts_with("busy loop after EPIPE: fixture-well-behaved"),
                "{how}: {report:#}"
            );
        }
        assert_eq!(code, i32::from(exit::FAILURE));
        snapshot(&format!("epipe-{how}"), &report);
    }
}

#[test]
fn the_busy_figure_is_reported_as_a_share_of_a_core() {
    let mut args = vec!["server"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(HOST_DEATH);
    let well = fixture("fixture-well-behaved");
    args.extend(["--", well.as_str(), "--on-epipe", "spin"]);
    let table = String::from_utf8_lossy(&run(&args).stdout).into_owned();
    let line = table
        .lines()
        .find(|l| l.starts_with("epipe.cpu"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        line.contains("busy loop after EPIPE: fixture-well-behaved (pid ")
            && line.contains("% of a core over 300 ms"),
        "{table}"
    );
}

#[test]
fn a_server_that_ignores_its_hosts_death_needs_sigterm_or_sigkill() {
    let (code, report) = grade(HOST_DEATH, &[&fixture("fixture-eof-ignoring")]);
    assert_eq!(verdict(&report, "host_death.exit"), "fail", "{report:#}");
    assert!(
        summary(&report, "host_death.exit")
            .starts_with("needed SIGTERM: still running 500 ms after its host died"),
        "{report:#}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    let (_, report) = grade(HOST_DEATH, &[&fixture("fixture-term-ignoring")]);
    assert!(
        summary(&report, "host_death.exit")
            .starts_with("needed SIGKILL: ignored its host's death for 500 ms"),
        "{report:#}"
    );
    snapshot("host-death-term-ignoring", &report);
}

#[test]
fn descendants_are_checked_in_the_host_death_runs() {
    let (code, report) = grade(HOST_DEATH, &[&fixture("fixture-lingering")]);
    for id in ["host_death.exit", "epipe.exit"] {
        assert_eq!(verdict(&report, id), "fail", "{report:#}");
        assert!(
            summary(&report, id)
                .contains("; left behind: fixture-lingering, still in the server's process group"),
            "{report:#}"
        );
    }
    assert_eq!(code, i32::from(exit::FAILURE));
}

/// The ledger of every fixture process a check started: its `request`
/// records as (method, era).
fn requests_in(ledger: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(ledger)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["event"] == "request")
        .map(|e| {
            (
                e["method"].as_str().unwrap_or("").to_owned(),
                e["era"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// `grade`, with the fixtures' ledger in a temporary file.
fn grade_with_ledger(extra: &[&str], command: &[&str]) -> (i32, Value, Vec<(String, String)>) {
    let ledger = tempfile::NamedTempFile::new().unwrap();
    let mut args = vec!["server", "--json", "--stable"];
    args.extend_from_slice(FAST);
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(command);
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(&args)
        .env(mcp_fixtures::ledger::LEDGER_ENV, ledger.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let _ = child.stdin.take();
    let output = child.wait_with_output().expect("the binary runs");
    show(&args, &output, started);
    let left = leftovers(pid);
    assert!(
        left.is_empty(),
        "processes left behind by pid {pid}: {left:?}"
    );
    let report: Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    let code = output.status.code().expect("exited");
    (code, of_the_schema(report), requests_in(ledger.path()))
}

#[test]
fn each_era_is_detected_graded_and_used_by_the_runs() {
    let well = fixture("fixture-well-behaved");
    for (era, eras, best, discover, legacy) in [
        ("dual", vec!["modern", "legacy"], "modern", "pass", "pass"),
        ("modern", vec!["modern"], "modern", "pass", "pass"),
        ("legacy", vec!["legacy"], "legacy", "pass", "pass"),
        ("legacy-silent", vec!["legacy"], "legacy", "warn", "pass"),
    ] {
        let (code, report, requests) = grade_with_ledger(&[], &[&well, "--era", era]);
        assert_grades(
            &report,
            &with(&[
                ("handshake.discover", discover),
                ("handshake.legacy", legacy),
            ]),
        );
        assert_eq!(code, i32::from(exit::SUCCESS), "{era}: {report:#}");
        let eras: Option<Value> = (!eras.is_empty()).then(|| serde_json::json!(eras));
        assert_eq!(report["subject"].get("eras"), eras.as_ref(), "{era}");
        assert_eq!(report["subject"]["era"], best, "{era}");
        // Every run after the main one used the best era, without probing again.
        let discovers = requests
            .iter()
            .filter(|(m, _)| m == "server/discover")
            .count();
        let initializes = requests.iter().filter(|(m, _)| m == "initialize").count();
        let tool_calls: Vec<&str> = requests
            .iter()
            .filter(|(m, _)| m == "tools/call")
            .map(|(_, e)| e.as_str())
            .collect();
        assert_eq!(tool_calls, [best], "{era}: {requests:?}");
        // The epipe run's request whose answer cannot be written.
        let pings: Vec<&str> = requests
            .iter()
            .filter(|(m, _)| m == "ping")
            .map(|(_, e)| e.as_str())
            .collect();
        assert_eq!(pings, [best], "{era}: {requests:?}");
        let (want_discovers, want_initializes) = match best {
            // The main run, idle, in-flight, host-death, epipe, sigterm;
            // initialize once alone.
            "modern" => (6, 1),
            // Probed once in the main run, then initialize everywhere.
            _ => (1, 6),
        };
        assert_eq!(
            (discovers, initializes),
            (want_discovers, want_initializes),
            "{era}: {requests:?}"
        );
        snapshot(&format!("era-{era}"), &report);
    }
}

#[test]
fn each_era_note_says_who_cannot_use_the_server() {
    let well = fixture("fixture-well-behaved");
    let checks = ["--check", "handshake.discover,handshake.legacy"];
    let (_, modern) = grade(&checks, &[&well, "--era", "modern"]);
    assert!(
        summary(&modern, "handshake.legacy").starts_with(
            "modern only: initialize refused at once (error -32022, supported [2026-07-28]"
        ) && summary(&modern, "handshake.legacy")
            .ends_with("legacy-only clients cannot use this server"),
        "{modern:#}"
    );
    let (_, legacy) = grade(&checks, &[&well, "--era", "legacy"]);
    assert!(
        summary(&legacy, "handshake.discover")
            .starts_with("legacy only: server/discover refused at once (error -32601")
            && summary(&legacy, "handshake.discover")
                .ends_with("modern-only clients cannot use this server"),
        "{legacy:#}"
    );
    let (_, silent) = grade(
        &["--check", "handshake.discover", "--probe-timeout", "400ms"],
        &[&well, "--era", "legacy-silent"],
    );
    let discover = check(&silent, "handshake.discover");
    assert!(
        discover["summary"]
            .as_str()
            .unwrap()
            .contains("every probing client loses its probe bound (400 ms here)"),
        "{silent:#}"
    );
    assert_eq!(discover["details"]["lost_ms"], 400, "{silent:#}");
    assert!(
        discover["fix"].as_str().unwrap().contains("-32601"),
        "{silent:#}"
    );
}

#[test]
fn a_wrong_discover_answer_fails_handshake_discover_for_each_missing_part() {
    let well = fixture("fixture-well-behaved");
    for (part, says) in [
        ("no-versions", "no supportedVersions list"),
        ("no-capabilities", "no capabilities object"),
        ("no-server-info", "no server info in _meta"),
    ] {
        let (code, report) = grade(
            &[
                "--check",
                "handshake.responds,handshake.discover,handshake.legacy",
            ],
            &[&well, "--broken-discover", part],
        );
        // The dual server still serves initialize: the check falls back to it.
        assert_grades(
            &report,
            &[
                ("handshake.responds", "pass"),
                ("handshake.discover", "fail"),
                ("handshake.legacy", "pass"),
            ],
        );
        let summary = summary(&report, "handshake.discover");
        assert!(
            summary.starts_with("answered server/discover, but not with a correct DiscoverResult")
                && summary.contains(says),
            "{part}: {report:#}"
        );
        assert_eq!(report["subject"]["era"], "legacy", "{part}");
        assert_eq!(code, i32::from(exit::FAILURE));
    }
    // Modern only and wrong: no era is served at all.
    let (code, report) = grade(
        &[
            "--check",
            "handshake.responds,handshake.discover,handshake.legacy",
        ],
        &[&well, "--era", "modern", "--broken-discover", "no-versions"],
    );
    assert_grades(
        &report,
        &[
            ("handshake.responds", "fail"),
            ("handshake.discover", "fail"),
            ("handshake.legacy", "fail"),
        ],
    );
    assert!(
        summary(&report, "handshake.legacy").contains("and no modern era served either"),
        "{report:#}"
    );
    // No era served: the subject lists none.
    assert_eq!(report["subject"].get("eras"), None, "{report:#}");
    assert_eq!(code, i32::from(exit::FAILURE));
    snapshot("broken-discover", &report);
}

/// A shell script as the server: a legacy server silent on `server/discover`
/// (the checker's first request, id 1), it answers `initialize` (id 2,
/// asked once the probe gives up) with exactly these bytes.
fn script_server(reply: &str) -> Vec<String> {
    let script = format!(
        "IFS= read -r line; IFS= read -r line; printf '{reply}'; while IFS= read -r line; do :; done"
    );
    vec!["/bin/sh".into(), "-c".into(), script]
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":2,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"sh","version":"0"}}}"#;

fn purity_of(reply: &str, extra: &[&str]) -> Value {
    let command = script_server(reply);
    let command: Vec<&str> = command.iter().map(String::as_str).collect();
    let mut options = vec!["--check", "stdout.purity,handshake.responds"];
    options.extend_from_slice(extra);
    let (_, report) = grade(&options, &command);
    check(&report, "stdout.purity").clone()
}

fn diagnoses(purity: &Value) -> Vec<Vec<String>> {
    purity["details"]["offenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            o["diagnoses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

#[test]
fn raw_bytes_reach_stdout_purity_crlf_bom_utf8_and_a_partial_line() {
    let purity = purity_of(
        &format!("\\357\\273\\277{INIT}\\r\\n\\377 oops\\n{INIT}"),
        &[],
    );
    assert_eq!(
        diagnoses(&purity),
        [
            vec!["bom", "crlf"],
            vec!["invalid_utf8", "text"],
            vec!["partial_last_line"]
        ],
        "{purity:#}"
    );
}

#[test]
fn content_length_framing_and_pretty_printed_json_are_diagnosed() {
    let framed = purity_of(
        &format!("Content-Length: {}\\r\\n\\r\\n{INIT}", INIT.len()),
        &["--timeout", "300ms"],
    );
    assert_eq!(
        diagnoses(&framed)[0],
        ["crlf", "content_length_framing"],
        "{framed:#}"
    );
    let pretty = INIT.replace(",", ",\\n  ");
    let pretty = purity_of(&format!("{pretty}\\n"), &["--timeout", "300ms"]);
    assert_eq!(
        diagnoses(&pretty),
        [vec!["pretty_printed_json"]],
        "{pretty:#}"
    );
}

#[test]
fn garbage_on_stdout_fails_the_handshake_not_the_harness() {
    let output = run(&[
        "server",
        "--timeout",
        "300ms",
        "--check",
        "handshake.responds,stdout.purity",
        "--",
        "/bin/sh",
        "-c",
        "echo 'Hello, I am not an MCP server'; cat > /dev/null",
    ]);
    assert_eq!(output.status.code(), Some(i32::from(exit::FAILURE)));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(table.contains("handshake.responds  FAIL"), "{table}");
    assert!(
        table.contains("banner: \"Hello, I am not an MCP server\""),
        "{table}"
    );
    assert!(table.contains("fix: "), "{table}");
}

#[test]
fn usage_errors_exit_2_with_a_clear_message() {
    for (args, expect) in [
        (vec!["server"], "COMMAND"),
        (
            vec!["server", "--check", "nope", "--", "/bin/true"],
            "unknown check id `nope`",
        ),
        (
            vec!["server", "--", "no-such-server-anywhere"],
            "`no-such-server-anywhere` is not on the PATH",
        ),
        (
            vec!["server", "--repeat", "0", "--", "/bin/true"],
            "--repeat must be at least 1",
        ),
        (
            vec!["server", "--jobs", "0", "--", "/bin/true"],
            "--jobs must be at least 1",
        ),
        (
            vec!["server", "--eof-grace", "2", "--", "/bin/true"],
            "needs a unit",
        ),
        (
            vec!["server", "--slow-tool", "x={", "--", "/bin/true"],
            "--slow-tool",
        ),
    ] {
        let output = run(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(i32::from(exit::USAGE)),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// A server command that cannot be found is said in the command line's
/// terms: PATH, the current directory, a program's path; never the config
/// file's DIR, ENV.PATH or `${VAR}`, which this command line has none of.
#[test]
fn a_command_that_cannot_be_found_is_said_in_cli_terms() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let stderr_of = |args: &[&str], env_path: Option<&str>| {
        let mut command = Command::new(BIN);
        command.args(args).current_dir(dir.path());
        match env_path {
            Some(value) => command.env("PATH", value),
            None => command.env_remove("PATH"),
        };
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(i32::from(exit::USAGE)),
            "{args:?}: {stderr}"
        );
        for config_word in ["DIR", "ENV.PATH", "${", "COMMAND", "panicked"] {
            assert!(!stderr.contains(config_word), "{config_word}: {stderr}");
        }
        stderr
    };
    assert_eq!(
        stderr_of(&["server", "--", "my-mcp-server", "--flag"], Some(path)),
        format!(
            "mcp-conformance server: error: `my-mcp-server` is not on the PATH (PATH={path}); \
             fix: install it or add its directory to PATH, or give the program's path \
             (`./my-mcp-server` for one in the current directory, or an absolute path)\n"
        )
    );
    assert!(
        stderr_of(&["server", "--", "my-mcp-server"], None)
            .contains("`my-mcp-server` is not on the PATH (PATH is not set); fix:"),
    );
    let missing = stderr_of(&["server", "--", "./my-mcp-server"], Some(path));
    assert!(
        missing.contains(&format!(
            "`./my-mcp-server` is {path}/my-mcp-server, which does not exist or is not an \
             executable file; fix: check the path (a relative one is taken from the current \
             directory)"
        )),
        "{missing}"
    );
}

#[test]
fn junit_and_repeat() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("server.xml");
    let junit_arg = junit.to_string_lossy().into_owned();
    let well = fixture("fixture-well-behaved");
    let mut args = vec![
        "server",
        "--repeat",
        "2",
        "--junit",
        &junit_arg,
        "--check",
        "handshake.latency,eof.exit",
    ];
    args.extend_from_slice(FAST);
    args.extend(["--", well.as_str()]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(i32::from(exit::SUCCESS)));
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains("over 2 starts") && table.contains("cold"),
        "{table}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains(r#"<testcase classname="mcp-conformance.server" name="eof.exit">"#),
        "{xml}"
    );
    assert!(xml.contains(r#"failures="0""#), "{xml}");
}

/// The library's table, as a person sees it (stable form).
#[test]
fn the_table_for_people() {
    let target = server_target(&[fixture("fixture-eof-ignoring")]).unwrap();
    let options = Options {
        checks: vec![
            CheckId::HandshakeResponds,
            CheckId::EofExit,
            CheckId::SigtermExit,
        ],
        eof_grace: Duration::from_millis(300),
        term_grace: Duration::from_millis(300),
        idle: Duration::from_millis(100),
        in_flight: Duration::from_millis(100),
        ..Options::defaults()
    };
    let report = check_server(&target, &options, Fmt { stable: true }).unwrap();
    assert!(!report.passed());
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(|| insta::assert_snapshot!("server_check__table", report.to_table(false)));
}

/// Real servers from the package registries, graded with the default
/// options: both must pass. Needs the network (npm, PyPI), so it only runs
/// with `MCP_CONFORMANCE_REAL_SERVERS=1` (see docs/server-check.md).
#[test]
fn real_servers_from_the_registries_pass() {
    if std::env::var_os("MCP_CONFORMANCE_REAL_SERVERS").is_none() {
        eprintln!(
            "not run: set MCP_CONFORMANCE_REAL_SERVERS=1 to install and grade real servers (needs the network)"
        );
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("files");
    std::fs::create_dir(&root).unwrap();
    let root = root.to_string_lossy().into_owned();
    let venv = work.path().join("venv");
    let venv_arg = venv.to_string_lossy().into_owned();
    let status = Command::new("python3")
        .args(["-m", "venv", &venv_arg])
        .status()
        .unwrap();
    assert!(status.success(), "python3 -m venv");
    let pip = venv.join("bin/pip").to_string_lossy().into_owned();
    let status = Command::new(&pip)
        .args(["install", "--quiet", "mcp-server-time"])
        .status()
        .unwrap();
    assert!(status.success(), "pip install mcp-server-time");
    let time_server = venv
        .join("bin/mcp-server-time")
        .to_string_lossy()
        .into_owned();
    for command in [
        vec![
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            root.as_str(),
        ],
        vec![time_server.as_str()],
    ] {
        let mut args = vec!["server", "--json", "--"];
        args.extend_from_slice(&command);
        let output = run(&args);
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            output.status.code(),
            Some(i32::from(exit::SUCCESS)),
            "{command:?}: {report:#}"
        );
    }
}

/// Runs the binary like [`run`] and also returns its peak resident set size
/// in KiB, as the kernel accounted it when the process was reaped (the
/// largest of the binary and the servers it reaped; a server's is small).
fn run_measured(args: &[&str]) -> (Output, u64) {
    use std::io::Read;
    let started = Instant::now();
    // Reaped by wait4 below, not by `Child::wait`.
    #[allow(clippy::zombie_processes)]
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let pid = child.id();
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // wait4 rather than Child::wait: it reports the child's peak RSS.
    // SAFETY: `pid` is our unreaped child; both pointers are valid for the call.
    let reaped = unsafe { nix::libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid as i32, "wait4 reaps the binary");
    let code = if nix::libc::WIFEXITED(status) {
        nix::libc::WEXITSTATUS(status)
    } else {
        128 + nix::libc::WTERMSIG(status)
    };
    let output = Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(code << 8),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    show(args, &output, started);
    let left = leftovers(pid);
    assert!(
        left.is_empty(),
        "processes left behind by pid {pid}: {left:?}"
    );
    (output, usage.ru_maxrss as u64)
}

/// A server that answers `initialize` and then floods stdout with valid
/// ping requests, while the check sits in the idle window and reads no
/// answer: memory stays bounded. The flood lasts 2.5 s by default;
/// `MCP_CONFORMANCE_FLOOD_MS=10000` gives the 10-second figure.
#[test]
fn a_flood_of_messages_keeps_the_checker_under_100_mib() {
    let flood_ms = std::env::var("MCP_CONFORMANCE_FLOOD_MS").unwrap_or_else(|_| "2500".into());
    let idle = format!("{flood_ms}ms");
    let server = fixture("fixture-well-behaved");
    for kind in ["pings", "notifications"] {
        let mut args = vec!["server", "--json"];
        args.extend_from_slice(FAST);
        args.extend(["--check", "idle.alive", "--idle", &idle]);
        args.extend(["--", &server, "--flood", kind, "--flood-ms", &flood_ms]);
        let (output, peak_kib) = run_measured(&args);
        eprintln!("flood of {kind} for {flood_ms} ms: peak RSS {peak_kib} KiB");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(verdict(&report, "idle.alive"), "pass", "{report:#}");
        assert!(
            peak_kib < 100 * 1024,
            "peak RSS {peak_kib} KiB over a {flood_ms} ms flood of {kind}"
        );
    }
}

/// ~6 MB of valid notifications, more than any fixed capture would hold:
/// purity is judged on the whole stream as it arrives, so it passes. The
/// flood goes on after stdin EOF; the long EOF grace lets the server finish
/// it and exit by itself (a SIGTERM could cut its last line for real).
#[test]
fn a_correct_but_chatty_server_passes_stdout_purity() {
    let (code, report) = grade(
        &[
            "--check",
            "handshake.responds,stdout.purity",
            "--eof-grace",
            "30s",
        ],
        &[
            &fixture("fixture-well-behaved"),
            "--flood",
            "notifications",
            "--flood-bytes",
            "6000000",
        ],
    );
    assert_grades(
        &report,
        &[("handshake.responds", "pass"), ("stdout.purity", "pass")],
    );
    let purity = check(&report, "stdout.purity");
    assert!(
        purity["details"]["messages"].as_u64().unwrap() > 40_000,
        "{purity:#}"
    );
    assert_eq!(code, i32::from(exit::SUCCESS));
}

/// `yes` writes "y" lines without end: every rendering of the report stays
/// small, with the notes capped and "and N more" saying how many were left out.
#[test]
fn endless_garbage_gives_a_bounded_report() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("yes.xml");
    let junit_arg = junit.to_string_lossy().into_owned();
    let mut args = vec!["server", "--json", "--junit", &junit_arg];
    args.extend_from_slice(FAST);
    args.extend([
        "--timeout",
        "1s",
        "--check",
        "handshake.responds,stdout.purity",
        "--",
        "yes",
    ]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(i32::from(exit::FAILURE)));
    assert!(
        output.stdout.len() < 64 << 10,
        "a {} byte JSON report",
        output.stdout.len()
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let purity = check(&report, "stdout.purity");
    assert_eq!(purity["verdict"], "fail");
    let notes = purity["notes"].as_array().unwrap();
    assert!(notes.len() <= 21, "{} notes", notes.len());
    let last = notes.last().unwrap().as_str().unwrap();
    assert!(
        last.starts_with("… and ") && last.ends_with(" more"),
        "{last}"
    );
    let xml = std::fs::metadata(&junit).unwrap().len();
    assert!(xml < 64 << 10, "a {xml} byte JUnit report");
    let mut verbose = vec!["server", "-v"];
    verbose.extend_from_slice(&args[4..]);
    let table = run(&verbose);
    assert!(
        table.stdout.len() < 64 << 10,
        "a {} byte -v table",
        table.stdout.len()
    );
}

/// Kills, on drop, every live process whose argv carries `--marker=<token>`,
/// so a failing test leaks nothing the checker should have killed.
struct TokenGuard(String);

impl Drop for TokenGuard {
    fn drop(&mut self) {
        mcp_stdio_process::Marker::from_value(self.0.as_str())
            .kill_leftovers(Duration::from_secs(5));
    }
}

fn unique_token(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("server-check-{what}-{}-{nanos}", std::process::id())
}

/// Waits up to `within` until no live process carries `--marker=<token>`.
fn token_processes_after(token: &str, within: Duration) -> Vec<u32> {
    mcp_stdio_process::Marker::from_value(token)
        .wait_gone(within)
        .into_iter()
        .map(|marked| marked.pid)
        .collect()
}

/// A sidecar that calls `setsid` and is exec'd with an empty environment
/// carries no marker; it is re-parented to the checker (a subreaper) when
/// the server exits, and must be found, reported and killed all the same.
#[test]
fn an_escapee_that_drops_the_marker_is_reported_and_killed() {
    let token = unique_token("bare");
    let _guard = TokenGuard(token.clone());
    let marker = format!("--marker={token}");
    let (code, report) = grade(
        &["--check", "eof.exit,eof.descendants"],
        &[&fixture("fixture-escaping"), "--empty-env", &marker],
    );
    assert_eq!(verdict(&report, "eof.descendants"), "fail", "{report:#}");
    let text = summary(&report, "eof.descendants");
    assert!(
        text.contains("fixture-escaping") && text.contains("left the process group"),
        "{text}"
    );
    assert_eq!(code, i32::from(exit::FAILURE));
    let left = token_processes_after(&token, Duration::from_secs(2));
    assert!(
        left.is_empty(),
        "the escapee outlived the checker: {left:?}"
    );
}

/// The CLI started as a terminal starts a job (a process group of its own),
/// with a ledger shared by the fixtures it runs; killed with everything it
/// started on drop, so a failing test leaks nothing.
struct Job {
    child: std::process::Child,
    ledger: tempfile::NamedTempFile,
}

impl Job {
    fn start(args: &[&str]) -> Job {
        use std::os::unix::process::CommandExt;
        let ledger = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(BIN)
            .args(args)
            .env(mcp_fixtures::ledger::LEDGER_ENV, ledger.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .process_group(0)
            .spawn()
            .expect("the binary starts");
        Job { child, ledger }
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.ledger.path())
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Waits (10 s at most) for a ledger record that `wanted` accepts.
    fn wait_for(&self, what: &str, wanted: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.events().iter().any(&wanted) {
            assert!(
                Instant::now() < deadline,
                "no {what} in the ledger: {:#?}",
                self.events()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Signals the job's whole group, as a terminal does.
    fn signal(&self, signal: nix::sys::signal::Signal) {
        assert!(
            mcp_stdio_process::signal::signal_group(self.child.id(), signal)
                .expect("signal the job's group"),
            "the job's group exists"
        );
    }

    /// Waits up to `within` for the CLI to exit; its exit code, `None` when
    /// a signal killed it (it did not handle the signal).
    fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the CLI is still running");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Pids of the fixture processes that are still alive.
    fn fixtures_alive(&self) -> Vec<u32> {
        let pids: std::collections::BTreeSet<u32> = self
            .events()
            .iter()
            .filter(|e| e["event"] == "started")
            .filter_map(|e| e["pid"].as_u64().and_then(|p| u32::try_from(p).ok()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let alive: Vec<u32> = pids
                .iter()
                .copied()
                .filter(|pid| mcp_stdio_process::table::is_alive(*pid))
                .collect();
            if alive.is_empty() || Instant::now() > deadline {
                return alive;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn fixture_events(&self) -> Vec<String> {
        self.events()
            .iter()
            .filter(|e| {
                e["fixture"]
                    .as_str()
                    .is_some_and(|f| !f.ends_with("-sidecar"))
            })
            .map(|e| match e["signal"].as_str() {
                Some(signal) => format!("{} {signal}", e["event"].as_str().unwrap()),
                None => e["event"].as_str().unwrap().to_owned(),
            })
            .filter(|e| ["stdin_eof", "exit"].contains(&e.as_str()) || e.starts_with("signal"))
            .collect()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        use mcp_stdio_process::{
            Signal,
            signal::{signal_group, signal_pid},
        };
        let _ = signal_group(self.child.id(), Signal::SIGKILL);
        let _ = self.child.wait();
        for event in self.events() {
            let Some(pid) = event["pid"].as_u64().and_then(|p| u32::try_from(p).ok()) else {
                continue;
            };
            // Only a live fixture process (by its name) is ours to kill.
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("fixture-"));
            if ours && mcp_stdio_process::table::is_alive(pid) {
                let _ = signal_pid(pid, Signal::SIGKILL);
            }
        }
    }
}

/// The CLI checking `server` with a 60 s idle window: long enough that only
/// the signal ends the run.
fn idle_job(server: &str, graces: &str) -> Job {
    let server = fixture(server);
    Job::start(&[
        "server",
        "--check",
        "idle.alive",
        "--idle",
        "60s",
        "--eof-grace",
        graces,
        "--term-grace",
        graces,
        "--",
        &server,
    ])
}

/// Waits until the idle run's server has answered the call before the silence.
fn wait_until_idle(job: &Job) {
    job.wait_for("tools/list request", |e| {
        e["event"] == "request" && e["method"] == "tools/list"
    });
}

#[test]
fn sigint_sigterm_and_sighup_close_the_servers_with_the_ladder_and_exit_128_plus_n() {
    use nix::sys::signal::Signal;
    for (signal, code, server, expected) in [
        (
            Signal::SIGINT,
            130,
            "fixture-eof-ignoring",
            &["stdin_eof", "signal SIGTERM", "exit"][..],
        ),
        (
            Signal::SIGTERM,
            143,
            "fixture-well-behaved",
            &["stdin_eof", "exit"][..],
        ),
        (
            Signal::SIGHUP,
            129,
            "fixture-term-ignoring",
            &["stdin_eof", "signal SIGTERM"][..],
        ),
    ] {
        let mut job = idle_job(server, "300ms");
        wait_until_idle(&job);
        job.signal(signal);
        assert_eq!(
            job.exit_code(Duration::from_secs(20)),
            Some(code),
            "{signal}"
        );
        assert_eq!(job.fixtures_alive(), Vec::<u32>::new(), "{signal}");
        assert_eq!(job.fixture_events(), expected, "{signal} to {server}");
    }
}

#[test]
fn a_second_sigint_skips_to_sigkill() {
    use nix::sys::signal::Signal;
    let mut job = idle_job("fixture-term-ignoring", "60s");
    wait_until_idle(&job);
    let first = Instant::now();
    job.signal(Signal::SIGINT);
    // The ladder has begun: stdin is closed, and a 60 s EOF grace is running.
    job.wait_for("stdin_eof", |e| e["event"] == "stdin_eof");
    job.signal(Signal::SIGINT);
    assert_eq!(job.exit_code(Duration::from_secs(20)), Some(130));
    assert!(
        first.elapsed() < Duration::from_secs(30),
        "{:?}",
        first.elapsed()
    );
    assert_eq!(job.fixtures_alive(), Vec::<u32>::new());
    // SIGKILL, not SIGTERM: the fixture recorded no signal and no exit.
    assert_eq!(job.fixture_events(), ["stdin_eof"]);
}

/// The report of `--jobs 1` (every run one after another, the order of old)
/// and of the default (the runs at the same time), which must be the same.
/// The graces are 1 s rather than FAST's 500 ms: concurrent starts on a
/// loaded machine must not make a timely exit look late.
///
/// With `in_flight_races`, the in-flight case of `eof.exit` is left out of the
/// comparison: for a server that crashes on the call (`fixture-crash`) or
/// answers it slowly (`fixture-slow`), the call and stdin EOF race by the
/// design of that run (the call is sent and stdin closed at once), so which
/// comes first varies from one run to the next on a loaded machine, with
/// `--jobs 1` as well.
fn assert_jobs_do_not_change_the_report(command: &[&str], in_flight_races: bool) {
    let graces = ["--eof-grace", "1s", "--term-grace", "1s"];
    let sequential: Vec<&str> = graces.iter().copied().chain(["--jobs", "1"]).collect();
    let normalize = |mut report: Value| {
        if in_flight_races {
            for check in report["checks"].as_array_mut().into_iter().flatten() {
                for key in ["rows", "details"] {
                    if let Some(list) = check[key].as_array_mut() {
                        list.retain(|c| c["id"] != "in-flight" && c["case"] != "in-flight");
                    }
                }
                if check["id"] == "eof.exit" {
                    check["summary"] = Value::Null;
                }
            }
        }
        report
    };
    let (code_sequential, one_at_a_time) = grade(&sequential, command);
    let (code_concurrent, at_once) = grade(&graces, command);
    let (one_at_a_time, at_once) = (normalize(one_at_a_time), normalize(at_once));
    assert_eq!(
        one_at_a_time, at_once,
        "{command:?}: --jobs 1 gave\n{one_at_a_time:#}\nthe default gave\n{at_once:#}"
    );
    assert_eq!(code_sequential, code_concurrent, "{command:?}");
}

/// One test per member of the fixture family (and the variants the other
/// tests grade), so that each stays well inside the per-test time bound.
macro_rules! jobs_do_not_change_the_report {
    ($($name:ident: [$fixture:literal $(, $arg:literal)*] $($races:ident)?;)*) => {$(
        #[test]
        fn $name() {
            // A fixture named among the arguments (a launcher's grandchild) by its path too.
            let command: Vec<String> = std::iter::once($fixture)
                $(.chain([$arg]))*
                .map(|arg| if arg.starts_with("fixture-") { fixture(arg) } else { arg.to_owned() })
                .collect();
            let command: Vec<&str> = command.iter().map(String::as_str).collect();
            assert_jobs_do_not_change_the_report(&command, false $(|| stringify!($races) == "in_flight_races")?);
        }
    )*};
}

mod jobs {
    use super::*;

    jobs_do_not_change_the_report! {
        well_behaved: ["fixture-well-behaved"];
        well_behaved_legacy: ["fixture-well-behaved", "--era", "legacy"];
        eof_ignoring: ["fixture-eof-ignoring"];
        term_ignoring: ["fixture-term-ignoring"];
        launcher_eof_ignoring: ["fixture-launcher", "--", "fixture-eof-ignoring"];
        lingering: ["fixture-lingering"];
        escaping: ["fixture-escaping"];
        escaping_without_the_marker: ["fixture-escaping", "--empty-env"];
        stdout_polluting: ["fixture-stdout-polluting"];
        wedged: ["fixture-wedged", "--never-initialize"];
        crash: ["fixture-crash"] in_flight_races;
        slow: ["fixture-slow"] in_flight_races;
        stderr_flooding: ["fixture-stderr-flooding", "--bytes", "200000"];
        secret_echoing: ["fixture-secret-echoing"];
    }
}

/// The CLI run with `args`, stdout and stderr to files, killed by pid if it
/// has not exited within `within`: a check that hangs fails the test
/// instead of hanging it. Returns the exit code and stdout, or `None` when
/// it had to be killed.
fn run_bounded(args: &[&str], within: Duration) -> Option<(i32, Vec<u8>)> {
    let out = tempfile::NamedTempFile::new().unwrap();
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(out.reopen().unwrap())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("the binary starts");
    let deadline = started + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            // SIGKILL by pid: the servers it started are the caller's
            // guard's to clean up.
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read(out.path()).unwrap();
    eprintln!(
        "mcp-conformance {} -> {status:?} in {:?}\n--- stdout\n{}",
        args.join(" "),
        started.elapsed(),
        String::from_utf8_lossy(&stdout)
    );
    status.map(|s| (s.code().expect("exited"), stdout))
}

/// A server that floods `ping` requests and stops reading its stdin: the
/// checker's replies cannot be written, and must never hold the handshake
/// bound (it used to answer each queued ping, up to 5 s each, before
/// looking at its deadline, and hung with a core busy).
#[test]
fn a_ping_flood_into_an_unread_stdin_cannot_hold_the_handshake_deadline() {
    let token = unique_token("ping-flood");
    let _guard = TokenGuard(token.clone());
    let marker = format!("--marker={token}");
    let server = fixture("fixture-well-behaved");
    let mut args = vec!["server", "--json", "--stable"];
    args.extend_from_slice(FAST);
    args.extend([
        "--timeout",
        "2s",
        "--check",
        "handshake.responds",
        "--",
        &server,
        "--flood-pings",
        &marker,
    ]);
    // The check needs about the timeout plus the two graces; 60 s is far
    // beyond that on any machine, and far below a hang.
    let (code, stdout) = run_bounded(&args, Duration::from_secs(60))
        .expect("the check ended within 60 s of a ping flood (it hung)");
    let report: Value = serde_json::from_slice(&stdout).expect("--json prints JSON");
    assert_eq!(verdict(&report, "handshake.responds"), "fail", "{report:#}");
    let text = summary(&report, "handshake.responds");
    assert!(text.contains("no answer within 2s"), "{text}");
    assert_eq!(code, i32::from(exit::FAILURE));
    let left = token_processes_after(&token, Duration::from_secs(2));
    assert!(
        left.is_empty(),
        "the flooding server outlived the checker: {left:?}"
    );
}

/// A checker started for a signal test: killed by pid on drop, and every
/// process carrying its token killed too, so a failing test leaks nothing.
struct Checker {
    child: std::process::Child,
    ledger: tempfile::NamedTempFile,
    _guard: TokenGuard,
}

impl Checker {
    /// Starts `mcp-conformance server ARGS -- SERVER...`; `token` is on the
    /// server's command line (`--marker=<token>`).
    fn start(args: &[&str], server: &[&str], token: &str) -> Checker {
        let guard = TokenGuard(token.to_owned());
        let ledger = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(BIN)
            .env(mcp_fixtures::ledger::LEDGER_ENV, ledger.path())
            .arg("server")
            .args(args)
            .arg("--")
            .args(server)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("the binary starts");
        Checker {
            child,
            ledger,
            _guard: guard,
        }
    }

    /// Waits (20 s at most) until a server has recorded stdin EOF in the
    /// ledger: it is past its start-up, and one that ignores EOF lives on.
    fn wait_for_stdin_eof(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ledger = std::fs::read_to_string(self.ledger.path()).unwrap_or_default();
            if ledger
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .any(|event| event["event"] == "stdin_eof")
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no stdin_eof in the ledger: {ledger}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (20 s at most) until at least `n` processes carry the token.
    fn wait_for_carriers(&self, token: &str, n: usize) -> Vec<u32> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let found = mcp_stdio_process::Marker::from_value(token).pids();
            if found.len() >= n {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "fewer than {n} processes carry {token}: {found:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The checker's keeper: its child running `keeper` (`None` if none).
    fn keeper(&self) -> Option<(u32, Vec<String>)> {
        let me = self.child.id();
        mcp_stdio_process::table::snapshot()
            .into_iter()
            .filter(|(_, stat)| stat.ppid == me && stat.is_alive())
            .find_map(|(pid, _)| {
                let argv = mcp_stdio_process::table::cmdline(pid)?;
                (argv.get(1).map(String::as_str) == Some("keeper")).then_some((pid, argv))
            })
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        assert!(
            mcp_stdio_process::signal::signal_pid(self.child.id(), signal)
                .expect("signal the checker"),
            "the checker is alive"
        );
    }

    /// Waits up to `within` for the checker to end; its exit code (`None`
    /// when a signal killed it).
    fn wait(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "the checker is still running");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `within` until `pid` is no longer a live process.
fn gone_within(pid: u32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if !mcp_stdio_process::table::is_alive(pid) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The keeper was found, and ends within a bounded time.
fn assert_keeper_ends(keeper: Option<(u32, Vec<String>)>) {
    let (pid, _) = keeper.expect("the checker started its keeper");
    assert!(
        gone_within(pid, Duration::from_secs(10)),
        "the keeper (pid {pid}) is still running"
    );
}

/// Whether this process could make a cgroup v2 directory with `cgroup.kill`
/// where the checker would (under its own cgroup): then the checker must.
fn cgroup_v2_usable() -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let Some(mount) = mounts.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let fields: Vec<&str> = mount.split(' ').collect();
        (fs.starts_with("cgroup2 ") && fields.get(3) == Some(&"/")).then(|| fields[4].to_owned())
    }) else {
        return false;
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let Some(own) = own.lines().find_map(|line| line.strip_prefix("0::")) else {
        return false;
    };
    let probe = Path::new(&mount)
        .join(own.trim_start_matches('/'))
        .join(unique_token("probe"));
    let usable = std::fs::create_dir(&probe).is_ok() && probe.join("cgroup.kill").exists();
    let _ = std::fs::remove_dir(&probe);
    usable
}

/// SIGKILL of the checker while its servers run: the checker cannot clean
/// up, and a server that ignores the EOF its death gives would live on
/// (re-parented to init). Its keeper kills everything it started and ends.
#[test]
fn sigkill_of_the_checker_leaves_nothing_it_started_alive() {
    let token = unique_token("sigkill");
    let marker = format!("--marker={token}");
    let server = fixture("fixture-eof-ignoring");
    let mut checker = Checker::start(
        &[
            "--check",
            "eof.exit",
            "--eof-grace",
            "60s",
            "--term-grace",
            "60s",
        ],
        &[&server, &marker],
        &token,
    );
    checker.wait_for_stdin_eof();
    checker.wait_for_carriers(&token, 1);
    let keeper = checker.keeper();
    checker.signal(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(checker.wait(Duration::from_secs(5)), None);
    let left = token_processes_after(&token, Duration::from_secs(5));
    assert!(
        left.is_empty(),
        "alive after SIGKILL of the checker: {left:?}"
    );
    assert_keeper_ends(keeper);
}

/// SIGKILL of the checker while a server's sidecar runs that called
/// `setsid` and dropped the marker (exec'd with an empty environment): no
/// group or marker reaches it, only the control group the keeper made (on
/// a machine where cgroup v2 can be used, as root here; elsewhere the test
/// says so and checks the rest).
#[test]
fn sigkill_of_the_checker_kills_an_escapee_through_the_cgroup() {
    let token = unique_token("sigkill-cgroup");
    let marker = format!("--marker={token}");
    let server = fixture("fixture-escaping");
    let mut checker = Checker::start(
        &[
            "--check",
            "eof.exit",
            "--eof-grace",
            "60s",
            "--term-grace",
            "60s",
        ],
        &[&server, "--empty-env", &marker],
        &token,
    );
    // The server and its sidecar.
    checker.wait_for_stdin_eof();
    checker.wait_for_carriers(&token, 2);
    let keeper = checker.keeper();
    checker.signal(nix::sys::signal::Signal::SIGKILL);
    assert_eq!(checker.wait(Duration::from_secs(5)), None);
    let left = token_processes_after(&token, Duration::from_secs(5));
    let cgroup = keeper
        .as_ref()
        .is_some_and(|(_, argv)| argv.iter().any(|arg| arg == "--cgroup"));
    if cgroup_v2_usable() || cgroup {
        assert!(
            left.is_empty(),
            "alive after SIGKILL of the checker: {left:?}"
        );
        assert!(
            cgroup,
            "cgroup v2 is usable here, but the keeper got no cgroup"
        );
    } else {
        eprintln!("no usable cgroup v2 here: the escapee's fate is not checked ({left:?})");
    }
    assert_keeper_ends(keeper);
}

/// SIGINT and SIGTERM to the checker's pid alone (not its group) while an
/// EOF-ignoring server runs: the checker closes it with the ladder and
/// exits 130 / 143, and its keeper ends too.
#[test]
fn sigint_and_sigterm_of_the_checker_leave_nothing_it_started_alive() {
    use nix::sys::signal::Signal;
    for (signal, code) in [(Signal::SIGINT, 130), (Signal::SIGTERM, 143)] {
        let token = unique_token("interrupt");
        let marker = format!("--marker={token}");
        let server = fixture("fixture-eof-ignoring");
        let mut checker = Checker::start(
            &[
                "--check",
                "eof.exit",
                "--eof-grace",
                "500ms",
                "--term-grace",
                "500ms",
            ],
            &[&server, &marker],
            &token,
        );
        checker.wait_for_stdin_eof();
        checker.wait_for_carriers(&token, 1);
        let keeper = checker.keeper();
        checker.signal(signal);
        assert_eq!(
            checker.wait(Duration::from_secs(20)),
            Some(code),
            "{signal}"
        );
        let left = token_processes_after(&token, Duration::from_secs(5));
        assert!(
            left.is_empty(),
            "alive after {signal} of the checker: {left:?}"
        );
        assert_keeper_ends(keeper);
    }
}

/// `n` busy loops (`sh -c 'while :; do :; done'`), killed by pid and
/// reaped on drop.
struct Load(Vec<std::process::Child>);

impl Load {
    fn start(n: usize) -> Load {
        Load(
            (0..n)
                .map(|_| {
                    Command::new("/bin/sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(std::process::Stdio::null())
                        .spawn()
                        .expect("sh starts")
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn case<'a>(report: &'a Value, id: &str, name: &str) -> &'a Value {
    check(report, id)["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == name)
        .unwrap_or_else(|| panic!("no case {name} of {id} in {report:#}"))
}

/// A server that exits promptly on EOF but needs 2 s of CPU to start (an
/// interpreter loading its runtime), graded on a machine made busy: the
/// before-handshake run starts with the other runs, so its start-up takes
/// longer than the lifecycle run's did alone, and it cannot read its EOF
/// any sooner. Its grace follows its own start-up, so it passes; an
/// EOF-ignoring server under the same load still fails.
#[test]
fn a_slow_starting_server_passes_eof_exit_on_a_busy_machine() {
    let _load = Load::start(2);
    let server = fixture("fixture-well-behaved");
    let (code, report) = grade(
        &["--check", "eof.exit", "--timeout", "60s"],
        &[&server, "--startup-delay", "2s"],
    );
    let before = case(&report, "eof.exit", "before-handshake");
    assert_eq!(before["verdict"], "pass", "{report:#}");
    assert!(
        before["summary"]
            .as_str()
            .unwrap()
            .contains("grace: --eof-grace plus its start-up"),
        "{before:#}"
    );
    assert_eq!(verdict(&report, "eof.exit"), "pass", "{report:#}");
    assert_eq!(code, i32::from(exit::SUCCESS));

    let (_, report) = grade(
        &["--check", "eof.exit", "--timeout", "60s"],
        &[&fixture("fixture-eof-ignoring"), "--startup-delay", "2s"],
    );
    let before = case(&report, "eof.exit", "before-handshake");
    assert_eq!(before["verdict"], "fail", "{report:#}");
}
