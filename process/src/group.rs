//! "Does this process group still have a live member?", asked by many at
//! once: one watcher thread (running only while someone waits) scans the
//! process table once per tick for every
//! group being waited on, and answers each waiter.
//!
//! A group cannot be watched with an event: its members need not be our
//! children, and while the group's leader is kept unreaped (see the crate
//! docs) `kill(-pgid, 0)` succeeds even when the zombie leader is the only
//! member left. So it is scanned. One scan costs O(processes); with one
//! scan per closing server per tick, 256 servers closing at once cost
//! O(256 × processes) per tick, several seconds of CPU in all. Here every
//! waiter asking during the same tick shares one scan: the cost is
//! O(processes) per tick whatever the number of groups.
//!
//! A question asked while no scan runs starts one at once, so a single
//! close waits no longer than before; a question asked while a scan runs
//! waits for the next one (the running scan may have read the table before
//! the question was asked). The one-off question "is it alive now?"
//! ([`alive`]) is answered in the caller's task when nobody else is asking
//! at the same moment, else by the watcher with everyone else's.

use std::{
    collections::BTreeSet,
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    sync::{Condvar, Mutex, MutexGuard, OnceLock},
    time::{Duration, Instant},
};

use tokio::sync::oneshot;

use crate::{deadline, table};

/// How often a group that still has live members is scanned again.
pub const TICK: Duration = Duration::from_millis(2);

/// True while group `pgid` has a live (not zombie) member, from a pass
/// over the table that started after this call.
///
/// A lone question is answered by one pass in the caller's task: the pass
/// reads no `/proc/<pid>/stat` but those of the group's own members
/// ([`table::live_groups`]), and the hop to the watcher thread and back cost
/// more than the pass on the path between a child's exit and close
/// returning. While another pass runs inline, one ran within the last tick,
/// or the watcher has waiters (many servers closing at once), the question
/// goes to the watcher instead, which answers every question asked
/// meanwhile with one pass.
pub async fn alive(pgid: u32) -> bool {
    static INLINE: AtomicBool = AtomicBool::new(false);
    // When the last inline pass ended, in µs since `EPOCH`.
    static LAST_INLINE: AtomicU64 = AtomicU64::new(0);
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    let now = || epoch.elapsed().as_micros() as u64;
    // Inline only while nothing else asks: under a burst the watcher has
    // waiters, or an inline pass ran within the last tick, and one pass of
    // the watcher answers everyone who asks meanwhile.
    let quiet = now().saturating_sub(LAST_INLINE.load(Ordering::Acquire))
        >= TICK.as_micros() as u64
        || LAST_INLINE.load(Ordering::Acquire) == 0;
    if quiet && !watcher().busy() && !INLINE.swap(true, Ordering::Acquire) {
        let alive = table::group_alive(pgid);
        LAST_INLINE.store(now().max(1), Ordering::Release);
        INLINE.store(false, Ordering::Release);
        return alive;
    }
    let (tx, rx) = oneshot::channel();
    watcher().register(pgid, Want::Answer, tx);
    // The watcher answers every waiter it takes; a lost answer (the watcher
    // thread could not start) counts as "alive", the safe side.
    rx.await.unwrap_or(true)
}

/// Waits until group `pgid` has no live member (true), or until `deadline`
/// (false).
pub async fn wait_gone(pgid: u32, deadline: Instant) -> bool {
    let (tx, rx) = oneshot::channel();
    watcher().register(pgid, Want::Gone, tx);
    // A timed-out waiter drops its receiver; the watcher forgets it. The
    // deadline is kept to within tens of microseconds, not tokio's
    // millisecond: it ends a grace (`crate::deadline`).
    matches!(deadline::timeout_at(deadline, rx).await, Some(Ok(_)))
}

#[derive(Clone, Copy, PartialEq)]
enum Want {
    /// The group's state at the next pass.
    Answer,
    /// Word once the group has no live member.
    Gone,
}

struct Waiter {
    pgid: u32,
    want: Want,
    /// Registration order: a scan answers only those registered before it.
    seq: u64,
    tx: oneshot::Sender<bool>,
}

#[derive(Default)]
struct State {
    waiters: Vec<Waiter>,
    next_seq: u64,
    /// The watcher thread is running (it ends after [`IDLE`] without a
    /// waiter, and the next registration starts another).
    running: bool,
}

/// How long the watcher thread stays without a waiter before it ends: no
/// thread is kept for a harness that is not closing anything.
const IDLE: Duration = Duration::from_secs(1);

