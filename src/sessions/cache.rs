//! What a backend may remember about the sessions it has checked: until
//! when each is known to stay active.
//!
//! A write to working memory must refuse a session that has expired or
//! ended, and a read of key-value memory must hide the entries of one;
//! asking the sessions table each time would cost `wm_set` and `kv_get`
//! a second index probe per call. A session stays active until
//! its last activity plus its idle timeout, and activity only moves
//! forward, so that time, once read, is a lower bound for as long as the
//! session is not deleted. A backend keeps it for up to
//! [`REMEMBERED_SESSIONS`] sessions (an application's connection serves
//! many), and trusts it while:
//!
//! * the transaction's time is before it,
//! * `agent_memory.session_idle_timeout` is what it was when read, and
//! * no session has been deleted since: a transaction that deletes
//!   sessions (by any `DELETE`, or `TRUNCATE`) bumps a counter in shared
//!   memory once it has committed (triggers), and the counter is read
//!   before the session is, so a deletion that commits after the read is
//!   noticed; any bump forgets every session;
//! * no transaction or savepoint of this backend has rolled back since (the
//!   read may have seen a renewal of this backend's own that rolled back),
//! * the role, `agent_memory.tenant` and `agent_memory.tenant_isolation`
//!   are those of the read (they choose the tenant, and ids are per tenant).
//!
//! What is remembered must come from a snapshot taken after the counter
//! was read, or it may predate a deletion the counter already shows. So a
//! session is remembered only from a statement that takes its own snapshot
//! (a read-write one under READ COMMITTED), never under REPEATABLE READ or
//! SERIALIZABLE (one snapshot for the whole transaction), in a parallel
//! operation (no snapshot of its own there) or on a standby (changes
//! arrive there without triggers): see [`can_remember`].
//!
//! Not noticed, because no trigger of this node fires: changes applied
//! with `session_replication_role = replica` (logical replication), a
//! prepared transaction's deletion (`COMMIT PREPARED` runs no commit
//! callback of the preparing backend), and, on Citus, changes made on
//! another node (docs/scaling.md).
//!
//! Without `shared_preload_libraries` there is no counter, nothing is
//! remembered and every call asks.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{PgAtomic, pg_shmem_init};

use crate::pg::settings::{TENANT, TENANT_ISOLATION};

static DELETIONS: PgAtomic<AtomicU64> = unsafe { PgAtomic::new(c"agent_memory_session_deletions") };

/// Whether DELETIONS exists (the library was preloaded).
static SHARED: AtomicBool = AtomicBool::new(false);

/// Most sessions a backend remembers; past that it starts over (a
/// memory is a few dozen bytes).
pub const REMEMBERED_SESSIONS: usize = 4096;

struct Known {
    idle_minutes: i32,
    /// TimestampTz (microseconds since 2000) until which it stays active.
    active_until: i64,
}

/// The sessions remembered, all read by one role and tenant with the
/// deletion counter at one value.
struct Remembered {
    role: pg_sys::Oid,
    isolated: bool,
    tenant: Option<std::ffi::CString>,
    deletions: u64,
    sessions: HashMap<String, Known>,
}

