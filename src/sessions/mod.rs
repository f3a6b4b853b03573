//! Sessions: create, renew, end, inspect.
//!
//! A session is active while `last_activity_at` is within its own
//! `idle_timeout` or, when that is NULL, `agent_memory.session_idle_timeout`.
//! An expired session is gone for every read at once, whether or not the
//! cleanup has removed its row yet. Everything a session owns references it
//! with `ON DELETE CASCADE`, so ending or expiring it removes all of it in the
//! same transaction.

/// What a backend remembers of a session between calls.
pub mod cache;
/// Removal of expired sessions and entries.
pub mod cleanup;
/// The context builder: named entries of key-value memory as one document.
pub mod context;
/// Key-value memory per session, within a word budget.
pub mod kv;
/// History of key-value entries.
pub mod kv_versions;
/// Sensitive-data detection and the write guard.
pub mod sensitive;
/// The background worker that runs the cleanup on a timer.
pub mod worker;

use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::error::quoted;

use crate::pg::args::{INT4, INTERVAL, JSONB, TEXT, checked_id, checked_positive, required};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, FirstRow, Statement, first_value_of, on_citus};
use crate::pg::settings;

/// The idle timeout in force, in minutes (the statements take it as $n).
pub fn idle_timeout_minutes() -> i32 {
    settings::SESSION_IDLE_TIMEOUT_MIN.get()
}

/// Advisory lock class of the session write locks.
pub const SESSION_LOCK_CLASS: i32 = session_lock_class!();

/// Take the write lock of a session: a transaction-scoped advisory lock,
/// taken first by everything that changes a session's entries, so they queue
/// instead of deadlocking. It is the lock SQL takes with
/// `pg_advisory_xact_lock(1634559341, hashtext(session_id))` (for the
/// database's deterministic collation `hashtext` hashes the bytes), taken
/// here without running a statement. With tenant isolation on, the caller's
/// tenant is part of the key (`hashtext(tenant || chr(1) || session_id)`):
/// one tenant's writes never queue behind another's session of the same id.
///
/// Under REPEATABLE READ or SERIALIZABLE a call reads the transaction's
/// snapshot, which may predate a change of the session committed while
/// this one waited for the lock: the session's row is then locked too,
/// which fails with a serialization failure when it changed since (every
/// change of entries renews it), as a concurrent update of one row does.
///
/// On Citus an advisory lock holds on one node only: a call delegated to
/// the session's node and one run on the coordinator would not queue
/// behind each other. There the session's row, on its shard whichever node
/// asks, is locked for the write first. The advisory lock, taken after it,
/// still orders the writers of a session that has no row yet; taken
/// before it, a transaction that had written the row on the coordinator
/// and went on with a call delegated to the worker would wait there for a
/// writer waiting for that row.
pub fn lock_session(session_id: &str) -> SqlResult<()> {
    lock_session_row_and_name(session_id, false)
}

/// `lock_session` for a write that creates the session when it is missing
/// (an append). On Citus a missing row is inserted first (in the caller's
/// tenant, no user yet), then locked: a first write on another node waits
/// for it, then reads what it wrote, instead of reading from before it.
pub fn lock_session_creating(session_id: &str) -> SqlResult<()> {
    lock_session_row_and_name(session_id, true)
}

fn lock_session_row_and_name(session_id: &str, create: bool) -> SqlResult<()> {
    // On Citus the row's lock already fails a snapshot that predates a
    // change of the row.
    if !take_write_locks(session_id, create)? && uses_transaction_snapshot() {
        first_value_of::<i64>(&LOCK_SESSION_ROW, &[session_id.into()])?;
    }
    Ok(())
}

/// The session's write lock, after its row's on Citus (inserted first
/// when missing and `create`); returns whether the row was locked.
fn take_write_locks(session_id: &str, create: bool) -> SqlResult<bool> {
    let citus = on_citus()?;
    if citus {
        let lock_row = || first_value_of::<i64>(&LOCK_SESSION_ROW_FOR_WRITE, &[session_id.into()]);
        if lock_row()? == Some(0) && create {
            Spi::connect_mut(|client| {
                CREATE_IMPLICIT.run(client, &[session_id.into()])?;
                Ok(())
            })?;
            lock_row()?;
        }
    }
    take_write_lock(session_id)?;
    Ok(citus)
}

