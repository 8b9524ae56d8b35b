//! An MCP client for stdio servers that owns the whole child-process lifecycle.
//!
//! See `docs/client.md` for the lifecycle as implemented and `docs/contract.md`
//! for the contract it follows.

pub mod config;
pub mod credentials;
pub mod era;
pub mod error;
pub mod events;
pub mod http_client;
pub mod lines;
pub mod redact;
pub mod resolve;
pub mod session;
pub mod stdio;
pub mod transport;

pub use error::{ClientError, ErrorKind};
pub use events::{ChildExit, ClosePath, Event, EventKind};
pub use rmcp;
pub use session::{Session, SessionOptions};
pub use stdio::{CloseOutcome, StdioClient};
