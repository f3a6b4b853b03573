//! Working memory (seeds 000 and 001): parts of a (session, node) entry,
//! each stored on its own, sanitised on every write, with a version per
//! part and a notification on every real change.
//!
//! Writers of one session queue on the session's write lock (as key-value
//! writes do), so a patch reads the value it merges into after every
//! earlier writer committed, and concurrent patches of one part all
//! survive. This file holds the part-level functions; the composed
//! snapshot builds on them.

use pgrx::JsonB;
use pgrx::prelude::*;
use serde_json::Value;

use agent_memory_core::Error;
use agent_memory_core::working_memory::{self as wm, Part};

use crate::error::{OrReport, SqlResult};
use crate::plans::{Statement, first_value_of, kept};
use crate::sessions::{
    INT4, JSONB, TEXT, active, checked_id, idle_timeout_minutes, lock_session, session_gone,
};
use crate::settings;

/// The node argument: NULL is the session's global entry ('' in the table).
pub fn node_key(node_id: Option<&str>) -> SqlResult<&str> {
    match node_id {
        None => Ok(""),
        Some(node) if node.is_empty() || node == wm::GLOBAL_NODE => Ok(""),
        Some(node) => checked_id("node_id", Some(node)),
    }
}

fn checked_part(part: Option<&str>) -> SqlResult<Part> {
    Part::parse(part.ok_or_else(|| Error::null("part")).or_report()?).or_report()
}

/// The keys `agent_memory.strip_node_keys` names.
pub fn strip_keys() -> Vec<String> {
    settings::STRIP_NODE_KEYS
        .get()
        .map(|keys| wm::strip_keys(&keys.to_string_lossy()))
        .unwrap_or_default()
}

/// The notification of a change to an entry: `pg_notify('agent_memory',
/// {session_id, node_id, part, version})`, node NULL for the global entry;
/// part and version NULL when the whole entry was cleared.
macro_rules! notify_change {
    ($session:literal, $node_key:literal, $part:literal, $version:literal) => {
        concat!(
            "pg_catalog.pg_notify('agent_memory', pg_catalog.json_build_object(
               'session_id', ",
            $session,
            ", 'node_id', NULLIF(",
            $node_key,
            ", ''), 'part', ",
            $part,
            ", 'version', ",
            $version,
            ")::text)"
        )
    };
}
pub(crate) use notify_change;

/// Store a sanitised part unless it equals what is stored: ($1 session, $2
/// node key, $3 part, $4 value, $5 idle minutes). Returns whether the
/// session is alive and the new version (NULL: no change). A change
/// notifies channel agent_memory and renews the session's activity (when
/// over a second old, as message appends do).
static WRITE_PART: Statement = Statement {
    sql: concat!(
        "WITH alive AS (
           SELECT s.session_id FROM agent_memory.sessions s
           WHERE s.session_id = $1 AND ",
        active!("s", "$5"),
        "),
         written AS (
           INSERT INTO agent_memory.wm_parts AS p (session_id, node_key, part, value)
           SELECT alive.session_id, $2, $3, $4 FROM alive
           ON CONFLICT (session_id, node_key, part) DO UPDATE
             SET value = excluded.value, version = p.version + 1, updated_at = pg_catalog.now()
             WHERE p.value IS DISTINCT FROM excluded.value
           RETURNING p.version),
         renewed AS (
           UPDATE agent_memory.sessions s SET last_activity_at = pg_catalog.now()
           WHERE s.session_id = $1 AND s.last_activity_at < pg_catalog.now() - interval '1 second'
             AND EXISTS (SELECT FROM written))
         SELECT EXISTS (SELECT FROM alive),
                (SELECT version FROM written),
                (SELECT ",
        notify_change!("$1::text", "$2::text", "$3::text", "written.version"),
        " FROM written) IS NULL"
    ),
    args: &[TEXT, TEXT, TEXT, JSONB, INT4],
    writes: true,
};

/// A part as an entry sees it: the node's own, else the global one ($1
/// session, $2 node key, $3 part, $4 idle minutes). The first column says
/// whether the session is alive.
static READ_PART: Statement = Statement {
    sql: concat!(
        "SELECT true, (SELECT p.value FROM agent_memory.wm_parts p
                       WHERE p.session_id = s.session_id AND p.node_key IN ($2, '') AND p.part = $3
                       ORDER BY p.node_key DESC LIMIT 1)
         FROM agent_memory.sessions s WHERE s.session_id = $1 AND ",
        active!("s", "$4")
    ),
    args: &[TEXT, TEXT, TEXT, INT4],
    writes: true,
};

/// The stored value of `part` as the entry sees it (None: never set).
pub fn read_part(session_id: &str, node: &str, part: Part) -> SqlResult<Option<Value>> {
    Spi::connect_mut(|client| {
        let plan = kept(client, &READ_PART).or_report()?;
        let table = client
            .update(
                &*plan,
                None,
                &[
                    session_id.into(),
                    node.into(),
                    part.name().into(),
                    idle_timeout_minutes().into(),
                ],
            )
            .or_report()?;
        if table.is_empty() {
            return Err(session_gone(session_id)).or_report();
        }
        Ok(table.first().get::<JsonB>(2).or_report()?.map(|j| j.0))
    })
}

