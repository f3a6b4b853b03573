//! Key-value working memory per session.
//!
//! Every write goes through [`write_entries`]: sensitive-data guard, word
//! budget, then, under the session's write lock, one statement that upserts
//! the entries and reads the session's word counter; the session row is
//! written only when its words, next expiry or (to the second) activity
//! change, and only a write that overflows the budget reads the entries back
//! to evict the oldest. Expired entries, and every entry of an expired session,
//! are invisible to reads at once.

use pgrx::prelude::*;
use serde_json::Value;

use agent_memory_core::error::quoted;
use agent_memory_core::sessions::budget::{self, Held};
use agent_memory_core::sessions::{kv, words};
use agent_memory_core::{Error, versions};

use agent_memory_core::jsonb::JsonbWriter;

use crate::pg::args::{
    INT4, INT4_ARRAY, INT8, INTERVAL, JSONB, JSONB_ARRAY, TEXT, TEXT_ARRAY, TIMESTAMPTZ,
    checked_id, checked_positive,
};
use crate::pg::datums::{JsonB, JsonbArg, JsonbBytes, numeric_bytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{
    Columns, Rows, Statement, bounded_value, first_value_of, iso_fields, on_citus,
};
use crate::pg::settings;
use crate::sessions::{
    active, active_until, callers_active_session, idle_timeout_minutes, lock_session,
    probe_active_until, session_gone,
};
use crate::sessions::{cache as session_cache, kv_versions, sensitive};

/// The session's state as the write statement reads it (after its own
/// upsert, under the write lock).
struct SessionState {
    /// The word counter, before this write's change.
    counter: i64,
    /// Some entry may have expired since the counter was exact.
    may_hold_expired: bool,
    /// The written entries expire before the session's next expiry.
    expires_sooner: bool,
    /// The recorded activity is over a second old.
    activity_stale: bool,
}

impl SessionState {
    fn from_array(state: Vec<i64>) -> SqlResult<SessionState> {
        match state[..] {
            [counter, may_hold_expired, expires_sooner, activity_stale] => Ok(SessionState {
                counter,
                may_hold_expired: may_hold_expired != 0,
                expires_sooner: expires_sooner != 0,
                activity_stale: activity_stale != 0,
            }),
            _ => Err(Error::internal("unexpected session state from the write")).or_report(),
        }
    }
}

/// What a write did.
pub struct Written {
    pub words: u64,
    pub total_words: u64,
    pub evicted: Vec<String>,
    /// The version the first entry has now.
    pub version: i32,
}

/// A write of key-value entries, as write_entries checked it.
#[derive(Clone, Copy)]
struct EntriesWrite<'a> {
    session_id: &'a str,
    entries: &'a [(&'a str, &'a Value)],
    /// The one entry's value as the caller sent it.
    received: Option<&'a JsonbArg>,
    /// Each entry's words.
    counted: &'a [(&'a str, u64)],
    ttl: Option<Interval>,
    /// The entries' life in minutes without a ttl.
    memory_ttl: i32,
    /// The sessions' default idle minutes.
    idle: i32,
    /// The version the one entry must be at (0: none), if any.
    expected: Option<i32>,
}

/// What the write statement did.
#[derive(Default)]
struct WriteOutcome {
    /// The change of the session's words.
    change: i64,
    /// The session's state after (None: the session is gone, or the
    /// precondition failed).
    state: Option<Vec<i64>>,
    /// The first entry's version now.
    version: i32,
    /// The keys written anew, at version 1.
    anew: Vec<String>,
}

