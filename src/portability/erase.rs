//! Erase a user: every session the user owns, with all it holds (entries
//! and their versions, messages, working memory), and, when the
//! application keys graph memory or memory files by the user, the graph
//! owners and file scopes it names, with their versions.
//!
//! Sessions are locked one by one with their write locks, in id order (as
//! two erasures of one user then queue), and deleted; the rows they own go
//! by cascade. A session the user gets while the erasure runs is found by
//! the next round. A scope's row is locked before its files, as every
//! other writer of files locks it, and made when it is gone, as they make
//! it.

use pgrx::prelude::*;

use agent_memory_core::Error;

use crate::files::store;
use crate::pg::args::{TEXT, TEXT_ARRAY, checked_id};
use crate::pg::datums::JsonbBytes;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::notify;
use crate::pg::plans::{Columns, Statement};
use crate::sessions::lock_session;

/// What an erasure removed, by kind.
#[derive(Default)]
struct Erased {
    sessions: i64,
    entries: i64,
    entry_versions: i64,
    messages: i64,
    parts: i64,
    nodes: i64,
    node_versions: i64,
    files: i64,
    file_versions: i64,
    directories: i64,
}

fn checked_keys<'a>(
    argument: &str, keys: &'a Option<Vec<Option<String>>>,
) -> SqlResult<Vec<&'a str>> {
    let mut checked = Vec::new();
    for key in keys.iter().flatten() {
        match key.as_deref() {
            None => {
                return Err(Error::invalid(format!("{argument} must not hold NULL"))).or_report();
            }
            Some("") => {
                return Err(Error::invalid(format!("{argument} must not hold an empty key")))
                    .or_report();
            }
            Some(key) => checked.push(key),
        }
    }
    checked.sort_unstable();
    checked.dedup();
    Ok(checked)
}

/// Remove everything user `user_id` holds in the caller's tenant: its
/// sessions with all they hold, the graph memory of `owners` and the
/// memory files of `scopes` (for an application that keys them by the
/// user), with every kept version. Returns how many rows of each kind
/// went. Each graph and scope that held something is announced at commit,
/// as a write of it is.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn erase_user(
    user_id: Option<&str>, owners: default!(Option<Vec<Option<String>>>, "NULL"),
    scopes: default!(Option<Vec<Option<String>>>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let user_id = checked_id("user_id", user_id)?;
    let owners = checked_keys("owners", &owners)?;
    let scopes = checked_keys("scopes", &scopes)?;
    let erased = Spi::connect_mut(|client| -> SqlResult<Erased> {
        let mut erased = Erased::default();
        loop {
            let table = USER_SESSIONS.run(client, &[user_id.into()])?;
            let mut sessions = Vec::with_capacity(table.len());
            for row in table {
                sessions.push(row.required::<String>(1, "session_id")?);
            }
            if sessions.is_empty() {
                break;
            }
            for session_id in &sessions {
                lock_session(session_id)?;
            }
            let row = DELETE_SESSIONS.run(client, &[user_id.into(), sessions.into()])?.first();
            erased.sessions += row.required::<i64>(1, "sessions")?;
            erased.entries += row.required::<i64>(2, "entries")?;
            erased.entry_versions += row.required::<i64>(3, "entry versions")?;
            erased.messages += row.required::<i64>(4, "messages")?;
            erased.parts += row.required::<i64>(5, "parts")?;
        }
        // The versions go in a statement of their own, after the nodes or
        // files: an edit that committed while their delete waited for its
        // row kept a version that the delete's snapshot does not show, and
        // an edit after it finds no row to keep.
        if !owners.is_empty() {
            let row = DELETE_GRAPHS.run(client, &[owners.clone().into()])?.first();
            erased.nodes = row.required::<i64>(1, "nodes")?;
            for owner in row.required::<Vec<String>>(2, "owners")? {
                notify::queue_graph_change(&owner)?;
            }
            erased.node_versions = versions_deleted(client, &DELETE_NODE_VERSIONS, &owners)?;
        }
        if !scopes.is_empty() {
            // As the writers take it, in order: a scope whose row is gone
            // (its last file deleted, its kept versions left) gets one, so
            // that a restore racing the erasure waits for it, or it for
            // the restore, and never writes back what the erasure deletes.
            for scope in &scopes {
                store::lock_scope(client, scope)?;
            }
            let row = DELETE_SCOPES.run(client, &[scopes.clone().into()])?.first();
            erased.files = row.required::<i64>(1, "files")?;
            erased.directories = row.required::<i64>(2, "directories")?;
            for scope in row.required::<Vec<String>>(3, "scopes")? {
                notify::queue_files_change(&scope)?;
            }
            erased.file_versions = versions_deleted(client, &DELETE_FILE_VERSIONS, &scopes)?;
        }
        Ok(erased)
    })?;
    Ok(JsonbBytes::from_value(serde_json::json!({
        "sessions": erased.sessions,
        "entries": erased.entries,
        "entry_versions": erased.entry_versions,
        "messages": erased.messages,
        "parts": erased.parts,
        "nodes": erased.nodes,
        "node_versions": erased.node_versions,
        "files": erased.files,
        "file_versions": erased.file_versions,
        "directories": erased.directories,
    })))
}

