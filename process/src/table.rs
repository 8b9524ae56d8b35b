//! The process table, read from `/proc` (Linux): one process's state, group,
//! parent and CPU time, every pid, and which groups have a live member.
//!
//! Plain `/proc` parsing rather than a process-table crate: a scan that
//! reads only the files it needs is 4-6 times cheaper than a general one
//! (docs/dependencies.md has the measurement), and the scans run often
//! (every close sweep, every survivor check). Elsewhere than Linux every
//! function reports an empty table, and [`group_alive`] falls back to a
//! signal probe.

use std::{collections::BTreeSet, time::Duration};

use nix::{errno::Errno, sys::signal::killpg};

use crate::raw;

/// The fields of `/proc/<pid>/stat` the probes need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `Z`...
    pub state: char,
    /// The parent's pid.
    pub ppid: u32,
    /// The process group id.
    pub pgid: u32,
    /// The session id.
    pub sid: u32,
    /// When it started, in clock ticks since boot: with the pid, it tells a
    /// process from a later one that got the same pid.
    pub start_ticks: u64,
    /// User plus system CPU time, in clock ticks.
    pub cpu_ticks: u64,
}

impl Stat {
    /// True unless it is a zombie (exited, not yet reaped) or dead.
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// `/proc/<pid>/stat`, or `None` if the process is gone.
pub fn stat(pid: u32) -> Option<Stat> {
    stat_with(pid, &mut String::new(), &mut Vec::new())
}

/// [`stat`] with the path and the bytes in buffers the caller reuses: a scan
/// reads this file for every process. Three system calls (open, one read, close)
/// where `read_to_string` made eight (a `statx` for a size that /proc reports as
/// 0, then reads growing from 32 bytes) and reallocated as it grew: measured in
/// docs/benchmarks.md.
fn stat_with(pid: u32, path: &mut String, buf: &mut Vec<u8>) -> Option<Stat> {
    use std::{fmt::Write as _, io::Read as _};
    path.clear();
    let _ = write!(path, "/proc/{pid}/stat");
    let mut file = std::fs::File::open(&*path).ok()?;
    if buf.len() < 1024 {
        buf.resize(1024, 0);
    }
    let mut len = 0;
    // The file is one line: once it ends in a newline it is whole, which spares
    // the read that would return 0.
    while len == 0 || buf[len - 1] != b'\n' {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_stat(&buf[..len])
}

fn parse_stat(bytes: &[u8]) -> Option<Stat> {
    // The command name may hold spaces, parentheses and bytes that are not
    // UTF-8 (it is the executable's file name): split after the last ')';
    // what follows is ASCII.
    let after = bytes.iter().rposition(|b| *b == b')')? + 1;
    let mut fields = std::str::from_utf8(&bytes[after..])
        .ok()?
        .split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    let sid = fields.next()?.parse().ok()?;
    // Fields 7 to 13 (tty_nr .. majflt) are not needed; 14 and 15 are utime
    // and stime, 22 is starttime.
    let utime: u64 = fields.nth(7)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    let start_ticks = fields.nth(6)?.parse().ok()?;
    Some(Stat {
        state,
        ppid,
        pgid,
        sid,
        start_ticks,
        cpu_ticks: utime + stime,
    })
}

/// Every pid in `/proc` right now.
pub fn pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .collect()
}

/// Every process with its stat, zombies included.
pub fn snapshot() -> Vec<(u32, Stat)> {
    let (mut path, mut buf) = (String::new(), Vec::new());
    pids()
        .into_iter()
        .filter_map(|pid| Some((pid, stat_with(pid, &mut path, &mut buf)?)))
        .collect()
}

/// The state letter of `pid` (`R`, `S`, `Z`...), or `None` if it is gone.
pub fn state(pid: u32) -> Option<char> {
    stat(pid).map(|stat| stat.state)
}

/// The process group of `pid`, or `None` if it is gone.
pub fn pgid_of(pid: u32) -> Option<u32> {
    stat(pid).map(|stat| stat.pgid)
}

/// The parent of `pid`, or `None` if it is gone.
pub fn parent_of(pid: u32) -> Option<u32> {
    stat(pid).map(|stat| stat.ppid)
}

/// True while `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    stat(pid).is_some_and(|stat| stat.is_alive())
}

/// True when `pid` is a zombie (exited, not yet reaped).
pub fn is_zombie(pid: u32) -> bool {
    state(pid) == Some('Z')
}

/// The kernel's name of `pid` (15 bytes at most), or `None` if it is gone.
pub fn name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|name| name.trim_end().to_owned())
}

/// The argv of `pid`, or `None` if it is gone or unreadable.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect(),
    )
}

/// The CPU time `pid` has used (user plus system), or `None` if it is gone.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let ticks = stat(pid)?.cpu_ticks;
    Some(Duration::from_secs_f64(
        ticks as f64 / clock_ticks_per_second(),
    ))
}

