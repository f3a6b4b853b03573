//! Working memory: parts of a (session, node) entry,
//! each stored on its own, sanitised on every write, with a version per
//! part and a notification on every real change.
//!
//! Writers of one session queue on the session's write lock (as key-value
//! writes do), so a patch reads the value it merges into after every
//! earlier writer committed, and concurrent patches of one part all
//! survive. This file holds the part-level functions; the composed
//! snapshot builds on them.

use std::cell::RefCell;

use pgrx::prelude::*;
use serde_json::Value;

use agent_memory_core::error::quoted;
use agent_memory_core::working_memory::{self as wm, Part};
use agent_memory_core::{Error, versions};

use crate::pg::args::{INT4, JSONB, TEXT, checked_id};
use crate::pg::datums::{JsonB, JsonbArg};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::notify;
use crate::pg::plans::{self, Columns, Statement};
use crate::pg::settings;
use crate::sessions::cache as session_cache;
use crate::sessions::{
    RENEW, active_until, callers_active_session, idle_timeout_minutes, lock_session_and_parts,
    session_gone,
};

/// The node argument: NULL is the session's global entry ('' in the table).
pub fn node_key(node_id: Option<&str>) -> SqlResult<&str> {
    match node_id {
        None => Ok(""),
        Some(node) if node.is_empty() || node == wm::GLOBAL_NODE => Ok(""),
        Some(node) => checked_id("node_id", Some(node)),
    }
}

/// The session and node key a working-memory call addresses, checked in
/// that order.
pub fn checked_session_node<'a>(
    session_id: Option<&'a str>, node_id: Option<&'a str>,
) -> SqlResult<(&'a str, &'a str)> {
    Ok((checked_id("session_id", session_id)?, node_key(node_id)?))
}

/// The session, part and node key a call on one part addresses, checked in
/// that order.
fn checked_part_of<'a>(
    session_id: Option<&'a str>, part: Option<&str>, node_id: Option<&'a str>,
) -> SqlResult<(&'a str, Part, &'a str)> {
    let session_id = checked_id("session_id", session_id)?;
    Ok((
        session_id,
        Part::parse(part.ok_or_else(|| Error::null("part")).or_report()?).or_report()?,
        node_key(node_id)?,
    ))
}

/// The keys `agent_memory.strip_node_keys` names.
pub fn strip_keys() -> Vec<String> {
    settings::STRIP_NODE_KEYS
        .get()
        .map(|keys| wm::strip_keys(&keys.to_string_lossy()))
        .unwrap_or_default()
}

thread_local! {
    /// The session this backend last renewed from a part write, and when
    /// (transaction start time, microseconds).
    static LAST_RENEWAL: RefCell<Option<(String, i64)>> = const { RefCell::new(None) };
}

/// Whether a change to `session_id` should renew its activity: not when
/// this backend renewed it less than a second ago (so a busy writer
/// updates the sessions row once a second, as message appends do). A
/// renewal rolled back delays the next one by a second at most.
fn renewal_due(session_id: &str) -> bool {
    // SAFETY: reads the current transaction's start time; never errors.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    LAST_RENEWAL.with(|last| {
        let mut last = last.borrow_mut();
        match last.as_ref() {
            Some((session, at)) if session == session_id && now - at < 1_000_000 => false,
            _ => {
                *last = Some((session_id.to_owned(), now));
                true
            }
        }
    })
}

/// Run `statement` on the entry's `part` ($1 session of the caller's
/// tenant, $2 node key, $3 part, $4 idle minutes; a row while the session
/// is active) and read its row; P0002 when the session is gone.
fn with_part_row<T>(
    statement: &'static Statement, session_id: &str, node: &str, part: Part,
    read: impl FnOnce(&pgrx::spi::SpiTupleTable<'_>) -> SqlResult<T>,
) -> SqlResult<T> {
    Spi::connect_mut(|client| {
        let table = statement.run(
            client,
            &[session_id.into(), node.into(), part.name().into(), idle_timeout_minutes().into()],
        )?;
        if table.is_empty() {
            return Err(session_gone(session_id)).or_report();
        }
        read(&table.first())
    })
}

/// The stored value of `part` as the entry sees it (None: never set).
pub fn read_part(session_id: &str, node: &str, part: Part) -> SqlResult<Option<Value>> {
    with_part_row(&READ_PART, session_id, node, part, |row| Ok(row.value::<JsonB>(2)?.map(|j| j.0)))
}

/// The version of the entry's own `part` (0: the entry has none, and shows
/// the global one or the empty value); P0002 when the session is gone.
fn own_version(session_id: &str, node: &str, part: Part) -> SqlResult<i32> {
    with_part_row(&PART_VERSION, session_id, node, part, |row| row.required::<i32>(1, "version"))
}

/// Check a write's precondition on the entry's own `part`, under the
/// session's write lock (so nothing changes it before the write).
fn check_expected(
    session_id: &str, node: &str, part: Part, expected: Option<i32>,
) -> SqlResult<()> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let current = own_version(session_id, node, part)?;
    if current == expected {
        return Ok(());
    }
    let entry = if node.is_empty() {
        "the global entry".to_owned()
    } else {
        format!("node {}", quoted(node))
    };
    let item = format!(
        "working-memory part {} of {entry} in session {}",
        quoted(part.name()),
        quoted(session_id)
    );
    Err(versions::conflict(&item, expected, current)).or_report()
}

