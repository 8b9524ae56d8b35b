//! The driver (`docs/client-check.md`) for this project's own client,
//! `mcp-stdio-client`: `mcp-conformance client -- mcp-conformance driver
//! stdio-client` grades it through the same protocol as any other client.

use std::{collections::BTreeMap, io::Write, path::PathBuf};

use super::protocol::{answer, millis};
use crate::driver::{ClientInfo, Graces, Hello, LeaderKind, Settings};
use mcp_stdio_client::{
    StdioClient,
    config::{ServerConfig, StdioConfig},
    error_chain as chain,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// `mcp-conformance driver stdio-client`; returns the exit code.
pub fn main() -> u8 {
    let runtime = match crate::runtime::multi_thread() {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "driver: cannot start a runtime: {error}");
            return 70;
        }
    };
    runtime.block_on(serve());
    0
}

async fn serve() {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut client: Option<StdioClient> = None;
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            let _ = writeln!(std::io::stderr(), "driver: not JSON: {line}");
            continue;
        };
        let id = request["id"].clone();
        let op = request["op"].as_str().unwrap_or("");
        let result = match op {
            "hello" => Ok(json!(hello())),
            "connect" => connect(&request).await.map(|connected| {
                client = Some(connected);
                // The claim `close.escaped` holds this client to.
                json!({ "contain": request["contain"] == json!(true) })
            }),
            "exit" => {
                answer(&id, Ok(json!({})));
                // The program ends without calling close: the client is
                // dropped as the program's main returns.
                drop(client.take());
                return;
            }
            _ => match &client {
                None => Err("not connected".to_owned()),
                Some(client) => act(client, op, &request).await,
            },
        };
        answer(&id, result);
    }
    // Stdin closed: end the way a program does, dropping the client.
    drop(client);
}

/// Protocol 2: this client takes the graces asked of it, starts each server
/// as the leader of a group of its own, bounds start-up by TIMEOUT and
/// contains when asked.
fn hello() -> Hello {
    Hello {
        protocol: 2,
        client: ClientInfo {
            name: "mcp-stdio-client".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        },
        eras: vec!["modern".into(), "legacy".into()],
        settings: Settings {
            graces: Graces::Asked,
            eof_grace_ms: Some(2000),
            term_grace_ms: Some(2000),
            leader: LeaderKind::Group,
            handshake_bound: true,
            contain: true,
        },
    }
}

async fn connect(request: &Value) -> Result<StdioClient, String> {
    let server = &request["server"];
    let mut stdio = StdioConfig::new(server["command"].as_str().unwrap_or(""));
    stdio.args = server["args"]
        .as_array()
        .map(|args| {
            args.iter()
                .filter_map(|a| a.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    stdio.env = server["env"]
        .as_object()
        .map(|env| {
            env.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect::<BTreeMap<_, _>>()
        })
        .unwrap_or_default();
    stdio.dir = server["cwd"].as_str().map(PathBuf::from);
    stdio.eof_grace = millis(&request["eof_grace_ms"], 2000);
    stdio.term_grace = millis(&request["term_grace_ms"], 2000);
    let timeout = millis(&request["timeout_ms"], 30_000);
    StdioClient::builder(&ServerConfig::stdio("server", stdio))
        .timeout(timeout)
        .contain(request["contain"] == json!(true))
        .connect()
        .await
        .map_err(|error| chain(&error))
}

async fn act(client: &StdioClient, op: &str, request: &Value) -> Result<Value, String> {
    match op {
        "list_tools" => client
            .list_tools()
            .await
            .map(|tools| json!({ "count": tools.len() }))
            .map_err(|error| chain(&error)),
        "call_tool" => {
            let arguments = request["arguments"].as_object().cloned();
            let name = request["name"].as_str().unwrap_or("");
            client
                .call_tool(name, arguments)
                .await
                .map(|result| {
                    // The first content block's text, for graders that check it.
                    let content = serde_json::to_value(&result.content).unwrap_or_default();
                    json!({
                        "is_error": result.is_error.unwrap_or(false),
                        "text": content[0]["text"],
                    })
                })
                .map_err(|error| chain(&error))
        }
        "close" => {
            let outcome = client.close().await;
            Ok(json!({
                "path": outcome.path.as_str(),
                "status": outcome.status.map(|s| s.to_string()),
                "elapsed_ms": outcome.elapsed.as_millis() as u64,
            }))
        }
        other => Err(format!("unknown op `{other}`")),
    }
}
