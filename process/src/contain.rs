//! Containment: ending, at close, everything a server started, processes
//! that left its process group or session (`setsid`, daemons) included.
//!
//! Two ways, chosen per server when it is spawned (docs/process.md):
//!
//! - **cgroup v2**, where this process may create a cgroup that has
//!   `cgroup.kill` (Linux 5.14+): the server joins a cgroup of its own
//!   between fork and exec (so nothing it starts can be outside it), and
//!   [`Containment::end`] writes `cgroup.kill`, waits for `cgroup.events` to
//!   say `populated 0` (woken by the kernel's notification, bounded by a
//!   deadline) and removes the directory. Nothing can leave a cgroup without
//!   the privilege to write another cgroup's `cgroup.procs`.
//! - **tracking** elsewhere on Linux: this process becomes a child
//!   subreaper, and [`Containment::track`] walks the process table for the
//!   server's descendants by parent links (across groups and sessions),
//!   remembering each by pid and start time. [`Containment::end`] kills each
//!   through a pidfd opened and checked against that start time, so a
//!   recycled pid is never signalled, and reaps those that became ours. It
//!   cannot see a process whose every ancestor up to the server exited before
//!   a scan (a double fork finished between two scans).
//!
//! Elsewhere than Linux there is neither: the method is [`Method::None`] and
//! only the process group is ended.

use std::{
    collections::{BTreeMap, BTreeSet},
    ffi::CString,
    io,
    os::unix::{ffi::OsStrExt, process::CommandExt},
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Mutex, MutexGuard, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use serde::Serialize;

use crate::table;

/// The environment variable that makes [`Prefer::Cgroup`] track instead
/// (`MCP_STDIO_CONTAIN=tracked`): to run a suite through the fallback on a
/// machine where cgroups work, or for a host whose cgroups must not be
/// touched.
pub const CONTAIN_ENV: &str = "MCP_STDIO_CONTAIN";

/// How a server is contained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// In a cgroup v2 of its own, ended with `cgroup.kill`.
    Cgroup,
    /// Its descendants tracked by parent links, ended by pidfd.
    Tracked,
    /// Neither is possible here (not Linux): only the group is ended.
    None,
}

impl Method {
    /// `cgroup`, `tracked`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Cgroup => "cgroup",
            Method::Tracked => "tracked",
            Method::None => "none",
        }
    }
}

/// Which method to try first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefer {
    /// A cgroup where one can be used (unless [`CONTAIN_ENV`] says
    /// `tracked`), else tracking.
    Cgroup,
    /// Tracking, even where a cgroup could be used.
    Tracked,
}

/// What [`Containment::end`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ended {
    /// The method used.
    pub method: Method,
    /// Live processes it killed: whatever the server started that was still
    /// alive after the process group was ended.
    pub killed: u32,
}

/// One server's containment, made before it is spawned
/// ([`crate::spawn_contained`]) and ended at close. Dropped without
/// [`Containment::end`], it kills what it contains (without waiting for
/// more than a short bound) and removes its cgroup.
pub struct Containment {
    state: Mutex<State>,
}

enum State {
    Cgroup {
        cgroup: Cgroup,
        leader: Option<u32>,
    },
    Tracked {
        leader: Option<u32>,
        /// Descendants seen so far, by pid and start time.
        known: BTreeMap<u32, u64>,
    },
    None,
    Ended,
}

/// A cgroup directory made for one server.
struct Cgroup {
    dir: PathBuf,
    /// Its path as `/proc/<pid>/cgroup` shows it (`0::<path>`).
    path: String,
}

/// How long a dropped containment waits for what it killed.
const DROP_BOUND: Duration = Duration::from_secs(1);

