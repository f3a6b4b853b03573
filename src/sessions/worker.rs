//! The cleanup background worker.
//!
//! Registered when the library is in `shared_preload_libraries`. Every
//! `agent_memory.cleanup_interval` it runs the same batches as
//! `cleanup_expired()` in database `agent_memory.database`, one short
//! transaction per batch, with SKIP LOCKED and a local lock timeout so it
//! never waits on the foreground, and a time limit per batch
//! (`agent_memory.cleanup_batch_timeout`) that it enforces itself: a
//! background worker has no statement timeout of its own. It reloads
//! settings on SIGHUP. SIGTERM ends it at once, inside a batch too
//! (PostgreSQL's own handler: the next interrupt check exits), and so does
//! the postmaster's death, checked between batches. It sleeps while the
//! extension is not installed in its database or the server is in recovery.
//! A failed batch rolls back whole: nothing is left half-done. A batch that
//! ran past its time limit is tried again smaller; any other failed batch
//! ends only its own kind of row for the run. The run records what it left
//! in `cleanup_runs`, and the next run tries again. An error outside a batch
//! is logged; the process then exits and its launcher starts it again
//! after a short delay.
//!
//! The launcher is the worker registered at server start. It connects to
//! no database and reads only `pg_database`, a shared catalog, so it can
//! wait for a worker's database that does not exist yet: it starts the
//! worker once the database is there, and again after each exit, instead
//! of a worker that fails to connect and is restarted every few seconds.

use std::ffi::{CString, c_int};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, SignalWakeFlags};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use crate::pg::error::{OrReport, SqlResult};
use crate::pg::settings;
use crate::sessions::cleanup::{
    Batch, Counts, Cursor, Expired, delete_batch, pass_over, record_run, removing, stop_if_asked,
    with_index_plans,
};
use agent_memory_core::sessions::cleanup::{AfterTimeout, BatchSize};

