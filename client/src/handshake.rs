//! How start-up picks an era.
//!
//! On stdio a client that speaks both eras probes with `server/discover` and falls
//! back to `initialize` when the answer is an error that is not a modern one,
//! or when no answer comes within a bound. rmcp's own `Auto` mode does this
//! with a fixed 10 s probe; this module runs rmcp's `Discover` under the
//! client's own probe bound, then rmcp's `Initialize` on the same pipes.
//!
//! The pipes outlive a failed attempt: rmcp consumes the transport it is
//! given, so each attempt gets a [`Lease`] that hands the real transport back
//! when rmcp drops it (after an error, or when the probe's future is dropped
//! at the bound).

use std::{
    io,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::{
    RoleClient,
    model::{ClientConfig, ClientJsonRpcMessage, ErrorCode, ProtocolVersion, ServerJsonRpcMessage},
    service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RunningService},
    transport::Transport,
};

use crate::{
    era::{Era, EraSetting, Fallback},
    transport::ChildTransport,
};

/// The protocol versions offered in the modern era, most preferred first.
pub(crate) fn modern_versions() -> Vec<ProtocolVersion> {
    vec![ProtocolVersion::V_2026_07_28]
}

/// The version offered in `initialize`.
pub(crate) fn legacy_version() -> ProtocolVersion {
    ProtocolVersion::LATEST_WITH_INITIALIZE
}

/// How start-up went, beside the running service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Started {
    pub era: Era,
    /// Why `auto` fell back to `initialize`, if it did.
    pub fell_back: Option<Fallback>,
}

/// Start-up failed. `probe` holds the probe's failure when the fallback
/// failed too.
#[derive(Debug)]
pub(crate) struct StartError {
    pub error: ClientInitializeError,
    pub probe: Option<Fallback>,
    /// The protocol version the failed attempt offered.
    pub offered: Option<String>,
}

impl StartError {
    /// True when the server answered, but not acceptably (an error, a wrong
    /// result, no common version), as opposed to the connection ending.
    pub fn is_protocol_refusal(&self) -> bool {
        matches!(
            self.error,
            ClientInitializeError::JsonRpcError(_)
                | ClientInitializeError::NoCompatibleProtocolVersion { .. }
                | ClientInitializeError::ExpectedInitResult(_)
                | ClientInitializeError::ExpectedInitResponse(_)
                | ClientInitializeError::ConflictInitResponseId(..)
        )
    }
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            ClientInitializeError::NoCompatibleProtocolVersion {
                client_supported,
                server_supported,
            } => write!(
                f,
                "no protocol version in common: the client speaks {}, the server {}",
                list(client_supported),
                list(server_supported)
            )?,
            // A legacy `initialize` refused for its version: say both sides.
            ClientInitializeError::JsonRpcError(error)
                if error.code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION =>
            {
                let supported = error
                    .data
                    .as_ref()
                    .and_then(|data| data.get("supported"))
                    .and_then(|value| {
                        serde_json::from_value::<Vec<ProtocolVersion>>(value.clone()).ok()
                    })
                    .unwrap_or_default();
                write!(
                    f,
                    "the server refused protocol version {} (error {}: {}); it supports {}",
                    self.offered.as_deref().unwrap_or("?"),
                    error.code.0,
                    error.message,
                    list(&supported)
                )?
            }
            error => write!(f, "{error}")?,
        }
        match &self.probe {
            Some(Fallback::Error { code, message }) => write!(
                f,
                " (after server/discover was refused with error {code}: {message})"
            )?,
            Some(Fallback::Silent { waited_ms }) => write!(
                f,
                " (after server/discover went unanswered for {waited_ms} ms)"
            )?,
            None => {}
        }
        // What to do about a pinned era the server does not speak.
        if self.probe.is_none() && self.is_protocol_refusal() {
            match self.offered.as_deref() {
                Some(v) if v == legacy_version().as_str() => write!(
                    f,
                    "; if the server speaks only the modern era, set ERA: auto or modern"
                )?,
                Some(_) => write!(
                    f,
                    "; if the server speaks only the legacy era, set ERA: auto or legacy"
                )?,
                None => {}
            }
        }
        Ok(())
    }
}