impl Containment {
    /// Prepares the containment of one server: makes its cgroup, or becomes
    /// a subreaper for tracking.
    pub fn new(prefer: Prefer) -> Containment {
        let forced = std::env::var(CONTAIN_ENV).is_ok_and(|v| v.eq_ignore_ascii_case("tracked"));
        let state = if !cfg!(target_os = "linux") {
            State::None
        } else if let Some(cgroup) = (prefer == Prefer::Cgroup && !forced)
            .then(Cgroup::create)
            .flatten()
        {
            State::Cgroup {
                cgroup,
                leader: None,
            }
        } else {
            tracked()
        };
        Containment {
            state: Mutex::new(state),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The method in use.
    pub fn method(&self) -> Method {
        match &*self.lock() {
            State::Cgroup { .. } => Method::Cgroup,
            State::Tracked { .. } => Method::Tracked,
            State::None | State::Ended => Method::None,
        }
    }

    /// The cgroup's directory, with [`Method::Cgroup`].
    pub fn cgroup(&self) -> Option<PathBuf> {
        match &*self.lock() {
            State::Cgroup { cgroup, .. } => Some(cgroup.dir.clone()),
            _ => None,
        }
    }

    /// Makes `command` join the cgroup between fork and exec: from its first
    /// instruction on, everything the program starts is inside. A join that
    /// fails is left for [`Containment::adopt`] to notice (an error here
    /// would fail the spawn, and the child cannot report why).
    pub(crate) fn prepare(&self, command: &mut Command) {
        let procs = match &*self.lock() {
            State::Cgroup { cgroup, .. } => cgroup.dir.join("cgroup.procs"),
            _ => return,
        };
        let Ok(procs) = CString::new(procs.as_os_str().as_bytes()) else {
            return;
        };
        // SAFETY: open, write and close are async-signal-safe, and the path
        // was allocated before the fork.
        unsafe {
            command.pre_exec(move || {
                let fd =
                    nix::libc::open(procs.as_ptr(), nix::libc::O_WRONLY | nix::libc::O_CLOEXEC);
                if fd >= 0 {
                    let _ = nix::libc::write(fd, b"0".as_ptr().cast(), 1);
                    nix::libc::close(fd);
                }
                Ok(())
            });
        }
    }

    /// Takes `pid`, just spawned and not reaped, as the contained server.
    /// With a cgroup, checks that it joined; if it did not (the cgroup is
    /// ours but moving into it is not allowed), falls back to tracking.
    pub(crate) fn adopt(&self, pid: u32) {
        let mut state = self.lock();
        match &mut *state {
            State::Cgroup { cgroup, leader } => {
                // The child is unreaped, so its /proc entry is its own, even
                // as a zombie.
                if cgroup_of(pid).as_deref() == Some(cgroup.path.as_str()) {
                    *leader = Some(pid);
                    return;
                }
                cgroup.remove();
                *state = tracked();
                if let State::Tracked { leader, .. } = &mut *state {
                    *leader = Some(pid);
                }
            }
            State::Tracked { leader, .. } => *leader = Some(pid),
            State::None | State::Ended => {}
        }
    }

    /// With tracking, remembers every live descendant of the server found in
    /// the process table now, by parent links from the server and from the
    /// descendants already known. Call it while the server is unreaped (its
    /// pid cannot be anyone else's) and before it ends when possible: once a
    /// process exits, its children's parent link points at the subreaper.
    pub fn track(&self) {
        let mut state = self.lock();
        if let State::Tracked {
            leader: Some(leader),
            known,
        } = &mut *state
        {
            scan(*leader, known);
        }
    }

    /// Ends everything contained that is still alive, waits up to `within`
    /// for it to be gone, reaps what became this process's zombie, and
    /// removes the cgroup. Call it after the process group was ended and
    /// before the server is released (see [`crate::ExitWatch::release`]).
    /// Blocks; a second call does nothing.
    pub fn end(&self, within: Duration) -> Ended {
        let deadline = Instant::now() + within;
        let mut state = self.lock();
        let ended = match &mut *state {
            State::Cgroup { cgroup, leader } => Ended {
                method: Method::Cgroup,
                killed: cgroup.end(*leader, deadline),
            },
            State::Tracked { leader, known } => {
                if let Some(leader) = leader {
                    scan(*leader, known);
                }
                Ended {
                    method: Method::Tracked,
                    killed: end_tracked(*leader, known, deadline),
                }
            }
            State::None => Ended {
                method: Method::None,
                killed: 0,
            },
            State::Ended => {
                return Ended {
                    method: Method::None,
                    killed: 0,
                };
            }
        };
        *state = State::Ended;
        ended
    }
}

impl Drop for Containment {
    fn drop(&mut self) {
        // Without a scan: the server may be released by now, and its pid
        // someone else's.
        let mut state = self.lock();
        match &mut *state {
            State::Cgroup { cgroup, leader } => {
                cgroup.end(*leader, Instant::now() + DROP_BOUND);
            }
            State::Tracked { leader, known } => {
                end_tracked(*leader, known, Instant::now() + DROP_BOUND);
            }
            State::None | State::Ended => {}
        }
    }
}

/// Tracking, with this process as the subreaper of what the server starts.
fn tracked() -> State {
    crate::become_subreaper();
    State::Tracked {
        leader: None,
        known: BTreeMap::new(),
    }
}

/// Where cgroups are made: this process's own cgroup v2 directory (its
/// mount point and its path there), found once.
struct Base {
    /// The directory of this process's cgroup.
    dir: PathBuf,
    /// Its path as `/proc/self/cgroup` shows it.
    path: String,
}

fn base() -> Option<&'static Base> {
    static BASE: OnceLock<Option<Base>> = OnceLock::new();
    BASE.get_or_init(|| {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let path = own.lines().find_map(|line| line.strip_prefix("0::"))?;
        let dir = own_dir(&mountinfo, path)?;
        dir.join("cgroup.procs").is_file().then(|| {
            remove_stale(&dir);
            Base {
                dir,
                path: path.to_owned(),
            }
        })
    })
    .as_ref()
}

/// The directory of cgroup `path` (as `/proc/self/cgroup` gives it) under a
/// cgroup2 mount listed in `mountinfo` whose root holds it.
fn own_dir(mountinfo: &str, path: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        let mut fields = mount.split_whitespace();
        let root = fields.nth(3)?;
        let point = unescape(fields.next()?);
        let rel = if root == "/" {
            path
        } else {
            path.strip_prefix(root)
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))?
        };
        Some(Path::new(&point).join(rel.trim_start_matches('/')))
    })
}

