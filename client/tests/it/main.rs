//! The client against real fixture processes and a real HTTP server.

mod support;

mod close;
mod connect;
mod endurance;
mod failure;
mod flood;
mod http;
mod pid_reuse;
mod properties;
mod redaction;
mod session;
mod streams;
