//! `mcp-conformance connect`: load a config (YAML or desktop JSON), connect,
//! do one thing (list tools, call a tool, or nothing), close, and print every
//! lifecycle event with its time and how each server's close ended. For
//! people reproducing a lifecycle problem by hand, on any real server.

use std::{io::Write, path::PathBuf, time::Duration};

use mcp_stdio_client::{
    Connection, Event, EventKind, ServerClose, Session, SessionOptions, config::Config,
};
use serde_json::Value;

use mcp_stdio_client::error_chain as chain;
use mcp_stdio_process::signal::{self, Signal};

use mcp_conformance_report::exit;

use crate::interrupt::{Interrupt, Interrupts};

/// Connect to configured servers and drive them by hand.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file: YAML with MCP_SERVERS, or desktop-host JSON with mcpServers.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Only this server (default: every server in the config).
    #[arg(long, value_name = "NAME")]
    pub server: Option<String>,
    /// Bound on tools/list across servers.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub discovery_timeout: Duration,
    /// More logs on stderr: -v debug, -vv trace (secrets stay redacted).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// List every server's tools as mcp_<server>_<tool>.
    ListTools,
    /// Call a tool: its qualified name (mcp_<server>_<tool>), or its plain
    /// name with --server; arguments as a JSON object.
    Call {
        tool: String,
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// Connect and close: the lifecycle alone.
    Close,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    mcp_stdio_client::config::parse_duration(text).map_err(|e| e.to_string())
}

/// Runs the command; returns the process exit code.
pub fn run(args: Args) -> u8 {
    crate::logging::install(args.verbose);
    let runtime = match crate::runtime::multi_thread() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return exit::FAILURE;
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: Args) -> u8 {
    // First of all: from here on SIGINT, SIGTERM and SIGHUP no longer kill
    // the CLI outright (which would leave the servers, each in its own
    // process group, running for ever) but close what it started.
    let mut interrupts = match Interrupts::install() {
        Ok(interrupts) => interrupts,
        Err(error) => {
            eprintln!("error: cannot listen for SIGINT, SIGTERM and SIGHUP: {error}");
            return exit::FAILURE;
        }
    };
    let mut config = match load_config(&args.config, &mut interrupts).await {
        Ok(Ok(config)) => config,
        Ok(Err(error)) => {
            eprintln!("error: {error}");
            return exit::USAGE;
        }
        Err(signal) => {
            eprintln!(
                "mcp-conformance: {}: stopped while reading {} (nothing was started)",
                signal.name(),
                args.config.display()
            );
            return signal.exit_code();
        }
    };
    if let Some(name) = &args.server {
        let Some(server) = config.servers.remove(name) else {
            let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
            eprintln!(
                "error: no server named `{name}` in {}; it has: {}",
                args.config.display(),
                known.join(", ")
            );
            return exit::USAGE;
        };
        config.servers = [(name.clone(), server)].into_iter().collect();
    }
    // Every server carries this process's anchor, and the keeper ends
    // whatever carries it if this process is SIGKILLed before its close.
    if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
        for server in config.servers.values_mut() {
            if let mcp_stdio_client::config::Transport::Stdio(stdio) = &mut server.transport {
                stdio
                    .env
                    .insert(mcp_stdio_process::ANCHOR_ENV.into(), anchor.to_string());
            }
        }
    }
    let _keeper = crate::keeper::start_until_dropped("mcp-conformance connect");
    let arguments = match &args.action {
        Action::Call { arguments, .. } => match serde_json::from_str::<Value>(arguments) {
            Ok(Value::Object(map)) => Some(map),
            _ => {
                eprintln!(
                    "error: tool arguments must be a JSON object, e.g. '{{\"text\": \"hi\"}}'"
                );
                return exit::USAGE;
            }
        },
        _ => None,
    };

    let mut out = std::io::stdout().lock();
    // The first signal, once one has arrived: it decides the exit code.
    let mut interrupted: Option<Interrupt> = None;
    let mut session = {
        let stop = async {
            let signal = interrupts.recv().await;
            announce(signal);
            interrupted = Some(signal);
        };
        // The harness contains its servers: what one starts outside its
        // process group is ended at close too.
        let options = SessionOptions {
            contain: mcp_stdio_client::Contain::On,
            ..SessionOptions::default()
        };
        Session::build_until(&config, &options, stop).await
    };
    for failure in session.failures() {
        let _ = writeln!(
            out,
            "{}: did not start: {}",
            failure.server,
            chain(&failure.error)
        );
    }
    for name in session.interrupted() {
        let _ = writeln!(
            out,
            "{name}: interrupted while starting; killed (it had no session to close yet)"
        );
    }
    let mut code = if session.failures().is_empty() {
        exit::SUCCESS
    } else {
        exit::FAILURE
    };
    if session.servers().next().is_none() {
        if let Some(signal) = interrupted {
            return signal.exit_code();
        }
        let _ = writeln!(out, "no server started");
        return exit::FAILURE;
    }

    if interrupted.is_none() {
        // A signal abandons the action (a call in flight is dropped) and
        // goes straight to the close.
        tokio::select! {
            action = act(&args, &mut session, arguments, &mut out) => code = code.max(action),
            signal = interrupts.recv() => {
                announce(signal);
                interrupted = Some(signal);
            }
        }
    }

    let (closes, killed) = close_all(&session, &mut interrupts, &mut interrupted).await;
    let _ = writeln!(out);
    for (name, close) in &closes {
        let (line, reaped) = describe_close(name, close);
        let killed = if killed {
            "; its group was killed at once on the second signal"
        } else {
            ""
        };
        let _ = writeln!(out, "{line}{killed}");
        if !reaped {
            eprintln!(
                "error: {name} could not be reaped after SIGKILL; its process may still be running"
            );
            code = exit::FAILURE;
        }
        if let Some(Connection::Stdio(client)) = session.connection(name) {
            for event in client.events() {
                let _ = writeln!(out, "  {}", describe(&event));
            }
        }
    }
    interrupted.map_or(code, Interrupt::exit_code)
}

