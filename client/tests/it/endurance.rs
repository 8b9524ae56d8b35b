//! Endurance: many lifecycles in a row and many servers at once leave the test process exactly
//! as they found it (open fds, threads, child processes), with no zombie and no survivor.
//!
//! The counts are process-wide, and libtest runs other tests of this binary in parallel
//! threads: each test therefore re-runs this binary on itself alone (`isolated`) and measures
//! there. The outer test owns the marker, so whatever the inner run leaves behind (even if it
//! is killed) is found and killed by the outer `Case`.

use std::{
    collections::BTreeMap,
    process::{Command, Stdio},
    sync::Arc,
    time::{Duration, Instant},
};

use mcp_fixtures::locate;
use mcp_stdio_client::{CloseOutcome, ClosePath, ErrorKind, StdioClient, config::StdioConfig};
use serde_json::json;

use crate::support::{Case, args};

/// Set (to the test's name) in the re-run that does the work.
const INNER_ENV: &str = "MCP_ENDURANCE_INNER";
/// The outer test's marker, handed to the inner run with [`MARKER_PREFIX`] before it: a
/// variable whose value *is* a marker would mark the inner test process itself, which its
/// own survivor checks would then find (and kill).
const MARKER_ENV: &str = "MCP_ENDURANCE_MARKER";
const MARKER_PREFIX: &str = "outer:";
/// Bound on one inner run: the tests aim at well under a minute on a loaded 2-core machine.
const RUN_BOUND: Duration = Duration::from_secs(120);
const TIMEOUT: Duration = Duration::from_secs(20);
/// The graces of the fixture that needs an escalation: short, so a thousand cycles stay fast.
const SHORT_GRACE: Duration = Duration::from_millis(50);
/// The graces of the others: they end on EOF (or their sidecar on SIGTERM) in milliseconds,
/// and close returns as soon as they do, so a long grace costs nothing; a short one would
/// turn a loaded machine's slowness into a different close path.
const GRACE: Duration = Duration::from_secs(5);
/// EOF_GRACE of the servers closed with a call in flight (see its use).
const IN_FLIGHT_EOF_GRACE: Duration = Duration::from_secs(10);

/// Runs `body` in a fresh run of this test binary that executes only `name`, and fails if that
/// run fails or outlives [`RUN_BOUND`]. In the inner run, `body` gets a `Case` carrying the
/// outer marker.
fn isolated(name: &str, body: impl FnOnce(&Case)) {
    if std::env::var(INNER_ENV).as_deref() == Ok(name) {
        let marker = std::env::var(MARKER_ENV).expect("the outer test sets the marker");
        let case = Case {
            marker: marker.trim_start_matches(MARKER_PREFIX).to_owned(),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        body(&case);
        return;
    }
    let case = Case::new();
    let exe = std::env::current_exe().expect("the test binary");
    let child = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INNER_ENV, name)
        .env(MARKER_ENV, format!("{MARKER_PREFIX}{}", case.marker))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("re-run the test binary");
    let pid = child.id();
    let waiter = std::thread::spawn(move || child.wait_with_output());
    let deadline = Instant::now() + RUN_BOUND;
    while !waiter.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if !waiter.is_finished() {
        // Our own unreaped child: the pid cannot belong to anyone else yet.
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let output = waiter
        .join()
        .expect("waiter")
        .expect("wait for the inner run");
    assert!(
        output.status.success(),
        "the isolated run of {name} failed ({}{}):\n{}\n{}",
        output.status,
        if Instant::now() >= deadline {
            ", killed at its bound"
        } else {
            ""
        },
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // Dropping `case` kills anything marked that is still alive; the inner run already
    // asserted there was nothing.
}

/// What the process holds: the figures that must come back to where they started.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holdings {
    fds: usize,
    threads: usize,
    /// Child processes, alive or zombie.
    children: Vec<(u32, char)>,
}

fn holdings() -> Holdings {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |dir| dir.count());
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count());
    let me = std::process::id();
    let children = mcp_stdio_process::table::snapshot()
        .into_iter()
        .filter(|(_, stat)| stat.ppid == me)
        .map(|(pid, stat)| (pid, stat.state))
        .collect();
    Holdings {
        fds,
        threads,
        children,
    }
}

/// What each open fd is, for failure messages.
fn fd_targets() -> Vec<String> {
    std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .map(|fd| {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            format!(
                "{} -> {}",
                fd.file_name().to_string_lossy(),
                target.display()
            )
        })
        .collect()
}

