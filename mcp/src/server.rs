//! The MCP side: tools and resources over rmcp's server handler.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, ErrorData, Implementation, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ResourceContents, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{
    ResourceUpdatedNotificationParam, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::Value;
use std::collections::HashMap;
use tokio::sync::{Mutex, OnceCell, broadcast};
use tokio::task::JoinHandle;

use crate::changes::Changes;

use crate::database::{self, Database};
use crate::options::Options;
use crate::resources;
use crate::tools;

#[derive(Clone)]
pub struct MemoryServer {
    database: Arc<Database>,
    options: Arc<Options>,
    /// The tool list, read from the extension once it is reachable; shared
    /// by every HTTP session.
    tools: Arc<OnceCell<Vec<Tool>>>,
    changes: Arc<Changes>,
    /// This session's resources/subscribe subscriptions: the task that
    /// forwards each one's changes. They end with the session: its last
    /// clone drops them.
    subscribed: Arc<Mutex<HashMap<String, Forwarding>>>,
}

/// A task that forwards one subscription's changes, aborted when dropped:
/// a task left running would hold its receiver, and so the server's
/// LISTEN, until a change came that it could not deliver.
struct Forwarding(JoinHandle<()>);

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl MemoryServer {
    pub fn new(
        database: Arc<Database>, options: Arc<Options>, changes: Arc<Changes>,
    ) -> MemoryServer {
        MemoryServer {
            database,
            options,
            tools: Arc::new(OnceCell::new()),
            changes,
            subscribed: Arc::default(),
        }
    }

    /// The server for another client's session: the same database, tools
    /// and changes, none of the subscriptions.
    pub fn for_new_session(&self) -> MemoryServer {
        MemoryServer { subscribed: Arc::default(), ..self.clone() }
    }

    /// The database for one request: its statement is cancelled in
    /// PostgreSQL when the request is (by the client, or by the server
    /// going away), so a cancelled write does not commit later and its
    /// connection goes back to the pool.
    fn database_for(&self, context: &RequestContext<RoleServer>) -> Database {
        let token = context.ct.clone();
        self.database.cancelled_by(database::cancellation(async move { token.cancelled().await }))
    }

    fn offered(&self, uri: &str) -> Result<(), ErrorData> {
        if resources::offered(&self.options).iter().any(|resource| resource.uri() == uri) {
            Ok(())
        } else {
            Err(ErrorData::resource_not_found(format!("no resource {uri}"), None))
        }
    }
}

/// The requests this server serves. rmcp reads a request of one of them
/// whose params do not fit the method (`tools/call` with a name that is not
/// a string, `resources/read` without a uri) as a custom request.
const SERVED: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
];

/// The error that answers a custom request: invalid params (-32602) for a
/// method served whose params did not fit it, method not found (-32601)
/// for any other.
fn custom_request_error(request: &CustomRequest) -> ErrorData {
    if SERVED.contains(&request.method.as_str()) {
        ErrorData::invalid_params(
            format!("the params of {} are not valid for it", request.method),
            None,
        )
    } else {
        ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method.clone(), None)
    }
}

