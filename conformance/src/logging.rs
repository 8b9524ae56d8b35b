//! The log on stderr of the command-line tools: one subscriber, set up by [`install`] the same
//! way in every mode, redacted ([`mcp_stdio_client::RedactingWriter`]) and coloured only where
//! colour can be seen.

use std::{ffi::OsStr, io::IsTerminal};

/// Installs the stderr log at WARN, or DEBUG with `verbose` 1, TRACE with 2 or more. A no-op
/// when a subscriber is installed already.
pub fn install(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    let colour = colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("CLICOLOR_FORCE").as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_ansi(colour)
        .with_writer(|| mcp_stdio_client::RedactingWriter::new(std::io::stderr()))
        .try_init();
}

/// Whether to colour a stream, by the common conventions: `NO_COLOR` set to anything non-empty
/// turns colour off (<https://no-color.org>), whatever else says; `CLICOLOR_FORCE` set to
/// anything but empty or `0` turns it on even when the stream is not a terminal; otherwise
/// colour goes only to a terminal, never to a file or a pipe, where escapes are noise.
pub fn colour(is_terminal: bool, no_color: Option<&OsStr>, clicolor_force: Option<&OsStr>) -> bool {
    let set = |value: Option<&OsStr>| value.is_some_and(|value| !value.is_empty());
    if set(no_color) {
        return false;
    }
    if set(clicolor_force) && clicolor_force != Some(OsStr::new("0")) {
        return true;
    }
    is_terminal
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_follows_the_terminal_unless_an_environment_variable_decides() {
        let os = |text: &'static str| Some(OsStr::new(text));
        // (terminal, NO_COLOR, CLICOLOR_FORCE) -> colour
        let cases = [
            (true, None, None, true),
            (false, None, None, false),
            (true, os("1"), None, false),
            (true, os(""), None, true),
            (false, None, os("1"), true),
            (false, None, os("yes"), true),
            (false, None, os("0"), false),
            (false, None, os(""), false),
            (true, None, os("0"), true),
            (false, os("1"), os("1"), false),
            (false, os(""), os("1"), true),
        ];
        for (terminal, no_color, force, expected) in cases {
            assert_eq!(
                colour(terminal, no_color, force),
                expected,
                "terminal {terminal}, NO_COLOR {no_color:?}, CLICOLOR_FORCE {force:?}"
            );
        }
    }
}
