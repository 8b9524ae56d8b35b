//! The steps of a scenario, each with its own expectation type, so a field
//! that does not apply to a step is a load error at its line.

use std::collections::BTreeMap;

use mcp_stdio_client::ErrorKind;
use serde::Deserialize;

use super::values::{CloseBucket, ClosePath, RequestBucket, SignalName, Span};

/// One step. Steps run in order; each checks its own `expect`.
///
/// Written as a one-key map (`- close: {expect: ...}`), read with
/// yaml_serde's singleton-map support (see [`steps`]).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Spawn the server and complete the handshake (`StdioClient::connect`).
    Connect(ConnectStep),
    /// Start a connect, and drop its future half-way: once the ledger shows
    /// the server got that far (the host gave up, a task was cancelled).
    AbandonConnect(AbandonConnectStep),
    ListTools(ListToolsStep),
    Call(CallStep),
    /// The same `tools/call` from several tasks at once; each answer is
    /// checked against `expect`.
    CallConcurrently(CallConcurrentlyStep),
    /// Send a signal to the child (or its group) from outside the client.
    Kill(KillStep),
    /// Wait (bounded) until the ledger has a matching record.
    WaitLedger(WaitLedgerStep),
    /// Wait (bounded) until the client reports a stdin backlog: replies
    /// queued for a server that stopped reading its stdin.
    StdinBacklog(StdinBacklogStep),
    Close(CloseStep),
    /// Call close from several tasks at once; every outcome must be equal.
    CloseConcurrently(CloseConcurrentlyStep),
    /// Drop the client without closing it.
    Drop(DropStep),
    /// `Session::build` over every server of `config`.
    BuildSession(BuildSessionStep),
    /// `Session::discover_tools`.
    DiscoverTools(DiscoverToolsStep),
    /// `Session::call` by qualified name (`mcp_<server>_<tool>`).
    SessionCall(CallStep),
    /// `Session::close`: every server at once.
    CloseSession(CloseSessionStep),
}

impl Step {
    /// The step's key in a scenario file.
    pub fn key(&self) -> &'static str {
        match self {
            Step::Connect(_) => "connect",
            Step::AbandonConnect(_) => "abandon_connect",
            Step::ListTools(_) => "list_tools",
            Step::Call(_) => "call",
            Step::Kill(_) => "kill",
            Step::WaitLedger(_) => "wait_ledger",
            Step::Close(_) => "close",
            Step::CloseConcurrently(_) => "close_concurrently",
            Step::CallConcurrently(_) => "call_concurrently",
            Step::StdinBacklog(_) => "stdin_backlog",
            Step::Drop(_) => "drop",
            Step::BuildSession(_) => "build_session",
            Step::DiscoverTools(_) => "discover_tools",
            Step::SessionCall(_) => "session_call",
            Step::CloseSession(_) => "close_session",
        }
    }

    /// Whether a driver can take the step (`docs/client-check.md`): connect,
    /// list_tools, call_tool, close and exit (`drop`), plus what the harness
    /// does itself (`kill`, `wait_ledger`).
    pub fn external(&self) -> bool {
        match self {
            Step::Connect(step) => !step.sigterm_blocked && step.options.is_none(),
            Step::ListTools(_)
            | Step::Call(_)
            | Step::Kill(_)
            | Step::WaitLedger(_)
            | Step::Close(_)
            | Step::Drop(_) => true,
            Step::AbandonConnect(_)
            | Step::CloseConcurrently(_)
            | Step::CallConcurrently(_)
            | Step::StdinBacklog(_)
            | Step::BuildSession(_)
            | Step::DiscoverTools(_)
            | Step::SessionCall(_)
            | Step::CloseSession(_) => false,
        }
    }
}

/// `steps:` as a list of one-key maps: each item through
/// `yaml_serde::with::singleton_map`, which reads `connect: {...}` as the
/// variant `Connect` (a plain externally tagged enum would want YAML tags).
pub fn steps<'de, D>(deserializer: D) -> Result<Vec<Step>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Item(#[serde(with = "yaml_serde::with::singleton_map")] Step);
    let items: Vec<Item> = Deserialize::deserialize(deserializer)?;
    Ok(items.into_iter().map(|Item(step)| step).collect())
}

