//! `mcp-conformance server`: grades any MCP stdio server's lifecycle
//! (handshake, stdout purity, stdin EOF, descendants, SIGTERM, idling) by
//! running it several times, each in a fresh process group with a marker,
//! in the best protocol era it serves (modern `server/discover`, else legacy
//! `initialize`).
//!
//! `docs/server-check.md` describes the checks and their verdicts.

pub mod era;
pub mod grade;
pub mod instance;
pub mod options;
pub mod purity;
pub mod report;
pub mod runs;
pub mod survivors;

use std::{path::PathBuf, pin::Pin};

use futures::future::join_all;
use mcp_conformance_report::exit;
use tokio::sync::Semaphore;

pub use instance::Target;
pub use options::{Args, CheckId, Options, OptionsError};
pub use report::{Fmt, Report};

use crate::{
    interrupt::{Interrupt, Interrupts},
    keeper, observer,
};

/// Why a check could not be run at all (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum ServerCheckError {
    /// The options are unusable.
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(
        "no server command given; usage: mcp-conformance server [OPTIONS] -- <COMMAND> [ARGS]..."
    )]
    /// Nothing after `--`.
    NoCommand,
    /// A bare COMMAND that no directory of PATH holds, in the words of the
    /// command line (the client's own message speaks of a config file's
    /// DIR, ENV.PATH and `${VAR}`, which this command line has none of).
    #[error(
        "`{command}` is not on the PATH ({searched}); fix: install it or add its directory \
         to PATH, or give the program's path (`./{command}` for one in the current directory, \
         or an absolute path)"
    )]
    NotOnPath {
        /// COMMAND as given.
        command: String,
        /// The PATH directories searched, for the message.
        searched: String,
    },
    /// A COMMAND with a `/` that names no executable file.
    #[error(
        "`{command}` is {}, which does not exist or is not an executable file; fix: check the \
         path (a relative one is taken from the current directory)",
        resolved.display()
    )]
    NotExecutable {
        /// COMMAND as given.
        command: String,
        /// The path it resolved to.
        resolved: PathBuf,
    },
    /// COMMAND could not be resolved for another reason.
    #[error("cannot find the server command")]
    Resolve(#[source] mcp_stdio_client::CommandPathError),
    /// The server could not be started.
    #[error(transparent)]
    Spawn(#[from] instance::SpawnError),
    /// The async runtime could not be started.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The signal handlers could not be installed.
    #[error("cannot listen for SIGINT, SIGTERM and SIGHUP")]
    Signals(#[source] std::io::Error),
    /// `--junit PATH` could not be written.
    #[error("cannot write the JUnit report to {}", path.display())]
    Junit {
        /// The path given.
        path: PathBuf,
        /// Why it could not be written.
        #[source]
        source: std::io::Error,
    },
}

/// Resolves COMMAND the way the client does (absolute, relative to the
/// current directory, or looked up in PATH), so "not found" is a clear
/// usage error instead of a failed check.
pub fn target(command: &[String]) -> Result<Target, ServerCheckError> {
    let (program, args) = command.split_first().ok_or(ServerCheckError::NoCommand)?;
    let resolved = mcp_stdio_client::config::StdioConfig::new(program.clone())
        .resolve_command()
        .map_err(in_cli_terms)?;
    Ok(Target {
        program: resolved,
        args: args.to_vec(),
        display: program.clone(),
    })
}

/// The client's resolution error, said of a command line rather than of a
/// configured server.
fn in_cli_terms(error: mcp_stdio_client::CommandPathError) -> ServerCheckError {
    use mcp_stdio_client::{CommandPathError, SearchedPath};
    match error {
        CommandPathError::NotFound { command, searched } => ServerCheckError::NotOnPath {
            command,
            searched: match searched {
                SearchedPath::Inherited(path) => format!("PATH={path}"),
                SearchedPath::Unset => "PATH is not set".to_owned(),
                // No ENV on this command line; said plainly all the same.
                other => other.to_string(),
            },
        },
        CommandPathError::BadPath { command, resolved } => {
            ServerCheckError::NotExecutable { command, resolved }
        }
        CommandPathError::Empty => ServerCheckError::NoCommand,
        other => ServerCheckError::Resolve(other),
    }
}

/// Runs the selected checks `options.repeat` times and grades them.
pub fn run(target: &Target, options: &Options, fmt: Fmt) -> Result<Report, ServerCheckError> {
    let runtime = runtime()?;
    let reps = runtime.block_on(run_all(target, options))?;
    Ok(report(target, options, fmt, &reps))
}

/// Like [`run`], for the CLI: on SIGINT, SIGTERM or SIGHUP every server
/// started is closed with the close ladder (stdin EOF, `--eof-grace`,
/// SIGTERM to its group, `--term-grace`, SIGKILL; a second signal skips to
/// SIGKILL) and the signal is returned instead of a report.
pub fn run_interruptible(
    target: &Target,
    options: &Options,
    fmt: Fmt,
) -> Result<Result<Report, Interrupt>, ServerCheckError> {
    let runtime = runtime()?;
    let reps = runtime.block_on(async {
        let mut interrupts = Interrupts::install().map_err(ServerCheckError::Signals)?;
        // Boxed so it can be dropped (its instances swept) at a chosen moment.
        let mut run = Box::pin(run_all(target, options));
        let interrupt = tokio::select! {
            reps = &mut run => return reps.map(Ok),
            interrupt = interrupts.recv() => interrupt,
        };
        // The run is no longer polled; its servers are still alive and
        // their output is still drained (the readers are tasks of their own).
        eprintln!(
            "mcp-conformance server: {}: closing the servers it started ({} again kills them at once)",
            interrupt.name(),
            interrupt.name()
        );
        tokio::select! {
            () = instance::close_live(options.eof_grace, options.term_grace) => {}
            again = interrupts.recv() => {
                eprintln!("mcp-conformance server: {}: killing the servers it started", again.name());
                instance::kill_live();
            }
        }
        // Dropping the run drops its instances, which sweep what is left.
        drop(run);
        Ok(Err(interrupt))
    })?;
    Ok(reps.map(|reps| report(target, options, fmt, &reps)))
}

/// The runtime the runs use. Orphans of the server (a launcher's
/// grandchild, a sidecar) re-parent to this process from here on, so they
/// can be found, killed and reaped.
fn runtime() -> Result<tokio::runtime::Runtime, ServerCheckError> {
    observer::become_subreaper();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServerCheckError::Runtime)
}

/// Grades what the runs observed into the report.
fn report(target: &Target, options: &Options, fmt: Fmt, reps: &[runs::Repetition]) -> Report {
    let checks = grade::grade(reps, options, fmt);
    let server = reps
        .iter()
        .filter_map(|r| r.lifecycle.as_ref())
        .find_map(|l| l.handshake.server.clone());
    let (eras, era) = eras(reps);
    let command = if fmt.stable {
        std::path::Path::new(&target.display)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| target.display.clone())
    } else {
        target.display.clone()
    };
    Report {
        command,
        args: target.args.len(),
        server,
        eras,
        era,
        repeat: options.repeat,
        options: report::OptionsView {
            timeout_ms: options.timeout.as_millis(),
            probe_timeout_ms: options.probe_timeout.as_millis(),
            latency_bound_ms: options.latency_bound.as_millis(),
            eof_grace_ms: options.eof_grace.as_millis(),
            term_grace_ms: options.term_grace.as_millis(),
            idle_ms: options.idle.as_millis(),
            settle_ms: options.settle.as_millis(),
            cpu_window_ms: options.cpu_window.as_millis(),
            busy_percent: options.busy_percent,
        },
        checks,
        stderr: reps
            .iter()
            .enumerate()
            .flat_map(|(i, rep)| {
                rep.stderr.iter().map(move |(run, log)| {
                    let name = if options.repeat > 1 {
                        format!("{run} #{}", i + 1)
                    } else {
                        (*run).to_owned()
                    };
                    (name, log.clone())
                })
            })
            .collect(),
    }
}