/// How `pg_stat_activity.backend_type` names the worker.
pub const WORKER_TYPE: &str = "agent_memory cleanup";
/// How `pg_stat_activity.backend_type` names the launcher.
pub const LAUNCHER_TYPE: &str = "agent_memory cleanup launcher";
/// Delay before the launcher starts the worker again after it exits, and
/// between two looks for a missing database.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// Register the launcher; call from `_PG_init` while preloading.
pub fn register() {
    BackgroundWorkerBuilder::new(LAUNCHER_TYPE)
        .set_type(LAUNCHER_TYPE)
        .set_library("agent_memory")
        .set_function("agent_memory_cleanup_launcher_main")
        .enable_spi_access()
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// The database the worker serves: `agent_memory.database`.
fn worker_database() -> String {
    settings::DATABASE
        .get()
        .and_then(|db| db.into_string().ok())
        .unwrap_or_else(|| "postgres".to_string())
}

/// Have `handler` handle `signal` in this process.
fn handle_signal(signal: u32, handler: unsafe extern "C-unwind" fn(c_int)) {
    // Signal numbers are small: the conversion keeps them.
    let signal = signal as c_int;
    // SAFETY: the handler is PostgreSQL's own or this library's, both
    // async-signal-safe.
    unsafe {
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(signal, Some(handler));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(signal, Some(handler));
    }
}

/// PostgreSQL's `die` handles SIGTERM: it asks the next interrupt check,
/// wherever it runs (a scan, a lock wait, the wait between runs), to exit.
fn exit_on_sigterm() {
    handle_signal(pg_sys::SIGTERM, postgres_die);
}

/// The worker's own limit on one batch: PostgreSQL arms the statement
/// timeout only for statements a client sends, never in a background
/// worker. When it fires, the batch fails with 57014 like a statement that
/// timed out.
struct BatchTimeLimit;

// timeout.h: the position of STATEMENT_TIMEOUT in enum TimeoutId (the same
// in every supported release).
const STATEMENT_TIMEOUT: u32 = 3;

unsafe extern "C-unwind" {
    // The signal handler itself: pg_sys::die is a wrapper that only Rust
    // can call.
    #[link_name = "die"]
    fn postgres_die(signal: c_int);
    fn enable_timeout_after(id: u32, delay_ms: i32);
    fn disable_timeout(id: u32, keep_indicator: bool);
}

impl BatchTimeLimit {
    fn start() -> Self {
        // SAFETY: the statement timeout is registered for every backend
        // connected to a database (InitPostgres); a background worker with
        // a database connection handles its SIGINT as a query cancel.
        unsafe {
            enable_timeout_after(STATEMENT_TIMEOUT, settings::CLEANUP_BATCH_TIMEOUT_MS.get())
        };
        BatchTimeLimit
    }
}

impl Drop for BatchTimeLimit {
    fn drop(&mut self) {
        // SAFETY: disabling a timeout that may or may not be pending.
        unsafe { disable_timeout(STATEMENT_TIMEOUT, false) };
    }
}

/// Reload the configuration if SIGHUP asked for it; true if it did.
fn reload_settings_if_asked() -> bool {
    // SAFETY: ConfigReloadPending is set by the SIGHUP handler; reading and
    // clearing it, then reloading, is what PostgreSQL's own workers do.
    unsafe {
        if (&raw const pg_sys::ConfigReloadPending).read_volatile() == 0 {
            return false;
        }
        (&raw mut pg_sys::ConfigReloadPending).write_volatile(0);
        pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
    }
    true
}

/// Why a transaction of the worker failed.
struct Failed {
    /// It was cancelled: the batch time limit ended it (or an operator's
    /// `pg_cancel_backend`).
    cancelled: bool,
    message: String,
}

impl From<CaughtError> for Failed {
    fn from(caught: CaughtError) -> Self {
        let report = match &caught {
            CaughtError::PostgresError(e) | CaughtError::ErrorReport(e) => e,
            CaughtError::RustPanic { ereport, .. } => ereport,
        };
        Failed {
            cancelled: report.sql_error_code() == PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            message: report.message().to_string(),
        }
    }
}

/// Run `body` in its own transaction; an error aborts the transaction and
/// comes back as a [`Failed`].
fn in_transaction<R>(
    body: impl FnOnce() -> R + std::panic::UnwindSafe + std::panic::RefUnwindSafe,
) -> Result<R, Failed> {
    PgTryBuilder::new(|| Ok(BackgroundWorker::transaction(body)))
        .catch_others(|caught| {
            // SAFETY: this is the cleanup PostgreSQL's own workers do
            // after an error (it also ends any subtransaction left open).
            unsafe {
                pg_sys::AbortOutOfAnyTransaction();
                pg_sys::FlushErrorState();
            }
            Err(Failed::from(caught))
        })
        .execute()
}

/// Run `body`, which returns its own errors, in its own transaction; any
/// error comes back as its message.
fn in_transaction_or_message<R>(
    body: impl FnOnce() -> SqlResult<R> + std::panic::UnwindSafe + std::panic::RefUnwindSafe,
) -> Result<R, String> {
    match in_transaction(body) {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(report)) => Err(report.to_string()),
        Err(failed) => Err(failed.message),
    }
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
fn batch(kind: Expired, size: i32, cursor: &mut Cursor) -> SqlResult<Batch> {
    Spi::run("SET LOCAL lock_timeout = '1s'; SET LOCAL search_path = pg_catalog, pg_temp")
        .or_report()?;
    let (done, next) = with_index_plans(|| {
        removing(|locking| {
            let mut tried = cursor.clone();
            delete_batch(kind, locking, size, &mut tried).map(|done| (done, tried))
        })
    })?;
    *cursor = next;
    Ok(done)
}

/// What pg_stat_activity shows for the worker: `active` with what it
/// removes while a run is under way, `idle` between runs.
fn report_activity(what: Option<Expired>) {
    let (state, text) = match what {
        Some(Expired::Sessions) => (
            pg_sys::BackendState::STATE_RUNNING,
            c"agent_memory cleanup: removing expired sessions",
        ),
        Some(Expired::Entries) => {
            (pg_sys::BackendState::STATE_RUNNING, c"agent_memory cleanup: removing expired entries")
        }
        Some(Expired::Versions) => (
            pg_sys::BackendState::STATE_RUNNING,
            c"agent_memory cleanup: removing expired entry versions",
        ),
        None => (pg_sys::BackendState::STATE_IDLE, c""),
    };
    // SAFETY: a static C string; the call only copies it into shared memory.
    unsafe { pg_sys::pgstat_report_activity(state, text.as_ptr()) };
}

/// Show the worker idle with the interval it now waits, and return it:
/// an operator (or a test) sees in pg_stat_activity which setting it uses.
fn report_waiting() -> Duration {
    let seconds = settings::CLEANUP_INTERVAL_S.get().max(1);
    let text = std::ffi::CString::new(format!("agent_memory cleanup: runs every {seconds} s"))
        .unwrap_or_default();
    // SAFETY: the call only copies the string into shared memory.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_IDLE, text.as_ptr()) };
    Duration::from_secs(seconds as u64)
}

/// One cleanup run; returns the error that stopped it, if any.
fn run_once() -> Result<(), String> {
    let result = run_batches();
    report_activity(None);
    result
}

/// Every kind of expired row, batch after batch. A batch that fails is
/// undone. One that ran past its time limit is tried again smaller (see
/// [`BatchSize`]), and a row too slow to remove alone is passed over. Any
/// other failure ends this kind for the run, and the run goes on with the
/// next. The run records what it left and why; the next run tries again.
fn run_batches() -> Result<(), String> {
    if !in_transaction(ready).map_err(|failed| failed.message)? {
        return Ok(());
    }
    let started_at =
        in_transaction(pgrx::datetime::clock_timestamp).map_err(|failed| failed.message)?;
    let mut counts = Counts::default();
    let mut left = Vec::new();
    for kind in Expired::ALL {
        report_activity(Some(kind));
        if let Err(why) = remove_expired(kind, &mut counts) {
            left.push(format!("{} left: {why}", kind.name()));
        }
    }
    // Idle runs are not recorded: at a short interval they would flood the
    // table. pg_stat_activity shows the worker is alive.
    if !left.is_empty() || counts.sessions > 0 || counts.entries > 0 {
        let error = (!left.is_empty()).then(|| left.join("; "));
        in_transaction_or_message(move || {
            record_run(started_at, "worker", None, counts, error.as_deref()).map(|_| ())
        })?;
    }
    Ok(())
}

/// Remove the expired rows of one kind. The error is why some were left:
/// a failure that ended the kind early, or a row passed over.
fn remove_expired(kind: Expired, counts: &mut Counts) -> Result<(), String> {
    let mut cursor = Cursor::start(kind);
    let mut size = BatchSize::new(settings::CLEANUP_BATCH_SIZE.get());
    let mut passed_over = None;
    loop {
        stop_if_asked();
        let mut next = cursor.clone();
        let rows = size.rows();
        let outcome = {
            let _limit = BatchTimeLimit::start();
            in_transaction(move || batch(kind, rows, &mut next).map(|n| (n, next)))
        };
        let timed_out = match outcome {
            Ok(Ok((done, next))) => {
                cursor = next;
                counts.add(kind, done.deleted);
                if !done.full {
                    break;
                }
                size.stood();
                continue;
            }
            Ok(Err(report)) => return Err(report.to_string()),
            Err(failed) if failed.cancelled => failed,
            Err(failed) => return Err(failed.message),
        };
        log!(
            "{WORKER_TYPE}: a batch of {rows} {} ran past agent_memory.cleanup_batch_timeout and was undone",
            kind.name()
        );
        if size.timed_out() == AfterTimeout::PassOver {
            passed_over = Some(format!(
                "one alone took longer than agent_memory.cleanup_batch_timeout ({})",
                timed_out.message
            ));
            let mut next = cursor.clone();
            let (moved, next) = in_transaction_or_message(move || {
                pass_over(kind, &mut next).map(|moved| (moved, next))
            })?;
            cursor = next;
            if !moved {
                break;
            }
        }
    }
    match passed_over {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn agent_memory_cleanup_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP);
    exit_on_sigterm();
    let database = worker_database();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    log!("{WORKER_TYPE} worker started in database \"{database}\"");

    // A run is due when the interval has passed since the last one, or at
    // once after SIGHUP. Other latch wakes (a cache catch-up signal, a
    // barrier) only send the worker back to sleep.
    let mut next_run = Instant::now() + report_waiting();
    loop {
        let wait = next_run.saturating_duration_since(Instant::now());
        // False when the postmaster has died; SIGTERM exits inside.
        if !BackgroundWorker::wait_latch(Some(wait)) {
            break;
        }
        let reloaded = reload_settings_if_asked();
        if !reloaded && Instant::now() < next_run {
            continue;
        }
        if let Err(message) = run_once() {
            warning!("{WORKER_TYPE} failed, restarting in {}s: {message}", RESTART_AFTER.as_secs());
            // SAFETY: no transaction is open; the launcher starts the
            // worker again after RESTART_AFTER.
            unsafe { pg_sys::proc_exit(1) };
        }
        next_run = Instant::now() + report_waiting();
    }
    log!("{WORKER_TYPE} worker stopping: the postmaster has exited");
    // SAFETY: no transaction is open.
    unsafe { pg_sys::proc_exit(1) };
}

/// Whether the worker can connect to database `name`: it exists and
/// takes connections. The launcher may read only shared catalogs, and
/// `pg_database` is one. It reads the table itself, not by its index: a
/// backend with no database cannot build an index's cache entry, which is
/// missing until a backend of some database has written the shared cache
/// file after a restart.
fn database_ready(name: &CString) -> Result<(), NotRunning> {
    BackgroundWorker::transaction(|| {
        // SAFETY: a catalog scan inside a transaction, as get_database_oid
        // does it but with indexOK false; the key compares names as `=`.
        // The tuple is read before the scan ends.
        unsafe {
            let mut key = pg_sys::ScanKeyData::default();
            pg_sys::ScanKeyInit(
                &mut key,
                pg_sys::Anum_pg_database_datname as pg_sys::AttrNumber,
                pg_sys::BTEqualStrategyNumber as pg_sys::StrategyNumber,
                pg_sys::RegProcedure::from(pg_sys::F_NAMEEQ),
                pg_sys::Datum::from(name.as_ptr()),
            );
            let lock = pg_sys::AccessShareLock as pg_sys::LOCKMODE;
            let table = pg_sys::table_open(pg_sys::DatabaseRelationId, lock);
            let scan = pg_sys::systable_beginscan(
                table,
                pg_sys::Oid::from(pg_sys::DatabaseNameIndexId),
                false,
                std::ptr::null_mut(),
                1,
                &mut key,
            );
            let row = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(
                pg_sys::systable_getnext(scan),
            );
            // An interrupted DROP DATABASE leaves datconnlimit at -2.
            let ready = match row.as_ref() {
                None => Err(NotRunning::DatabaseMissing),
                Some(db) if !db.datallowconn || db.datconnlimit == -2 => {
                    Err(NotRunning::DatabaseRefusesConnections)
                }
                Some(_) => Ok(()),
            };
            pg_sys::systable_endscan(scan);
            pg_sys::table_close(table, lock);
            ready
        }
    })
}

/// Show the launcher in pg_stat_activity, idle: with what it waits for,
/// or with no text while the worker runs.
fn report_launcher(text: &str) {
    let text = CString::new(text).unwrap_or_default();
    // SAFETY: the call only copies the string into shared memory.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_IDLE, text.as_ptr()) };
}

/// Sleep `delay` whatever wakes the latch; false when the postmaster has
/// died. SIGTERM exits inside.
fn sleep(delay: Duration) -> bool {
    let until = Instant::now() + delay;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        if !BackgroundWorker::wait_latch(Some(left)) {
            return false;
        }
        reload_settings_if_asked();
    }
}

