//! [`Session`]: every configured server at once (docs/contract.md, section 5). Credentials
//! for HTTP servers are resolved first, in one sequential pass; then every
//! server connects concurrently, each bounded by its own TIMEOUT, and one
//! that fails is a warning and is skipped. Tools are exposed as
//! `mcp_<server>_<tool>` with the server's consent and serial flags.

use std::{collections::BTreeMap, time::Duration};

use futures::future::join_all;
use rmcp::model::{CallToolResult, JsonObject, Tool};
use tracing::{Instrument, instrument::WithSubscriber};

use crate::{
    config::{Config, ServerConfig, Transport},
    error::{ClientError, error_chain as chain},
    stdio::{CloseOutcome, StdioClient},
};
#[cfg(feature = "http")]
use crate::{
    credentials::{Authorization, CredentialError, CredentialResolver},
    error::Detail,
    http_client::HttpClient,
};

/// The default bound on tool discovery across servers.
pub const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// How a session is built.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Bound on `tools/list` across all servers (default 30 s).
    pub discovery_timeout: Duration,
    /// The `gh` program run for AUTH `gh` (default `gh`).
    pub gh_command: String,
    /// Containment of every stdio server (default off): see
    /// [`crate::ConnectOptions::contain`].
    pub contain: crate::contain::Contain,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            discovery_timeout: DEFAULT_DISCOVERY_TIMEOUT,
            gh_command: "gh".into(),
            contain: crate::contain::Contain::Off,
        }
    }
}

/// One connected server.
#[non_exhaustive]
pub enum Connection {
    /// A child process.
    Stdio(StdioClient),
    /// A Streamable HTTP endpoint.
    #[cfg(feature = "http")]
    Http(HttpClient),
}

impl Connection {
    /// Every tool the server offers; see [`StdioClient::list_tools`].
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        match self {
            Connection::Stdio(client) => client.list_tools().await,
            #[cfg(feature = "http")]
            Connection::Http(client) => client.list_tools().await,
        }
    }

    /// Calls `tool`; see [`StdioClient::call_tool`].
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, ClientError> {
        match self {
            Connection::Stdio(client) => client.call_tool(tool, arguments).await,
            #[cfg(feature = "http")]
            Connection::Http(client) => client.call_tool(tool, arguments).await,
        }
    }

    /// The stdio client, if this is a stdio server.
    pub fn as_stdio(&self) -> Option<&StdioClient> {
        match self {
            Connection::Stdio(client) => Some(client),
            #[cfg(feature = "http")]
            Connection::Http(_) => None,
        }
    }

    async fn close(&self) -> ServerClose {
        match self {
            Connection::Stdio(client) => ServerClose::Stdio(client.close().await),
            #[cfg(feature = "http")]
            Connection::Http(client) => {
                client.close().await;
                ServerClose::Http
            }
        }
    }
}

/// How one server's close ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerClose {
    /// How the stdio server's close ended.
    Stdio(CloseOutcome),
    /// The HTTP session was ended.
    Http,
}

/// A tool of the session, under its qualified name.
#[derive(Debug, Clone)]
pub struct SessionTool {
    /// `mcp_<server>_<tool>`.
    pub qualified_name: String,
    /// The server's name.
    pub server: String,
    /// The tool as the server described it.
    pub tool: Tool,
    /// Whether a call needs the user's consent (the server's flag).
    pub requires_consent: bool,
    /// Whether calls to the server must run one at a time (the server's flag).
    pub serial: bool,
}

/// A server that did not start, and why (already redacted).
#[derive(Debug)]
pub struct StartFailure {
    /// The server's name.
    pub server: String,
    /// Why it did not start.
    pub error: ClientError,
}

/// Errors of [`Session::call`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// No tool of the session has this qualified name.
    #[error("no tool named `{0}` in this session (tools are named mcp_<server>_<tool>)")]
    UnknownTool(String),
    /// The tool's server failed the call.
    #[error(transparent)]
    Client(#[from] ClientError),
}

/// Every configured server that started.
pub struct Session {
    servers: BTreeMap<String, (ServerConfig, Connection)>,
    failures: Vec<StartFailure>,
    interrupted: Vec<String>,
    tools: Vec<SessionTool>,
    gh_runs: u32,
}

impl Session {
    /// Connects every server of `config`. Never fails as a whole: a server
    /// that cannot start is logged as a warning (name and reason only) and
    /// listed in [`Session::failures`].
    pub async fn build(config: &Config, options: &SessionOptions) -> Session {
        Self::build_until(config, options, std::future::pending()).await
    }

