//! The two protocol eras as the server check meets them: how `server/discover`
//! (MCP 2026-07-28, the modern era) and `initialize` (the legacy era) were
//! answered, judged the way a dual-era client judges them.
//!
//! A dual-era client asks `server/discover` first, bounded by its probe
//! timeout, and falls back to `initialize` when the answer is an error or
//! when none comes. The check does the same in its main run, then grades
//! each era on its own (`handshake.discover`, `handshake.legacy`) and runs
//! everything else in the best era the server serves.

use std::time::Duration;

use serde_json::{Value, json};

use super::instance::RequestError;

/// The protocol version the check asks for in the modern era.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The protocol version the check offers in `initialize`.
pub const LEGACY_VERSION: &str = "2025-06-18";

/// MCP's "unsupported protocol version" error, which names the supported
/// versions in `data.supported`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The `_meta` key of the server info in a `server/discover` result.
const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";

/// A protocol era (modern sorts first: the best one).
pub use mcp_stdio_client::Era;

/// The `_meta` every modern request carries: the protocol version, the
/// client's capabilities (none) and its info.
pub fn request_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {
            "name": "mcp-conformance",
            "version": env!("CARGO_PKG_VERSION"),
        },
    })
}

/// The params of `initialize`.
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": LEGACY_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "mcp-conformance", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// How `server/discover` was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Discover {
    /// A correct DiscoverResult, this long after spawn.
    Served {
        after: Duration,
        versions: Vec<String>,
    },
    /// A result that is not a correct DiscoverResult: what is wrong with it.
    Wrong(String),
    /// A JSON-RPC error: what a legacy server says ("method not found").
    Refused {
        code: i64,
        message: String,
        /// `data.supported` of a version refusal.
        supported: Vec<String>,
    },
    /// No answer within the bound, which was this long.
    Silent { waited: Duration },
    /// The server exited, closed its stdout, or could not be written to.
    Failed(RequestError),
}

/// How `initialize` was answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Initialize {
    /// An InitializeResult, this long after spawn, in this protocol version.
    Served { after: Duration, version: String },
    /// A JSON-RPC error.
    Refused {
        code: i64,
        message: String,
        supported: Vec<String>,
    },
    /// No answer, or an answer that is not an InitializeResult.
    Failed(String),
}

impl Discover {
    /// Judges the answer to `server/discover`.
    pub fn judge(
        answer: Result<Value, RequestError>,
        after: Duration,
        bound: Duration,
    ) -> Discover {
        match answer {
            Ok(result) => match check_discover_result(&result) {
                Ok(versions) => Discover::Served { after, versions },
                Err(why) => Discover::Wrong(why),
            },
            Err(RequestError::ErrorAnswer {
                code,
                message,
                data,
            }) => Discover::Refused {
                code,
                message,
                supported: supported(data.as_ref()),
            },
            Err(RequestError::Timeout(_)) => Discover::Silent { waited: bound },
            Err(error) => Discover::Failed(error),
        }
    }

    pub fn served(&self) -> bool {
        matches!(self, Discover::Served { .. })
    }
}

impl Initialize {
    /// Judges the answer to `initialize`.
    pub fn judge(answer: Result<Value, RequestError>, after: Duration) -> Initialize {
        match answer {
            Ok(result) => match result.get("protocolVersion").and_then(Value::as_str) {
                Some(version) => Initialize::Served {
                    after,
                    version: version.to_owned(),
                },
                None => Initialize::Failed(
                    "the answer to initialize is not an InitializeResult (no protocolVersion)"
                        .into(),
                ),
            },
            Err(RequestError::ErrorAnswer {
                code,
                message,
                data,
            }) => Initialize::Refused {
                code,
                message,
                supported: supported(data.as_ref()),
            },
            Err(error) => Initialize::Failed(error.to_string()),
        }
    }

    pub fn served(&self) -> bool {
        matches!(self, Initialize::Served { .. })
    }
}

/// `data.supported` of an error, when it is a list of strings.
fn supported(data: Option<&Value>) -> Vec<String> {
    data.and_then(|d| d.get("supported"))
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a protocol version belongs to the modern era (dates compare as text).
pub fn is_modern_version(version: &str) -> bool {
    version >= MODERN_VERSION
}

/// Checks a `server/discover` result: `supportedVersions` (a list of
/// version strings that includes the one asked for), `capabilities` (an
/// object) and the server info in `_meta`. Returns the versions, or
/// everything that is wrong.
pub fn check_discover_result(result: &Value) -> Result<Vec<String>, String> {
    let mut wrong = Vec::new();
    let mut versions = Vec::new();
    match result.get("supportedVersions").and_then(Value::as_array) {
        None => wrong.push("no supportedVersions list".to_owned()),
        Some(list) => {
            versions = list
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if versions.len() != list.len() || versions.is_empty() {
                wrong.push("supportedVersions is not a non-empty list of version strings".into());
            } else if !versions.iter().any(|v| v == MODERN_VERSION) {
                wrong.push(format!(
                    "supportedVersions [{}] lacks {MODERN_VERSION}, the version asked for",
                    versions.join(", ")
                ));
            }
        }
    }
    if !result.get("capabilities").is_some_and(Value::is_object) {
        wrong.push("no capabilities object".into());
    }
    let info = result
        .get("_meta")
        .and_then(|meta| meta.get(SERVER_INFO_META));
    if !info.is_some_and(|info| info.get("name").is_some_and(Value::is_string)) {
        wrong.push(format!("no server info in _meta[\"{SERVER_INFO_META}\"]"));
    }
    if wrong.is_empty() {
        Ok(versions)
    } else {
        Err(wrong.join("; "))
    }
}

/// "name version" from a DiscoverResult's `_meta` or an InitializeResult's
/// `serverInfo`.
pub fn server_name(era: Era, result: &Value) -> Option<String> {
    let info = match era {
        Era::Modern => result.get("_meta")?.get(SERVER_INFO_META)?,
        Era::Legacy => result.get("serverInfo")?,
    };
    let name = info.get("name")?.as_str()?;
    Some(match info.get("version").and_then(Value::as_str) {
        Some(version) => format!("{name} {version}"),
        None => name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_discover_result_needs_versions_capabilities_and_server_info() {
        let good = json!({
            "supportedVersions": ["2025-06-18", MODERN_VERSION],
            "capabilities": {"tools": {}},
            "_meta": {SERVER_INFO_META: {"name": "s", "version": "1"}},
        });
        assert_eq!(check_discover_result(&good).unwrap().len(), 2);
        assert_eq!(server_name(Era::Modern, &good).as_deref(), Some("s 1"));
        let why = check_discover_result(&json!({"capabilities": 1})).unwrap_err();
        assert!(
            why.contains("no supportedVersions")
                && why.contains("no capabilities")
                && why.contains("no server info"),
            "{why}"
        );
        let old = json!({"supportedVersions": ["2025-06-18"], "capabilities": {},
                         "_meta": {SERVER_INFO_META: {"name": "s"}}});
        assert!(
            check_discover_result(&old)
                .unwrap_err()
                .contains("lacks 2026-07-28")
        );
    }

    #[test]
    fn modern_versions_are_those_from_2026_07_28_on() {
        assert!(is_modern_version("2026-07-28"));
        assert!(is_modern_version("2027-01-01"));
        assert!(!is_modern_version("2025-06-18"));
    }
}