/// Waits (bounded) for the holdings to come back to `baseline` (threads: at most as
/// many): a reaper thread ends just
/// after it reaps, so the count may lag the close by a moment. Fails with both figures.
fn assert_back_to(baseline: &Holdings) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = holdings();
        // Threads may only be fewer: an idle thread of tokio's blocking pool
        // that existed at the baseline ends after 10 s without work, which a
        // slow run (a loaded machine) reaches. A leaked thread is one more.
        if now.fds == baseline.fds
            && now.children == baseline.children
            && now.threads <= baseline.threads
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the process did not come back to where it started:\nbefore {baseline:?}\nafter  {now:?}\nopen fds now: {:?}",
            fd_targets()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The rotation: each fixture with what its call and its close must give.
#[derive(Clone, Copy, Debug)]
enum Kind {
    WellBehaved,
    EofIgnoring,
    Crash,
    Launcher,
    Sidecar,
}

const ROTATION: [Kind; 5] = [
    Kind::WellBehaved,
    Kind::EofIgnoring,
    Kind::Crash,
    Kind::Launcher,
    Kind::Sidecar,
];

impl Kind {
    fn stdio(self, case: &Case) -> StdioConfig {
        let mut stdio = match self {
            Kind::WellBehaved => case.stdio("fixture-well-behaved", &[]),
            Kind::EofIgnoring => case.stdio("fixture-eof-ignoring", &[]),
            Kind::Crash => case.stdio("fixture-crash", &["--on-call", "1", "--exit-code", "7"]),
            Kind::Launcher => case.stdio(
                "fixture-launcher",
                &["--", "{fixtures}/fixture-well-behaved", "--marker={marker}"],
            ),
            Kind::Sidecar => case.stdio("fixture-lingering", &[]),
        };
        let grace = match self {
            Kind::EofIgnoring => SHORT_GRACE,
            _ => GRACE,
        };
        stdio.eof_grace = grace;
        stdio.term_grace = grace;
        // No ledger: a thousand cycles would only grow a file nobody reads here.
        stdio.env.remove("MCP_FIXTURE_LEDGER");
        stdio
    }

    /// Checks a close outcome: the path this fixture must end by, whether the sweep had
    /// something to end, and that the child was reaped.
    fn check_close(self, name: &str, outcome: &CloseOutcome) {
        let expected: &[(ClosePath, bool)] = match self {
            Kind::WellBehaved | Kind::Launcher => &[(ClosePath::Eof, false)],
            // It ignores EOF and exits on SIGTERM; with a 50 ms grace on a loaded machine its
            // SIGTERM handler may run after the grace, and then SIGKILL was sent: both are an
            // escalation, which is what this server needs.
            Kind::EofIgnoring => &[(ClosePath::Sigterm, false), (ClosePath::Sigkill, false)],
            Kind::Crash => &[(ClosePath::Exited, false)],
            Kind::Sidecar => &[(ClosePath::Eof, true)],
        };
        assert!(
            expected.contains(&(outcome.path, outcome.group_swept)),
            "{name} ({self:?}): close ended by {outcome:?}, expected one of {expected:?}"
        );
        assert!(outcome.status.is_some(), "{name}: not reaped: {outcome:?}");
    }
}

