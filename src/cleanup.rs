//! Removal of expired rows: `cleanup_expired()` for anyone, and the batches
//! the background worker runs, one short transaction each.
//!
//! Reads never rely on this: they filter expired rows themselves. Cleanup is
//! garbage collection. Each batch locks its rows with SKIP LOCKED, so it
//! never waits on, nor blocks, a foreground write of the same rows.

use pgrx::JsonB;
use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::Error;

use crate::error::{OrReport, SqlResult};
use crate::plans::{FirstRow, Statement, kept};
use crate::sessions::{INT4, idle_timeout_minutes};
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

    fn statement(self) -> &'static Statement {
        match self {
            Expired::Sessions => &DELETE_EXPIRED_SESSIONS,
            Expired::Entries => &DELETE_EXPIRED_ENTRIES,
        }
    }
}

/// $1 batch size, $2 default idle timeout in minutes.
static DELETE_EXPIRED_SESSIONS: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.sessions
            WHERE ctid = ANY (ARRAY (
              SELECT s.ctid FROM agent_memory.sessions s
              WHERE s.last_activity_at <= pg_catalog.now()
                                          - coalesce(s.idle_timeout, pg_catalog.make_interval(mins => $2))
              LIMIT $1 FOR UPDATE SKIP LOCKED))
            RETURNING 1)
          SELECT count(*) FROM gone",
    args: &[INT4, INT4],
    writes: true,
};

/// $1 batch size, $2 unused (same shape as the sessions statement).
static DELETE_EXPIRED_ENTRIES: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.kv_entries
            WHERE ctid = ANY (ARRAY (
              SELECT k.ctid FROM agent_memory.kv_entries k
              WHERE k.expires_at <= pg_catalog.now() AND $2 IS NOT NULL
              ORDER BY k.expires_at
              LIMIT $1 FOR UPDATE SKIP LOCKED))
            RETURNING 1)
          SELECT count(*) FROM gone",
    args: &[INT4, INT4],
    writes: true,
};

static RECORD_RUN: Statement = Statement {
    sql: "INSERT INTO agent_memory.cleanup_runs
            (started_at, finished_at, triggered_by, sessions_deleted, entries_deleted, batches, error)
          VALUES ($1, pg_catalog.clock_timestamp(), $2, $3, $4, $5, $6)
          RETURNING run_id",
    args: &[
        pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::TIMESTAMPTZOID),
        crate::sessions::TEXT,
        pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::INT8OID),
        pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::INT8OID),
        INT4,
        crate::sessions::TEXT,
    ],
    writes: true,
};

/// Remove up to `batch_size` expired rows of one kind; returns how many.
pub fn delete_batch(kind: Expired, batch_size: i32) -> SqlResult<i64> {
    Spi::connect_mut(|client| {
        let plan = kept(client, kind.statement()).or_report()?;
        let deleted = client
            .update(
                &*plan,
                None,
                &[batch_size.into(), idle_timeout_minutes().into()],
            )
            .or_report()?
            .first_value::<i64>(1)
            .or_report()?;
        Ok(deleted.unwrap_or(0))
    })
}

/// Counts of one cleanup run.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub sessions: i64,
    pub entries: i64,
    pub batches: i32,
}

impl Counts {
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
    Spi::connect_mut(|client| {
        let plan = kept(client, &RECORD_RUN).or_report()?;
        let id = client
            .update(
                &*plan,
                None,
                &[
                    started_at.into(),
                    triggered_by.into(),
                    counts.sessions.into(),
                    counts.entries.into(),
                    counts.batches.into(),
                    error.into(),
                ],
            )
            .or_report()?
            .first_value::<i64>(1)
            .or_report()?;
        crate::sessions::required(id, "run_id")
    })
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
        loop {
            let deleted = delete_batch(kind, batch_size)?;
            counts.add(kind, deleted);
            if deleted < batch_size as i64 {
                break;
            }
        }
    }
    let run_id = record_run(started_at, "manual", counts, None)?;
    Ok(JsonB(json!({
        "sessions": counts.sessions,
        "entries": counts.entries,
        "batches": counts.batches,
        "run_id": run_id,
    })))
}