/// Run one of the version deletes for `keys`: how many went.
fn versions_deleted(
    client: &mut pgrx::spi::SpiClient<'_>, statement: &'static Statement, keys: &[&str],
) -> SqlResult<i64> {
    statement.run(client, &[keys.to_vec().into()])?.first().required::<i64>(1, "versions")
}

// The statements. Each names the caller's tenant: a superuser, whom
// row-level security lets through, erases only that tenant's rows too.

/// The sessions of user $1, in id order.
static USER_SESSIONS: Statement = Statement::read_write(
    "SELECT s.session_id FROM agent_memory.sessions s
     WHERE s.user_id = $1 AND s.tenant = agent_memory.caller_tenant()
     ORDER BY s.session_id",
    &[TEXT],
);

/// Delete sessions $2 of user $1 (locked) and count what they held, which
/// goes with them by cascade.
static DELETE_SESSIONS: Statement = Statement::read_write(
    "WITH s AS MATERIALIZED (
       SELECT s.session_id, s.tenant FROM agent_memory.sessions s
       WHERE s.session_id = ANY ($2) AND s.user_id = $1 AND s.tenant = agent_memory.caller_tenant()),
     held AS MATERIALIZED (
       SELECT (SELECT count(*) FROM agent_memory.kv_entries k JOIN s USING (session_id, tenant)) AS entries,
              (SELECT count(*) FROM agent_memory.kv_entry_versions v JOIN s USING (session_id, tenant)) AS entry_versions,
              (SELECT count(*) FROM agent_memory.thread_messages m JOIN s USING (session_id, tenant)) AS messages,
              (SELECT count(*) FROM agent_memory.wm_parts p JOIN s USING (session_id, tenant)) AS parts),
     gone AS (
       DELETE FROM agent_memory.sessions x USING s
       WHERE x.session_id = s.session_id AND x.tenant = s.tenant
       RETURNING 1)
     SELECT (SELECT count(*) FROM gone), h.entries, h.entry_versions, h.messages, h.parts FROM held h",
    &[TEXT, TEXT_ARRAY],
);

/// `WITH name AS (...), ...`: each CTE deletes the rows of its table
/// whose `$key` is one of $1, in the caller's tenant, returning the key of
/// each.
macro_rules! deleting {
    ($key:literal; $first:ident: $first_table:literal $(, $name:ident: $table:literal)*) => {
        concat!(
            "WITH ",
            deleting!(@one $key, $first, $first_table)
            $(, ", ", deleting!(@one $key, $name, $table))*
        )
    };
    (@one $key:literal, $name:ident, $table:literal) => {
        concat!(
            stringify!($name),
            " AS (DELETE FROM agent_memory.",
            $table,
            " x WHERE x.",
            $key,
            " = ANY ($1) AND x.tenant = agent_memory.caller_tenant() RETURNING x.",
            $key,
            ")"
        )
    };
}

/// Delete the graph nodes of owners $1; returns how many, and the owners
/// that had nodes.
static DELETE_GRAPHS: Statement = Statement::read_write(
    concat!(
        deleting!("owner"; nodes: "graph_nodes"),
        " SELECT (SELECT count(*) FROM nodes), ARRAY(SELECT DISTINCT owner FROM nodes)"
    ),
    &[TEXT_ARRAY],
);

/// Delete the versions in `$table` whose `$key` is one of $1, in the
/// caller's tenant; returns how many.
macro_rules! deleting_versions {
    ($key:literal, $table:literal) => {
        Statement::read_write(
            concat!(
                deleting!($key; versions: $table),
                " SELECT count(*) FROM versions"
            ),
            &[TEXT_ARRAY],
        )
    };
}

/// Delete the saved versions of the nodes of owners $1.
static DELETE_NODE_VERSIONS: Statement = deleting_versions!("owner", "graph_node_versions");

/// Delete the files of scopes $1, the directories kept in them and the
/// scopes' rows; returns the counts and the scopes that had files or
/// directories.
static DELETE_SCOPES: Statement = Statement::read_write(
    concat!(
        deleting!("scope";
            files: "memory_files",
            directories: "memory_directories",
            scopes: "memory_scopes"),
        " SELECT (SELECT count(*) FROM files), (SELECT count(*) FROM directories),
                 ARRAY(SELECT scope FROM files UNION SELECT scope FROM directories)"
    ),
    &[TEXT_ARRAY],
);

/// Delete the kept versions of the files of scopes $1.
static DELETE_FILE_VERSIONS: Statement = deleting_versions!("scope", "memory_file_versions");
