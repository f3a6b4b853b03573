//! What the operator sets: the database, and the memory the model may use.
//!
//! Scope, session, user and owner come only from here (the client's
//! configuration), never from a tool's arguments, so no model can reach
//! memory it was not given.

use clap::Parser;

#[derive(Debug, Clone, Parser)]
#[command(
    name = "agent-memory-mcp",
    version,
    about = "An MCP server for agent_memory: memory tools and resources from PostgreSQL"
)]
pub struct Options {
    /// The database, as a libpq connection string or URL.
    #[arg(long, env = "DATABASE_URL")]
    pub dsn: String,

    /// The memory tool's scope (see agent_memory.memory_scope): enables the
    /// `memory` tool and the memory://{scope}/tree resource.
    #[arg(long, env = "AGENT_MEMORY_SCOPE")]
    pub scope: Option<String>,

    /// The session whose key-value memory `remember` and `forget` keep.
    #[arg(long, env = "AGENT_MEMORY_SESSION")]
    pub session: Option<String>,

    /// The user the session belongs to: `remember` creates the session for
    /// this user when it does not exist (or has expired).
    #[arg(long, env = "AGENT_MEMORY_USER")]
    pub user: Option<String>,

    /// The owner of the graph the graph tools read and write.
    #[arg(long, env = "AGENT_MEMORY_OWNER")]
    pub owner: Option<String>,

    /// Sets agent_memory.tenant on every connection (tenant isolation).
    #[arg(long, env = "AGENT_MEMORY_TENANT")]
    pub tenant: Option<String>,

    /// Serve streamable HTTP on this address (path /mcp) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,

    /// The most connections the server opens to the database.
    #[arg(long, default_value_t = 4)]
    pub pool_size: usize,
}

impl Options {
    /// Whether any memory is given at all: without it every tool would
    /// refuse, which is an operator's mistake worth saying at start.
    pub fn names_some_memory(&self) -> bool {
        self.scope.is_some()
            || self.session.is_some()
            || self.user.is_some()
            || self.owner.is_some()
    }
}
