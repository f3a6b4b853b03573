//! Change notifications: queued by each change, handed to PostgreSQL just
//! before commit, and only while some backend listens.
//!
//! While `agent_memory.tenant_isolation` is off every role shares one
//! memory and every change goes to channel `agent_memory`. While it is on,
//! each tenant's changes go to its own channel, `agent_memory_` and 40 hex
//! digits of sha256(secret '/' tenant), where the secret is a random value
//! in `agent_memory.notify_secret` that only the tables' owner may read:
//! no tenant can name another's channel, so none can LISTEN to it or send
//! on it. `notify_channel()` tells a caller its own.
//!
//! Every transaction that calls `pg_notify` takes one cluster-wide lock at
//! commit, so notifying writers commit one at a time, whether anyone
//! listens or not. So:
//!
//! * a change queues its payload in the backend (dropped with a rolled
//!   back transaction or savepoint, as PostgreSQL drops a NOTIFY);
//! * just before commit (`XACT_EVENT_PRE_COMMIT`, which runs before
//!   PostgreSQL queues its own notifications) the payloads go to
//!   `pg_notify`, unless no backend listens;
//! * with `shared_preload_libraries` the extension counts listeners in
//!   shared memory (a utility hook sees `LISTEN agent_memory`, `UNLISTEN`
//!   and `DISCARD ALL`); without it there is no count and every change
//!   notifies.
//!
//! No change can slip past a new listener. A committing writer registers
//! in the current epoch's slot before it reads the count, and leaves the
//! slot once its commit is visible (or it aborted). `LISTEN` raises the
//! count, opens a new epoch, and waits until the old epoch's slot is empty.
//! So a writer either sees the new listener and notifies, or had read the
//! count before and committed before the `LISTEN` statement returns, so
//! that the listener's next read sees the change. (Two atomic operations
//! per committing writer, where a heavyweight lock would cost each writer
//! a lock table entry.)

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;
use pgrx::{IntoDatum, PgAtomic, PgBuiltInOids, PgOid, pg_shmem_init};

use agent_memory_core::notify::PendingNotifications;

use crate::pg::error::SqlResult;
use crate::pg::plans::{Statement, first_value_of};
use crate::pg::settings::TENANT_ISOLATION;

/// The channel of every change while tenants are not isolated.
pub const CHANNEL: &str = "agent_memory";

/// How every tenant's channel begins.
const TENANT_CHANNEL_PREFIX: &str = "agent_memory_";

/// What the backends share: the listener count and the writers' epochs.
#[derive(Default)]
pub struct Listening {
    /// Backends that ran `LISTEN agent_memory` (and may still listen).
    listeners: AtomicU32,
    /// The current epoch; writers register in slot `epoch % 2`.
    epoch: AtomicU64,
    /// Writers between reading the count and the end of their commit.
    committing: [AtomicU32; 2],
}

// SAFETY: atomics only, no pointers: valid in every backend's mapping.
unsafe impl pgrx::PGRXSharedMemory for Listening {}

static LISTENING: PgAtomic<Listening> = unsafe { PgAtomic::new(c"agent_memory_listening") };

/// Whether LISTENING exists (the library was preloaded).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// A change to announce on the writer's tenant's channel; a transaction
/// announces each once, with the version of its last change.
#[derive(PartialEq, Eq, Hash)]
struct Change {
    /// The writer's tenant's channel.
    channel: String,
    subject: Subject,
}

