//! The cleanup background worker.
//!
//! Registered when the library is in `shared_preload_libraries`. Every
//! `agent_memory.cleanup_interval` it runs the same batches as
//! `cleanup_expired()` in database `agent_memory.database`, one short
//! transaction per batch, with SKIP LOCKED and local lock and statement
//! timeouts so it never waits on the foreground. It reloads settings on
//! SIGHUP and leaves within a batch on SIGTERM. It sleeps while the extension
//! is not installed in its database or the server is in recovery. An error is
//! logged and recorded in `cleanup_runs`; the process then exits and the
//! postmaster starts it again after a short delay. A failed batch rolls back
//! whole: nothing is left half-done.

use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use crate::cleanup::{Counts, Cursor, Expired, delete_batch, record_run, removing};
use crate::error::{OrReport, SqlResult};
use crate::settings;

/// How `pg_stat_activity.backend_type` names the worker.
pub const WORKER_TYPE: &str = "agent_memory cleanup";
/// Delay before the postmaster restarts the worker after it exits on error.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// Register the worker; call from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new(WORKER_TYPE)
        .set_type(WORKER_TYPE)
        .set_library("agent_memory")
        .set_function("agent_memory_cleanup_main")
        .enable_spi_access()
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// SIGTERM arrived (pgrx's handler sets PostgreSQL's own flag, which, unlike
/// `BackgroundWorker::sigterm_received`, reading does not clear).
fn shutdown_requested() -> bool {
    // SAFETY: a sig_atomic_t written only by the signal handler.
    unsafe { (&raw const pg_sys::ShutdownRequestPending).read_volatile() != 0 }
}

fn reload_settings_if_asked() {
    // SAFETY: ConfigReloadPending is set by the SIGHUP handler; reading and
    // clearing it, then reloading, is what PostgreSQL's own workers do.
    unsafe {
        if (&raw const pg_sys::ConfigReloadPending).read_volatile() != 0 {
            (&raw mut pg_sys::ConfigReloadPending).write_volatile(0);
            pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
        }
    }
}

fn caught_message(caught: &CaughtError) -> String {
    match caught {
        CaughtError::PostgresError(e) | CaughtError::ErrorReport(e) => e.message().to_string(),
        CaughtError::RustPanic { ereport, .. } => ereport.message().to_string(),
    }
}

/// Run `body` in its own transaction; an error aborts the transaction and
/// comes back as its message.
fn in_transaction<R>(
    body: impl FnOnce() -> R + std::panic::UnwindSafe + std::panic::RefUnwindSafe,
) -> Result<R, String> {
    PgTryBuilder::new(|| Ok(BackgroundWorker::transaction(body)))
        .catch_others(|caught| {
            // SAFETY: this is the cleanup PostgreSQL's own workers do
            // after an error (it also ends any subtransaction left open).
            unsafe {
                pg_sys::AbortOutOfAnyTransaction();
                pg_sys::FlushErrorState();
            }
            Err(caught_message(&caught))
        })
        .execute()
}

/// Whether there is anything to do: the extension exists here and we are
/// not a standby.
fn ready() -> bool {
    Spi::connect(|client| {
        client
            .select(
                "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'agent_memory')
                        AND NOT pg_catalog.pg_is_in_recovery()",
                None,
                &[],
            )
            .and_then(|t| t.first().get::<bool>(1))
            .ok()
            .flatten()
            .unwrap_or(false)
    })
}

/// One batch: bounded waits, so a foreground lock makes it fail fast rather
/// than queue behind (or in front of) application work. Entries are first
/// deleted directly, then, if a row was held, the SKIP LOCKED way (see
/// `cleanup`); the cursor moves only with the attempt that stands.
fn batch(kind: Expired, size: i32, cursor: &mut Cursor) -> SqlResult<i64> {
    Spi::run(
        "SET LOCAL lock_timeout = '1s'; SET LOCAL statement_timeout = '60s';
         SET LOCAL search_path = pg_catalog, pg_temp",
    )
    .or_report()?;
    let (deleted, next) = removing(kind, |locking| {
        let mut tried = cursor.clone();
        delete_batch(kind, locking, size, &mut tried).map(|deleted| (deleted, tried))
    })?;
    *cursor = next;
    Ok(deleted)
}

