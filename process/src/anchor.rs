//! The harness anchor: how a process started for a harness ends itself when
//! the harness is gone, whatever else it was asked to do.
//!
//! A harness (a scenario run, a check, a test process) hands every process
//! it starts for the run an anchor: its own pid and start time, as
//! `<pid>:<start ticks>` in the environment ([`ANCHOR_ENV`]) or in argv
//! ([`ANCHOR_ARG`]`<pid>:<ticks>`, which survives a client that filters the
//! environment or a sidecar exec'd with none). A process that carries an
//! anchor calls [`Anchor::watch`]: a thread of its own waits on a pidfd of
//! the harness (`poll` until it is readable: the harness has exited, however
//! it died, SIGKILL included) and then runs the process's own ending. The
//! start time makes the anchor unambiguous: a recycled pid never matches it,
//! so a process started after its harness died ends at once.
//!
//! This is what makes the project's fixtures safe to leave to any client:
//! a fixture that ignores stdin EOF and SIGTERM on purpose still ends when
//! the harness that started it is killed by a CI timeout or the OOM killer,
//! since nothing it is asked to misbehave about touches this thread.
//! (`SIGSTOP` would; no fixture stops itself.)

use std::{fmt, time::Duration};

use crate::{
    signal::{Pidfd, Signal},
    table,
};

/// The environment variable that carries the anchor.
pub const ANCHOR_ENV: &str = "MCP_FIXTURE_ANCHOR";

/// The argv form of the anchor: `--anchor=<pid>:<ticks>`.
pub const ANCHOR_ARG: &str = "--anchor=";

/// How often the fallback (no pidfd: Linux before 5.3, or a sandbox that
/// refuses the call) looks at the harness's `/proc` entry.
const FALLBACK_POLL: Duration = Duration::from_millis(100);

/// One process, named so that a recycled pid is never taken for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// The harness's pid.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_ticks: u64,
}

impl fmt::Display for Anchor {
    /// The value form, `<pid>:<ticks>`, as [`Anchor::parse`] reads it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.pid, self.start_ticks)
    }
}

impl Anchor {
    /// This process as an anchor for what it starts. `None` where the
    /// process table cannot be read (not Linux): nothing is handed down then.
    pub fn this_process() -> Option<Anchor> {
        let pid = std::process::id();
        let stat = table::stat(pid)?;
        Some(Anchor {
            pid,
            start_ticks: stat.start_ticks,
        })
    }

    /// Reads `<pid>:<ticks>`.
    pub fn parse(value: &str) -> Option<Anchor> {
        let (pid, ticks) = value.trim().split_once(':')?;
        Some(Anchor {
            pid: pid.parse().ok().filter(|pid| *pid > 0)?,
            start_ticks: ticks.parse().ok()?,
        })
    }

    /// The anchor this process was handed: `--anchor=` in `args` first (it
    /// survives an emptied environment), else [`ANCHOR_ENV`].
    pub fn handed_down<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Option<Anchor> {
        let from_args = args.iter().find_map(|arg| {
            let arg = arg.as_ref().to_str()?;
            Anchor::parse(arg.strip_prefix(ANCHOR_ARG)?)
        });
        from_args.or_else(|| Anchor::parse(&std::env::var(ANCHOR_ENV).ok()?))
    }

    /// The argv form, `--anchor=<pid>:<ticks>`.
    pub fn arg(&self) -> String {
        format!("{ANCHOR_ARG}{self}")
    }

    /// Whether the anchored process is still running (neither gone nor a
    /// zombie, and not replaced by another process with its pid).
    pub fn is_alive(&self) -> bool {
        table::stat(self.pid)
            .is_some_and(|stat| stat.start_ticks == self.start_ticks && stat.is_alive())
    }

