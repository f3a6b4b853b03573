//! Removal of expired rows: `cleanup_expired()` for anyone, and the batches
//! the background worker runs, one short transaction each.
//!
//! Reads never rely on this: they filter expired rows themselves. Cleanup is
//! garbage collection, and waits for a foreground write of the same rows
//! for 1 ms at most (rows it has removed stay locked until its transaction
//! ends, as with any delete: one batch in the worker, the caller's
//! transaction for `cleanup_expired()`):
//!
//! * sessions (whose removal cascades to what they own) are locked with
//!   SKIP LOCKED before they are deleted;
//! * entries are first deleted directly, which writes each row once instead
//!   of twice (lock, then delete), in a subtransaction in which any lock
//!   wait ends after 1 ms ([`without_waiting`]). Rows nobody else holds,
//!   the usual case, are gone at once; if one is held, that attempt is
//!   undone and the entries are removed the SKIP LOCKED way.

use pgrx::JsonB;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::Error;

use crate::error::{OrReport, SqlResult};
use crate::plans::{FirstRow, Statement, first_value_of, kept};
use crate::sessions::{INT4, INT8, TEXT, idle_timeout_minutes};
use crate::settings;

/// What one kind of expired row is, and how a batch of it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expired {
    /// Sessions idle past their timeout, with everything they own.
    Sessions,
    /// Key-value entries past their expiry.
    Entries,
}

impl Expired {
    pub const ALL: [Expired; 2] = [Expired::Sessions, Expired::Entries];

    pub fn name(self) -> &'static str {
        match self {
            Expired::Sessions => "sessions",
            Expired::Entries => "entries",
        }
    }

    fn statement(self, locking: Locking) -> &'static Statement {
        match (self, locking) {
            (Expired::Sessions, _) => &DELETE_EXPIRED_SESSIONS,
            (Expired::Entries, Locking::SkipLocked) => &DELETE_EXPIRED_ENTRIES,
            (Expired::Entries, Locking::Direct) => &DELETE_EXPIRED_ENTRIES_DIRECTLY,
        }
    }

    /// How batches of this kind are tried first: directly when that can be
    /// undone without holding anyone up (entries), else SKIP LOCKED.
    fn first_try(self) -> Locking {
        match self {
            Expired::Sessions => Locking::SkipLocked,
            Expired::Entries => Locking::Direct,
        }
    }
}

/// Remove rows of `kind` by `attempt`: for entries first directly, inside
/// [`without_waiting`], then, if a held row stopped that (its work undone),
/// the SKIP LOCKED way; for sessions the SKIP LOCKED way alone.
pub fn removing<T>(
    kind: Expired,
    mut attempt: impl FnMut(Locking) -> SqlResult<T>,
) -> SqlResult<T> {
    if kind.first_try() == Locking::Direct
        && let Some(done) = without_waiting(|| attempt(Locking::Direct))?
    {
        return Ok(done);
    }
    attempt(Locking::SkipLocked)
}

/// How a batch treats rows that another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Locking {
    /// Lock the rows with SKIP LOCKED, then delete them: never waits, and
    /// writes every row twice.
    SkipLocked,
    /// Delete them at once: one write per row, but a held row is waited
    /// for, so it runs only inside [`without_waiting`].
    Direct,
}

// The statements take $1 batch size and $2 where the previous batch stopped
// (sessions also $3, the default idle timeout in minutes). Resuming there,
// instead of scanning from the start again, keeps a run linear: within one
// transaction the rows earlier batches removed are still in the way of a
// scan that starts over.

/// Sessions in physical order (a TID range scan): their expiry depends on a
/// setting, so no index can find them.
static DELETE_EXPIRED_SESSIONS: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.sessions
            WHERE ctid = ANY (ARRAY (
              SELECT s.ctid FROM agent_memory.sessions s
              WHERE s.ctid > $2::tid
                AND s.last_activity_at <= pg_catalog.now()
                                          - coalesce(s.idle_timeout, pg_catalog.make_interval(mins => $3))
              ORDER BY s.ctid
              LIMIT $1 FOR UPDATE SKIP LOCKED))
            RETURNING ctid)
          SELECT count(*), max(ctid)::text FROM gone",
    args: &[INT4, TEXT, INT4],
    writes: true,
};

