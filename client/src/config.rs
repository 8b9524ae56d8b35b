//! The server configuration: one model loaded from the YAML (`MCP_SERVERS`) or the desktop-host
//! JSON (`mcpServers`) format, validated and `${VAR}`-expanded at load, with secrets redacted in
//! every `Debug` output, dump and error.
//!
//! `docs/config.md` is the user-facing reference. This module holds the model, the error type
//! and the entry points; the work is done in the submodules:
//! - `limits` bounds the document's size and nesting before it is parsed;
//! - `parse` reads the document (both formats) and reports shape errors with a position;
//! - `validate` applies the contract's rules 1–6 in order;
//! - `resolve` expands `${VAR}` (syntax in `expand`) and derives the effective flags;
//! - `duration` parses and prints `300ms`/`2s`/`5m`/`1h`; `url` holds the little URL logic;
//! - `redact` implements `Debug` and the config dump (`Display for Config`) without secrets.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod duration;
mod expand;
mod limits;
mod parse;
mod redact;
mod resolve;
mod url;
mod validate;

pub use duration::{DurationError, format_duration, parse_duration};
pub use expand::ExpandError;
pub use limits::{LimitError, MAX_BYTES, MAX_DEPTH};
pub use parse::ShapeError;
pub use validate::Violation;

/// Bound on the handshake and on each operation when TIMEOUT is not set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How long close waits for a stdio child to exit after its stdin is closed.
pub const DEFAULT_EOF_GRACE: Duration = Duration::from_secs(2);
/// How long close waits for a stdio child's process group to exit after SIGTERM.
pub const DEFAULT_TERM_GRACE: Duration = Duration::from_secs(2);

/// Every configured server, keyed (and so sorted) by name.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Config {
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server with its effective settings: defaults applied, `${VAR}`s expanded, flags derived.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerConfig {
    pub name: String,
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
    pub url: String,
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

impl Config {
    /// Reads and loads the file at `path`, expanding `${VAR}` from the process environment.
    ///
    /// At most [`MAX_BYTES`] + 1 bytes are read, so pointing it at a huge file (or a device
    /// such as `/dev/zero`) fails at once with [`LimitError::TooLarge`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        use std::io::Read as _;
        let read_error = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let source_name = path.display().to_string();
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes))
            .map_err(read_error)?;
        if bytes.len() > MAX_BYTES {
            return Err(ConfigError::Limit {
                locus: Locus::document(&source_name),
                problem: LimitError::TooLarge,
            });
        }
        let text = String::from_utf8(bytes).map_err(|error| {
            read_error(std::io::Error::new(std::io::ErrorKind::InvalidData, error))
        })?;
        Self::from_str(&text, &source_name)
    }

    /// Loads `text`, naming it `source` in errors, expanding from the process environment.
    pub fn from_str(text: &str, source: &str) -> Result<Config, ConfigError> {
        // A value that is not valid UTF-8 counts as unset: passing it on lossily would silently
        // change a secret, and the lookup has no other way to say "present but unusable".
        Self::from_str_with_env(text, source, &|name| std::env::var(name).ok())
    }

    /// Loads `text` with `env` as the environment for `${VAR}` expansion, so tests need not touch
    /// the process environment.
    pub fn from_str_with_env(
        text: &str,
        source: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        if let Err((problem, position)) = limits::check(text) {
            let mut locus = Locus::document(source);
            locus.line = position.map(|at| at.line);
            locus.column = position.map(|at| at.column);
            return Err(ConfigError::Limit { locus, problem });
        }
        let servers = parse::parse_document(text, source, env)?;
        Ok(Config {
            servers: servers
                .into_iter()
                .map(|server| (server.name.clone(), server))
                .collect(),
        })
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

    /// The URL with user-info, query and fragment redacted: safe for messages.
    pub fn redacted_url(&self) -> String {
        url::redact(&self.url)
    }
}

