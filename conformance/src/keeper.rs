//! The keeper: a small process that the harness's CLI modes (`server`,
//! `scenarios`, `client`, `connect`) start first, in a session of its own,
//! so that nothing a run started outlives it and nothing it made stays in
//! the temp directory, even when the harness is SIGKILLed (a CI job's
//! timeout, the OOM killer) and so cannot clean up itself.
//!
//! The keeper knows the harness's anchor (its pid and start time, handed
//! to every process of the run in `MCP_FIXTURE_ANCHOR`: see
//! [`mcp_stdio_process::anchor`]), and the harness tells it, over a pipe,
//! each run's marker (before the server is spawned), each server's process
//! group (after), and each temporary directory it makes. The keeper only
//! reads. When the pipe reaches EOF without the line `end` (the harness
//! died: the kernel closed its end), it kills the control group of the
//! servers (cgroup v2 `cgroup.kill`, where one could be made: `server`
//! mode), SIGKILLs every registered process group, every process carrying a
//! registered marker and every process carrying the harness's anchor, then
//! removes the registered directories and exits. After a normal end the
//! harness writes `end` once it has ended everything itself, and waits for
//! the keeper to remove the (empty) control group and exit.
//!
//! Lines on the pipe: `marker <MARKER>`, `group <PGID>`, `done <PGID>` (the
//! group is empty and its id may be reused: never signal it again),
//! `dir <PATH>`, `end`.

use std::{
    collections::BTreeSet,
    io::{BufRead, Write},
    path::{Path, PathBuf},
    process::ChildStdin,
    sync::Mutex,
    time::{Duration, Instant},
};

use mcp_stdio_process::{ExitWatch, Marker, Signal, SpawnOptions};

/// The prefix of every temporary directory the harness makes
/// ([`crate::tempdirs`]): a directory it is told of is removed only if its
/// name carries this, so the keeper never removes what the run did not make.
pub const DIR_PREFIX: &str = "mcp-conformance-";

/// How long the keeper's sweep may take, and the harness's wait for it.
const SWEEP_BOUND: Duration = Duration::from_secs(5);

/// The hidden `keeper` subcommand's arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The cgroup v2 directory holding the servers, to kill and remove.
    #[arg(long, value_name = "DIR")]
    pub cgroup: Option<PathBuf>,
    /// The harness's anchor (`<pid>:<start ticks>`): every process that
    /// carries it is the run's.
    #[arg(long, value_name = "PID:TICKS")]
    pub anchor: Option<String>,
}

/// The harness's end of the keeper.
struct Link {
    /// The keeper's exit, and the only way to signal it.
    exit: ExitWatch,
    stdin: ChildStdin,
    cgroup: Option<PathBuf>,
}

/// The keeper of this process, when it is the CLI and the keeper started.
static LINK: Mutex<Option<Link>> = Mutex::new(None);

fn link() -> std::sync::MutexGuard<'static, Option<Link>> {
    LINK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the keeper (the CLI `cli` does, before anything else), with a
/// control group for the servers when `cgroup` asks for one and the kernel
/// lets this process make it. Never required: if it cannot start, the run
/// goes on as before and says so on stderr.
pub fn start(cli: &str, cgroup: bool) {
    match std::env::current_exe() {
        Ok(exe) => start_from(&exe, cli, cgroup),
        Err(error) => eprintln!("{cli}: warning: cannot start the keeper: {error}"),
    }
}

/// [`start`], running the keeper from `exe` (an `mcp-conformance`
/// executable): for a process that is not one, such as the scenario suite's
/// test binary.
pub fn start_from(exe: &Path, cli: &str, cgroup: bool) {
    let cgroup = if cgroup { make_cgroup() } else { None };
    let mut args = vec!["keeper".to_owned()];
    if let Some(cgroup) = &cgroup {
        args.extend(["--cgroup".to_owned(), cgroup.display().to_string()]);
    }
    if let Some(anchor) = mcp_stdio_process::Anchor::this_process() {
        args.extend(["--anchor".to_owned(), anchor.to_string()]);
    }
    // Its own session: neither a terminal's signals to the harness's job
    // nor a kill of the harness's group reach it. And no inherited mask
    // blocking the signals the CLI takes on a thread of its own
    // (`interrupt::end_on_signal`): spawn starts it with an empty one. Its
    // stdout and stderr are not the harness's, so a caller reading those to
    // EOF never waits for it.
    let options = SpawnOptions::new().own_session().null_output();
    match mcp_stdio_process::spawn_blocking_with(exe, &args, &options, "keeper", |_| {}) {
        Ok(child) => {
            *link() = Some(Link {
                exit: child.exit,
                stdin: child.stdin,
                cgroup,
            });
        }
        Err(error) => {
            if let Some(cgroup) = &cgroup {
                let _ = std::fs::remove_dir(cgroup);
            }
            eprintln!("{cli}: warning: cannot start the keeper: {error}");
        }
    }
}