/// The eras the server serves (as seen in the first repetition that asked
/// them), and the one the runs used.
fn eras(reps: &[runs::Repetition]) -> (Vec<era::Era>, Option<era::Era>) {
    let Some(rep) = reps.iter().find(|r| r.lifecycle.is_some()) else {
        return (Vec::new(), None);
    };
    let handshake = &rep.lifecycle.as_ref().expect("found above").handshake;
    let mut eras = Vec::new();
    if handshake
        .discover
        .as_ref()
        .is_some_and(era::Discover::served)
    {
        eras.push(era::Era::Modern);
    }
    let legacy = handshake.initialize.as_ref().or(rep.legacy.as_ref());
    if legacy.is_some_and(era::Initialize::served) {
        eras.push(era::Era::Legacy);
    }
    (eras, handshake.era())
}

/// Runs the repetitions: one after another with `--jobs 1`, else at the
/// same time (their server starts overlap), with at most `--jobs` servers
/// running at once.
async fn run_all(
    target: &Target,
    options: &Options,
) -> Result<Vec<runs::Repetition>, ServerCheckError> {
    let limit = Semaphore::new(options.jobs.unwrap_or(Semaphore::MAX_PERMITS));
    let reps = (0..options.repeat).map(|_| repetition(target, options, &limit));
    if options.jobs == Some(1) {
        let mut done = Vec::new();
        for rep in reps {
            done.push(rep.await?);
        }
        return Ok(done);
    }
    join_all(reps).await.into_iter().collect()
}

