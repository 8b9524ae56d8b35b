//! Errors of the stdio client. Every message names the server; none carries
//! ARGS elements or ENV values (docs/contract.md: `2.redaction`, `2.errors`). The stderr tail attached to a
//! child-exited error is the server's own words.
//!
//! [`ClientError`] is a struct: the server it is about, its [`ErrorKind`]
//! (a stable id that scenarios and reports use) and a private detail that
//! makes the message and the cause chain.

use std::{fmt, time::Duration};

use mcp_stdio_process::ChildExit;

use crate::{command_path::CommandPathError, config::format_duration};

/// A failure of the client, about one server.
///
/// Match on [`ClientError::kind`]; the message ([`Display`](fmt::Display)) names the server and
/// says what to do, and [`source`](std::error::Error::source) carries the cause, if any.
#[derive(Debug)]
pub struct ClientError {
    server: String,
    kind: ErrorKind,
    detail: Detail,
}

/// What went wrong, with what the message needs. The server's name is in [`ClientError`].
#[derive(Debug)]
pub(crate) enum Detail {
    NotStdio,
    Resolve(CommandPathError),
    InvalidName,
    Spawn {
        command: String,
        source: std::io::Error,
    },
    HandshakeTimeout {
        timeout: Duration,
        stderr_tail: Vec<String>,
    },
    Handshake {
        reason: String,
        stderr_tail: Vec<String>,
    },
    ChildExited {
        status: ChildExit,
        stderr_tail: Vec<String>,
    },
    Timeout {
        method: String,
        timeout: Duration,
    },
    Server {
        method: String,
        code: i32,
        message: String,
    },
    #[cfg(feature = "http")]
    NotHttp,
    Http {
        reason: String,
    },
    #[cfg(feature = "http")]
    Credentials(crate::credentials::CredentialError),
    StdoutClosed,
    UnexpectedResponse {
        method: String,
    },
    Closed,
}

impl ClientError {
    /// The error about server `name`.
    pub(crate) fn new(name: &str, detail: Detail) -> Self {
        let kind = match &detail {
            Detail::NotStdio => ErrorKind::NotStdio,
            #[cfg(feature = "http")]
            Detail::NotHttp => ErrorKind::NotHttp,
            Detail::Http { .. } => ErrorKind::Http,
            #[cfg(feature = "http")]
            Detail::Credentials(_) => ErrorKind::Credentials,
            Detail::Resolve(source) => match source {
                CommandPathError::NotFound { .. } => ErrorKind::NotFound,
                CommandPathError::BadPath { .. } => ErrorKind::BadPath,
                CommandPathError::BadDir { .. } => ErrorKind::BadDir,
                CommandPathError::Empty => ErrorKind::EmptyCommand,
            },
            Detail::InvalidName => ErrorKind::InvalidName,
            Detail::Spawn { .. } => ErrorKind::Spawn,
            Detail::HandshakeTimeout { .. } => ErrorKind::HandshakeTimeout,
            Detail::Handshake { .. } => ErrorKind::Handshake,
            Detail::ChildExited { .. } => ErrorKind::ChildExited,
            Detail::Timeout { .. } => ErrorKind::Timeout,
            Detail::Server { .. } => ErrorKind::ServerError,
            Detail::StdoutClosed => ErrorKind::StdoutClosed,
            Detail::UnexpectedResponse { .. } => ErrorKind::UnexpectedResponse,
            Detail::Closed => ErrorKind::Closed,
        };
        ClientError {
            server: name.to_owned(),
            kind,
            detail,
        }
    }

    /// What kind of failure this is. Its [`ErrorKind::as_str`] is the stable id scenarios,
    /// reports and [`EventKind::RequestFailed`](crate::EventKind::RequestFailed) use.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The server this error is about (its name in the config).
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The child's last stderr lines attached to this error (the server's
    /// own words), if any: for [`ErrorKind::HandshakeTimeout`], [`ErrorKind::Handshake`] and
    /// [`ErrorKind::ChildExited`].
    pub fn stderr_tail(&self) -> &[String] {
        match &self.detail {
            Detail::HandshakeTimeout { stderr_tail, .. }
            | Detail::Handshake { stderr_tail, .. }
            | Detail::ChildExited { stderr_tail, .. } => stderr_tail,
            _ => &[],
        }
    }