/// A mountinfo field, with the octal escapes of space, tab, newline and
/// backslash undone.
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(byte as char);
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The prefix of this process's parent cgroup of servers.
const PARENT_PREFIX: &str = "mcp-stdio-client-";

/// Removes the empty cgroups left by processes of this crate that are gone
/// (killed before they could clean up). One with live processes in it is
/// left alone: rmdir refuses it.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PARENT_PREFIX))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        if let Ok(servers) = std::fs::read_dir(entry.path()) {
            for server in servers.flatten() {
                if server.path().is_dir() {
                    let _ = std::fs::remove_dir(server.path());
                }
            }
        }
        let _ = std::fs::remove_dir(entry.path());
    }
}

/// The cgroup v2 path of `pid` (`0::<path>` in `/proc/<pid>/cgroup`).
fn cgroup_of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}

impl Cgroup {
    /// `<own cgroup>/mcp-stdio-client-<pid>/server-<n>`, if it can be made
    /// and has `cgroup.kill`. No controller is enabled anywhere, so the
    /// "no internal processes" rule never applies.
    fn create() -> Option<Cgroup> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = base()?;
        let parent_name = format!("{PARENT_PREFIX}{}", std::process::id());
        let parent = base.dir.join(&parent_name);
        let name = format!("server-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = parent.join(&name);
        // Another server's close may remove the parent between the two
        // mkdirs (it removes the parent once it looks empty): then again.
        let made = (0..3).any(|_| {
            match std::fs::create_dir(&parent) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(_) => return false,
            }
            std::fs::create_dir(&dir).is_ok()
        });
        if !made {
            return None;
        }
        let cgroup = Cgroup {
            path: format!("{}/{parent_name}/{name}", base.path.trim_end_matches('/')),
            dir,
        };
        if !cgroup.dir.join("cgroup.kill").is_file() {
            cgroup.remove();
            return None;
        }
        Some(cgroup)
    }

    /// Kills what is in the cgroup, waits until it is empty (or
    /// `deadline`), reaps what became ours, and removes the directory.
    /// Returns how many live processes were in it.
    fn end(&self, leader: Option<u32>, deadline: Instant) -> u32 {
        let inside: BTreeMap<u32, u64> = std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pid| pid.parse::<u32>().ok())
            .filter_map(|pid| Some((pid, table::stat(pid).filter(|s| s.is_alive())?.start_ticks)))
            .collect();
        if self.populated() != Some(false) {
            let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
            self.wait_empty(deadline);
        }
        reap_ours(leader, &inside);
        self.remove();
        inside.len() as u32
    }

    /// `populated` from `cgroup.events`; `None` if it cannot be read.
    fn populated(&self) -> Option<bool> {
        let events = std::fs::read_to_string(self.dir.join("cgroup.events")).ok()?;
        populated_in(&events)
    }

    /// Waits until `cgroup.events` says `populated 0`, or `deadline`: the
    /// kernel wakes a `poll` on the file (POLLPRI) each time it changes, so
    /// nothing is polled on a timer.
    fn wait_empty(&self, deadline: Instant) {
        use std::{io::Read as _, io::Seek as _, os::fd::AsRawFd as _};
        let Ok(mut file) = std::fs::File::open(self.dir.join("cgroup.events")) else {
            return;
        };
        let mut text = String::new();
        loop {
            text.clear();
            if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
                return;
            }
            if populated_in(&text) != Some(true) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let mut poll = nix::libc::pollfd {
                fd: file.as_raw_fd(),
                events: nix::libc::POLLPRI,
                revents: 0,
            };
            let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let rc = unsafe { nix::libc::poll(&mut poll, 1, millis) };
            if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }

    /// Removes the directory (refused while anything lives in it), then the
    /// parent if no other server's cgroup is left in it.
    fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

