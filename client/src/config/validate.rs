//! The validation rules of the contract (section 1), applied to one entry in their numbered
//! order so that the most specific message wins:
//! 1. the name matches `^[a-z0-9-]{1,24}$`;
//! 2. exactly one of COMMAND and URL;
//! 3. ARGS, DIR, ENV, EOF_GRACE and TERM_GRACE only with COMMAND;
//! 4. no AUTH `bearer`/`basic` with COMMAND (before 5, so a stdio entry never hears about TOKEN);
//! 5. AUTH `bearer` needs TOKEN, `basic` needs USERNAME and TOKEN;
//! 6. durations parse and are positive.
//!
//! Nothing here expands `${VAR}`: the rules judge the entry as written, so the outcome does not
//! depend on the environment (see `resolve` for what is checked after expansion).

use std::time::Duration;

use super::error::{ConfigError, Locus, Violation};
use super::model::{AuthMode, DEFAULT_EOF_GRACE, DEFAULT_TERM_GRACE, DEFAULT_TIMEOUT};
use super::parse_duration;
use super::raw::{Dialect, RawServer};
use crate::era::{DEFAULT_PROBE_TIMEOUT, DEFAULT_RESTART_BACKOFF, EraSetting, RestartPolicy};

/// An entry that passed the rules, with defaults applied and not yet expanded.
pub(super) struct Checked {
    pub name: String,
    pub timeout: Duration,
    pub requires_consent: Option<bool>,
    pub transport: CheckedTransport,
}

pub(super) enum CheckedTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        dir: Option<String>,
        /// In document order, so that messages can name a key by its position.
        env: Vec<(String, String)>,
        eof_grace: Duration,
        term_grace: Duration,
        era: EraSetting,
        probe_timeout: Duration,
        restart: RestartPolicy,
    },
    Http {
        url: String,
        auth: AuthMode,
        token: Option<String>,
        username: Option<String>,
    },
}

