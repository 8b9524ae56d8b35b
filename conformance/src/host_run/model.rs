//! The stand-in model endpoint of `mcp-conformance host`: an HTTP/1.1 server
//! on loopback that speaks the wire formats real hosts use (Anthropic
//! Messages, OpenAI Chat Completions, OpenAI Responses, Gemini
//! `generateContent`), streaming where the real API streams.
//!
//! A headless host starts and stops MCP servers the way it does in real use
//! only when a model asks it to call tools, so this model does exactly that:
//! on the first turn that offers fixture tools, it calls every fixture tool
//! it was offered, in one turn, with the smallest arguments each tool's
//! schema accepts (each tool once per run); on any later turn it gives a
//! final text answer. A host that defers its MCP tools behind a search tool
//! is first asked to fetch them. Every request is recorded ([`Exchange`]): which tools were
//! offered is the proof that the host started each server and listed its
//! tools. Side requests (token counts, model lists, a `HEAD /`) get harmless
//! answers and are recorded too.
//!
//! Each wire format is written from what the official SDKs parse; the
//! streamed forms are sent whole in one response body (valid SSE: a client
//! cannot tell it from a slow stream).

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderValue, Method, StatusCode, Uri, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::{Value, json};

/// The model name the endpoint reports (and accepts any other).
pub const MODEL: &str = "mcp-conformance-stand-in";

/// The final answer of a conversation.
pub const FINAL_TEXT: &str = "Every tool was called; the conformance run is done.";

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot start the endpoint's runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on 127.0.0.1")]
    Bind(#[source] std::io::Error),
    #[error("cannot start the endpoint's thread")]
    Thread(#[source] std::io::Error),
}

/// The wire format of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// Anthropic's Messages API (`/v1/messages`).
    Anthropic,
    /// OpenAI's Chat Completions API (`/v1/chat/completions`).
    Openai,
    /// OpenAI's Responses API (`/v1/responses`).
    OpenaiResponses,
    /// Google's Gemini API (`generateContent`).
    Gemini,
}

/// One request the endpoint answered, and how.
#[derive(Debug, Clone, Serialize)]
pub struct Exchange {
    /// Milliseconds since the endpoint started.
    pub t_ms: u64,
    pub method: String,
    pub path: String,
    /// The wire format, for a model turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api: Option<Api>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stream: bool,
    /// Every tool offered, by the name the host gave it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools_offered: Vec<String>,
    /// Tool results the request carried (from earlier turns).
    #[serde(skip_serializing_if = "is_zero")]
    pub tool_results: usize,
    /// The tools this answer called, by the host's names.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub called: Vec<String>,
    /// `tool_calls`, `text`, `json`, `count`, `models`, `ok` or `not_found`.
    pub answer: &'static str,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

struct Shared {
    started: Instant,
    /// The fixture tools' own names (`echo`): an offered tool is a fixture
    /// tool when its name is one of these, however the host prefixed it.
    fixture_tools: Vec<String>,
    exchanges: Mutex<Vec<Exchange>>,
    ids: AtomicU64,
    /// Every fixture tool called so far, by its full name.
    called: Mutex<std::collections::BTreeSet<String>>,
    /// Deferred tools already asked for through a search tool.
    searched: Mutex<std::collections::BTreeSet<String>>,
    /// Where each request body is kept, when asked (`NNN.json`).
    bodies: Option<std::path::PathBuf>,
}

impl Shared {
    fn id(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.ids.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, exchange: Exchange) {
        self.exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(exchange);
    }
}

/// A running endpoint; stopped when dropped.
pub struct Endpoint {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// Starts the endpoint on 127.0.0.1 (a free port) in a thread of its
    /// own; `fixture_tools` are the tool names to call.
    pub fn start(fixture_tools: &[&str]) -> Result<Endpoint, ModelError> {
        Endpoint::start_keeping(fixture_tools, None)
    }

