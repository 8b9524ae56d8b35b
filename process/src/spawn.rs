//! Spawning: a new process group, an empty signal mask, piped stdio, and an
//! observer that sees the exit from the moment of spawn without reaping it.
//!
//! The observer is a pidfd registered with the tokio reactor (no thread per
//! child); [`ExitWatch::wait_blocking`] waits on the same pidfd itself, so
//! a `Drop` can kill the group and wait for the exit even on a
//! current-thread runtime or during runtime shutdown. Without a pidfd
//! (Linux before 5.3, a sandbox that refuses it), or without a runtime
//! ([`spawn_blocking`]), a thread observes instead (docs/process.md, "Exit
//! watch").

use std::{
    collections::BTreeMap,
    io,
    os::{
        fd::{AsRawFd, OwnedFd, RawFd},
        unix::process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
    time::Duration,
};

use nix::{errno::Errno, sys::signal::Signal};
use tokio::{
    io::{Interest, unix::AsyncFd},
    process::{ChildStderr, ChildStdin, ChildStdout},
};

use crate::{
    ChildExit, Containment, ExitWatch,
    exit::{ExitShared, OnExit},
    launch,
};

/// A running child with its pipes registered with tokio.
pub struct Spawned {
    /// The child's pid.
    pub pid: u32,
    /// Its process group id (the same number: it leads a group of its own).
    pub pgid: u32,
    /// The write end of its stdin.
    pub stdin: ChildStdin,
    /// The read end of its stdout.
    pub stdout: ChildStdout,
    /// The read end of its stderr.
    pub stderr: ChildStderr,
    /// Its exit, and the only way to signal it.
    pub exit: ExitWatch,
}

/// A running child with plain blocking pipes, for callers without a tokio
/// runtime (the fixture tests drive their servers from plain threads).
pub struct BlockingSpawned {
    /// The child's pid.
    pub pid: u32,
    /// Its process group id (the same number: it leads a group of its own).
    pub pgid: u32,
    /// The write end of its stdin.
    pub stdin: std::process::ChildStdin,
    /// The read end of its stdout; `None` when it goes to `/dev/null`
    /// ([`SpawnOptions::null_output`]).
    pub stdout: Option<std::process::ChildStdout>,
    /// The read end of its stderr; `None` when it goes to `/dev/null`.
    pub stderr: Option<std::process::ChildStderr>,
    /// Its exit, and the only way to signal it.
    pub exit: ExitWatch,
}

/// How [`spawn_blocking_with`] starts a child, beyond its program and
/// arguments. The default: this process's environment, its working
/// directory, a process group of its own, stdin, stdout and stderr piped.
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) session: bool,
    pub(crate) null_output: bool,
}

impl SpawnOptions {
    /// The default options.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` in the child's environment, over what it
    /// inherits.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// Sets every entry of `env` in the child's environment.
    pub fn envs(mut self, env: &BTreeMap<String, String>) -> Self {
        self.env
            .extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        self
    }

    /// Starts the child in `dir`.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Starts the child in a session of its own (`POSIX_SPAWN_SETSID`,
    /// glibc 2.26+), which it leads, and so in a group of its own too:
    /// neither a terminal's signals to the caller's job nor a kill of the
    /// caller's group reach it.
    pub fn own_session(mut self) -> Self {
        self.session = true;
        self
    }

    /// Sends the child's stdout and stderr to `/dev/null` instead of
    /// pipes: a caller that reads this process's own output to EOF never
    /// waits for a child that outlives it.
    pub fn null_output(mut self) -> Self {
        self.null_output = true;
        self
    }
}