/// Write a sanitised value; Some(version) when it changed something.
pub fn write_part(
    session_id: &str,
    node: &str,
    part: Part,
    value: Value,
) -> SqlResult<Option<i32>> {
    Spi::connect_mut(|client| {
        let plan = kept(client, &WRITE_PART).or_report()?;
        let table = client
            .update(
                &*plan,
                None,
                &[
                    session_id.into(),
                    node.into(),
                    part.name().into(),
                    JsonB(value).into(),
                    idle_timeout_minutes().into(),
                ],
            )
            .or_report()?;
        let row = table.first();
        if row.get::<bool>(1).or_report()? != Some(true) {
            return Err(session_gone(session_id)).or_report();
        }
        row.get::<i32>(2).or_report()
    })
}

/// What a read shows of a part: the stored value, else the empty value of
/// the contract; the configuration always with its defaults filled in.
fn shown(part: Part, stored: Option<Value>) -> Value {
    match part {
        Part::Config => wm::effective_config(stored.as_ref()),
        _ => stored.unwrap_or_else(|| part.empty()),
    }
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_set(
    session_id: Option<&str>,
    part: Option<&str>,
    value: Option<JsonB>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<bool> {
    let session_id = checked_id("session_id", session_id)?;
    let part = checked_part(part)?;
    let node = node_key(node_id)?;
    let value = value.ok_or_else(|| Error::null("value")).or_report()?.0;
    let value = wm::sanitise(part, value, &strip_keys()).or_report()?;
    lock_session(session_id);
    Ok(write_part(session_id, node, part, value)?.is_some())
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_set_many(
    session_id: Option<&str>,
    parts: Option<JsonB>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let session_id = checked_id("session_id", session_id)?;
    let node = node_key(node_id)?;
    let Some(Value::Object(parts)) = parts.map(|p| p.0) else {
        return Err(Error::invalid(
            "parts must be a JSON object of part name to value",
        ))
        .or_report();
    };
    // Check every part before writing any: all or nothing.
    let strip = strip_keys();
    let mut clean = Vec::with_capacity(parts.len());
    for (name, value) in parts {
        let part = Part::parse(&name).or_report()?;
        clean.push((part, wm::sanitise(part, value, &strip).or_report()?));
    }
    lock_session(session_id);
    let mut changed = 0;
    for (part, value) in clean {
        if write_part(session_id, node, part, value)?.is_some() {
            changed += 1;
        }
    }
    Ok(changed)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_patch(
    session_id: Option<&str>,
    part: Option<&str>,
    patch: Option<JsonB>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonB> {
    let session_id = checked_id("session_id", session_id)?;
    let part = checked_part(part)?;
    let node = node_key(node_id)?;
    let patch = patch.ok_or_else(|| Error::null("patch")).or_report()?.0;
    wm::check_patch(part, &patch).or_report()?;
    // Under the session's write lock the read sees every earlier writer.
    lock_session(session_id);
    // A node's part that was never set starts from what the entry stores
    // (the global part, or nothing yet: the contract's empty value, except
    // for the parts that store only overrides, session and config).
    let base = read_part(session_id, node, part)?.unwrap_or_else(|| match part {
        Part::Session | Part::Config => Value::Object(Default::default()),
        _ => part.empty(),
    });
    let merged = wm::sanitise(part, wm::merge_patch(&base, &patch), &strip_keys()).or_report()?;
    write_part(session_id, node, part, merged.clone())?;
    Ok(JsonB(shown(part, Some(merged))))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_get(
    session_id: Option<&str>,
    part: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonB> {
    let session_id = checked_id("session_id", session_id)?;
    let part = checked_part(part)?;
    let node = node_key(node_id)?;
    let stored = read_part(session_id, node, part)?;
    Ok(JsonB(shown(part, stored)))
}

/// Delete entries and notify once per entry cleared (part and version
/// NULL): $1 session (NULL: every session), $2 node key (NULL: every entry
/// of the session; '' the global one, $3 = 1: every node entry but the
/// global one). Returns the number of entries cleared.
static CLEAR: Statement = Statement {
    sql: concat!(
        "WITH gone AS (
           DELETE FROM agent_memory.wm_parts p
           WHERE ($1::text IS NULL OR p.session_id = $1)
             AND ($2::text IS NULL OR p.node_key = $2)
             AND ($3 = 0 OR p.node_key <> '')
           RETURNING p.session_id, p.node_key)
         SELECT pg_catalog.count(",
        notify_change!("e.session_id", "e.node_key", "NULL::text", "NULL::int4"),
        ")::int4 FROM (SELECT DISTINCT session_id, node_key FROM gone) e"
    ),
    args: &[TEXT, TEXT, INT4],
    writes: true,
};

fn clear(session_id: Option<&str>, node: Option<&str>, node_entries_only: bool) -> SqlResult<i32> {
    Ok(first_value_of::<i32>(
        &CLEAR,
        &[
            session_id.into(),
            node.into(),
            i32::from(node_entries_only).into(),
        ],
    )?
    .unwrap_or(0))
}

/// Drop every node entry of a session, keeping the global one (seed 001:
/// unsetting the active node). The caller holds the session's write lock.
pub fn clear_node_entries(session_id: &str) -> SqlResult<i32> {
    clear(Some(session_id), None, true)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_clear(
    session_id: default!(Option<&str>, "NULL"),
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    match (session_id, node_id) {
        (None, None) => clear(None, None, false),
        (None, Some(_)) => {
            Err(Error::invalid("wm_clear needs the session_id of node_id")).or_report()
        }
        (Some(session_id), node_id) => {
            let session_id = checked_id("session_id", Some(session_id))?;
            // NULL node: the whole session; '__global__' its global entry.
            let node = node_id.map(|n| node_key(Some(n))).transpose()?;
            lock_session(session_id);
            clear(Some(session_id), node, false)
        }
    }
}