    /// [`Session::build`] that gives up as soon as `stop` completes (a
    /// Ctrl-C, say). A server still starting then is killed at once, as a
    /// failed start is (SIGKILL to its group, reaped): it has no MCP session
    /// to close yet. It is listed in [`Session::interrupted`]. A server that
    /// had already connected stays in the session, so the caller closes it
    /// with the normal close ladder.
    ///
    /// Each server connects in a task of its own on the current tokio
    /// runtime (so the start-ups spread over its workers); the caller's span
    /// and subscriber go with each task. Dropping the build before it ends
    /// aborts every connect still running: each one kills and reaps its
    /// server when the runtime drops the aborted task, promptly but not
    /// inside the drop itself (use `stop` for a build that must have ended
    /// every start-up when it returns).
    pub async fn build_until(
        config: &Config,
        options: &SessionOptions,
        stop: impl Future<Output = ()>,
    ) -> Session {
        let mut stop = std::pin::pin!(stop);
        #[cfg(feature = "http")]
        let everything_interrupted = |gh_runs| Session {
            servers: BTreeMap::new(),
            failures: Vec::new(),
            interrupted: config.servers.keys().cloned().collect(),
            tools: Vec::new(),
            gh_runs,
        };

        // Credentials first, one server at a time, so `gh` runs at most once;
        // stdio servers never get here, whatever their AUTH says.
        #[cfg(feature = "http")]
        let mut resolver = CredentialResolver::new(options.gh_command.clone());
        #[cfg(feature = "http")]
        let mut credentials: BTreeMap<
            &str,
            Result<Option<Authorization>, CredentialError>,
        > = BTreeMap::new();
        #[cfg(feature = "http")]
        {
            let resolved = async {
                for server in config.servers.values() {
                    if let Transport::Http(http) = &server.transport {
                        credentials.insert(&server.name, resolver.resolve(http).await);
                    }
                }
            };
            tokio::select! {
                biased;
                () = resolved => {}
                // Nothing has been spawned but `gh`, which is killed on drop.
                () = &mut stop => return everything_interrupted(resolver.gh_runs()),
            }
        }
        #[cfg(feature = "http")]
        let gh_runs = || resolver.gh_runs();
        #[cfg(not(feature = "http"))]
        let gh_runs = || {
            let _ = &options.gh_command;
            0
        };

        // Each connect is a task of its own, so that the N start-ups (a
        // spawn, three pipe tasks, a handshake parsed) spread over the
        // runtime's workers instead of being polled one after the other by
        // the task that builds; the JoinSet aborts them all if this future is
        // dropped (each aborted connect's kill guard then ends its child).
        // Each races the stop signal on its own, so that one that stops is
        // dropped (its kill guard ends the child) while the others that
        // already connected keep their clients.
        let (stopped_tx, stopped_rx) = tokio::sync::watch::channel(false);
        let servers: Vec<&ServerConfig> = config.servers.values().collect();
        let mut connects = tokio::task::JoinSet::new();
        for (index, server) in servers.iter().enumerate() {
            #[cfg(feature = "http")]
            let credentials = credentials.get(server.name.as_str()).cloned();
            #[cfg(not(feature = "http"))]
            let credentials = ();
            let connect = connect_one((*server).clone(), options.contain, credentials);
            let mut stopped = stopped_rx.clone();
            let task = async move {
                let connection = tokio::select! {
                    biased;
                    connection = connect => Some(connection),
                    _ = stopped.wait_for(|stopped| *stopped) => None,
                };
                (index, connection)
            };
            // The caller's span and subscriber go with the task, as they did
            // when the connects were polled inside this future.
            connects.spawn(task.in_current_span().with_current_subscriber());
        }
        let mut results: Vec<Option<Option<Result<Connection, ClientError>>>> =
            servers.iter().map(|_| None).collect();
        {
            let gathered = async {
                while let Some(joined) = connects.join_next().await {
                    match joined {
                        Ok((index, connection)) => results[index] = Some(connection),
                        // A connect that panicked panics the build, as it
                        // did when it was polled here.
                        Err(error) if error.is_panic() => {
                            std::panic::resume_unwind(error.into_panic())
                        }
                        // Cancelled only by a runtime shutting down: its
                        // child was killed with it, as an interrupted one is.
                        Err(_) => {}
                    }
                }
            };
            let mut gathered = std::pin::pin!(gathered);
            tokio::select! {
                biased;
                () = &mut gathered => {}
                () = &mut stop => {
                    stopped_tx.send_replace(true);
                    gathered.await
                }
            }
        }
        // In config order, whatever order the connects finished in.
        let results = servers
            .into_iter()
            .zip(results)
            .map(|(server, connection)| (server, connection.flatten()));
        let mut servers = BTreeMap::new();
        let mut failures = Vec::new();
        let mut interrupted = Vec::new();
        for (server, connection) in results {
            match connection {
                Some(Ok(connection)) => {
                    servers.insert(server.name.clone(), (server.clone(), connection));
                }
                Some(Err(error)) => {
                    tracing::warn!(server = %server.name, error = %chain(&error), "server failed to start; skipped");
                    failures.push(StartFailure {
                        server: server.name.clone(),
                        error,
                    });
                }
                None => {
                    tracing::warn!(server = %server.name, "server start interrupted; killed");
                    interrupted.push(server.name.clone());
                }
            }
        }
        Session {
            servers,
            failures,
            interrupted,
            tools: Vec::new(),
            gh_runs: gh_runs(),
        }
    }

