//! Starting a program with `posix_spawn`: no fork of this process, an empty
//! signal mask, default signal dispositions and a process group of its own.
//!
//! `std::process::Command` uses `posix_spawn` only without a `pre_exec`
//! hook, and its `posix_spawn` path inherits the spawning thread's signal
//! mask (std chose that on purpose). A host that blocks SIGTERM on its
//! threads (to take it with `sigwait`) would then start servers that can
//! never see the close ladder's SIGTERM, and clearing the mask in a
//! `pre_exec` hook makes std `fork()` the whole client, page tables and all,
//! for every server (docs/process.md, "Spawning"). So the few attributes
//! this crate needs are set here, on glibc's `posix_spawn` (a `clone` with
//! `CLONE_VM | CLONE_VFORK`, which copies nothing):
//!
//! - `POSIX_SPAWN_SETSIGMASK` with an empty set;
//! - `POSIX_SPAWN_SETSIGDEF` with every signal: an ignored disposition
//!   survives exec (Rust ignores SIGPIPE; a host may ignore SIGTERM), and a
//!   server must start in the standard state;
//! - `POSIX_SPAWN_SETPGROUP` with 0: it leads a group of its own; or, when
//!   asked, `POSIX_SPAWN_SETSID` (glibc 2.26+): it leads a session of its
//!   own, and so a group of its own too;
//! - stdin, stdout and stderr as pipes (stdout and stderr to `/dev/null`
//!   when asked), and the working directory
//!   (`posix_spawn_file_actions_addchdir_np`, glibc 2.29+).

use std::{
    collections::BTreeMap,
    ffi::{CString, OsStr, OsString},
    io,
    mem::MaybeUninit,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::ffi::{OsStrExt, OsStringExt},
    },
    path::{Path, PathBuf},
};

use nix::libc;

use crate::SpawnOptions;

/// A started child: its pid and this side of its pipes (no stdout or
/// stderr pipe when they go to `/dev/null`).
pub(crate) struct Launched {
    pub(crate) pid: u32,
    pub(crate) stdin: OwnedFd,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// Starts `program` with `args` as `options` say (the inherited environment
/// plus its entries, its working directory, its own group or session), as
/// described in the module docs. A `program` without a `/` is looked up in
/// the `PATH` the child will have (`env`'s, else this process's), as
/// `execvp` would.
pub(crate) fn launch(
    program: &Path,
    args: &[String],
    options: &SpawnOptions,
) -> io::Result<Launched> {
    let (dir, env) = (options.dir.as_deref(), &options.env);
    let path = resolve(program, dir, env)?;
    let path = cstring(path.into_os_string().into_vec())?;
    let mut argv = Vec::with_capacity(args.len() + 1);
    argv.push(cstring(program.as_os_str().as_bytes().to_vec())?);
    for arg in args {
        argv.push(cstring(arg.clone().into_bytes())?);
    }
    let (_configured, envp_ptrs) = environment(env)?;
    let dir = dir
        .map(|dir| cstring(dir.as_os_str().as_bytes().to_vec()))
        .transpose()?;

    // Ours first, the child's second; both close-on-exec, so no other
    // child started meanwhile inherits them.
    let (child_stdin, stdin) = pipe()?;
    let mut actions = FileActions::new()?;
    actions.dup2(&child_stdin, libc::STDIN_FILENO)?;
    let mut output = |to: RawFd| -> io::Result<_> {
        if options.null_output {
            actions.null(to)?;
            return Ok((None, None));
        }
        let (ours, childs) = pipe()?;
        actions.dup2(&childs, to)?;
        Ok((Some(ours), Some(childs)))
    };
    // The child's ends are held until the spawn is done.
    let (stdout, _child_stdout) = output(libc::STDOUT_FILENO)?;
    let (stderr, _child_stderr) = output(libc::STDERR_FILENO)?;
    if let Some(dir) = &dir {
        actions.chdir(dir)?;
    }
    let attrs = Attrs::new(options.session)?;

    let argv_ptrs = pointers(&argv);
    let mut pid: libc::pid_t = 0;
    // SAFETY: every pointer is valid for the call: the paths, argv and envp
    // are NUL-terminated strings in null-terminated arrays that outlive it,
    // and the actions and attributes are initialised.
    let rc = unsafe {
        libc::posix_spawn(
            &mut pid,
            path.as_ptr(),
            actions.as_ptr(),
            attrs.as_ptr(),
            argv_ptrs.as_ptr().cast(),
            envp_ptrs.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::from_raw_os_error(rc));
    }
    Ok(Launched {
        pid: pid as u32,
        stdin,
        stdout,
        stderr,
    })
}

/// Where `program` is: itself when it holds a `/`, else the first
/// executable file of that name in the child's `PATH`.
fn resolve(
    program: &Path,
    dir: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> io::Result<PathBuf> {
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_owned());
    }
    let search = match env.get("PATH") {
        Some(path) => OsString::from(path),
        // execvp's own default when PATH is unset.
        None => std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into()),
    };
    for entry in std::env::split_paths(&search) {
        // An empty entry is the current directory, as for execvp; a
        // relative one is relative to the child's working directory.
        let entry = match dir {
            Some(dir) if entry.is_relative() => dir.join(entry),
            _ => entry,
        };
        let candidate = entry.join(program);
        if is_executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} not found in PATH", program.display()),
    ))
}