/// Spawns `program` with piped stdio in a new process group, with the
/// inherited environment plus `env` (applied in key order) and in `dir`.
/// `on_exit` runs the moment the exit is first observed (on the reactor, or
/// in a blocking wait that saw it first), before anyone sees the exit.
///
/// The child stays unreaped (a zombie once it has exited) until
/// [`ExitWatch::release`] is called or every [`ExitWatch`] is dropped.
///
/// Must be called within a tokio runtime (the pipes are registered with it).
pub fn spawn(
    program: &Path,
    args: &[String],
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    reaper_name: &str,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<Spawned> {
    spawn_contained(program, args, dir, env, reaper_name, None, on_exit)
}

/// [`spawn`] inside `containment`: the child joins its cgroup between fork
/// and exec (so nothing it starts is ever outside), or is the root of the
/// tracked tree (docs/process.md, "Containment").
pub fn spawn_contained(
    program: &Path,
    args: &[String],
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    reaper_name: &str,
    containment: Option<&Containment>,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<Spawned> {
    let options = options_of(dir, env);
    let child = spawn_std(
        program,
        args,
        &options,
        reaper_name,
        containment,
        true,
        on_exit,
    )?;
    let pipes = (|| {
        let stdin = ChildStdin::from_std(child.stdin)?;
        let stdout = ChildStdout::from_std(child.stdout.expect("stdout is piped"))?;
        let stderr = ChildStderr::from_std(child.stderr.expect("stderr is piped"))?;
        io::Result::Ok((stdin, stdout, stderr))
    })();
    match pipes {
        Ok((stdin, stdout, stderr)) => Ok(Spawned {
            pid: child.pid,
            pgid: child.pgid,
            stdin,
            stdout,
            stderr,
            exit: child.exit,
        }),
        Err(error) => {
            // The child exists: whatever fails must not leak it.
            let exit = child.exit;
            let _ = exit.signal_all(Signal::SIGKILL);
            exit.wait_blocking(Duration::from_secs(5));
            exit.release();
            Err(error)
        }
    }
}

/// [`spawn`] with blocking pipes; needs no runtime.
pub fn spawn_blocking(
    program: &Path,
    args: &[String],
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
    reaper_name: &str,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<BlockingSpawned> {
    spawn_blocking_with(program, args, &options_of(dir, env), reaper_name, on_exit)
}

/// [`spawn_blocking`] as `options` say: its environment entries and
/// working directory, and a session of its own or output to `/dev/null`
/// when asked. Needs no runtime; the exit is observed by a thread.
pub fn spawn_blocking_with(
    program: &Path,
    args: &[String],
    options: &SpawnOptions,
    reaper_name: &str,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<BlockingSpawned> {
    spawn_std(program, args, options, reaper_name, None, false, on_exit)
}

fn options_of(dir: Option<&Path>, env: &BTreeMap<String, String>) -> SpawnOptions {
    SpawnOptions {
        env: env.clone(),
        dir: dir.map(Path::to_owned),
        ..SpawnOptions::default()
    }
}

fn spawn_std(
    program: &Path,
    args: &[String],
    options: &SpawnOptions,
    reaper_name: &str,
    containment: Option<&Containment>,
    on_reactor: bool,
    on_exit: impl FnOnce(ChildExit) + Send + 'static,
) -> io::Result<BlockingSpawned> {
    let (pid, stdin, stdout, stderr) = match containment {
        // No fork: docs/process.md, "Spawning".
        None => {
            let launched = launch::launch(program, args, options)?;
            (
                launched.pid,
                std::process::ChildStdin::from(launched.stdin),
                launched.stdout.map(std::process::ChildStdout::from),
                launched.stderr.map(std::process::ChildStderr::from),
            )
        }
        // Only `spawn_contained` gets here, always with piped output in a
        // group of its own.
        Some(containment) => {
            let (pid, stdin, stdout, stderr) = fork_into(program, args, options, containment)?;
            (pid, stdin, Some(stdout), Some(stderr))
        }
    };
    let exit = watch_exit(pid, reaper_name, on_reactor, Box::new(on_exit))?;
    Ok(BlockingSpawned {
        pid,
        pgid: pid,
        stdin,
        stdout,
        stderr,
        exit,
    })
}

type StdPipes = (
    u32,
    std::process::ChildStdin,
    std::process::ChildStdout,
    std::process::ChildStderr,
);

/// Spawns through `fork`, joining `containment`'s cgroup between fork and
/// exec: `posix_spawn` cannot place a child in a cgroup (glibc 2.39's
/// `posix_spawnattr_setcgroup_np` can, through `clone3`), and moving it
/// after the spawn would leave a window in which what it starts is outside.
fn fork_into(
    program: &Path,
    args: &[String],
    options: &SpawnOptions,
    containment: &Containment,
) -> io::Result<StdPipes> {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(&options.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // A host that blocks SIGTERM on its own threads (to take it with
    // sigwait, say) would otherwise start servers that can never see the
    // close ladder's SIGTERM.
    with_empty_signal_mask(&mut command);
    containment.prepare(&mut command);
    if let Some(dir) = &options.dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    // Unreaped until the owner releases it: the pid is the child's.
    containment.adopt(pid);
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // Reaped by pid from here on; dropping a `Child` does not wait.
    drop(child);
    Ok((pid, stdin, stdout, stderr))
}

/// Starts observing the exit of child `pid`, which must lead its own group
/// and be unreaped: on the tokio reactor through a pidfd when `on_reactor`
/// and the kernel gives one, else on a thread.
fn watch_exit(
    pid: u32,
    reaper_name: &str,
    on_reactor: bool,
    on_exit: OnExit,
) -> io::Result<ExitWatch> {
    // Opened while the child is unreaped: it names the child and nobody else.
    let pidfd = pidfd_open(pid);
    let with_pidfd = pidfd.is_some();
    let exit = ExitWatch::new(pid, pidfd, on_exit);
    if on_reactor && with_pidfd && tokio::runtime::Handle::try_current().is_ok() {
        tokio::spawn(observe_on_reactor(
            exit.shared.clone(),
            reaper_name.to_owned(),
        ));
        return Ok(exit);
    }
    if let Err(error) = observe_on_thread(exit.shared.clone(), reaper_name) {
        // Nobody would ever see the exit: kill the child and let it go (the
        // handle's drop reaps it once it has exited).
        let _ = exit.signal_all(Signal::SIGKILL);
        exit.wait_blocking(Duration::from_secs(5));
        exit.release();
        return Err(error);
    }
    Ok(exit)
}

/// The pidfd as tokio registers it; the fd is owned by `ExitShared`, which
/// this keeps alive (and so open) for as long as the registration.
struct PidfdOf {
    fd: RawFd,
    _owner: Arc<ExitShared>,
}

impl AsRawFd for PidfdOf {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

/// Waits for the pidfd to turn readable (the child has exited) on the
/// reactor, then publishes the exit. Dropped before that (the runtime
/// shuts down), it hands the watch to a thread, so an exit is never missed.
fn observe_on_reactor(
    shared: Arc<ExitShared>,
    name: String,
) -> impl Future<Output = ()> + Send + 'static {
    struct Handover(Option<(Arc<ExitShared>, String)>);
    impl Handover {
        /// The exit was published: nothing to hand over.
        fn disarm(mut self) {
            self.0 = None;
        }
    }
    impl Drop for Handover {
        fn drop(&mut self) {
            if let Some((shared, name)) = self.0.take() {
                // No thread: the pidfd still serves `wait_blocking`.
                let _ = observe_on_thread(shared, &name);
            }
        }
    }
    // Made outside the async block: a task dropped before its first poll
    // drops it too.
    let handover = Handover(Some((shared.clone(), name)));
    async move {
        let Some(raw_fd) = shared.pidfd.as_ref().map(AsRawFd::as_raw_fd) else {
            return;
        };
        let pidfd = PidfdOf {
            fd: raw_fd,
            _owner: shared.clone(),
        };
        // SAFETY: the fd is open and the same for the whole registration: it
        // is owned by the `ExitShared` that `pidfd` holds, which closes it
        // only when dropped, after this registration is gone.
        let Ok(fd) = (unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }) else {
            return;
        };
        while !shared.observe_now() {
            match fd.readable().await {
                Ok(mut ready) => ready.clear_ready(),
                Err(_) => return,
            }
        }
        handover.disarm();
    }
}

/// Observes the exit on a thread of its own: blocks on the pidfd, or in
/// `waitid(WNOWAIT)` by pid without one.
fn observe_on_thread(shared: Arc<ExitShared>, reaper_name: &str) -> io::Result<()> {
    // A thread name may not hold a NUL; the name is only for debuggers.
    let thread_name = format!("reaper-{}", reaper_name.replace('\0', ""));
    std::thread::Builder::new()
        .name(thread_name)
        .spawn(move || match &shared.pidfd {
            Some(pidfd) => {
                while !shared.observe_now() {
                    poll_readable(pidfd, Duration::from_secs(3600));
                }
            }
            None => {
                shared.observe(observe_exit(shared.pid));
            }
        })
        .map(drop)
}

/// A pidfd of `pid` (Linux 5.3+), or `None` where the kernel gives none.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::FromRawFd as _;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd =
            unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid as nix::libc::pid_t, 0) };
        // SAFETY: a non-negative return is a new fd that nothing else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        None
    }
}

