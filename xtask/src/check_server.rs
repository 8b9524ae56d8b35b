//! `cargo xtask check-server [OPTIONS] -- <COMMAND> [ARGS]...`: a shortcut for
//! `mcp-conformance server`, built and run from this workspace. The exit code
//! is passed through (0 pass, 1 a required check failed, 2 usage error; see
//! docs/exit-codes.md); 3 when cargo itself cannot be run.

use std::process::ExitCode;

use anyhow::{Context, Result};
use mcp_conformance_report::exit;

pub fn run(args: Vec<String>) -> Result<ExitCode> {
    let mut command = crate::cargo();
    command.args([
        "run",
        "--quiet",
        "--package",
        "mcp-conformance",
        "--bin",
        "mcp-conformance",
        "--",
        "server",
    ]);
    command.args(server_args(args));
    // Run from where the user is, so a relative COMMAND or directory argument
    // means what they typed.
    if let Ok(dir) = std::env::current_dir() {
        command.current_dir(dir);
    }
    let status = command
        .status()
        .context("cannot run `cargo run -p mcp-conformance`")?;
    // Ended by a signal (no code): said as a shell says it, 128 + N.
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        i32::from(exit::SIGNALLED_BASE) + status.signal().unwrap_or(0)
    });
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}

/// The arguments for `mcp-conformance server`: as given, with a `--` put
/// before the server's command when the user left it out.
fn server_args(args: Vec<String>) -> Vec<String> {
    if args.iter().any(|a| a == "--") || args.iter().any(|a| a == "-h" || a == "--help") {
        return args;
    }
    let mut out = Vec::with_capacity(args.len() + 1);
    let mut args = args.into_iter().peekable();
    // Leading options (and the values of those that take one) stay before `--`.
    while let Some(arg) = args.next_if(|a| a.starts_with('-')) {
        let takes_value = !matches!(arg.as_str(), "--json" | "-v" | "--verbose" | "--stable")
            && !arg.contains('=');
        out.push(arg);
        if takes_value && let Some(value) = args.next() {
            out.push(value);
        }
    }
    out.push("--".into());
    out.extend(args);
    out
}

#[cfg(test)]
mod tests {
    use super::server_args;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_missing_double_dash_is_added_before_the_command() {
        assert_eq!(
            server_args(args(&["npx", "-y", "pkg"])),
            args(&["--", "npx", "-y", "pkg"])
        );
        assert_eq!(
            server_args(args(&["--json", "--repeat", "3", "npx", "-y"])),
            args(&["--json", "--repeat", "3", "--", "npx", "-y"])
        );
        assert_eq!(
            server_args(args(&["--json", "--", "npx"])),
            args(&["--json", "--", "npx"])
        );
    }
}