/// Tells the keeper the run ended normally when dropped, so it removes
/// what the run left and exits.
#[derive(Debug)]
#[must_use = "the keeper is told the run ended when this is dropped"]
pub struct Finish(());

impl Drop for Finish {
    fn drop(&mut self) {
        finish();
    }
}

/// [`start`], with [`finish`] when the returned value is dropped: for a CLI
/// mode with several ways out.
pub fn start_until_dropped(cli: &str) -> Finish {
    start(cli, false);
    Finish(())
}

/// Starts the keeper (see `docs/server-check.md`) from the executable `exe`
/// for the command named `cli`, and returns a [`Finish`] that ends it normally
/// when dropped: a test process killed mid-run leaves nothing behind.
pub fn start_from_until_dropped(exe: &Path, cli: &str) -> Finish {
    start_from(exe, cli, false);
    Finish(())
}

/// The keeper's pid, so the harness never takes it for a server's orphan.
pub fn pid() -> Option<u32> {
    link().as_ref().map(|link| link.exit.pid())
}

/// Tells the keeper one line; a keeper that is gone is no error.
fn tell(line: &str) {
    if let Some(link) = link().as_mut() {
        let _ = writeln!(link.stdin, "{line}");
    }
}

/// Registers a temporary directory of the run, for the keeper to remove
/// if the harness dies holding it.
pub fn dir(path: &Path) {
    tell(&format!("dir {}", path.display()));
}

/// Registers a run's marker, before its server is spawned.
pub fn marker(marker: &str) {
    tell(&format!("marker {marker}"));
}

/// Runs `spawn` (which starts a server) with this process inside the
/// servers' control group, so the server is born there: a server that
/// forks at once (a sidecar that calls `setsid`) cannot leave it before it
/// is moved, as it could if its pid were written there after the spawn.
/// This process goes back to its own cgroup right after.
pub fn spawning<T>(spawn: impl FnOnce() -> T) -> T {
    let cgroup = link().as_ref().and_then(|link| link.cgroup.clone());
    let Some(cgroup) = cgroup else {
        return spawn();
    };
    // "0" is the writing process (all its threads).
    let moved = std::fs::write(cgroup.join("cgroup.procs"), "0").is_ok();
    let spawned = spawn();
    if moved && let Some(home) = cgroup.parent() {
        let _ = std::fs::write(home.join("cgroup.procs"), "0");
    }
    spawned
}

/// Registers a server just spawned: its group, and (if [`spawning`] could
/// not start it there) the server moved into the control group, its
/// descendants following it there from then on.
pub fn server(pid: u32, pgid: u32) {
    let cgroup = link().as_ref().and_then(|link| link.cgroup.clone());
    if let Some(cgroup) = cgroup {
        let _ = std::fs::write(cgroup.join("cgroup.procs"), pid.to_string());
    }
    tell(&format!("group {pgid}"));
}

/// The group `pgid` is empty and its leader about to be reaped: its id may
/// be reused, so the keeper must never signal it.
pub fn done(pgid: u32) {
    tell(&format!("done {pgid}"));
}

/// The harness's normal end, once it has killed everything itself: the
/// keeper removes the control group and exits; this waits for it (bounded,
/// then SIGKILL) so the keeper never outlives the harness.
pub fn finish() {
    let Some(mut link) = link().take() else {
        return;
    };
    let _ = writeln!(link.stdin, "end");
    drop(link.stdin);
    if link.exit.wait_blocking(SWEEP_BOUND).is_none() {
        let _ = link.exit.signal_child(Signal::SIGKILL);
        link.exit.wait_blocking(SWEEP_BOUND);
    }
    link.exit.release();
}