    /// [`Endpoint::start`], keeping each request's body in `bodies` as
    /// `NNN.json` (NNN its place in [`Endpoint::exchanges`], from 1).
    pub fn start_keeping(
        fixture_tools: &[&str],
        bodies: Option<std::path::PathBuf>,
    ) -> Result<Endpoint, ModelError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ModelError::Runtime)?;
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(("127.0.0.1", 0)))
            .map_err(ModelError::Bind)?;
        let addr = listener.local_addr().map_err(ModelError::Bind)?;
        let shared = Arc::new(Shared {
            started: Instant::now(),
            fixture_tools: fixture_tools.iter().map(|t| (*t).to_owned()).collect(),
            exchanges: Mutex::new(Vec::new()),
            ids: AtomicU64::new(0),
            called: Mutex::default(),
            searched: Mutex::default(),
            bodies,
        });
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("stand-in-model".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            let _ = stopped.await;
                        })
                        .await;
                });
            })
            .map_err(ModelError::Thread)?;
        Ok(Endpoint {
            addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared
            .exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A connection the host left open would hold a graceful shutdown:
        // the thread is left to end with the process rather than joined.
        drop(self.thread.take());
    }
}

/// True when `offered` (the host's name for a tool) is the fixture tool
/// `tool`: equal, or ending in `tool` after a separator (`mcp__server__echo`,
/// `server_echo`, `server.echo`, `server-echo`).
pub fn is_tool(offered: &str, tool: &str) -> bool {
    offered == tool
        || offered.strip_suffix(tool).is_some_and(|head| {
            head.ends_with(['_', '.', '-', '/', ':'])
                && !head.trim_end_matches(['_', '.', '-', '/', ':']).is_empty()
        })
}

/// The smallest value `schema` accepts: required properties only, the
/// first of an enum, a minimum where one is given.
pub fn minimal(schema: &Value) -> Value {
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema[key].as_array().and_then(|a| a.first()) {
            return minimal(first);
        }
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.to_ascii_lowercase(),
        // `["string", "null"]`: the first that is not null.
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| !k.eq_ignore_ascii_case("null"))
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ if schema.get("properties").is_some() => "object".to_owned(),
        _ => "object".to_owned(),
    };
    match kind.as_str() {
        "object" => {
            let mut object = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                if let Some(name) = name.as_str() {
                    object.insert(name.to_owned(), minimal(&schema["properties"][name]));
                }
            }
            Value::Object(object)
        }
        "string" => json!("mcp-conformance"),
        "integer" => schema["minimum"].as_i64().map_or(json!(1), |m| json!(m)),
        "number" => schema["minimum"].as_f64().map_or(json!(1), |m| json!(m)),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => Value::Null,
    }
}

/// An offered tool: its name and input schema.
struct Offered {
    name: String,
    schema: Value,
    /// The Responses API's `namespace` tool it belongs to (Codex puts each
    /// MCP server's tools in one, `mcp__SERVER`).
    namespace: Option<String>,
}

impl Offered {
    /// The name recorded: `namespace__name` for a namespaced tool.
    fn full_name(&self) -> String {
        full_name(self.namespace.as_deref(), &self.name)
    }
}

/// A tool call of an answer.
struct Call {
    id: String,
    name: String,
    namespace: Option<String>,
    args: Value,
}

impl Call {
    fn full_name(&self) -> String {
        full_name(self.namespace.as_deref(), &self.name)
    }
}

/// `namespace__name` for a tool of a Responses `namespace` tool (Codex's
/// `mcp__SERVER`), else the name alone: how offered tools and calls are
/// recorded, so the two compare.
fn full_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}__{name}"),
        None => name.to_owned(),
    }
}

/// What one model turn answers.
enum Turn {
    Calls(Vec<Call>),
    Text(String),
}

