//! Printing the config without its secrets: the `Debug` impls of the config types, the config
//! dump (`Display` for [`Config`]) and the scrubbing of parser messages.
//!
//! TOKEN, USERNAME, every ARGS element and every ENV value are replaced wholesale: a redactor
//! that looks for secret-looking keys cannot see a positional secret such as
//! `ARGS: ["-p", "sk-1234"]`. ENV keys are not secret, but they are hidden with the values
//! (`[REDACTED; N]`) so the output says nothing about what a server is given. The URL keeps its
//! scheme, host and path; its user-info, query and fragment, where URLs carry credentials, are
//! replaced too.

use std::fmt;

use super::{Config, HttpConfig, ServerConfig, StdioConfig, Transport, format_duration, url};

/// Stands in for `N` hidden values: `[REDACTED; N]`, or `[]` when there is nothing to hide.
struct Hidden(usize);

impl fmt::Debug for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Hidden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("[]"),
            n => write!(f, "[REDACTED; {n}]"),
        }
    }
}

/// Stands in for one hidden optional value: `Some([REDACTED])` or `None`.
struct HiddenOption(bool);

impl fmt::Debug for HiddenOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 { "Some([REDACTED])" } else { "None" })
    }
}

impl fmt::Debug for StdioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StdioConfig")
            .field("command", &self.command)
            .field("args", &Hidden(self.args.len()))
            .field("dir", &self.dir)
            .field("env", &Hidden(self.env.len()))
            .field("eof_grace", &self.eof_grace)
            .field("term_grace", &self.term_grace)
            .field("era", &self.era)
            .field("probe_timeout", &self.probe_timeout)
            .field("restart", &self.restart)
            .finish()
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("url", &url::redact(&self.url))
            .field("auth", &self.auth)
            .field("token", &HiddenOption(self.token.is_some()))
            .field("username", &HiddenOption(self.username.is_some()))
            .finish()
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("timeout", &self.timeout)
            .field("requires_consent", &self.requires_consent)
            .field("serial", &self.serial)
            .finish()
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("servers", &self.servers)
            .finish()
    }
}

/// The config dump: the effective configuration (defaults applied, variables expanded, flags
/// derived) in the YAML format, with secrets redacted. Strings are JSON-quoted, which YAML reads
/// as double-quoted scalars. `serial` is derived, not a field, so it is shown as a comment.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.servers.is_empty() {
            return writeln!(f, "MCP_SERVERS: {{}}");
        }
        writeln!(f, "MCP_SERVERS:")?;
        for (name, server) in &self.servers {
            let key = if super::validate::name_is_valid(name) {
                name.clone()
            } else {
                quote(name)
            };
            writeln!(f, "  {key}:")?;
            match &server.transport {
                Transport::Stdio(stdio) => {
                    writeln!(f, "    COMMAND: {}", quote(&stdio.command))?;
                    writeln!(f, "    ARGS: {}", Hidden(stdio.args.len()))?;
                    if let Some(dir) = &stdio.dir {
                        writeln!(f, "    DIR: {}", quote(&dir.to_string_lossy()))?;
                    }
                    let env = match stdio.env.len() {
                        0 => "{}".to_owned(),
                        n => Hidden(n).to_string(),
                    };
                    writeln!(f, "    ENV: {env}")?;
                    writeln!(f, "    TIMEOUT: {}", format_duration(server.timeout))?;
                    writeln!(f, "    EOF_GRACE: {}", format_duration(stdio.eof_grace))?;
                    writeln!(f, "    TERM_GRACE: {}", format_duration(stdio.term_grace))?;
                    writeln!(f, "    ERA: {}", stdio.era)?;
                    writeln!(
                        f,
                        "    PROBE_TIMEOUT: {}",
                        format_duration(stdio.probe_timeout)
                    )?;
                    if stdio.restart.attempts > 0 {
                        writeln!(f, "    RESTART: {}", stdio.restart.attempts)?;
                        writeln!(
                            f,
                            "    RESTART_BACKOFF: {}",
                            format_duration(stdio.restart.backoff)
                        )?;
                    }
                }
                Transport::Http(http) => {
                    writeln!(f, "    URL: {}", quote(&url::redact(&http.url)))?;
                    writeln!(f, "    AUTH: {}", http.auth)?;
                    if http.token.is_some() {
                        writeln!(f, "    TOKEN: [REDACTED]")?;
                    }
                    if http.username.is_some() {
                        writeln!(f, "    USERNAME: [REDACTED]")?;
                    }
                    writeln!(f, "    TIMEOUT: {}", format_duration(server.timeout))?;
                }
            }
            writeln!(f, "    REQUIRES_CONSENT: {}", server.requires_consent)?;
            writeln!(f, "    # serial: {}", server.serial)?;
        }
        Ok(())
    }
}

fn quote(text: &str) -> String {
    // Serializing a str cannot fail; the fallback only keeps this total.
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

/// Replaces every `"..."` and `` `...` `` in a parser message by `"…"` / `` `…` ``.
///
/// Parser messages quote values from the document in exactly these two ways (serde's
/// `string "..."`, ``integer `...` ``); key paths and the parser's own words are not quoted, so
/// the message keeps its meaning and loses only the values.
pub(super) fn scrub_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                let mut escaped = false;
                for inner in chars.by_ref() {
                    match inner {
                        _ if escaped => escaped = false,
                        '\\' => escaped = true,
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"…\"");
            }
            '`' => {
                for inner in chars.by_ref() {
                    if inner == '`' {
                        break;
                    }
                }
                out.push_str("`…`");
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_quoted_values_from_parser_messages() {
        assert_eq!(
            scrub_quoted(
                r#"a.b: invalid value: string "sk-live \"x\" 1", expected null at line 1"#
            ),
            r#"a.b: invalid value: string "…", expected null at line 1"#
        );
        assert_eq!(
            scrub_quoted("invalid type: integer `1234`, expected a string"),
            "invalid type: integer `…`, expected a string"
        );
        assert_eq!(scrub_quoted("unterminated \"sk-live"), "unterminated \"…\"");
        assert_eq!(
            scrub_quoted("did not find expected ',' or ']' at line 2 column 2"),
            "did not find expected ',' or ']' at line 2 column 2"
        );
    }

    #[test]
    fn hidden_shows_only_a_count() {
        assert_eq!(Hidden(3).to_string(), "[REDACTED; 3]");
        assert_eq!(format!("{:?}", Hidden(0)), "[]");
    }
}