fn is_executable(path: &Path) -> bool {
    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path; access only reads it.
    let runnable = unsafe { libc::access(path.as_ptr(), libc::X_OK) } == 0;
    runnable && std::fs::metadata(OsStr::from_bytes(path.as_bytes())).is_ok_and(|m| m.is_file())
}

/// This process's environment with `env` applied over it: a null-terminated
/// array of `KEY=value` pointers, and the strings of `env`'s entries that
/// the array points into (to be kept until the spawn). The inherited entries
/// are pointers into `environ` itself, not copies: copying the whole
/// environment into owned strings for every spawn was most of the spawn's
/// own work. Read as std's `Command` reads it when no variable is changed
/// (std's `env::set_var` is `unsafe` for this reason: it may not race with
/// readers of the environment).
fn environment(
    env: &BTreeMap<String, String>,
) -> io::Result<(Vec<CString>, Vec<*const libc::c_char>)> {
    let configured = env
        .iter()
        .map(|(key, value)| cstring(format!("{key}={value}").into_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    let mut envp = Vec::with_capacity(64 + configured.len());
    // SAFETY: `environ` is a null-terminated array of NUL-terminated
    // strings, unchanged for the duration of this call and of the spawn
    // (see above).
    unsafe {
        let mut entry = libc::environ.cast_const();
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry).to_bytes();
            // The key ends at the first `=` after its first byte, as for
            // `std::env::vars_os`; a configured key replaces the inherited one.
            let key = match text.iter().skip(1).position(|&b| b == b'=') {
                Some(at) => &text[..at + 1],
                None => text,
            };
            let replaced = std::str::from_utf8(key).is_ok_and(|key| env.contains_key(key));
            if !replaced {
                envp.push((*entry).cast_const());
            }
            entry = entry.add(1);
        }
    }
    envp.extend(configured.iter().map(|s| s.as_ptr()));
    envp.push(std::ptr::null());
    Ok((configured, envp))
}

fn cstring(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// A null-terminated array of pointers into `strings`.
fn pointers(strings: &[CString]) -> Vec<*const libc::c_char> {
    strings
        .iter()
        .map(|s| s.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// A pipe as (read end, write end), both close-on-exec and numbered 3 or
/// above: a child end numbered 0-2 would be `dup2`ed onto itself, which
/// leaves close-on-exec set on some libcs.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both are new fds that nothing else owns.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((above_stdio(read)?, above_stdio(write)?))
}

fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > libc::STDERR_FILENO {
        return Ok(fd);
    }
    // SAFETY: F_DUPFD_CLOEXEC makes a new fd from a valid one.
    let new = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(rc))
    }
}

