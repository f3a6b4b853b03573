//! Every `agent_memory.*` setting, defined in one place.
//!
//! Policy settings (limits, expiry, what may be stored) are `SUSET`: a
//! superuser sets them per server, database or role, and an application role
//! cannot loosen them for its own session. Worker settings take effect on
//! reload (`SIGHUP`); the worker's database is chosen at server start.

use std::ffi::CString;

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::prelude::*;

use agent_memory_core::Error;

use crate::pg::error::{OrReport, SqlResult};

/// `agent_memory.max_result_bytes`.
pub fn max_result_bytes() -> usize {
    MAX_RESULT_BYTES.get().max(0) as usize
}

/// `agent_memory.max_result_bytes` as a statement's int4 argument.
pub fn max_result_bytes_arg() -> i32 {
    MAX_RESULT_BYTES.get()
}

/// Hard ceiling of messages kept per (session, node), whatever the setting.
pub const MAX_MESSAGES_CAP: i32 = 200;

pub static MAX_MESSAGES: GucSetting<i32> = GucSetting::<i32>::new(MAX_MESSAGES_CAP);
pub static SESSION_IDLE_TIMEOUT_MIN: GucSetting<i32> = GucSetting::<i32>::new(500);
pub static MEMORY_TTL_MIN: GucSetting<i32> = GucSetting::<i32>::new(500 * 60);
pub static KV_WORD_BUDGET: GucSetting<i32> = GucSetting::<i32>::new(600);
pub static CLEANUP_INTERVAL_S: GucSetting<i32> = GucSetting::<i32>::new(5 * 60);
pub static CLEANUP_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static CLEANUP_BATCH_TIMEOUT_MS: GucSetting<i32> = GucSetting::<i32>::new(60_000);
pub static CLEANUP_HISTORY: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"postgres"));
pub static SENSITIVE_DATA: GucSetting<SensitiveData> =
    GucSetting::<SensitiveData>::new(SensitiveData::Reject);
pub static CURATOR: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static MAX_FILE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(100 * 1024);
pub static MAX_FILES_PER_SCOPE: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static MAX_MESSAGE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
pub static MAX_NODE_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
pub static MAX_RESULT_BYTES: GucSetting<i32> = GucSetting::<i32>::new(64 * 1024 * 1024);
pub static MAX_NODE_REFS: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static TEXT_SEARCH_CONFIG: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"english"));
pub static RECALL_KINDS: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"kv,message,node,file,working_memory"));
pub static MAX_RECALL_K: GucSetting<i32> = GucSetting::<i32>::new(100);
pub static MAX_EXACT_RECALL: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub static RECALL_HALF_LIFE_S: GucSetting<i32> = GucSetting::<i32>::new(30 * 24 * 60 * 60);
pub static HISTORY_RETENTION: GucSetting<i32> = GucSetting::<i32>::new(0);
pub static MAX_TREE_ROWS: GucSetting<i32> = GucSetting::<i32>::new(10_000_000);
pub static TENANT_ISOLATION: GucSetting<bool> = GucSetting::<bool>::new(false);
pub static TENANT: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
pub static STRIP_NODE_KEYS: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"builder,builderPayload"));

/// What a write does when its value contains sensitive data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PostgresGucEnum)]
pub enum SensitiveData {
    /// Refuse the write (SQLSTATE 22023), naming the kinds found.
    #[name = c"reject"]
    Reject,
    /// Store it anyway.
    #[name = c"allow"]
    Allow,
}

/// The name of every `agent_memory.*` setting (a test holds it to
/// `pg_settings`).
pub const NAMES: &[&std::ffi::CStr] = &[
    c"agent_memory.text_search_config",
    c"agent_memory.recall_kinds",
    c"agent_memory.max_recall_k",
    c"agent_memory.max_exact_recall",
    c"agent_memory.recall_half_life",
    c"agent_memory.max_messages",
    c"agent_memory.session_idle_timeout",
    c"agent_memory.memory_ttl",
    c"agent_memory.kv_word_budget",
    c"agent_memory.cleanup_interval",
    c"agent_memory.cleanup_batch_size",
    c"agent_memory.cleanup_batch_timeout",
    c"agent_memory.cleanup_history",
    c"agent_memory.database",
    c"agent_memory.sensitive_data",
    c"agent_memory.curator",
    c"agent_memory.max_file_bytes",
    c"agent_memory.max_files_per_scope",
    c"agent_memory.max_message_bytes",
    c"agent_memory.max_node_bytes",
    c"agent_memory.max_result_bytes",
    c"agent_memory.max_node_refs",
    c"agent_memory.max_tree_rows",
    c"agent_memory.history_retention",
    c"agent_memory.strip_node_keys",
    c"agent_memory.tenant_isolation",
    c"agent_memory.tenant",
];

