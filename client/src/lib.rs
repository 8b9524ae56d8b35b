//! An MCP client for stdio servers that owns the whole child-process lifecycle.
//!
//! See `docs/client.md` for the lifecycle as implemented and `../shared/CONTRACT.md`
//! for the contract it follows.

pub mod config;
