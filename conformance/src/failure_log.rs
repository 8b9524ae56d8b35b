//! What a failed scenario shows of the client's log: not the whole capture
//! (a DEBUG log of one scenario ran to 8,643 lines), but the records that
//! tell what went wrong, the last [`EXCERPT_LINES`] of them, with the full
//! log written to a file whose path is printed beside them.
//!
//! The records that matter are those at WARN and above, and the client's
//! lifecycle events (`mcp_stdio_client::events`: spawned, start-up complete,
//! each close phase, closed, exits and restarts) — of the servers the failed
//! checks name, when they name some. Everything else (rmcp's traffic at
//! DEBUG, forwarded stderr lines) is in the file.

use std::path::{Path, PathBuf};

/// The most log lines a failure shows.
pub const EXCERPT_LINES: usize = 40;
/// A longer line is cut (rmcp logs whole structures on one line).
const LINE_CHARS: usize = 300;
/// The target of the client's lifecycle events.
const EVENTS: &str = "mcp_stdio_client::events: ";

/// The records of a log that matter, at most `max` lines of them.
#[derive(Debug, PartialEq, Eq)]
pub struct Excerpt {
    /// The selected lines, in log order, each cut to a readable length.
    pub lines: Vec<String>,
    /// Lines of selected records left out to keep to `max` (the earliest).
    pub omitted: usize,
    /// Lines in the whole log.
    pub total: usize,
}

impl std::fmt::Display for Excerpt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.omitted > 0 {
            writeln!(
                f,
                "[{} earlier lines of WARN and lifecycle records left out]",
                self.omitted
            )?;
        }
        if self.lines.is_empty() {
            writeln!(f, "[no WARN, ERROR or lifecycle record]")?;
        }
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// The records of `log` (as the capture writes it: `LEVEL target: message`,
/// a record's further lines unprefixed) that matter for a failure whose
/// failed checks read `failures`: WARN and above, and lifecycle events —
/// only of the servers `failures` names, when it names any server of the
/// log. The last `max` lines of them.
pub fn select(log: &str, failures: &str, max: usize) -> Excerpt {
    let records = records(log);
    let servers: Vec<&str> = {
        let mut all: Vec<&str> = records
            .iter()
            .filter_map(|r| server_of(r[0]))
            .filter(|server| !server.is_empty())
            .collect();
        all.sort_unstable();
        all.dedup();
        all.into_iter()
            .filter(|server| names(failures, server))
            .collect()
    };
    let matters = |record: &[&str]| {
        let head = record[0];
        match level(head) {
            Some("WARN" | "ERROR") => true,
            Some(_) if head.contains(EVENTS) => {
                servers.is_empty() || server_of(head).is_some_and(|s| servers.contains(&s))
            }
            _ => false,
        }
    };
    let selected: Vec<&str> = records
        .iter()
        .filter(|record| matters(record))
        .flat_map(|record| record.iter().copied())
        .collect();
    let omitted = selected.len().saturating_sub(max);
    Excerpt {
        lines: selected[omitted..].iter().map(|line| cut(line)).collect(),
        omitted,
        total: log.lines().count(),
    }
}

/// Writes the whole `log` of scenario `name` to `<dir>/<name>.log` (`/` as
/// `__`), replacing an earlier run's, and returns the path.
pub fn write_full(dir: &Path, name: &str, log: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}.log", name.replace('/', "__")));
    std::fs::write(&path, log)?;
    Ok(path)
}

/// The failure report's log part: the excerpt, and where the full log is
/// (or why it could not be written).
pub fn report(dir: &Path, name: &str, log: &str, failures: &str) -> String {
    let excerpt = select(log, failures, EXCERPT_LINES);
    let full = match write_full(dir, name, log) {
        Ok(path) => format!("full log, {} lines: {}", excerpt.total, path.display()),
        Err(error) => format!(
            "the full log could not be written to {}: {error}",
            dir.display()
        ),
    };
    format!("{excerpt}{full}\n")
}

/// The log's records: a line that starts with a level, and the lines after
/// it that do not.
fn records(log: &str) -> Vec<Vec<&str>> {
    let mut records: Vec<Vec<&str>> = Vec::new();
    for line in log.lines() {
        match records.last_mut() {
            Some(record) if level(line).is_none() => record.push(line),
            _ => records.push(vec![line]),
        }
    }
    records
}

/// The level a record's first line starts with (right-aligned to 5).
fn level(line: &str) -> Option<&str> {
    let word = line.trim_start().split(' ').next()?;
    ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
        .contains(&word)
        .then_some(word)
}

/// The server a record is about: its `server="x"` or `server=x` field.
fn server_of(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once(" server=")?;
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next(),
        None => rest.split(' ').next(),
    }
}