/// A cgroup v2 directory for the servers, under this process's own
/// cgroup, where the kernel offers one this process may make and that has
/// `cgroup.kill` (Linux 5.14). `None` elsewhere: the keeper then relies on
/// the process groups and markers alone.
fn make_cgroup() -> Option<PathBuf> {
    let mount = cgroup2_mount()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = own.lines().find_map(|line| line.strip_prefix("0::"))?;
    let parent = mount.join(own.trim_start_matches('/'));
    let dir = parent.join(format!(
        "mcp-conformance-{}",
        Marker::new("keeper").as_str()
    ));
    std::fs::create_dir(&dir).ok()?;
    if dir.join("cgroup.kill").exists() && dir.join("cgroup.procs").exists() {
        Some(dir)
    } else {
        let _ = std::fs::remove_dir(&dir);
        None
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid system), from the mount table.
fn cgroup2_mount() -> Option<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    table.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let fields: Vec<&str> = mount.split(' ').collect();
        // Only a mount of the hierarchy's root maps /proc/self/cgroup's path.
        let root_mount = fs.split(' ').next() == Some("cgroup2") && fields.get(3) == Some(&"/");
        root_mount.then(|| fields.get(4).map(PathBuf::from))?
    })
}

/// The keeper process: reads the harness's lines until EOF; without `end`
/// (the harness died), kills everything registered. Returns its exit code.
pub fn main(args: Args) -> u8 {
    let mut groups = BTreeSet::new();
    let mut markers = Vec::new();
    let mut dirs = Vec::new();
    let mut ended = false;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.split_once(' ') {
            Some(("marker", marker)) => markers.push(marker.to_owned()),
            Some(("dir", path)) => dirs.push(PathBuf::from(path)),
            Some(("group", pgid)) => {
                groups.extend(pgid.parse::<u32>().ok().filter(|pgid| *pgid > 1));
            }
            Some(("done", pgid)) => {
                if let Ok(pgid) = pgid.parse::<u32>() {
                    groups.remove(&pgid);
                }
            }
            _ if line == "end" => ended = true,
            _ => {}
        }
    }
    if !ended {
        let anchor = args
            .anchor
            .as_deref()
            .and_then(mcp_stdio_process::Anchor::parse);
        sweep(&groups, &markers, anchor, args.cgroup.as_deref());
        for dir in &dirs {
            // Only what the run made: a directory of ours by its name.
            let ours = dir
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(DIR_PREFIX));
            if ours {
                let _ = std::fs::remove_dir_all(dir);
            }
        }
    }
    if let Some(cgroup) = &args.cgroup {
        remove_cgroup(cgroup);
    }
    0
}

/// Kills everything the dead harness started: its control group at once,
/// every registered group, every carrier of a registered marker or of its
/// anchor.
fn sweep(
    groups: &BTreeSet<u32>,
    markers: &[String],
    anchor: Option<mcp_stdio_process::Anchor>,
    cgroup: Option<&Path>,
) {
    if let Some(cgroup) = cgroup {
        let _ = std::fs::write(cgroup.join("cgroup.kill"), "1");
    }
    for pgid in groups {
        let _ = mcp_stdio_process::signal::signal_group(*pgid, Signal::SIGKILL);
    }
    let deadline = Instant::now() + SWEEP_BOUND;
    for marker in markers {
        let left = deadline.saturating_duration_since(Instant::now());
        Marker::from_value(marker.as_str()).kill_leftovers(left);
    }
    if let Some(anchor) = anchor {
        anchor.kill_carriers(deadline.saturating_duration_since(Instant::now()));
    }
}

/// Waits (bounded) until the control group is empty, then removes it.
fn remove_cgroup(cgroup: &Path) {
    let deadline = Instant::now() + SWEEP_BOUND;
    loop {
        let empty = std::fs::read_to_string(cgroup.join("cgroup.procs"))
            .map_or(true, |procs| procs.trim().is_empty());
        if empty || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = std::fs::remove_dir(cgroup);
}
