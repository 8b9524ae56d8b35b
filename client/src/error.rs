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

impl ClientError {
    /// A stable identifier of the error's kind, for scenarios and reports.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientError::NotStdio { .. } => "not_stdio",
            ClientError::NotHttp { .. } => "not_http",
            ClientError::Http { .. } => "http",
            ClientError::Credentials { .. } => "credentials",
            ClientError::Resolve { source, .. } => match source {
                ResolveError::NotFound { .. } => "not_found",
                ResolveError::BadPath { .. } => "bad_path",
                ResolveError::BadDir { .. } => "bad_dir",
                ResolveError::Empty => "empty_command",
            },
            ClientError::InvalidName { .. } => "invalid_name",
            ClientError::Spawn { .. } => "spawn",
            ClientError::HandshakeTimeout { .. } => "handshake_timeout",
            ClientError::Handshake { .. } => "handshake",
            ClientError::ChildExited { .. } => "child_exited",
            ClientError::Timeout { .. } => "timeout",
            ClientError::Server { .. } => "server_error",
            ClientError::StdoutClosed { .. } => "stdout_closed",
            ClientError::UnexpectedResponse { .. } => "unexpected_response",
            ClientError::Closed { .. } => "closed",
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
