//! The MCP requests that a stdio and a Streamable HTTP connection make alike: how the
//! client introduces itself, `tools/list` followed through its pages, and `tools/call`,
//! each through a `request` function that the connection supplies.

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest,
    Implementation, JsonObject, ListToolsRequest, PaginatedRequestParams, ServerResult, Tool,
};

use crate::error::{ClientError, Detail};

/// How this client introduces itself in `initialize`.
pub(crate) fn client_identity() -> ClientConfig {
    let mut config = ClientConfig::default();
    config.client_info = Implementation::new("mcp-stdio-client", env!("CARGO_PKG_VERSION"));
    config
}

/// One `tools/call` through `request`.
pub(crate) async fn call_tool_via<F, Fut>(
    name: &str,
    tool: &str,
    arguments: Option<JsonObject>,
    request: F,
) -> Result<CallToolResult, ClientError>
where
    F: FnOnce(ClientRequest) -> Fut,
    Fut: Future<Output = Result<ServerResult, ClientError>>,
{
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = arguments;
    match request(ClientRequest::CallToolRequest(CallToolRequest::new(params))).await? {
        ServerResult::CallToolResult(result) => Ok(result),
        _ => Err(ClientError::new(
            name,
            Detail::UnexpectedResponse {
                method: "tools/call".into(),
            },
        )),
    }
}

/// Follows `tools/list` pages until the last, through `request`.
pub(crate) async fn list_all_tools<F, Fut>(name: &str, request: F) -> Result<Vec<Tool>, ClientError>
where
    F: Fn(ClientRequest) -> Fut,
    Fut: Future<Output = Result<ServerResult, ClientError>>,
{
    let mut tools = Vec::new();
    let mut cursor = None;
    loop {
        let list = match cursor.take() {
            Some(cursor) => {
                let mut params = PaginatedRequestParams::default();
                params.cursor = Some(cursor);
                ListToolsRequest::with_param(params)
            }
            None => ListToolsRequest::default(),
        };
        match request(ClientRequest::ListToolsRequest(list)).await? {
            ServerResult::ListToolsResult(page) => {
                tools.extend(page.tools);
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => return Ok(tools),
                }
            }
            _ => {
                return Err(ClientError::new(
                    name,
                    Detail::UnexpectedResponse {
                        method: "tools/list".into(),
                    },
                ));
            }
        }
    }
}
