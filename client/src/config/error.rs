//! The errors of loading a configuration: [`ConfigError`] with where it was found
//! ([`Locus`]), and the problems of each stage ([`ShapeError`] from `parse`, [`Violation`] from
//! `validate` and `resolve`; the leaf errors live beside their parsers).

use std::fmt;
use std::path::PathBuf;

use super::model::AuthMode;
use super::{DurationError, ExpandError, LimitError};

/// Something in the document has the wrong shape. Messages name keys and fields, never values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// Neither top-level key is present.
    #[error(
        "no MCP_SERVERS key (YAML format) or mcpServers key (desktop JSON format) at the top level"
    )]
    NoServersKey,
    /// Both top-level keys are present.
    #[error("both MCP_SERVERS and mcpServers are present; keep one")]
    BothFormats,
    /// A value of the wrong type.
    #[error("{what} must be {expected}, found {found}")]
    WrongType {
        /// What was read (`ARGS`, `a server entry`...).
        what: String,
        /// The type wanted.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// A key that is not a field (YAML format only).
    #[error("unknown field {field}{}", suggestion.map(|s| format!(" (did you mean {s}?)")).unwrap_or_default())]
    UnknownField {
        /// The key, printable.
        field: String,
        /// The field it was probably meant to be.
        suggestion: Option<&'static str>,
    },
    /// A field given twice in one entry.
    #[error("duplicate field {field}")]
    DuplicateField {
        /// The field.
        field: String,
    },
    /// Two entries with the same name.
    #[error("duplicate server name")]
    DuplicateServer,
    /// An ENV key given twice. Neither occurrence is shown, whatever it looks like: a repeated
    /// key may be a secret pasted where a name belongs (GitHub's `ghp_...` tokens are valid
    /// variable names), so the keys are named by their positions in the mapping, from 1.
    #[error(
        "ENV key #{position} repeats key #{first}; keep one (keys are not shown: a repeated key \
         may be a secret pasted where a name belongs)"
    )]
    DuplicateEnvKey {
        /// The position of the repeat.
        position: usize,
        /// The position of the first occurrence.
        first: usize,
    },
    /// An ENV entry without a value. Its key is not shown, whatever it looks like: a key without
    /// a value is almost always `NAME:value` with the space after the colon missing (which YAML
    /// reads as one key holding the value) or a pasted secret, so it is named by its position.
    #[error(
        "ENV key #{position} has no value (the key is not shown: it may hold a secret); write \
         NAME: value with a space after the colon, or NAME: \"\" for an empty string"
    )]
    NullEnvValue {
        /// The key's position in the mapping, from 1.
        position: usize,
    },
    /// An ENV key that cannot be an environment variable.
    #[error(
        "ENV key #{position} is empty or contains '=' or NUL; an environment variable name cannot"
    )]
    InvalidEnvKey {
        /// The key's position in the mapping, from 1.
        position: usize,
    },
    /// A null where a string is needed.
    #[error("{what} is null; write \"\" for an empty string")]
    Null {
        /// What was null.
        what: String,
    },
    /// A boolean field that is not `true` or `false`.
    #[error("{field} must be true or false")]
    NotABool {
        /// The field.
        field: &'static str,
    },
}

