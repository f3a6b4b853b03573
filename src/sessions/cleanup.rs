//! Removal of expired rows: `cleanup_expired()` for anyone, and the batches
//! the background worker runs, one short transaction each.
//!
//! Reads never rely on this: they filter expired rows themselves. Cleanup is
//! garbage collection, and waits for a foreground write of the same rows
//! for 1 ms at most (rows it has removed stay locked until its transaction
//! ends, as with any delete: one batch in the worker, the caller's
//! transaction for `cleanup_expired()`). Each batch is first tried directly,
//! in a subtransaction in which any lock wait ends after 1 ms
//! ([`without_waiting`]); if a row is held, that attempt is undone and the
//! batch is done the SKIP LOCKED way:
//!
//! * sessions: a session whose rows (entries, threads, messages, parts)
//!   another transaction holds is left for a later run; the others go, with
//!   everything they own;
//! * entries: the held ones stay, the others go.
//!
//! Every statement reaches its rows by index or by TID whatever the
//! statistics say ([`with_index_plans`]), so a batch costs what it removes:
//! a planner that wrongly expects few expired rows would otherwise read all
//! of them for every batch.

use pgrx::JsonB;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::Error;

use crate::pg::args::{INT4, INT8, TEXT, required};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, FirstRow, Statement, first_value_of, on_citus};
use crate::pg::settings;
use crate::sessions::idle_timeout_minutes;

/// What one kind of expired row is, and how a batch of it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// Sessions idle past their timeout, with everything they own.
    Sessions,
    /// Key-value entries past their expiry.
    Entries,
    /// Kept versions of key-value entries past the expiry their value had
    /// (counted with the entries).
    Versions,
}

impl Expired {
    pub const ALL: [Expired; 3] = [Expired::Sessions, Expired::Entries, Expired::Versions];

    pub fn name(self) -> &'static str {
        match self {
            Expired::Sessions => "sessions",
            Expired::Entries => "entries",
            Expired::Versions => "entry versions",
        }
    }

    fn statement(self, locking: Locking) -> &'static Statement {
        match (self, locking) {
            (Expired::Sessions, Locking::SkipLocked) => &DELETE_EXPIRED_SESSIONS,
            (Expired::Sessions, Locking::Direct) => &DELETE_EXPIRED_SESSIONS_DIRECTLY,
            (Expired::Entries, Locking::SkipLocked) => &DELETE_EXPIRED_ENTRIES,
            (Expired::Entries, Locking::Direct) => &DELETE_EXPIRED_ENTRIES_DIRECTLY,
            (Expired::Versions, Locking::SkipLocked) => &DELETE_EXPIRED_VERSIONS,
            (Expired::Versions, Locking::Direct) => &DELETE_EXPIRED_VERSIONS_DIRECTLY,
        }
    }
}

/// Remove rows by `attempt`: first directly, inside [`without_waiting`],
/// then, if a held row stopped that (its work undone), the SKIP LOCKED way.
pub fn removing<T>(mut attempt: impl FnMut(Locking) -> SqlResult<T>) -> SqlResult<T> {
    if let Some(done) = without_waiting(|| attempt(Locking::Direct))? {
        return Ok(done);
    }
    attempt(Locking::SkipLocked)
}

/// How a batch treats rows that another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locking {
    /// Lock the rows with SKIP LOCKED (for a session, every row it owns
    /// too), then delete those whose rows were all free: never waits, and
    /// writes every row twice.
    SkipLocked,
    /// Delete them at once: one write per row, but a held row (of a
    /// session: one it owns) is waited for, so it runs only inside
    /// [`without_waiting`].
    Direct,
}

// The statements take $1 batch size and $2 where the previous batch stopped
// (sessions also $3, the default idle timeout in minutes). Resuming there,
// instead of scanning from the start again, keeps a run linear: within one
// transaction the rows earlier batches removed are still in the way of a
// scan that starts over. Sessions return how many they picked, how many
// they removed, and where the next batch starts.

/// Where a run has got to in one kind of row: batches resume after it.
#[derive(Debug, Clone)]
pub struct Cursor(String);

impl Cursor {
    pub fn start(kind: Expired) -> Self {
        Cursor(
            match kind {
                Expired::Sessions => "(0,0)",
                Expired::Entries | Expired::Versions => "-infinity",
            }
            .to_string(),
        )
    }
}

/// What one batch did.
#[derive(Debug, Clone, Copy)]
pub struct Batch {
    /// Rows removed.
    pub deleted: i64,
    /// It picked as many rows as it could: another batch may find more.
    pub full: bool,
}