/// Write the entries to the session if it is active, in one statement;
/// returns what the write did (see WriteOutcome).
fn written(client: &mut pgrx::spi::SpiClient<'_>, write: &EntriesWrite) -> SqlResult<WriteOutcome> {
    let rows = match write.entries {
        [(key, value)] => {
            let value = match write.received {
                Some(datum) => datum.into(),
                None => JsonB((*value).clone()).into(),
            };
            let args = [
                write.session_id.into(),
                (*key).into(),
                value,
                (write.counted[0].1 as i32).into(),
                write.ttl.into(),
                write.memory_ttl.into(),
                write.idle.into(),
                write.expected.into(),
            ];
            WRITE_ONE.run(client, &args)?
        }
        _ => {
            let keys: Vec<&str> = write.entries.iter().map(|(k, _)| *k).collect();
            let values: Vec<JsonB> =
                write.entries.iter().map(|(_, v)| JsonB((*v).clone())).collect();
            let words: Vec<i32> = write.counted.iter().map(|(_, w)| *w as i32).collect();
            let args = [
                write.session_id.into(),
                keys.into(),
                values.into(),
                words.into(),
                write.ttl.into(),
                write.memory_ttl.into(),
                write.idle.into(),
            ];
            WRITE_MANY.run(client, &args)?
        }
    };
    let mut outcome = WriteOutcome::default();
    for row in rows {
        outcome.change += i64::from(row.required::<i32>(1, "words")?);
        let version = row.required::<i32>(3, "version")?;
        if outcome.state.is_none() {
            outcome.state = Some(row.required::<Vec<i64>>(2, "session state")?);
            outcome.version = version;
        }
        if version == 1 {
            outcome.anew.push(match write.entries {
                [(key, _)] => (*key).to_owned(),
                _ => row.required::<String>(4, "key")?,
            });
        }
    }
    Ok(outcome)
}

/// As `written`, on Citus: inside a function delegated with
/// force_delegation, Citus refuses an INSERT … SELECT (it finds no key
/// value in it). So the session is checked first, each entry is inserted
/// as values, and the state is read after the writes.
fn written_on_citus(
    client: &mut pgrx::spi::SpiClient<'_>, write: &EntriesWrite,
) -> SqlResult<WriteOutcome> {
    let EntriesWrite { session_id, entries, received, counted, ttl, memory_ttl, idle, expected } =
        *write;
    if active_until(client, session_id, idle)?.is_none() {
        return Ok(WriteOutcome::default());
    }
    if let (Some(_), [(key, _)]) = (expected, entries) {
        let current = current_version(client, session_id, key, idle)?;
        if !versions::holds(expected, current.unwrap_or(versions::ABSENT)) {
            return Ok(WriteOutcome::default());
        }
    }
    let mut outcome = WriteOutcome::default();
    let mut expires_at = None;
    for (i, ((key, value), (_, words))) in entries.iter().zip(counted).enumerate() {
        let value = match received {
            Some(datum) if i == 0 && entries.len() == 1 => datum.into(),
            _ => JsonB((*value).clone()).into(),
        };
        let row = WRITE_VALUES_ON_CITUS
            .run(
                client,
                &[
                    session_id.into(),
                    (*key).into(),
                    value,
                    (*words as i32).into(),
                    ttl.into(),
                    memory_ttl.into(),
                ],
            )?
            .first();
        outcome.change += i64::from(row.required::<i32>(1, "words")?);
        let version = row.required::<i32>(3, "version")?;
        if expires_at.is_none() {
            expires_at = row.value::<TimestampWithTimeZone>(2)?;
            outcome.version = version;
        }
        if version == 1 {
            outcome.anew.push((*key).to_owned());
        }
    }
    let Some(expires_at) = expires_at else {
        return Ok(outcome);
    };
    // Every entry of one write expires at the same time.
    outcome.state = STATE_AFTER_WRITE
        .run(client, &[session_id.into(), expires_at.into()])?
        .first()
        .value::<Vec<i64>>(1)?;
    Ok(outcome)
}

/// The version of live entry `key` of session `session_id` (Some(0): no
/// live entry), or None when the session is gone.
fn current_version(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, idle: i32,
) -> SqlResult<Option<i32>> {
    let rows = CURRENT_VERSION.run(client, &[session_id.into(), key.into(), idle.into()])?;
    if rows.is_empty() {
        return Ok(None);
    }
    Ok(Some(rows.first().required::<i32>(1, "version")?))
}

/// The entry a precondition names, for its conflict.
pub(crate) fn entry_name(session_id: &str, key: &str) -> String {
    format!("key {} of session {}", quoted(key), quoted(session_id))
}