/// Loads the config while listening for the signals, or the signal that came first.
///
/// `--config` may name a FIFO or `/dev/stdin` (`--config <(make-config)`), whose open and read
/// block until a writer comes, for ever if none does; a signal must end the CLI then too. The
/// read runs on a thread of its own, not in tokio's blocking pool (which the runtime waits for
/// when it shuts down): on a signal the thread is left blocked and ends with the process.
/// The error is the whole message (the config error and its causes).
async fn load_config(
    path: &std::path::Path,
    interrupts: &mut Interrupts,
) -> Result<Result<Config, String>, Interrupt> {
    let (send, loaded) = tokio::sync::oneshot::channel();
    let owned = path.to_path_buf();
    let reader = std::thread::Builder::new()
        .name("config-read".into())
        .spawn(move || {
            let _ = send.send(Config::load(&owned).map_err(|error| chain(&error)));
        });
    if let Err(error) = reader {
        return Ok(Err(format!(
            "cannot start a thread to read {}: {error}",
            path.display()
        )));
    }
    tokio::select! {
        loaded = loaded => Ok(loaded.unwrap_or_else(|_| {
            Err(format!("reading {} failed unexpectedly", path.display()))
        })),
        signal = interrupts.recv() => Err(signal),
    }
}

/// Does what was asked between connect and close; returns the exit code it
/// earned.
async fn act(
    args: &Args,
    session: &mut Session,
    arguments: Option<serde_json::Map<String, Value>>,
    out: &mut impl Write,
) -> u8 {
    match &args.action {
        Action::ListTools => {
            let tools = session.discover_tools(args.discovery_timeout).await;
            for tool in tools {
                let flags = format!(
                    "{}{}",
                    if tool.requires_consent {
                        "consent"
                    } else {
                        "no-consent"
                    },
                    if tool.serial {
                        ", serial"
                    } else {
                        ", parallel"
                    }
                );
                let description = short(tool.tool.description.as_deref().unwrap_or_default());
                let _ = writeln!(out, "{}  [{flags}]  {description}", tool.qualified_name);
            }
            exit::SUCCESS
        }
        Action::Call { tool, .. } => {
            session.discover_tools(args.discovery_timeout).await;
            let qualified = match (&args.server, tool.starts_with("mcp_")) {
                (Some(server), false) => mcp_stdio_client::qualified_name(server, tool),
                _ => tool.clone(),
            };
            match session.call(&qualified, arguments).await {
                Ok(result) => {
                    let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                    for block in value["content"].as_array().into_iter().flatten() {
                        match block["text"].as_str() {
                            Some(text) => {
                                let _ = writeln!(out, "{text}");
                            }
                            None => {
                                let _ = writeln!(out, "{block}");
                            }
                        }
                    }
                    if result.is_error == Some(true) {
                        let _ = writeln!(out, "(the tool reported an error)");
                        return exit::FAILURE;
                    }
                    exit::SUCCESS
                }
                Err(error) => {
                    let _ = writeln!(out, "{qualified}: {}", chain(&error));
                    exit::FAILURE
                }
            }
        }
        Action::Close => exit::SUCCESS,
    }
}