/// What changed.
#[derive(PartialEq, Eq, Hash)]
enum Subject {
    /// A working-memory entry (node '' is the global entry; part None: the
    /// whole entry was cleared).
    WorkingMemory { session_id: String, node_key: String, part: Option<&'static str> },
    /// Some file of a memory tool scope.
    Files { scope: String },
    /// Some node of an owner's graph.
    Graph { owner: String },
}

impl Change {
    /// The JSON payload, with the version of a working-memory part; built
    /// only when someone listens. Working memory's has no "kind" (its shape
    /// predates the others).
    fn payload(&self, version: Option<i32>) -> String {
        match &self.subject {
            Subject::WorkingMemory { session_id, node_key, part } => serde_json::json!({
                "session_id": session_id,
                "node_id": if node_key.is_empty() { None } else { Some(node_key) },
                "part": part,
                "version": version,
            }),
            Subject::Files { scope } => serde_json::json!({"kind": "files", "scope": scope}),
            Subject::Graph { owner } => serde_json::json!({"kind": "graph", "owner": owner}),
        }
        .to_string()
    }
}

thread_local! {
    /// This transaction's changes, each with the version of its last
    /// change and the subtransactions that made it.
    static PENDING: RefCell<PendingNotifications<Change, Option<i32>>> =
        RefCell::new(PendingNotifications::default());
    /// Whether this backend is counted in LISTENING.listeners.
    static COUNTED: Cell<bool> = const { Cell::new(false) };
    /// The subtransactions of this transaction that ran UNLISTEN (applied
    /// at commit, forgotten with a rollback).
    static UNLISTENS: RefCell<Vec<pg_sys::SubTransactionId>> = const { RefCell::new(Vec::new()) };
    /// Whether the exit callback that uncounts this backend is registered.
    static EXIT_HOOKED: Cell<bool> = const { Cell::new(false) };
    /// The epoch slot this backend's committing transaction registered in.
    static REGISTERED: Cell<Option<usize>> = const { Cell::new(None) };
    /// Channels of the tenants this backend has announced changes of.
    static CHANNELS: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
}

static mut PREVIOUS_UTILITY_HOOK: pg_sys::ProcessUtility_hook_type = None;

/// Set up at library load: the transaction callbacks always; the listener
/// count and the utility hook when preloading.
// pg_shmem_init! tests pgrx's features for versions this crate never builds.
#[allow(unexpected_cfgs)]
pub fn init(preloading: bool) {
    // SAFETY: registering callbacks and hooks at load time, on the main
    // thread, as PostgreSQL expects.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_transaction_event), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subtransaction_event), std::ptr::null_mut());
        if preloading {
            pg_shmem_init!(LISTENING = Listening::default());
            PREVIOUS_UTILITY_HOOK = pg_sys::ProcessUtility_hook;
            pg_sys::ProcessUtility_hook = Some(track_listeners);
            COUNTING.store(true, Ordering::Relaxed);
        }
    }
}

/// Announce a change to a working-memory entry (node '' is the global
/// entry; part and version None: the whole entry was cleared) when the
/// transaction commits.
pub fn queue_change(
    session_id: &str, node_key: &str, part: Option<&'static str>, version: Option<i32>,
) -> SqlResult<()> {
    let subject = Subject::WorkingMemory {
        session_id: session_id.to_owned(),
        node_key: node_key.to_owned(),
        part,
    };
    queue(subject, version)
}

/// Announce that a scope's files changed when the transaction commits.
pub fn queue_files_change(scope: &str) -> SqlResult<()> {
    let subject = Subject::Files { scope: scope.to_owned() };
    queue(subject, None)
}

/// Announce that an owner's graph changed when the transaction commits.
pub fn queue_graph_change(owner: &str) -> SqlResult<()> {
    let subject = Subject::Graph { owner: owner.to_owned() };
    queue(subject, None)
}

fn queue(subject: Subject, version: Option<i32>) -> SqlResult<()> {
    // Named now, while statements can run (not at commit, which has no
    // snapshot); a cache makes it one lookup after a tenant's first change.
    let channel = notify_channel()?;
    // SAFETY: reads the current subtransaction id; never errors.
    let subxact = unsafe { pg_sys::GetCurrentSubTransactionId() };
    let change = Change { channel, subject };
    PENDING.with(|pending| pending.borrow_mut().push(change, version, subxact));
    Ok(())
}

/// Leave the epoch slot, once this backend's commit is visible or it
/// aborted.
fn unregister() {
    if let Some(slot) = REGISTERED.take() {
        LISTENING.get().committing[slot].fetch_sub(1, Ordering::SeqCst);
    }
}

