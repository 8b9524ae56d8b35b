//! Redaction of secrets in free text: error messages that quote another crate's error, and every
//! log line, whichever crate wrote it.
//!
//! Two kinds of secret are found. The credentials this process has sent are known by value
//! ([`remember_secret`]): a server, or a gateway in front of it, that quotes the `Authorization`
//! header in a 401 body or a JSON-RPC error puts them in the text, and every occurrence is
//! replaced by `[REDACTED]` ([`redact`]).
//!
//! A URL carries credentials in its user-info (`https://user:pass@host`), its query
//! (`?token=...`) and its fragment (`#access_token=...`). Replacing the configured URL string
//! where it appears is not enough: reqwest prints the URL as it *parsed* it, with the host
//! lowercased, `..` segments resolved and characters percent-encoded, and rmcp logs reqwest's
//! errors at ERROR. So every URL in a text is found by its `scheme://` and taken apart, and its
//! user-info, query and fragment are replaced by `[REDACTED]`, whatever else the text says.
//!
//! [`RedactingWriter`] applies this to everything a `tracing` subscriber writes; the command-line
//! tools and the scenario runner install their subscribers through it.

use std::borrow::Cow;
use std::io::{self, Write};
use std::sync::RwLock;

const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are not looked for: replacing every `pw` or `abc` in every log line
/// would garble the logs and hide nothing that guessing would not find.
const MIN_SECRET_LEN: usize = 4;

/// Every credential this process has sent, longest first (so that `user:password` is replaced
/// whole before `password` is). Process-wide because the log writer, which a host installs
/// before any config is read, must know them too; it only grows, by distinct values.
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers `secret` (a credential about to be sent) so that [`redact`] replaces it wherever
/// it appears, as written and as JSON would escape it.
#[cfg_attr(
    not(feature = "http"),
    expect(dead_code, reason = "only HTTP servers are sent credentials")
)]
pub(crate) fn remember_secret(secret: &str) {
    let escaped = serde_json::to_string(secret).unwrap_or_default();
    let escaped = escaped
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or(secret);
    let mut secrets = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    for form in [secret, escaped] {
        if form.len() >= MIN_SECRET_LEN && !secrets.iter().any(|known| known == form) {
            secrets.push(form.to_owned());
        }
    }
    secrets.sort_by_key(|known| std::cmp::Reverse(known.len()));
}

/// `text` with every remembered secret replaced by `[REDACTED]`, then every URL redacted
/// ([`redact_urls`]): what every message that quotes another party's words goes through.
pub(crate) fn redact(text: &str) -> Cow<'_, str> {
    let secrets = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    let mut replaced: Option<String> = None;
    for secret in secrets.iter() {
        let current = replaced.as_deref().unwrap_or(text);
        if current.contains(secret.as_str()) {
            replaced = Some(current.replace(secret.as_str(), REDACTED));
        }
    }
    drop(secrets);
    match replaced {
        Some(owned) => Cow::Owned(redact_urls(&owned).into_owned()),
        None => redact_urls(text),
    }
}

/// `text` with the user-info, query and fragment of every `scheme://` URL in it replaced by
/// `[REDACTED]`. Scheme, host, port and path are kept, so the message still says where.
///
/// A URL ends at whitespace, a control character, or one of `"`, `<`, `>` and `` ` ``: the
/// characters that a parsed URL never contains unencoded and that texts use to delimit one.
/// Anything else after `?` or `#` (a closing `)`, a `,`) is taken as part of the URL and
/// redacted with it: losing some punctuation is better than showing part of a secret.
pub(crate) fn redact_urls(text: &str) -> Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let separator = from + found;
        let after = separator + 3;
        from = after;
        if scheme_start(text, separator).is_none() {
            continue;
        }
        let end = text[after..]
            .find(ends_url)
            .map_or(text.len(), |len| after + len);
        out.push_str(&text[copied..after]);
        redact_after_scheme(&text[after..end], &mut out);
        copied = end;
        from = end;
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// Where the scheme ending at `separator` (the index of `://`) starts, if there is one:
/// `ALPHA *(ALPHA / DIGIT / "+" / "-" / ".")`, as RFC 3986 defines it.
fn scheme_start(text: &str, separator: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut start = separator;
    while start > 0
        && (bytes[start - 1].is_ascii_alphanumeric() || b"+-.".contains(&bytes[start - 1]))
    {
        start -= 1;
    }
    // `1http://` still holds the scheme `http`.
    while start < separator && !bytes[start].is_ascii_alphabetic() {
        start += 1;
    }
    (start < separator).then_some(start)
}