impl State {
    /// True when nobody registered since `next_seq` was `seq`.
    fn quiet_since(&self, seq: u64) -> bool {
        self.next_seq == seq
    }
}

struct Watcher {
    state: Mutex<State>,
    /// Signalled when a waiter registers.
    wake: Condvar,
}

fn watcher() -> &'static Watcher {
    static WATCHER: OnceLock<Watcher> = OnceLock::new();
    WATCHER.get_or_init(|| Watcher {
        state: Mutex::new(State::default()),
        wake: Condvar::new(),
    })
}

impl Watcher {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True while waiters are registered (a burst of closes is on).
    fn busy(&self) -> bool {
        !self.lock().waiters.is_empty()
    }

    fn register(&'static self, pgid: u32, want: Want, tx: oneshot::Sender<bool>) {
        let mut state = self.lock();
        let seq = state.next_seq;
        state.next_seq += 1;
        state.waiters.push(Waiter {
            pgid,
            want,
            seq,
            tx,
        });
        if !state.running {
            let started = std::thread::Builder::new()
                .name("group-watch".into())
                .spawn(move || self.run());
            match started {
                Ok(_) => state.running = true,
                // No thread: the waiters' senders are dropped unanswered,
                // and `wait_gone` says "not gone", the safe side.
                Err(_) => state.waiters.clear(),
            }
        }
        drop(state);
        self.wake.notify_one();
    }

    fn run(&self) {
        let mut state = self.lock();
        loop {
            // Waiters that stopped waiting (deadline passed, future dropped).
            state.waiters.retain(|w| !w.tx.is_closed());
            if state.waiters.is_empty() {
                let (next, idle) = self
                    .wake
                    .wait_timeout(state, IDLE)
                    .unwrap_or_else(|e| e.into_inner());
                state = next;
                if idle.timed_out() && state.waiters.is_empty() {
                    // Under the lock: a registration from now on starts
                    // another thread.
                    state.running = false;
                    return;
                }
                continue;
            }
            let upto = state.next_seq;
            let pgids: BTreeSet<u32> = state.waiters.iter().map(|w| w.pgid).collect();
            drop(state);
            let live = table::live_groups(&pgids);
            state = self.lock();
            let waiters = std::mem::take(&mut state.waiters);
            for waiter in waiters {
                let alive = live.contains(&waiter.pgid);
                let answered = waiter.seq < upto && (waiter.want == Want::Answer || !alive);
                if answered {
                    let _ = waiter.tx.send(alive);
                } else {
                    state.waiters.push(waiter);
                }
            }
            // Those that remain wait for their group to empty (the next
            // scan is a tick away), or arrived during the scan (scanned
            // again at once). With none left, the wait ends at the next
            // registration, and the loop's top waits for one.
            if state.quiet_since(upto) {
                state = self
                    .wake
                    .wait_timeout(state, TICK)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }
}

/// Moves this process into process group `pgid` (`setpgid(0, pgid)`): a
/// process that leaves the group it was started in (a fixture does, on
/// purpose). `EPERM` for a session leader, which cannot change its group.
pub fn join(pgid: u32) -> std::io::Result<()> {
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), crate::raw(pgid))
        .map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn this_process_group_is_alive_and_an_unused_one_is_gone() {
        let mine = nix::unistd::getpgrp().as_raw() as u32;
        assert!(alive(mine).await);
        // Pid numbers stop far below i32::MAX: no group has this id.
        let unused = i32::MAX as u32 - 7;
        assert!(!alive(unused).await);
        assert!(wait_gone(unused, Instant::now() + Duration::from_secs(5)).await);
        let started = Instant::now();
        assert!(!wait_gone(mine, Instant::now() + Duration::from_millis(50)).await);
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_waiters_are_answered() {
        let mine = nix::unistd::getpgrp().as_raw() as u32;
        let answers = futures_join((0..64).map(|i| async move {
            alive(if i % 2 == 0 {
                mine
            } else {
                i32::MAX as u32 - i
            })
            .await
        }))
        .await;
        for (i, alive) in answers.into_iter().enumerate() {
            assert_eq!(alive, i % 2 == 0, "waiter {i}");
        }
    }

    async fn futures_join<F: std::future::Future<Output = bool> + Send + 'static>(
        futures: impl Iterator<Item = F>,
    ) -> Vec<bool> {
        let handles: Vec<_> = futures.map(tokio::spawn).collect();
        let mut out = Vec::new();
        for handle in handles {
            out.push(handle.await.expect("joined"));
        }
        out
    }
}