impl Shared {
    /// The answer to a turn of `request` offering `offered`;
    /// `json_schema` when the request asks for structured output.
    ///
    /// Each fixture tool is called once per run, in the first turn that
    /// offers it (hosts resend the whole conversation, so a later turn
    /// offers them again and gets the final text). A host that defers its
    /// MCP tools behind a search tool (Qwen Code's `tool_search`, Claude
    /// Code's `ToolSearch`), naming them only in its prompt, is first asked
    /// to fetch them: `select:` with their names.
    fn turn(&self, request: &Value, offered: &[Offered], json_schema: Option<&Value>) -> Turn {
        if let Some(schema) = json_schema {
            return Turn::Text(minimal(schema).to_string());
        }
        let is_fixture = |name: &str| self.fixture_tools.iter().any(|t| is_tool(name, t));
        let mut called = self.called.lock().unwrap_or_else(|e| e.into_inner());
        let calls: Vec<Call> = offered
            .iter()
            .filter(|o| is_fixture(&o.name) && !called.contains(&o.full_name()))
            .map(|o| Call {
                id: self.id("call_"),
                name: o.name.clone(),
                namespace: o.namespace.clone(),
                args: minimal(&o.schema),
            })
            .collect();
        if !calls.is_empty() {
            called.extend(calls.iter().map(Call::full_name));
            return Turn::Calls(calls);
        }
        let search = offered.iter().find(|o| {
            let name: String = o.name.chars().filter(char::is_ascii_alphanumeric).collect();
            name.eq_ignore_ascii_case("toolsearch")
        });
        if let Some(search) = search {
            // Deferred fixture tools: named in the prompt, `mcp__SERVER__TOOL`.
            let mut text = String::new();
            strings(request, &mut text);
            let mut deferred: Vec<String> = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
                .filter(|word| word.starts_with("mcp__") && is_fixture(word))
                .filter(|word| !called.contains(*word))
                .map(str::to_owned)
                .collect();
            deferred.sort();
            deferred.dedup();
            let mut searched = self.searched.lock().unwrap_or_else(|e| e.into_inner());
            deferred.retain(|name| !searched.contains(name));
            if !deferred.is_empty() {
                searched.extend(deferred.iter().cloned());
                // Twenty at a time: the most a search returns.
                let calls = deferred
                    .chunks(20)
                    .map(|names| {
                        let mut args = minimal(&search.schema);
                        args["query"] = json!(format!("select:{}", names.join(",")));
                        if search.schema["properties"].get("max_results").is_some() {
                            args["max_results"] = json!(names.len());
                        }
                        Call {
                            id: self.id("call_"),
                            name: search.name.clone(),
                            namespace: search.namespace.clone(),
                            args,
                        }
                    })
                    .collect();
                return Turn::Calls(calls);
            }
        }
        Turn::Text(FINAL_TEXT.to_owned())
    }
}

/// Every string in `value`, one per line (the decoded text: a `\n` in a
/// prompt is a line break here, not a letter `n` glued to the next word).
fn strings(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

fn sse(body: String) -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        ],
        body,
    )
        .into_response()
}

fn json_response(value: Value) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        value.to_string(),
    )
        .into_response()
}

/// One SSE event with a name.
fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The whole endpoint: dispatch by path, whatever prefix the host's base
/// URL adds (`/v1`, `/api/v1`, none).
async fn answer(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut exchange = Exchange {
        t_ms: shared.started.elapsed().as_millis() as u64,
        method: method.to_string(),
        path: uri.to_string(),
        api: None,
        stream: false,
        tools_offered: Vec::new(),
        tool_results: 0,
        called: Vec::new(),
        answer: "ok",
    };
    let response = if method == Method::POST {
        if path.ends_with("/messages/count_tokens") {
            exchange.answer = "count";
            json_response(json!({ "input_tokens": 1 }))
        } else if path.ends_with("/messages") {
            anthropic(&shared, &request, &mut exchange)
        } else if path.ends_with("/chat/completions") {
            chat(&shared, &request, &mut exchange)
        } else if path.ends_with("/responses") {
            responses(&shared, &request, &mut exchange)
        } else if path.ends_with(":generateContent") {
            gemini(&shared, &request, &mut exchange, false)
        } else if path.ends_with(":streamGenerateContent") {
            gemini(&shared, &request, &mut exchange, true)
        } else if path.ends_with(":countTokens") {
            exchange.answer = "count";
            json_response(json!({ "totalTokens": 1 }))
        } else {
            not_found(&mut exchange, &path)
        }
    } else if method == Method::GET && path.ends_with("/models") {
        exchange.answer = "models";
        json_response(models())
    } else if (method == Method::GET || method == Method::HEAD) && path.trim_matches('/').is_empty()
    {
        StatusCode::OK.into_response()
    } else {
        not_found(&mut exchange, &path)
    };
    if let Some(dir) = &shared.bodies {
        let n = shared
            .exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
            + 1;
        // Best effort: a body that cannot be kept changes no answer.
        let _ = std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(dir.join(format!("{n:03}.json")), &body));
    }
    shared.record(exchange);
    response
}

