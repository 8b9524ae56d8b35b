//! The server configuration: one model loaded from the YAML (`MCP_SERVERS`) or the desktop-host
//! JSON (`mcpServers`) format, validated and `${VAR}`-expanded at load, with secrets redacted in
//! every `Debug` output, dump and error.
//!
//! `docs/config.md` is the user-facing reference. This module holds the entry points; loading
//! is a one-way pipeline, each stage knowing only the ones before it:
//!
//! `limits` → `parse` → `validate` → `resolve`
//!
//! - `limits` bounds the document's size and nesting before it is parsed;
//! - `parse` reads the document (both formats) into the raw model (`raw`) and reports shape
//!   errors with a position; it hands each entry, still inside the entry's visitor so errors
//!   carry its position, to the next stages through a callback set up here;
//! - `validate` applies the contract's rules 1–6 in order to a raw entry;
//! - `resolve` expands `${VAR}` (syntax in `expand`) in a validated entry and derives the
//!   effective flags, giving the effective model (`model`);
//! - `error` holds the error types; `duration` parses and prints `300ms`/`2s`/`5m`/`1h`; `url`
//!   holds the little URL logic; `redact` implements `Debug` and the config dump
//!   (`Display for Config`) without secrets.

use std::path::Path;

use error::Locus as ErrorLocus;

mod duration;
mod error;
mod expand;
mod limits;
mod model;
mod parse;
mod raw;
mod redact;
mod resolve;
mod url;
mod validate;

pub use duration::{DurationError, format_duration, parse_duration};
pub use error::{ConfigError, Locus, ShapeError, Violation};
pub use expand::ExpandError;
pub use limits::{LimitError, MAX_BYTES, MAX_DEPTH, Position, deepest_token_beyond};
pub use model::{
    AuthMode, Config, DEFAULT_EOF_GRACE, DEFAULT_TERM_GRACE, DEFAULT_TIMEOUT, HttpConfig,
    ServerConfig, StdioConfig, Transport,
};

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
                locus: ErrorLocus::document(&source_name),
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
            let mut locus = ErrorLocus::document(source);
            locus.line = position.map(|at| at.line);
            locus.column = position.map(|at| at.column);
            return Err(ConfigError::Limit { locus, problem });
        }
        let stages = parse::Stages {
            name: &|name| validate::check_name(name, source),
            entry: &|raw| resolve::resolve(validate::check(raw, source)?, source, env),
        };
        let servers = parse::parse_document(text, source, &stages)?;
        Ok(Config {
            servers: servers
                .into_iter()
                .map(|server| (server.name.clone(), server))
                .collect(),
        })
    }
}
