//! Waiting until an instant, to within tens of microseconds rather than
//! tokio's millisecond.
//!
//! tokio's timer wheel has a granularity of 1 ms and rounds a deadline up to
//! the next tick, and its driver parks in `epoll_wait` with a timeout in whole
//! milliseconds, rounded up again: a 100 ms grace timed by
//! `tokio::time::sleep` ended 1-2 ms late (measured: 101.4 ms for one grace,
//! 202.6 ms for two). The close ladder's graces are what a user configures,
//! and close returns after them, so they are timed here instead: tokio's
//! timer for all but the last [`COARSE_MARGIN`] (cheap, and nothing at all is
//! made when the awaited event comes first, the common case), then a
//! `timerfd` on the tokio reactor for the rest, which the kernel wakes at the
//! instant itself (an hrtimer, with the default timer slack of 50 µs).
//!
//! Where no `timerfd` can be made (not Linux, out of fds), tokio's timer
//! times the rest: late by a millisecond or two, never early.

use std::{
    future::Future,
    pin::pin,
    task::Poll,
    time::{Duration, Instant},
};

/// How long before the deadline tokio's timer hands over to the `timerfd`:
/// more than tokio's own lateness (a tick of rounding, a millisecond of
/// `epoll_wait` rounding), so its wake-up comes before the deadline.
const COARSE_MARGIN: Duration = Duration::from_millis(3);

/// Sleeps until `deadline`, waking within tens of microseconds after it on
/// an unloaded machine (see the module docs).
pub async fn sleep_until(deadline: Instant) {
    if let Some(coarse) = deadline.checked_sub(COARSE_MARGIN)
        && coarse > Instant::now()
    {
        tokio::time::sleep_until(coarse.into()).await;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    #[cfg(target_os = "linux")]
    if let Ok(timer) = timerfd::Timer::after(left) {
        timer.fired().await;
        return;
    }
    tokio::time::sleep_until(deadline.into()).await;
}

/// Runs `future` until `deadline`: its output, or `None` when the deadline
/// came first (timed as [`sleep_until`]). When both are ready at once, the
/// output wins.
pub async fn timeout_at<F: Future>(deadline: Instant, future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut timer = pin!(sleep_until(deadline));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Some(output));
        }
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

#[cfg(target_os = "linux")]
mod timerfd {
    use std::{
        io,
        os::fd::{AsRawFd, FromRawFd, OwnedFd},
        time::Duration,
    };

    use nix::libc;
    use tokio::io::{Interest, unix::AsyncFd};

    /// A one-shot `CLOCK_MONOTONIC` timerfd (the clock of
    /// `std::time::Instant`), registered with the tokio reactor.
    pub(super) struct Timer(AsyncFd<OwnedFd>);

    impl Timer {
        /// Armed to expire `after` from now.
        pub(super) fn after(after: Duration) -> io::Result<Self> {
            // SAFETY: timerfd_create takes no pointer; a negative result is
            // an error, anything else a new fd that nothing else owns.
            let fd = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: see above.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            // A zero `it_value` would disarm the timer: at least 1 ns.
            let nanos = after.subsec_nanos().max(u32::from(after.as_secs() == 0));
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                    tv_nsec: nanos as libc::c_long,
                },
            };
            // SAFETY: a valid timerfd and a valid itimerspec; the old value
            // is not asked for.
            if unsafe { libc::timerfd_settime(fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0
            {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: the fd is open and the same for the whole
            // registration: the `AsyncFd` owns it and closes it only when
            // dropped, after deregistering it.
            let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
            Ok(Timer(registered?))
        }

        /// Waits until the timer has expired. A reactor error (the runtime
        /// is shutting down) ends the wait early: nothing would be woken
        /// any more anyway.
        pub(super) async fn fired(&self) {
            loop {
                let Ok(mut ready) = self.0.readable().await else {
                    return;
                };
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most 8 bytes into an 8-byte buffer.
                let read = unsafe {
                    libc::read(
                        self.0.as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if read == 8 {
                    return;
                }
                // Not expired yet (EAGAIN): a stale readiness; wait again.
                ready.clear_ready();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sleeps_until_the_deadline_and_not_before() {
        for after in [0u64, 1, 2, 5, 20] {
            let start = Instant::now();
            let deadline = start + Duration::from_millis(after);
            sleep_until(deadline).await;
            assert!(
                Instant::now() >= deadline,
                "woke before a deadline {after} ms away"
            );
        }
    }

    #[tokio::test]
    async fn timeout_at_gives_the_output_or_none() {
        let soon = Instant::now() + Duration::from_secs(5);
        assert_eq!(timeout_at(soon, async { 7 }).await, Some(7));
        let deadline = Instant::now() + Duration::from_millis(10);
        assert_eq!(
            timeout_at(deadline, std::future::pending::<()>()).await,
            None
        );
        assert!(Instant::now() >= deadline);
    }
}