fn populated_in(events: &str) -> Option<bool> {
    events
        .lines()
        .find_map(|line| match line.strip_prefix("populated ") {
            Some("0") => Some(false),
            Some(_) => Some(true),
            None => None,
        })
}

/// Adds to `known` every live descendant of `leader` and of the processes
/// already known, by parent links; forgets known ones that are gone.
fn scan(leader: u32, known: &mut BTreeMap<u32, u64>) {
    let table = table::snapshot();
    let start_of: BTreeMap<u32, u64> = table.iter().map(|(pid, s)| (*pid, s.start_ticks)).collect();
    // A known pid counts only while it is the process that was seen: same
    // start time.
    known.retain(|pid, start| start_of.get(pid) == Some(start));
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (pid, stat) in &table {
        if stat.is_alive() && *pid != leader {
            children.entry(stat.ppid).or_default().push(*pid);
        }
    }
    let mut queue: Vec<u32> = std::iter::once(leader)
        .chain(known.keys().copied())
        .collect();
    let mut seen: BTreeSet<u32> = queue.iter().copied().collect();
    while let Some(parent) = queue.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            if seen.insert(*child) {
                known.insert(*child, start_of[child]);
                queue.push(*child);
            }
        }
    }
}

/// Kills every process in `known` that is still the one seen (checked
/// through a pidfd, which cannot be redirected to a recycled pid), waits
/// up to `deadline` for them to exit, and reaps what became ours. Returns
/// how many were killed.
fn end_tracked(leader: Option<u32>, known: &BTreeMap<u32, u64>, deadline: Instant) -> u32 {
    let mut killed = Vec::new();
    for (pid, start) in known {
        let Some(fd) = Pidfd::open(*pid) else {
            continue;
        };
        // The pidfd names the process that had `pid` when it was opened;
        // with the same start time after the open, that is the one seen.
        let same = table::stat(*pid).is_some_and(|s| s.start_ticks == *start && s.is_alive());
        if same && fd.kill() {
            killed.push(fd);
        }
    }
    let count = killed.len() as u32;
    for fd in &killed {
        fd.wait_exit(deadline);
    }
    reap_ours(leader, known);
    count
}