    /// How the server process ended, for [`ErrorKind::ChildExited`].
    pub fn child_exit(&self) -> Option<ChildExit> {
        match &self.detail {
            Detail::ChildExited { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The JSON-RPC error code the server answered with, for [`ErrorKind::ServerError`].
    pub fn server_error_code(&self) -> Option<i32> {
        match &self.detail {
            Detail::Server { code, .. } => Some(*code),
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.server;
        match &self.detail {
            Detail::NotStdio => write!(
                f,
                "server \"{name}\" is not a stdio server (it has a URL, not a COMMAND)"
            ),
            Detail::Resolve(_) => write!(f, "cannot start stdio server \"{name}\""),
            Detail::InvalidName => write!(
                f,
                "cannot start stdio server {name:?}: its name contains a NUL byte; \
                 give it a name without one"
            ),
            Detail::Spawn { command, .. } => {
                write!(
                    f,
                    "cannot start stdio server \"{name}\" (COMMAND `{command}`)"
                )
            }
            Detail::HandshakeTimeout {
                timeout,
                stderr_tail,
            } => write!(
                f,
                "stdio server \"{name}\" did not complete the MCP handshake within {}; it was \
                 killed. Check that COMMAND starts an MCP server on stdio, or raise TIMEOUT{}",
                format_duration(*timeout),
                tail_suffix(stderr_tail)
            ),
            Detail::Handshake {
                reason,
                stderr_tail,
            } => write!(
                f,
                "stdio server \"{name}\" failed the MCP handshake: {reason}{}",
                tail_suffix(stderr_tail)
            ),
            Detail::ChildExited {
                status,
                stderr_tail,
            } => write!(
                f,
                "stdio server \"{name}\" exited: {status}{}",
                tail_suffix(stderr_tail)
            ),
            Detail::Timeout { method, timeout } => write!(
                f,
                "server \"{name}\" did not answer {method} within {}; the request was cancelled \
                 and the server left running",
                format_duration(*timeout)
            ),
            Detail::Server {
                method,
                code,
                message,
            } => write!(
                f,
                "server \"{name}\" answered {method} with error {code}: {message}"
            ),
            #[cfg(feature = "http")]
            Detail::NotHttp => write!(
                f,
                "server \"{name}\" is not an HTTP server (it has a COMMAND, not a URL)"
            ),
            Detail::Http { reason } => write!(f, "HTTP server \"{name}\" failed: {reason}"),
            #[cfg(feature = "http")]
            Detail::Credentials(_) => {
                write!(f, "cannot resolve credentials for HTTP server \"{name}\"")
            }
            Detail::StdoutClosed => write!(
                f,
                "stdio server \"{name}\" closed its stdout but is still running"
            ),
            Detail::UnexpectedResponse { method } => {
                write!(f, "server \"{name}\" sent an unexpected answer to {method}")
            }
            Detail::Closed => write!(f, "server \"{name}\" is closed"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.detail {
            Detail::Resolve(source) => Some(source),
            Detail::Spawn { source, .. } => Some(source),
            #[cfg(feature = "http")]
            Detail::Credentials(source) => Some(source),
            _ => None,
        }
    }
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
    /// Every kind, for the test that ties `as_str` to serde's names.
    #[cfg(test)]
    const ALL: &[ErrorKind] = &[
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
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
/// [`ErrorKind::Http`] failure here; the stdio client maps those itself (a
/// dead child is reported as such).
pub(crate) fn service_error(
    name: &str,
    method: &str,
    error: rmcp::service::ServiceError,
) -> ClientError {
    use rmcp::service::ServiceError;
    let detail = match error {
        ServiceError::Timeout { timeout } => Detail::Timeout {
            method: method.to_owned(),
            timeout,
        },
        // The server's words, which may quote the credential it was sent.
        ServiceError::McpError(error) => Detail::Server {
            method: method.to_owned(),
            code: error.code.0,
            message: crate::redact::redact(&error.message).into_owned(),
        },
        ServiceError::UnexpectedResponse => Detail::UnexpectedResponse {
            method: method.to_owned(),
        },
        // A transport failure quotes reqwest's error, which quotes the URL as it parsed it, and
        // the server's answer, which may quote the credential it was sent.
        other => Detail::Http {
            reason: crate::redact::redact(&format!("{method}: {other}")).into_owned(),
        },
    };
    ClientError::new(name, detail)
}

/// The error for an HTTP server when the crate is built without its `http` feature.
#[cfg(not(feature = "http"))]
pub(crate) fn http_disabled(name: &str) -> ClientError {
    ClientError::new(
        name,
        Detail::Http {
            reason: "this build has no HTTP support (cargo feature `http` of mcp-stdio-client)"
                .into(),
        },
    )
}

/// `error` and its causes (`source()` chain), joined with `: `: how every
/// message of this project is printed.
///
/// ```
/// # async fn demo() {
/// let server = mcp_stdio_client::config::ServerConfig::stdio(
///     "fs",
///     mcp_stdio_client::config::StdioConfig::new("/no/such/server"),
/// );
/// let error = mcp_stdio_client::StdioClient::connect(&server).await.err().unwrap();
/// let text = mcp_stdio_client::error_chain(&error);
/// assert!(text.starts_with("cannot start stdio server \"fs\": command `/no/such/server`"));
/// # }
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo());
/// ```
pub fn error_chain(error: &dyn std::error::Error) -> String {
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
            let json = serde_json::to_string(kind).unwrap();
            assert_eq!(json, format!("\"{kind}\""));
            assert_eq!(serde_json::from_str::<ErrorKind>(&json).unwrap(), *kind);
        }
        assert!(serde_json::from_str::<ErrorKind>("\"no_such_kind\"").is_err());
    }
}