/// Closes every server with the normal ladder. A signal while that runs is
/// the user's "now": the first one (when the close was not itself started by
/// a signal) is only recorded, since the close is already under way; any
/// later one kills the servers' process groups at once, and the ladder then
/// sees its children gone. Returns the closes, and whether the groups were
/// killed that way.
async fn close_all(
    session: &Session,
    interrupts: &mut Interrupts,
    interrupted: &mut Option<Interrupt>,
) -> (Vec<(String, ServerClose)>, bool) {
    let mut close = std::pin::pin!(session.close());
    let mut killed = false;
    loop {
        tokio::select! {
            biased;
            closes = &mut close => return (closes, killed),
            signal = interrupts.recv() => {
                if interrupted.is_none() {
                    announce(signal);
                    *interrupted = Some(signal);
                } else {
                    eprintln!(
                        "mcp-conformance: {} again: killing the servers' process groups",
                        signal.name()
                    );
                    kill_groups(session);
                    killed = true;
                }
            }
        }
    }
}

/// SIGKILL to the process group of every stdio server not yet reaped. A
/// server whose leader was reaped is left to its close's group sweep: its
/// group id may no longer be its own. The group the client reports is
/// signalled only when the process table confirms it: its leader is a child
/// of this process (unreaped, so its pid cannot have been recycled), never
/// 0 or 1, so a wrong report cannot turn into killpg(0) (this process's own
/// group) or kill(-1) (every process).
fn kill_groups(session: &Session) {
    let me = std::process::id();
    for name in session.servers() {
        if let Some(Connection::Stdio(client)) = session.connection(name)
            && client.exit_status().is_none()
        {
            let pgid = client.pgid();
            if pgid > 1 && crate::observer::parent_of(pgid) == Some(me) {
                let _ = signal::signal_group(client.pgid(), Signal::SIGKILL);
            }
        }
    }
}

fn announce(signal: Interrupt) {
    eprintln!(
        "mcp-conformance: {}: closing the servers (send it again to kill them at once)",
        signal.name()
    );
}

/// `name: closed by eof in 12 ms (exit status 0)`, and false when the
/// server could not be reaped: its process may still be running, which is a
/// failure of the run.
fn describe_close(name: &str, close: &ServerClose) -> (String, bool) {
    match close {
        ServerClose::Stdio(outcome) => {
            let status = outcome
                .status
                .map_or("NOT REAPED: it may still be running".to_owned(), |s| {
                    s.to_string()
                });
            let mut swept = if outcome.group_swept {
                "; killed what was left in its group".to_owned()
            } else {
                String::new()
            };
            if let Some(contained) = outcome.contained.filter(|c| c.killed > 0) {
                swept.push_str(&format!(
                    "; killed {} process(es) it started outside its group ({})",
                    contained.killed,
                    contained.method.as_str()
                ));
            }
            (
                format!(
                    "{name}: closed by {} in {} ms ({status}){swept}",
                    outcome.path,
                    outcome.elapsed.as_millis()
                ),
                outcome.status.is_some(),
            )
        }
        ServerClose::Http => (format!("{name}: HTTP session ended"), true),
    }
}