/// One connect -> call -> close, checked.
async fn cycle(case: &Case, kind: Kind, n: usize) {
    let name = format!("{kind:?}-{n}");
    let client = StdioClient::connect(&case.server(&name, kind.stdio(case), TIMEOUT))
        .await
        .unwrap_or_else(|e| panic!("{name}: connect: {e}"));
    let call = client
        .call_tool("add", args(json!({ "a": n, "b": 1 })))
        .await;
    match kind {
        Kind::Crash => assert!(
            matches!(&call, Err(error) if error.kind() == ErrorKind::ChildExited),
            "{name}: the crash must be reported as such: {call:?}"
        ),
        _ => {
            call.unwrap_or_else(|e| panic!("{name}: call: {e}"));
        }
    }
    kind.check_close(&name, &client.close().await);
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// One cycle of each kind on a runtime of its own, before the baseline is taken: what the
/// process sets up once for good (tokio's process-wide signal pipe, two sockets; the fixture
/// directory) is not a leak, and must not count as one.
fn warm_up(case: &Case) {
    locate::fixtures_dir().expect("fixture binaries");
    let runtime = runtime();
    runtime.block_on(async {
        for (n, kind) in ROTATION.into_iter().enumerate() {
            cycle(case, kind, n).await;
        }
    });
}

#[test]
fn a_thousand_lifecycles_leave_nothing_behind() {
    isolated(
        "endurance::a_thousand_lifecycles_leave_nothing_behind",
        |case| {
            const CYCLES: usize = 1000;
            // Four lanes at once, each through the whole rotation: the same thousand cycles, in a
            // quarter of the wall time the escalation graces would cost one after another.
            const LANES: usize = 4;
            warm_up(case);
            let baseline = holdings();
            let started = Instant::now();
            let runtime = runtime();
            runtime.block_on(async {
                let lanes = (0..LANES).map(|lane| async move {
                    for n in (lane..CYCLES).step_by(LANES) {
                        cycle(case, ROTATION[n % ROTATION.len()], n).await;
                    }
                });
                futures::future::join_all(lanes).await;
            });
            drop(runtime);
            case.assert_no_survivors();
            assert_back_to(&baseline);
            eprintln!(
                "{CYCLES} cycles in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        },
    );
}

#[test]
fn sixty_four_servers_closed_at_once_with_calls_in_flight() {
    isolated(
        "endurance::sixty_four_servers_closed_at_once_with_calls_in_flight",
        |case| {
            const SERVERS: usize = 64;
            warm_up(case);
            let baseline = holdings();
            let runtime = runtime();
            runtime.block_on(async {
                // Crash is left out of the rotation here: it dies on its first call, which is
                // a different story from a close with a call in flight.
                let kinds = [
                    Kind::WellBehaved,
                    Kind::EofIgnoring,
                    Kind::Launcher,
                    Kind::Sidecar,
                ];
                let connects = (0..SERVERS).map(|n| {
                    let kind = kinds[n % kinds.len()];
                    let mut stdio = kind.stdio(case);
                    if !matches!(kind, Kind::EofIgnoring) {
                        // rmcp's server loop (which the fixtures run on) drains in-flight handlers
                        // for up to 5 s after stdin EOF before it exits: a grace above that keeps
                        // "closed by EOF" the one correct outcome.
                        stdio.eof_grace = IN_FLIGHT_EOF_GRACE;
                    }
                    // The ledger is how the test knows the calls are in flight.
                    stdio.env.insert(
                        "MCP_FIXTURE_LEDGER".into(),
                        case.ledger_path().to_string_lossy().into_owned(),
                    );
                    let server = case.server(&format!("s{n:02}"), stdio, TIMEOUT);
                    async move {
                        let client = StdioClient::connect(&server)
                            .await
                            .unwrap_or_else(|e| panic!("s{n:02}: connect: {e}"));
                        (kind, Arc::new(client))
                    }
                });
                let clients = futures::future::join_all(connects).await;

                // A call that would take far longer than the test on every server.
                let calls: Vec<_> = clients
                    .iter()
                    .map(|(_, client)| {
                        let client = client.clone();
                        tokio::spawn(async move {
                            client
                                .call_tool("sleep_ms", args(json!({ "ms": 600_000 })))
                                .await
                        })
                    })
                    .collect();
                // Every server has read its call (its ledger says so) before anything is closed;
                // under a launcher the record is the grandchild's, so they are counted, not matched.
                let deadline = Instant::now() + TIMEOUT;
                loop {
                    let in_flight = case
                        .ledger()
                        .iter()
                        .filter(|r| r["event"] == "request" && r["tool"] == "sleep_ms")
                        .count();
                    if in_flight >= SERVERS {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "only {in_flight} of {SERVERS} calls reached their server"
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }

                let closes =
                    futures::future::join_all(clients.iter().map(|(kind, client)| async move {
                        (*kind, client.name().to_owned(), client.close().await)
                    }))
                    .await;
                let mut paths = BTreeMap::<String, usize>::new();
                for (kind, name, outcome) in closes {
                    kind.check_close(&name, &outcome);
                    *paths
                        .entry(format!("{kind:?}: {}", outcome.path))
                        .or_default() += 1;
                }
                for (call, (kind, client)) in calls.into_iter().zip(&clients) {
                    // Every call ends, promptly, answered or with a reason that names its server.
                    let ended = tokio::time::timeout(TIMEOUT, call)
                        .await
                        .unwrap_or_else(|_| {
                            panic!("{}: the in-flight call never ended", client.name())
                        })
                        .expect("call task");
                    if let Err(error) = ended {
                        let reason = error.to_string();
                        assert!(
                            matches!(
                                error.kind(),
                                ErrorKind::Closed
                                    | ErrorKind::ChildExited
                                    | ErrorKind::StdoutClosed
                            ) && reason.contains(client.name()),
                            "{} ({kind:?}): the call failed without a reason naming it: {reason}",
                            client.name()
                        );
                    }
                }
                eprintln!("closes: {paths:?}");
            });
            drop(runtime);
            case.assert_no_survivors();
            assert_back_to(&baseline);
        },
    );
}
