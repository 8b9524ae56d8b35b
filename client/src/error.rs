//! Errors of the stdio client. Every message names the server; none carries
//! ARGS elements or ENV values (docs/contract.md: `2.redaction`, `2.errors`). The stderr tail attached to a
//! child-exited error is the server's own words.

use std::time::Duration;

use crate::{config::format_duration, events::ChildExit, resolve::ResolveError};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("server \"{name}\" is not a stdio server (it has a URL, not a COMMAND)")]
    NotStdio { name: String },

    #[error("cannot start stdio server \"{name}\"")]
    Resolve {
        name: String,
        #[source]
        source: ResolveError,
    },

    #[error(
        "cannot start stdio server {name:?}: its name contains a NUL byte; \
         give it a name without one"
    )]
    InvalidName { name: String },

    #[error("cannot start stdio server \"{name}\" (COMMAND `{command}`)")]
    Spawn {
        name: String,
        command: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "stdio server \"{name}\" did not complete the MCP handshake within {}; it was killed. \
         Check that COMMAND starts an MCP server on stdio, or raise TIMEOUT{}",
        format_duration(*timeout),
        tail_suffix(stderr_tail)
    )]
    HandshakeTimeout {
        name: String,
        timeout: Duration,
        stderr_tail: Vec<String>,
    },

    #[error(
        "stdio server \"{name}\" failed the MCP handshake: {reason}{}",
        tail_suffix(stderr_tail)
    )]
    Handshake {
        name: String,
        reason: String,
        stderr_tail: Vec<String>,
    },

    #[error("stdio server \"{name}\" exited: {status}{}", tail_suffix(stderr_tail))]
    ChildExited {
        name: String,
        status: ChildExit,
        stderr_tail: Vec<String>,
    },

    #[error(
        "server \"{name}\" did not answer {method} within {}; the request was cancelled \
         and the server left running",
        format_duration(*timeout)
    )]
    Timeout {
        name: String,
        method: String,
        timeout: Duration,
    },

    #[error("server \"{name}\" answered {method} with error {code}: {message}")]
    Server {
        name: String,
        method: String,
        code: i32,
        message: String,
    },

    #[error("server \"{name}\" is not an HTTP server (it has a COMMAND, not a URL)")]
    NotHttp { name: String },

    #[error("HTTP server \"{name}\" failed: {reason}")]
    Http { name: String, reason: String },

    #[error("cannot resolve credentials for HTTP server \"{name}\"")]
    Credentials {
        name: String,
        #[source]
        source: crate::credentials::CredentialError,
    },

    #[error("stdio server \"{name}\" closed its stdout but is still running")]
    StdoutClosed { name: String },

    #[error("server \"{name}\" sent an unexpected answer to {method}")]
    UnexpectedResponse { name: String, method: String },

    #[error("server \"{name}\" is closed")]
    Closed { name: String },
}

/// What kind of failure a [`ClientError`] is: stable ids (`child_exited`,
/// `handshake_timeout`...) that scenarios, reports and events use. New kinds
/// may be added, so matches need a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// the config names an HTTP server where a stdio one is needed.
    NotStdio,
    /// the config names a stdio server where an HTTP one is needed.
    NotHttp,
    /// an HTTP server failed.
    Http,
    /// an HTTP server's credentials could not be resolved.
    Credentials,
    /// COMMAND was not found.
    NotFound,
    /// COMMAND names a path that is not an executable file.
    BadPath,
    /// DIR does not exist or is not a directory.
    BadDir,
    /// COMMAND is empty.
    EmptyCommand,
    /// the server's name cannot be used (a NUL byte).
    InvalidName,
    /// the operating system refused to start the process.
    Spawn,
    /// start-up did not complete within TIMEOUT.
    HandshakeTimeout,
    /// the server answered start-up unacceptably.
    Handshake,
    /// the server process exited.
    ChildExited,
    /// a request was not answered within TIMEOUT.
    Timeout,
    /// the server answered a request with a JSON-RPC error.
    ServerError,
    /// the server closed its stdout but still runs.
    StdoutClosed,
    /// the server answered with the wrong kind of result.
    UnexpectedResponse,
    /// the client was closed.
    Closed,
}

impl ErrorKind {
    /// Every kind, in a fixed order.
    pub const ALL: &[ErrorKind] = &[
        ErrorKind::NotStdio,
        ErrorKind::NotHttp,
        ErrorKind::Http,
        ErrorKind::Credentials,
        ErrorKind::NotFound,
        ErrorKind::BadPath,
        ErrorKind::BadDir,
        ErrorKind::EmptyCommand,
        ErrorKind::InvalidName,
        ErrorKind::Spawn,
        ErrorKind::HandshakeTimeout,
        ErrorKind::Handshake,
        ErrorKind::ChildExited,
        ErrorKind::Timeout,
        ErrorKind::ServerError,
        ErrorKind::StdoutClosed,
        ErrorKind::UnexpectedResponse,
        ErrorKind::Closed,
    ];