/// What every request-like step (connect, list_tools, call) can expect.
/// Absent fields are not checked, except that a step without `error` must
/// succeed.
pub trait ReplyExpect {
    /// The error kind the step must fail with.
    fn error(&self) -> Option<ErrorKind>;
    fn message_contains(&self) -> &[String];
    fn message_not_contains(&self) -> &[String];
}

macro_rules! reply_expect {
    ($($ty:ty),*) => {$(
        impl ReplyExpect for $ty {
            fn error(&self) -> Option<ErrorKind> {
                self.error
            }
            fn message_contains(&self) -> &[String] {
                &self.message_contains
            }
            fn message_not_contains(&self) -> &[String] {
                &self.message_not_contains
            }
        }
    )*};
}
reply_expect!(ConnectExpect, ListToolsExpect, CallExpect);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectStep {
    /// With `config`: which server to connect (default: the only one).
    pub server: Option<String>,
    /// Connect from a thread that blocks SIGTERM, as a host taking its
    /// signals with `sigwait` does: a blocked mask survives exec, so a
    /// client that does not reset it starts servers deaf to the close
    /// ladder's SIGTERM. The library in process only.
    #[serde(default)]
    pub sigterm_blocked: bool,
    /// Connect through `StdioClient::builder` with these overrides of the
    /// server's configured values; the harness's own expectations (the
    /// close buckets, EOF_GRACE honoured) use the overridden values. The
    /// library in process only.
    pub options: Option<ConnectOptions>,
    #[serde(default)]
    pub expect: ConnectExpect,
}

/// The builder's overrides (`connect: {options: ...}`), spelled as the
/// config spells the same keys.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectOptions {
    pub timeout: Option<Span>,
    pub era: Option<mcp_stdio_client::EraSetting>,
    pub probe_timeout: Option<Span>,
    pub eof_grace: Option<Span>,
    pub term_grace: Option<Span>,
    /// Containment (`ConnectOptions::contain`); the harness turns it on
    /// unless this says `false`.
    pub contain: Option<bool>,
}

