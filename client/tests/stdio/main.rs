//! The stdio client against real fixture processes.

mod support;

mod close;
mod connect;
mod failure;
mod redaction;
mod streams;