/// `lock_session`, and under REPEATABLE READ or SERIALIZABLE the
/// session's working-memory rows as well: a clear deletes them without
/// renewing the session, and a write read from an older snapshot would
/// bring a cleared part back.
pub fn lock_session_and_parts(session_id: &str) -> SqlResult<()> {
    take_write_locks(session_id, false)?;
    if uses_transaction_snapshot() {
        first_value_of::<i64>(&LOCK_SESSION_AND_PARTS, &[session_id.into()])?;
    }
    Ok(())
}

/// Whether statements read the transaction's snapshot (REPEATABLE READ,
/// SERIALIZABLE), as IsolationUsesXactSnapshot(), a macro in C, says.
pub fn uses_transaction_snapshot() -> bool {
    // SAFETY: a plain read of the backend's isolation level global.
    unsafe { pg_sys::XactIsoLevel >= pg_sys::XACT_REPEATABLE_READ as i32 }
}

fn take_write_lock(session_id: &str) -> SqlResult<()> {
    lock_name(SESSION_LOCK_CLASS, session_id, LockMode::ExclusiveUntilCommit)
}

/// How `lock_name` takes an advisory lock.
#[derive(Clone, Copy)]
pub enum LockMode {
    /// Exclusive, until the transaction ends.
    ExclusiveUntilCommit,
    /// Shared, until the transaction ends.
    SharedUntilCommit,
    /// Exclusive, let go as soon as it is taken: waits for every
    /// transaction that holds the lock (and those queued before it) to end.
    WaitForHolders,
}

/// Take the advisory lock of `name` in lock class `class`, keyed as a
/// session's write lock is: by `hashtext(name)`, or with tenant isolation
/// on by `hashtext(tenant || chr(1) || name)`.
pub fn lock_name(class: i32, name: &str, mode: LockMode) -> SqlResult<()> {
    unsafe extern "C" {
        // PostgreSQL's common/hashfn.c (what hash_any wraps)?; never errors.
        fn hash_bytes(k: *const u8, keylen: i32) -> u32;
    }
    let tenant = crate::pg::tenants::caller_tenant()?;
    let key = if tenant.is_empty() {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(format!("{tenant}\u{1}{name}"))
    };
    // SAFETY: hash_bytes reads exactly len bytes of the str (ids and
    // tenants are at most 256 characters); the advisory lock functions take
    // two int4 arguments and report errors by ereport, which pgrx's guard
    // turns into a panic that unwinds to the function boundary. Nothing
    // runs between taking and letting go of a lock held for no time.
    unsafe {
        let hash = hash_bytes(key.as_ptr(), key.len() as i32) as i32;
        let args = [class.into_datum(), hash.into_datum()];
        match mode {
            LockMode::ExclusiveUntilCommit => {
                pgrx::direct_function_call_as_datum(pg_sys::pg_advisory_xact_lock_int4, &args);
            }
            LockMode::SharedUntilCommit => {
                pgrx::direct_function_call_as_datum(
                    pg_sys::pg_advisory_xact_lock_shared_int4,
                    &args,
                );
            }
            LockMode::WaitForHolders => {
                pgrx::direct_function_call_as_datum(pg_sys::pg_advisory_lock_int4, &args);
                pgrx::direct_function_call_as_datum(pg_sys::pg_advisory_unlock_int4, &args);
            }
        }
    }
    Ok(())
}

/// Whether the caller's tenant stores a row of `session_id` (live or
/// expired), unlocked.
fn session_stored(client: &mut pgrx::spi::SpiClient<'_>, session_id: &str) -> SqlResult<bool> {
    Ok(!SESSION_STORED.read(client, &[session_id.into()])?.is_empty())
}

/// Renew a session's activity inside an open SPI connection; false when the
/// session does not exist or has expired.
pub fn renew_in(client: &mut pgrx::spi::SpiClient<'_>, session_id: &str) -> SqlResult<bool> {
    let renewed = RENEW.run(client, &[session_id.into(), idle_timeout_minutes().into()])?;
    Ok(!renewed.is_empty())
}