fn not_found(exchange: &mut Exchange, path: &str) -> Response {
    exchange.answer = "not_found";
    (
        StatusCode::NOT_FOUND,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json!({ "error": {
            "type": "not_found_error",
            "code": 404,
            "status": "NOT_FOUND",
            "message": format!("the mcp-conformance stand-in model has no {path}"),
        }})
        .to_string(),
    )
        .into_response()
}

/// A model list in the shapes of OpenAI (`data`, `object`), Anthropic
/// (`data`, `has_more`) and Gemini (`models`) at once.
fn models() -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": MODEL,
            "object": "model",
            "type": "model",
            "created": 0,
            "created_at": "2025-01-01T00:00:00Z",
            "display_name": MODEL,
            "owned_by": "mcp-conformance",
        }],
        "has_more": false,
        "first_id": MODEL,
        "last_id": MODEL,
        "models": [{
            "name": format!("models/{MODEL}"),
            "displayName": MODEL,
            "supportedGenerationMethods": ["generateContent", "countTokens"],
        }],
    })
}

fn note(exchange: &mut Exchange, api: Api, stream: bool, offered: &[Offered], results: usize) {
    exchange.api = Some(api);
    exchange.stream = stream;
    exchange.tools_offered = offered.iter().map(Offered::full_name).collect();
    exchange.tool_results = results;
}

fn note_turn(exchange: &mut Exchange, turn: &Turn, json: bool) {
    match turn {
        Turn::Calls(calls) => {
            exchange.answer = "tool_calls";
            exchange.called = calls.iter().map(Call::full_name).collect();
        }
        Turn::Text(_) if json => exchange.answer = "json",
        Turn::Text(_) => exchange.answer = "text",
    }
}

fn model_of(request: &Value) -> String {
    request["model"].as_str().unwrap_or(MODEL).to_owned()
}

// ---- Anthropic Messages ----

fn anthropic(shared: &Shared, request: &Value, exchange: &mut Exchange) -> Response {
    let offered: Vec<Offered> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t.get("input_schema").is_some())
        .map(|t| Offered {
            name: t["name"].as_str().unwrap_or_default().to_owned(),
            schema: t["input_schema"].clone(),
            namespace: None,
        })
        .collect();
    let results = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .count();
    let stream = request["stream"] == json!(true);
    note(exchange, Api::Anthropic, stream, &offered, results);
    let turn = shared.turn(request, &offered, None);
    note_turn(exchange, &turn, false);
    let id = shared.id("msg_");
    let model = model_of(request);
    let (content, stop_reason): (Vec<Value>, &str) = match &turn {
        Turn::Calls(calls) => (
            calls
                .iter()
                .map(|c| json!({ "type": "tool_use", "id": format!("toolu_{}", c.id), "name": c.name, "input": c.args }))
                .collect(),
            "tool_use",
        ),
        Turn::Text(text) => (vec![json!({ "type": "text", "text": text })], "end_turn"),
    };
    let usage = json!({ "input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0 });
    if !stream {
        return json_response(json!({
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": null,
            "usage": usage,
        }));
    }
    let mut body = event(
        "message_start",
        &json!({ "type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage,
        }}),
    );
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = if block["type"] == "tool_use" {
            let mut start = block.clone();
            start["input"] = json!({});
            (
                start,
                json!({ "type": "input_json_delta", "partial_json": block["input"].to_string() }),
            )
        } else {
            (
                json!({ "type": "text", "text": "" }),
                json!({ "type": "text_delta", "text": block["text"] }),
            )
        };
        body += &event(
            "content_block_start",
            &json!({ "type": "content_block_start", "index": index, "content_block": start }),
        );
        body += &event(
            "content_block_delta",
            &json!({ "type": "content_block_delta", "index": index, "delta": delta }),
        );
        body += &event(
            "content_block_stop",
            &json!({ "type": "content_block_stop", "index": index }),
        );
    }
    body += &event(
        "message_delta",
        &json!({ "type": "message_delta",
            "delta": { "stop_reason": stop_reason, "stop_sequence": null },
            "usage": { "output_tokens": 1 } }),
    );
    body += &event("message_stop", &json!({ "type": "message_stop" }));
    sse(body)
}

