//! agent-memory-mcp: agent_memory's tools and resources for any MCP client,
//! over stdio (the default) or streamable HTTP (`--http ADDR`, path /mcp).
//! It logs to stderr only: on stdio, stdout is the protocol.

mod changes;
mod database;
mod options;
mod resources;
mod server;
mod stdio;
mod tools;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::changes::Changes;
use crate::database::Database;
use crate::options::Options;
use crate::server::MemoryServer;

/// How long the server waits, when it closes, for its cancelled statements
/// to end.
const STATEMENTS_END_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AGENT_MEMORY_MCP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let options = Options::parse();
    if !options.names_some_memory() {
        tracing::warn!(
            "none of --scope, --session, --user, --owner is set: only recall is offered, and it refuses"
        );
    }
    let started = database::connection_config(&options)
        .and_then(|config| Ok((Database::new(config.clone(), &options)?, config)));
    let (database, config) = match started {
        Ok(started) => started,
        Err(message) => {
            eprintln!("agent-memory-mcp: {message}");
            return ExitCode::FAILURE;
        }
    };
    let options = Arc::new(options);
    let database = Arc::new(database);
    let server = MemoryServer::new(
        database.clone(),
        options.clone(),
        Arc::new(Changes::new(config, &options)),
    );
    let served = match options.http {
        None => serve_stdio(server).await,
        Some(address) => serve_http(address, server).await,
    };
    // No statement of this server keeps running once it has gone: whatever
    // was still running is cancelled in PostgreSQL (and rolled back).
    database.close(STATEMENTS_END_PATIENCE).await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("agent-memory-mcp: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn serve_stdio(server: MemoryServer) -> Result<(), String> {
    let (transport, writer) = stdio::transport();
    let running = server.serve(transport).await.map_err(|error| error.to_string())?;
    // Once stdin ends, rmcp gives the calls still running five seconds to
    // finish and be answered, then cancels the rest: their statements are
    // cancelled in PostgreSQL and they are not answered.
    running.waiting().await.map_err(|error| error.to_string())?;
    // The answers given are all written out before the process ends.
    let _ = writer.await;
    Ok(())
}

async fn serve_http(address: std::net::SocketAddr, server: MemoryServer) -> Result<(), String> {
    let service = StreamableHttpService::new(
        move || Ok(server.for_new_session()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|error| format!("--http {address}: {error}"))?;
    tracing::info!("serving streamable HTTP on http://{address}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|error| error.to_string())
}
