//! The effective model: every server with its settings as the client uses them (defaults
//! applied, `${VAR}`s expanded, flags derived). The output of `resolve`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::url;

/// Bound on the handshake and on each operation when TIMEOUT is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long close waits for a stdio child to exit after its stdin is closed.
pub const DEFAULT_EOF_GRACE: Duration = Duration::from_secs(2);
/// How long close waits for a stdio child's process group to exit after SIGTERM.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_secs(2);

/// Every configured server, keyed (and so sorted) by name.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// The servers, by name.
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server with its effective settings: defaults applied, `${VAR}`s expanded, flags derived.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The server's name (the key in the config).
    pub name: String,
    /// How the client reaches it.
    pub transport: Transport,
    /// Bound on the handshake and on each request.
    pub timeout: Duration,
    /// Whether a tool call needs the user's consent before it runs.
    pub requires_consent: bool,
    /// Whether tool calls to this server must run one at a time.
    pub serial: bool,
}

/// How the client reaches a server.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Transport {
    /// A child process speaking JSON-RPC over its stdin and stdout (COMMAND).
    Stdio(StdioConfig),
    /// A Streamable HTTP endpoint (URL).
    Http(HttpConfig),
}

/// A stdio server: what to spawn and how long close waits at each step.
#[derive(Clone, PartialEq, Eq)]
pub struct StdioConfig {
    /// The program, as written (after expansion); resolving it against PATH happens at spawn.
    pub command: String,
    /// Arguments; each may hold a secret, so they are never printed.
    pub args: Vec<String>,
    /// The child's working directory; `None` inherits the client's.
    pub dir: Option<PathBuf>,
    /// Set over the inherited environment; values may hold secrets and are never printed.
    pub env: BTreeMap<String, String>,
    /// Wait after closing stdin before SIGTERM.
    pub eof_grace: Duration,
    /// Wait after SIGTERM before SIGKILL.
    pub term_grace: Duration,
    /// Which protocol era to speak (ERA): probe, or pinned.
    pub era: crate::era::EraSetting,
    /// Bound on the `server/discover` probe of `auto` (PROBE_TIMEOUT).
    pub probe_timeout: Duration,
    /// Restart after an unexpected exit (RESTART, RESTART_BACKOFF); off by default.
    pub restart: crate::era::RestartPolicy,
}

/// A Streamable HTTP server and how to authenticate to it.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// The endpoint (expanded); its user-info, query and fragment are never printed.
    pub url: String,
    /// How to authenticate (AUTH).
    pub auth: AuthMode,
    /// Bearer token or basic-auth password (expanded); never printed.
    pub token: Option<String>,
    /// Basic-auth user name; never printed.
    pub username: Option<String>,
}

/// The AUTH field of an HTTP server.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum AuthMode {
    /// The HTTP client decides from what is available (TOKEN, `gh`, nothing).
    #[default]
    Auto,
    /// A token from `gh auth token`.
    Gh,
    /// `Authorization: Bearer TOKEN`.
    Bearer,
    /// `Authorization: Basic` with USERNAME and TOKEN.
    Basic,
    /// No credentials.
    None,
}

impl AuthMode {
    /// The spelling used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthMode::Auto => "auto",
            AuthMode::Gh => "gh",
            AuthMode::Bearer => "bearer",
            AuthMode::Basic => "basic",
            AuthMode::None => "none",
        }
    }
}

impl fmt::Display for AuthMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ServerConfig {
    /// A stdio server with the default TIMEOUT, consent required and serial calls.
    pub fn stdio(name: impl Into<String>, stdio: StdioConfig) -> Self {
        ServerConfig {
            name: name.into(),
            transport: Transport::Stdio(stdio),
            timeout: DEFAULT_TIMEOUT,
            requires_consent: true,
            serial: true,
        }
    }

    /// An HTTP server with the default TIMEOUT and the flags its URL implies (`/readonly`).
    pub fn http(name: impl Into<String>, http: HttpConfig) -> Self {
        let readonly = http.is_readonly();
        ServerConfig {
            name: name.into(),
            transport: Transport::Http(http),
            timeout: DEFAULT_TIMEOUT,
            requires_consent: !readonly,
            serial: !readonly,
        }
    }
}

impl StdioConfig {
    /// `command` with no arguments, no DIR, no ENV and the default graces.
    pub fn new(command: impl Into<String>) -> Self {
        StdioConfig {
            command: command.into(),
            args: Vec::new(),
            dir: None,
            env: BTreeMap::new(),
            eof_grace: DEFAULT_EOF_GRACE,
            term_grace: DEFAULT_TERM_GRACE,
            era: crate::era::EraSetting::Auto,
            probe_timeout: crate::era::DEFAULT_PROBE_TIMEOUT,
            restart: crate::era::RestartPolicy::default(),
        }
    }
}

impl StdioConfig {
    /// The absolute path of the program that connecting would execute: COMMAND looked up as
    /// the client does (DIR checked first; a COMMAND with a `/` taken relative to DIR; a bare
    /// one searched in ENV.PATH if ENV sets one, else in the inherited PATH). Lets a host (or
    /// a checker) report a missing program before it starts anything.
    pub fn resolve_command(&self) -> Result<PathBuf, crate::command_path::CommandPathError> {
        let inherited = crate::command_path::inherited_path();
        crate::command_path::resolve(
            &self.command,
            self.dir.as_deref(),
            self.env.get("PATH").map(std::ffi::OsStr::new),
            inherited.as_deref(),
        )
    }
}

impl HttpConfig {
    /// `url` with AUTH `auto` and no credentials.
    pub fn new(url: impl Into<String>) -> Self {
        HttpConfig {
            url: url.into(),
            auth: AuthMode::Auto,
            token: None,
            username: None,
        }
    }

    /// Whether the URL's path ends in `/readonly` (a trailing `/` allowed), which makes the
    /// server consent-free and parallel.
    pub fn is_readonly(&self) -> bool {
        url::is_readonly(&self.url)
    }

    /// The host of the URL (no user-info, no port), lowercased.
    pub fn host(&self) -> Option<String> {
        url::host(&self.url)
    }

    /// Whether the URL carries user-info, which the HTTP client sends as its credentials.
    #[cfg_attr(
        not(feature = "http"),
        expect(dead_code, reason = "only the HTTP client resolves credentials")
    )]
    pub(crate) fn has_user_info(&self) -> bool {
        url::has_user_info(&self.url)
    }

    /// The URL with user-info, query and fragment redacted: safe for messages.
    pub fn redacted_url(&self) -> String {
        url::redact(&self.url)
    }
}
