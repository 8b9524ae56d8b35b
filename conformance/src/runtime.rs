//! The async runtime of the modes that run a client on several tasks at
//! once (`connect`, the Rust drivers): one builder, so they all start the
//! same runtime and fail the same way when it cannot be made.

/// A multi-threaded tokio runtime with two workers (the machines this runs
/// on have two cores; the work is waiting on pipes and processes) and every
/// driver (I/O, time) enabled.
pub fn multi_thread() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