/// What pg_stat_activity shows for the worker: `active` with what it
/// removes while a run is under way, `idle` between runs.
fn report_activity(what: Option<Expired>) {
    let (state, text) = match what {
        Some(Expired::Sessions) => (
            pg_sys::BackendState::STATE_RUNNING,
            c"agent_memory cleanup: removing expired sessions",
        ),
        Some(Expired::Entries) => (
            pg_sys::BackendState::STATE_RUNNING,
            c"agent_memory cleanup: removing expired entries",
        ),
        None => (pg_sys::BackendState::STATE_IDLE, c""),
    };
    // SAFETY: a static C string; the call only copies it into shared memory.
    unsafe { pg_sys::pgstat_report_activity(state, text.as_ptr()) };
}

/// One cleanup run; returns the error that stopped it, if any.
fn run_once() -> Result<(), String> {
    let result = run_batches();
    report_activity(None);
    result
}

fn run_batches() -> Result<(), String> {
    if !in_transaction(ready)? {
        return Ok(());
    }
    let started_at = in_transaction(pgrx::datetime::clock_timestamp)?;
    let size = settings::CLEANUP_BATCH_SIZE.get();
    let mut counts = Counts::default();
    let mut failure = None;
    'kinds: for kind in Expired::ALL {
        report_activity(Some(kind));
        let mut cursor = Cursor::start(kind);
        loop {
            if shutdown_requested() {
                break 'kinds;
            }
            let mut next = cursor.clone();
            let outcome = in_transaction(move || batch(kind, size, &mut next).map(|n| (n, next)));
            match outcome.and_then(|r| r.map_err(|e| e.to_string())) {
                Ok((deleted, next)) => {
                    cursor = next;
                    counts.add(kind, deleted);
                    if deleted < size as i64 {
                        break;
                    }
                }
                Err(message) => {
                    failure = Some(message);
                    break 'kinds;
                }
            }
        }
    }
    // Idle runs are not recorded: at a short interval they would flood the
    // table. pg_stat_activity shows the worker is alive.
    if failure.is_some() || counts.sessions > 0 || counts.entries > 0 {
        let error = failure.clone();
        in_transaction(move || {
            record_run(started_at, "worker", counts, error.as_deref()).map(|_| ())
        })?
        .map_err(|report| report.to_string())?;
    }
    match failure {
        Some(message) => Err(message),
        None => Ok(()),
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn agent_memory_cleanup_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = settings::DATABASE
        .get()
        .and_then(|db| db.into_string().ok())
        .unwrap_or_else(|| "postgres".to_string());
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    log!("{WORKER_TYPE} worker started in database \"{database}\"");

    loop {
        let interval = Duration::from_secs(settings::CLEANUP_INTERVAL_S.get().max(1) as u64);
        if !BackgroundWorker::wait_latch(Some(interval)) || shutdown_requested() {
            break;
        }
        reload_settings_if_asked();
        if let Err(message) = run_once() {
            warning!(
                "{WORKER_TYPE} failed, restarting in {}s: {message}",
                RESTART_AFTER.as_secs()
            );
            // SAFETY: no transaction is open; exit code 1 asks the postmaster
            // for a restart after RESTART_AFTER.
            unsafe { pg_sys::proc_exit(1) };
        }
        if shutdown_requested() {
            break;
        }
    }
    log!("{WORKER_TYPE} worker stopping on request");
    // Exit code 1: like pg_cron, a worker stopped by pg_terminate_backend()
    // comes back after RESTART_AFTER; at server shutdown it is not restarted.
    unsafe { pg_sys::proc_exit(1) };
}