/// The first sentence of a description, at most 80 characters.
fn short(description: &str) -> String {
    let first = description.split(". ").next().unwrap_or_default().trim();
    if first.chars().count() > 80 {
        format!("{}…", first.chars().take(79).collect::<String>())
    } else {
        first.to_owned()
    }
}

/// `+12 ms  spawned pid 123 (group 123)`.
pub fn describe(event: &Event) -> String {
    let what = match &event.kind {
        EventKind::Spawned { pid, pgid } => format!("spawned pid {pid} (group {pgid})"),
        EventKind::Initialized {
            server,
            version,
            protocol,
            era,
        } => {
            format!("initialized: {server} {version}, protocol {protocol} ({era} era)")
        }
        EventKind::Restarting {
            attempt,
            of,
            delay_ms,
        } => format!("exited unexpectedly; restart {attempt} of {of} in {delay_ms} ms"),
        EventKind::EraFallback { fallback } => match fallback {
            mcp_stdio_client::Fallback::Error { code, message } => {
                format!("server/discover refused ({code}: {message}); falling back to initialize")
            }
            mcp_stdio_client::Fallback::Silent { waited_ms } => {
                format!("server/discover unanswered for {waited_ms} ms; falling back to initialize")
            }
        },
        EventKind::RequestFailed { method, kind } => format!("{method} failed: {kind}"),
        EventKind::StdoutLineSkipped {
            reason,
            count,
            prefix,
        } => {
            format!("skipped stdout line #{count} ({reason:?}): {prefix}")
        }
        EventKind::StdinRepliesDropped {
            count,
            backlog_bytes,
        } => format!(
            "dropped reply #{count} to the server's requests: {backlog_bytes} bytes wait for its stdin"
        ),
        EventKind::ClosePhase { phase } => format!("close: {phase}"),
        EventKind::Exited { status } => format!("exited: {status}"),
        EventKind::GroupSwept => "killed what was left in its process group".to_owned(),
        EventKind::Contained {
            method,
            killed,
            cgroup,
        } => match cgroup {
            Some(cgroup) => format!(
                "containment ({}, {cgroup}) killed {killed} process(es) outside its group",
                method.as_str()
            ),
            None => format!(
                "containment ({}) killed {killed} process(es) outside its group",
                method.as_str()
            ),
        },
        EventKind::Closed { path, elapsed_ms } => format!("closed by {path} in {elapsed_ms} ms"),
    };
    format!("+{:>5} ms  {what}", event.at.as_millis())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_stdio_client::{ChildExit, CloseOutcome, ClosePath};

    use super::*;

    fn outcome(status: Option<ChildExit>) -> ServerClose {
        ServerClose::Stdio(CloseOutcome {
            path: ClosePath::Sigkill,
            status,
            elapsed: Duration::from_millis(7),
            group_swept: false,
            contained: None,
        })
    }

    #[test]
    fn a_server_that_was_not_reaped_is_a_failure() {
        let (line, reaped) = describe_close("stuck", &outcome(None));
        assert!(!reaped, "{line}");
        assert_eq!(
            line,
            "stuck: closed by sigkill in 7 ms (NOT REAPED: it may still be running)"
        );
    }

    #[test]
    fn a_reaped_server_is_not() {
        let (line, reaped) = describe_close("gone", &outcome(Some(ChildExit::Signal(9))));
        assert!(reaped, "{line}");
        assert_eq!(line, "gone: closed by sigkill in 7 ms (signal 9 (SIGKILL))");
        assert_eq!(
            describe_close("web", &ServerClose::Http),
            ("web: HTTP session ended".to_owned(), true)
        );
    }
}