/// Entries in expiry order, through the index on expires_at, the picked
/// rows treated as `$lock` says (see [`Locking`]). No RETURNING: handing
/// every removed row back costs about a fifth of the run; the count is the
/// statement's row count, and NEXT_EXPIRED_ENTRY finds where the next
/// batch starts. The outer `expires_at` condition keeps an entry that a
/// concurrent write renewed before the delete reached it (READ COMMITTED
/// rechecks the new version) on PostgreSQL minor releases before November
/// 2025, which did not recheck the `ctid` condition there.
macro_rules! delete_expired_entries {
    ($lock:literal) => {
        concat!(
            "DELETE FROM agent_memory.kv_entries
             WHERE ctid = ANY (ARRAY (
               SELECT k.ctid FROM agent_memory.kv_entries k
               WHERE k.expires_at <= pg_catalog.now() AND k.expires_at >= $2::timestamptz
               ORDER BY k.expires_at
               LIMIT $1",
            $lock,
            "))
               AND expires_at <= pg_catalog.now()"
        )
    };
}

static DELETE_EXPIRED_ENTRIES: Statement = Statement {
    sql: delete_expired_entries!(" FOR UPDATE SKIP LOCKED"),
    args: &[INT4, TEXT],
    writes: true,
};

static DELETE_EXPIRED_ENTRIES_DIRECTLY: Statement = Statement {
    sql: delete_expired_entries!(""),
    args: &[INT4, TEXT],
    writes: true,
};

/// The soonest expired entry still there, from $1 on: where the next batch
/// starts. Read-write so that it sees the batch just removed.
static NEXT_EXPIRED_ENTRY: Statement = Statement {
    sql: "SELECT k.expires_at::text FROM agent_memory.kv_entries k
          WHERE k.expires_at <= pg_catalog.now() AND k.expires_at >= $1::timestamptz
          ORDER BY k.expires_at LIMIT 1",
    args: &[TEXT],
    writes: true,
};

static RECORD_RUN: Statement = Statement {
    sql: "INSERT INTO agent_memory.cleanup_runs
            (started_at, finished_at, triggered_by, sessions_deleted, entries_deleted, batches, error)
          VALUES ($1, pg_catalog.clock_timestamp(), $2, $3, $4, $5, $6)
          RETURNING run_id",
    args: &[
        pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TIMESTAMPTZOID),
        TEXT,
        INT8,
        INT8,
        INT4,
        TEXT,
    ],
    writes: true,
};

/// Where a run has got to in one kind of row: batches resume after it.
#[derive(Debug, Clone)]
pub struct Cursor(String);

impl Cursor {
    pub fn start(kind: Expired) -> Self {
        Cursor(
            match kind {
                Expired::Sessions => "(0,0)",
                Expired::Entries => "-infinity",
            }
            .to_string(),
        )
    }
}

/// Remove up to `batch_size` expired rows of one kind after `cursor`;
/// returns how many, and moves the cursor past them when a full batch
/// means another one follows.
pub fn delete_batch(
    kind: Expired,
    locking: Locking,
    batch_size: i32,
    cursor: &mut Cursor,
) -> SqlResult<i64> {
    Spi::connect_mut(|client| {
        let plan = kept(client, kind.statement(locking)).or_report()?;
        let after = cursor.0.as_str();
        match kind {
            Expired::Sessions => {
                let row = client
                    .update(
                        &*plan,
                        None,
                        &[
                            batch_size.into(),
                            after.into(),
                            idle_timeout_minutes().into(),
                        ],
                    )
                    .or_report()?
                    .first();
                let deleted = row.get::<i64>(1).or_report()?.unwrap_or(0);
                if let Some(next) = row.get::<String>(2).or_report()? {
                    cursor.0 = next;
                }
                Ok(deleted)
            }
            Expired::Entries => {
                let deleted = client
                    .update(&*plan, None, &[batch_size.into(), after.into()])
                    .or_report()?
                    .len() as i64;
                if deleted == i64::from(batch_size) {
                    let next = kept(client, &NEXT_EXPIRED_ENTRY).or_report()?;
                    let next = client
                        .update(&*next, None, &[after.into()])
                        .or_report()?
                        .first_value::<String>(1)
                        .or_report()?;
                    if let Some(next) = next {
                        cursor.0 = next;
                    }
                }
                Ok(deleted)
            }
        }
    })
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
            // GUC_ACTION_SAVE: undone when the subtransaction ends, either
            // way.
            pg_sys::set_config_option(
                c"lock_timeout".as_ptr(),
                c"1ms".as_ptr(),
                pg_sys::GucContext::PGC_USERSET,
                pg_sys::GucSource::PGC_S_SESSION,
                pg_sys::GucAction::GUC_ACTION_SAVE,
                true,
                0,
                false,
            );
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
            Expired::Entries => self.entries += deleted,
        }
    }
}

/// Write a run into `cleanup_runs`; returns its id.
pub fn record_run(
    started_at: TimestampWithTimeZone,
    triggered_by: &str,
    counts: Counts,
    error: Option<&str>,
) -> SqlResult<i64> {
    let id = first_value_of::<i64>(
        &RECORD_RUN,
        &[
            started_at.into(),
            triggered_by.into(),
            counts.sessions.into(),
            counts.entries.into(),
            counts.batches.into(),
            error.into(),
        ],
    )?;
    crate::sessions::required(id, "run_id")
}

/// Every expired row of one kind, batch after batch, in the current
/// transaction.
fn remove_all(kind: Expired, locking: Locking, batch_size: i32) -> SqlResult<Counts> {
    let mut counts = Counts::default();
    let mut cursor = Cursor::start(kind);
    let mut size = batch_size;
    loop {
        let resumed_at = cursor.0.clone();
        let deleted = delete_batch(kind, locking, size, &mut cursor)?;
        counts.add(kind, deleted);
        if deleted < i64::from(size) {
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
        return Err(Error::invalid(format!(
            "batch_size must be at least 1, not {batch_size}"
        )))
        .or_report();
    }
    let started_at = pgrx::datetime::clock_timestamp();
    let mut counts = Counts::default();
    for kind in Expired::ALL {
        // One subtransaction for the whole kind (one per batch would
        // overflow the 64 subtransactions a backend can show others); a
        // held entry found late undoes the batches before it, which are
        // then done again the SKIP LOCKED way.
        counts.merge(removing(kind, |locking| {
            remove_all(kind, locking, batch_size)
        })?);
    }
    let run_id = record_run(started_at, "manual", counts, None)?;
    Ok(JsonB(json!({
        "sessions": counts.sessions,
        "entries": counts.entries,
        "batches": counts.batches,
        "run_id": run_id,
    })))
}
