//! agent_memory: an AI agent's memory inside PostgreSQL.
//!
//! This file is the table of contents. Each module below is one capability;
//! the rules and algorithms live in the pure `agent_memory_core` crate
//! (`core/`), and the modules here only translate between SQL and that core.

use pgrx::prelude::*;

::pgrx::pg_module_magic!();

/// Datums built by the extension for large results.
pub mod datums;
/// Every failure becomes a specific SQLSTATE here, and only here.
pub mod error;
/// Facts about the installed library (version).
pub mod meta;
/// Prepared plans kept per backend for the hot paths.
pub mod plans;
/// Large query results read row by row as the executor produces them.
pub mod stream;

/// Claude's memory tool (`memory_20250818`) over the memory tool's files.
pub mod claude_memory;
/// Removal of expired sessions and entries.
pub mod cleanup;
/// build_context / update_context (seed 004's context builder).
pub mod context;
/// Graph memory: versioned markdown nodes linked by refs (seed 003).
pub mod graph;
/// Graph memory as seed 003's markdown files: export, import, one node.
pub mod graph_markdown;
/// The tree projection of graph memory, as rows or JSON.
pub mod graph_tree;
/// Key-value working memory per session with a word budget (seed 004).
pub mod kv;
/// The memory tool: path-addressed files with seed 002's envelope.
pub mod memory_tool;
/// Bounded message history per (session, node) (seeds 000 and 001).
pub mod messages;
/// Change notifications: sent at commit, only while someone listens.
pub mod notify;
/// Sensitive-data detection and the write guard.
pub mod sensitive;
/// What a backend remembers of a session between calls.
pub mod session_cache;
/// Sessions: create, renew, end, inspect (seed 004).
pub mod sessions;
/// Every `agent_memory.*` setting (GUC), defined in one place.
pub mod settings;
/// Tenants: whose rows a caller sees under `agent_memory.tenant_isolation`.
pub mod tenants;
/// The background worker that runs the cleanup on a timer.
pub mod worker;
/// Working memory: parts of a (session, node) entry (seeds 000 and 001).
pub mod working_memory;
/// Composed reads: the snapshot, the entry, the context bundle.
pub mod working_memory_compose;
/// Working memory built from graph memory: init, focus, structure refresh.
pub mod working_memory_graph;

// Tables, indexes and comments: readable DDL in sql/, emitted before the
// generated function definitions.
extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
// Comments on the generated functions, emitted after everything else.
extension_sql_file!("../sql/comments.sql", name = "comments", finalize);
// Roles, grants and the pinned search_path of the trigger: after the
// comments, so after every function.
extension_sql_file!(
    "../sql/security.sql",
    name = "security",
    requires = ["comments", "tenants"]
);

/// Runs when the library is loaded: by `shared_preload_libraries` at server
/// start, or on first use of a function in a backend.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // pgrx appends a Rust backtrace to the DETAIL a client sees when an
    // error passes through Rust and the server's environment asks for
    // backtraces (RUST_BACKTRACE=1 is common in images). Clients must not
    // see the server's internals: keep library backtraces off unless the
    // operator sets RUST_LIB_BACKTRACE explicitly.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: a PostgreSQL process is single-threaded and this runs
        // before the extension does anything else, so nothing reads the
        // environment concurrently.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    settings::define_all();
    // SAFETY: plain reads of PostgreSQL globals, on the main thread.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    let upgrading = unsafe { pg_sys::IsBinaryUpgrade };
    // Without preloading everything but the worker works (schedule
    // cleanup_expired() yourself, e.g. with pg_cron).
    if preloading && !upgrading {
        worker::register();
    }
    notify::init(preloading && !upgrading);
    session_cache::init(preloading && !upgrading);
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::error::raise_and_catch_sqlstate;
    use agent_memory_core::ErrorKind;

    #[pg_test]
    fn every_error_kind_reaches_sql_with_its_documented_sqlstate() {
        for kind in ErrorKind::ALL {
            assert_eq!(raise_and_catch_sqlstate(kind), kind.sqlstate(), "{kind:?}");
        }
    }

    #[pg_test]
    fn version_matches_the_installed_extension() {
        let installed = Spi::connect(|client| {
            client
                .select(
                    "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'",
                    None,
                    &[],
                )?
                .first()
                .get_one::<String>()
        })
        .expect("query pg_extension");
        assert_eq!(installed.as_deref(), Some(crate::meta::library_version()));
    }

    #[pg_test]
    fn settings_have_their_documented_defaults() {
        let show = |name: &str| -> String {
            Spi::connect(|client| {
                client
                    .select(
                        "SELECT pg_catalog.current_setting($1)",
                        None,
                        &[name.into()],
                    )?
                    .first()
                    .get_one::<String>()
            })
            .expect("current_setting")
            .expect("setting exists")
        };
        assert_eq!(show("agent_memory.max_messages"), "200");
        assert_eq!(show("agent_memory.session_idle_timeout"), "500min");
        assert_eq!(show("agent_memory.memory_ttl"), "500h");
        assert_eq!(show("agent_memory.kv_word_budget"), "600");
        assert_eq!(show("agent_memory.cleanup_interval"), "5min");
        assert_eq!(show("agent_memory.sensitive_data"), "reject");
        assert_eq!(show("agent_memory.database"), "postgres");
    }
}

/// Hooks for `cargo pgrx test`: the test cluster preloads the library, as a
/// production server does.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'agent_memory'"]
    }
}
