//! The runs: each starts the server afresh, drives it to one situation
//! (after the handshake, before it, idle, a request in flight, SIGTERM) and
//! records what happened, with times. Grading is `grade.rs`'s job.

use std::time::{Duration, Instant};

use mcp_stdio_client::ChildExit;
use nix::sys::signal::Signal;
use serde_json::{Value, json};

use super::{
    era::{self, Discover, Era, Initialize},
    instance::{Instance, RequestError, SpawnError, StderrLog, Target},
    options::{Options, SlowTool},
    purity::Purity,
    survivors::{self, Survivor},
};

/// How long a SIGKILLed server may take to be reaped before it counts as surviving.
const KILL_BOUND: Duration = Duration::from_secs(2);

/// What the handshake produced.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// From spawn to the first byte on stdout, if any came before the answer.
    pub first_byte: Option<Duration>,
    /// The era the handshake completed in, and the time from spawn to its
    /// answer (for a probing client: the probe's cost included).
    pub answered: Result<(Era, Duration), HandshakeError>,
    pub server: Option<String>,
    /// `None` when the server does not offer tools.
    pub tools: Option<Result<Vec<Tool>, RequestError>>,
    /// How `server/discover` was answered, when it was asked.
    pub discover: Option<Discover>,
    /// How `initialize` was answered, when it was asked.
    pub initialize: Option<Initialize>,
}

impl Handshake {
    /// The era the handshake completed in.
    pub fn era(&self) -> Option<Era> {
        self.answered.as_ref().ok().map(|(era, _)| *era)
    }

    /// From spawn to the handshake's answer.
    pub fn time(&self) -> Option<Duration> {
        self.answered.as_ref().ok().map(|(_, d)| *d)
    }
}

/// Why no handshake completed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HandshakeError {
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("the answer to initialize is not an InitializeResult (no protocolVersion)")]
    NotInitializeResult,
    #[error("the answer to server/discover is not a correct DiscoverResult: {0}")]
    NotDiscoverResult(String),
}

/// A tool from `tools/list`.
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub schema: Value,
}

/// How a server ended after its stdin closed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Ending {
    /// Exited by itself, this long after EOF.
    Eof { status: ChildExit, after: Duration },
    /// Ignored EOF for `waited` (the EOF grace, plus the case's allowance for
    /// start-up or an in-flight call); SIGTERM to its group ended it `after`.
    Sigterm {
        status: ChildExit,
        after: Duration,
        waited: Duration,
    },
    /// Ignored EOF for `waited`, then SIGTERM; SIGKILL ended it.
    Sigkill { status: ChildExit, waited: Duration },
    /// Still alive after SIGKILL (uninterruptible, or not ours to kill).
    Survived,
    /// It had exited before stdin was closed.
    AlreadyExited { status: ChildExit },
}

/// What the lifecycle run's server needed to start: the time from spawn to
/// its handshake answer, and the CPU time its process group had used then.
#[derive(Debug, Clone, Copy, Default)]
pub struct Startup {
    pub wall: Duration,
    pub cpu: Duration,
}

/// Where the before-handshake run's start-up allowance came from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartupFrom {
    /// The lifecycle run's handshake time (the run's own start-up was shorter).
    Lifecycle,
    /// The run's own start-up: its processes were busy (running or ready to
    /// run) this long before they first all waited.
    Busy,
    /// The run's own start-up: its processes were busy until they had used
    /// the CPU the lifecycle run's server needed for its start-up (twice
    /// that, plus 50 ms): what they did after that is not start-up.
    Cpu,
    /// Still busy starting at `--timeout`.
    Bound,
}

/// The before-handshake run: how the server ended, and the grace it got.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeforeHandshake {
    pub ending: Ending,
    /// `--eof-grace` plus `startup`.
    pub grace: Duration,
    /// The start-up allowance.
    pub startup: Duration,
    pub from: StartupFrom,
    /// The lifecycle run's handshake time.
    pub lifecycle: Duration,
}

