//! The MCP side: tools and resources over rmcp's server handler.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::database::Database;
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
}

impl MemoryServer {
    pub fn new(database: Arc<Database>, options: Arc<Options>) -> MemoryServer {
        MemoryServer {
            database,
            options,
            tools: Arc::new(OnceCell::new()),
        }
    }
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::from_build_env();
        implementation.name = "agent-memory-mcp".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
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
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
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
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let answer = tools::call(&self.database, &self.options, &request.name, arguments)
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
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
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
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let resource = resources::offered(&self.options)
            .into_iter()
            .find(|resource| resource.uri() == request.uri)
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource {}", request.uri), None)
            })?;
        let text = resource
            .read(&self.database)
            .await
            .map_err(|failure| ErrorData::internal_error(failure.envelope().to_string(), None))?;
        let contents =
            ResourceContents::text(text, request.uri).with_mime_type(resource.mime_type());
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