/// Reaps the processes of `seen` (pid and start time) that are this
/// process's zombies now (re-parented to it as a subreaper), and the
/// zombies of ours in `leader`'s process group; never the leader itself,
/// whose reaper thread owns it.
fn reap_ours(leader: Option<u32>, seen: &BTreeMap<u32, u64>) {
    let me = std::process::id();
    for (pid, stat) in table::snapshot() {
        let ours = stat.ppid == me && stat.state == 'Z' && Some(pid) != leader;
        let contained = seen.get(&pid) == Some(&stat.start_ticks) || Some(stat.pgid) == leader;
        if ours && contained {
            // Our own zombie: its pid cannot be reused until this reaps it.
            let _ = nix::sys::wait::waitpid(
                crate::raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

/// A pidfd (Linux 5.3+): a handle on one process that stays on it even if
/// its pid is reused.
struct Pidfd(std::os::fd::OwnedFd);

impl Pidfd {
    fn open(pid: u32) -> Option<Pidfd> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::FromRawFd as _;
            // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
            let fd = unsafe {
                nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as nix::libc::pid_t, 0)
            };
            // SAFETY: a non-negative return is a new fd that nothing else owns.
            (fd >= 0).then(|| Pidfd(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    /// SIGKILL through the pidfd; true when delivered.
    fn kill(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd as _;
            // SAFETY: a valid pidfd, no siginfo, no flags.
            let rc = unsafe {
                nix::libc::syscall(
                    nix::libc::SYS_pidfd_send_signal,
                    self.0.as_raw_fd(),
                    nix::libc::SIGKILL,
                    std::ptr::null::<nix::libc::siginfo_t>(),
                    0,
                )
            };
            rc == 0
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Waits until the process has exited (the pidfd turns readable), or
    /// `deadline`.
    fn wait_exit(&self, deadline: Instant) {
        use std::os::fd::AsRawFd as _;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut poll = nix::libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: nix::libc::POLLIN,
                revents: 0,
            };
            let millis = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: one valid pollfd for the duration of the call.
            let rc = unsafe { nix::libc::poll(&mut poll, 1, millis) };
            if rc >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_and_own_path_give_the_directory() {
        let hybrid = "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_dir(hybrid, "/"),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let modern =
            "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            own_dir(modern, "/user.slice/user-1000.slice/session-2.scope"),
            Some(PathBuf::from(
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope"
            ))
        );
        // A mount of a subtree (a container's view): the path is relative to its root.
        let nested = "30 23 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            own_dir(nested, "/docker/abc/app"),
            Some(PathBuf::from("/sys/fs/cgroup/app"))
        );
        assert_eq!(own_dir(nested, "/docker/abcd"), None);
        assert_eq!(
            own_dir("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n", "/"),
            None
        );
        assert_eq!(unescape("/mnt/with\\040space"), "/mnt/with space");
    }

    #[test]
    fn populated_is_read_from_cgroup_events() {
        assert_eq!(populated_in("populated 1\nfrozen 0\n"), Some(true));
        assert_eq!(populated_in("populated 0\nfrozen 0\n"), Some(false));
        assert_eq!(populated_in("frozen 0\n"), None);
    }
}