/// The main run: handshake, EOF, and what was left.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    pub handshake: Handshake,
    /// CPU time the server's process group had used when the handshake
    /// was answered.
    pub startup_cpu: Duration,
    pub ending: Ending,
    /// Processes alive after the EOF grace (the server included if it ignored
    /// EOF), with their CPU use over the sampling window.
    pub eof_survivors: Vec<Survivor>,
    /// Whether CPU was sampled (only when something survived and eof.cpu is wanted).
    pub cpu_sampled: bool,
    /// Processes left once the server itself was gone.
    pub descendants: Vec<Survivor>,
    /// `stdout.purity` over everything the server wrote.
    pub purity: Purity,
    pub stdout_total: u64,
}

/// The idle run: stays alive while nobody talks, then EOF.
#[derive(Debug, Clone)]
pub enum Idle {
    Skipped(String),
    Done {
        /// `Some` when it exited during the idle window: how, and how long after the last answer.
        exited: Option<(ChildExit, Duration)>,
        ending: Ending,
    },
}

/// The in-flight run: EOF right after a slow `tools/call`.
#[derive(Debug, Clone)]
pub enum InFlight {
    Skipped(String),
    Done {
        tool: String,
        ending: Ending,
        answered: bool,
    },
}

/// The SIGTERM run.
#[derive(Debug, Clone)]
pub enum Sigterm {
    Skipped(String),
    /// `Some` when it exited within the grace: how, and how long after SIGTERM.
    Done {
        exited: Option<(ChildExit, Duration)>,
    },
}

/// A host-death run: `host-death` (stdout, stderr and stdin closed at
/// once) or `epipe` (stdout and stderr closed, a request whose answer must
/// fail to write, then stdin closed).
#[derive(Debug, Clone)]
pub enum HostDeath {
    Skipped(String),
    Done(HostDeathEnd),
}

/// How a host-death run ended.
#[derive(Debug, Clone)]
pub struct HostDeathEnd {
    /// How the server ended. `after` is counted from the host's death (the
    /// host-death run), or from EOF (the epipe run, whose EOF comes after
    /// the failed write).
    pub ending: Ending,
    /// The epipe run only: the server exited by itself after its write
    /// failed and before stdin closed, this long after the request was sent.
    pub before_eof: Option<Duration>,
    /// Processes alive after the grace, with their CPU use.
    pub survivors: Vec<Survivor>,
    pub cpu_sampled: bool,
    /// Processes left once the server itself was gone.
    pub descendants: Vec<Survivor>,
}