fn list(versions: &[ProtocolVersion]) -> String {
    if versions.is_empty() {
        return "no version it named".to_owned();
    }
    versions
        .iter()
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the child transport waits between start-up attempts. The caller
/// keeps it until a failed start has been cleaned up: dropping the transport
/// would close the child's stdin, and a failed start kills before any EOF.
pub(crate) type TransportSlot = Arc<Mutex<Option<ChildTransport>>>;

/// A slot holding `transport`.
pub(crate) fn slot(transport: ChildTransport) -> TransportSlot {
    Arc::new(Mutex::new(Some(transport)))
}

/// Runs start-up on the transport in `slot` in the era `setting` asks for.
/// `probe` bounds the `server/discover` probe of `auto`; the caller bounds
/// the whole.
pub(crate) async fn start(
    slot: TransportSlot,
    setting: EraSetting,
    probe: Duration,
    identity: ClientConfig,
) -> Result<(RunningService<RoleClient, ClientConfig>, Started), StartError> {
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: modern_versions(),
    };
    match setting {
        EraSetting::Legacy => legacy(&slot, identity, false, None).await,
        EraSetting::Modern => {
            let lease = Lease::take(&slot, false);
            match identity.serve_with_lifecycle(lease, modern).await {
                Ok(running) => Ok((
                    running,
                    Started {
                        era: Era::Modern,
                        fell_back: None,
                    },
                )),
                Err(error) => Err(StartError {
                    error,
                    probe: None,
                    offered: Some(modern_versions()[0].to_string()),
                }),
            }
        }
        EraSetting::Auto => {
            let started = Instant::now();
            let lease = Lease::take(&slot, false);
            let attempt = identity.clone().serve_with_lifecycle(lease, modern);
            let fallback = match tokio::time::timeout(probe, attempt).await {
                Ok(Ok(running)) => {
                    return Ok((
                        running,
                        Started {
                            era: Era::Modern,
                            fell_back: None,
                        },
                    ));
                }
                Ok(Err(ClientInitializeError::JsonRpcError(error)))
                    if !is_modern_rejection(error.code) =>
                {
                    Fallback::Error {
                        code: error.code.0,
                        message: error.message.to_string(),
                    }
                }
                Ok(Err(error)) => {
                    return Err(StartError {
                        error,
                        probe: None,
                        offered: Some(modern_versions()[0].to_string()),
                    });
                }
                Err(_) => Fallback::Silent {
                    waited_ms: started.elapsed().as_millis() as u64,
                },
            };
            let late_answer_possible = matches!(fallback, Fallback::Silent { .. });
            legacy(&slot, identity, late_answer_possible, Some(fallback)).await
        }
    }
}

async fn legacy(
    slot: &Arc<Mutex<Option<ChildTransport>>>,
    mut identity: ClientConfig,
    drop_late_discover: bool,
    fell_back: Option<Fallback>,
) -> Result<(RunningService<RoleClient, ClientConfig>, Started), StartError> {
    identity.protocol_version = legacy_version();
    let lease = Lease::take(slot, drop_late_discover);
    match identity
        .serve_with_lifecycle(lease, ClientLifecycleMode::Initialize)
        .await
    {
        Ok(running) => Ok((
            running,
            Started {
                era: Era::Legacy,
                fell_back,
            },
        )),
        Err(error) => Err(StartError {
            error,
            probe: fell_back,
            offered: Some(legacy_version().to_string()),
        }),
    }
}

/// The JSON-RPC errors a modern server may answer `server/discover` with
/// without being legacy (rmcp keeps the same list privately). Version
/// negotiation (-32022) is handled inside rmcp's discover.
fn is_modern_rejection(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY | ErrorCode::HEADER_MISMATCH
    )
}

/// The child transport, lent to one start-up attempt and handed back when
/// that attempt drops it.
struct Lease {
    slot: Arc<Mutex<Option<ChildTransport>>>,
    inner: Option<ChildTransport>,
    /// After a probe that went unanswered, a slow server may still answer it;
    /// that late `server/discover` result must not be taken for the answer to
    /// `initialize` (both attempts number their first request alike).
    drop_late_discover: bool,
}

impl Lease {
    fn take(slot: &Arc<Mutex<Option<ChildTransport>>>, drop_late_discover: bool) -> Lease {
        let inner = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        Lease {
            slot: slot.clone(),
            inner,
            drop_late_discover,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(inner);
        }
    }
}

impl Transport<RoleClient> for Lease {
    type Error = io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sent = match self.inner.as_mut() {
            Some(inner) => Ok(inner.send(item)),
            None => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the server's stdin is no longer available",
            )),
        };
        async move { sent?.await }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.as_mut()?.receive().await?;
            if self.drop_late_discover && is_discover_result(&message) {
                continue;
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        match self.inner.as_mut() {
            Some(inner) => inner.close().await,
            None => Ok(()),
        }
    }
}

fn is_discover_result(message: &ServerJsonRpcMessage) -> bool {
    matches!(
        message,
        ServerJsonRpcMessage::Response(response)
            if matches!(response.result, rmcp::model::ServerResult::DiscoverResult(_))
    )
}