/// Remove up to `batch_size` expired rows of one kind after `cursor`, and
/// move the cursor past the rows it picked when another batch may follow.
pub fn delete_batch(
    kind: Expired, locking: Locking, batch_size: i32, cursor: &mut Cursor,
) -> SqlResult<Batch> {
    Spi::connect_mut(|client| {
        let statement = kind.statement(locking);
        let after = cursor.0.as_str();
        match kind {
            Expired::Sessions => {
                let row = statement
                    .run(client, &[batch_size.into(), after.into(), idle_timeout_minutes().into()])?
                    .first();
                let picked = row.value::<i64>(1)?.unwrap_or(0);
                let deleted = row.value::<i64>(2)?.unwrap_or(0);
                if let Some(next) = row.value::<String>(3)? {
                    cursor.0 = next;
                }
                Ok(Batch { deleted, full: picked == i64::from(batch_size) })
            }
            Expired::Entries | Expired::Versions => {
                let next_expired = match kind {
                    Expired::Versions => &NEXT_EXPIRED_VERSION,
                    _ => &NEXT_EXPIRED_ENTRY,
                };
                let deleted =
                    statement.run(client, &[batch_size.into(), after.into()])?.len() as i64;
                let full = deleted == i64::from(batch_size);
                if full {
                    let next = next_expired
                        .run(client, &[after.into()])?
                        .first_value::<String>(1)
                        .or_report()?;
                    if let Some(next) = next {
                        cursor.0 = next;
                    }
                }
                Ok(Batch { deleted, full })
            }
        }
    })
}

/// Move `cursor` past the first expired row of `kind` after it, which a
/// batch of one row could not remove in time: a session, or, for entries
/// (whose cursor is an expiry), every entry that expired at that instant.
/// False when there is no row after it.
pub fn pass_over(kind: Expired, cursor: &mut Cursor) -> SqlResult<bool> {
    let after = cursor.0.as_str();
    let next = match kind {
        Expired::Sessions => first_value_of::<String>(
            &NEXT_EXPIRED_SESSION,
            &[1.into(), after.into(), idle_timeout_minutes().into()],
        )?,
        Expired::Entries | Expired::Versions => {
            let (first, later) = match kind {
                Expired::Versions => (&NEXT_EXPIRED_VERSION, &LATER_EXPIRED_VERSION),
                _ => (&NEXT_EXPIRED_ENTRY, &LATER_EXPIRED_ENTRY),
            };
            match first_value_of::<String>(first, &[after.into()])? {
                Some(stuck) => first_value_of::<String>(later, &[stuck.as_str().into()])?,
                None => None,
            }
        }
    };
    match next {
        Some(next) => {
            cursor.0 = next;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Run `work` with plans that reach rows only by index or by TID: a
/// sequential or bitmap scan would read every expired row for each batch,
/// and the planner picks one when its statistics are stale (rows that
/// expired since the last ANALYZE). The settings hold while `work` plans
/// and runs, and are restored after it (on an error, by the abort).
pub fn with_index_plans<T>(work: impl FnOnce() -> SqlResult<T>) -> SqlResult<T> {
    // SAFETY: a GUC nest level opened here and closed here, as a function
    // with SET clauses does; an error unwinding past it aborts the
    // (sub)transaction, which closes it.
    unsafe {
        let level = pg_sys::NewGUCNestLevel();
        settings::set_until_level_ends(c"enable_seqscan", c"off");
        settings::set_until_level_ends(c"enable_bitmapscan", c"off");
        let done = work();
        pg_sys::AtEOXact_GUC(true, level);
        done
    }
}

unsafe extern "C-unwind" {
    fn PostmasterIsAliveInternal() -> bool;
}

/// Between two batches: leave at once on a cancel or a terminate, and when
/// the postmaster has died. A backend notices the postmaster's death only
/// when it next reads from its client, and a live one holds up the restart.
pub fn stop_if_asked() {
    pg_sys::check_for_interrupts!();
    // SAFETY: reads the postmaster's pipe; callable from any backend.
    if !unsafe { PostmasterIsAliveInternal() } {
        ereport!(
            PgLogLevel::FATAL,
            PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
            "terminating the cleanup: the postmaster has exited"
        );
    }
}

/// Run `work` in a subtransaction in which any lock wait ends after 1 ms
/// (`lock_timeout`): `None` when one did, everything `work` did being then
/// undone and its locks released; else what `work` returned. When `work`
/// fails, what it did is undone too and the error propagates.
fn without_waiting<T>(work: impl FnOnce() -> SqlResult<T>) -> SqlResult<Option<T>> {
    let work = std::panic::AssertUnwindSafe(work);
    // SAFETY: the subtransaction is begun here and ended here on every
    // path, an error included (which is caught, the subtransaction rolled
    // back, and the error raised again), restoring the caller's memory
    // context and resource owner as PL/pgSQL's exception blocks do. An
    // error left to end it would leave the caller's transaction in an
    // aborted subtransaction.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        let end = |commit: bool| {
            pg_sys::MemoryContextSwitchTo(context);
            if commit {
                pg_sys::ReleaseCurrentSubTransaction();
            } else {
                pg_sys::RollbackAndReleaseCurrentSubTransaction();
            }
            pg_sys::MemoryContextSwitchTo(context);
            pg_sys::CurrentResourceOwner = owner;
        };
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        PgTryBuilder::new(move || {
            settings::set_until_level_ends(c"lock_timeout", c"1ms");
            let done = work();
            end(done.is_ok());
            done.map(Some)
        })
        .catch_others(move |caught| {
            end(false);
            let code = match &caught {
                CaughtError::PostgresError(e) | CaughtError::ErrorReport(e) => e.sql_error_code(),
                CaughtError::RustPanic { ereport, .. } => ereport.sql_error_code(),
            };
            if code == PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE {
                Ok(None)
            } else {
                caught.rethrow()
            }
        })
        .execute()
    }
}

/// Counts of one cleanup run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub sessions: i64,
    pub entries: i64,
    pub batches: i32,
}