/// Why the launcher could not keep a worker running this time.
#[derive(Clone, Copy, PartialEq)]
enum NotRunning {
    DatabaseMissing,
    DatabaseRefusesConnections,
    NoWorkerSlot,
}

/// The launcher's running worker. The launcher stops it when it exits
/// itself, so that the launcher started after it never runs a second
/// worker beside an old one.
static RUNNING_WORKER: AtomicPtr<pg_sys::BackgroundWorkerHandle> = AtomicPtr::new(null_mut());

#[pg_guard]
unsafe extern "C-unwind" fn stop_worker_on_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let handle = RUNNING_WORKER.load(Ordering::Relaxed);
    if !handle.is_null() {
        // SAFETY: a handle of this process's registration, still attached
        // to shared memory (before_shmem_exit).
        unsafe { pg_sys::TerminateBackgroundWorker(handle) };
    }
}

/// Start the worker and wait until it exits; false when the postmaster
/// has died.
fn run_worker() -> Result<bool, NotRunning> {
    let mut worker: pg_sys::BackgroundWorker = (&BackgroundWorkerBuilder::new(WORKER_TYPE)
        .set_type(WORKER_TYPE)
        .set_library("agent_memory")
        .set_function("agent_memory_cleanup_main")
        .enable_spi_access()
        // SAFETY: reading this process's pid.
        .set_notify_pid(unsafe { pg_sys::MyProcPid }))
        .into();
    let mut handle = null_mut();
    // SAFETY: a complete registration; the handle is set when it succeeds.
    if !unsafe { pg_sys::RegisterDynamicBackgroundWorker(&mut worker, &mut handle) } {
        return Err(NotRunning::NoWorkerSlot);
    }
    RUNNING_WORKER.store(handle, Ordering::Relaxed);
    // This process is the worker's notify pid: the postmaster sets its
    // latch when the worker starts and when it stops. SIGHUP wakes it too.
    let postmaster_alive = loop {
        let mut pid = 0;
        // SAFETY: a live handle of this process's registration.
        let status = unsafe { pg_sys::GetBackgroundWorkerPid(handle, &mut pid) };
        if status == pg_sys::BgwHandleStatus::BGWH_STOPPED {
            break true;
        }
        if !BackgroundWorker::wait_latch(None) {
            break false;
        }
        reload_settings_if_asked();
    };
    RUNNING_WORKER.store(null_mut(), Ordering::Relaxed);
    // SAFETY: the handle was palloc'd for this process and is not used again.
    unsafe { pg_sys::pfree(handle.cast()) };
    Ok(postmaster_alive)
}