/// Whether any thread of `pid` is running or ready to run (state `R`), or
/// `None` if it is gone. Sampled over a window, the share of samples that
/// say yes tells a busy loop (always `R`) from an idle process (always `S`)
/// however loaded the machine is: a starved busy loop is still `R`, where
/// its CPU time (and even the kernel's run-queue delay, which is only
/// counted once the thread gets the CPU) would hardly move.
pub fn runnable(pid: u32) -> Option<bool> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut seen = false;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        seen = true;
        // The state is the first field after the name, which is in
        // parentheses and may itself hold spaces or parentheses.
        let state = text
            .rfind(')')
            .and_then(|end| text[end + 1..].split_ascii_whitespace().next());
        if state == Some("R") {
            return Some(true);
        }
    }
    seen.then_some(false)
}

fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { nix::libc::sysconf(nix::libc::_SC_CLK_TCK) };
    if hz > 0 { hz as f64 } else { 100.0 }
}

/// The process group of `pid` as the kernel says it now (`getpgid`, one
/// system call, no file; a zombie still has one), or `None` if it is gone.
pub fn group_of(pid: u32) -> Option<u32> {
    nix::unistd::getpgid(Some(raw(pid)))
        .ok()
        .map(|pgid| pgid.as_raw() as u32)
}

/// This process's own process group.
pub fn own_group() -> u32 {
    nix::unistd::getpgrp().as_raw() as u32
}

/// This process's parent.
pub fn own_parent() -> u32 {
    nix::unistd::getppid().as_raw() as u32
}

/// True while a live (not zombie) process is in group `pgid`: one scan.
///
/// A killed orphan stays in the group as a zombie until its new parent reaps
/// it, and `kill(-pgid, 0)` counts zombies; on Linux the process table tells
/// the living from the dead, elsewhere the signal probe is the fallback.
pub fn group_alive(pgid: u32) -> bool {
    live_groups(&BTreeSet::from([pgid])).contains(&pgid)
}

/// Which of `pgids` have a live (not zombie) member: one pass over the
/// table, whatever the number of groups asked about.
///
/// The pass asks the kernel each pid's group with `getpgid` (one system
/// call, no file) and reads `/proc/<pid>/stat` only for the members of the
/// groups asked about, to tell the living from zombies: a group whose only
/// member left is its zombie leader (the common case at close) costs one
/// listing of `/proc`, one `getpgid` per process and one stat. Reading
/// every process's stat instead cost 10 µs a process (0.9 ms at 87
/// processes, 2.5 ms at 370: docs/benchmarks.md).
pub fn live_groups(pgids: &BTreeSet<u32>) -> BTreeSet<u32> {
    if cfg!(target_os = "linux") && std::path::Path::new("/proc/self/stat").exists() {
        let mut live = BTreeSet::new();
        let (mut path, mut buf) = (String::new(), Vec::new());
        for pid in pids() {
            let Ok(pgid) = nix::unistd::getpgid(Some(raw(pid))) else {
                // Gone since the listing.
                continue;
            };
            let pgid = pgid.as_raw() as u32;
            if !pgids.contains(&pgid) || live.contains(&pgid) {
                continue;
            }
            // The stat is read after getpgid: a process that changed group
            // in between is judged by the group it is in now.
            if let Some(stat) = stat_with(pid, &mut path, &mut buf)
                && pgids.contains(&stat.pgid)
                && stat.is_alive()
            {
                live.insert(stat.pgid);
                if live.len() == pgids.len() {
                    break;
                }
            }
        }
        return live;
    }
    pgids
        .iter()
        .copied()
        .filter(|pgid| match killpg(raw(*pgid), None) {
            Ok(()) => true,
            Err(Errno::ESRCH) => false,
            // EPERM: members exist that we may not signal.
            Err(_) => true,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_reads_this_process() {
        let me = std::process::id();
        let stat = stat(me).expect("this process exists");
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw() as u32);
        assert_eq!(stat.pgid, nix::unistd::getpgrp().as_raw() as u32);
        assert_eq!(stat.sid, nix::unistd::getsid(None).unwrap().as_raw() as u32);
        assert!(stat.start_ticks > 0);
        assert!(is_alive(me));
        assert!(pids().contains(&me));
        assert_eq!(super::stat(i32::MAX as u32), None);
        assert!(group_alive(stat.pgid));
    }

    #[test]
    fn a_process_whose_name_is_not_utf8_is_seen() {
        use std::os::unix::{ffi::OsStrExt, process::CommandExt};
        // The kernel names a process after the file it executed, byte for byte: a
        // member named so must not escape a group check (it did: the stat line was
        // read as a `String` and failed to decode).
        let dir = std::env::temp_dir().join(format!("table-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let link = dir.join(std::ffi::OsStr::from_bytes(b"sl\xffep"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/bin/sleep", &link).expect("symlink");
        let mut child = std::process::Command::new(&link)
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn");
        let pid = child.id();
        let seen = stat(pid);
        let alive = group_alive(pid);
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seen.map(|s| s.pgid), Some(pid), "stat of a non-UTF-8 name");
        assert!(alive, "its group has a live member");
    }

    #[test]
    fn a_name_with_spaces_and_parentheses_parses() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 12345 0 0";
        let stat = parse_stat(line.as_bytes()).expect("parses");
        assert_eq!(
            (stat.state, stat.ppid, stat.pgid, stat.sid),
            ('S', 1, 42, 42)
        );
        assert_eq!(stat.cpu_ticks, 10);
        assert_eq!(stat.start_ticks, 12345);
    }
}