    /// Live processes handed this anchor (in [`ANCHOR_ENV`] or as
    /// [`ANCHOR_ARG`] in argv), ordered by pid: what a harness started for
    /// a run, wherever it went.
    pub fn carriers(&self) -> Vec<u32> {
        let value = self.to_string();
        let arg = self.arg();
        let env = format!("{ANCHOR_ENV}={value}");
        let mut found: Vec<u32> = table::pids()
            .into_iter()
            .filter(|pid| {
                let in_argv = std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|argv| argv.split(|b| *b == 0).any(|a| a == arg.as_bytes()));
                in_argv
                    || std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                        environ.split(|b| *b == 0).any(|var| var == env.as_bytes())
                    })
            })
            .filter(|pid| table::stat(*pid).is_some_and(|stat| stat.is_alive()))
            .collect();
        found.sort_unstable();
        found
    }

    /// SIGKILLs every carrier by pid until none is left or `within` has
    /// passed (an interrupted harness, about to exit). Returns how many
    /// processes it killed.
    pub fn kill_carriers(&self, within: Duration) -> usize {
        let deadline = std::time::Instant::now() + within;
        let mut killed = std::collections::BTreeSet::new();
        loop {
            let left = self.carriers();
            if left.is_empty() || std::time::Instant::now() > deadline {
                return killed.len();
            }
            for pid in left {
                let _ = crate::signal::signal_pid(pid, Signal::SIGKILL);
                killed.insert(pid);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Runs `on_gone` on a thread of its own as soon as the anchored process
    /// has exited (at once when it already has). `on_gone` is expected to end
    /// this process. Returns an error only when the thread cannot be started.
    pub fn watch(self, on_gone: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("anchor".into())
            .spawn(move || {
                self.wait_gone();
                on_gone();
            })
            .map(drop)
    }

    /// Blocks until the anchored process has exited.
    pub fn wait_gone(&self) {
        match Pidfd::open(self.pid) {
            Some(fd) => {
                // Checked after the pidfd is open: if the pid still names the
                // harness now, the pidfd names it too, and a recycled pid can
                // no longer stand in for it.
                if self.is_alive() {
                    fd.wait_exited();
                }
            }
            None => {
                while self.is_alive() {
                    std::thread::sleep(FALLBACK_POLL);
                }
            }
        }
    }
}

/// Waits, at most `within`, until process `pid` has exited: see
/// [`crate::signal::wait_exited`], which it is.
pub use crate::signal::wait_exited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchor_reads_back_what_it_writes() {
        let anchor = Anchor {
            pid: 4242,
            start_ticks: 987_654,
        };
        assert_eq!(anchor.to_string(), "4242:987654");
        assert_eq!(Anchor::parse(&anchor.to_string()), Some(anchor));
        assert_eq!(anchor.arg(), "--anchor=4242:987654");
        assert_eq!(
            Anchor::handed_down(&["x", "--marker=m", &anchor.arg()]),
            Some(anchor)
        );
        for bad in ["", "4242", "0:1", "x:1", "1:x", "-1:5"] {
            assert_eq!(Anchor::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_process_is_alive_and_a_different_start_time_is_not() {
        let me = Anchor::this_process().expect("the table is readable here");
        assert!(me.is_alive());
        let recycled = Anchor {
            start_ticks: me.start_ticks + 1,
            ..me
        };
        assert!(!recycled.is_alive());
    }

    /// The watch fires when the anchored process exits, not before: a child
    /// that waits on its stdin is the anchor, and its end is chosen here.
    #[test]
    fn the_watch_fires_when_the_anchor_exits() {
        use std::io::Write;
        let mut child = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cat runs");
        let stat = table::stat(child.id()).expect("the child is in the table");
        let anchor = Anchor {
            pid: child.id(),
            start_ticks: stat.start_ticks,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        anchor.watch(move || tx.send(()).unwrap()).unwrap();
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "the watch fired while its anchor was alive"
        );
        // EOF ends cat; the watch must notice it even before we reap it.
        child.stdin.take().unwrap().flush().unwrap();
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the watch fires once its anchor has exited");
        child.wait().unwrap();
    }
}