/// Waits up to `within` for `fd` to turn readable (a pidfd: its process
/// has exited).
pub(crate) fn poll_readable(fd: &OwnedFd, within: Duration) {
    let mut poll = nix::libc::pollfd {
        fd: fd.as_raw_fd(),
        events: nix::libc::POLLIN,
        revents: 0,
    };
    let millis = within.as_millis().clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one valid pollfd for the duration of the call. EINTR and
    // errors return early: every caller checks the exit again and loops.
    unsafe { nix::libc::poll(&mut poll, 1, millis) };
}

/// Makes `command` start its process with no signal blocked: a blocked
/// signal mask survives exec, so whatever the spawning thread blocks would
/// otherwise be blocked in the child for good.
fn with_empty_signal_mask(command: &mut Command) {
    // SAFETY: sigprocmask is async-signal-safe and touches no Rust state.
    unsafe {
        command.pre_exec(|| {
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_SETMASK,
                Some(&nix::sys::signal::SigSet::empty()),
                None,
            )
            .map_err(io::Error::from)
        });
    }
}

/// Blocks until child `pid` has exited, without reaping it. A child that
/// someone else reaped is reported [`Peek::Gone`].
fn observe_exit(pid: u32) -> Peek {
    loop {
        match peek_exit(pid, None, 0) {
            // Without WNOHANG only an EINTR is reported so.
            Peek::Running => continue,
            // Any other error cannot be waited through either: the exit
            // is as unknown as a reap elsewhere would leave it.
            Peek::Failed => return Peek::Gone,
            seen => return seen,
        }
    }
}

