//! The typed values of a scenario file: each is checked as it is read, so a
//! bad one is a load error at its own line (a fixture that does not exist, a
//! duration or signal that does not parse, an unknown close path or bucket).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A fixture, by binary name with or without `fixture-`; always held as the
/// full binary name (`fixture-well-behaved`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Fixture(String);

impl Fixture {
    /// The binary name (`fixture-well-behaved`).
    pub fn binary(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Fixture {
    type Error = String;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        let binary = super::fixture_binary(&name);
        if mcp_fixtures::locate::FIXTURES.contains(&binary.as_str()) {
            Ok(Fixture(binary))
        } else {
            Err(format!(
                "no fixture named `{name}`; the fixtures are: {}",
                mcp_fixtures::locate::FIXTURES.join(", ")
            ))
        }
    }
}

/// A duration written as the config writes one (`300ms`, `2s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct Span(pub Duration);

impl TryFrom<String> for Span {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        mcp_stdio_client::config::parse_duration(&text)
            .map(Span)
            .map_err(|error| format!("`{text}`: {error}"))
    }
}

impl std::fmt::Display for Span {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&mcp_stdio_client::config::format_duration(self.0))
    }
}

/// A signal by name (`SIGKILL`, `TERM`) or number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct SignalName(pub nix::sys::signal::Signal);

impl TryFrom<String> for SignalName {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        mcp_fixtures::cli::parse_signal(&text).map(SignalName)
    }
}

impl Default for SignalName {
    fn default() -> Self {
        SignalName(nix::sys::signal::Signal::SIGKILL)
    }
}

/// How a close ended: the client's own `mcp_stdio_client::ClosePath`, one
/// home for the four paths. An external client's close path is inferred from
/// the ledger in the same terms; a scenario file names them in the same
/// snake_case words.
pub use mcp_stdio_client::ClosePath;

/// The time bucket of a request-like step (connect, list_tools, call):
/// what a timing assertion means, robust to a loaded machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestBucket {
    /// Under `min(250 ms, TIMEOUT / 2)`: "at once".
    Fast,
    /// Under TIMEOUT (but not fast).
    BeforeTimeout,
    /// At least TIMEOUT, under TIMEOUT + 2 s.
    AtTimeout,
    /// TIMEOUT + 2 s or more.
    Late,
}

impl RequestBucket {
    /// The bucket of a connect that took `elapsed` under `timeout`, the
    /// server having been up (its ledger's `started`) for `since_started`
    /// of it. "At once" is a claim about the protocol exchange (no wait on a
    /// probe bound or a timeout), so `fast` is judged from the server's
    /// start: how long a loaded machine takes to exec a program and load its
    /// runtime is not the client's doing. Every other bucket counts the
    /// whole connect, as the client's TIMEOUT does.
    pub fn of_connect(
        elapsed: Duration,
        since_started: Option<Duration>,
        timeout: Duration,
    ) -> Self {
        let at_once = Duration::from_millis(250).min(timeout / 2);
        if since_started.is_some_and(|since| since < at_once) && elapsed < timeout {
            RequestBucket::Fast
        } else {
            Self::of(elapsed, timeout)
        }
    }

    /// Whether an external client's step that took `elapsed` meets this
    /// expected bucket as the contract means it: `before_timeout` is "under
    /// TIMEOUT" (`fast` too), `at_timeout` is TIMEOUT, then at most
    /// `ladder` (the close ladder the client declared, with slack) before
    /// the error returns; the others are exact.
    pub fn admits_external(self, elapsed: Duration, timeout: Duration, ladder: Duration) -> bool {
        match self {
            RequestBucket::BeforeTimeout => elapsed < timeout,
            RequestBucket::AtTimeout => elapsed >= timeout && elapsed < timeout + ladder,
            other => Self::of(elapsed, timeout) == other,
        }
    }

    /// The bucket of a request-like step that took `elapsed` under `timeout`.
    pub fn of(elapsed: Duration, timeout: Duration) -> Self {
        if elapsed < Duration::from_millis(250).min(timeout / 2) {
            RequestBucket::Fast
        } else if elapsed < timeout {
            RequestBucket::BeforeTimeout
        } else if elapsed < timeout + Duration::from_secs(2) {
            RequestBucket::AtTimeout
        } else {
            RequestBucket::Late
        }
    }
}

/// The time bucket of a close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
#[expect(
    clippy::enum_variant_names,
    reason = "the names are the scenario files' values (`before_eof_grace`)"
)]
pub enum CloseBucket {
    /// Under EOF_GRACE.
    BeforeEofGrace,
    /// At least EOF_GRACE, under EOF_GRACE + TERM_GRACE.
    WithinTermGrace,
    /// At least EOF_GRACE + TERM_GRACE.
    AfterTermGrace,
}

impl CloseBucket {
    /// The bucket of a close that took `elapsed`.
    pub fn of(elapsed: Duration, eof_grace: Duration, term_grace: Duration) -> Self {
        if elapsed < eof_grace {
            CloseBucket::BeforeEofGrace
        } else if elapsed < eof_grace + term_grace {
            CloseBucket::WithinTermGrace
        } else {
            CloseBucket::AfterTermGrace
        }
    }
}