/// A broken rule. Messages name fields, never their values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Violation {
    /// Rule 1.
    #[error(
        "server name must match ^[a-z0-9-]{{1,24}}$ (lowercase letters, digits and '-', \
         1 to 24 characters)"
    )]
    BadName,
    /// Rule 2.
    #[error("COMMAND and URL are both set; a server is either stdio (COMMAND) or HTTP (URL)")]
    CommandAndUrl,
    /// Rule 2.
    #[error("neither COMMAND nor URL is set; a server needs COMMAND (stdio) or URL (HTTP)")]
    NoCommandOrUrl,
    /// Rules 2 and 3: a field that is present but blank.
    #[error("{field} must not be empty")]
    Empty {
        /// The field.
        field: &'static str,
    },
    /// Rule 3.
    #[error(
        "{field} requires COMMAND: ARGS, DIR, ENV, EOF_GRACE, TERM_GRACE, ERA, PROBE_TIMEOUT, \
         RESTART and RESTART_BACKOFF apply only to stdio servers"
    )]
    StdioOnly {
        /// The field.
        field: &'static str,
    },
    /// An ERA value that is not an era.
    #[error("ERA must be one of auto, modern, legacy")]
    UnknownEra,
    /// A RESTART value that is not a count.
    #[error("RESTART must be a whole number of restarts (0 to 100), 0 meaning never")]
    BadRestart,
    /// Rule 4: an AUTH value that is not a mode.
    #[error("AUTH must be one of auto, gh, bearer, basic, none")]
    UnknownAuth,
    /// Rule 4.
    #[error(
        "AUTH bearer/basic requires an HTTP endpoint; stdio (COMMAND) servers transmit no \
         credentials"
    )]
    CredentialsOnStdio,
    /// Rule 5.
    #[error("{field} must not be empty with AUTH {auth}")]
    MissingCredential {
        /// The missing field (TOKEN or USERNAME).
        field: &'static str,
        /// The AUTH mode that needs it.
        auth: AuthMode,
    },
    /// After expansion: a required field came out empty.
    #[error("{field} is empty after expanding environment variables")]
    EmptyAfterExpansion {
        /// The field.
        field: &'static str,
    },
    /// After expansion: URL is not usable.
    #[error("URL must be an absolute http:// or https:// URL")]
    NotHttpUrl,
    /// After expansion: the URL carries user-info (`user:password@`), which the HTTP client
    /// sends as an `Authorization: Basic` header, and the AUTH mode sends one too.
    #[error(
        "URL carries credentials (user:password@ before the host), which are sent as an \
         Authorization header, and AUTH {auth} sends one too, so the server would get two; \
         remove them from the URL (USERNAME and TOKEN with AUTH basic say the same), or set \
         AUTH none to send only the URL's"
    )]
    UserInfoWithAuth {
        /// The AUTH mode that sends a header of its own.
        auth: AuthMode,
    },
}

/// Where an error was found: the source (file path), the server and, when the parser reports
/// one, the line and column.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Locus {
    /// The file path, or the name given to [`super::Config::from_str`].
    pub source_name: String,
    /// The server, when the error is about one.
    pub server: Option<String>,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// The 1-based column, when known.
    pub column: Option<usize>,
}

impl Locus {
    // Boxed because the error enum carries it in most variants, and a `Result` whose error is
    // large costs every caller a big copy on the happy path too.
    pub(super) fn document(source_name: &str) -> Box<Self> {
        Box::new(Locus {
            source_name: source_name.to_owned(),
            server: None,
            line: None,
            column: None,
        })
    }

    pub(super) fn server(source_name: &str, server: &str) -> Box<Self> {
        Box::new(Locus {
            server: Some(server.to_owned()),
            ..*Locus::document(source_name)
        })
    }

    /// `" at line L column C"`, or nothing when the position is unknown.
    pub(super) fn at(&self) -> String {
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
    /// The file could not be read (or is not UTF-8).
    #[error("cannot read config file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// The document is larger or more deeply nested than the loader accepts; it was rejected
    /// before it was parsed.
    #[error("{}: {problem}{}", .locus, .locus.at())]
    Limit {
        /// Where.
        locus: Box<Locus>,
        /// Which bound.
        problem: LimitError,
    },

    /// The parser rejected the document. The message is the parser's, with anything it quoted
    /// from the document removed.
    #[error("{locus}: {message}")]
    Syntax {
        /// Where.
        locus: Box<Locus>,
        /// The parser's message, scrubbed of quoted text.
        message: String,
    },

    /// The document is well-formed but something has the wrong shape (type, unknown field,
    /// duplicate key, missing top-level key).
    #[error("{}: {problem}{}", .locus, .locus.at())]
    Shape {
        /// Where.
        locus: Box<Locus>,
        /// What.
        problem: ShapeError,
    },

    /// A server breaks one of the validation rules.
    #[error("{}: {violation}{}", .locus, .locus.at())]
    Invalid {
        /// Where.
        locus: Box<Locus>,
        /// Which rule.
        violation: Violation,
    },

    /// A duration field does not parse or is not positive.
    #[error("{}: invalid {field}{}", .locus, .locus.at())]
    Duration {
        /// Where.
        locus: Box<Locus>,
        /// The field.
        field: &'static str,
        /// Why.
        #[source]
        source: DurationError,
    },

    /// A `${VAR}` in a field cannot be expanded.
    #[error("{}: cannot expand {field}{}", .locus, .locus.at())]
    Expand {
        /// Where.
        locus: Box<Locus>,
        /// The field as written in messages, e.g. `ARGS[2]` or `ENV.GITHUB_TOKEN`.
        field: String,
        /// Why.
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
    pub(super) fn set_position(&mut self, line: usize, column: usize) {
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