/// Where an error was found: the source (file path), the server and, when the parser reports
/// one, the line and column.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Locus {
    pub source_name: String,
    pub server: Option<String>,
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl Locus {
    // Boxed because the error enum carries it in most variants, and a `Result` whose error is
    // large costs every caller a big copy on the happy path too.
    fn document(source_name: &str) -> Box<Self> {
        Box::new(Locus {
            source_name: source_name.to_owned(),
            server: None,
            line: None,
            column: None,
        })
    }

    fn server(source_name: &str, server: &str) -> Box<Self> {
        Box::new(Locus {
            server: Some(server.to_owned()),
            ..*Locus::document(source_name)
        })
    }

    /// `" at line L column C"`, or nothing when the position is unknown.
    fn at(&self) -> String {
        match (self.line, self.column) {
            (Some(line), Some(column)) => format!(" at line {line} column {column}"),
            (Some(line), None) => format!(" at line {line}"),
            _ => String::new(),
        }
    }
}

impl fmt::Display for Locus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source_name)?;
        if let Some(server) = &self.server {
            // Debug quoting keeps a name with control characters on one readable line.
            write!(f, ": server {server:?}")?;
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded. No variant carries a value of ARGS, ENV, TOKEN or
/// USERNAME: messages name the source, the server and the field instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read config file {}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The document is larger or more deeply nested than the loader accepts; it was rejected
    /// before it was parsed.
    #[error("{}: {problem}{}", .locus, .locus.at())]
    Limit {
        locus: Box<Locus>,
        problem: LimitError,
    },

    /// The parser rejected the document. The message is the parser's, with anything it quoted
    /// from the document removed.
    #[error("{locus}: {message}")]
    Syntax { locus: Box<Locus>, message: String },

    /// The document is well-formed but something has the wrong shape (type, unknown field,
    /// duplicate key, missing top-level key).
    #[error("{}: {problem}{}", .locus, .locus.at())]
    Shape {
        locus: Box<Locus>,
        problem: ShapeError,
    },

    /// A server breaks one of the validation rules.
    #[error("{}: {violation}{}", .locus, .locus.at())]
    Invalid {
        locus: Box<Locus>,
        violation: Violation,
    },

    /// A duration field does not parse or is not positive.
    #[error("{}: invalid {field}{}", .locus, .locus.at())]
    Duration {
        locus: Box<Locus>,
        field: &'static str,
        #[source]
        source: DurationError,
    },

    /// A `${VAR}` in a field cannot be expanded.
    #[error("{}: cannot expand {field}{}", .locus, .locus.at())]
    Expand {
        locus: Box<Locus>,
        /// The field as written in messages, e.g. `ARGS[2]` or `ENV.GITHUB_TOKEN`.
        field: String,
        #[source]
        source: ExpandError,
    },
}

impl ConfigError {
    /// The server the error is about, if it is about one.
    pub fn server(&self) -> Option<&str> {
        self.locus()?.server.as_deref()
    }

    /// The 1-based line the parser reported, if any.
    pub fn line(&self) -> Option<usize> {
        self.locus()?.line
    }

    /// Where the error was found; `None` only for [`ConfigError::Read`].
    pub fn locus(&self) -> Option<&Locus> {
        match self {
            ConfigError::Syntax { locus, .. }
            | ConfigError::Limit { locus, .. }
            | ConfigError::Shape { locus, .. }
            | ConfigError::Invalid { locus, .. }
            | ConfigError::Duration { locus, .. }
            | ConfigError::Expand { locus, .. } => Some(locus),
            ConfigError::Read { .. } => None,
        }
    }

    /// Fills in the position the parser reported when the error was raised, unless an inner,
    /// more precise position was recorded already.
    fn set_position(&mut self, line: usize, column: usize) {
        let locus = match self {
            ConfigError::Syntax { locus, .. }
            | ConfigError::Limit { locus, .. }
            | ConfigError::Shape { locus, .. }
            | ConfigError::Invalid { locus, .. }
            | ConfigError::Duration { locus, .. }
            | ConfigError::Expand { locus, .. } => locus,
            ConfigError::Read { .. } => return,
        };
        if locus.line.is_none() {
            locus.line = Some(line);
            locus.column = Some(column);
        }
    }
}