/// Whether `name` matches `^[a-z0-9-]{1,24}$` (checked by hand; there is no regex dependency).
pub(super) fn name_is_valid(name: &str) -> bool {
    (1..=24).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Rule 1 alone, for the parser to run before it reads the entry.
pub(super) fn check_name(name: &str, source_name: &str) -> Result<(), ConfigError> {
    if name_is_valid(name) {
        Ok(())
    } else {
        Err(invalid(source_name, name, Violation::BadName))
    }
}

fn invalid(source_name: &str, server: &str, violation: Violation) -> ConfigError {
    ConfigError::Invalid {
        locus: Locus::server(source_name, server),
        violation,
    }
}

fn blank(value: &str) -> bool {
    value.trim().is_empty()
}

/// Applies rules 1–6 to `raw` in order.
pub(super) fn check(raw: RawServer, source_name: &str) -> Result<Checked, ConfigError> {
    let name = raw.name.as_str();
    let fail = |violation| invalid(source_name, name, violation);

    // Rule 1.
    check_name(name, source_name)?;

    // Rule 2. A present-but-empty COMMAND or URL still counts as set, so that "both" wins over
    // "empty": the entry is ambiguous before it is incomplete.
    let stdio = match (&raw.command, &raw.url) {
        (Some(_), Some(_)) => return Err(fail(Violation::CommandAndUrl)),
        (None, None) => return Err(fail(Violation::NoCommandOrUrl)),
        (Some(command), None) if blank(command) => {
            return Err(fail(Violation::Empty { field: "COMMAND" }));
        }
        (None, Some(url)) if blank(url) => return Err(fail(Violation::Empty { field: "URL" })),
        (Some(_), None) => true,
        (None, Some(_)) => false,
    };

    // Rule 3.
    if !stdio {
        let stdio_only = [
            ("ARGS", raw.args.is_some()),
            ("DIR", raw.dir.is_some()),
            ("ENV", raw.env.is_some()),
            ("EOF_GRACE", raw.eof_grace.is_some()),
            ("TERM_GRACE", raw.term_grace.is_some()),
            ("ERA", raw.era.is_some()),
            ("PROBE_TIMEOUT", raw.probe_timeout.is_some()),
            ("RESTART", raw.restart.is_some()),
            ("RESTART_BACKOFF", raw.restart_backoff.is_some()),
        ];
        if let Some((field, _)) = stdio_only.into_iter().find(|(_, present)| *present) {
            return Err(fail(Violation::StdioOnly { field }));
        }
    } else if raw.dir.as_deref().is_some_and(blank) {
        return Err(fail(Violation::Empty { field: "DIR" }));
    }

    // Rule 4.
    let auth = parse_auth(raw.auth.as_deref()).ok_or_else(|| fail(Violation::UnknownAuth))?;
    if stdio && matches!(auth, AuthMode::Bearer | AuthMode::Basic) {
        return Err(fail(Violation::CredentialsOnStdio));
    }

    // Rule 5.
    if !stdio {
        let needed: &[&'static str] = match auth {
            AuthMode::Bearer => &["TOKEN"],
            AuthMode::Basic => &["USERNAME", "TOKEN"],
            AuthMode::Auto | AuthMode::Gh | AuthMode::None => &[],
        };
        for &field in needed {
            let value = if field == "TOKEN" {
                &raw.token
            } else {
                &raw.username
            };
            if value.as_deref().is_none_or(blank) {
                return Err(fail(Violation::MissingCredential { field, auth }));
            }
        }
    }

    // Rule 6.
    let dialect = raw.dialect.unwrap_or(Dialect::Yaml);
    let duration = |field: &'static str, text: &Option<String>, default: Duration| match text {
        None => Ok(default),
        Some(text) => {
            parse_config_duration(text, dialect).map_err(|source| ConfigError::Duration {
                locus: Locus::server(source_name, name),
                field,
                source,
            })
        }
    };
    let timeout = duration("TIMEOUT", &raw.timeout, DEFAULT_TIMEOUT)?;
    let eof_grace = duration("EOF_GRACE", &raw.eof_grace, DEFAULT_EOF_GRACE)?;
    let term_grace = duration("TERM_GRACE", &raw.term_grace, DEFAULT_TERM_GRACE)?;
    let probe_timeout = duration("PROBE_TIMEOUT", &raw.probe_timeout, DEFAULT_PROBE_TIMEOUT)?;
    let restart = RestartPolicy {
        attempts: match raw.restart.as_deref().map(str::trim) {
            None | Some("") => 0,
            Some(text) => text
                .parse::<u32>()
                .ok()
                .filter(|n| *n <= 100)
                .ok_or_else(|| fail(Violation::BadRestart))?,
        },
        backoff: duration(
            "RESTART_BACKOFF",
            &raw.restart_backoff,
            DEFAULT_RESTART_BACKOFF,
        )?,
    };
    // Empty or absent means `auto`; case does not matter.
    let era = match raw.era.as_deref().map(str::trim) {
        None | Some("") => EraSetting::Auto,
        Some(text) => EraSetting::parse(text).ok_or_else(|| fail(Violation::UnknownEra))?,
    };

    warn_about_ignored_fields(&raw, stdio, auth);

    let transport = if stdio {
        CheckedTransport::Stdio {
            command: raw.command.unwrap_or_default(),
            args: raw.args.unwrap_or_default(),
            dir: raw.dir,
            env: raw.env.unwrap_or_default(),
            eof_grace,
            term_grace,
            era,
            probe_timeout,
            restart,
        }
    } else {
        // Credentials the mode does not use are dropped here, so that they are never expanded
        // (an unset ${VAR} in them is no error) and never reach the HTTP client.
        let uses_token = matches!(auth, AuthMode::Auto | AuthMode::Bearer | AuthMode::Basic);
        let uses_username = matches!(auth, AuthMode::Auto | AuthMode::Basic);
        CheckedTransport::Http {
            url: raw.url.unwrap_or_default(),
            auth,
            token: raw.token.filter(|_| uses_token),
            username: raw.username.filter(|_| uses_username),
        }
    };
    Ok(Checked {
        name: raw.name,
        timeout,
        requires_consent: raw.requires_consent,
        transport,
    })
}

/// AUTH as written: empty or absent means `auto`; case does not matter.
fn parse_auth(text: Option<&str>) -> Option<AuthMode> {
    let text = text.unwrap_or_default().trim();
    Some(match text.to_ascii_lowercase().as_str() {
        "" | "auto" => AuthMode::Auto,
        "gh" => AuthMode::Gh,
        "bearer" => AuthMode::Bearer,
        "basic" => AuthMode::Basic,
        "none" => AuthMode::None,
        _ => return None,
    })
}