impl ConnectOptions {
    /// `server` as the client will run it with these overrides.
    pub fn applied_to(
        &self,
        server: &mcp_stdio_client::config::ServerConfig,
    ) -> mcp_stdio_client::config::ServerConfig {
        let mut server = server.clone();
        if let Some(timeout) = self.timeout {
            server.timeout = timeout.0;
        }
        if let mcp_stdio_client::config::Transport::Stdio(stdio) = &mut server.transport {
            stdio.era = self.era.unwrap_or(stdio.era);
            stdio.probe_timeout = self.probe_timeout.map_or(stdio.probe_timeout, |s| s.0);
            stdio.eof_grace = self.eof_grace.map_or(stdio.eof_grace, |s| s.0);
            stdio.term_grace = self.term_grace.map_or(stdio.term_grace, |s| s.0);
        }
        server
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectExpect {
    pub error: Option<ErrorKind>,
    #[serde(default)]
    pub message_contains: Vec<String>,
    #[serde(default)]
    pub message_not_contains: Vec<String>,
    pub within: Option<RequestBucket>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AbandonConnectStep {
    /// The ledger event (from any process of the scenario) after which the
    /// connect future is dropped; default `request`: the server got the
    /// first handshake request and has not answered it.
    #[serde(default = "default_abandon_event")]
    pub after: String,
}

fn default_abandon_event() -> String {
    "request".to_owned()
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListToolsStep {
    #[serde(default)]
    pub expect: ListToolsExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListToolsExpect {
    pub error: Option<ErrorKind>,
    #[serde(default)]
    pub message_contains: Vec<String>,
    #[serde(default)]
    pub message_not_contains: Vec<String>,
    pub within: Option<RequestBucket>,
    /// How many tools.
    pub count: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallStep {
    pub tool: String,
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub expect: CallExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdinBacklogStep {
    /// Wait until at least this many messages are queued (default 1).
    #[serde(default = "one")]
    pub min_messages: u64,
}

fn one() -> u64 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallConcurrentlyStep {
    /// How many calls at once (2 or more).
    pub count: Concurrency,
    pub tool: String,
    #[serde(default)]
    pub args: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub expect: CallExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallExpect {
    pub error: Option<ErrorKind>,
    #[serde(default)]
    pub message_contains: Vec<String>,
    #[serde(default)]
    pub message_not_contains: Vec<String>,
    pub within: Option<RequestBucket>,
    /// The text of the first content block.
    pub text: Option<String>,
    /// The tool-level error flag.
    pub is_error: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillStep {
    /// Default SIGKILL.
    #[serde(default)]
    pub signal: SignalName,
    /// `child` (default) or `group`.
    #[serde(default)]
    pub target: KillTarget,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    #[default]
    Child,
    Group,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitLedgerStep {
    pub event: String,
    /// The name a process recorded in the ledger (a fixture, or a process a
    /// fixture started, such as `lingering-sidecar`).
    pub fixture: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseStep {
    #[serde(default)]
    pub expect: CloseExpect,
}

/// What a close must produce. Every close also checks, always, that the
/// child was reaped and that nothing but the expected survivors is alive at
/// the moment close returns.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseExpect {
    /// How it ended.
    pub path: Option<ClosePath>,
    /// `exit status 0`, `signal 9 (SIGKILL)`...
    pub status: Option<String>,
    /// Whether the group sweep found stragglers.
    pub group_swept: Option<bool>,
    /// How many live processes containment killed (what the server started
    /// outside its group); checked where the client reports it, and shown
    /// in the snapshot only when asked for.
    pub contained: Option<u32>,
    pub within: Option<CloseBucket>,
    /// What the harness sees at the instant close returns (checked always;
    /// this states an exception).
    #[serde(default)]
    pub at_return: AtReturn,
}

/// The observation taken at the instant a close returns, before anything
/// else: by default the server's process group has no live member and the
/// server process is gone from the process table (reaped, not a zombie).
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AtReturn {
    /// No live process left in the server's process group.
    pub group_empty: bool,
    /// The server process itself is reaped: not even a zombie is left.
    pub reaped: bool,
}

impl Default for AtReturn {
    fn default() -> Self {
        AtReturn {
            group_empty: true,
            reaped: true,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseConcurrentlyStep {
    /// How many closes at once (2 or more).
    pub count: Concurrency,
    #[serde(default)]
    pub expect: CloseExpect,
}

/// How many at once in a `*_concurrently` step: 2 or more, or there is no
/// concurrency.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "usize")]
pub struct Concurrency(pub usize);

impl TryFrom<usize> for Concurrency {
    type Error = String;

    fn try_from(count: usize) -> Result<Self, Self::Error> {
        if count >= 2 {
            Ok(Concurrency(count))
        } else {
            Err(format!(
                "a count of {count}: a concurrent step needs 2 or more"
            ))
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DropStep {}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSessionStep {
    /// The `gh` program for AUTH gh (default: one that does not exist, so a
    /// scenario never depends on the machine's gh).
    pub gh_command: Option<String>,
    #[serde(default)]
    pub expect: BuildSessionExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildSessionExpect {
    /// The servers that started, exactly.
    pub started: Option<Vec<String>>,
    /// The servers that failed, with their error kind, exactly.
    #[serde(default)]
    pub failed: BTreeMap<String, ErrorKind>,
    /// The build took less than this (a bound, e.g. well under the sum of
    /// the servers' handshake delays).
    pub faster_than: Option<Span>,
    /// How many times `gh auth token` ran.
    pub gh_runs: Option<u32>,
    /// No warning was logged while building.
    #[serde(default)]
    pub no_warnings: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverToolsStep {
    #[serde(default)]
    pub expect: DiscoverExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverExpect {
    pub count: Option<usize>,
    /// Qualified names that must be offered.
    #[serde(default)]
    pub contains: Vec<String>,
    /// Flags of named tools.
    #[serde(default)]
    pub flags: BTreeMap<String, ToolFlags>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolFlags {
    pub requires_consent: bool,
    pub serial: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseSessionStep {
    #[serde(default)]
    pub expect: CloseSessionExpect,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseSessionExpect {
    /// How each stdio server's close ended.
    #[serde(default)]
    pub paths: BTreeMap<String, ClosePath>,
    /// The whole close took less than this (concurrent: about the slowest).
    pub faster_than: Option<Span>,
}