    /// The servers that did not start.
    pub fn failures(&self) -> &[StartFailure] {
        &self.failures
    }

    /// The servers that were still starting when [`Session::build_until`]
    /// was stopped (and were killed).
    pub fn interrupted(&self) -> &[String] {
        &self.interrupted
    }

    /// Names of the servers that started.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// The connection to `server`, if it started.
    pub fn connection(&self, server: &str) -> Option<&Connection> {
        self.servers.get(server).map(|(_, connection)| connection)
    }

    /// How many times `gh auth token` ran while building.
    pub fn gh_runs(&self) -> u32 {
        self.gh_runs
    }

    /// Lists every server's tools concurrently, within `bound` overall; a
    /// server that fails or does not answer in time is a warning and offers
    /// no tools. Returns the session's tools.
    pub async fn discover_tools(&mut self, bound: Duration) -> &[SessionTool] {
        let listings = self
            .servers
            .iter()
            .map(|(name, (server, connection))| async move {
                let listed = match tokio::time::timeout(bound, connection.list_tools()).await {
                    Ok(listed) => listed.map_err(|error| chain(&error)),
                    Err(_) => Err(format!(
                        "tools/list not answered within {}",
                        crate::config::format_duration(bound)
                    )),
                };
                (name, server, listed)
            });
        let mut tools = Vec::new();
        for (name, server, listed) in join_all(listings).await {
            match listed {
                Ok(listed) => tools.extend(listed.into_iter().map(|tool| SessionTool {
                    qualified_name: qualified_name(name, &tool.name),
                    server: name.clone(),
                    tool,
                    requires_consent: server.requires_consent,
                    serial: server.serial,
                })),
                Err(reason) => {
                    tracing::warn!(server = %name, reason = %reason, "tool discovery failed; server offers no tools")
                }
            }
        }
        self.tools = tools;
        &self.tools
    }

    /// The tools found by the last [`Session::discover_tools`].
    pub fn tools(&self) -> &[SessionTool] {
        &self.tools
    }

    /// Calls a tool by its qualified name; it goes to its server.
    pub async fn call(
        &self,
        qualified_name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, SessionError> {
        let tool = self
            .tools
            .iter()
            .find(|tool| tool.qualified_name == qualified_name)
            .ok_or_else(|| SessionError::UnknownTool(qualified_name.to_owned()))?;
        let (_, connection) = &self.servers[&tool.server];
        Ok(connection.call_tool(&tool.tool.name, arguments).await?)
    }

    /// Closes every server concurrently; reports each one's close.
    pub async fn close(&self) -> Vec<(String, ServerClose)> {
        let closes = self
            .servers
            .iter()
            .map(|(name, (_, connection))| async move { (name.clone(), connection.close().await) });
        join_all(closes).await
    }
}

/// What the credential pass found for an HTTP server (nothing to carry for
/// a stdio one, nor without the `http` feature).
#[cfg(feature = "http")]
type Credentials = Option<Result<Option<Authorization>, CredentialError>>;
#[cfg(not(feature = "http"))]
type Credentials = ();

/// Connects one server of a session; owns what it needs, so that it runs as
/// a task of its own.
async fn connect_one(
    server: ServerConfig,
    contain: crate::contain::Contain,
    credentials: Credentials,
) -> Result<Connection, ClientError> {
    #[cfg(not(feature = "http"))]
    let () = credentials;
    match &server.transport {
        Transport::Stdio(_) => StdioClient::builder(&server)
            .contain(contain)
            .connect()
            .await
            .map(Connection::Stdio),
        #[cfg(feature = "http")]
        Transport::Http(_) => match credentials {
            Some(Err(source)) => Err(ClientError::new(&server.name, Detail::Credentials(source))),
            Some(Ok(authorization)) => HttpClient::connect(&server, authorization.as_ref())
                .await
                .map(Connection::Http),
            None => unreachable!("every HTTP server went through the credential pass"),
        },
        #[cfg(not(feature = "http"))]
        Transport::Http(_) => Err(crate::error::http_disabled(&server.name)),
    }
}

/// `mcp_<server>_<tool>`.
pub fn qualified_name(server: &str, tool: &str) -> String {
    format!("mcp_{server}_{tool}")
}