/// A new listener: counted, then waits out every writer that may have
/// read the count before.
fn count_listener() {
    let shared = LISTENING.get();
    shared.listeners.fetch_add(1, Ordering::SeqCst);
    let old = shared.epoch.fetch_add(1, Ordering::SeqCst);
    let slot = &shared.committing[(old % 2) as usize];
    while slot.load(Ordering::SeqCst) != 0 {
        // SAFETY: a short sleep and the usual interrupt check (a cancel
        // arrives as a PostgreSQL error through pgrx).
        unsafe {
            pg_sys::pg_usleep(100);
        }
        pgrx::check_for_interrupts!();
    }
}

/// Hand this transaction's changes to pg_notify, if anyone may listen.
fn send_pending() {
    let changes = PENDING.with(|pending| pending.borrow_mut().take());
    if changes.is_empty() {
        return;
    }
    if COUNTING.load(Ordering::Relaxed) {
        let shared = LISTENING.get();
        let slot = (shared.epoch.load(Ordering::SeqCst) % 2) as usize;
        shared.committing[slot].fetch_add(1, Ordering::SeqCst);
        REGISTERED.set(Some(slot));
        if shared.listeners.load(Ordering::SeqCst) == 0 {
            return;
        }
    }
    for (change, version) in changes {
        // SAFETY: pg_notify takes (text, text).
        unsafe {
            pgrx::direct_function_call_as_datum(
                pg_sys::pg_notify,
                &[change.channel.as_str().into_datum(), change.payload(version).into_datum()],
            );
        }
    }
}

/// The channel of `tenant`'s changes: CHANNEL for '' (no isolation), else
/// the tenant's own, named from the secret, which is read as its owner.
fn channel_of(tenant: &str) -> SqlResult<String> {
    if tenant.is_empty() {
        return Ok(CHANNEL.to_string());
    }
    if let Some(channel) = CHANNELS.with(|channels| channels.borrow().get(tenant).cloned()) {
        return Ok(channel);
    }
    let channel = as_owner_of("agent_memory.notify_secret", || {
        first_value_of::<String>(&TENANT_CHANNEL, &[tenant.into()])
    })?
    .ok_or_else(|| {
        crate::pg::error::report(agent_memory_core::Error::internal("no notification secret"))
    })?;
    CHANNELS.with(|channels| {
        let mut channels = channels.borrow_mut();
        // Bounded: a backend that serves many tenants recomputes some.
        if channels.len() >= 1024 {
            channels.clear();
        }
        channels.insert(tenant.to_string(), channel.clone());
    });
    Ok(channel)
}

/// Run `body` as the owner of `table` (a schema-qualified name), as a
/// SECURITY DEFINER function runs as its owner: for the few reads and
/// writes the extension makes that no role it serves may make itself.
pub fn as_owner_of<R>(table: &str, body: impl FnOnce() -> SqlResult<R>) -> SqlResult<R> {
    let owner = first_value_of::<pg_sys::Oid>(&TABLE_OWNER, &[table.into()])?.ok_or_else(|| {
        crate::pg::error::report(agent_memory_core::Error::internal(format!("no table {table}")))
    })?;
    as_role(owner, body)
}

/// Run `body` as role `owner`, as a SECURITY DEFINER function runs, and
/// switch back however it ends (an error also restores the role when its
/// transaction or subtransaction aborts). The body runs with search_path
/// `pg_catalog, pg_temp`, as a function with that setting does: the
/// caller's path, which a function with none keeps (kv_get, memory_tool),
/// could otherwise lead the owner to an operator the caller planted.
fn as_role<R>(owner: pg_sys::Oid, body: impl FnOnce() -> R) -> R {
    let mut user = pg_sys::Oid::INVALID;
    let mut context: std::ffi::c_int = 0;
    // SAFETY: reading and setting the backend's current user and a GUC
    // nest level, as fmgr_security_definer does; the finally block
    // restores the user, and the nest level is closed after the body (an
    // error closes it with its transaction or subtransaction).
    let nest_level = unsafe {
        pg_sys::GetUserIdAndSecContext(&mut user, &mut context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as std::ffi::c_int
                | pg_sys::SECURITY_RESTRICTED_OPERATION as std::ffi::c_int,
        );
        let nest_level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            c"pg_catalog, pg_temp".as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        nest_level
    };
    let body = std::panic::AssertUnwindSafe(body);
    let result = PgTryBuilder::new(move || {
        let body = body;
        (body.0)()
    })
    .finally(|| {
        // SAFETY: restores what was read above.
        unsafe { pg_sys::SetUserIdAndSecContext(user, context) }
    })
    .execute();
    // SAFETY: closes the nest level opened above, restoring search_path.
    unsafe { pg_sys::AtEOXact_GUC(true, nest_level) };
    result
}