/// Whether `text` names `server` as a word (`server "x"`, `x:`, `mcp_x_`
/// do; `xy` does not).
fn names(text: &str, server: &str) -> bool {
    text.match_indices(server).any(|(at, _)| {
        let word = |c: char| c.is_alphanumeric() || c == '-';
        let before = text[..at].chars().next_back().is_none_or(|c| !word(c));
        let after = text[at + server.len()..]
            .chars()
            .next()
            .is_none_or(|c| !word(c));
        before && after
    })
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{} [...]", &line[..at]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log shaped like a real one: thousands of DEBUG lines of traffic
    /// around a few lifecycle events and warnings of two servers.
    fn log() -> String {
        let mut log = String::new();
        for server in ["alpha", "beta"] {
            log.push_str(&format!(
                " INFO mcp_stdio_client::events: spawned stdio server server=\"{server}\" pid=1 pgid=1\n"
            ));
        }
        for n in 0..5000 {
            log.push_str(&format!(
                "DEBUG serve_inner: rmcp::service: new event evt=PeerMessage({n})\n"
            ));
            log.push_str(&format!(
                " INFO mcp_stdio_client::transport: stderr server=alpha line=noise {n}\n"
            ));
        }
        log.push_str(" WARN mcp_stdio_client::stdio: the server wrote a line that is not JSON-RPC server=\"beta\"\n  line two of the warning\n");
        for server in ["alpha", "beta"] {
            log.push_str(&format!(
                "DEBUG mcp_stdio_client::events: close phase server=\"{server}\" phase=eof\n"
            ));
            log.push_str(&format!(
                "DEBUG mcp_stdio_client::events: close phase server=\"{server}\" phase=sigterm\n"
            ));
        }
        log.push_str("ERROR mcp_stdio_client::session: a server failed server=\"alpha\"\n");
        log
    }

    #[test]
    fn keeps_warnings_and_lifecycle_events_of_the_failing_server() {
        let log = log();
        let excerpt = select(&log, "steps[3].path: beta: close ended by sigkill", 40);
        assert_eq!(excerpt.total, 10_009);
        assert_eq!(
            excerpt.lines,
            [
                " INFO mcp_stdio_client::events: spawned stdio server server=\"beta\" pid=1 pgid=1",
                " WARN mcp_stdio_client::stdio: the server wrote a line that is not JSON-RPC server=\"beta\"",
                "  line two of the warning",
                "DEBUG mcp_stdio_client::events: close phase server=\"beta\" phase=eof",
                "DEBUG mcp_stdio_client::events: close phase server=\"beta\" phase=sigterm",
                "ERROR mcp_stdio_client::session: a server failed server=\"alpha\"",
            ]
        );
        assert_eq!(excerpt.omitted, 0);
    }

    #[test]
    fn without_a_server_named_every_servers_events_count() {
        let log = log();
        let excerpt = select(&log, "zombies: 1, expected 0", 40);
        assert_eq!(excerpt.lines.len(), 9, "{excerpt}");
        assert!(excerpt.lines[0].contains("server=\"alpha\""));
    }

    #[test]
    fn only_the_last_lines_are_kept() {
        let log = log();
        let excerpt = select(&log, "zombies: 1, expected 0", 3);
        assert_eq!(excerpt.omitted, 6);
        assert_eq!(excerpt.lines.len(), 3);
        assert!(excerpt.lines[2].starts_with("ERROR"), "{excerpt}");
        assert!(excerpt.to_string().starts_with("[6 earlier lines"));
    }

    #[test]
    fn server_names_are_matched_as_words() {
        assert!(names("steps[2]: server \"db\" ended", "db"));
        assert!(names("db: closed", "db"));
        assert!(!names("the dbx server", "db"));
        assert!(!names("a-db", "db"));
        assert_eq!(server_of("x server=\"a b\" y"), Some("a b"));
        assert_eq!(server_of("x server=a line=b"), Some("a"));
        assert_eq!(server_of("x line=b"), None);
    }

    #[test]
    fn long_lines_are_cut_and_the_full_log_is_written() {
        let long = format!(" WARN x: {}\n", "y".repeat(1000));
        let excerpt = select(&long, "", 40);
        assert!(excerpt.lines[0].ends_with(" [...]"));
        assert!(excerpt.lines[0].len() < 400);

        let dir = tempfile::tempdir().unwrap();
        let report = report(dir.path(), "group/name", &long, "");
        let path = dir.path().join("group__name.log");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), long);
        assert!(
            report.ends_with(&format!("full log, 1 lines: {}\n", path.display())),
            "{report}"
        );
    }
}
