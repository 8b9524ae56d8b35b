//! The client against real fixture processes and a real HTTP server.

mod support;

mod close;
mod connect;
mod failure;
mod redaction;
mod streams;
mod http;
mod session;