fn ends_url(c: char) -> bool {
    c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>' | '`')
}

/// Appends `rest` (a URL after its `scheme://`) with user-info, query and fragment redacted.
fn redact_after_scheme(rest: &str, out: &mut String) {
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            out.push_str(REDACTED);
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let after_authority = &rest[authority_end..];
    let path_end = after_authority
        .find(['?', '#'])
        .unwrap_or(after_authority.len());
    out.push_str(&after_authority[..path_end]);
    let tail = &after_authority[path_end..];
    if tail.starts_with('?') {
        out.push('?');
        out.push_str(REDACTED);
    }
    if tail.contains('#') {
        out.push('#');
        out.push_str(REDACTED);
    }
}

/// An [`io::Write`] that passes complete lines to `inner` with every credential this process has
/// sent, and the user-info, query and fragment of every `scheme://` URL, replaced by
/// `[REDACTED]`.
///
/// Part of the API because rmcp logs reqwest's errors, URL and all, at ERROR, and a server's
/// unexpected answer (a 401 body quoting the `Authorization` header) too: a host that installs a `tracing`
/// subscriber should write through one of these.
///
/// Text is held back until its line ends (or the writer is flushed or dropped), so a URL written
/// in two pieces is still seen whole. `tracing-subscriber`'s fmt layer writes each event in one
/// call to a writer it makes for that event, so with
/// `.with_writer(|| RedactingWriter::new(std::io::stderr()))` every log line is redacted, at
/// every level and from every crate.
pub struct RedactingWriter<W: Write> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: Write> RedactingWriter<W> {
    /// A writer that redacts into `inner`.
    ///
    /// ```
    /// use std::io::Write;
    /// let mut out = Vec::new();
    /// {
    ///     let mut writer = mcp_stdio_client::RedactingWriter::new(&mut out);
    ///     writeln!(writer, "failed: http://user:pw@host/mcp?token=sk-1").unwrap();
    /// }
    /// assert_eq!(out, b"failed: http://[REDACTED]@host/mcp?[REDACTED]\n");
    /// ```
    pub fn new(inner: W) -> Self {
        RedactingWriter {
            inner,
            pending: Vec::new(),
        }
    }

    fn write_redacted(&mut self, upto: usize) -> io::Result<()> {
        let chunk: Vec<u8> = self.pending.drain(..upto).collect();
        let text = String::from_utf8_lossy(&chunk);
        self.inner.write_all(redact(&text).as_bytes())
    }
}

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if let Some(last_newline) = self.pending.iter().rposition(|&b| b == b'\n') {
            self.write_redacted(last_newline + 1)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            self.write_redacted(self.pending.len())?;
        }
        self.inner.flush()
    }
}

impl<W: Write> Drop for RedactingWriter<W> {
    fn drop(&mut self) {
        // A log line must not be lost because its writer was dropped before a newline.
        let _ = self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(text: &str) -> String {
        redact_urls(text).into_owned()
    }

    #[test]
    fn redacts_user_info_query_and_fragment_of_every_url() {
        assert_eq!(
            redacted("error sending request for url (http://localhost:9/mcp?token=sk-1&x=y%20z#f)"),
            "error sending request for url (http://localhost:9/mcp?[REDACTED]#[REDACTED]"
        );
        assert_eq!(
            redacted(r#"reqwest::Error { url: "https://u:pw@h.invalid/a?t=1", source: x }"#),
            r#"reqwest::Error { url: "https://[REDACTED]@h.invalid/a?[REDACTED]", source: x }"#
        );
        assert_eq!(
            redacted("a http://h/x#tok and wss://u@h2:8/ and http://h3/p, done"),
            "a http://h/x#[REDACTED] and wss://[REDACTED]@h2:8/ and http://h3/p, done"
        );
        assert_eq!(
            redacted("<https://a:b@c@host/?q>"),
            "<https://[REDACTED]@host/?[REDACTED]>"
        );
    }

    #[test]
    fn whatever_the_url_was_normalized_to() {
        // Configured as `http://alice:pw@LOCALHOST:9/a/../mcp?token=sk-1`; printed by reqwest as
        // it parsed it.
        assert_eq!(
            redacted("(http://localhost:9/mcp?token=sk-1)"),
            "(http://localhost:9/mcp?[REDACTED]"
        );
        assert_eq!(
            redacted("HTTPS://Alice:pw@EXAMPLE.invalid/é?é=é"),
            "HTTPS://[REDACTED]@EXAMPLE.invalid/é?[REDACTED]"
        );
    }

    #[test]
    fn text_without_urls_is_left_alone() {
        for text in [
            "",
            "no url",
            "a :// b",
            "://x?y",
            "ratio 1:// 2",
            "time 10:30 ok?",
        ] {
            assert!(matches!(redact_urls(text), Cow::Borrowed(_)), "{text}");
        }
        assert_eq!(redacted("1http://h/?q"), "1http://h/?[REDACTED]");
    }

    #[test]
    fn remembered_secrets_are_replaced_longest_first_and_short_ones_ignored() {
        remember_secret("pw-unit-7c1");
        remember_secret("alice:pw-unit-7c1");
        remember_secret("a\"q-unit-secret");
        remember_secret("abc");
        assert_eq!(
            redact("401: alice:pw-unit-7c1 then pw-unit-7c1 at http://h/?t=pw-unit-7c1 abc"),
            "401: [REDACTED] then [REDACTED] at http://h/?[REDACTED] abc"
        );
        assert_eq!(
            redact(r#"{"error":"bad token a\"q-unit-secret"}"#),
            r#"{"error":"bad token [REDACTED]"}"#
        );
        assert!(matches!(redact("nothing secret"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_writer_redacts_whole_lines_even_when_written_in_pieces() {
        let mut out = Vec::new();
        {
            let mut writer = RedactingWriter::new(&mut out);
            writer.write_all(b"ERROR x: url http://h/?tok").unwrap();
            writer.write_all(b"en=sk-1 more\nnext http://u:p").unwrap();
            writer.write_all(b"w@h/ end").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "ERROR x: url http://h/?[REDACTED] more\nnext http://[REDACTED]@h/ end"
        );
    }
}
