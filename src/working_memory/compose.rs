//! Composed reads of working memory: the snapshot
//! (`working_memory`), the entry (`working_memory_entry`) and the
//! context bundle (`wm_context`).
//!
//! Each is one prepared statement that assembles the jsonb inside
//! PostgreSQL, so the whole read sees one snapshot and a stored 1,000-node
//! project graph is never converted to Rust and back: the extension only
//! checks the arguments and copies the finished jsonb out. Sections the
//! configuration turns off are not even read (their subqueries sit in
//! CASE branches that are never taken).
//!
//! Messages come from the message history: the entry's thread for a node,
//! every thread of the session for the global entry. A stored `messages`
//! part shows only while that history is empty, and
//! `last_user_message` likewise: the history is the record of the
//! conversation, the parts are what an app without one pushes.

use pgrx::prelude::*;

use agent_memory_core::Error;

use crate::pg::args::{INT4, TEXT};
use crate::pg::datums::JsonbBytes;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement, iso};
use crate::pg::settings;
use crate::sessions::{callers_active_session, idle_timeout_minutes, session_gone};
use crate::working_memory::parts::checked_session_node;

/// The entry's value of part `$name`: the node's own ($2), else the
/// session's global one (''), of the caller's tenant; NULL when neither is
/// set. Two primary-key probes (values are never NULL): `node_key IN ($2,
/// '')` could leave the node key out of the index condition and read
/// every entry of the session.
macro_rules! part {
    ($name:literal) => {
        concat!(
            "coalesce((SELECT p.value FROM agent_memory.wm_parts p
                       WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                         AND p.node_key = $2 AND p.part = '",
            $name,
            "'), (SELECT p.value FROM agent_memory.wm_parts p
                  WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                    AND p.node_key = '' AND p.part = '",
            $name,
            "'))"
        )
    };
}

/// The messages an entry shows: the global entry (statement 0 of a pair)
/// shows every thread of the session, a node's entry (statement 1) its own
/// thread. Two statements, so the thread is always in the index condition
/// of a node's read (`$2 = '' OR h.thread_key = $2` would not be in a
/// generic plan).
const EVERY_THREAD: usize = 0;
const OWN_THREAD: usize = 1;

/// The pair of statements (`[EVERY_THREAD, OWN_THREAD]`) of a composed
/// read: `$compose` builds the SQL around a filter of the messages `h`
/// it reads; both take $1 session, $2 node key, $3 idle minutes, $4 the
/// most bytes the value may take.
macro_rules! per_entry {
    ($compose:ident, $writes:literal) => {
        [
            Statement { sql: $compose!(""), args: &[TEXT, TEXT, INT4, INT4], writes: $writes },
            Statement {
                sql: $compose!(" AND h.thread_key = $2"),
                args: &[TEXT, TEXT, INT4, INT4],
                writes: $writes,
            },
        ]
    };
}

