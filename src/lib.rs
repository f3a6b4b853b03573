//! agent_memory: an AI agent's memory inside PostgreSQL.
//!
//! This file is the table of contents. Each folder is one capability, and
//! `agent_memory_core` (`core/`) holds the part of it that needs no
//! database, under the same name. The folders here run statements, hold
//! locks and convert between SQL values and the core's types.
//!
//! The folders stand on floors, and every arrow points down: `pg` is the
//! floor under everything; `sessions` stands on it; `messages`, `files` and
//! `graph` stand on both and never use one another; `working_memory`, on
//! top, composes messages and graph nodes into an agent's working memory;
//! `recall`, beside it, searches the tables of every kind, and
//! `portability` erases them by user.

// Functions return pgrx's `ErrorReport` by value: pgrx raises it with its
// own SQLSTATE, detail and hint, and any other error type would reach the
// client as a generic 22000. Errors are the cold path.
#![allow(clippy::result_large_err)]

use pgrx::prelude::*;

::pgrx::pg_module_magic!();

/// The floor: statements and plans, arguments, datums, streaming, errors,
/// settings, tenants and change notifications.
pub mod pg;

/// Sessions and what expires with them: key-value memory, the context
/// builder, the sensitive-data guard, and the cleanup with its worker.
pub mod sessions;

/// Bounded message history per (session, node).
pub mod messages;

/// Path-addressed memory files: the memory tool and Claude's dialect.
pub mod files;

/// Graph memory: versioned markdown nodes linked by refs, as files and as
/// a tree.
pub mod graph;

/// Working memory: the parts of a (session, node) entry, composed reads,
/// and entries built from graph memory.
pub mod working_memory;

/// Recall: every kind of memory found by its words, in one call.
pub mod recall;

/// What a user holds across every kind, as one thing: export, import
/// and erasure.
pub mod portability;

// Tables, indexes and comments: readable DDL in sql/, emitted before the
// generated function definitions.
extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
// Comments on the generated functions, emitted after everything else.
extension_sql_file!("../sql/comments.sql", name = "comments", finalize);
// Roles, grants and the pinned search_path of the trigger: after the
// comments, so after every function.
extension_sql_file!("../sql/security.sql", name = "security", requires = ["comments", "tenants"]);

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
    pg::settings::define_all();
    // SAFETY: plain reads of PostgreSQL globals, on the main thread.
    let preloading = unsafe { pg_sys::process_shared_preload_libraries_in_progress };
    let upgrading = unsafe { pg_sys::IsBinaryUpgrade };
    // Without preloading everything but the worker works (schedule
    // cleanup_expired() yourself, e.g. with pg_cron).
    if preloading && !upgrading {
        sessions::worker::register();
    }
    pg::notify::init(preloading && !upgrading);
    pg::citus::init(preloading && !upgrading);
    sessions::cache::init(preloading && !upgrading);
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg::error::raise_and_catch_sqlstate;
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
        assert_eq!(installed.as_deref(), Some(crate::pg::meta::library_version()));
    }

    #[pg_test]
    fn settings_have_their_documented_defaults() {
        let show = |name: &str| -> String {
            Spi::connect(|client| {
                client
                    .select("SELECT pg_catalog.current_setting($1)", None, &[name.into()])?
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
