//! The client against real fixture processes and a real HTTP server.

mod support;

mod close;
mod connect;
mod contain;
mod endurance;
mod failure;
mod flood;
// Streamable HTTP servers need the `http` feature (on by default).
#[cfg(feature = "http")]
mod http;
mod pid_reuse;
mod properties;
mod redaction;
mod session;
mod streams;