struct FileActions(Box<MaybeUninit<libc::posix_spawn_file_actions_t>>);

impl FileActions {
    fn new() -> io::Result<Self> {
        let mut actions = Box::new(MaybeUninit::uninit());
        // SAFETY: init initialises the object it is given.
        check(unsafe { libc::posix_spawn_file_actions_init(actions.as_mut_ptr()) })?;
        Ok(FileActions(actions))
    }

    fn as_ptr(&self) -> *const libc::posix_spawn_file_actions_t {
        self.0.as_ptr()
    }

    fn dup2(&mut self, fd: &OwnedFd, to: RawFd) -> io::Result<()> {
        // SAFETY: an initialised object; the fd stays open until the spawn.
        check(unsafe {
            libc::posix_spawn_file_actions_adddup2(self.0.as_mut_ptr(), fd.as_raw_fd(), to)
        })
    }

    /// `to` opened on `/dev/null` for writing.
    fn null(&mut self, to: RawFd) -> io::Result<()> {
        // SAFETY: an initialised object and a NUL-terminated path (copied).
        check(unsafe {
            libc::posix_spawn_file_actions_addopen(
                self.0.as_mut_ptr(),
                to,
                c"/dev/null".as_ptr(),
                libc::O_WRONLY,
                0,
            )
        })
    }

    fn chdir(&mut self, dir: &CString) -> io::Result<()> {
        // SAFETY: an initialised object and a NUL-terminated path (copied).
        check(unsafe {
            libc::posix_spawn_file_actions_addchdir_np(self.0.as_mut_ptr(), dir.as_ptr())
        })
    }
}

impl Drop for FileActions {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawn_file_actions_destroy(self.0.as_mut_ptr()) };
    }
}

struct Attrs(Box<MaybeUninit<libc::posix_spawnattr_t>>);

impl Attrs {
    /// Empty mask, every signal at its default, a new process group; or a
    /// new session (which it leads, and so its group too) with `session`.
    fn new(session: bool) -> io::Result<Self> {
        let mut attrs = Box::new(MaybeUninit::uninit());
        // SAFETY: init initialises the object it is given.
        check(unsafe { libc::posix_spawnattr_init(attrs.as_mut_ptr()) })?;
        let mut attrs = Attrs(attrs);
        let ptr = attrs.0.as_mut_ptr();
        let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
        let mut every = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: the sets are initialised by sigemptyset/sigfillset before
        // use; the attribute object is initialised.
        unsafe {
            libc::sigemptyset(empty.as_mut_ptr());
            libc::sigfillset(every.as_mut_ptr());
            check(libc::posix_spawnattr_setsigmask(ptr, empty.as_ptr()))?;
            check(libc::posix_spawnattr_setsigdefault(ptr, every.as_ptr()))?;
            // Not both: a session leader cannot change its group, so glibc's
            // setpgid after its setsid would fail the spawn.
            let leads = if session {
                libc::c_int::from(libc::POSIX_SPAWN_SETSID)
            } else {
                check(libc::posix_spawnattr_setpgroup(ptr, 0))?;
                libc::POSIX_SPAWN_SETPGROUP
            };
            let flags = libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF | leads;
            check(libc::posix_spawnattr_setflags(ptr, flags as libc::c_short))?;
        }
        Ok(attrs)
    }

    fn as_ptr(&self) -> *const libc::posix_spawnattr_t {
        self.0.as_ptr()
    }
}

impl Drop for Attrs {
    fn drop(&mut self) {
        // SAFETY: initialised in `new`, destroyed once.
        unsafe { libc::posix_spawnattr_destroy(self.0.as_mut_ptr()) };
    }
}