/// How much longer than its graces an external client's close may take,
/// seen from the harness, and still be in a bucket: the client notices the
/// server's exit, reaps it and answers through its driver, on a loaded
/// machine, in an interpreter. Under the smallest grace a client declares in
/// practice (500 ms and up), so a client that takes four times what it
/// declared is still told so.
pub const CLOSE_SLACK: Duration = Duration::from_millis(750);

impl CloseBucket {
    /// Whether a close that took `elapsed`, seen from outside the client,
    /// is consistent with this bucket under graces `eof_grace` and
    /// `term_grace`, with `slack` past each upper edge. The lower edges
    /// take no slack: a round trip seen from outside is never shorter than
    /// the wait inside it.
    pub fn admits(
        self,
        elapsed: Duration,
        eof_grace: Duration,
        term_grace: Duration,
        slack: Duration,
    ) -> bool {
        match self {
            CloseBucket::BeforeEofGrace => elapsed < eof_grace + slack,
            CloseBucket::WithinTermGrace => {
                elapsed >= eof_grace && elapsed < eof_grace + term_grace + slack
            }
            CloseBucket::AfterTermGrace => elapsed >= eof_grace + term_grace,
        }
    }
}

/// Either kind of bucket, as the outcome shows it (a plain name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Bucket {
    Request(RequestBucket),
    Close(CloseBucket),
}

impl std::fmt::Display for Bucket {
    /// The name a scenario writes (`within_term_grace`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match serde_json::to_value(self) {
            Ok(serde_json::Value::String(name)) => f.write_str(&name),
            _ => write!(f, "{self:?}"),
        }
    }
}

impl From<RequestBucket> for Bucket {
    fn from(bucket: RequestBucket) -> Self {
        Bucket::Request(bucket)
    }
}

impl From<CloseBucket> for Bucket {
    fn from(bucket: CloseBucket) -> Self {
        Bucket::Close(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_robust_boundaries() {
        let ms = Duration::from_millis;
        assert_eq!(RequestBucket::of(ms(10), ms(300)), RequestBucket::Fast);
        // An external client: `before_timeout` is under TIMEOUT, `fast`
        // too; `at_timeout` stretches over the close ladder it declared.
        let ladder = ms(4750);
        assert!(RequestBucket::BeforeTimeout.admits_external(ms(10), ms(5000), ladder));
        assert!(!RequestBucket::BeforeTimeout.admits_external(ms(5000), ms(5000), ladder));
        assert!(RequestBucket::AtTimeout.admits_external(ms(2600), ms(300), ladder));
        assert!(!RequestBucket::AtTimeout.admits_external(ms(5100), ms(300), ladder));
        assert!(!RequestBucket::AtTimeout.admits_external(ms(200), ms(300), ladder));
        assert!(!RequestBucket::Fast.admits_external(ms(600), ms(5000), ladder));
        // A connect is `fast` when the server answered at once after its
        // start, however long the start itself took; never past TIMEOUT.
        let of_connect = RequestBucket::of_connect;
        assert_eq!(
            of_connect(ms(900), Some(ms(40)), ms(5000)),
            RequestBucket::Fast
        );
        assert_eq!(
            of_connect(ms(900), Some(ms(400)), ms(5000)),
            RequestBucket::BeforeTimeout
        );
        assert_eq!(
            of_connect(ms(900), None, ms(5000)),
            RequestBucket::BeforeTimeout
        );
        assert_eq!(of_connect(ms(40), None, ms(5000)), RequestBucket::Fast);
        assert_eq!(
            of_connect(ms(400), Some(ms(10)), ms(300)),
            RequestBucket::AtTimeout
        );
        assert_eq!(
            RequestBucket::of(ms(200), ms(300)),
            RequestBucket::BeforeTimeout
        );
        assert_eq!(
            RequestBucket::of(ms(300), ms(300)),
            RequestBucket::AtTimeout
        );
        assert_eq!(RequestBucket::of(ms(2400), ms(300)), RequestBucket::Late);
        assert_eq!(
            CloseBucket::of(ms(5), ms(200), ms(200)),
            CloseBucket::BeforeEofGrace
        );
        assert_eq!(
            CloseBucket::of(ms(250), ms(200), ms(200)),
            CloseBucket::WithinTermGrace
        );
        assert_eq!(
            CloseBucket::of(ms(400), ms(200), ms(200)),
            CloseBucket::AfterTermGrace
        );
        // Seen from outside a client, with slack past the upper edges only.
        let slack = ms(100);
        assert!(CloseBucket::BeforeEofGrace.admits(ms(250), ms(200), ms(200), slack));
        assert!(!CloseBucket::BeforeEofGrace.admits(ms(300), ms(200), ms(200), slack));
        assert!(!CloseBucket::WithinTermGrace.admits(ms(199), ms(200), ms(200), slack));
        assert!(CloseBucket::WithinTermGrace.admits(ms(450), ms(200), ms(200), slack));
        assert!(!CloseBucket::WithinTermGrace.admits(ms(500), ms(200), ms(200), slack));
        assert!(!CloseBucket::AfterTermGrace.admits(ms(399), ms(200), ms(200), slack));
    }

    #[test]
    fn an_outcome_shows_a_bucket_by_its_name() {
        let text = yaml_serde::to_string(&[
            Bucket::Request(RequestBucket::Fast),
            Bucket::Close(CloseBucket::WithinTermGrace),
        ])
        .unwrap();
        assert_eq!(text, "- fast\n- within_term_grace\n");
    }
}
