//! What a backend may remember about a session between calls: until when
//! it surely stays active.
//!
//! A write to working memory must refuse a session that has expired or
//! ended, and asking the sessions table each time cost `wm_set` 6% of its
//! throughput (an index probe per write). A session stays active until its
//! last activity plus its idle timeout, and activity only moves forward, so
//! that time, once read, is a lower bound for as long as the session is not
//! deleted. A backend keeps it for the last session it checked, and trusts
//! it while:
//!
//! * the transaction's time is before it,
//! * `agent_memory.session_idle_timeout` is what it was when read, and
//! * no session has been deleted since: a transaction that deletes
//!   sessions (by any `DELETE`, or `TRUNCATE`) bumps a counter in shared
//!   memory once it has committed (triggers), and the counter is read
//!   before the session is, so a deletion that commits after the read is
//!   noticed;
//! * no transaction or savepoint of this backend has rolled back since (the
//!   read may have seen a renewal of this backend's own that rolled back),
//! * the role and `agent_memory.tenant` are those of the read (under tenant
//!   isolation another tenant does not see the session at all).
//!
//! Without `shared_preload_libraries` there is no counter, nothing is
//! remembered and every write asks.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{PgAtomic, pg_shmem_init};

use crate::settings::TENANT;

static DELETIONS: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"agent_memory_session_deletions") };

/// Whether DELETIONS exists (the library was preloaded).
static SHARED: AtomicBool = AtomicBool::new(false);

struct Known {
    session_id: String,
    /// Who read it: the current role and the tenant setting.
    role: pg_sys::Oid,
    tenant: Option<std::ffi::CString>,
    idle_minutes: i32,
    /// TimestampTz (microseconds since 2000) until which it stays active.
    active_until: i64,
    /// DELETIONS when it was read.
    deletions: u64,
}

thread_local! {
    static KNOWN: RefCell<Option<Known>> = const { RefCell::new(None) };
    /// Whether this transaction deleted sessions (the bump is due at commit).
    static DELETING: Cell<bool> = const { Cell::new(false) };
}

// pg_shmem_init! tests pgrx's features for versions this crate never builds.
#[allow(unexpected_cfgs)]
pub fn init(preloading: bool) {
    if preloading {
        pg_shmem_init!(DELETIONS = AtomicU64::new(0));
        // SAFETY: registering callbacks at load time, on the main thread.
        unsafe {
            pg_sys::RegisterXactCallback(Some(forget_on_abort), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(forget_on_sub_abort), std::ptr::null_mut());
        }
        SHARED.store(true, Ordering::Relaxed);
    }
}

fn forget() {
    KNOWN.with(|known| known.borrow_mut().take());
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_on_abort(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT {
        forget();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_on_sub_abort(
    event: pg_sys::SubXactEvent::Type,
    _subxact: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        forget();
    }
}

/// The deletion counter, read before a session is (None: no counter).
pub fn deletions() -> Option<u64> {
    SHARED
        .load(Ordering::Relaxed)
        .then(|| DELETIONS.get().load(Ordering::SeqCst))
}

fn current_role() -> pg_sys::Oid {
    // SAFETY: reads the backend's current role id; never errors.
    unsafe { pg_sys::GetUserId() }
}

fn transaction_time() -> i64 {
    // SAFETY: reads the current transaction's start time; never errors.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// Whether `session_id` is surely active for this transaction, as far as
/// this backend knows without asking.
pub fn surely_active(session_id: &str, idle_minutes: i32) -> bool {
    let Some(deletions) = deletions() else {
        return false;
    };
    KNOWN.with(|known| {
        known.borrow().as_ref().is_some_and(|k| {
            k.session_id == session_id
                && k.idle_minutes == idle_minutes
                && k.role == current_role()
                && k.tenant == TENANT.get()
                && k.deletions == deletions
                && transaction_time() < k.active_until
        })
    })
}

/// Remember what a read found: active until `active_until`, with the
/// deletion counter as it was before the read.
pub fn remember(session_id: &str, idle_minutes: i32, active_until: i64, deletions: u64) {
    KNOWN.with(|known| {
        *known.borrow_mut() = Some(Known {
            session_id: session_id.to_owned(),
            role: current_role(),
            tenant: TENANT.get(),
            idle_minutes,
            active_until,
            deletions,
        })
    });
}

/// Trigger on agent_memory.sessions, for each deleted row and for TRUNCATE:
/// bump the counter once the transaction's deletions are visible to
/// everyone (once per transaction; a DELETE that removes nothing bumps
/// nothing, so the cleanup's idle runs leave the backends' memory alone).
#[pg_trigger]
fn note_session_deletions<'a>(
    _trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, AllocatedByPostgres>>, pgrx::pg_sys::panic::ErrorReport> {
    // This backend's own transaction may write again before it commits.
    forget();
    if SHARED.load(Ordering::Relaxed) && !DELETING.replace(true) {
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, || {
            DELETIONS.get().fetch_add(1, Ordering::SeqCst);
            DELETING.set(false);
        });
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, || DELETING.set(false));
    }
    Ok(None)
}

extension_sql!(
    r#"
-- A backend remembers until when a session stays active, trusting it while
-- no session has been deleted since: every deletion bumps a shared counter.
CREATE TRIGGER sessions_deleted
    AFTER DELETE ON agent_memory.sessions
    FOR EACH ROW EXECUTE FUNCTION agent_memory.note_session_deletions();
CREATE TRIGGER sessions_truncated
    AFTER TRUNCATE ON agent_memory.sessions
    FOR EACH STATEMENT EXECUTE FUNCTION agent_memory.note_session_deletions();
"#,
    name = "sessions_deleted_trigger",
    requires = [note_session_deletions]
);
