//! Streamable HTTP servers: rmcp's own server side on 127.0.0.1, serving the
//! fixtures' tool set, with the Authorization header each request carried.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
};

use axum::{extract::Request, middleware::Next, response::Response};
use mcp_fixtures::{Behaviour, CommonArgs, server::FixtureServer};
use mcp_stdio_client::{
    HttpClient, Session, SessionOptions,
    config::{AuthMode, Config, HttpConfig, ServerConfig},
};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use serde_json::json;

use crate::support::{args, text};

/// An HTTP MCP server on a free loopback port; stops when dropped.
pub struct HttpFixture {
    pub addr: SocketAddr,
    /// The Authorization header of every request, in order.
    pub seen: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HttpFixture {
    pub async fn start() -> Self {
        let service = StreamableHttpService::new(
            || {
                Ok(FixtureServer::new(Arc::new(Behaviour::well_behaved(
                    "fixture-http",
                    CommonArgs::default(),
                ))))
            },
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let record = seen.clone();
        let router = axum::Router::new()
            .nest_service("/mcp", service.clone())
            .nest_service("/mcp/readonly", service)
            .layer(axum::middleware::from_fn(
                move |request: Request, next: Next| {
                    let record = record.clone();
                    async move {
                        let auth = request
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned);
                        record.lock().unwrap().push(auth);
                        let response: Response = next.run(request).await;
                        response
                    }
                },
            ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { addr, seen, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The distinct Authorization headers seen.
    pub fn headers(&self) -> Vec<Option<String>> {
        let mut seen = self.seen.lock().unwrap().clone();
        seen.dedup();
        seen
    }
}

fn http_server(
    name: &str,
    url: String,
    auth: AuthMode,
    token: Option<&str>,
    username: Option<&str>,
) -> ServerConfig {
    let mut http = HttpConfig::new(url);
    http.auth = auth;
    http.token = token.map(str::to_owned);
    http.username = username.map(str::to_owned);
    ServerConfig::http(name, http)
}

#[tokio::test]
async fn bearer_is_sent_and_tools_work_over_http() {
    let server = HttpFixture::start().await;
    let config = http_server(
        "remote",
        server.url("/mcp"),
        AuthMode::Bearer,
        Some("tok-123"),
        None,
    );
    let client = HttpClient::connect(
        &config,
        Some(&mcp_stdio_client::Authorization::Bearer("tok-123".into())),
    )
    .await
    .unwrap();
    let tools = client.list_tools().await.unwrap();
    assert_eq!(tools.len(), 5);
    assert_eq!(
        text(
            &client
                .call_tool("add", args(json!({ "a": 2, "b": 3 })))
                .await
                .unwrap()
        ),
        "5"
    );
    client.close().await;
    assert_eq!(server.headers(), [Some("Bearer tok-123".to_owned())]);
}

#[tokio::test]
async fn session_sends_each_auth_mode_and_flags_readonly() {
    let server = HttpFixture::start().await;
    let mut config = Config::default();
    for entry in [
        http_server(
            "bearer",
            server.url("/mcp"),
            AuthMode::Bearer,
            Some("b-token"),
            None,
        ),
        http_server(
            "basic",
            server.url("/mcp"),
            AuthMode::Basic,
            Some("pw"),
            Some("alice"),
        ),
        http_server(
            "docs",
            server.url("/mcp/readonly"),
            AuthMode::None,
            None,
            None,
        ),
    ] {
        config.servers.insert(entry.name.clone(), entry);
    }
    let mut session = Session::build(&config, &SessionOptions::default()).await;
    assert!(session.failures().is_empty(), "{:?}", session.failures());
    let tools = session
        .discover_tools(std::time::Duration::from_secs(10))
        .await
        .to_vec();
    assert_eq!(tools.len(), 15);
    let docs_echo = tools
        .iter()
        .find(|t| t.qualified_name == "mcp_docs_echo")
        .unwrap();
    assert!(
        !docs_echo.requires_consent && !docs_echo.serial,
        "/readonly is consent-free and parallel"
    );
    let bearer_echo = tools
        .iter()
        .find(|t| t.qualified_name == "mcp_bearer_echo")
        .unwrap();
    assert!(bearer_echo.requires_consent && bearer_echo.serial);
    let answer = session
        .call("mcp_basic_echo", args(json!({ "text": "over http" })))
        .await
        .unwrap();
    assert_eq!(text(&answer), "over http");
    session.close().await;

    let headers = server.headers();
    assert!(
        headers.contains(&Some("Bearer b-token".into())),
        "{headers:?}"
    );
    assert!(
        headers.contains(&Some("Basic YWxpY2U6cHc=".into())),
        "{headers:?}"
    );
    assert!(
        headers.contains(&None),
        "AUTH none sends no header: {headers:?}"
    );
}

#[tokio::test]
async fn gh_runs_once_for_every_gh_server_and_its_token_is_sent() {
    let server = HttpFixture::start().await;
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let gh = dir.path().join("gh");
    std::fs::write(
        &gh,
        format!(
            "#!/bin/sh\necho run >> {}\necho gho-from-gh\n",
            runs.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&gh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut config = Config::default();
    for name in ["one", "two"] {
        let entry = http_server(name, server.url("/mcp"), AuthMode::Gh, None, None);
        config.servers.insert(entry.name.clone(), entry);
    }
    let options = SessionOptions {
        gh_command: gh.to_string_lossy().into_owned(),
        ..SessionOptions::default()
    };
    let session = Session::build(&config, &options).await;
    assert!(session.failures().is_empty(), "{:?}", session.failures());
    assert_eq!(session.gh_runs(), 1);
    assert_eq!(
        std::fs::read_to_string(&runs).unwrap(),
        "run\n",
        "gh ran exactly once"
    );
    session.close().await;
    assert_eq!(server.headers(), [Some("Bearer gho-from-gh".to_owned())]);
}

#[tokio::test]
async fn an_unreachable_http_server_fails_with_a_redacted_url() {
    // Port 9 on loopback: nothing listens (connection refused).
    let config = http_server(
        "gone",
        "http://127.0.0.1:9/mcp?token=secret-q".into(),
        AuthMode::None,
        None,
        None,
    );
    let error = HttpClient::connect(&config, None).await.err().unwrap();
    let message = error.to_string();
    assert_eq!(error.kind().as_str(), "http");
    assert!(message.contains("\"gone\""), "{message}");
    assert!(!message.contains("secret-q"), "{message}");
}

/// A URL that reqwest normalizes (uppercase host, `..`) and that carries secrets in its
/// user-info, query and fragment: none of them may appear in the error, its Debug, or any log
/// line written through the redacting writer, at TRACE, whichever crate wrote it.
#[tokio::test(flavor = "current_thread")]
async fn url_secrets_never_appear_in_errors_or_logs_even_when_reqwest_normalizes_the_url() {
    use mcp_stdio_client::RedactingWriter;
    let captured = crate::support::Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || RedactingWriter::new(writer.clone()))
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let secrets = ["pw-secret", "secret-q", "frag-secret", "alice"];
    let config = http_server(
        "gone",
        "http://alice:pw-secret@LOCALHOST:9/a/../mcp?token=secret-q&x=y%20z#frag-secret".into(),
        AuthMode::None,
        None,
        None,
    );
    let error = HttpClient::connect(&config, None).await.err().unwrap();
    let text = format!(
        "{} {error:?} {config:?}",
        mcp_stdio_client::error_chain(&error)
    );
    assert!(text.contains("localhost:9/mcp"), "still says where: {text}");
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} in: {text}");
    }
    // rmcp's transport worker logs its failure at ERROR as it quits, which can be just after
    // connect returned: wait for that line (with a deadline) before reading the log.
    let deadline = std::time::Instant::now() + crate::support::DEADLINE;
    while !captured.text().contains(" ERROR ") && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let log = captured.text();
    assert!(
        log.contains(" ERROR ") && log.contains("localhost:9/mcp?[REDACTED]"),
        "rmcp logged the failure, redacted:\n{log}"
    );
    for secret in secrets {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

/// A server (or a gateway in front of it) that answers 401 and quotes the request's
/// Authorization header in the body: the secret the client sent comes back in the error text.
/// The client knows the value it sent, so neither the error's whole chain nor any log line
/// written through the redacting writer may hold it, in any form the header carried it.
#[tokio::test(flavor = "current_thread")]
async fn a_token_the_server_echoes_back_never_appears_in_errors_or_logs() {
    use mcp_stdio_client::RedactingWriter;
    let captured = crate::support::Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || RedactingWriter::new(writer.clone()))
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // Echoes the Authorization header in the body of a 401, as some gateways do.
    let router = axum::Router::new().fallback(|request: Request| async move {
        let header = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("(none)")
            .to_owned();
        (
            axum::http::StatusCode::UNAUTHORIZED,
            format!("invalid credentials: Authorization: {header}"),
        )
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    struct Abort(tokio::task::JoinHandle<()>);
    impl Drop for Abort {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _server = Abort(task);

    let token = "tok-echoed-8f3a2c91";
    let (username, password) = ("alice-echoed", "pw-echoed-77c1d0");
    let basic = mcp_stdio_client::Authorization::Basic {
        username: username.into(),
        password: password.into(),
    };
    // What the Basic header carries on the wire: base64 of `user:password`.
    let basic_wire = "YWxpY2UtZWNob2VkOnB3LWVjaG9lZC03N2MxZDA=";
    let url = format!("http://{addr}/mcp");
    let mut config = Config::default();
    for entry in [
        http_server("bearer", url.clone(), AuthMode::Bearer, Some(token), None),
        http_server(
            "basic",
            url.clone(),
            AuthMode::Basic,
            Some(password),
            Some(username),
        ),
    ] {
        config.servers.insert(entry.name.clone(), entry);
    }
    let session = Session::build(&config, &SessionOptions::default()).await;
    let mut text = String::new();
    for failure in session.failures() {
        text.push_str(&format!(
            "{}\n{:?}\n",
            mcp_stdio_client::error_chain(&failure.error),
            failure.error
        ));
    }
    session.close().await;
    // And one server connected directly, as a host that resolves its own credentials does.
    let direct = http_server("direct", url, AuthMode::None, None, None);
    let error = HttpClient::connect(&direct, Some(&basic))
        .await
        .err()
        .expect("a 401 fails the connect");
    text.push_str(&format!(
        "{}\n{error:?}\n",
        mcp_stdio_client::error_chain(&error)
    ));
    eprintln!("errors:\n{text}");
    assert!(
        text.matches("[REDACTED]").count() >= 3 && text.contains("401"),
        "each error still says what happened, with the echoed header redacted:\n{text}"
    );
    for secret in [token, password, basic_wire] {
        assert!(!text.contains(secret), "{secret} in an error:\n{text}");
    }
    // rmcp's transport worker logs its failure as it quits, which can be just after connect
    // returned: wait (with a deadline) until it has logged each server's 401.
    let deadline = std::time::Instant::now() + crate::support::DEADLINE;
    let logged_401s = || {
        captured
            .text()
            .lines()
            .filter(|line| line.contains(" ERROR ") && line.contains("HTTP 401"))
            .count()
    };
    while logged_401s() < 3 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let log = captured.text();
    eprintln!("log:\n{log}");
    assert_eq!(
        logged_401s(),
        3,
        "rmcp logged each 401, body and all:\n{log}"
    );
    for secret in [token, password, basic_wire] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}