/// How child `pid` ended if it has, without reaping it; never blocks. `None`
/// while it runs (or on an error).
#[cfg(test)]
pub(crate) fn exited_now(pid: u32) -> Option<ChildExit> {
    match peek_exit(pid, None, nix::libc::WNOHANG) {
        Peek::Exited(status) => Some(status),
        Peek::Running | Peek::Gone | Peek::Failed => None,
    }
}

/// What one `waitid(WNOWAIT)` on the child saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peek {
    /// The child has exited this way; it is still a zombie of ours.
    Exited(ChildExit),
    /// Still running (with `WNOHANG`), or the call was interrupted: ask again.
    Running,
    /// Another error (none is expected): the pidfd paths ask again once
    /// the pidfd is readable, the blocking wait by pid gives up.
    Failed,
    /// The kernel has no such child of ours (`ECHILD`): someone else reaped
    /// it (a `waitpid(-1)` elsewhere in the process). Its status is lost,
    /// and its pid may already be someone else's.
    Gone,
}

/// One `waitid(WEXITED | WNOWAIT | extra)` on the child, through its pidfd
/// when there is one, else by `pid`. The caller makes sure the child has
/// not been reaped by this crate yet.
pub(crate) fn peek_exit(pid: u32, pidfd: Option<&OwnedFd>, extra: nix::libc::c_int) -> Peek {
    let (idtype, id) = match pidfd {
        Some(fd) => (nix::libc::P_PIDFD, fd.as_raw_fd() as nix::libc::id_t),
        None => (nix::libc::P_PID, pid as nix::libc::id_t),
    };
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
    let mut info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid only writes into `info`.
    let rc = unsafe {
        nix::libc::waitid(
            idtype,
            id,
            &mut info,
            nix::libc::WEXITED | nix::libc::WNOWAIT | extra,
        )
    };
    if rc != 0 {
        // ECHILD is final: asking again would get it again, forever (a
        // readable pidfd and this answer made the observer spin).
        return match Errno::last() {
            Errno::ECHILD => Peek::Gone,
            Errno::EINTR => Peek::Running,
            _ => Peek::Failed,
        };
    }
    // SAFETY: si_pid is set by a successful waitid; with WNOHANG and a
    // child still running it is left zero.
    if unsafe { info.si_pid() } == 0 {
        return Peek::Running;
    }
    // SAFETY: waitid succeeded with WEXITED, so the SIGCHLD fields are set.
    let status = unsafe { info.si_status() };
    Peek::Exited(match info.si_code {
        nix::libc::CLD_EXITED => ChildExit::Code(status),
        _ => ChildExit::Signal(status),
    })
}