/// The launcher ignores SIGINT: it runs no statement to cancel, and a
/// cancel while it waits for the worker would end both.
unsafe extern "C-unwind" fn ignore_signal(_signal: c_int) {}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn agent_memory_cleanup_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP);
    exit_on_sigterm();
    handle_signal(pg_sys::SIGINT, ignore_signal);
    BackgroundWorker::connect_worker_to_spi(None, None);
    // SAFETY: registering a callback of this library for this process.
    unsafe { pg_sys::before_shmem_exit(Some(stop_worker_on_exit), pg_sys::Datum::from(0)) };
    let database = worker_database();
    let database_name = CString::new(database.as_str()).unwrap_or_default();
    // Each reason is logged once, when it starts to hold.
    let mut last_reason = None;
    loop {
        let outcome = database_ready(&database_name).and_then(|()| {
            report_launcher("");
            run_worker()
        });
        match outcome {
            Ok(false) => break,
            Ok(true) => last_reason = None,
            Err(reason) => {
                let text = match reason {
                    NotRunning::DatabaseMissing => format!(
                        "{LAUNCHER_TYPE}: waiting for database \"{database}\" (agent_memory.database) to exist"
                    ),
                    NotRunning::DatabaseRefusesConnections => format!(
                        "{LAUNCHER_TYPE}: waiting for database \"{database}\" (agent_memory.database) to accept connections"
                    ),
                    NotRunning::NoWorkerSlot => format!(
                        "{LAUNCHER_TYPE}: waiting for a free background worker slot (max_worker_processes)"
                    ),
                };
                if last_reason != Some(reason) {
                    warning!("{text}");
                    last_reason = Some(reason);
                }
                report_launcher(&text);
            }
        }
        if !sleep(RESTART_AFTER) {
            break;
        }
    }
    log!("{LAUNCHER_TYPE} stopping: the postmaster has exited");
    // SAFETY: no transaction is open.
    unsafe { pg_sys::proc_exit(1) };
}