    /// The stable id.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotStdio => "not_stdio",
            ErrorKind::NotHttp => "not_http",
            ErrorKind::Http => "http",
            ErrorKind::Credentials => "credentials",
            ErrorKind::NotFound => "not_found",
            ErrorKind::BadPath => "bad_path",
            ErrorKind::BadDir => "bad_dir",
            ErrorKind::EmptyCommand => "empty_command",
            ErrorKind::InvalidName => "invalid_name",
            ErrorKind::Spawn => "spawn",
            ErrorKind::HandshakeTimeout => "handshake_timeout",
            ErrorKind::Handshake => "handshake",
            ErrorKind::ChildExited => "child_exited",
            ErrorKind::Timeout => "timeout",
            ErrorKind::ServerError => "server_error",
            ErrorKind::StdoutClosed => "stdout_closed",
            ErrorKind::UnexpectedResponse => "unexpected_response",
            ErrorKind::Closed => "closed",
        }
    }

    /// The kind with this id.
    pub fn parse(id: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.as_str() == id)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl ClientError {
    /// A stable identifier of the error's kind, for scenarios and reports.
    pub fn kind(&self) -> &'static str {
        self.error_kind().as_str()
    }

    /// The error's kind.
    pub fn error_kind(&self) -> ErrorKind {
        match self {
            ClientError::NotStdio { .. } => ErrorKind::NotStdio,
            ClientError::NotHttp { .. } => ErrorKind::NotHttp,
            ClientError::Http { .. } => ErrorKind::Http,
            ClientError::Credentials { .. } => ErrorKind::Credentials,
            ClientError::Resolve { source, .. } => match source {
                ResolveError::NotFound { .. } => ErrorKind::NotFound,
                ResolveError::BadPath { .. } => ErrorKind::BadPath,
                ResolveError::BadDir { .. } => ErrorKind::BadDir,
                ResolveError::Empty => ErrorKind::EmptyCommand,
            },
            ClientError::InvalidName { .. } => ErrorKind::InvalidName,
            ClientError::Spawn { .. } => ErrorKind::Spawn,
            ClientError::HandshakeTimeout { .. } => ErrorKind::HandshakeTimeout,
            ClientError::Handshake { .. } => ErrorKind::Handshake,
            ClientError::ChildExited { .. } => ErrorKind::ChildExited,
            ClientError::Timeout { .. } => ErrorKind::Timeout,
            ClientError::Server { .. } => ErrorKind::ServerError,
            ClientError::StdoutClosed { .. } => ErrorKind::StdoutClosed,
            ClientError::UnexpectedResponse { .. } => ErrorKind::UnexpectedResponse,
            ClientError::Closed { .. } => ErrorKind::Closed,
        }
    }

    /// The child's last stderr lines attached to this error (the server's
    /// own words), if any.
    pub fn stderr_tail(&self) -> &[String] {
        match self {
            ClientError::HandshakeTimeout { stderr_tail, .. }
            | ClientError::Handshake { stderr_tail, .. }
            | ClientError::ChildExited { stderr_tail, .. } => stderr_tail,
            _ => &[],
        }
    }

    /// The server this error is about.
    pub fn server(&self) -> &str {
        match self {
            ClientError::NotStdio { name }
            | ClientError::NotHttp { name }
            | ClientError::Http { name, .. }
            | ClientError::Credentials { name, .. }
            | ClientError::Resolve { name, .. }
            | ClientError::InvalidName { name }
            | ClientError::Spawn { name, .. }
            | ClientError::HandshakeTimeout { name, .. }
            | ClientError::Handshake { name, .. }
            | ClientError::ChildExited { name, .. }
            | ClientError::Timeout { name, .. }
            | ClientError::Server { name, .. }
            | ClientError::StdoutClosed { name }
            | ClientError::UnexpectedResponse { name, .. }
            | ClientError::Closed { name } => name,
        }
    }
}

fn tail_suffix(tail: &[String]) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; last stderr lines:\n  {}", tail.join("\n  "))
    }
}

/// The transport-independent part of mapping an rmcp failure: timeouts,
/// JSON-RPC errors and wrong answers. Anything else is reported as an
/// [`ClientError::Http`] failure here; the stdio client maps those itself (a
/// dead child is reported as such).
pub fn service_error(name: &str, method: &str, error: rmcp::service::ServiceError) -> ClientError {
    use rmcp::service::ServiceError;
    match error {
        ServiceError::Timeout { timeout } => ClientError::Timeout {
            name: name.to_owned(),
            method: method.to_owned(),
            timeout,
        },
        ServiceError::McpError(error) => ClientError::Server {
            name: name.to_owned(),
            method: method.to_owned(),
            code: error.code.0,
            message: error.message.to_string(),
        },
        ServiceError::UnexpectedResponse => ClientError::UnexpectedResponse {
            name: name.to_owned(),
            method: method.to_owned(),
        },
        // A transport failure quotes reqwest's error, which quotes the URL as it parsed it.
        other => ClientError::Http {
            name: name.to_owned(),
            reason: crate::redact::redact_urls(&format!("{method}: {other}")).into_owned(),
        },
    }
}

/// `error` and its causes (`source()` chain), joined with `: `: how every
/// message of this project is printed.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    #[test]
    fn every_kind_round_trips_through_its_id_and_serde() {
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(kind.as_str()), Some(*kind));
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), *kind);
        }
        assert_eq!(ErrorKind::parse("no_such_kind"), None);
    }
}