/// A config duration. In the desktop format a bare whole number means seconds, as the hosts
/// that have a `timeout` key write it; the YAML format always wants a unit.
fn parse_config_duration(text: &str, dialect: Dialect) -> Result<Duration, super::DurationError> {
    let text = text.trim();
    if dialect == Dialect::Desktop && !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return parse_duration(&format!("{text}s"));
    }
    parse_duration(text)
}

/// Logs fields that are accepted but have no effect, by name only.
fn warn_about_ignored_fields(raw: &RawServer, stdio: bool, auth: AuthMode) {
    let server = raw.name.as_str();
    let present = |value: &Option<String>| value.as_deref().is_some_and(|v| !blank(v));
    if stdio {
        // Tolerated by the contract: stdio servers transmit no credentials, so these are inert.
        for (field, value) in [("TOKEN", &raw.token), ("USERNAME", &raw.username)] {
            if present(value) {
                tracing::warn!(
                    server,
                    field,
                    "ignoring field: stdio (COMMAND) servers transmit no credentials"
                );
            }
        }
        if matches!(auth, AuthMode::Gh | AuthMode::None) {
            tracing::debug!(server, %auth, "AUTH has no effect on a stdio server");
        }
    } else {
        if present(&raw.token) && matches!(auth, AuthMode::Gh | AuthMode::None) {
            tracing::warn!(server, field = "TOKEN", %auth, "ignoring field: unused with this AUTH");
        }
        if present(&raw.username) && !matches!(auth, AuthMode::Auto | AuthMode::Basic) {
            tracing::warn!(
                server,
                field = "USERNAME",
                %auth,
                "ignoring field: unused with this AUTH"
            );
        }
        if raw.username.as_deref().is_some_and(|u| u.contains("${")) {
            tracing::warn!(
                server,
                field = "USERNAME",
                "USERNAME is not expanded; its ${{...}} is kept as written"
            );
        }
    }
    if let Some(kind) = raw.kind.as_deref() {
        check_desktop_type(server, kind, stdio);
    }
}

/// The desktop `type` key duplicates what command/url already say; it is checked, not obeyed.
fn check_desktop_type(server: &str, kind: &str, stdio: bool) {
    match (kind, stdio) {
        ("stdio", true) | ("http" | "streamable-http" | "streamableHttp", false) => {}
        ("sse", false) => tracing::warn!(
            server,
            "type sse (the legacy HTTP+SSE transport) is not supported; the URL will be used \
             with Streamable HTTP"
        ),
        _ => tracing::warn!(
            server,
            "ignoring type: it does not match the entry (stdio with command, http with url)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_by_hand_like_the_regex() {
        for good in ["fs", "a", "0", "-", "my-server-2", &"a".repeat(24)] {
            assert!(name_is_valid(good), "{good}");
        }
        for bad in [
            "",
            "Fs",
            "FS",
            "my_server",
            "my server",
            "my.server",
            "é",
            &"a".repeat(25),
            "fs\n",
        ] {
            assert!(!name_is_valid(bad), "{bad:?}");
        }
    }

    #[test]
    fn auth_is_case_insensitive_and_empty_means_auto() {
        assert_eq!(parse_auth(None), Some(AuthMode::Auto));
        assert_eq!(parse_auth(Some("")), Some(AuthMode::Auto));
        assert_eq!(parse_auth(Some("Bearer")), Some(AuthMode::Bearer));
        assert_eq!(parse_auth(Some("BASIC")), Some(AuthMode::Basic));
        assert_eq!(parse_auth(Some("gh")), Some(AuthMode::Gh));
        assert_eq!(parse_auth(Some("none")), Some(AuthMode::None));
        assert_eq!(parse_auth(Some("oauth")), None);
    }

    #[test]
    fn bare_numbers_are_seconds_only_in_the_desktop_format() {
        assert_eq!(
            parse_config_duration("60", Dialect::Desktop),
            Ok(Duration::from_secs(60))
        );
        assert_eq!(
            parse_config_duration("250ms", Dialect::Desktop),
            Ok(Duration::from_millis(250))
        );
        assert_eq!(
            parse_config_duration("0", Dialect::Desktop),
            Err(super::super::DurationError::Zero)
        );
        assert_eq!(
            parse_config_duration("60", Dialect::Yaml),
            Err(super::super::DurationError::MissingUnit)
        );
    }
}