/// The channel on which the caller's changes are announced.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn notify_channel() -> SqlResult<String> {
    let tenant =
        if TENANT_ISOLATION.get() { crate::pg::tenants::caller_tenant()? } else { String::new() };
    channel_of(&tenant)
}

#[pg_guard]
unsafe extern "C-unwind" fn on_transaction_event(
    event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT | pg_sys::XactEvent::XACT_EVENT_PRE_PREPARE => {
            send_pending()
        }
        pg_sys::XactEvent::XACT_EVENT_COMMIT | pg_sys::XactEvent::XACT_EVENT_PREPARE => {
            unregister();
            if UNLISTENS.with(|unlistens| !std::mem::take(&mut *unlistens.borrow_mut()).is_empty())
            {
                uncount();
            }
        }
        pg_sys::XactEvent::XACT_EVENT_ABORT => {
            unregister();
            PENDING.with(|pending| pending.borrow_mut().clear());
            UNLISTENS.with(|unlistens| unlistens.borrow_mut().clear());
        }
        _ => {}
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn on_subtransaction_event(
    event: pg_sys::SubXactEvent::Type, subxact: pg_sys::SubTransactionId,
    parent: pg_sys::SubTransactionId, _arg: *mut std::ffi::c_void,
) {
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => {
            PENDING.with(|pending| pending.borrow_mut().abort_subtransaction(subxact));
            UNLISTENS.with(|unlistens| unlistens.borrow_mut().retain(|id| *id != subxact));
        }
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => {
            PENDING.with(|pending| pending.borrow_mut().commit_subtransaction(subxact, parent));
            UNLISTENS.with(|unlistens| {
                for id in unlistens.borrow_mut().iter_mut() {
                    if *id == subxact {
                        *id = parent;
                    }
                }
            });
        }
        _ => {}
    }
}

