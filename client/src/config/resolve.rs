//! Turns a validated entry into a [`ServerConfig`]: expands `${VAR}` in COMMAND, ARGS, DIR, ENV
//! values, URL and TOKEN, checks what only the expanded values can show, and derives the
//! effective consent and serial flags.

use std::path::PathBuf;

use super::error::{ConfigError, Locus, Violation};
use super::expand::{ExpandError, expand};
use super::model::{AuthMode, HttpConfig, ServerConfig, StdioConfig, Transport};
use super::raw::env_field;
use super::url;
use super::validate::{Checked, CheckedTransport};

/// Resolves `checked`, looking variables up in `env`.
pub(super) fn resolve(
    checked: Checked,
    source_name: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, ConfigError> {
    let name = checked.name.as_str();
    let locus = || Locus::server(source_name, name);
    let expand_field = |field: String, text: &str| {
        expand(text, env).map_err(|source: ExpandError| ConfigError::Expand {
            locus: locus(),
            field,
            source,
        })
    };
    let fail = |violation| ConfigError::Invalid {
        locus: locus(),
        violation,
    };
    let required = |field: &'static str, value: String| {
        if value.trim().is_empty() {
            Err(fail(Violation::EmptyAfterExpansion { field }))
        } else {
            Ok(value)
        }
    };

    let (transport, readonly) = match checked.transport {
        CheckedTransport::Stdio {
            command,
            args,
            dir,
            env: vars,
            eof_grace,
            term_grace,
            era,
            probe_timeout,
            restart,
        } => {
            let command = required("COMMAND", expand_field("COMMAND".into(), &command)?)?;
            let args = args
                .iter()
                .enumerate()
                .map(|(index, arg)| expand_field(format!("ARGS[{index}]"), arg))
                .collect::<Result<_, _>>()?;
            let dir = match dir {
                Some(dir) => Some(PathBuf::from(required(
                    "DIR",
                    expand_field("DIR".into(), &dir)?,
                )?)),
                None => None,
            };
            let vars = vars
                .into_iter()
                .enumerate()
                .map(|(index, (key, value))| {
                    // A key that is not a variable name may be a mistyped secret, so the
                    // message names its position instead.
                    let field = env_field(&key, index + 1);
                    Ok((key, expand_field(field, &value)?))
                })
                .collect::<Result<_, ConfigError>>()?;
            let stdio = StdioConfig {
                command,
                args,
                dir,
                env: vars,
                eof_grace,
                term_grace,
                era,
                probe_timeout,
                restart,
            };
            (Transport::Stdio(stdio), false)
        }
        CheckedTransport::Http {
            url: raw_url,
            auth,
            token,
            username,
        } => {
            let url_text = required("URL", expand_field("URL".into(), &raw_url)?)?;
            if !url::is_http(&url_text) {
                return Err(fail(Violation::NotHttpUrl));
            }
            let token = match token {
                Some(token) => Some(expand_field("TOKEN".into(), &token)?),
                None => None,
            };
            let token = match auth {
                // Rule 5 checked the TOKEN as written; `${VAR}` may still have come out empty,
                // and an empty credential would go out as a broken Authorization header.
                AuthMode::Bearer | AuthMode::Basic => {
                    Some(required("TOKEN", token.unwrap_or_default())?)
                }
                _ => token.filter(|token| !token.trim().is_empty()),
            };
            // reqwest sends the URL's user-info as `Authorization: Basic`; a mode that sends a
            // header of its own would add a second. auto sends one only with a TOKEN (without
            // one, the user-info is the credential and `gh` is not asked: see credentials.rs).
            let sends_header = match auth {
                AuthMode::Bearer | AuthMode::Basic | AuthMode::Gh => true,
                AuthMode::Auto => token.is_some(),
                AuthMode::None => false,
            };
            if sends_header && url::has_user_info(&url_text) {
                return Err(fail(Violation::UserInfoWithAuth { auth }));
            }
            let readonly = url::is_readonly(&url_text);
            let http = HttpConfig {
                url: url_text,
                auth,
                token,
                username,
            };
            (Transport::Http(http), readonly)
        }
    };

    // stdio: consent unless overridden, always serial. HTTP: `/readonly` endpoints are
    // consent-free and parallel, others are neither; REQUIRES_CONSENT overrides consent for HTTP
    // too, but nothing overrides serial, which protects the server rather than the user.
    let requires_consent = checked.requires_consent.unwrap_or(!readonly);
    Ok(ServerConfig {
        name: checked.name.clone(),
        transport,
        timeout: checked.timeout,
        requires_consent,
        serial: !readonly,
    })
}