thread_local! {
    static KNOWN: RefCell<Option<Remembered>> = const { RefCell::new(None) };
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
    event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::XactEvent::XACT_EVENT_ABORT {
        forget();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_on_sub_abort(
    event: pg_sys::SubXactEvent::Type, _subxact: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId, _arg: *mut std::ffi::c_void,
) {
    if event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        forget();
    }
}

/// The deletion counter, when this backend may remember what it reads of
/// a session next: read it before the session, with a snapshot taken after
/// this call (see the module's comment).
pub fn can_remember() -> Option<u64> {
    // SAFETY: plain reads of backend state; none errors.
    let own_snapshots = unsafe {
        pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32
            && !pg_sys::IsInParallelMode()
            && !pg_sys::RecoveryInProgress()
    };
    if own_snapshots { deletions() } else { None }
}

/// The deletion counter (None: no counter). On Citus there is none to
/// trust: a session is deleted on the node of its shard, whose counter
/// this backend does not read when the call runs on the coordinator.
fn deletions() -> Option<u64> {
    if !SHARED.load(Ordering::Relaxed) || crate::pg::plans::on_citus().unwrap_or(true) {
        return None;
    }
    Some(DELETIONS.get().load(Ordering::SeqCst))
}

fn current_role() -> pg_sys::Oid {
    // SAFETY: reads the backend's current role id; never errors.
    unsafe { pg_sys::GetUserId() }
}

fn transaction_time() -> i64 {
    // SAFETY: reads the current transaction's start time; never errors.
    unsafe { pg_sys::GetCurrentTransactionStartTimestamp() }
}

/// Whether `session_id` is known to be active for this transaction, as far as
/// this backend knows without asking.
pub fn known_active(session_id: &str, idle_minutes: i32) -> bool {
    let Some(deletions) = deletions() else {
        return false;
    };
    KNOWN.with(|known| {
        known.borrow().as_ref().is_some_and(|r| {
            r.deletions == deletions
                && r.role == current_role()
                && r.isolated == TENANT_ISOLATION.get()
                && r.tenant == TENANT.get()
                && r.sessions.get(session_id).is_some_and(|k| {
                    k.idle_minutes == idle_minutes && transaction_time() < k.active_until
                })
        })
    })
}

/// Remember what a read found: active until `active_until`, with the
/// deletion counter `can_remember` gave before the read.
pub fn remember(session_id: &str, idle_minutes: i32, active_until: i64, deletions: u64) {
    let role = current_role();
    let isolated = TENANT_ISOLATION.get();
    let tenant = TENANT.get();
    KNOWN.with(|known| {
        let mut known = known.borrow_mut();
        let same_reader = known.as_ref().is_some_and(|r| {
            r.deletions == deletions
                && r.role == role
                && r.isolated == isolated
                && r.tenant == tenant
        });
        if !same_reader || known.as_ref().is_some_and(|r| r.sessions.len() >= REMEMBERED_SESSIONS) {
            *known =
                Some(Remembered { role, isolated, tenant, deletions, sessions: HashMap::new() });
        }
        if let Some(r) = known.as_mut() {
            let read = Known { idle_minutes, active_until };
            r.sessions.insert(session_id.to_owned(), read);
        }
    });
}

// Trigger on agent_memory.sessions, for each deleted row, for TRUNCATE and
// for each update that may shorten a session's life:
// bump the counter once the transaction's deletions are visible to
// everyone (once per transaction; a DELETE that removes nothing bumps
// nothing, so the cleanup's idle runs leave the backends' memory alone).
//
// Written by hand rather than with `#[pg_trigger]`, whose wrapper answers a
// direct call (`SELECT agent_memory.note_session_deletions()`) with an
// internal error; this one answers 39P01 as PostgreSQL's own trigger
// functions do. The symbol keeps the name pgrx gave it, so databases that
// already have the function need no change.
extension_sql!(
    r#"
CREATE FUNCTION agent_memory.note_session_deletions() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'note_session_deletions_wrapper';
"#,
    name = "note_session_deletions"
);

crate::pg::c_functions::version_1!(pg_finfo_note_session_deletions_wrapper);

/// The C entry point of the trigger function note_session_deletions().
///
/// # Safety
/// Called by PostgreSQL's function manager with a valid `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn note_session_deletions_wrapper(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo comes from the function manager; a trigger call's
    // context is a TriggerData node (CALLED_AS_TRIGGER).
    let as_trigger = unsafe {
        let context = (*fcinfo).context;
        !context.is_null() && (*context).type_ == pg_sys::NodeTag::T_TriggerData
    };
    if !as_trigger {
        crate::pg::error::not_called_as_trigger("note_session_deletions").report(PgLogLevel::ERROR);
    }
    // This backend's own transaction may write again before it commits.
    forget();
    if SHARED.load(Ordering::Relaxed) && !DELETING.replace(true) {
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Commit, || {
            DELETIONS.get().fetch_add(1, Ordering::SeqCst);
            DELETING.set(false);
        });
        pgrx::register_xact_callback(pgrx::PgXactCallbackEvent::Abort, || DELETING.set(false));
    }
    // An AFTER trigger's result is ignored: NULL.
    pg_sys::Datum::from(0)
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
-- The extension only moves activity forward; an UPDATE that moves it back
-- or changes a session's own timeout (an administrator's, a test's) may
-- end the session sooner than a backend remembers, so it counts as a
-- deletion. Renewals only evaluate the condition.
CREATE TRIGGER sessions_shortened
    AFTER UPDATE OF last_activity_at, idle_timeout ON agent_memory.sessions
    FOR EACH ROW
    WHEN (NEW.last_activity_at < OLD.last_activity_at
          OR NEW.idle_timeout IS DISTINCT FROM OLD.idle_timeout)
    EXECUTE FUNCTION agent_memory.note_session_deletions();
"#,
    name = "sessions_deleted_trigger",
    requires = ["note_session_deletions"]
);