/// The error of a write to a session that is missing or has expired.
pub fn session_gone(session_id: &str) -> Error {
    Error::not_found(format!("session {} not found or expired", quoted(session_id)))
        .with_hint("Create it with agent_memory.create_session().")
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn create_session(
    user_id: Option<&str>, metadata: default!(Option<JsonB>, "'{}'"),
    session_id: default!(Option<&str>, "NULL"), idle_timeout: default!(Option<Interval>, "NULL"),
) -> SqlResult<String> {
    let user_id = checked_id("user_id", user_id)?;
    let session_id = match session_id {
        Some(id) => Some(checked_id("session_id", Some(id))?),
        None => None,
    };
    let metadata = metadata.map(|j| j.0).unwrap_or_else(|| serde_json::json!({}));
    if !metadata.is_object() {
        return Err(Error::invalid("metadata must be a JSON object")).or_report();
    }
    let idle_timeout = checked_positive("idle_timeout", idle_timeout)?;
    let minutes = idle_timeout_minutes();
    // A given id takes the session's write lock before its row, in the
    // order every writer takes them, so that this queues behind end_session
    // and writes instead of deadlocking with them, and a writer that would
    // create the id (an append) waits for this transaction's row instead of
    // holding the lock while it waits. A generated id takes none: nobody
    // else can name it (and creating many sessions in one transaction would
    // fill the lock table).
    if let Some(id) = session_id {
        lock_session(id)?;
    }

    Spi::connect_mut(|client| {
        // Two tries: a concurrent creator of the same id may win the insert.
        for _ in 0..2 {
            let stored = match session_id {
                Some(id) => session_stored(client, id)?,
                None => false,
            };
            if let Some(id) = session_id.filter(|_| stored) {
                let existing = LOCK_FOR_CREATE.run(client, &[id.into(), minutes.into()])?;
                if !existing.is_empty() {
                    let existing = existing.first();
                    // No owner: append_message created it; the first user claims it.
                    let owner = existing.value::<String>(1)?;
                    let active = existing.value::<bool>(2)?.unwrap_or(false);
                    if active && owner.as_deref().is_none_or(|owner| owner == user_id) {
                        if owner.is_none() {
                            CLAIM_SESSION.run(client, &[id.into(), user_id.into()])?;
                        }
                        renew_in(client, id)?;
                        return Ok(id.to_string());
                    }
                    if active {
                        return Err(Error::conflict(format!(
                            "session {} already belongs to another user",
                            quoted(id)
                        )))
                        .or_report();
                    }
                    // Expired: it no longer exists for anyone; replace it.
                    DELETE_SESSION.run(client, &[id.into(), minutes.into()])?;
                }
            }
            let inserted = INSERT_SESSION.run(
                client,
                &[
                    session_id.into(),
                    user_id.into(),
                    JsonB(metadata.clone()).into(),
                    idle_timeout.into(),
                ],
            )?;
            if let Some(id) = inserted.first_value::<String>(1).or_report()? {
                return Ok(id);
            }
        }
        // The id is taken by a row this statement cannot see: a session of
        // the caller's tenant created concurrently (ids are per tenant).
        Err(Error::conflict(match session_id {
            Some(id) => format!(
                "session id {} is taken by a session being created concurrently; try again or choose another id",
                quoted(id)
            ),
            None => "a generated session id collided twice; try again".to_owned(),
        }))
        .or_report()
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn renew_activity(session_id: &str) -> SqlResult<bool> {
    // The session's row is written after its write lock, as every writer
    // writes it.
    lock_session(session_id)?;
    Spi::connect_mut(|client| renew_in(client, session_id))
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn is_active(session_id: &str) -> SqlResult<bool> {
    let active =
        first_value_of::<bool>(&IS_ACTIVE, &[session_id.into(), idle_timeout_minutes().into()])?;
    Ok(active.unwrap_or(false))
}

/// Whether the caller's session `session_id` exists but is no longer
/// active (false when there is none).
pub fn session_expired(session_id: &str) -> SqlResult<bool> {
    let active = first_value_of::<bool>(
        &SESSION_ACTIVE,
        &[session_id.into(), idle_timeout_minutes().into()],
    )?;
    Ok(active == Some(false))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn end_session(session_id: &str) -> SqlResult<bool> {
    // An expired session is removed too, but it was already gone: false.
    lock_session(session_id)?;
    let was_active = first_value_of::<bool>(
        &DELETE_SESSION,
        &[session_id.into(), idle_timeout_minutes().into()],
    )?;
    Ok(was_active.unwrap_or(false))
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn session_stats() -> SqlResult<JsonbBytes> {
    let stats = Spi::connect(|client| {
        STATS
            .read_whole_table(client, &[idle_timeout_minutes().into()])?
            .first()
            .value::<JsonbBytes>(1)
    })?;
    required(stats, "session statistics")
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn user_sessions(
    user_id: &str,
) -> Result<
    // Spelled out (not SqlResult): pgrx must see `Result<TableIterator>` to
    // declare RETURNS TABLE.
    TableIterator<
        'static,
        (
            name!(session_id, String),
            name!(created_at, TimestampWithTimeZone),
            name!(last_activity_at, TimestampWithTimeZone),
            name!(active, bool),
        ),
    >,
    pgrx::pg_sys::panic::ErrorReport,
> {
    let rows = Spi::connect(|client| -> SqlResult<Vec<_>> {
        let table = USER_SESSIONS.read(client, &[user_id.into(), idle_timeout_minutes().into()])?;
        let mut rows = Vec::with_capacity(table.len());
        for row in table {
            rows.push((
                row.value::<String>(1)?.unwrap_or_default(),
                row.required::<TimestampWithTimeZone>(2, "created_at")?,
                row.required::<TimestampWithTimeZone>(3, "last_activity_at")?,
                row.value::<bool>(4)?.unwrap_or(false),
            ));
        }
        Ok(rows)
    })?;
    Ok(TableIterator::new(rows))
}

/// Until when session $1 of the caller's tenant stays active ($2 idle
/// minutes); no row when it is not active now.
/// It runs read-write, so under READ COMMITTED it takes a snapshot of its
/// own (what session_cache needs to remember it), and fully qualified, as
/// kv_get runs it unpinned.
static ACTIVE_UNTIL: Statement = Statement::read_write(
    concat!(
        "SELECT s.last_activity_at OPERATOR(pg_catalog.+)
                coalesce(s.idle_timeout, pg_catalog.make_interval(mins => $2))
         FROM agent_memory.sessions s
         WHERE s.session_id OPERATOR(pg_catalog.=) $1
           AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant() AND ",
        active!("s", "$2")
    ),
    &[TEXT, INT4],
);

/// Until when the session stays active (TimestampTz); None when it is not
/// active now.
pub fn active_until(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, minutes: i32,
) -> SqlResult<Option<i64>> {
    until_of(ACTIVE_UNTIL.run(client, &[session_id.into(), minutes.into()])?)
}

/// As `active_until`, for a function that only reads: its transaction
/// stays one that writes nothing (see `Statement::probe`).
pub fn probe_active_until(session_id: &str, minutes: i32) -> SqlResult<Option<i64>> {
    pgrx::Spi::connect(|client| {
        until_of(ACTIVE_UNTIL.probe(client, &[session_id.into(), minutes.into()])?)
    })
}

fn until_of(table: pgrx::spi::SpiTupleTable<'_>) -> SqlResult<Option<i64>> {
    if table.is_empty() {
        return Ok(None);
    }
    let until = table.first().value::<TimestampWithTimeZone>(1)?;
    Ok(until.map(pg_sys::TimestampTz::from))
}

// The statements.

// The predicate "session <alias> is active", given the parameter that holds
// the default idle timeout in minutes.
macro_rules! active {
    ($alias:literal, $minutes:literal) => {
        concat!(
            $alias,
            // OPERATOR(...) binds like any user operator: the parentheses
            // keep the subtraction first.
            ".last_activity_at OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) coalesce(",
            $alias,
            ".idle_timeout, pg_catalog.make_interval(mins => ",
            $minutes,
            ")))"
        )
    };
}
pub(crate) use active;

// The predicate "session s is $1, of the caller's tenant, and active", given
// the parameter that holds the default idle timeout in minutes.
macro_rules! callers_active_session {
    ($minutes:literal) => {
        concat!(
            "s.session_id = $1 AND s.tenant = agent_memory.caller_tenant() AND ",
            crate::sessions::active!("s", $minutes)
        )
    };
}
pub(crate) use callers_active_session;

/// Advisory lock class of the session write locks ("amem"), as a literal
/// for SQL text that takes the lock itself.
macro_rules! session_lock_class {
    () => {
        1634559341
    };
}
pub(crate) use session_lock_class;

static LOCK_FOR_CREATE: Statement = Statement::read_write(
    concat!(
        "SELECT s.user_id, ",
        active!("s", "$2"),
        " FROM agent_memory.sessions s
         WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant() FOR UPDATE"
    ),
    &[TEXT, INT4],
);

/// Lock session $1's row, if there is one (see lock_session).
static LOCK_SESSION_ROW: Statement = Statement::read_write(
    "SELECT count(*) FROM (SELECT FROM agent_memory.sessions
                           WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                           FOR SHARE) AS session",
    &[TEXT],
);

/// A session written to before anyone created it (in the caller's
/// tenant): no user yet.
pub static CREATE_IMPLICIT: Statement = Statement::read_write(
    "INSERT INTO agent_memory.sessions (session_id, tenant) VALUES ($1, agent_memory.caller_tenant())
     ON CONFLICT (session_id, tenant) DO NOTHING",
    &[TEXT],
);

/// Lock session $1's row, if there is one, against every other writer
/// (see lock_session).
static LOCK_SESSION_ROW_FOR_WRITE: Statement = Statement::read_write(
    "SELECT count(*) FROM (SELECT FROM agent_memory.sessions
                           WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                           FOR NO KEY UPDATE) AS session",
    &[TEXT],
);

/// Lock session $1's row and working-memory rows (see
/// lock_session_and_parts).
static LOCK_SESSION_AND_PARTS: Statement = Statement::read_write(
    "SELECT (SELECT count(*) FROM (SELECT FROM agent_memory.sessions
                                  WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                                  FOR SHARE) AS session)
          + (SELECT count(*) FROM (SELECT FROM agent_memory.wm_parts
                                  WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                                  FOR SHARE) AS parts)",
    &[TEXT],
);

static SESSION_STORED: Statement = Statement::read_only(
    "SELECT 1 FROM agent_memory.sessions s
     WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()",
    &[TEXT],
);

static INSERT_SESSION: Statement = Statement::read_write(
    "INSERT INTO agent_memory.sessions (session_id, user_id, metadata, idle_timeout, tenant)
     VALUES (coalesce($1, pg_catalog.gen_random_uuid()::text), $2, $3, $4,
             agent_memory.caller_tenant())
     ON CONFLICT (session_id, tenant) DO NOTHING
     RETURNING session_id",
    &[TEXT, TEXT, JSONB, INTERVAL],
);

static CLAIM_SESSION: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions SET user_id = $2
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant() AND user_id IS NULL",
    &[TEXT, TEXT],
);

/// Taken under the session's write lock.
/// Returns whether the session was active. Citus accepts no now() in a
/// RETURNING, so the test is made outside.
static DELETE_SESSION: Statement = Statement::read_write(
    concat!(
        "WITH s AS (
           DELETE FROM agent_memory.sessions s
           WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()
           RETURNING s.last_activity_at, s.idle_timeout)
         SELECT ",
        active!("s", "$2"),
        " FROM s"
    ),
    &[TEXT, INT4],
);

/// Renews activity of an active session; returns a row only if it is active.
/// Taking the row lock here also serialises the writers of one session.
pub static RENEW: Statement = Statement::read_write(
    concat!(
        "UPDATE agent_memory.sessions s SET last_activity_at = greatest(last_activity_at, pg_catalog.now())
         WHERE ",
        callers_active_session!("$2"),
        " RETURNING true"
    ),
    &[TEXT, INT4],
);

static IS_ACTIVE: Statement = Statement::read_only(
    concat!(
        "SELECT EXISTS (SELECT FROM agent_memory.sessions s
                        WHERE ",
        callers_active_session!("$2"),
        ")"
    ),
    &[TEXT, INT4],
);

/// Whether the caller's session $1 is active: no row when there is none.
static SESSION_ACTIVE: Statement = Statement::read_only(
    concat!(
        "SELECT ",
        active!("s", "$2"),
        " FROM agent_memory.sessions s
         WHERE s.session_id OPERATOR(pg_catalog.=) $1
           AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()"
    ),
    &[TEXT, INT4],
);

/// Counts over the caller's tenant's sessions.
static STATS: Statement = Statement::read_only(
    concat!(
        "SELECT pg_catalog.jsonb_build_object(
            'total', count(*),
            'active', count(*) FILTER (WHERE ",
        active!("s", "$1"),
        "),
            'expired', count(*) FILTER (WHERE NOT ",
        active!("s", "$1"),
        "),
            'avg_duration_seconds', coalesce(round(avg(extract(epoch FROM s.last_activity_at - s.created_at)), 3), 0))
         FROM agent_memory.sessions s WHERE s.tenant = agent_memory.caller_tenant()"
    ),
    &[INT4],
);

static USER_SESSIONS: Statement = Statement::read_only(
    concat!(
        "SELECT s.session_id, s.created_at, s.last_activity_at, ",
        active!("s", "$2"),
        " FROM agent_memory.sessions s
         WHERE s.user_id = $1 AND s.tenant = agent_memory.caller_tenant()
         ORDER BY s.created_at, s.session_id"
    ),
    &[TEXT, INT4],
);