/// Store `entries` in the session's memory as one change: all of them, or
/// (on any error) none. `received` is the single entry's value as the caller
/// got it, handed to the statement as it is (no JSON text round trip).
pub fn write_entries(
    session_id: &str, entries: &[(&str, &Value)], received: Option<&JsonbArg>,
    ttl: Option<Interval>, expected: Option<i32>,
) -> SqlResult<Written> {
    for (key, value) in entries {
        checked_id("key", Some(key))?;
        kv::check_value_size(key, value).or_report()?;
        sensitive::guard_write(key, value)?;
    }
    let counted: Vec<(&str, u64)> =
        entries.iter().map(|(k, v)| (*k, words::words_in_value(v))).collect();
    let budget = settings::KV_WORD_BUDGET.get() as u64;
    let incoming = budget::check_fits(&counted, budget).or_report()?;

    let memory_ttl = settings::MEMORY_TTL_MIN.get();
    let idle = idle_timeout_minutes();
    let retention = settings::history_retention();

    lock_session(session_id)?;
    Spi::connect_mut(|client| {
        if retention > 0 {
            let keys: Vec<&str> = entries.iter().map(|(key, _)| *key).collect();
            kv_versions::save_entries(client, session_id, Some(&keys), retention)?;
        }
        let write = EntriesWrite {
            session_id,
            entries,
            received,
            counted: &counted,
            ttl,
            memory_ttl,
            idle,
            expected,
        };
        let outcome =
            if on_citus()? { written_on_citus(client, &write)? } else { written(client, &write)? };
        let (change, mut version) = (outcome.change, outcome.version);
        let Some(state) = outcome.state.map(SessionState::from_array).transpose()? else {
            // Nothing was written: the session is gone, or the entry is
            // not at the version expected (what the writer holds the
            // session's lock for, so it reads the same now).
            if let (Some(expected), [(key, _)]) = (expected, entries)
                && let Some(current) = current_version(client, session_id, key, idle)?
            {
                return Err(versions::conflict(&entry_name(session_id, key), expected, current))
                    .or_report();
            }
            return Err(session_gone(session_id)).or_report();
        };
        if !outcome.anew.is_empty() {
            let anew: Vec<&str> = outcome.anew.iter().map(String::as_str).collect();
            for (key, number) in kv_versions::number_anew(client, session_id, &anew)? {
                if key == entries[0].0 {
                    version = number;
                }
            }
        }
        if change != 0 || state.expires_sooner || state.activity_stale {
            RENEW_WRITER
                .run(client, &[session_id.into(), change.into(), ttl.into(), memory_ttl.into()])?;
        }
        let counter = (state.counter + change).max(0) as u64;
        if counter <= budget && !state.may_hold_expired {
            return Ok(Written {
                words: incoming,
                total_words: counter,
                evicted: Vec::new(),
                version,
            });
        }
        // Over the budget by the counter, or an entry may have expired: count
        // the live entries exactly and evict the oldest until the write fits.
        let held_rows: Vec<(String, i32, TimestampWithTimeZone)> =
            HELD.read(client, &[session_id.into()])?.rows(&["key", "words", "expires_at"])?;
        let held: Vec<Held<'_>> =
            held_rows.iter().map(|(key, words, _)| Held { key, words: *words as u64 }).collect();
        let plan = budget::plan_writes(&held, &counted, budget).or_report()?;
        let next_expiry = held_rows
            .iter()
            .filter(|(key, _, _)| !plan.evicted.contains(key))
            .map(|(_, _, expires_at)| *expires_at)
            .min_by_key(|expires_at| expires_at.into_inner());
        // An evicted entry is deleted as kv_delete deletes it: its value is
        // kept, and the key written again goes past its version, so that
        // one number never names two values.
        if retention > 0 && !plan.evicted.is_empty() {
            let evicted: Vec<&str> = plan.evicted.iter().map(String::as_str).collect();
            kv_versions::save_entries(client, session_id, Some(&evicted), retention)?;
        }
        RECOUNTED.run(
            client,
            &[
                session_id.into(),
                plan.evicted.clone().into(),
                (plan.total_words as i64).into(),
                next_expiry.into(),
            ],
        )?;
        Ok(Written {
            words: incoming,
            total_words: plan.total_words,
            evicted: plan.evicted,
            version,
        })
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_set(
    // Options: with an optional ttl the function is not STRICT, so NULLs
    // arrive here and get a 22004 instead of a crash.
    session_id: Option<&str>,
    key: Option<&str>,
    value: Option<JsonbArg>,
    ttl: default!(Option<Interval>, "NULL"),
    expected_version: default!(Option<i32>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let session_id = checked_id("session_id", session_id)?;
    let key = checked_id("key", key)?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    let received = value.ok_or_else(|| Error::null("value")).or_report()?;
    // Decoded for the word count and the sensitive-data screen only.
    let value = received.decode().ok_or_else(|| Error::null("value")).or_report()?;
    let ttl = checked_positive("ttl", ttl)?;
    let written = write_entries(session_id, &[(key, &value)], Some(&received), ttl, expected)?;
    stored_document(key, &written)
}

/// `{"stored": true, "key": …, "words": …, "total_words": …, "evicted": […],
/// "version": …}`, written as jsonb directly (keys in jsonb's order: by
/// length, then bytes).
pub(crate) fn stored_document(key: &str, written: &Written) -> SqlResult<JsonbBytes> {
    let mut w = JsonbWriter::with_capacity(112 + key.len());
    w.begin_object(6);
    for name in ["key", "words", "stored", "evicted", "version", "total_words"] {
        w.string(name);
    }
    w.string(key);
    w.numeric(&numeric_bytes(written.words as i64));
    w.boolean(true);
    w.begin_array(written.evicted.len());
    for evicted in &written.evicted {
        w.string(evicted);
    }
    w.end();
    w.numeric(&numeric_bytes(i64::from(written.version)));
    w.numeric(&numeric_bytes(written.total_words as i64));
    w.end();
    Ok(JsonbBytes(w.finish().or_report()?))
}

// kv_get and kv_has are not pinned to a search_path, unlike the functions
// that write: a SET clause costs a read about a tenth of its time. Their
// statements name every table, function and operator with its schema, so
// nothing on the caller's path can stand in for them (the planted_objects
// test plants them).
#[pg_extern(stable, parallel_safe)]
fn kv_get(session_id: &str, key: &str) -> SqlResult<Option<JsonbBytes>> {
    // The stored jsonb is returned as it is: never decoded.
    let minutes = idle_timeout_minutes();
    // A session this backend knows to be active needs no second probe.
    if session_cache::known_active(session_id, minutes) {
        return first_value_of::<JsonbBytes>(&GET_OF_ACTIVE, &[session_id.into(), key.into()]);
    }
    let value =
        first_value_of::<JsonbBytes>(&GET, &[session_id.into(), minutes.into(), key.into()])?;
    // The answer comes from the calling statement's snapshot; what is
    // remembered must come from one taken after the counter was read.
    if let Some(deletions) = session_cache::can_remember() {
        let until = probe_active_until(session_id, minutes)?;
        if let Some(until) = until {
            session_cache::remember(session_id, minutes, until, deletions);
        }
    }
    Ok(value)
}

/// All live entries of a session as one object (NULL for a session that does
/// not exist or has expired).
pub fn get_all(session_id: &str) -> SqlResult<Option<JsonbBytes>> {
    let args =
        [session_id.into(), idle_timeout_minutes().into(), settings::max_result_bytes_arg().into()];
    bounded_value(&GET_ALL, &args, "the entries take", "read them one by one with kv_get")
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_get_all(session_id: &str) -> SqlResult<Option<JsonbBytes>> {
    get_all(session_id)
}

/// One live entry with the version a precondition names.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_entry(session_id: &str, key: &str) -> SqlResult<Option<JsonbBytes>> {
    first_value_of::<JsonbBytes>(
        &ENTRY,
        &[session_id.into(), idle_timeout_minutes().into(), key.into()],
    )
}

#[pg_extern(stable, parallel_safe)]
fn kv_has(session_id: &str, key: &str) -> SqlResult<bool> {
    Ok(kv_get(session_id, key)?.is_some())
}

/// Delete the given live keys (all when `keys` is None) of an active
/// session, renewing its activity; 0 when the session is gone.
pub fn delete_keys(session_id: &str, keys: Option<Vec<String>>) -> SqlResult<i32> {
    let retention = settings::history_retention();
    lock_session(session_id)?;
    if retention > 0 {
        let named: Option<Vec<&str>> =
            keys.as_ref().map(|keys| keys.iter().map(String::as_str).collect());
        Spi::connect_mut(|client| {
            kv_versions::save_entries(client, session_id, named.as_deref(), retention)
        })?;
    }
    let statement = match keys {
        Some(_) if on_citus()? => &DELETE_KEYS_ON_CITUS,
        Some(_) => &DELETE_KEYS,
        None => &DELETE_ALL_KEYS,
    };
    let deleted = first_value_of::<i32>(
        statement,
        &[session_id.into(), keys.into(), idle_timeout_minutes().into(), None::<i32>.into()],
    )?;
    Ok(deleted.unwrap_or(0))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_delete(
    session_id: Option<&str>, key: Option<&str>, expected_version: default!(Option<i32>, "NULL"),
) -> SqlResult<bool> {
    let session_id = checked_id("session_id", session_id)?;
    let key = checked_id("key", key)?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    let Some(expected) = expected else {
        return Ok(delete_keys(session_id, Some(vec![key.to_owned()]))? > 0);
    };
    let retention = settings::history_retention();
    lock_session(session_id)?;
    let idle = idle_timeout_minutes();
    Spi::connect_mut(|client| {
        if retention > 0 {
            kv_versions::save_entries(client, session_id, Some(&[key]), retention)?;
        }
        let statement = if on_citus()? { &DELETE_KEYS_ON_CITUS } else { &DELETE_KEYS };
        let deleted = statement
            .run(
                client,
                &[session_id.into(), vec![key.to_owned()].into(), idle.into(), expected.into()],
            )?
            .first()
            .value::<i32>(1)?
            .unwrap_or(0);
        if deleted > 0 {
            return Ok(true);
        }
        // Nothing live was deleted: the entry is not at the version
        // expected, or it is absent as expected, or the session is gone.
        match current_version(client, session_id, key, idle)? {
            Some(current) if current != expected => {
                Err(versions::conflict(&entry_name(session_id, key), expected, current)).or_report()
            }
            _ => Ok(false),
        }
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_clear(session_id: &str) -> SqlResult<i32> {
    delete_keys(session_id, None)
}

// The statements.

// The write, under the session's write lock (taken first, so every writer
// of one session queues and none can deadlock over its entries): if the
// session ($1, of the caller's tenant) is active (default idle minutes $7),
// upsert the entries ($2 keys, $3 values, $4 words; $5 ttl, or NULL for
// agent_memory.memory_ttl in minutes $6) with the session's tenant. Each
// returned row carries the entry's exact change in words (ON CONFLICT sees
// the latest version of a key) and the session's state, read in the same
// statement as one int8 array (see SessionState), then its version and,
// for several entries, its key: one at version 1 was written anew, and
// takes the number after its kept versions next (kv_versions::number_anew).
// No row: the session is gone. The update takes its times from the row the
// insert proposed (whose defaults are now()): Citus accepts only immutable
// expressions in DO UPDATE SET (see docs/scaling.md). `$returning` lists
// the columns after the change in words.
macro_rules! upsert_statement {
    ($returning:expr, $($entries:expr),+) => {
        concat!(
            "INSERT INTO agent_memory.kv_entries AS k (session_id, key, value, words, prev_words, expires_at, tenant)
             ",
            $($entries),+,
            "
             ON CONFLICT (session_id, key, tenant) DO UPDATE
                SET value = excluded.value,
                    words = excluded.words,
                    prev_words = k.words,
                    expires_at = excluded.expires_at,
                    updated_at = excluded.updated_at,
                    created_at = CASE WHEN k.expires_at <= excluded.created_at THEN excluded.created_at
                                      ELSE k.created_at END,
                    version = CASE WHEN k.expires_at <= excluded.created_at THEN 1
                                   ELSE k.version + 1 END
             RETURNING k.words - k.prev_words, ",
            $returning
        )
    };
}

/// The session's state after a write of entries `k` (see SessionState).
macro_rules! session_state {
    ($session:literal, $expires_at:literal) => {
        concat!(
            "(SELECT ARRAY[u.kv_words,
                           (u.kv_next_expiry <= pg_catalog.now())::int4::int8,
                           (",
            $expires_at,
            " < u.kv_next_expiry)::int4::int8,
                           (u.last_activity_at < pg_catalog.now() - interval '1 second')::int4::int8]
              FROM agent_memory.sessions u WHERE u.session_id = ",
            $session,
            " AND u.tenant = agent_memory.caller_tenant())"
        )
    };
}

/// The single-server write returns the session's state in the same
/// statement; on Citus the write returns its expiry and the state is read
/// after (Citus routes no RETURNING that reads another table).
macro_rules! state_in_returning {
    () => {
        session_state!("k.session_id", "k.expires_at")
    };
}

/// Delete live entries of a session that the caller has just renewed (so
/// it is active); returns how many. `$using` and `$which` pick the entries
/// `k` among those of the session row `s`; `$words` and `$next_expiry` are
/// the session's counters after.
macro_rules! delete_entries {
    ($using:literal, $which:literal, $words:literal, $next_expiry:literal) => {
        concat!(
            "WITH s AS (
               SELECT s.session_id, s.tenant FROM agent_memory.sessions s
               WHERE ",
            callers_active_session!("$3"),
            "),
             gone AS (
               DELETE FROM agent_memory.kv_entries k USING ",
            $using,
            " WHERE ",
            $which,
            "
               RETURNING k.words, k.expires_at),
             renewed AS (
               UPDATE agent_memory.sessions
               SET last_activity_at = greatest(last_activity_at, pg_catalog.now()),
                   kv_words = ",
            $words,
            ", kv_next_expiry = ",
            $next_expiry,
            "
               WHERE session_id = $1 AND tenant = (SELECT tenant FROM s))
             SELECT count(*) FILTER (WHERE expires_at > pg_catalog.now())::int4 FROM gone"
        )
    };
}

/// The row of one entry for the upsert: session $1 of the caller's
/// tenant if active ($7 idle minutes), key $2, value $3, words $4, ttl $5
/// (or $6 minutes); none unless the entry is at version $8 (0: no live
/// entry) when $8 is not NULL. The writer holds the session's lock, so no
/// other write of the entry comes between this read and the upsert.
macro_rules! one_entry {
    () => {
        concat!(
            "SELECT s.session_id, $2, $3, $4, 0, pg_catalog.now() + coalesce($5, pg_catalog.make_interval(mins => $6)),
                    s.tenant
             FROM agent_memory.sessions s
             WHERE ",
            callers_active_session!("$7"),
            "
               AND ($8::int4 IS NULL OR $8 = coalesce(
                      (SELECT e.version FROM agent_memory.kv_entries e
                       WHERE e.session_id = s.session_id AND e.key = $2 AND e.tenant = s.tenant
                         AND e.expires_at > pg_catalog.now()), 0))"
        )
    };
}

/// The rows of several entries: as one_entry, with keys, values and words
/// the arrays $2, $3 and $4.
macro_rules! many_entries {
    () => {
        concat!(
            "SELECT s.session_id, e.key, e.value, e.words, 0,
                    pg_catalog.now() + coalesce($5, pg_catalog.make_interval(mins => $6)), s.tenant
             FROM agent_memory.sessions s,
                  ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::jsonb[]),
                             pg_catalog.unnest($4::int4[])) AS e(key, value, words)
             WHERE ",
            callers_active_session!("$7")
        )
    };
}

/// One entry: what kv_set writes.
static WRITE_ONE: Statement = Statement::read_write(
    upsert_statement!(concat!(state_in_returning!(), ", k.version"), one_entry!()),
    &[TEXT, TEXT, JSONB, INT4, INTERVAL, INT4, INT4, INT4],
);

/// Several entries: what update_context writes.
static WRITE_MANY: Statement = Statement::read_write(
    upsert_statement!(concat!(state_in_returning!(), ", k.version, k.key"), many_entries!()),
    &[TEXT, TEXT_ARRAY, JSONB_ARRAY, INT4_ARRAY, INTERVAL, INT4, INT4],
);

/// One entry on Citus, of session $1 known to be active (key $2, value
/// $3, words $4, ttl $5 or $6 minutes), as values: returns the entry's
/// expiry instead of the state.
static WRITE_VALUES_ON_CITUS: Statement = Statement::read_write(
    upsert_statement!(
        "k.expires_at, k.version",
        "VALUES ($1, $2, $3, $4, 0, pg_catalog.now() + coalesce($5, pg_catalog.make_interval(mins => $6)),
                 agent_memory.caller_tenant())"
    ),
    &[TEXT, TEXT, JSONB, INT4, INTERVAL, INT4],
);

/// On Citus, the state of session $1 after a write of entries expiring at
/// $2, read under the write lock, after the write.
static STATE_AFTER_WRITE: Statement =
    Statement::read_write(concat!("SELECT ", session_state!("$1", "$2")), &[TEXT, TIMESTAMPTZ]);

/// After a write that changed the session's words, brought its next expiry
/// closer or found its activity over a second old: renew the session and
/// keep its word counter ($2 is the change) and next expiry ($3, $4 as in
/// the write; now() is the same within the transaction).
static RENEW_WRITER: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions
     SET last_activity_at = greatest(last_activity_at, pg_catalog.now()),
         kv_words = kv_words + $2,
         kv_next_expiry = least(kv_next_expiry,
                                pg_catalog.now() + coalesce($3, pg_catalog.make_interval(mins => $4)))
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, INT8, INTERVAL, INT4],
);

/// The version of live entry $2 of session $1 (0: none), when the session
/// is active ($3 idle minutes); no row when it is gone.
static CURRENT_VERSION: Statement = Statement::read_only(
    concat!(
        "SELECT coalesce((SELECT e.version FROM agent_memory.kv_entries e
                          WHERE e.session_id = $1 AND e.key = $2 AND e.tenant = s.tenant
                            AND e.expires_at > pg_catalog.now()), 0)
         FROM agent_memory.sessions s
         WHERE ",
        callers_active_session!("$3")
    ),
    &[TEXT, TEXT, INT4],
);

/// The session's live entries, oldest first: the eviction order.
static HELD: Statement = Statement::read_only(
    "SELECT key, words, expires_at FROM agent_memory.kv_entries
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
       AND expires_at > pg_catalog.now()
     ORDER BY updated_at, key",
    &[TEXT],
);

/// After an exact count: evict the $2 keys, drop the session's expired
/// entries, and set its counter to the exact total $3 and its next expiry
/// to $4 (NULL: none), both taken from the entries HELD read. The expiry
/// must come from that same read: the worker may remove an entry that
/// expires between this transaction's now() and its own after HELD
/// counted it, and a minimum read here would then skip that entry and
/// vouch for a counter that still holds its words.
static RECOUNTED: Statement = Statement::read_write(
    "WITH gone AS (
       DELETE FROM agent_memory.kv_entries
       WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
         AND (key = ANY ($2) OR expires_at <= pg_catalog.now()))
     UPDATE agent_memory.sessions
     SET kv_words = $3,
         kv_next_expiry = coalesce($4, 'infinity')
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT_ARRAY, INT8, TIMESTAMPTZ],
);

