//! `mcp-conformance connect`: load a config (YAML or desktop JSON), connect,
//! do one thing (list tools, call a tool, or nothing), close, and print every
//! lifecycle event with its time and how each server's close ended. For
//! people reproducing a lifecycle problem by hand, on any real server.

use std::{io::Write, path::PathBuf, time::Duration};

use mcp_stdio_client::{
    Event, EventKind, Session, SessionOptions,
    config::Config,
    session::{Connection, ServerClose},
};
use serde_json::Value;

use mcp_stdio_client::error::chain;

use crate::exit;

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
    install_logging(args.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return exit::FAILURE;
        }
    };
    runtime.block_on(run_async(args))
}

async fn run_async(args: Args) -> u8 {
    let mut config = match Config::load(&args.config) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("error: {}", chain(&error));
            return exit::USAGE;
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
    let mut session = Session::build(&config, &SessionOptions::default()).await;
    for failure in session.failures() {
        let _ = writeln!(
            out,
            "{}: did not start: {}",
            failure.server,
            chain(&failure.error)
        );
    }
    let mut code = if session.failures().is_empty() {
        exit::SUCCESS
    } else {
        exit::FAILURE
    };
    if session.servers().next().is_none() {
        let _ = writeln!(out, "no server started");
        return exit::FAILURE;
    }

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
        }
        Action::Call { tool, .. } => {
            session.discover_tools(args.discovery_timeout).await;
            let qualified = match (&args.server, tool.starts_with("mcp_")) {
                (Some(server), false) => mcp_stdio_client::session::qualified_name(server, tool),
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
                        code = exit::FAILURE;
                    }
                }
                Err(error) => {
                    let _ = writeln!(out, "{qualified}: {}", chain(&error));
                    code = exit::FAILURE;
                }
            }
        }
        Action::Close => {}
    }

    let closes = session.close().await;
    let _ = writeln!(out);
    for (name, close) in &closes {
        match close {
            ServerClose::Stdio(outcome) => {
                let status = outcome
                    .status
                    .map_or("not reaped".to_owned(), |s| s.to_string());
                let swept = if outcome.group_swept {
                    "; killed what was left in its group"
                } else {
                    ""
                };
                let _ = writeln!(
                    out,
                    "{name}: closed by {} in {} ms ({status}){swept}",
                    outcome.path,
                    outcome.elapsed.as_millis()
                );
            }
            ServerClose::Http => {
                let _ = writeln!(out, "{name}: HTTP session ended");
            }
        }
        if let Some(Connection::Stdio(client)) = session.connection(name) {
            for event in client.events() {
                let _ = writeln!(out, "  {}", describe(&event));
            }
        }
    }
    code
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
        } => {
            format!("initialized: {server} {version}, protocol {protocol}")
        }
        EventKind::RequestFailed { method, kind } => format!("{method} failed: {kind}"),
        EventKind::StdoutLineSkipped {
            reason,
            count,
            prefix,
        } => {
            format!("skipped stdout line #{count} ({reason:?}): {prefix}")
        }
        EventKind::ClosePhase { phase } => format!("close: {phase}"),
        EventKind::Exited { status } => format!("exited: {status}"),
        EventKind::GroupSwept => "killed what was left in its process group".to_owned(),
        EventKind::Closed { path, elapsed_ms } => format!("closed by {path} in {elapsed_ms} ms"),
    };
    format!("+{:>5} ms  {what}", event.at.as_millis())
}

fn install_logging(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(|| mcp_stdio_client::redact::RedactingWriter::new(std::io::stderr()))
        .try_init();
}
