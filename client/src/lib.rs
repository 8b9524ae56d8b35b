//! An MCP client for stdio servers that owns the whole child-process lifecycle.
//!
//! A host loads its servers with [`config::Config::load`], starts one with
//! [`StdioClient::connect`] (or [`StdioClient::builder`] for options), or all of them at once
//! with [`Session::build`], and ends each with [`StdioClient::close`]: stdin EOF, then
//! SIGTERM to the server's process group, then SIGKILL, and nothing of the group is left
//! behind ([`CloseOutcome`] says which step ended it).
//!
//! ```
//! use mcp_stdio_client::{ClosePath, StdioClient, config::{ServerConfig, StdioConfig}};
//!
//! # async fn demo() -> Result<(), mcp_stdio_client::ClientError> {
//! // A server that is not an MCP server at all: it exits at once.
//! let server = ServerConfig::stdio("gone", StdioConfig::new("true"));
//! let error = StdioClient::connect(&server).await.err().unwrap();
//! assert_eq!(error.kind(), mcp_stdio_client::ErrorKind::ChildExited);
//! # Ok(())
//! # }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(demo()).unwrap();
//! ```
//!
//! See `docs/client.md` for the lifecycle as implemented and `docs/contract.md`
//! for the contract it follows.
//!
//! # Cargo features
//!
//! - `http` (default): Streamable HTTP servers (`URL:` in the config), through rmcp's reqwest
//!   client with rustls. Without it the crate has no HTTP or TLS dependency; the config still
//!   loads HTTP servers, and connecting one fails with [`ErrorKind::Http`].

#![warn(missing_docs)]

pub mod config;

mod command_path;
mod contain;
#[cfg(feature = "http")]
mod credentials;
mod era;
mod error;
mod events;
mod handshake;
#[cfg(feature = "http")]
mod http_client;
mod lines;
mod redact;
mod requests;
mod session;
mod stdio;
mod transport;

pub use command_path::{CommandPathError, DirProblem, SearchedPath};
pub use contain::{Contain, ContainMethod, Contained};
#[cfg(feature = "http")]
pub use credentials::Authorization;
pub use era::{
    DEFAULT_PROBE_TIMEOUT, DEFAULT_RESTART_BACKOFF, Era, EraSetting, Fallback, RestartPolicy,
};
pub use error::{ClientError, ErrorKind, error_chain};
pub use events::{
    ChildExit, ClosePath, EVENT_LOG_CAPACITY, Event, EventKind, EventLog, SkipReason,
};
#[cfg(feature = "http")]
pub use http_client::HttpClient;
pub use redact::RedactingWriter;
/// The rmcp types that appear in this crate's own signatures (tool lists, call results, the
/// server's identity), and only those: the client does not re-export the whole of rmcp, so
/// its semver follows rmcp only where its API shows rmcp's types.
pub use rmcp::model::{CallToolResult, JsonObject, ServerPeerInfo, Tool};
pub use session::{
    Connection, DEFAULT_DISCOVERY_TIMEOUT, ServerClose, Session, SessionError, SessionOptions,
    SessionTool, StartFailure, qualified_name,
};
pub use stdio::{CloseOutcome, ConnectOptions, StdioClient};
pub use transport::{MAX_STDIN_BACKLOG, StdinBacklog};