/// The pair's statement for the entry of node key `node`.
fn for_entry(pair: &'static [Statement; 2], node: &str) -> &'static Statement {
    &pair[if node.is_empty() { EVERY_THREAD } else { OWN_THREAD }]
}

/// The sessions row ($1, of the caller's tenant) if it is active (s), the
/// entry's session part (sp), the configuration in force (c: the defaults
/// overlaid with the stored config part, whose keys are checked on every
/// write) with its settings as SQL values (t), and what the composed value
/// may hold at most (z: `bytes`, see below); `$joins` may add more.
macro_rules! session_and_config {
    ($limit:literal, $thread:literal) => {
        session_and_config!($limit, $thread, "")
    };
    ($limit:literal, $thread:literal, $joins:expr) => {
        concat!(
            " FROM agent_memory.sessions s
              CROSS JOIN LATERAL (SELECT ",
            part!("session"),
            " AS value) sp
              CROSS JOIN LATERAL (SELECT '{\"history_length\": 20, \"include_project_structure\": true,
                                          \"include_context\": true, \"include_working_history\": true,
                                          \"auto_refresh_interval\": 0}'::jsonb
                                         || coalesce(",
            part!("config"),
            ", '{}') AS config) c
              CROSS JOIN LATERAL (SELECT (c.config ->> 'history_length')::int4 AS history_length,
                                         (c.config ->> 'include_project_structure')::bool AS structure,
                                         (c.config ->> 'include_context')::bool AS context,
                                         (c.config ->> 'include_working_history')::bool AS working_history) t ",
            composed_bytes!($limit, $thread),
            $joins,
            " WHERE ",
            callers_active_session!("$3")
        )
    };
}

/// What each message of a composed value takes beyond its content and
/// metadata: its role, seq and created_at, the five key names, the
/// object's header and entries and its entry in the array (148 bytes at
/// most, as `messages_json` builds them).
macro_rules! message_overhead {
    () => {
        "160"
    };
}

/// z.bytes: the bytes of the parts the entry shows (for each part name,
/// the node's own part, else the session's global one; parts the
/// configuration hides count too), of the newest `$limit` messages of its
/// scope (content, metadata and `message_overhead!` each) and of its last
/// user message (shown on its own too), read from the values' headers: at
/// least what a composed value takes of them. A read builds its value only
/// while this is within $4 (`agent_memory.max_result_bytes`).
macro_rules! composed_bytes {
    ($limit:literal, $thread:literal) => {
        concat!(
            "CROSS JOIN LATERAL (SELECT
               (SELECT coalesce(sum(pg_catalog.octet_length(w.content)::int8
                                    + agent_memory.value_bytes(w.metadata) + ",
            message_overhead!(),
            "), 0)
                FROM (SELECT h.content, h.metadata FROM agent_memory.thread_messages h
                      WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            "
                      ORDER BY h.seq DESC LIMIT ",
            $limit,
            ") w)
               + coalesce((SELECT pg_catalog.octet_length(h.content)::int8
                           FROM agent_memory.thread_messages h
                           WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            " AND h.role = 'user'
                           ORDER BY h.seq DESC LIMIT 1), 0)
               + (SELECT coalesce(sum(agent_memory.value_bytes(p.value)::int8), 0)
                  FROM agent_memory.wm_parts p
                  WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                    AND p.node_key = $2)
               + (SELECT coalesce(sum(agent_memory.value_bytes(p.value)::int8), 0)
                  FROM agent_memory.wm_parts p
                  WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                    AND p.node_key = '' AND $2 <> ''
                    AND NOT EXISTS (SELECT FROM agent_memory.wm_parts o
                                    WHERE o.session_id = $1 AND o.tenant = p.tenant
                                      AND o.node_key = $2 AND o.part = p.part)) AS bytes) z "
        )
    };
}

/// The newest `$limit` messages of the entry's scope, oldest first, in the
/// shape of `messages_json`; else (no message in the history) the newest of
/// the stored messages part; else `[]`. Either window drops the tool results
/// whose call it does not hold in the result's thread (the stored part is
/// one thread).
macro_rules! recent_messages {
    ($limit:literal, $thread:literal) => {
        concat!(
            "CASE WHEN EXISTS (SELECT FROM agent_memory.thread_messages h
                               WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            ")
             THEN coalesce(
               (WITH newest AS MATERIALIZED (
                  SELECT h.role, h.content, h.metadata, h.seq, h.created_at, h.thread_key
                  FROM agent_memory.thread_messages h
                  WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            "
                  ORDER BY h.seq DESC LIMIT ",
            $limit,
            ")
                SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                         'role', m.role, 'content', m.content, 'metadata', m.metadata,
                         'seq', m.seq, 'created_at', m.created_at) ORDER BY m.seq)
                FROM newest m WHERE ",
            crate::messages::holds_its_call!("m", "newest", "seq", "thread_key"),
            "), '[]')
             ELSE coalesce(
               (WITH newest AS MATERIALIZED (
                  SELECT a.e, a.i, a.e ->> 'role' AS role, a.e -> 'metadata' AS metadata,
                         ''::text AS thread_key
                  FROM pg_catalog.jsonb_array_elements(",
            part!("messages"),
            ") WITH ORDINALITY AS a (e, i) ORDER BY a.i DESC LIMIT ",
            $limit,
            ")
                SELECT pg_catalog.jsonb_agg(x.e ORDER BY x.i) FROM newest x WHERE ",
            crate::messages::holds_its_call!("x", "newest", "i", "thread_key"),
            "), '[]') END"
        )
    };
}

/// The last user message of the entry's scope as text: from the history,
/// else the stored part; NULL when neither has one.
macro_rules! last_user_message {
    ($thread:literal) => {
        concat!(
            "coalesce(
               (SELECT h.content FROM agent_memory.thread_messages h
                WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            " AND h.role = 'user'
                ORDER BY h.seq DESC LIMIT 1),
               ",
            part!("last_user_message"),
            " #>> '{}')"
        )
    };
}

macro_rules! empty_graph {
    () => {
        r#"'{"nodes": [], "edges": []}'::jsonb"#
    };
}

macro_rules! empty_structure {
    () => {
        r#"'{"project_graph": {"nodes": [], "edges": []}, "elements_graph": {"nodes": [], "edges": []}}'::jsonb"#
    };
}

/// The snapshot ($1 session, $2 node key, $3 idle minutes, $4 most bytes); no row
/// when the session is missing or expired.
macro_rules! snapshot {
    ($thread:literal) => {
        concat!(
            "SELECT CASE WHEN z.bytes <= $4 THEN pg_catalog.jsonb_build_object(
           'session', pg_catalog.jsonb_build_object(
              'session_id', s.session_id,
              'project_id', coalesce(sp.value ->> 'project_id', s.project_id, ''),
              'active_node_id', coalesce(sp.value ->> 'active_node_id', s.active_node_id, ''),
              'timestamp', ",
            iso!("s.last_activity_at"),
            "),
           'project_structure', CASE WHEN t.structure THEN coalesce(",
            part!("project_structure"),
            ", ",
            empty_structure!(),
            ") ELSE ",
            empty_structure!(),
            " END,
           'node_context', CASE WHEN t.context THEN coalesce(",
            part!("node_context"),
            ", '{}') ELSE '{}' END,
           'fetched_context', CASE WHEN t.context THEN coalesce(",
            part!("fetched_context"),
            ", '{}') ELSE '{}' END,
           'working_history', CASE WHEN t.working_history THEN coalesce(",
            part!("working_history"),
            ", '\"\"') ELSE '\"\"' END,
           'messages', ",
            recent_messages!("t.history_length", $thread),
            ",
           'last_user_message', coalesce(",
            last_user_message!($thread),
            ", ''),
           'config', c.config) END, z.bytes",
            session_and_config!("t.history_length", $thread)
        )
    };
}

static SNAPSHOT: [Statement; 2] = per_entry!(snapshot, false);

/// The snapshot as a function that has just written sees it: a read-only
/// statement would reuse the caller's snapshot, from before the writes.
static SNAPSHOT_AFTER_WRITES: [Statement; 2] = per_entry!(snapshot, true);

/// The entry ($1 session, $2 node key, $3 idle minutes, $4 most bytes): the same
/// parts under the names, the newest 50 messages, and when the
/// entry's own parts were first and last written.
macro_rules! entry {
    ($thread:literal) => {
        concat!(
            "SELECT CASE WHEN z.bytes <= $4 THEN pg_catalog.jsonb_build_object(
               'project_id', coalesce(sp.value ->> 'project_id', s.project_id),
               'current_node', CASE WHEN t.context THEN coalesce(",
            part!("node_context"),
            ", '{}') ELSE '{}' END,
               'structure_index', CASE WHEN t.structure THEN coalesce(",
            part!("project_structure"),
            " -> 'project_graph', ",
            empty_graph!(),
            ") ELSE ",
            empty_graph!(),
            " END,
               'recent_messages', ",
            recent_messages!("50", $thread),
            ",
               'work_history_summary', CASE WHEN t.working_history
              THEN (SELECT pg_catalog.jsonb_build_object('content', coalesce(w.value #>> '{}', ''),
                                                         'timestamp', ",
            iso!("w.updated_at"),
            ")
                    FROM (SELECT) one LEFT JOIN LATERAL (
                      SELECT e.value, e.updated_at FROM (
                        SELECT p.node_key, p.value, p.updated_at FROM agent_memory.wm_parts p
                        WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                          AND p.node_key = $2 AND p.part = 'working_history'
                        UNION ALL
                        SELECT p.node_key, p.value, p.updated_at FROM agent_memory.wm_parts p
                        WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
                          AND p.node_key = '' AND p.part = 'working_history') e
                      ORDER BY e.node_key DESC LIMIT 1) w ON true)
              ELSE '{\"content\": \"\", \"timestamp\": null}' END,
               'context_data', CASE WHEN t.context THEN coalesce(",
            part!("fetched_context"),
            ", '{}') ELSE '{}' END,
               'last_user_input', ",
            last_user_message!($thread),
            ",
               'created_at', (SELECT ",
            iso!("min(p.created_at)"),
            " FROM agent_memory.wm_parts p
             WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant() AND p.node_key = $2),
               'updated_at', (SELECT ",
            iso!("max(p.updated_at)"),
            " FROM agent_memory.wm_parts p
             WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant() AND p.node_key = $2))
             END, z.bytes",
            session_and_config!("50", $thread)
        )
    };
}

static ENTRY: [Statement; 2] = per_entry!(entry, false);

/// The context bundle ($1 session, $2 node key, $3 idle minutes, $4 most bytes):
/// the recent messages with what describes them, the working history and
/// the last user message. Column 3 is the entry's project.
macro_rules! context {
    ($thread:literal) => {
        concat!(
            "SELECT CASE WHEN z.bytes <= $4 THEN pg_catalog.jsonb_build_object(
               'messages', m.messages,
               'message_metadata', pg_catalog.jsonb_build_object(
              'session_id', s.session_id,
              'node_id', NULLIF($2, ''),
              'project_id', coalesce(sp.value ->> 'project_id', s.project_id),
              'history_length', t.history_length,
              'count', pg_catalog.jsonb_array_length(m.messages),
              'first_seq', m.messages -> 0 -> 'seq',
              'last_seq', m.messages -> -1 -> 'seq',
              'in_history', (SELECT pg_catalog.count(*) FROM agent_memory.thread_messages h
                             WHERE h.session_id = $1 AND h.tenant = agent_memory.caller_tenant()",
            $thread,
            ")),
               'working_history', CASE WHEN t.working_history THEN coalesce(",
            part!("working_history"),
            ", '\"\"') ELSE '\"\"' END,
               'last_user_message', coalesce(",
            last_user_message!($thread),
            ", '')) END, z.bytes,
               coalesce(sp.value ->> 'project_id', s.project_id)",
            session_and_config!(
                "t.history_length",
                $thread,
                concat!(
                    "CROSS JOIN LATERAL (SELECT CASE WHEN z.bytes <= $4 THEN ",
                    recent_messages!("t.history_length", $thread),
                    " END AS messages) m"
                )
            )
        )
    };
}

static CONTEXT: [Statement; 2] = per_entry!(context, false);

/// Run one of the composed reads; the session must be active. With
/// `project`, column 3 is read too.
fn compose(
    statements: &'static [Statement; 2], what_takes: &str, session_id: &str, node: &str,
    project: bool,
) -> SqlResult<(JsonbBytes, Option<String>)> {
    let statement = for_entry(statements, node);
    let max_bytes = settings::max_result_bytes();
    Spi::connect_mut(|client| {
        let args = [
            session_id.into(),
            node.into(),
            idle_timeout_minutes().into(),
            settings::max_result_bytes_arg().into(),
        ];
        let table = if statement.writes {
            statement.run(client, &args)?
        } else {
            statement.read(client, &args)?
        };
        if table.is_empty() {
            return Err(session_gone(session_id)).or_report();
        }
        let row = table.first();
        let Some(json) = row.value::<JsonbBytes>(1)? else {
            // Not built: what it would hold is past the limit.
            return Err(Error::too_large_to_build(what_takes, max_bytes)
                .with_hint("ask for fewer messages with the config's history_length, or read the parts with wm_part"))
            .or_report();
        };
        let project = if project { row.value::<String>(3)? } else { None };
        Ok((json, project))
    })
}

/// The snapshot of an entry after the calling function changed it.
pub fn snapshot_after_writes(session_id: &str, node: &str) -> SqlResult<JsonbBytes> {
    Ok(compose(&SNAPSHOT_AFTER_WRITES, "the snapshot takes", session_id, node, false)?.0)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn working_memory(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    Ok(compose(&SNAPSHOT, "the snapshot takes", session_id, node, false)?.0)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn working_memory_entry(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    Ok(compose(&ENTRY, "the entry takes", session_id, node, false)?.0)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_context(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
    project_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    let (bundle, project) = compose(&CONTEXT, "the context takes", session_id, node, true)?;
    // A caller naming a project must get that project's session only.
    if let Some(asked) = project_id
        && project.as_deref() != Some(asked)
    {
        let quoted = agent_memory_core::error::quoted;
        let belongs = match project.as_deref() {
            Some(actual) => format!("project {}", quoted(actual)),
            None => "no project".to_owned(),
        };
        return Err(Error::invalid(format!(
            "session {} belongs to {belongs}, not {}",
            quoted(session_id),
            quoted(asked)
        )))
        .or_report();
    }
    Ok(bundle)
}