static GET: Statement = Statement::read_only(
    concat!(
        "SELECT k.value FROM agent_memory.kv_entries k JOIN agent_memory.sessions s
           ON s.session_id OPERATOR(pg_catalog.=) k.session_id AND s.tenant OPERATOR(pg_catalog.=) k.tenant
         WHERE k.session_id OPERATOR(pg_catalog.=) $1 AND k.key OPERATOR(pg_catalog.=) $3
           AND k.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
           AND k.expires_at OPERATOR(pg_catalog.>) pg_catalog.now() AND ",
        active!("s", "$2")
    ),
    &[TEXT, INT4, TEXT],
);

/// The live entry $2 of a session this backend knows to be active.
static GET_OF_ACTIVE: Statement = Statement::read_only(
    "SELECT k.value FROM agent_memory.kv_entries k
     WHERE k.session_id OPERATOR(pg_catalog.=) $1 AND k.key OPERATOR(pg_catalog.=) $2
       AND k.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
       AND k.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()",
    &[TEXT, TEXT],
);

/// Live entry $3 of active session $1 ($2 idle minutes) as JSON, with
/// its version and times.
static ENTRY: Statement = Statement::read_only(
    concat!(
        "SELECT pg_catalog.jsonb_build_object('key', k.key, 'value', k.value, 'version', k.version",
        iso_fields!("createdAt": "k.created_at", "updatedAt": "k.updated_at", "expiresAt": "k.expires_at"),
        ")
         FROM agent_memory.kv_entries k JOIN agent_memory.sessions s
           ON s.session_id = k.session_id AND s.tenant = k.tenant
         WHERE k.session_id = $1 AND k.key = $3 AND k.tenant = agent_memory.caller_tenant()
           AND k.expires_at > pg_catalog.now() AND ",
        active!("s", "$2")
    ),
    &[TEXT, INT4, TEXT],
);

