//! The PATH lookup: resolving COMMAND to the program the client will execute (docs/contract.md:
//! `3.resolve.relative`, `3.resolve.env_path`, `3.resolve.inherited`, `3.resolve.not_found`).
//!
//! The lookup is done here, before spawning, in the PATH the child will see:
//! ENV.PATH when the server's ENV sets one, else the inherited PATH. Leaving it
//! to the platform would search the *parent's* PATH, which is the classic
//! "COMMAND: uvx + ENV.PATH: /venv/bin fails with not found" trap.
//!
//! The result is always an absolute path. The child changes into DIR before it
//! executes the program, so a relative path that was already joined to DIR
//! would be read relative to DIR a second time (`sub/sub/srv`). DIR itself is
//! checked here too, so that a missing DIR is reported as such, not as a
//! COMMAND that cannot be started.

use std::{
    ffi::{OsStr, OsString},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

/// Which PATH a bare COMMAND was looked up in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchedPath {
    /// The PATH set in the server's ENV. Its value is an ENV value, so it is
    /// never printed.
    Env {
        /// How many entries the PATH has.
        entries: usize,
    },
    /// The PATH the client inherited (printed: it is not configuration).
    Inherited(String),
    /// Neither ENV nor the client's environment sets PATH.
    Unset,
}

impl std::fmt::Display for SearchedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SearchedPath::Env { entries } => {
                let noun = if *entries == 1 { "entry" } else { "entries" };
                write!(
                    f,
                    "the PATH set in the server's ENV ({entries} {noun}; value not shown)"
                )
            }
            SearchedPath::Inherited(path) => write!(f, "the inherited PATH ({path})"),
            SearchedPath::Unset => write!(f, "no PATH (neither ENV nor the environment sets one)"),
        }
    }
}

/// Why COMMAND could not be resolved. Messages name COMMAND, never ARGS or
/// ENV values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandPathError {
    /// A bare COMMAND (no `/`) is in no directory of the PATH searched.
    #[error(
        "command `{command}` not found in {searched}; fix: use an absolute COMMAND, a path \
         relative to DIR (`./bin/server`), add its directory to ENV.PATH, or use `${{VAR}}` in \
         COMMAND"
    )]
    NotFound {
        /// COMMAND as configured.
        command: String,
        /// Which PATH was searched.
        searched: SearchedPath,
    },
    /// A COMMAND with a `/` names no executable file.
    #[error(
        "command `{command}` resolves to {}, which does not exist or is not an executable file; \
         fix: check the path (a relative COMMAND is resolved against DIR)",
        resolved.display()
    )]
    BadPath {
        /// COMMAND as configured.
        command: String,
        /// The absolute path it resolved to.
        resolved: PathBuf,
    },
    /// DIR cannot be the child's working directory.
    #[error(
        "DIR {} {problem}; fix: create it, or set DIR to an existing directory (a relative DIR \
         is relative to the client's working directory{})",
        dir.display(),
        cwd_suffix()
    )]
    BadDir {
        /// DIR as configured.
        dir: PathBuf,
        /// What is wrong with it.
        problem: DirProblem,
    },
    /// COMMAND is the empty string.
    #[error("COMMAND is empty")]
    Empty,
}

/// What is wrong with a DIR.
#[derive(Debug, thiserror::Error)]
pub enum DirProblem {
    /// Nothing exists at that path.
    #[error("does not exist")]
    Missing,
    /// Something that is not a directory exists at that path.
    #[error("is not a directory")]
    NotADirectory,
    /// The path cannot be examined (permissions, I/O).
    #[error("cannot be read: {0}")]
    Unreadable(std::io::Error),
}

fn cwd_suffix() -> String {
    std::env::current_dir()
        .map(|cwd| format!(", {}", cwd.display()))
        .unwrap_or_default()
}

/// Resolves `command` for a child that runs in `dir` with `env_path` (the
/// server's ENV.PATH, if set) or else `inherited_path`.
pub(crate) fn resolve(
    command: &str,
    dir: Option<&Path>,
    env_path: Option<&OsStr>,
    inherited_path: Option<&OsStr>,
) -> Result<PathBuf, CommandPathError> {
    if command.is_empty() {
        return Err(CommandPathError::Empty);
    }
    let dir = match dir {
        Some(dir) => Some(checked_dir(dir)?),
        None => None,
    };
    let dir = dir.as_deref();
    if command.contains('/') {
        let given = Path::new(command);
        let resolved = match dir {
            Some(dir) if given.is_relative() => dir.join(given),
            _ => absolute(given),
        };
        return if is_executable(&resolved) {
            Ok(resolved)
        } else {
            Err(CommandPathError::BadPath {
                command: command.to_owned(),
                resolved,
            })
        };
    }
    let (path, searched) = match (env_path, inherited_path) {
        (Some(path), _) => {
            let entries = std::env::split_paths(path).count();
            (Some(path.to_os_string()), SearchedPath::Env { entries })
        }
        (None, Some(path)) => (
            Some(path.to_os_string()),
            SearchedPath::Inherited(path.to_string_lossy().into_owned()),
        ),
        (None, None) => (None, SearchedPath::Unset),
    };
    let found = path.as_deref().and_then(|path| search(command, path, dir));
    found.ok_or_else(|| CommandPathError::NotFound {
        command: command.to_owned(),
        searched,
    })
}