/// What one run after the lifecycle run produced, for its field of the
/// repetition.
enum Part {
    Legacy(era::Initialize),
    BeforeHandshake(runs::BeforeHandshake),
    Idle(runs::Idle),
    InFlight(runs::InFlight),
    HostDeath(runs::HostDeath),
    Epipe(runs::HostDeath),
    Sigterm(runs::Sigterm),
}

/// A run's part and the stderr of the server it started.
type PartFuture<'a> = Pin<
    Box<
        dyn Future<
                Output = Result<(Part, Vec<(&'static str, instance::StderrLog)>), ServerCheckError>,
            > + 'a,
    >,
>;

/// One repetition: the lifecycle run first (the others use the era it
/// found, and are skipped when its handshake failed), then every other run,
/// each an independent server start in its own process group with its own
/// marker: one after another in this order with `--jobs 1`, else at the
/// same time. Either way the repetition is assembled in the same order, so
/// the report is the same.
async fn repetition(
    target: &Target,
    options: &Options,
    limit: &Semaphore,
) -> Result<runs::Repetition, ServerCheckError> {
    use CheckId as C;
    let wants = |ids: &[CheckId]| ids.iter().any(|id| options.wants(*id));
    let permit = || async {
        limit
            .acquire()
            .await
            .expect("the semaphore is never closed")
    };
    let mut rep = runs::Repetition::default();
    let mut stderr = Vec::new();
    let mut handshake_failed = None;
    if wants(&[
        C::HandshakeResponds,
        C::HandshakeDiscover,
        C::HandshakeLegacy,
        C::HandshakeLatency,
        C::StdoutPurity,
        C::EofExit,
        C::EofDescendants,
        C::EofCpu,
        C::Stderr,
    ]) {
        let _permit = permit().await;
        let lifecycle = runs::lifecycle(target, options, &mut stderr).await?;
        if let Err(error) = &lifecycle.handshake.answered {
            handshake_failed = Some(format!("the handshake failed in the first run: {error}"));
        }
        // The other runs use the era found here, without probing again.
        rep.era = lifecycle.handshake.era();
        rep.lifecycle = Some(lifecycle);
    }
    let era = rep.era;
    let startup = rep
        .lifecycle
        .as_ref()
        .map(|l| runs::Startup {
            wall: l.handshake.time().unwrap_or_default(),
            cpu: l.startup_cpu,
        })
        .unwrap_or_default();

    // A run that starts a server: takes a permit, keeps its own stderr.
    macro_rules! started {
        ($wrap:expr, |$stderr:ident| $run:expr) => {{
            let future: PartFuture<'_> = Box::pin(async move {
                let _permit = permit().await;
                let mut $stderr = Vec::new();
                let value = $run.await?;
                Ok::<_, ServerCheckError>(($wrap(value), $stderr))
            });
            future
        }};
    }
    // A run skipped because the handshake failed: starts nothing.
    let skipped =
        |part: Part| -> PartFuture<'_> { Box::pin(async move { Ok((part, Vec::new())) }) };

    let mut parts: Vec<PartFuture<'_>> = Vec::new();
    // A modern handshake never asked `initialize`: ask it alone, as a
    // legacy-only client would.
    if wants(&[C::HandshakeLegacy]) && era == Some(era::Era::Modern) {
        parts.push(started!(Part::Legacy, |e| runs::legacy(
            target, options, &mut e
        )));
    }
    if wants(&[C::EofExit]) {
        parts.push(started!(Part::BeforeHandshake, |e| runs::before_handshake(
            target, options, startup, &mut e
        )));
    }
    // A server that cannot complete the handshake would make each of the
    // following runs wait the whole timeout again: skip them, saying why.
    if wants(&[C::IdleAlive, C::EofExit]) {
        parts.push(match &handshake_failed {
            Some(why) => skipped(Part::Idle(runs::Idle::Skipped(why.clone()))),
            None => started!(Part::Idle, |e| runs::idle(target, options, era, &mut e)),
        });
    }
    if wants(&[C::EofExit]) {
        parts.push(match &handshake_failed {
            Some(why) => skipped(Part::InFlight(runs::InFlight::Skipped(why.clone()))),
            None => started!(Part::InFlight, |e| runs::in_flight(
                target, options, era, &mut e
            )),
        });
    }
    // The host-death runs are independent of the others: only the era
    // found above is reused.
    if wants(&[C::HostDeathExit, C::EpipeCpu]) {
        parts.push(match &handshake_failed {
            Some(why) => skipped(Part::HostDeath(runs::HostDeath::Skipped(why.clone()))),
            None => started!(Part::HostDeath, |e| runs::host_death(
                target, options, era, &mut e
            )),
        });
    }
    if wants(&[C::EpipeExit, C::EpipeCpu]) {
        parts.push(match &handshake_failed {
            Some(why) => skipped(Part::Epipe(runs::HostDeath::Skipped(why.clone()))),
            None => started!(Part::Epipe, |e| runs::epipe(target, options, era, &mut e)),
        });
    }
    if wants(&[C::SigtermExit]) {
        parts.push(match &handshake_failed {
            Some(why) => skipped(Part::Sigterm(runs::Sigterm::Skipped(why.clone()))),
            None => started!(Part::Sigterm, |e| runs::sigterm(
                target, options, era, &mut e
            )),
        });
    }

    // An orphan that dropped the marker (exec'd with an empty environment,
    // re-parented to this process) cannot be told apart from another run's:
    // when the lifecycle run saw one, the other runs go one at a time, so
    // each is found by the run that made it, as with `--jobs 1`.
    let dropped_marker = rep.lifecycle.as_ref().is_some_and(|l| {
        l.eof_survivors
            .iter()
            .chain(&l.descendants)
            .any(|s| s.unmarked)
    });
    let results = if options.jobs == Some(1) || dropped_marker {
        let mut results = Vec::new();
        for part in parts {
            // As before: the first run that cannot start ends the check.
            let result = part.await;
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        results
    } else {
        join_all(parts).await
    };
    for result in results {
        let (part, mut logs) = result?;
        stderr.append(&mut logs);
        match part {
            Part::Legacy(legacy) => rep.legacy = Some(legacy),
            Part::BeforeHandshake(ending) => rep.before_handshake = Some(ending),
            Part::Idle(idle) => rep.idle = Some(idle),
            Part::InFlight(in_flight) => rep.in_flight = Some(in_flight),
            Part::HostDeath(host_death) => rep.host_death = Some(host_death),
            Part::Epipe(epipe) => rep.epipe = Some(epipe),
            Part::Sigterm(sigterm) => rep.sigterm = Some(sigterm),
        }
    }
    rep.stderr = stderr;
    Ok(rep)
}

/// The whole subcommand: parse, run, print, write JUnit; returns the exit code.
pub fn main(args: Args) -> u8 {
    // This process starts nothing but the servers it checks: whatever is
    // re-parented to it is theirs, to be found and killed.
    instance::all_orphans_are_servers();
    // First, before any server: the keeper kills what this process started
    // if this process is killed (SIGKILL included) before it can.
    keeper::start("mcp-conformance server", true);
    let outcome = main_inner(&args);
    sweep_orphans();
    keeper::finish();
    match outcome {
        Ok(Ok(report)) => {
            if args.json {
                print!("{}", report.to_json());
            } else {
                print!("{}", report.to_table(args.verbose));
            }
            if report.passed() {
                exit::SUCCESS
            } else {
                exit::FAILURE
            }
        }
        Ok(Err(interrupt)) => interrupt.exit_code(),
        Err(error) => {
            eprintln!(
                "mcp-conformance server: error: {}",
                mcp_stdio_client::error_chain(&error)
            );
            exit::USAGE
        }
    }
}

fn main_inner(args: &Args) -> Result<Result<Report, Interrupt>, ServerCheckError> {
    let options = Options::from_args(args)?;
    let target = target(&args.command)?;
    let report = match run_interruptible(
        &target,
        &options,
        Fmt {
            stable: args.stable,
        },
    )? {
        Ok(report) => report,
        Err(interrupt) => return Ok(Err(interrupt)),
    };
    if let Some(path) = &args.junit {
        std::fs::write(path, report.to_junit()).map_err(|source| ServerCheckError::Junit {
            path: path.clone(),
            source,
        })?;
    }
    Ok(Ok(report))
}

/// The CLI's last act: every instance has killed what it started, but a
/// process re-parented to the CLI after that (a daemon's late double fork)
/// is killed and reaped here, so nothing a checked server started outlives
/// the checker. Only children of this process are touched: their pids
/// cannot be reused before this process reaps them.
fn sweep_orphans() {
    let me = std::process::id();
    let keeper = keeper::pid();
    let children = || -> Vec<(u32, char)> {
        mcp_stdio_process::table::snapshot()
            .into_iter()
            .filter(|(pid, stat)| stat.ppid == me && Some(*pid) != keeper)
            .map(|(pid, stat)| (pid, stat.state))
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut killed = std::collections::BTreeSet::new();
    loop {
        let alive: Vec<u32> = children()
            .into_iter()
            .filter(|(_, state)| *state != 'Z')
            .map(|(pid, _)| pid)
            .collect();
        if alive.is_empty() || std::time::Instant::now() > deadline {
            break;
        }
        for pid in alive {
            let _ = mcp_stdio_process::signal::signal_pid(pid, mcp_stdio_process::Signal::SIGKILL);
            killed.insert(pid);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let zombies = children().into_iter().filter(|(_, state)| *state == 'Z');
    observer::reap(
        killed.into_iter().chain(zombies.map(|(pid, _)| pid)),
        deadline,
    );
}