/// Write a sanitised value; Some(version) when it changed something. The
/// caller holds the session's write lock. A change is announced at commit
/// and renews the session's activity.
pub fn write_part(
    session_id: &str, node: &str, part: Part, value: impl IntoDatum,
) -> SqlResult<Option<i32>> {
    Spi::connect_mut(|client| {
        let minutes = idle_timeout_minutes();
        // Whether the session is known to be active, so the write need
        // not check it (see session_cache).
        let trusted = if session_cache::known_active(session_id, minutes) {
            true
        } else if let Some(deletions) = session_cache::can_remember() {
            let until = active_until(client, session_id, minutes)?
                .ok_or_else(|| session_gone(session_id))
                .or_report()?;
            session_cache::remember(session_id, minutes, until, deletions);
            true
        } else if plans::on_citus()? {
            // Inside a function delegated with force_delegation, Citus
            // refuses an INSERT … SELECT (it finds no key value in it):
            // the check comes first, then the row is inserted as values.
            active_until(client, session_id, minutes)?
                .ok_or_else(|| session_gone(session_id))
                .or_report()?;
            true
        } else {
            false
        };
        let part_name = part.name();
        let table = if trusted {
            WRITE_TRUSTED
                .run(client, &[session_id.into(), node.into(), part_name.into(), value.into()])?
        } else {
            WRITE_CHECKED.run(
                client,
                &[session_id.into(), node.into(), part_name.into(), value.into(), minutes.into()],
            )?
        };
        if table.is_empty() {
            // Nothing written: the value was already stored, or (when not
            // checked before) the session is gone.
            if trusted || active_until(client, session_id, minutes)?.is_some() {
                return Ok(None);
            }
            return Err(session_gone(session_id)).or_report();
        }
        let version = table.first().value::<i32>(1)?;
        notify::queue_change(session_id, node, Some(part_name), version)?;
        if renewal_due(session_id) {
            RENEW.run(client, &[session_id.into(), minutes.into()])?;
        }
        Ok(version)
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_set(
    session_id: Option<&str>, part: Option<&str>, value: Option<JsonbArg>,
    node_id: default!(Option<&str>, "NULL"), expected_version: default!(Option<i32>, "NULL"),
) -> SqlResult<bool> {
    let (session_id, part, node) = checked_part_of(session_id, part, node_id)?;
    let value = value.ok_or_else(|| Error::null("value")).or_report()?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    let changed = if part.stored_as_written() {
        // Only the JSON type to check: the jsonb goes in as it came.
        let json_type =
            value.root_type().ok_or_else(|| Error::internal("value is not a jsonb")).or_report()?;
        wm::check_type(part, json_type).or_report()?;
        lock_session_and_parts(session_id)?;
        check_expected(session_id, node, part, expected)?;
        write_part(session_id, node, part, &value)?
    } else {
        let decoded = value.decode().ok_or_else(|| Error::null("value")).or_report()?;
        let clean = wm::sanitise(part, decoded, &strip_keys()).or_report()?;
        lock_session_and_parts(session_id)?;
        check_expected(session_id, node, part, expected)?;
        write_part(session_id, node, part, JsonB(clean))?
    };
    Ok(changed.is_some())
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_set_many(
    session_id: Option<&str>, parts: Option<JsonB>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    let parts = parts.ok_or_else(|| Error::null("parts")).or_report()?;
    let Value::Object(parts) = parts.0 else {
        return Err(Error::invalid("parts must be a JSON object of part name to value"))
            .or_report();
    };
    // Check every part before writing any: all or nothing.
    let strip = strip_keys();
    let mut clean = Vec::with_capacity(parts.len());
    for (name, value) in parts {
        let part = Part::parse(&name).or_report()?;
        clean.push((part, wm::sanitise(part, value, &strip).or_report()?));
    }
    // No part to write still names a session that must be there; the call
    // then writes nothing, nor locks anything.
    if clean.is_empty() {
        if crate::sessions::probe_active_until(session_id, idle_timeout_minutes())?.is_none() {
            return Err(session_gone(session_id)).or_report();
        }
        return Ok(0);
    }
    lock_session_and_parts(session_id)?;
    let mut changed = 0;
    for (part, value) in clean {
        if write_part(session_id, node, part, JsonB(value))?.is_some() {
            changed += 1;
        }
    }
    Ok(changed)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_patch(
    session_id: Option<&str>, part: Option<&str>, patch: Option<JsonB>,
    node_id: default!(Option<&str>, "NULL"), expected_version: default!(Option<i32>, "NULL"),
) -> SqlResult<JsonB> {
    let (session_id, part, node) = checked_part_of(session_id, part, node_id)?;
    let patch = patch.ok_or_else(|| Error::null("patch")).or_report()?.0;
    wm::check_patch(part, &patch).or_report()?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    // Under the session's write lock the read sees every earlier writer.
    lock_session_and_parts(session_id)?;
    check_expected(session_id, node, part, expected)?;
    // A node's part that was never set starts from what the entry stores
    // (the global part, or nothing yet: the contract's empty value, except
    // for the parts that store only overrides, session and config).
    let base = read_part(session_id, node, part)?.unwrap_or_else(|| match part {
        Part::Session | Part::Config => Value::Object(Default::default()),
        _ => part.empty(),
    });
    let merged = wm::sanitise(part, wm::merge_patch(&base, &patch), &strip_keys()).or_report()?;
    write_part(session_id, node, part, JsonB(merged.clone()))?;
    Ok(JsonB(wm::shown(part, Some(merged))))
}

/// One part of an entry as `wm_get` shows it, with the version of the
/// entry's own part (0: none) that a write's precondition names. Volatile,
/// as wm_get: it reads what every earlier writer committed.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_part(
    session_id: Option<&str>, part: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<pgrx::JsonB> {
    let (session_id, part, node) = checked_part_of(session_id, part, node_id)?;
    // One statement: a value and a version read apart could be of two
    // writes, and a precondition on that version would pass over the
    // second.
    let (stored, version) = with_part_row(&READ_PART_AND_VERSION, session_id, node, part, |row| {
        Ok((row.value::<JsonB>(2)?.map(|j| j.0), row.required::<i32>(3, "version")?))
    })?;
    Ok(pgrx::JsonB(serde_json::json!({
        "part": part.name(),
        "value": wm::shown(part, stored),
        "version": version,
    })))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_get(
    session_id: Option<&str>, part: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonB> {
    let (session_id, part, node) = checked_part_of(session_id, part, node_id)?;
    let stored = read_part(session_id, node, part)?;
    Ok(JsonB(wm::shown(part, stored)))
}

/// Delete entries of the caller's tenant: $1 session (NULL: every session
/// of the tenant), $2 node key (NULL: every entry of the session; '' the
/// global one), $3 = 1: every node entry but the global one. A row per
/// entry cleared.
static CLEAR: Statement = Statement::read_write(
    "WITH gone AS (
       DELETE FROM agent_memory.wm_parts p
       WHERE p.tenant = agent_memory.caller_tenant()
         AND ($1::text IS NULL OR p.session_id = $1)
         AND ($2::text IS NULL OR p.node_key = $2)
         AND ($3 = 0 OR p.node_key <> '')
       RETURNING p.session_id, p.node_key)
     SELECT DISTINCT session_id, node_key FROM gone",
    &[TEXT, TEXT, INT4],
);

/// Clear entries; each cleared entry is announced (part and version null).
fn clear(session_id: Option<&str>, node: Option<&str>, node_entries_only: bool) -> SqlResult<i32> {
    Spi::connect_mut(|client| {
        let table = CLEAR
            .run(client, &[session_id.into(), node.into(), i32::from(node_entries_only).into()])?;
        let mut cleared = 0;
        for row in table {
            let session = row.get::<&str>(1).or_report()?.unwrap_or_default();
            let node = row.get::<&str>(2).or_report()?.unwrap_or_default();
            notify::queue_change(session, node, None, None)?;
            cleared += 1;
        }
        Ok(cleared)
    })
}

/// Drop every node entry of a session, keeping the global one (what
/// unsetting the active node does). The caller holds the session's write lock.
pub fn clear_node_entries(session_id: &str) -> SqlResult<i32> {
    clear(Some(session_id), None, true)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_clear(
    session_id: default!(Option<&str>, "NULL"), node_id: default!(Option<&str>, "NULL"),
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
            lock_session_and_parts(session_id)?;
            clear(Some(session_id), node, false)
        }
    }
}

// The statements.

/// The upsert of a sanitised part, a no-op when the value equals what is
/// stored ($2 node key, $3 part, $4 value, then the tenant); returns the new
/// version. The time comes from the proposed row (its default, now()), as
/// Citus needs.
macro_rules! upsert_part {
    ($source:expr) => {
        concat!(
            "INSERT INTO agent_memory.wm_parts AS p (session_id, node_key, part, value, tenant) ",
            $source,
            " ON CONFLICT (session_id, node_key, part, tenant) DO UPDATE
                SET value = excluded.value, version = p.version + 1, updated_at = excluded.updated_at
                WHERE p.value IS DISTINCT FROM excluded.value
              RETURNING p.version"
        )
    };
}

/// Write a part of session $1 if the caller's tenant's session is active
/// ($5 idle minutes): a row only for a change. One statement, no CTE: this
/// is the hot path. The row comes from the session's (not from a FROM-less
/// SELECT), which Citus routes to the session's node.
static WRITE_CHECKED: Statement = Statement::read_write(
    upsert_part!(concat!(
        "SELECT s.session_id, $2, $3, $4, s.tenant FROM agent_memory.sessions s
         WHERE ",
        callers_active_session!("$5")
    )),
    &[TEXT, TEXT, TEXT, JSONB, INT4],
);

/// Write a part of session $1 of the caller's tenant, known to be active
/// (see session_cache).
static WRITE_TRUSTED: Statement = Statement::read_write(
    upsert_part!("VALUES ($1, $2, $3, $4, agent_memory.caller_tenant())"),
    &[TEXT, TEXT, TEXT, JSONB],
);

/// The version of the entry's own part ($1 session of the caller's tenant,
/// $2 node key, $3 part, $4 idle minutes; 0: none); no row when the
/// session is gone. Filtered by $1 itself, as READ_PART.
static PART_VERSION: Statement = Statement::read_write(
    concat!(
        "SELECT coalesce((SELECT p.version FROM agent_memory.wm_parts p
                          WHERE p.session_id = $1 AND p.tenant = s.tenant
                            AND p.node_key = $2 AND p.part = $3), 0)
         FROM agent_memory.sessions s
         WHERE ",
        callers_active_session!("$4")
    ),
    &[TEXT, TEXT, TEXT, INT4],
);

/// A part as an entry sees it: the node's own, else the global one ($1
/// session of the caller's tenant, $2 node key, $3 part, $4 idle minutes),
/// each a primary-key probe (values are never NULL), then
/// `$more_columns`. The first column says whether the session is alive.
/// Every table is filtered by $1 itself, so that Citus keeps the statement
/// on the session's shard.
macro_rules! part_read {
    ($more_columns:literal) => {
        Statement::read_write(
            concat!(
                "SELECT true, coalesce((SELECT p.value FROM agent_memory.wm_parts p
                                        WHERE p.session_id = $1 AND p.tenant = s.tenant
                                          AND p.node_key = $2 AND p.part = $3),
                                       (SELECT p.value FROM agent_memory.wm_parts p
                                        WHERE p.session_id = $1 AND p.tenant = s.tenant
                                          AND p.node_key = '' AND p.part = $3))",
                $more_columns,
                "
                 FROM agent_memory.sessions s
                 WHERE ",
                callers_active_session!("$4")
            ),
            &[TEXT, TEXT, TEXT, INT4],
        )
    };
}

static READ_PART: Statement = part_read!("");

/// READ_PART, and the version of the entry's own part (0: none), read in
/// the same snapshot.
static READ_PART_AND_VERSION: Statement = part_read!(
    ", coalesce((SELECT p.version FROM agent_memory.wm_parts p
                 WHERE p.session_id = $1 AND p.tenant = s.tenant
                   AND p.node_key = $2 AND p.part = $3), 0)"
);