impl ServerHandler for MemoryServer {
    async fn on_custom_request(
        &self, request: CustomRequest, _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(custom_request_error(&request))
    }

    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::from_build_env();
        implementation.name = "agent-memory-mcp".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(implementation)
        .with_instructions(
            "Memory kept in PostgreSQL by agent_memory. Use `memory` for files under /, \
                 `recall` to find what you know by its words, `remember`/`forget` for facts of \
                 this conversation, and the graph tools for the knowledge graph.",
        )
    }

    async fn list_tools(
        &self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // The definitions come from the database: while it has never been
        // reachable there is no list to give, which MCP can only say as a
        // protocol error.
        let tools = self
            .tools
            .get_or_try_init(|| async {
                let definitions = tools::definitions(&self.database, &self.options).await?;
                Ok::<_, crate::database::Failure>(
                    definitions
                        .into_iter()
                        .map(|definition| {
                            Tool::new(
                                definition.name,
                                definition.description,
                                Arc::new(definition.input_schema),
                            )
                        })
                        .collect(),
                )
            })
            .await
            .map_err(|failure| ErrorData::internal_error(failure.envelope().to_string(), None))?;
        Ok(ListToolsResult::with_all_items(tools.clone()))
    }

    async fn call_tool(
        &self, request: CallToolRequestParams, context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let database = self.database_for(&context);
        let answer = tools::call(&database, &self.options, &request.name, arguments)
            .await
            .ok_or_else(|| ErrorData::invalid_params(format!("no tool {}", request.name), None))?;
        let content = vec![ContentBlock::text(answer.envelope.to_string())];
        let mut result = if answer.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        if let Value::Object(envelope) = answer.envelope {
            result.structured_content = Some(Value::Object(envelope));
        }
        Ok(result.into())
    }

    async fn list_resources(
        &self, _request: Option<PaginatedRequestParams>, _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            resources::offered(&self.options)
                .into_iter()
                .map(|resource| {
                    rmcp::model::Resource::new(resource.uri(), resource.name())
                        .with_description(resource.description())
                        .with_mime_type(resource.mime_type())
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self, request: ReadResourceRequestParams, context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let resource = resources::offered(&self.options)
            .into_iter()
            .find(|resource| resource.uri() == request.uri)
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
            })?;
        let text = resource
            .read(&self.database_for(&context))
            .await
            .map_err(|failure| ErrorData::internal_error(failure.envelope().to_string(), None))?;
        let contents =
            ResourceContents::text(text, request.uri).with_mime_type(resource.mime_type());
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    /// Clients of protocol 2026-07-28 and later: one stream per listen
    /// request, for the resources it names among this server's.
    fn accepted_subscription_filter(
        &self, requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let offered: Vec<String> =
            resources::offered(&self.options).iter().map(|resource| resource.uri()).collect();
        let mut accepted = SubscriptionFilter::new();
        accepted.resource_subscriptions = Some(
            requested
                .resource_subscriptions
                .iter()
                .flatten()
                .filter(|uri| offered.contains(uri))
                .cloned()
                .collect(),
        );
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let wanted = context.accepted().resource_subscriptions.clone().unwrap_or_default();
        let mut changes = self.changes.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => match change {
                    Ok(uri) if wanted.contains(&uri) => {
                        if context.sink().notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                    Ok(_) => {}
                    // Some changes were missed: each resource may have changed.
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        for uri in &wanted {
                            if context.sink().notify_resource_updated(uri.clone()).await.is_err() {
                                return Ok(());
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    /// Clients of earlier protocols: resources/subscribe and unsubscribe.
    #[allow(deprecated)]
    async fn subscribe(
        &self, request: SubscribeRequestParams, context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.offered(&request.uri)?;
        let uri = request.uri;
        let peer = context.peer;
        let mut changes = self.changes.subscribe();
        let forwarded = uri.clone();
        let forwarding = tokio::spawn(async move {
            loop {
                match changes.recv().await {
                    Ok(changed) if changed != forwarded => continue,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
                let notified = peer
                    .notify_resource_updated(ResourceUpdatedNotificationParam::new(
                        forwarded.clone(),
                    ))
                    .await;
                if notified.is_err() {
                    return;
                }
            }
        });
        // A subscription made again replaces the earlier one, which ends.
        self.subscribed.lock().await.insert(uri, Forwarding(forwarding));
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self, request: UnsubscribeRequestParams, _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscribed.lock().await.remove(&request.uri);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest};

    fn custom(line: &str) -> CustomRequest {
        match serde_json::from_str::<ClientJsonRpcMessage>(line).expect("a message") {
            ClientJsonRpcMessage::Request(request) => match request.request {
                ClientRequest::CustomRequest(custom) => custom,
                other => panic!("not a custom request: {other:?}"),
            },
            other => panic!("not a request: {other:?}"),
        }
    }

    #[test]
    fn params_that_do_not_fit_a_method_served_are_invalid_params() {
        for line in [
            r#"{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":5}}"#,
            r#"{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"memory","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":19,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":20,"method":"resources/read","params":{}}"#,
        ] {
            assert_eq!(
                custom_request_error(&custom(line)).code,
                ErrorCode::INVALID_PARAMS,
                "{line}"
            );
        }
        let unknown = custom(r#"{"jsonrpc":"2.0","id":21,"method":"no/such","params":{}}"#);
        assert_eq!(custom_request_error(&unknown).code, ErrorCode::METHOD_NOT_FOUND);
    }
}
