//! Every temporary directory a run of the harness makes, removed however the
//! run ends.
//!
//! A scenario's ledger directory, a client check's run directory and the
//! directory of `fixture-*` links an installed tool makes for itself are
//! made here ([`tempdir`]). Each is registered while it exists: a normal end
//! removes it when its guard drops, and what a process still holds when it
//! exits (the fixture links live as long as the process) is removed by an
//! `atexit` handler, so `std::process::exit` and a return from `main` both
//! clean up. A signal that the harness handles ([`crate::interrupt`]) ends
//! the run through `exit` too. Only SIGKILL skips all of this: then the
//! keeper ([`crate::keeper`]), told of each directory, removes them.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, Once},
};

// The prefix of every directory made here, in the system's temp directory:
// the keeper's, which removes only directories that carry it.
use crate::keeper::DIR_PREFIX as PREFIX;

static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A registered temporary directory: removed when dropped, or at exit.
#[derive(Debug)]
pub struct TempDir {
    dir: tempfile::TempDir,
}

impl TempDir {
    /// Its path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|path| path != self.dir.path());
        // `tempfile::TempDir`'s own drop removes the directory.
    }
}

/// Makes `<temp>/mcp-conformance-<what>-XXXXXX` and registers it.
pub fn tempdir(what: &str) -> std::io::Result<TempDir> {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C"` function; it runs once,
        // at exit, on the exiting thread.
        unsafe {
            nix::libc::atexit(remove_at_exit);
        }
    });
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{what}-"))
        .tempdir()?;
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(dir.path().to_owned());
    // Removed by the keeper, where one runs, if this process is SIGKILLed.
    crate::keeper::dir(dir.path());
    Ok(TempDir { dir })
}

/// Removes every registered directory now (an interrupted run, about to exit).
pub fn remove_all() {
    // `try_lock`: a signal path must never wait on a lock that the thread it
    // interrupted might hold for ever; at worst the atexit pass retries.
    let paths: Vec<PathBuf> = match LIVE.try_lock() {
        Ok(mut live) => std::mem::take(&mut *live),
        Err(std::sync::TryLockError::Poisoned(e)) => std::mem::take(&mut *e.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    for path in paths {
        let _ = std::fs::remove_dir_all(&path);
    }
}

extern "C" fn remove_at_exit() {
    remove_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_dir_is_removed_and_unregistered() {
        let dir = tempdir("test").unwrap();
        let path = dir.path().to_owned();
        assert!(
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("mcp-conformance-test-")
        );
        assert!(LIVE.lock().unwrap().contains(&path));
        drop(dir);
        assert!(!path.exists());
        assert!(!LIVE.lock().unwrap().contains(&path));
    }
}