// ---- OpenAI Chat Completions ----

fn chat(shared: &Shared, request: &Value, exchange: &mut Exchange) -> Response {
    let offered: Vec<Offered> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "function")
        .map(|t| Offered {
            name: t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            schema: t["function"]["parameters"].clone(),
            namespace: None,
        })
        .collect();
    let results = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .count();
    let stream = request["stream"] == json!(true);
    note(exchange, Api::Openai, stream, &offered, results);
    // `response_format: {type: json_schema}` asks for structured output.
    let schema = request["response_format"]["json_schema"]["schema"].clone();
    let json_schema = (!schema.is_null()).then_some(&schema);
    let turn = shared.turn(request, &offered, json_schema);
    note_turn(exchange, &turn, json_schema.is_some());
    let id = shared.id("chatcmpl-");
    let model = model_of(request);
    let usage = json!({ "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2 });
    let (message, finish) = match &turn {
        Turn::Calls(calls) => (
            json!({ "role": "assistant", "content": null, "tool_calls": calls.iter().enumerate().map(|(i, c)| json!({
                "index": i, "id": c.id, "type": "function",
                "function": { "name": c.name, "arguments": c.args.to_string() },
            })).collect::<Vec<_>>() }),
            "tool_calls",
        ),
        Turn::Text(text) => (json!({ "role": "assistant", "content": text }), "stop"),
    };
    if !stream {
        let mut message = message;
        if let Some(calls) = message["tool_calls"].as_array_mut() {
            for call in calls {
                call.as_object_mut().map(|c| c.remove("index"));
            }
        }
        return json_response(json!({
            "id": id, "object": "chat.completion", "created": 0, "model": model,
            "choices": [{ "index": 0, "message": message, "finish_reason": finish, "logprobs": null }],
            "usage": usage,
        }));
    }
    let chunk = |delta: Value, finish: Value, usage: Option<&Value>| {
        let mut chunk = json!({
            "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{ "index": 0, "delta": delta, "finish_reason": finish, "logprobs": null }],
        });
        if let Some(usage) = usage {
            chunk["choices"] = json!([]);
            chunk["usage"] = usage.clone();
        }
        format!("data: {chunk}\n\n")
    };
    let mut body = chunk(
        json!({ "role": "assistant", "content": "" }),
        Value::Null,
        None,
    );
    match &turn {
        Turn::Calls(calls) => {
            for (index, call) in calls.iter().enumerate() {
                // The name first, then the arguments in a chunk of their
                // own, as the real API splits them.
                body += &chunk(
                    json!({ "tool_calls": [{ "index": index, "id": call.id, "type": "function",
                        "function": { "name": call.name, "arguments": "" } }] }),
                    Value::Null,
                    None,
                );
                body += &chunk(
                    json!({ "tool_calls": [{ "index": index,
                        "function": { "arguments": call.args.to_string() } }] }),
                    Value::Null,
                    None,
                );
            }
        }
        Turn::Text(text) => body += &chunk(json!({ "content": text }), Value::Null, None),
    }
    body += &chunk(json!({}), json!(finish), None);
    if request["stream_options"]["include_usage"] == json!(true) {
        body += &chunk(Value::Null, Value::Null, Some(&usage));
    }
    body += "data: [DONE]\n\n";
    sse(body)
}

// ---- OpenAI Responses ----

fn responses(shared: &Shared, request: &Value, exchange: &mut Exchange) -> Response {
    let function = |t: &Value, namespace: Option<&str>| Offered {
        name: t["name"].as_str().unwrap_or_default().to_owned(),
        schema: t["parameters"].clone(),
        namespace: namespace.map(str::to_owned),
    };
    let mut offered: Vec<Offered> = Vec::new();
    for tool in request["tools"].as_array().into_iter().flatten() {
        if tool["type"] == "function" {
            offered.push(function(tool, None));
        } else if tool["type"] == "namespace" {
            let namespace = tool["name"].as_str();
            offered.extend(
                tool["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["type"] == "function")
                    .map(|t| function(t, namespace)),
            );
        }
    }
    let input = request["input"].as_array();
    let mut results = input
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "function_call_output")
        .count();
    // A continuation by reference carries its results as input items too;
    // a previous response alone still means a later turn.
    if results == 0 && request["previous_response_id"].is_string() && input.is_some() {
        results = input.map_or(0, Vec::len);
    }
    let stream = request["stream"] == json!(true);
    note(exchange, Api::OpenaiResponses, stream, &offered, results);
    let schema = request["text"]["format"]["schema"].clone();
    let json_schema = (!schema.is_null()).then_some(&schema);
    let turn = shared.turn(request, &offered, json_schema);
    note_turn(exchange, &turn, json_schema.is_some());
    let id = shared.id("resp_");
    let model = model_of(request);
    let output: Vec<Value> = match &turn {
        Turn::Calls(calls) => calls
            .iter()
            .map(|c| {
                let mut item = json!({ "type": "function_call", "id": format!("fc_{}", c.id), "call_id": c.id,
                    "name": c.name, "arguments": c.args.to_string(), "status": "completed" });
                if let Some(namespace) = &c.namespace {
                    item["namespace"] = json!(namespace);
                }
                item
            })
            .collect(),
        Turn::Text(text) => vec![json!({
            "type": "message", "id": shared.id("msg_"), "role": "assistant", "status": "completed",
            "content": [{ "type": "output_text", "text": text, "annotations": [] }],
        })],
    };
    let response = |status: &str, output: &[Value]| {
        json!({
            "id": id, "object": "response", "created_at": 0, "status": status, "model": model,
            "output": output, "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
            "error": null, "incomplete_details": null,
            "usage": { "input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                "input_tokens_details": { "cached_tokens": 0 },
                "output_tokens_details": { "reasoning_tokens": 0 } },
        })
    };
    if !stream {
        return json_response(response("completed", &output));
    }
    let mut seq = 0u64;
    let mut body = String::new();
    let mut emit = |name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        body += &event(name, &data);
    };
    emit(
        "response.created",
        json!({ "response": response("in_progress", &[]) }),
    );
    emit(
        "response.in_progress",
        json!({ "response": response("in_progress", &[]) }),
    );
    for (index, item) in output.iter().enumerate() {
        let item_id = item["id"].clone();
        if item["type"] == "function_call" {
            let mut added = item.clone();
            added["arguments"] = json!("");
            added["status"] = json!("in_progress");
            emit(
                "response.output_item.added",
                json!({ "output_index": index, "item": added }),
            );
            emit(
                "response.function_call_arguments.delta",
                json!({ "output_index": index, "item_id": item_id, "delta": item["arguments"] }),
            );
            emit(
                "response.function_call_arguments.done",
                json!({ "output_index": index, "item_id": item_id, "arguments": item["arguments"] }),
            );
        } else {
            let text = item["content"][0]["text"].clone();
            let mut added = item.clone();
            added["content"] = json!([]);
            added["status"] = json!("in_progress");
            emit(
                "response.output_item.added",
                json!({ "output_index": index, "item": added }),
            );
            let part = json!({ "type": "output_text", "text": "", "annotations": [] });
            emit(
                "response.content_part.added",
                json!({ "output_index": index, "item_id": item_id, "content_index": 0, "part": part }),
            );
            emit(
                "response.output_text.delta",
                json!({ "output_index": index, "item_id": item_id, "content_index": 0, "delta": text }),
            );
            emit(
                "response.output_text.done",
                json!({ "output_index": index, "item_id": item_id, "content_index": 0, "text": text }),
            );
            emit(
                "response.content_part.done",
                json!({ "output_index": index, "item_id": item_id, "content_index": 0, "part": item["content"][0] }),
            );
        }
        emit(
            "response.output_item.done",
            json!({ "output_index": index, "item": item }),
        );
    }
    emit(
        "response.completed",
        json!({ "response": response("completed", &output) }),
    );
    sse(body)
}