fn search(command: &str, path: &OsStr, dir: Option<&Path>) -> Option<PathBuf> {
    std::env::split_paths(path)
        // An empty entry means "the current directory" in POSIX; a relative
        // one is relative to the child's working directory, i.e. DIR.
        .map(|entry| {
            let entry = if entry.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                entry
            };
            match dir {
                Some(dir) if entry.is_relative() => dir.join(entry),
                _ => absolute(&entry),
            }
        })
        .map(|entry| entry.join(command))
        .find(|candidate| is_executable(candidate))
}

/// `dir` made absolute, once it is known to be an existing directory.
fn checked_dir(dir: &Path) -> Result<PathBuf, CommandPathError> {
    let problem = match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(absolute(dir)),
        Ok(_) => DirProblem::NotADirectory,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => DirProblem::Missing,
        Err(error) => DirProblem::Unreadable(error),
    };
    Err(CommandPathError::BadDir {
        dir: dir.to_path_buf(),
        problem,
    })
}

/// `path` against the client's working directory, which is also where the
/// child starts (before it changes into DIR). If the working directory is
/// gone, the path stays relative, which is all the child could do with it.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The inherited PATH of this process.
pub(crate) fn inherited_path() -> Option<OsString> {
    std::env::var_os("PATH")
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    fn executable(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[test]
    fn bare_command_is_found_in_env_path_before_the_inherited_one() {
        let venv = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let wanted = executable(venv.path(), "uvx");
        executable(other.path(), "uvx");
        let got = resolve(
            "uvx",
            None,
            Some(venv.path().as_os_str()),
            Some(other.path().as_os_str()),
        );
        assert_eq!(got.unwrap(), wanted);
    }

    #[test]
    fn bare_command_uses_the_inherited_path_without_env_path() {
        let bin = tempfile::tempdir().unwrap();
        let wanted = executable(bin.path(), "server");
        let got = resolve("server", None, None, Some(bin.path().as_os_str()));
        assert_eq!(got.unwrap(), wanted);
    }

    #[test]
    fn env_path_that_lacks_the_command_is_not_rescued_by_the_inherited_one() {
        let empty = tempfile::tempdir().unwrap();
        let bin = tempfile::tempdir().unwrap();
        executable(bin.path(), "server");
        let err = resolve(
            "server",
            None,
            Some(empty.path().as_os_str()),
            Some(bin.path().as_os_str()),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("the PATH set in the server's ENV (1 entry; value not shown)"),
            "{text}"
        );
        assert!(
            !text.contains(&*empty.path().to_string_lossy()),
            "ENV values are not printed: {text}"
        );
        assert!(text.contains("absolute COMMAND"), "{text}");
    }

    #[test]
    fn not_found_in_the_inherited_path_names_it() {
        let empty = tempfile::tempdir().unwrap();
        let err = resolve("nope", None, None, Some(empty.path().as_os_str())).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("command `nope` not found in the inherited PATH ("),
            "{text}"
        );
        assert!(text.contains(&*empty.path().to_string_lossy()), "{text}");
    }

    #[test]
    fn relative_command_and_relative_path_entries_resolve_against_dir() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        let wanted = executable(&dir.path().join("bin"), "server");
        assert_eq!(
            resolve("./bin/server", Some(dir.path()), None, None).unwrap(),
            dir.path().join("./bin/server")
        );
        assert_eq!(
            resolve("server", Some(dir.path()), Some(OsStr::new("bin")), None).unwrap(),
            wanted
        );
    }

    #[test]
    fn a_path_command_that_is_missing_or_not_executable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("data"), "x").unwrap();
        let missing = resolve("./missing", Some(dir.path()), None, None).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("does not exist or is not an executable"),
            "{missing}"
        );
        assert!(resolve("./data", Some(dir.path()), None, None).is_err());
        assert!(matches!(
            resolve("", None, None, None),
            Err(CommandPathError::Empty)
        ));
    }

    #[test]
    fn the_result_is_absolute_whatever_dir_and_path_entries_were() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("bin")).unwrap();
        executable(&dir.path().join("bin"), "server");
        // `dir` relative to this process's working directory, as a config may write it.
        let cwd = std::env::current_dir().unwrap();
        let up: PathBuf = cwd.components().skip(1).map(|_| "..").collect();
        let relative_dir = up.join(dir.path().strip_prefix("/").unwrap());
        for (command, env_path) in [("./bin/server", None), ("server", Some("bin"))] {
            let got =
                resolve(command, Some(&relative_dir), env_path.map(OsStr::new), None).unwrap();
            assert!(got.is_absolute(), "{}", got.display());
            assert!(is_executable(&got), "{}", got.display());
        }
        let got = resolve("./bin/server", None, None, None);
        assert!(got.is_err(), "no DIR: relative to the working directory");
    }

    #[test]
    fn a_dir_that_is_missing_or_a_file_is_an_error_naming_dir() {
        let dir = tempfile::tempdir().unwrap();
        let file = executable(dir.path(), "server");
        let missing = dir.path().join("missing");
        for (bad, problem) in [(&missing, "does not exist"), (&file, "is not a directory")] {
            let err = resolve("/bin/sh", Some(bad), None, None).unwrap_err();
            assert!(matches!(err, CommandPathError::BadDir { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("DIR {} {problem}", bad.display())),
                "{text}"
            );
        }
    }

    #[test]
    fn directories_are_not_commands() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("server")).unwrap();
        assert!(resolve("server", None, Some(dir.path().as_os_str()), None).is_err());
    }
}
