//! SIGINT, SIGTERM and SIGHUP for the CLIs.
//!
//! The servers a CLI starts live in process groups of their own, so a Ctrl-C
//! at the terminal (SIGINT to the foreground group) or a SIGTERM/SIGHUP to the
//! CLI never reaches them. Each CLI therefore listens for these signals, closes
//! everything it started with the normal close ladder, and exits with the
//! conventional code `128 + signal` ([`Interrupt::exit_code`]). A second signal
//! while that close runs means "now": the CLI skips to SIGKILL of the groups.

use std::io;

use mcp_conformance_report::exit;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// The signal that interrupted a CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// SIGINT: Ctrl-C at the terminal.
    Int,
    /// SIGTERM: a polite request to stop.
    Term,
    /// SIGHUP: the terminal went away.
    Hup,
}

impl Interrupt {
    /// The exit code a shell expects from a process ended by this signal:
    /// 130, 143 or 129.
    pub fn exit_code(self) -> u8 {
        exit::SIGNALLED_BASE + self.number() as u8
    }

    /// The signal's number.
    pub fn number(self) -> i32 {
        match self {
            Interrupt::Int => nix::libc::SIGINT,
            Interrupt::Term => nix::libc::SIGTERM,
            Interrupt::Hup => nix::libc::SIGHUP,
        }
    }

    /// The signal's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Interrupt::Int => "SIGINT",
            Interrupt::Term => "SIGTERM",
            Interrupt::Hup => "SIGHUP",
        }
    }
}

/// Listens for SIGINT, SIGTERM and SIGHUP from the moment it is installed:
/// the default dispositions (which would kill the CLI outright) are replaced
/// for the rest of the process's life.
pub struct Interrupts {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Interrupts {
    /// Installs the handlers. Must be called within a tokio runtime.
    pub fn install() -> io::Result<Interrupts> {
        Ok(Interrupts {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// Waits for the next of the three signals.
    pub async fn recv(&mut self) -> Interrupt {
        tokio::select! {
            _ = self.int.recv() => Interrupt::Int,
            _ = self.term.recv() => Interrupt::Term,
            _ = self.hup.recv() => Interrupt::Hup,
        }
    }
}

/// For a CLI that runs synchronously (`scenarios`, `client`): blocks SIGINT,
/// SIGTERM and SIGHUP on the calling thread (call it before any other thread
/// exists: threads inherit the mask, and children get an empty one from
/// `mcp_stdio_process`), and takes them on one thread of its own with
/// `sigwait`. On the first signal it prints what it does, runs `end` (which
/// ends what the run started that is not anchored to this process), SIGKILLs
/// every process anchored to this one (what the run started, wherever it
/// went), removes the run's temporary directories, and exits with
/// `128 + signal`.
pub fn end_on_signal(cli: &'static str, end: impl FnOnce() + Send + 'static) {
    ENDING.store(false, std::sync::atomic::Ordering::SeqCst);
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(signal);
    }
    if set.thread_block().is_err() {
        return;
    }
    std::thread::spawn(move || {
        if let Ok(signal) = set.wait() {
            // Set before anything is ended: a scenario that fails because
            // its servers are killed now leaves no log file behind.
            ENDING.store(true, std::sync::atomic::Ordering::SeqCst);
            eprintln!("{cli}: {signal}: ending what this run started");
            end();
            if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
                anchor.kill_carriers(std::time::Duration::from_secs(5));
            }
            crate::tempdirs::remove_all();
            std::process::exit(128 + signal as i32);
        }
    });
}

static ENDING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For the main thread, once its run is over: if a signal is ending this
/// process, waits for [`end_on_signal`]'s thread to exit with `128 + n`
/// (a run cut short by the signal must not exit first with its own code).
pub fn wait_if_ending() {
    while is_ending() {
        std::thread::park();
    }
}

/// Whether a signal taken by [`end_on_signal`] is ending this process: what
/// fails from then on is the interruption's doing, and writes nothing.
pub fn is_ending() -> bool {
    ENDING.load(std::sync::atomic::Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_128_plus_the_signal() {
        assert_eq!(Interrupt::Int.exit_code(), 130);
        assert_eq!(Interrupt::Term.exit_code(), 143);
        assert_eq!(Interrupt::Hup.exit_code(), 129);
    }
}