fn uncount() {
    if COUNTED.replace(false) {
        LISTENING.get().listeners.fetch_sub(1, Ordering::SeqCst);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn uncount_at_exit(_code: i32, _arg: pg_sys::Datum) {
    uncount();
}

/// What a utility statement does to this backend's listening.
#[derive(PartialEq)]
enum ListenEffect {
    None,
    Listen,
    Unlisten,
}

/// Whether `name` (a C string) names one of our channels: the shared one or
/// a tenant's.
unsafe fn is_channel(name: *const std::ffi::c_char) -> bool {
    if name.is_null() {
        return false;
    }
    // SAFETY: the parser's channel names are NUL-terminated strings.
    let name = unsafe { CStr::from_ptr(name) }.to_bytes();
    name == CHANNEL.as_bytes() || name.starts_with(TENANT_CHANNEL_PREFIX.as_bytes())
}

unsafe fn listen_effect(statement: *mut pg_sys::Node) -> ListenEffect {
    if statement.is_null() {
        return ListenEffect::None;
    }
    // SAFETY: the node tag says which statement struct `statement` is.
    unsafe {
        match (*statement).type_ {
            pg_sys::NodeTag::T_ListenStmt => {
                let listen = statement.cast::<pg_sys::ListenStmt>();
                if is_channel((*listen).conditionname) {
                    ListenEffect::Listen
                } else {
                    ListenEffect::None
                }
            }
            pg_sys::NodeTag::T_UnlistenStmt => {
                // Only UNLISTEN * uncounts: a backend may listen on more
                // than one of our channels, and staying counted after
                // leaving one only costs notifications nobody reads.
                let unlisten = statement.cast::<pg_sys::UnlistenStmt>();
                if (*unlisten).conditionname.is_null() {
                    ListenEffect::Unlisten
                } else {
                    ListenEffect::None
                }
            }
            pg_sys::NodeTag::T_DiscardStmt => {
                let discard = statement.cast::<pg_sys::DiscardStmt>();
                if (*discard).target == pg_sys::DiscardMode::DISCARD_ALL {
                    ListenEffect::Unlisten
                } else {
                    ListenEffect::None
                }
            }
            _ => ListenEffect::None,
        }
    }
}

unsafe extern "C-unwind" {
    /// PostgreSQL's own, called without pgrx's guard: an error in the
    /// statement must reach the caller exactly as PostgreSQL raised it.
    #[link_name = "standard_ProcessUtility"]
    fn standard_process_utility(
        statement: *mut pg_sys::PlannedStmt, query: *const std::ffi::c_char, read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type, params: pg_sys::ParamListInfo,
        environment: *mut pg_sys::QueryEnvironment, destination: *mut pg_sys::DestReceiver,
        completion: *mut pg_sys::QueryCompletion,
    );
}

/// The utility hook. The bookkeeping comes first, so that the statement
/// runs last and its errors pass through untouched (this frame owns
/// nothing to drop): a LISTEN is counted (and waits out the writers that
/// read the count before) even if it then fails, which only costs a
/// notification nobody reads; an UNLISTEN is applied at commit.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn track_listeners(
    statement: *mut pg_sys::PlannedStmt, query: *const std::ffi::c_char, read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type, params: pg_sys::ParamListInfo,
    environment: *mut pg_sys::QueryEnvironment, destination: *mut pg_sys::DestReceiver,
    completion: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: the arguments are the executor's, passed on unchanged.
    unsafe {
        before_utility(statement);
        let run = PREVIOUS_UTILITY_HOOK.unwrap_or(standard_process_utility);
        run(
            statement,
            query,
            read_only_tree,
            context,
            params,
            environment,
            destination,
            completion,
        );
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn before_utility(statement: *mut pg_sys::PlannedStmt) {
    // SAFETY: a planned utility statement.
    match unsafe { listen_effect((*statement).utilityStmt) } {
        ListenEffect::Listen => {
            UNLISTENS.with(|unlistens| unlistens.borrow_mut().clear());
            if !COUNTED.replace(true) {
                if !EXIT_HOOKED.replace(true) {
                    // SAFETY: registering an exit callback of this backend.
                    unsafe {
                        pg_sys::before_shmem_exit(Some(uncount_at_exit), pg_sys::Datum::from(0))
                    };
                }
                count_listener();
            }
        }
        ListenEffect::Unlisten => {
            // SAFETY: reads the current subtransaction id; never errors.
            let subxact = unsafe { pg_sys::GetCurrentSubTransactionId() };
            UNLISTENS.with(|unlistens| unlistens.borrow_mut().push(subxact));
        }
        ListenEffect::None => {}
    }
}

// The statements.

/// The owner of table $1.
static TABLE_OWNER: Statement = Statement::read_only(
    "SELECT c.relowner FROM pg_catalog.pg_class c
     WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass::pg_catalog.oid",
    &[PgOid::BuiltIn(PgBuiltInOids::TEXTOID)],
);

/// Tenant $1's channel; run as the secret's owner.
static TENANT_CHANNEL: Statement = Statement::read_only(
    "SELECT 'agent_memory_' OPERATOR(pg_catalog.||) pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(
              pg_catalog.convert_to(s.secret OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) $1, 'UTF8')),
              'hex'), 40)
     FROM agent_memory.notify_secret s",
    &[PgOid::BuiltIn(PgBuiltInOids::TEXTOID)],
);