// ---- Gemini generateContent ----

fn gemini(shared: &Shared, request: &Value, exchange: &mut Exchange, stream: bool) -> Response {
    let offered: Vec<Offered> = request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["functionDeclarations"].as_array())
        .flatten()
        .map(|d| Offered {
            name: d["name"].as_str().unwrap_or_default().to_owned(),
            schema: if d["parametersJsonSchema"].is_null() {
                d["parameters"].clone()
            } else {
                d["parametersJsonSchema"].clone()
            },
            namespace: None,
        })
        .collect();
    let results = request["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter(|part| part.get("functionResponse").is_some())
        .count();
    note(exchange, Api::Gemini, stream, &offered, results);
    let config = &request["generationConfig"];
    let schema = if config["responseJsonSchema"].is_null() {
        config["responseSchema"].clone()
    } else {
        config["responseJsonSchema"].clone()
    };
    let json_schema = (!schema.is_null()).then_some(&schema);
    let turn = shared.turn(request, &offered, json_schema);
    note_turn(exchange, &turn, json_schema.is_some());
    let parts: Vec<Value> = match &turn {
        Turn::Calls(calls) => calls
            .iter()
            .map(|c| json!({ "functionCall": { "id": c.id, "name": c.name, "args": c.args } }))
            .collect(),
        Turn::Text(text) => vec![json!({ "text": text })],
    };
    let answer = json!({
        "candidates": [{
            "content": { "role": "model", "parts": parts },
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": { "promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2 },
        "modelVersion": model_of(request),
        "responseId": shared.id("gemini-"),
    });
    if stream {
        sse(format!("data: {answer}\r\n\r\n"))
    } else {
        json_response(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixed_names_are_the_fixture_tools() {
        assert!(is_tool("echo", "echo"));
        assert!(is_tool("mcp__well-behaved__echo", "echo"));
        assert!(is_tool("well-behaved_sleep_ms", "sleep_ms"));
        assert!(is_tool("crash.pid", "pid"));
        assert!(!is_tool("_echo", "echo"));
        assert!(!is_tool("mcp__x__becho", "echo"));
        assert!(!is_tool("read_file", "echo"));
    }

    #[test]
    fn minimal_arguments_satisfy_the_fixture_schemas() {
        assert_eq!(
            minimal(
                &json!({ "type": "object", "properties": { "text": { "type": "string" } }, "required": ["text"] })
            ),
            json!({ "text": "mcp-conformance" })
        );
        assert_eq!(
            minimal(
                &json!({ "type": "OBJECT", "properties": { "ms": { "type": "INTEGER", "minimum": 0 } }, "required": ["ms"] })
            ),
            json!({ "ms": 0 })
        );
        assert_eq!(
            minimal(
                &json!({ "type": "object", "properties": { "next": { "type": "string", "enum": ["user", "model"] } }, "required": ["next"] })
            ),
            json!({ "next": "user" })
        );
        assert_eq!(minimal(&Value::Null), json!({}));
    }
}