/// Reaps the child, which has exited (its exit was observed and not
/// reaped): the zombie goes, and with it the reservation of its pid.
pub(crate) fn reap(pid: u32, pidfd: Option<&OwnedFd>) {
    let (idtype, id) = match pidfd {
        Some(fd) => (nix::libc::P_PIDFD, fd.as_raw_fd() as nix::libc::id_t),
        None => (nix::libc::P_PID, pid as nix::libc::id_t),
    };
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid.
        let mut info: nix::libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid only writes into `info`.
        let rc = unsafe { nix::libc::waitid(idtype, id, &mut info, nix::libc::WEXITED) };
        if rc == 0 || Errno::last() != Errno::EINTR {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::mpsc, time::Instant};

    use super::*;

    /// Runs `script` in sh through [`spawn_blocking`] and returns its stdout
    /// and exit.
    fn run_sh(
        script: &str,
        dir: Option<&Path>,
        env: &BTreeMap<String, String>,
    ) -> (String, ChildExit) {
        use std::io::Read as _;
        let mut child = spawn_blocking(
            Path::new("sh"),
            &["-c".into(), script.into()],
            dir,
            env,
            "sh",
            |_| {},
        )
        .expect("sh starts");
        drop(child.stdin);
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("stdout is piped")
            .read_to_string(&mut out)
            .expect("stdout");
        let status = child
            .exit
            .wait_blocking(Duration::from_secs(10))
            .expect("sh exits");
        child.exit.release();
        (out, status)
    }

    /// A mask field of /proc/self/status (`SigBlk`, `SigIgn`) as sh sees it.
    fn mask_line(out: &str, field: &str) -> String {
        out.lines()
            .find_map(|line| line.strip_prefix(field))
            .unwrap_or_else(|| panic!("no {field} in {out}"))
            .trim()
            .to_owned()
    }

    #[test]
    fn a_child_of_a_thread_that_blocks_and_ignores_sigterm_starts_with_neither() {
        use nix::sys::signal::{SigHandler, SigSet, signal};
        // On a thread of its own: the mask is per thread, and the test
        // harness's other threads must keep theirs.
        let out = std::thread::spawn(|| {
            let mut blocked = SigSet::empty();
            blocked.add(Signal::SIGTERM);
            blocked.add(Signal::SIGINT);
            blocked.thread_block().unwrap();
            let script = "grep -E '^(SigBlk|SigIgn|NSpgid|NSpid):' /proc/self/status; \
                          echo pgid=$(ps -o pgid= -p $$ 2>/dev/null || true)";
            let (out, status) = run_sh(script, None, &BTreeMap::new());
            blocked.thread_unblock().unwrap();
            assert_eq!(status, ChildExit::Code(0), "{out}");
            out
        })
        .join()
        .unwrap();
        assert_eq!(mask_line(&out, "SigBlk:"), "0000000000000000", "{out}");
        // Rust ignores SIGPIPE in this process; the child must not.
        assert_eq!(standard_ignored(&out), 0, "{out}");
        // SIGTERM ignored by the host (SIGHUP here, which no test relies
        // on) is not ignored by the child either.
        // SAFETY: no handler is installed; SIG_IGN and back.
        let previous = unsafe { signal(Signal::SIGHUP, SigHandler::SigIgn) }.unwrap();
        let (out, _) = run_sh("grep '^SigIgn:' /proc/self/status", None, &BTreeMap::new());
        // SAFETY: restores what was there.
        unsafe { signal(Signal::SIGHUP, previous) }.unwrap();
        assert_eq!(standard_ignored(&out), 0, "{out}");
    }

    /// The standard signals (1-31) in `SigIgn`. glibc's `posix_spawn`
    /// leaves its two internal real-time signals (32, 33) ignored, which
    /// nobody sends to a server and glibc itself re-arms in the program.
    fn standard_ignored(out: &str) -> u64 {
        u64::from_str_radix(&mask_line(out, "SigIgn:"), 16).expect("hex") & 0x7fff_ffff
    }

    #[test]
    fn the_child_leads_a_group_of_its_own_in_dir_with_env_applied() {
        let dir = std::env::temp_dir();
        let env = BTreeMap::from([("SPAWN_TEST_VALUE".to_owned(), "a b".to_owned())]);
        let (out, status) = run_sh(
            "echo \"$$ $(cut -d' ' -f5 /proc/$$/stat) $(pwd -P)|$SPAWN_TEST_VALUE|${HOME:+home}\"",
            Some(&dir),
            &env,
        );
        assert_eq!(status, ChildExit::Code(0));
        let (ids, rest) = out.trim().split_once(' ').unwrap();
        let (pgid, rest) = rest.split_once(' ').unwrap();
        assert_eq!(ids, pgid, "leads its own group: {out}");
        let (cwd, rest) = rest.split_once('|').unwrap();
        assert_eq!(Path::new(cwd), dir.canonicalize().unwrap());
        let inherited = if std::env::var_os("HOME").is_some() {
            "home"
        } else {
            ""
        };
        assert_eq!(rest, format!("a b|{inherited}"));
    }

    #[test]
    fn a_configured_variable_replaces_the_inherited_one_once() {
        // The inherited entries are passed as pointers into `environ`: one
        // of them that is also configured must be left out, not doubled.
        let Some(key) = std::env::vars_os()
            .filter_map(|(key, _)| key.into_string().ok())
            .find(|key| key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        else {
            return;
        };
        let env = BTreeMap::from([(key.clone(), "configured".to_owned())]);
        let (out, status) = run_sh(
            &format!("echo \"$(tr '\\0' '\\n' < /proc/$$/environ | grep -c '^{key}=')|${key}\""),
            None,
            &env,
        );
        assert_eq!(status, ChildExit::Code(0));
        assert_eq!(out.trim(), "1|configured", "{key}");
    }

    #[test]
    fn a_program_missing_from_path_or_disk_is_not_found() {
        for program in ["no-such-program-for-spawn", "/no/such/program"] {
            let error = spawn_blocking(
                Path::new(program),
                &[],
                None,
                &BTreeMap::new(),
                "missing",
                |_| {},
            )
            .err()
            .expect("fails");
            assert_eq!(error.kind(), io::ErrorKind::NotFound, "{program}: {error}");
        }
        // A PATH given in `env` is the one searched.
        let env = BTreeMap::from([("PATH".to_owned(), "/nonexistent".to_owned())]);
        let error = spawn_blocking(Path::new("sh"), &[], None, &env, "missing", |_| {})
            .err()
            .expect("sh is not in /nonexistent");
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let nul = spawn_blocking(
            Path::new("sh"),
            &["a\0b".into()],
            None,
            &BTreeMap::new(),
            "nul",
            |_| {},
        )
        .err()
        .expect("a NUL in an argument is refused");
        assert_eq!(nul.kind(), io::ErrorKind::InvalidInput);
    }

    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, |dir| dir.count())
    }

    /// `sh` that exits when its stdin ends.
    fn reader(name: &str) -> Spawned {
        spawn(
            Path::new("sh"),
            &["-c".into(), "read x; exit 4".into()],
            None,
            &BTreeMap::new(),
            name,
            |_| {},
        )
        .expect("sh starts")
    }

    #[test]
    fn exits_are_watched_on_the_reactor_without_a_thread_per_child() {
        let runtime = current_thread_runtime();
        runtime.block_on(async {
            let before = threads();
            let children: Vec<Spawned> = (0..8).map(|n| reader(&format!("r{n}"))).collect();
            assert!(
                children.iter().all(|c| c.exit.shared.pidfd.is_some()),
                "this kernel gives pidfds"
            );
            assert_eq!(threads(), before, "no thread was started for the children");
            let mut pids = Vec::new();
            for child in children {
                drop(child.stdin);
                let status = child.exit.wait_for(Duration::from_secs(10)).await;
                assert_eq!(status, Some(ChildExit::Code(4)));
                // Held until released: still a zombie of ours.
                assert_eq!(crate::table::state(child.pid), Some('Z'));
                child.exit.release();
                assert!(child.exit.reaped());
                pids.push(child.pid);
            }
            assert_eq!(threads(), before);
        });
    }

    #[test]
    fn a_runtime_that_ends_first_hands_the_watch_to_a_thread() {
        let runtime = current_thread_runtime();
        let child = runtime.block_on(async { reader("orphaned-watch") });
        let (exit, stdin, pid) = (child.exit, child.stdin, child.pid);
        // The observer task is dropped with the runtime, before the exit.
        drop(runtime);
        drop(stdin);
        // Published without anyone waiting on the pidfd here: by the thread
        // the task handed over to.
        let deadline = Instant::now() + Duration::from_secs(10);
        while exit.now().is_none() {
            assert!(Instant::now() < deadline, "the exit was never published");
            std::thread::yield_now();
        }
        assert_eq!(exit.now(), Some(ChildExit::Code(4)));
        assert_eq!(crate::table::state(pid), Some('Z'), "held until released");
        exit.release();
        assert!(exit.reaped());
    }

    #[test]
    fn wait_blocking_sees_the_exit_on_a_runtime_it_blocks() {
        // A `Drop` on a current-thread runtime blocks the only thread that
        // would run the observer task: the pidfd is waited on directly.
        let runtime = current_thread_runtime();
        runtime.block_on(async {
            let child = reader("blocked-runtime");
            drop(child.stdin);
            let started = Instant::now();
            assert_eq!(
                child.exit.wait_blocking(Duration::from_secs(10)),
                Some(ChildExit::Code(4))
            );
            assert!(started.elapsed() < Duration::from_secs(5));
            child.exit.release();
            assert!(child.exit.reaped());
        });
    }

    #[test]
    fn a_late_reaper_does_not_hide_an_exit_the_kernel_holds() {
        // The reaper publishes after `on_exit`; an `on_exit` that waits for
        // the test to let it go is a reaper scheduled late on a loaded machine.
        let (go, wait) = mpsc::channel::<()>();
        let runtime = current_thread_runtime();
        runtime.block_on(async {
            let child = spawn(
                Path::new("sh"),
                &["-c".into(), "exit 3".into()],
                None,
                &BTreeMap::new(),
                "late",
                move |_| {
                    let _ = wait.recv_timeout(Duration::from_secs(10));
                },
            )
            .expect("sh starts");
            // The child has exited once the kernel says so, reaper or not.
            let deadline = Instant::now() + Duration::from_secs(10);
            while exited_now(child.pid).is_none() {
                assert!(Instant::now() < deadline, "sh never exited");
                std::thread::yield_now();
            }
            assert_eq!(exited_now(child.pid), Some(ChildExit::Code(3)));
            // The reaper is let go only after the short wait below has
            // expired: the answer must still be the exit.
            let release = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                let _ = go.send(());
            });
            let status = child.exit.wait_for(Duration::from_millis(10)).await;
            release.join().unwrap();
            assert_eq!(status, Some(ChildExit::Code(3)));
            child.exit.release();
        });
    }

    /// A runtime with one thread: the observer task runs only when the test awaits.
    fn current_thread_runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// Reaps `pid` the way a stranger's `waitpid(-1)` would: the status
    /// goes to this call, not to the exit watch.
    fn reap_elsewhere(pid: u32) {
        let reaped = nix::sys::wait::waitpid(crate::raw(pid), None).expect("waitpid");
        assert_eq!(reaped.pid(), Some(crate::raw(pid)));
    }

    #[test]
    fn a_child_reaped_elsewhere_is_published_unknown_not_spun_on() {
        // A current-thread runtime whose observer task cannot run before
        // the first await: the child is reaped before anyone here looks.
        let runtime = current_thread_runtime();
        runtime.block_on(async {
            // Through the reactor's observer.
            let child = reader("reaped-elsewhere");
            assert!(
                child.exit.shared.pidfd.is_some(),
                "this kernel gives pidfds"
            );
            drop(child.stdin);
            reap_elsewhere(child.pid);
            let started = Instant::now();
            let status = child.exit.wait_for(Duration::from_secs(10)).await;
            assert_eq!(status, Some(ChildExit::UNKNOWN));
            assert!(started.elapsed() < Duration::from_secs(5));
            // Its pid may be a stranger's now: no signal goes to it, and
            // nothing reaps by it again.
            assert!(child.exit.reaped());
            assert!(!child.exit.signal_group(Signal::SIGKILL).unwrap());
            assert!(!child.exit.signal_child(Signal::SIGKILL).unwrap());
            child.exit.release();

            // Through a blocking wait, the observer task never polled.
            let child = reader("reaped-elsewhere-blocking");
            drop(child.stdin);
            reap_elsewhere(child.pid);
            let started = Instant::now();
            assert_eq!(
                child.exit.wait_blocking(Duration::from_secs(10)),
                Some(ChildExit::UNKNOWN)
            );
            assert!(started.elapsed() < Duration::from_secs(5));
            assert!(child.exit.reaped());
            child.exit.release();
        });
    }

    /// The blocked signals (`SigBlk`) and the session and group of `pid`.
    fn mask_session_group(pid: u32) -> (String, i32, i32) {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let blocked = status
            .lines()
            .find_map(|l| l.strip_prefix("SigBlk:"))
            .expect("SigBlk")
            .trim()
            .to_owned();
        let sid = nix::unistd::getsid(Some(crate::raw(pid)))
            .expect("getsid")
            .as_raw();
        let pgid = nix::unistd::getpgid(Some(crate::raw(pid)))
            .expect("getpgid")
            .as_raw();
        (blocked, sid, pgid)
    }

    #[test]
    fn own_group_and_own_session_children_start_there_with_nothing_blocked() {
        // Block SIGTERM on this thread: a child must not inherit it.
        let mut term = nix::sys::signal::SigSet::empty();
        term.add(Signal::SIGTERM);
        term.thread_block().expect("block SIGTERM");
        let own_sid = nix::unistd::getsid(None).expect("getsid").as_raw();
        for session in [false, true] {
            let mut options = SpawnOptions::new().null_output();
            if session {
                options = options.own_session();
            }
            let child = spawn_blocking_with(
                Path::new("sleep"),
                &["60".into()],
                &options,
                "own-session",
                |_| {},
            )
            .expect("spawn sleep");
            let pid = child.pid;
            // posix_spawn returns once the child has exec'd.
            let seen = mask_session_group(pid);
            let stdout = std::fs::read_link(format!("/proc/{pid}/fd/1"));
            let stderr = std::fs::read_link(format!("/proc/{pid}/fd/2"));
            child
                .exit
                .signal_group(Signal::SIGKILL)
                .expect("kill sleep");
            assert_eq!(
                child.exit.wait_blocking(Duration::from_secs(10)),
                Some(ChildExit::Signal(Signal::SIGKILL as i32))
            );
            child.exit.release();
            let (blocked, sid, pgid) = seen;
            assert_eq!(blocked, "0000000000000000", "session {session}");
            assert_eq!(pgid, pid as i32, "session {session}");
            if session {
                assert_eq!(sid, pid as i32);
            } else {
                assert_eq!(sid, own_sid);
            }
            assert!(child.stdout.is_none() && child.stderr.is_none());
            assert_eq!(stdout.expect("fd 1"), Path::new("/dev/null"));
            assert_eq!(stderr.expect("fd 2"), Path::new("/dev/null"));
        }
        term.thread_unblock().expect("unblock SIGTERM");
    }
}