impl Counts {
    fn merge(&mut self, other: Counts) {
        self.sessions += other.sessions;
        self.entries += other.entries;
        self.batches += other.batches;
    }

    pub fn add(&mut self, kind: Expired, deleted: i64) {
        self.batches += 1;
        match kind {
            Expired::Sessions => self.sessions += deleted,
            Expired::Entries | Expired::Versions => self.entries += deleted,
        }
    }
}

/// Write a run into `cleanup_runs` (`triggered_by`: manual or worker): as
/// its tenant's, or with `tenant` None as every tenant's (the worker's);
/// returns its id.
pub fn record_run(
    started_at: TimestampWithTimeZone, triggered_by: &str, tenant: Option<&str>, counts: Counts,
    error: Option<&str>,
) -> SqlResult<i64> {
    let kept_runs = crate::pg::settings::CLEANUP_HISTORY.get();
    let statement = match tenant {
        Some(_) => &RECORD_TENANTS_RUN,
        None => &RECORD_SHARED_RUN,
    };
    let id = crate::pg::notify::as_owner_of("agent_memory.cleanup_runs", || {
        first_value_of::<i64>(
            statement,
            &[
                started_at.into(),
                triggered_by.into(),
                counts.sessions.into(),
                counts.entries.into(),
                counts.batches.into(),
                error.into(),
                kept_runs.into(),
                tenant.into(),
            ],
        )
    })?;
    crate::pg::args::required(id, "run_id")
}