/// Everything one repetition observed. A run that was not needed is `None`.
#[derive(Debug, Clone, Default)]
pub struct Repetition {
    pub lifecycle: Option<Lifecycle>,
    pub before_handshake: Option<BeforeHandshake>,
    pub idle: Option<Idle>,
    pub in_flight: Option<InFlight>,
    pub sigterm: Option<Sigterm>,
    pub host_death: Option<HostDeath>,
    pub epipe: Option<HostDeath>,
    /// How `initialize` alone was answered, when the main run's handshake
    /// was modern (else the main run asked it already).
    pub legacy: Option<Initialize>,
    /// The era the runs after the main one used (`None`: each run probed).
    pub era: Option<Era>,
    /// Each run's stderr, by run name.
    pub stderr: Vec<(&'static str, StderrLog)>,
}

/// The handshake, then `tools/list` if the server offers tools. In `era`
/// when it is known; else as a dual-era client does it: `server/discover`
/// bounded by `--probe-timeout`, and `initialize` on the same pipes when
/// that gets an error or no answer, or an answer that is not a correct
/// DiscoverResult (so the other checks still run).
pub async fn handshake(instance: &mut Instance, options: &Options, era: Option<Era>) -> Handshake {
    let mut handshake = Handshake {
        first_byte: None,
        answered: Err(HandshakeError::NotInitializeResult),
        server: None,
        tools: None,
        discover: None,
        initialize: None,
    };
    let mut result = None;
    if era != Some(Era::Legacy) {
        let bound = match era {
            None => options.probe_timeout.min(options.timeout),
            Some(_) => options.timeout,
        };
        let answer = instance
            .request(
                "server/discover",
                json!({"_meta": era::request_meta()}),
                bound,
            )
            .await;
        let after = instance.started.elapsed();
        let discover = Discover::judge(answer.clone(), after, bound);
        match (&discover, answer) {
            (Discover::Served { .. }, Ok(value)) => {
                handshake.answered = Ok((Era::Modern, after));
                result = Some((Era::Modern, value));
            }
            (Discover::Wrong(why), _) => {
                handshake.answered = Err(HandshakeError::NotDiscoverResult(why.clone()))
            }
            (_, Err(error)) => handshake.answered = Err(error.into()),
            (_, Ok(_)) => unreachable!("only a correct result is served"),
        }
        handshake.discover = Some(discover);
    }
    // No fallback when the era is known to be modern, or when the server
    // is gone (exited, stdout closed).
    let gone = matches!(handshake.discover, Some(Discover::Failed(_)));
    let fall_back = era == Some(Era::Legacy) || (era.is_none() && result.is_none() && !gone);
    if fall_back {
        let answer = instance
            .request("initialize", era::initialize_params(), options.timeout)
            .await;
        let after = instance.started.elapsed();
        let initialize = Initialize::judge(answer.clone(), after);
        match answer {
            Ok(value) if initialize.served() => {
                handshake.answered = Ok((Era::Legacy, after));
                result = Some((Era::Legacy, value));
            }
            Ok(_) => handshake.answered = Err(HandshakeError::NotInitializeResult),
            Err(error) => handshake.answered = Err(error.into()),
        }
        handshake.initialize = Some(initialize);
    }
    handshake.first_byte = instance
        .stdout()
        .first_byte
        .map(|at| at.saturating_duration_since(instance.started));
    let Some((era, result)) = result else {
        return handshake;
    };
    handshake.server = era::server_name(era, &result);
    match era {
        Era::Modern => instance.set_request_meta(era::request_meta()),
        Era::Legacy => {
            let _ = instance
                .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
                .await;
        }
    }
    if result["capabilities"]
        .get("tools")
        .is_some_and(|tools| !tools.is_null())
    {
        let listed = instance
            .request("tools/list", json!({}), options.timeout)
            .await;
        handshake.tools = Some(listed.map(|result| {
            result["tools"]
                .as_array()
                .map(|tools| {
                    tools
                        .iter()
                        .filter_map(|tool| {
                            Some(Tool {
                                name: tool["name"].as_str()?.to_owned(),
                                schema: tool["inputSchema"].clone(),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default()
        }));
    }
    handshake
}

/// Runs `body` on a fresh server instance, then ends it (killing and reaping
/// everything it started) and keeps its stderr under `run`.
async fn in_fresh_instance<T>(
    target: &Target,
    run: &'static str,
    stderr: &mut Vec<(&'static str, StderrLog)>,
    body: impl AsyncFnOnce(&mut Instance) -> T,
) -> Result<T, SpawnError> {
    let mut instance = Instance::spawn(target)?;
    let result = body(&mut instance).await;
    instance.finish().await;
    stderr.push((run, instance.stderr()));
    Ok(result)
}

/// `initialize` alone, as a legacy-only client starts: how it was answered.
pub async fn legacy(
    target: &Target,
    options: &Options,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<Initialize, SpawnError> {
    in_fresh_instance(target, "legacy", stderr, async |instance| {
        let answer = instance
            .request("initialize", era::initialize_params(), options.timeout)
            .await;
        Initialize::judge(answer, instance.started.elapsed())
    })
    .await
}

/// Closes stdin and waits the EOF grace. `None` when the server is still running.
async fn close_and_wait(instance: &mut Instance, options: &Options) -> Result<Ending, Instant> {
    if let Some((status, _)) = instance.exited() {
        return Ok(Ending::AlreadyExited { status });
    }
    let closed = instance.close_stdin().await;
    match instance.wait_exit(options.eof_grace).await {
        Some((status, at)) => Ok(Ending::Eof {
            status,
            after: at.saturating_duration_since(closed),
        }),
        None => Err(closed),
    }
}

/// SIGTERM to the group, then SIGKILL: how the server finally ended.
async fn escalate(instance: &mut Instance, options: &Options) -> Ending {
    let sent = instance.signal(Signal::SIGTERM);
    if let Some((status, at)) = instance.wait_exit(options.term_grace).await {
        return Ending::Sigterm {
            status,
            after: at.saturating_duration_since(sent),
            waited: options.eof_grace,
        };
    }
    instance.signal(Signal::SIGKILL);
    match instance.wait_exit(KILL_BOUND).await {
        Some((status, _)) => Ending::Sigkill {
            status,
            waited: options.eof_grace,
        },
        None => Ending::Survived,
    }
}

/// EOF, then escalation if needed.
async fn end(instance: &mut Instance, options: &Options) -> Ending {
    match close_and_wait(instance, options).await {
        Ok(ending) => ending,
        Err(_) => escalate(instance, options).await,
    }
}

/// The main run.
pub async fn lifecycle(
    target: &Target,
    options: &Options,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<Lifecycle, SpawnError> {
    // Not `in_fresh_instance`: stdout purity is judged after `finish`, on
    // everything the server wrote until it died.
    let mut instance = Instance::spawn(target)?;
    let handshake = handshake(&mut instance, options, None).await;
    let (_, startup_cpu) = group_load(&instance);
    let ending = close_and_wait(&mut instance, options).await.ok();
    let after = aftermath(&mut instance, options, ending, super::CheckId::EofCpu).await;
    instance.finish().await;
    stderr.push(("lifecycle", instance.stderr()));
    Ok(Lifecycle {
        handshake,
        startup_cpu,
        ending: after.ending,
        eof_survivors: after.survivors,
        cpu_sampled: after.cpu_sampled,
        descendants: after.descendants,
        purity: instance.purity(),
        stdout_total: instance.stdout().total,
    })
}

/// What the end of a run left, once stdin was closed.
struct Aftermath {
    ending: Ending,
    /// The marked processes alive after the grace (the server among them
    /// when it did not exit), CPU-sampled when `cpu_sampled`.
    survivors: Vec<Survivor>,
    cpu_sampled: bool,
    /// What outlived the server: its descendants after it exited, or what
    /// was left once it was ended.
    descendants: Vec<Survivor>,
}

/// After stdin closed and the grace was waited: `ending` is how the server
/// ended within it, if it did. Lets what it started settle (or takes what
/// is still running), samples the survivors' CPU when the `cpu` check is
/// wanted, and ends a server still running, the lifecycle and the host
/// death runs alike.
async fn aftermath(
    instance: &mut Instance,
    options: &Options,
    ending: Option<Ending>,
    cpu: super::CheckId,
) -> Aftermath {
    let marked = match ending {
        Some(_) => instance.settle(options.settle).await,
        None => instance.marked(),
    };
    let mut survivors: Vec<Survivor> = marked
        .iter()
        .map(|m| Survivor::from_marked(m, instance))
        .collect();
    let cpu_sampled = !survivors.is_empty() && options.wants(cpu);
    if cpu_sampled {
        survivors::sample_cpu(&mut survivors, options.cpu_window).await;
    }
    let (ending, descendants) = match ending {
        Some(ending) => {
            let left = survivors
                .iter()
                .filter(|s| s.pid != instance.pid)
                .cloned()
                .collect();
            (ending, left)
        }
        None => {
            let ending = escalate(instance, options).await;
            let left = instance.settle(options.settle).await;
            (
                ending,
                left.iter()
                    .map(|m| Survivor::from_marked(m, instance))
                    .collect(),
            )
        }
    };
    Aftermath {
        ending,
        survivors,
        cpu_sampled,
        descendants,
    }
}

/// How often the before-handshake run looks at its server while it may
/// still be starting.
const STARTUP_SAMPLE: Duration = Duration::from_millis(20);
/// How long the server's processes must all wait (none running or ready to
/// run) for its start-up to count as over.
const STARTUP_IDLE: Duration = Duration::from_millis(100);

/// Whether any process of the server's group (the server itself included
/// if it left it) is running, ready to run or in uninterruptible I/O, and
/// the CPU time they have used.
fn group_load(instance: &Instance) -> (bool, Duration) {
    let (pid, pgid) = (instance.pid, instance.pgid);
    let mut busy = false;
    let mut cpu = Duration::ZERO;
    for (member, stat) in mcp_stdio_process::table::snapshot() {
        if !stat.is_alive() || (member != pid && stat.pgid != pgid) {
            continue;
        }
        busy |= stat.state == 'D' || mcp_stdio_process::table::runnable(member) == Some(true);
        cpu += mcp_stdio_process::table::cpu_time(member).unwrap_or_default();
    }
    (busy, cpu)
}

/// EOF before anything was sent. The server may still be starting (a
/// launcher fetching a package, an interpreter loading its runtime), and a
/// server still starting cannot read its stdin yet. Its grace is the EOF
/// grace plus a start-up allowance: the lifecycle run's handshake time, or
/// this run's own start-up when that was longer (the other runs start at
/// the same time, and the machine may be busy: an interpreter starting
/// among them takes longer than it did alone). This run's start-up lasts
/// while its processes are busy (running or ready to run, however long
/// they wait for a CPU), and is over once they all wait for
/// `STARTUP_IDLE`, or have used twice the CPU time the lifecycle run's
/// server needed to answer its handshake (a server spinning after EOF is
/// not starting), or at `--timeout`.
pub async fn before_handshake(
    target: &Target,
    options: &Options,
    startup: Startup,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<BeforeHandshake, SpawnError> {
    in_fresh_instance(target, "before-handshake", stderr, async |instance| {
        before_handshake_end(instance, options, startup).await
    })
    .await
}

async fn before_handshake_end(
    instance: &mut Instance,
    options: &Options,
    startup: Startup,
) -> BeforeHandshake {
    let result = |ending, startup_used: Duration, from| BeforeHandshake {
        ending,
        grace: options.eof_grace + startup_used,
        startup: startup_used,
        from,
        lifecycle: startup.wall,
    };
    if let Some((status, _)) = instance.exited() {
        return result(
            Ending::AlreadyExited { status },
            startup.wall,
            StartupFrom::Lifecycle,
        );
    }
    let closed = instance.close_stdin().await;
    let bound = options.timeout.max(startup.wall);
    let cpu_budget = startup.cpu * 2 + Duration::from_millis(50);
    let mut idle_since: Option<Instant> = None;
    // This run's own start-up once it is over (from EOF), and why it is.
    let mut own: Option<(Duration, StartupFrom)> = None;
    loop {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(closed);
        if own.is_none() {
            let (busy, cpu) = group_load(instance);
            if cpu >= cpu_budget {
                own = Some((elapsed, StartupFrom::Cpu));
            } else if busy {
                idle_since = None;
            } else {
                let since = *idle_since.get_or_insert(now);
                if now.saturating_duration_since(since) >= STARTUP_IDLE {
                    own = Some((since.saturating_duration_since(closed), StartupFrom::Busy));
                }
            }
            if own.is_none() && elapsed >= bound {
                own = Some((bound, StartupFrom::Bound));
            }
        }
        let used = own.map(|(took, from)| {
            if took > startup.wall {
                (took, from)
            } else {
                (startup.wall, StartupFrom::Lifecycle)
            }
        });
        let wait = match used {
            Some((took, from)) => {
                let grace = options.eof_grace + took;
                if elapsed >= grace {
                    let options = Options {
                        eof_grace: grace,
                        ..options.clone()
                    };
                    return result(escalate(instance, &options).await, took, from);
                }
                (grace - elapsed).min(STARTUP_SAMPLE)
            }
            None => STARTUP_SAMPLE,
        };
        if let Some((status, at)) = instance.wait_exit(wait).await {
            let ending = Ending::Eof {
                status,
                after: at.saturating_duration_since(closed),
            };
            // Exited while still busy starting: its start-up lasted until then.
            let (took, from) = used.unwrap_or_else(|| {
                let took = at.saturating_duration_since(closed);
                if took > startup.wall {
                    (took, StartupFrom::Busy)
                } else {
                    (startup.wall, StartupFrom::Lifecycle)
                }
            });
            return result(ending, took, from);
        }
    }
}

/// Handshake, one call, silence for the idle window, then EOF.
pub async fn idle(
    target: &Target,
    options: &Options,
    era: Option<Era>,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<Idle, SpawnError> {
    in_fresh_instance(target, "idle", stderr, async |instance| {
        idle_inner(instance, options, era).await
    })
    .await
}

async fn idle_inner(instance: &mut Instance, options: &Options, era: Option<Era>) -> Idle {
    let handshake = handshake(instance, options, era).await;
    if let Err(error) = &handshake.answered {
        return Idle::Skipped(format!("the handshake failed: {error}"));
    }
    // The call before going idle: one the server surely answers.
    let call = match handshake.tools {
        Some(_) => {
            instance
                .request("tools/list", json!({}), options.timeout)
                .await
        }
        None => instance.request("ping", json!({}), options.timeout).await,
    };
    if let Err(error) = call
        && !matches!(error, RequestError::ErrorAnswer { .. })
    {
        return Idle::Skipped(format!("the call before going idle failed: {error}"));
    }
    let quiet_since = Instant::now();
    // An observation window: the server must *not* exit during it.
    let exited = instance
        .wait_exit(options.idle)
        .await
        .map(|(status, at)| (status, at.saturating_duration_since(quiet_since)));
    let ending = end(instance, options).await;
    Idle::Done { exited, ending }
}

/// Handshake, a slow `tools/call`, and EOF right behind it.
pub async fn in_flight(
    target: &Target,
    options: &Options,
    era: Option<Era>,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<InFlight, SpawnError> {
    in_fresh_instance(target, "in-flight", stderr, async |instance| {
        in_flight_inner(instance, options, era).await
    })
    .await
}

async fn in_flight_inner(instance: &mut Instance, options: &Options, era: Option<Era>) -> InFlight {
    let handshake = handshake(instance, options, era).await;
    if let Err(error) = &handshake.answered {
        return InFlight::Skipped(format!("the handshake failed: {error}"));
    }
    let tools = match handshake.tools {
        Some(Ok(tools)) => tools,
        Some(Err(error)) => return InFlight::Skipped(format!("tools/list failed: {error}")),
        None => return InFlight::Skipped("the server offers no tools".into()),
    };
    let Some((tool, arguments)) =
        pick_slow_tool(&tools, options.slow_tool.as_ref(), options.in_flight)
    else {
        return InFlight::Skipped(
            "no tool that can be slow (name one with --slow-tool NAME=JSON)".into(),
        );
    };
    let id = match instance
        .send_request("tools/call", json!({"name": tool, "arguments": arguments}))
        .await
    {
        Ok(id) => id,
        Err(error) => return InFlight::Skipped(format!("cannot send tools/call: {error}")),
    };
    // Finishing the call before exiting is fine: the grace covers the call too.
    let options = Options {
        eof_grace: options.eof_grace + options.in_flight,
        ..options.clone()
    };
    let ending = end(instance, &options).await;
    // The answer may still be in the pipe when the exit is seen: read it all first.
    instance.stdout_closed(Duration::from_millis(500)).await;
    let answered = instance.answer(id, Duration::from_millis(10)).await.is_ok();
    InFlight::Done {
        tool,
        ending,
        answered,
    }
}

/// The tool to keep in flight: the one named, else one whose name says it
/// waits and whose only required argument is a number.
pub fn pick_slow_tool(
    tools: &[Tool],
    named: Option<&SlowTool>,
    duration: Duration,
) -> Option<(String, Value)> {
    if let Some(named) = named {
        let arguments = named
            .arguments
            .clone()
            .map(Value::Object)
            .unwrap_or_else(|| json!({}));
        return Some((named.name.clone(), arguments));
    }
    tools.iter().find_map(|tool| {
        let lower = tool.name.to_ascii_lowercase();
        if !["sleep", "delay", "wait", "slow"]
            .iter()
            .any(|word| lower.contains(word))
        {
            return None;
        }
        let properties = tool.schema.get("properties")?.as_object()?;
        let numeric: Vec<&String> = properties
            .iter()
            .filter(|(_, schema)| {
                matches!(
                    schema.get("type").and_then(Value::as_str),
                    Some("number" | "integer")
                )
            })
            .map(|(name, _)| name)
            .collect();
        let required: Vec<&str> = tool
            .schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let [argument] = numeric.as_slice() else {
            return None;
        };
        if required.iter().any(|r| r != argument) {
            return None;
        }
        let name = argument.to_ascii_lowercase();
        let value = if name.contains("ms") || name.contains("milli") || lower.contains("ms") {
            json!(duration.as_millis() as u64)
        } else {
            json!(duration.as_secs().max(1))
        };
        Some((tool.name.clone(), json!({ argument.as_str(): value })))
    })
}

/// How long the epipe run waits between the request whose answer cannot be
/// written and closing stdin: time for the server to read the request and
/// fail its write (or less when the EOF grace is shorter).
const EPIPE_WAIT: Duration = Duration::from_millis(500);

/// Handshake, then the host dies: the read ends of stdout and stderr and
/// stdin close at the same moment.
pub async fn host_death(
    target: &Target,
    options: &Options,
    era: Option<Era>,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<HostDeath, SpawnError> {
    in_fresh_instance(target, "host-death", stderr, async |instance| {
        host_death_inner(instance, options, era, false).await
    })
    .await
}

/// Handshake, the read ends of stdout and stderr closed, a `ping` the
/// server must answer (so its write fails with EPIPE), a moment, then EOF.
pub async fn epipe(
    target: &Target,
    options: &Options,
    era: Option<Era>,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<HostDeath, SpawnError> {
    in_fresh_instance(target, "epipe", stderr, async |instance| {
        host_death_inner(instance, options, era, true).await
    })
    .await
}

async fn host_death_inner(
    instance: &mut Instance,
    options: &Options,
    era: Option<Era>,
    write_first: bool,
) -> HostDeath {
    let handshake = handshake(instance, options, era).await;
    if let Err(error) = &handshake.answered {
        return HostDeath::Skipped(format!("the handshake failed: {error}"));
    }
    if let Some((status, _)) = instance.exited() {
        return HostDeath::Skipped(format!("the server had already exited ({status})"));
    }
    let mut before_eof = None;
    let since = if write_first {
        instance.close_output().await;
        let sent = Instant::now();
        if let Err(error) = instance.send_request("ping", json!({})).await {
            return HostDeath::Skipped(format!("cannot send the request to answer: {error}"));
        }
        // A server that exits on the failed write need not wait for EOF.
        if let Some((_, at)) = instance.wait_exit(EPIPE_WAIT.min(options.eof_grace)).await {
            before_eof = Some(at.saturating_duration_since(sent));
        }
        instance.close_stdin().await
    } else {
        let died = instance.close_output().await;
        instance.close_stdin().await;
        died
    };
    let exited = match before_eof {
        Some(_) => instance.exited(),
        None => instance.wait_exit(options.eof_grace).await,
    };
    let ending = exited.map(|(status, at)| Ending::Eof {
        status,
        after: at.saturating_duration_since(since),
    });
    let after = aftermath(instance, options, ending, super::CheckId::EpipeCpu).await;
    HostDeath::Done(HostDeathEnd {
        ending: after.ending,
        before_eof,
        survivors: after.survivors,
        cpu_sampled: after.cpu_sampled,
        descendants: after.descendants,
    })
}

/// Handshake, then SIGTERM with stdin still open.
pub async fn sigterm(
    target: &Target,
    options: &Options,
    era: Option<Era>,
    stderr: &mut Vec<(&'static str, StderrLog)>,
) -> Result<Sigterm, SpawnError> {
    in_fresh_instance(target, "sigterm", stderr, async |instance| {
        let handshake = handshake(instance, options, era).await;
        if let Err(error) = &handshake.answered {
            return Sigterm::Skipped(format!("the handshake failed: {error}"));
        }
        if let Some((status, _)) = instance.exited() {
            return Sigterm::Skipped(format!("the server had already exited ({status})"));
        }
        let sent = instance.signal(Signal::SIGTERM);
        let exited = instance
            .wait_exit(options.term_grace)
            .await
            .map(|(status, at)| (status, at.saturating_duration_since(sent)));
        Sigterm::Done { exited }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, schema: Value) -> Tool {
        Tool {
            name: name.into(),
            schema,
        }
    }

    #[test]
    fn a_sleep_tool_with_one_numeric_argument_is_picked() {
        let tools = [
            tool("echo", json!({"properties": {"text": {"type": "string"}}})),
            tool(
                "sleep_ms",
                json!({"properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
            ),
        ];
        let picked = pick_slow_tool(&tools, None, Duration::from_millis(300)).unwrap();
        assert_eq!(picked, ("sleep_ms".into(), json!({"ms": 300})));
        let seconds = [tool(
            "wait",
            json!({"properties": {"seconds": {"type": "number"}}}),
        )];
        assert_eq!(
            pick_slow_tool(&seconds, None, Duration::from_millis(300))
                .unwrap()
                .1,
            json!({"seconds": 1})
        );
        let none = [tool(
            "wait",
            json!({"properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
        )];
        assert!(pick_slow_tool(&none, None, Duration::from_secs(1)).is_none());
    }
}
