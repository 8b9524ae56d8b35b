//! The driver (`docs/client-check.md`) for rmcp's own stdio client:
//! `TokioChildProcess` + `().serve(transport)`, written the way rmcp's
//! documentation shows it, so `mcp-conformance client -- mcp-conformance
//! driver rmcp` grades rmcp itself, not this project's client.
//!
//! rmcp has no grace settings: `eof_grace_ms` and `term_grace_ms` are
//! ignored. Its close (`graceful_shutdown`) is fixed: close stdin, wait 3 s,
//! SIGTERM, wait 3 s, SIGKILL, to the direct child only. Its handshake has
//! no bound of its own, so `connect` wraps it in `tokio::time::timeout`, as
//! a host would; a call's bound is rmcp's own per-request timeout.

use std::{io::Write, process::Stdio};

use super::protocol::{answer, millis};
use crate::driver::{ClientInfo, Graces, Hello, LeaderKind, Settings};
use rmcp::{
    RoleClient, ServiceExt,
    model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult},
    service::{PeerRequestOptions, RunningService},
    transport::TokioChildProcess,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

type Client = RunningService<RoleClient, ()>;

/// `mcp-conformance driver rmcp`; returns the exit code. As a host's
/// `#[tokio::main]` is written: when `serve` returns, the runtime is dropped
/// with it, and so is whatever rmcp spawned to clean up, before the program
/// ends.
pub fn main() -> u8 {
    let runtime = match crate::runtime::multi_thread() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "driver: cannot start a runtime: {error}");
            return 70;
        }
    };
    runtime.block_on(serve());
    drop(runtime);
    0
}

async fn serve() {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut client: Option<Client> = None;
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            let _ = writeln!(std::io::stderr(), "driver: not JSON: {line}");
            continue;
        };
        let id = request["id"].clone();
        let result = match request["op"].as_str().unwrap_or("") {
            "hello" => Ok(json!(hello())),
            "connect" => connect(&request).await.map(|connected| {
                client = Some(connected);
                json!({})
            }),
            // The program ends without calling close: the client is
            // dropped as `main` returns.
            "exit" => {
                answer(&id, Ok(json!({})));
                return;
            }
            "close" => match client.as_mut() {
                None => Err("not connected".to_owned()),
                Some(client) => client
                    .close()
                    .await
                    .map(|reason| json!({ "reason": format!("{reason:?}") }))
                    .map_err(|error| error.to_string()),
            },
            op => match &client {
                None => Err("not connected".to_owned()),
                Some(client) => act(client, op, &request).await,
            },
        };
        answer(&id, result);
    }
    // Stdin closed: the same as `exit`.
}

/// Protocol 2: rmcp's close is fixed (3 s after EOF, then SIGTERM, 3 s,
/// SIGKILL, to the child only); `TokioChildProcess` leaves the child in the
/// program's own process group; its handshake has no bound of its own (this
/// driver adds one, as a host would); it has no containment.
fn hello() -> Hello {
    let rmcp = rmcp::model::Implementation::from_build_env();
    Hello {
        protocol: 2,
        client: ClientInfo {
            name: rmcp.name,
            version: rmcp.version,
        },
        eras: vec!["legacy".into()],
        settings: Settings {
            graces: Graces::Fixed,
            eof_grace_ms: Some(3000),
            term_grace_ms: Some(3000),
            leader: LeaderKind::None,
            handshake_bound: false,
            contain: false,
        },
    }
}

async fn connect(request: &Value) -> Result<Client, String> {
    let server = &request["server"];
    let mut command = tokio::process::Command::new(server["command"].as_str().unwrap_or(""));
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    command.args(strings(&server["args"]));
    if let Some(env) = server["env"].as_object() {
        command.envs(
            env.iter()
                .filter_map(|(key, value)| Some((key, value.as_str()?))),
        );
    }
    if let Some(cwd) = server["cwd"].as_str() {
        command.current_dir(cwd);
    }
    // rmcp's default: the server's stderr is inherited (the harness reads
    // the driver's).
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|error| format!("cannot start the server: {error}"))?;
    let timeout = millis(&request["timeout_ms"], 30_000);
    match tokio::time::timeout(timeout, ().serve(transport)).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(error)) => Err(error.to_string()),
        // Dropping the pending `serve` drops the transport: rmcp kills the child.
        Err(_) => Err(format!("no answer to initialize within {timeout:?}")),
    }
}

async fn act(client: &Client, op: &str, request: &Value) -> Result<Value, String> {
    match op {
        "list_tools" => client
            .list_tools(None)
            .await
            .map(|tools| json!({ "count": tools.tools.len() }))
            .map_err(|error| error.to_string()),
        "call_tool" => {
            let mut params =
                CallToolRequestParams::new(request["name"].as_str().unwrap_or("").to_owned());
            params.arguments = request["arguments"].as_object().cloned();
            let call = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let options = PeerRequestOptions::with_timeout(millis(&request["timeout_ms"], 30_000));
            let handle = client
                .send_request_with_option(call, options)
                .await
                .map_err(|error| error.to_string())?;
            match handle.await_response().await {
                Ok(ServerResult::CallToolResult(result)) => {
                    Ok(json!({ "is_error": result.is_error.unwrap_or(false) }))
                }
                Ok(_) => Err("unexpected answer to tools/call".to_owned()),
                Err(error) => Err(error.to_string()),
            }
        }
        other => Err(format!("unknown op `{other}`")),
    }
}
