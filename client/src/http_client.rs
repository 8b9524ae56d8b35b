//! [`HttpClient`]: one Streamable HTTP MCP server, through rmcp's reqwest
//! client, with the AUTH mode sent as the `Authorization` header.
//!
//! There is no child process here; the lifecycle guarantees of the stdio
//! client do not apply. Errors name the server and, at most, the URL with its
//! user-info, query and fragment redacted (every URL in the text, in whatever
//! form reqwest printed it; see [`crate::redact`]). The credential sent is
//! remembered before it is sent, so a server that echoes the `Authorization`
//! header back (in a 401 body, a JSON-RPC error) has it redacted too.

use std::{sync::Mutex, time::Duration};

use rmcp::{
    RoleClient,
    model::{CallToolResult, ClientConfig, ClientRequest, JsonObject, ServerResult, Tool},
    service::{Peer, PeerRequestOptions, RunningService},
    transport::{
        StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig,
    },
};

use crate::{
    config::{ServerConfig, Transport},
    credentials::Authorization,
    error::{ClientError, Detail, service_error},
    redact::{redact, remember_secret},
    requests::{call_tool_via, client_identity, list_all_tools},
};

/// A connected Streamable HTTP server.
pub struct HttpClient {
    name: String,
    timeout: Duration,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ClientConfig>>>,
}

impl HttpClient {
    /// Connects and completes the MCP handshake within the server's TIMEOUT, sending
    /// `authorization` (if any) as the `Authorization` header. [`crate::Session`] resolves
    /// the server's AUTH into one; a host that connects one HTTP server itself passes its own.
    pub async fn connect(
        server: &ServerConfig,
        authorization: Option<&Authorization>,
    ) -> Result<HttpClient, ClientError> {
        let Transport::Http(http) = &server.transport else {
            return Err(ClientError::new(&server.name, Detail::NotHttp));
        };
        install_crypto_provider();
        if let Some(authorization) = authorization {
            remember_authorization(authorization);
        }
        let mut config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str());
        match authorization {
            Some(Authorization::Bearer(token)) => config = config.auth_header(token.clone()),
            Some(basic @ Authorization::Basic { .. }) => {
                let mut value =
                    ::http::HeaderValue::from_str(&basic.header_value()).map_err(|_| {
                        failure(server, "the USERNAME or TOKEN cannot be sent in a header")
                    })?;
                value.set_sensitive(true);
                config = config.custom_headers(
                    [(::http::header::AUTHORIZATION, value)]
                        .into_iter()
                        .collect(),
                );
            }
            None => {}
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let running = match tokio::time::timeout(
            server.timeout,
            rmcp::serve_client(client_identity(), transport),
        )
        .await
        {
            Ok(Ok(running)) => running,
            Ok(Err(error)) => return Err(failure(server, &error.to_string())),
            Err(_) => {
                let reason = format!(
                    "no answer to initialize within {}",
                    crate::config::format_duration(server.timeout)
                );
                return Err(failure(server, &reason));
            }
        };
        tracing::info!(server = %server.name, url = %http.redacted_url(), "connected to HTTP server");
        Ok(HttpClient {
            name: server.name.clone(),
            timeout: server.timeout,
            peer: running.peer().clone(),
            service: Mutex::new(Some(running)),
        })
    }

    /// The server's name in the config.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every tool the server offers (all pages), each page bounded by TIMEOUT.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        list_all_tools(&self.name, |request| self.request(request, "tools/list")).await
    }

    /// Calls `tool` with `arguments`, bounded by TIMEOUT.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
    ) -> Result<CallToolResult, ClientError> {
        call_tool_via(&self.name, tool, arguments, |request| {
            self.request(request, "tools/call")
        })
        .await
    }

    async fn request(
        &self,
        request: ClientRequest,
        method: &str,
    ) -> Result<ServerResult, ClientError> {
        if self
            .service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            return Err(ClientError::new(&self.name, Detail::Closed));
        }
        let options = PeerRequestOptions::with_timeout(self.timeout);
        let handle = self
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|error| service_error(&self.name, method, error))?;
        handle
            .await_response()
            .await
            .map_err(|error| service_error(&self.name, method, error))
    }

    /// Ends the session (rmcp deletes it on the server). Idempotent.
    pub async fn close(&self) {
        let running = self
            .service
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(running) = running {
            let _ = tokio::time::timeout(Duration::from_secs(2), running.cancel()).await;
        }
    }
}

fn failure(server: &ServerConfig, reason: &str) -> ClientError {
    // reqwest quotes the URL in its messages as it parsed it (host lowercased, `..` resolved),
    // not as configured, so every URL in the text is found and redacted by its parts; the
    // server's own words (a 401 body) may quote the credential sent.
    ClientError::new(
        &server.name,
        Detail::Http {
            reason: redact(reason).into_owned(),
        },
    )
}

/// Remembers every form in which `authorization` goes on the wire, so that an echo of any of
/// them is redacted: the token; for Basic the password, `user:password` and its base64. The user
/// name alone is not a credential and is left readable.
fn remember_authorization(authorization: &Authorization) {
    match authorization {
        Authorization::Bearer(token) => remember_secret(token),
        Authorization::Basic { username, password } => {
            remember_secret(password);
            remember_secret(&format!("{username}:{password}"));
            let header = authorization.header_value();
            remember_secret(header.strip_prefix("Basic ").unwrap_or(&header));
        }
    }
}

/// reqwest is built without a TLS crypto provider of its own choosing; this
/// client uses rustls with ring. A provider the application installed first
/// is kept.
fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