/// Every expired row of one kind, batch after batch, in the current
/// transaction.
fn remove_all(kind: Expired, locking: Locking, batch_size: i32) -> SqlResult<Counts> {
    let mut counts = Counts::default();
    let mut cursor = Cursor::start(kind);
    let mut size = batch_size;
    loop {
        stop_if_asked();
        let resumed_at = cursor.0.clone();
        let batch = delete_batch(kind, locking, size, &mut cursor)?;
        counts.add(kind, batch.deleted);
        if !batch.full {
            return Ok(counts);
        }
        // All batches here share one transaction, so the rows earlier
        // batches removed stay in the way of a scan resuming at the same
        // expiry. A batch that ends inside a run of equal expiries (the
        // cursor did not move) makes the next one twice as big: a run of
        // n equal expiries then costs O(n), not O(n * n / batch_size).
        if cursor.0 == resumed_at {
            size = size.saturating_mul(2);
        }
    }
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn cleanup_expired(batch_size: default!(Option<i32>, "NULL")) -> SqlResult<JsonB> {
    let batch_size = batch_size.unwrap_or_else(|| settings::CLEANUP_BATCH_SIZE.get());
    if batch_size < 1 {
        return Err(Error::invalid(format!("batch_size must be at least 1, not {batch_size}")))
            .or_report();
    }
    if on_citus()? && first_value_of::<bool>(&CITUS_CLEANUP_INSTALLED, &[])? == Some(true) {
        return required(first_value_of::<JsonB>(&CITUS_CLEANUP, &[batch_size.into()])?, "cleanup");
    }
    let started_at = pgrx::datetime::clock_timestamp();
    // The run is its tenant's. A group role under isolation has none: it
    // is refused (42501) before any work, as by every other function. A
    // role that bypasses row security (a superuser, as pg_cron's jobs run)
    // removes every tenant's expired rows, as the worker does, and its
    // run is recorded as the worker's are.
    let tenant = crate::pg::tenants::caller_tenant()?;
    let bypasses_row_security = first_value_of::<bool>(&ROW_SECURITY_ACTIVE, &[])? == Some(false);
    let tenant = (!bypasses_row_security).then_some(tenant);
    let mut counts = Counts::default();
    for kind in Expired::ALL {
        // One subtransaction for the whole kind (one per batch would
        // overflow the 64 subtransactions a backend can show others); a
        // held row found late undoes the batches before it, which are
        // then done again the SKIP LOCKED way.
        counts
            .merge(with_index_plans(|| removing(|locking| remove_all(kind, locking, batch_size)))?);
    }
    let run_id = record_run(started_at, "manual", tenant.as_deref(), counts, None)?;
    Ok(JsonB(json!({
        "sessions": counts.sessions,
        "entries": counts.entries,
        "batches": counts.batches,
        "run_id": run_id,
    })))
}

// The statements.

/// The expired sessions of a batch, of every tenant, in physical order (a
/// TID range scan: their expiry depends on a setting, so no index can find
/// them), locked unless `$lock` is "".
macro_rules! picked_sessions {
    () => {
        picked_sessions!(" FOR UPDATE SKIP LOCKED")
    };
    ($lock:literal) => {
        concat!(
            "SELECT s.ctid AS row_id, s.session_id, s.tenant FROM agent_memory.sessions s
             WHERE s.ctid > $2::tid
               AND s.last_activity_at <= pg_catalog.now()
                                         - coalesce(s.idle_timeout, pg_catalog.make_interval(mins => $3))
             ORDER BY s.ctid
             LIMIT $1",
            $lock
        )
    };
}

/// The rows a picked session owns in one table, as its (session_id,
/// tenant), read plainly ("") or locked (" FOR UPDATE SKIP LOCKED"). The
/// index finds them by session_id; the tenant must match too, so that
/// another tenant's session of the same id is neither read nor locked.
macro_rules! owned_rows {
    ($table:literal, $lock:literal) => {
        concat!(
            "SELECT o.session_id, o.tenant FROM agent_memory.",
            $table,
            " o WHERE o.session_id = ANY ((SELECT ids FROM picked_ids)::text[])
                AND EXISTS (SELECT FROM picked p
                            WHERE p.session_id = o.session_id AND p.tenant = o.tenant)",
            $lock
        )
    };
}

// The CTE `$name`: the rows of `$table` that the picked sessions own and
// this statement could lock, skipping those another transaction holds.
macro_rules! locked_rows {
    ($name:literal, $table:literal) => {
        concat!(
            " ",
            $name,
            " AS MATERIALIZED (",
            owned_rows!($table, " FOR UPDATE SKIP LOCKED"),
            "),"
        )
    };
}

/// Picked sessions deleted at once; the rows they own go by cascade, which
/// waits for any of them another transaction holds.
static DELETE_EXPIRED_SESSIONS_DIRECTLY: Statement = Statement::read_write(
    concat!(
        "WITH gone AS (
           DELETE FROM agent_memory.sessions
           WHERE ctid = ANY (ARRAY (SELECT p.row_id FROM (",
        picked_sessions!(),
        ") p))
           RETURNING ctid)
         SELECT count(*), count(*), max(ctid)::text FROM gone"
    ),
    &[INT4, TEXT, INT4],
);

/// Picked sessions whose rows this statement could all lock, deleted; a
/// session with a row another transaction holds stays for a later run, so
/// the cascade never waits. A row that is there but could not be locked is
/// one the plain read counts and the locking read does not (EXCEPT ALL).
/// No row can join a picked session meanwhile: adding one needs a key
/// share lock on the session row, which this statement holds for update.
static DELETE_EXPIRED_SESSIONS: Statement = Statement::read_write(
    concat!(
        "WITH picked AS MATERIALIZED (",
        picked_sessions!(),
        "),
         picked_ids AS MATERIALIZED (SELECT ARRAY (SELECT session_id FROM picked) AS ids),
",
        locked_rows!("kv_locked", "kv_entries"),
        locked_rows!("versions_locked", "kv_entry_versions"),
        locked_rows!("threads_locked", "message_threads"),
        locked_rows!("messages_locked", "thread_messages"),
        locked_rows!("parts_locked", "wm_parts"),
        "
         held AS MATERIALIZED (
           (",
        owned_rows!("kv_entries", ""),
        " UNION ALL ",
        owned_rows!("kv_entry_versions", ""),
        " UNION ALL ",
        owned_rows!("message_threads", ""),
        " UNION ALL ",
        owned_rows!("thread_messages", ""),
        " UNION ALL ",
        owned_rows!("wm_parts", ""),
        ")
           EXCEPT ALL
           (SELECT session_id, tenant FROM kv_locked
            UNION ALL SELECT session_id, tenant FROM versions_locked
            UNION ALL SELECT session_id, tenant FROM threads_locked
            UNION ALL SELECT session_id, tenant FROM messages_locked
            UNION ALL SELECT session_id, tenant FROM parts_locked)),
         gone AS (
           DELETE FROM agent_memory.sessions
           WHERE ctid = ANY (ARRAY (
             SELECT p.row_id FROM picked p
             WHERE NOT EXISTS (SELECT FROM held h
                               WHERE h.session_id = p.session_id AND h.tenant = p.tenant)))
           RETURNING 1)
         SELECT (SELECT count(*) FROM picked), (SELECT count(*) FROM gone),
                (SELECT max(row_id)::text FROM picked)"
    ),
    &[INT4, TEXT, INT4],
);

/// Entries in expiry order, through the index on expires_at, the picked
/// rows treated as `$lock` says (see [`Locking`]). No RETURNING: handing
/// every removed row back costs the run dearly; the count is the
/// statement's row count, and NEXT_EXPIRED_ENTRY finds where the next
/// batch starts. The outer expiry test keeps an entry that a concurrent
/// write renewed before the delete reached it (READ COMMITTED rechecks the
/// new version) on PostgreSQL minor releases before November 2025, which
/// did not recheck the `ctid` condition there. It is written `IS TRUE` so
/// that it cannot serve as an index condition: the outer scan is by TID,
/// never by the index on expires_at, which would read every expired entry
/// for each batch.
macro_rules! delete_expired_entries {
    ($lock:literal) => {
        delete_expired_entries!("kv_entries", $lock)
    };
    ($table:literal, $lock:literal) => {
        concat!(
            "DELETE FROM agent_memory.",
            $table,
            "
             WHERE ctid = ANY (ARRAY (
               SELECT k.ctid FROM agent_memory.",
            $table,
            " k
               WHERE k.expires_at <= pg_catalog.now() AND k.expires_at >= $2::timestamptz
               ORDER BY k.expires_at
               LIMIT $1",
            $lock,
            "))
               AND (expires_at <= pg_catalog.now()) IS TRUE"
        )
    };
}

static DELETE_EXPIRED_ENTRIES: Statement =
    Statement::read_write(delete_expired_entries!(" FOR UPDATE SKIP LOCKED"), &[INT4, TEXT]);

static DELETE_EXPIRED_ENTRIES_DIRECTLY: Statement =
    Statement::read_write(delete_expired_entries!(""), &[INT4, TEXT]);

/// Expired versions of entries, as expired entries go.
static DELETE_EXPIRED_VERSIONS: Statement = Statement::read_write(
    delete_expired_entries!("kv_entry_versions", " FOR UPDATE SKIP LOCKED"),
    &[INT4, TEXT],
);

static DELETE_EXPIRED_VERSIONS_DIRECTLY: Statement =
    Statement::read_write(delete_expired_entries!("kv_entry_versions", ""), &[INT4, TEXT]);

/// The soonest expired row of `$table` still there, from $1 on: where the
/// next batch starts. Read-write so that it sees the batch just removed.
/// Written in UTC with a numeric offset and the era, which reads back as
/// the same instant whatever DateStyle and TimeZone say (a zone
/// abbreviation may name another zone; a year BC without its era reads as
/// a year AD, after now, which ended the kind's run at every batch).
macro_rules! next_expired {
    ($table:literal, $from:literal) => {
        concat!(
            "SELECT CASE WHEN pg_catalog.isfinite(k.expires_at)
                         THEN pg_catalog.to_char(k.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')
                              OPERATOR(pg_catalog.||) '+00 '
                              OPERATOR(pg_catalog.||) pg_catalog.to_char(k.expires_at AT TIME ZONE 'UTC', 'BC')
                         ELSE k.expires_at::pg_catalog.text END
             FROM agent_memory.",
            $table,
            " k WHERE k.expires_at <= pg_catalog.now() AND k.expires_at ",
            $from,
            " $1::timestamptz
             ORDER BY k.expires_at LIMIT 1"
        )
    };
}

static NEXT_EXPIRED_ENTRY: Statement =
    Statement::read_write(next_expired!("kv_entries", ">="), &[TEXT]);

static NEXT_EXPIRED_VERSION: Statement =
    Statement::read_write(next_expired!("kv_entry_versions", ">="), &[TEXT]);

/// The soonest expiry after $1: where a run resumes when it passes over
/// the entries that expired at $1.
static LATER_EXPIRED_ENTRY: Statement =
    Statement::read_write(next_expired!("kv_entries", ">"), &[TEXT]);

static LATER_EXPIRED_VERSION: Statement =
    Statement::read_write(next_expired!("kv_entry_versions", ">"), &[TEXT]);

/// The first expired session after the TID $2 ($1 is 1, $3 the default
/// idle timeout in minutes), held or not: the one a run passes over.
static NEXT_EXPIRED_SESSION: Statement = Statement::read_write(
    concat!("SELECT p.row_id::text FROM (", picked_sessions!(""), ") p"),
    &[INT4, TEXT, INT4],
);

/// Record a run and drop the runs older than the newest $7: a bounded
/// history. Run as the table's owner: roles may read the runs, not write
/// them.
/// Record a run ($8: its tenant) and drop all but the newest $7 runs of the
/// same tenant, `$same_tenant` ($1 to $6: the columns).
macro_rules! record_run {
    ($same_tenant:literal) => {
        concat!(
            "WITH run AS (
               INSERT INTO agent_memory.cleanup_runs
                 (started_at, finished_at, triggered_by, sessions_deleted, entries_deleted, batches,
                  error, tenant)
               VALUES ($1, pg_catalog.clock_timestamp(), $2, $3, $4, $5, $6, $8)
               RETURNING run_id),
             pruned AS (
               DELETE FROM agent_memory.cleanup_runs r
               WHERE r.",
            $same_tenant,
            " AND r.run_id OPERATOR(pg_catalog.<=) (
                 SELECT o.run_id FROM agent_memory.cleanup_runs o
                 WHERE o.",
            $same_tenant,
            "
                 ORDER BY o.run_id DESC OFFSET ($7 OPERATOR(pg_catalog.-) 1) LIMIT 1))
             SELECT run_id FROM run"
        )
    };
}

const RECORD_RUN_ARGS: &[pgrx::PgOid] = &[
    pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TIMESTAMPTZOID),
    TEXT,
    INT8,
    INT8,
    INT4,
    TEXT,
    INT4,
    TEXT,
];

/// The runs every tenant sees (tenant NULL). The pruning reads the runs
/// before this one: keeping $7 - 1 of them keeps $7 with it.
static RECORD_SHARED_RUN: Statement =
    Statement::read_write(record_run!("tenant IS NULL"), RECORD_RUN_ARGS);

static RECORD_TENANTS_RUN: Statement =
    Statement::read_write(record_run!("tenant OPERATOR(pg_catalog.=) $8"), RECORD_RUN_ARGS);

/// Whether the policies apply to the caller: false for a role that
/// bypasses row security, which sees every tenant's rows.
static ROW_SECURITY_ACTIVE: Statement = Statement::read_only(
    "SELECT pg_catalog.row_security_active('agent_memory.sessions'::pg_catalog.regclass)",
    &[],
);

/// Whether sql/citus.sql installed the per-shard cleanup. On Citus the
/// batches below cannot run (a ctid means something inside one shard only,
/// and Citus refuses FOR UPDATE over many shards): cleanup_expired() runs
/// that one instead, shard by shard.
static CITUS_CLEANUP_INSTALLED: Statement = Statement::read_only(
    "SELECT pg_catalog.to_regprocedure(
              'agent_memory_citus.cleanup_expired_shards(integer,integer)') IS NOT NULL",
    &[],
);

static CITUS_CLEANUP: Statement =
    Statement::read_write("SELECT agent_memory_citus.cleanup_expired_shards($1)", &[INT4]);