/// How many earlier versions a key-value entry or a memory file keeps
/// (`agent_memory.history_retention`; 0: none, and writes save nothing).
pub fn history_retention() -> i32 {
    HISTORY_RETENTION.get()
}

/// Register every setting and reserve the prefix, so that a misspelt
/// `agent_memory.*` name in postgresql.conf is reported instead of ignored.
pub fn define_all() {
    GucRegistry::define_string_guc(
        c"agent_memory.text_search_config",
        c"Text search configuration of recall's search columns, from the next recall_rebuild().",
        c"",
        &TEXT_SEARCH_CONFIG,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.recall_kinds",
        c"Kinds of memory whose search columns writes keep, from the next recall_rebuild().",
        c"Comma-separated: kv, message, node, file, working_memory; the others are not found by recall and cost writes nothing.",
        &RECALL_KINDS,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_recall_k",
        c"Most items one recall may return.",
        c"",
        &MAX_RECALL_K,
        1,
        1000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_exact_recall",
        c"Most embedded items one recall compares with the query's embedding.",
        c"Recall by meaning compares every embedded item of the scope; past this many it is refused.",
        &MAX_EXACT_RECALL,
        1,
        10_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.recall_half_life",
        c"Age at which recall weighs a memory halfway to the floor of its recency factor.",
        c"A memory's score is multiplied by 0.5 + 0.5 * 2^(-age / half-life); 0 turns recency off.",
        &RECALL_HALF_LIFE_S,
        0,
        i32::MAX,
        GucContext::Userset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_messages",
        c"Messages kept per session and node; older ones are dropped.",
        c"At most 200, whatever the setting.",
        &MAX_MESSAGES,
        1,
        MAX_MESSAGES_CAP,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.session_idle_timeout",
        c"Inactivity after which a session expires.",
        c"A session's own idle_timeout, when set, wins. One value per server: the cleanup and every role must agree on which sessions have expired.",
        &SESSION_IDLE_TIMEOUT_MIN,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.memory_ttl",
        c"Lifetime of a key-value memory entry after its last write.",
        c"An entry's own ttl, when given, wins.",
        &MEMORY_TTL_MIN,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_MIN,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.kv_word_budget",
        c"Words of key-value memory a session may hold; older entries are evicted.",
        c"",
        &KV_WORD_BUDGET,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.cleanup_interval",
        c"Pause between two runs of the cleanup background worker.",
        c"",
        &CLEANUP_INTERVAL_S,
        1,
        24 * 60 * 60,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.cleanup_batch_size",
        c"Rows the cleanup removes per transaction.",
        c"",
        &CLEANUP_BATCH_SIZE,
        1,
        1_000_000,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.cleanup_batch_timeout",
        c"Longest a batch of the cleanup background worker may run.",
        c"A batch that runs longer fails with 57014 and is undone.",
        &CLEANUP_BATCH_TIMEOUT_MS,
        1,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.cleanup_history",
        c"Cleanup runs kept in agent_memory.cleanup_runs.",
        c"Each run recorded removes the runs older than the newest this many.",
        &CLEANUP_HISTORY,
        1,
        10_000_000,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.database",
        c"Database the cleanup background worker connects to.",
        c"",
        &DATABASE,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_enum_guc(
        c"agent_memory.sensitive_data",
        c"What a write does with sensitive data: reject or allow.",
        c"",
        &SENSITIVE_DATA,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.curator",
        c"SQL function (key text, value jsonb) returns boolean that must approve each key-value write.",
        c"Empty: only the built-in sensitive-data check applies.",
        &CURATOR,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_file_bytes",
        c"Largest file the memory tool stores.",
        c"",
        &MAX_FILE_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_files_per_scope",
        c"Most files the memory tool keeps in one scope.",
        c"",
        &MAX_FILES_PER_SCOPE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_message_bytes",
        c"Largest message content, and largest metadata, append_message stores.",
        c"",
        &MAX_MESSAGE_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_node_bytes",
        c"Largest graph node (title, description and body together) the graph functions store.",
        c"A change description has the same limit on its own.",
        &MAX_NODE_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_result_bytes",
        c"Largest single value (JSON or text) a function builds in memory.",
        c"Bounds messages_json, memory_render, working_memory, wm_context, kv_get_all, build_context, graph_tree and graph_export, and the texts one recall_outbox lists; functions that return rows stream them instead.",
        &MAX_RESULT_BYTES,
        1024,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_node_refs",
        c"Most refs (explicit refs and body links) one graph node holds.",
        c"",
        &MAX_NODE_REFS,
        0,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.history_retention",
        c"Previous versions kept per key-value entry and memory file; 0 keeps none.",
        c"A replaced or deleted entry or file keeps its content as a version while its number is within this many of the newest.",
        &HISTORY_RETENTION,
        0,
        1000,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"agent_memory.max_tree_rows",
        c"Most rows graph_tree_rows returns; a larger projection is refused.",
        c"A node appears once under each of its parents, so shared children multiply rows.",
        &MAX_TREE_ROWS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"agent_memory.strip_node_keys",
        c"Keys removed from graph nodes written to working memory (comma-separated).",
        c"",
        &STRIP_NODE_KEYS,
        GucContext::Suset,
        GucFlags::default(),
    );
    // A superuser turns isolation on (per server, database or role); a
    // tenant cannot turn it off for its own session.
    GucRegistry::define_bool_guc(
        c"agent_memory.tenant_isolation",
        c"Each role (and tenant within it) sees and changes only its own memory.",
        c"Row-level security on every memory table: see docs/security.md, Tenants.",
        &TENANT_ISOLATION,
        GucContext::Suset,
        GucFlags::default(),
    );
    // Chosen by the application per connection or transaction (SET LOCAL),
    // within its role: a role never reaches another role's rows by it.
    GucRegistry::define_string_guc(
        c"agent_memory.tenant",
        c"Tenant the current role acts for (empty: the role itself).",
        c"",
        &TENANT,
        GucContext::Userset,
        GucFlags::default(),
    );
    // SAFETY: called from _PG_init on the main thread with a static C string.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"agent_memory".as_ptr()) };
}

/// `client_min_messages = warning` for as long as it lives, restored when
/// dropped, as GenericPlans sets plan_cache_mode.
pub struct NoNotices(i32);

impl NoNotices {
    pub fn hold() -> NoNotices {
        // SAFETY: a plain read and write of a backend-local setting; the
        // old value comes back in drop.
        unsafe {
            let old = pg_sys::client_min_messages;
            pg_sys::client_min_messages = old.max(pg_sys::WARNING as i32);
            NoNotices(old)
        }
    }
}

impl Drop for NoNotices {
    fn drop(&mut self) {
        // SAFETY: as in hold.
        unsafe { pg_sys::client_min_messages = self.0 }
    }
}

/// `plan_cache_mode = force_generic_plan` for as long as it lives, restored
/// when dropped (also when an error unwinds through it).
///
/// For statements kept per backend that PostgreSQL would otherwise plan
/// anew on every call: a generic plan looks costlier than one planned for
/// the values, although the index plan is the same for any values. A `SET plan_cache_mode` clause on the function
/// would save and restore every setting on each call; setting the one
/// variable the clause would set, for the length of the command, does not.
pub struct GenericPlans(i32);

impl GenericPlans {
    /// Not on Citus, whose planner can route a statement of several tables
    /// only when planned for the values (a generic plan of one fails with
    /// "could not create distributed plan").
    pub fn force() -> SqlResult<GenericPlans> {
        // SAFETY: a plain read and write of a backend-local setting; the
        // old value comes back in drop.
        unsafe {
            let old = pg_sys::plan_cache_mode;
            if !crate::pg::plans::on_citus()? {
                pg_sys::plan_cache_mode =
                    pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as i32;
            }
            Ok(GenericPlans(old))
        }
    }
}

impl Drop for GenericPlans {
    fn drop(&mut self) {
        // SAFETY: as in force.
        unsafe { pg_sys::plan_cache_mode = self.0 }
    }
}

/// `enable_sort = off` for as long as it lives, restored when dropped (also
/// when an error unwinds through it), as GenericPlans sets plan_cache_mode.
///
/// For a statement that must read an index in its order, to its limit:
/// with sorting ruled out, the planner takes the ordered index scan
/// whatever its statistics say of the rows around it.
pub struct NoSorts(bool);

impl NoSorts {
    pub fn hold() -> NoSorts {
        // SAFETY: a plain read and write of a backend-local setting; the
        // old value comes back in drop.
        unsafe {
            let old = pg_sys::enable_sort;
            pg_sys::enable_sort = false;
            NoSorts(old)
        }
    }
}

impl Drop for NoSorts {
    fn drop(&mut self) {
        // SAFETY: as in hold.
        unsafe { pg_sys::enable_sort = self.0 }
    }
}

/// `enable_seqscan = off` and `jit = off` for as long as it lives, both
/// restored when dropped (also when an error unwinds through it), as
/// GenericPlans sets plan_cache_mode.
///
/// Held while a kept statement plans and runs. The extension's statements
/// reach their rows through a key (the one that reads a whole table runs
/// without it: `Statement::read_whole_table`), but the planner may find a
/// sequential scan cheaper: its statistics may have been taken while the
/// table was empty, or before a key grew. A plan kept from then scans the
/// whole table on every call until the next ANALYZE, and in a long
/// transaction that keeps updating the same rows each scan also walks
/// every version left behind. With sequential scans ruled out, a statement
/// that has an index to use uses it, whatever the statistics say. Bitmap
/// scans stay allowed: they too go through an index, and recall's
/// full-text search needs them.
///
/// JIT is off because a table with no index to use (the one-row recall
/// settings) is still read by a sequential scan, which PostgreSQL 15 then
/// prices at over 10^10: far above jit_above_cost, so the statement would
/// be compiled on every run. These short statements never gain from JIT.
pub struct NoSequentialScans {
    seqscan: bool,
    jit: bool,
}

impl NoSequentialScans {
    pub fn hold() -> NoSequentialScans {
        // SAFETY: plain reads and writes of backend-local settings; the
        // old values come back in drop.
        unsafe {
            let held =
                NoSequentialScans { seqscan: pg_sys::enable_seqscan, jit: pg_sys::jit_enabled };
            pg_sys::enable_seqscan = false;
            pg_sys::jit_enabled = false;
            held
        }
    }
}

impl Drop for NoSequentialScans {
    fn drop(&mut self) {
        // SAFETY: as in hold.
        unsafe {
            pg_sys::enable_seqscan = self.seqscan;
            pg_sys::jit_enabled = self.jit;
        }
    }
}

/// Set `name` to `value` until the end of the transaction, as
/// `set_config(name, value, true)` does (an error rolls it back).
pub fn set_for_transaction(name: &str, value: &str) -> SqlResult<()> {
    let name = CString::new(name)
        .map_err(|_| Error::internal("a setting's name holds NUL"))
        .or_report()?;
    let value = CString::new(value)
        .map_err(|_| Error::internal("a setting's value holds NUL"))
        .or_report()?;
    set_option(&name, &value, pg_sys::GucAction::GUC_ACTION_LOCAL);
    Ok(())
}

/// Set `name` to `value` until the current GUC nest level ends (a
/// subtransaction, or a level opened with NewGUCNestLevel), either way.
pub fn set_until_level_ends(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // GUC_ACTION_SAVE records the old value at the current level.
    set_option(name, value, pg_sys::GucAction::GUC_ACTION_SAVE);
}

/// Set a user-settable `name` to `value` as `action` says; an invalid
/// value raises an SQL error, as set_config would.
fn set_option(name: &std::ffi::CStr, value: &std::ffi::CStr, action: pg_sys::GucAction::Type) {
    // SAFETY: both strings outlive the call, which copies them; run inside
    // a transaction, as every caller is.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            action,
            true,
            pgrx::PgLogLevel::ERROR as i32,
            false,
        );
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// NAMES lists every setting the library defines, and nothing else.
    #[pg_test]
    fn names_are_every_setting_of_the_library() {
        let defined = Spi::get_one::<Vec<String>>(
            r#"SELECT array_agg(name ORDER BY name COLLATE "C") FROM pg_settings WHERE name LIKE 'agent_memory.%'"#,
        )
        .expect("pg_settings")
        .expect("settings");
        let mut listed: Vec<String> =
            super::NAMES.iter().map(|name| name.to_string_lossy().into_owned()).collect();
        listed.sort();
        assert_eq!(defined, listed);
    }
}