/// What each entry of an object of entries takes beyond its key and value
/// (`value_bytes`): the key's and the value's entries in the object's
/// header and the value's alignment (11 bytes at most).
macro_rules! kv_entry_overhead {
    () => {
        "12"
    };
}
pub(crate) use kv_entry_overhead;

/// All live entries as one object, or NULL when the session is gone; what
/// it would take (keys, values and `kv_entry_overhead!` each) in column 2.
static GET_ALL: Statement = Statement::read_only(
    concat!(
        "SELECT CASE WHEN z.bytes <= $3 THEN
                  (SELECT coalesce(pg_catalog.jsonb_object_agg(k.key, k.value), '{}')
                   FROM agent_memory.kv_entries k
                   WHERE k.session_id = $1 AND k.tenant = s.tenant
                     AND k.expires_at > pg_catalog.now()) END,
                z.bytes
         FROM agent_memory.sessions s
         CROSS JOIN LATERAL (
           SELECT coalesce(sum(pg_catalog.octet_length(k.key)::int8
                               + agent_memory.value_bytes(k.value) + ",
        kv_entry_overhead!(),
        "), 0) AS bytes
           FROM agent_memory.kv_entries k
           WHERE k.session_id = $1 AND k.tenant = s.tenant
             AND k.expires_at > pg_catalog.now()) z
         WHERE ",
        callers_active_session!("$2")
    ),
    &[TEXT, INT4, INT4],
);

/// Delete keys $2 (only at version $4, when not NULL) and take off the
/// words they held. The keys reach
/// kv_entries as a fenced relation joined on every primary-key column: one
/// probe per key, whatever the statistics say of the session.
static DELETE_KEYS: Statement = Statement::read_write(
    delete_entries!(
        "(SELECT s.session_id, key, s.tenant FROM s, pg_catalog.unnest($2::text[]) AS key OFFSET 0) e",
        "k.session_id = e.session_id AND k.key = e.key AND k.tenant = e.tenant
           AND ($4::int4 IS NULL OR k.version = $4)",
        "greatest(0, kv_words - (SELECT coalesce(sum(words), 0) FROM gone))",
        "kv_next_expiry"
    ),
    &[TEXT, TEXT_ARRAY, INT4, INT4],
);

/// DELETE_KEYS on Citus, every table filtered by session $1 itself:
/// inside a function delegated with force_delegation, Citus refuses a
/// statement whose key comes from a join.
static DELETE_KEYS_ON_CITUS: Statement = Statement::read_write(
    delete_entries!(
        "s",
        "k.session_id = $1 AND k.tenant = s.tenant AND k.key = ANY ($2)
           AND ($4::int4 IS NULL OR k.version = $4)",
        "greatest(0, kv_words - (SELECT coalesce(sum(words), 0) FROM gone))",
        "kv_next_expiry"
    ),
    DELETE_KEYS.args,
);

/// Delete every entry: nothing is left. ($2 and $4 are unused: the
/// statements take the same arguments.) The entries are filtered by session $1
/// itself, as Citus needs (see DELETE_KEYS_ON_CITUS).
static DELETE_ALL_KEYS: Statement = Statement::read_write(
    delete_entries!("s", "k.session_id = $1 AND k.tenant = s.tenant", "0", "'infinity'"),
    DELETE_KEYS.args,
);
