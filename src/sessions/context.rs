//! The context builder: one call at the start of each agent cycle
//! returns the session's facts and memory; one call at its end stores what
//! the cycle learnt.

use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::Error;
use agent_memory_core::jsonb::JsonbWriter;
use agent_memory_core::sessions::kv;
use agent_memory_core::time::{POSTGRES_EPOCH_UNIX_MICROS, iso_utc};

use crate::pg::args::{BOOL, INT4, TEXT, TEXT_ARRAY, checked_id, checked_list};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Statement, bounded_value, iso};
use crate::pg::settings;
use crate::sessions::kv::{delete_keys, kv_entry_overhead, write_entries};
use crate::sessions::{callers_active_session, idle_timeout_minutes};

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn build_context(
    session_id: Option<&str>, keys: default!(Option<Vec<Option<String>>>, "NULL"),
    include_metadata: default!(Option<bool>, false),
) -> SqlResult<JsonbBytes> {
    let session_id = checked_id("session_id", session_id)?;
    let keys = keys.map(|keys| checked_list("keys", keys)).transpose()?;
    let include_metadata = include_metadata.unwrap_or(false);
    let args = [
        session_id.into(),
        idle_timeout_minutes().into(),
        keys.into(),
        include_metadata.into(),
        settings::max_result_bytes_arg().into(),
    ];
    let hint = "name fewer keys, or read them one by one with kv_get";
    match bounded_value(&BUILD, &args, "the context takes", hint)? {
        Some(context) => Ok(context),
        None => session_missing(session_id),
    }
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn update_context(session_id: &str, entries: JsonB) -> SqlResult<JsonB> {
    let batch = kv::batch_entries(&entries.0).or_report()?;
    let written = write_entries(session_id, &batch, None, None, None)?;
    let keys: Vec<&str> = batch.iter().map(|(k, _)| *k).collect();
    Ok(JsonB(json!({
        "stored": true,
        "keys": keys,
        "words": written.words,
        "total_words": written.total_words,
        "evicted": written.evicted,
    })))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn clear_context_keys(session_id: &str, keys: Vec<Option<String>>) -> SqlResult<i32> {
    let keys = checked_list("keys", keys)?;
    if keys.is_empty() {
        return Err(Error::invalid("keys must name at least one key")).or_report();
    }
    delete_keys(session_id, Some(keys))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn clear_context(session_id: &str) -> SqlResult<i32> {
    delete_keys(session_id, None)
}

// The statements.

/// $1 session (of the caller's tenant), $2 idle minutes, $3 keys (NULL:
/// all, else a probe per key: OFFSET 0 keeps the lateral read from
/// becoming a join that may read the whole session), $4 include metadata,
/// $5 the most bytes the value may take: NULL in column 1 past it, with
/// what it would take (z, read from the values' headers) in column 2. No
/// row when the session is missing or expired. Every table is filtered by
/// $1, so that Citus sends the statement whole to the session's node. A
/// key named twice is read once, as it is counted once: the aggregate
/// would hold every copy of the value until it ends.
static BUILD: Statement = Statement::read_only(
    concat!(
        "SELECT CASE WHEN z.bytes <= $5 THEN pg_catalog.jsonb_build_object(
                  'sessionId', s.session_id,
                  'timestamp', ",
        iso!("pg_catalog.now()"),
        ",
                  'userId', s.user_id,
                  'sessionCreatedAt', ",
        iso!("s.created_at"),
        ",
                  'sessionDuration', round(extract(epoch FROM pg_catalog.now() - s.created_at), 3),
                  'memory', CASE WHEN $3::text[] IS NULL THEN
                              (SELECT coalesce(pg_catalog.jsonb_object_agg(k.key, k.value), '{}')
                               FROM agent_memory.kv_entries k
                               WHERE k.session_id = $1 AND k.tenant = s.tenant
                                 AND k.expires_at > pg_catalog.now())
                            ELSE
                              (SELECT coalesce(pg_catalog.jsonb_object_agg(e.key, v.value), '{}')
                               FROM (SELECT DISTINCT u.key FROM pg_catalog.unnest($3::text[]) AS u(key)) e,
                                    LATERAL (SELECT k.value FROM agent_memory.kv_entries k
                                             WHERE k.session_id = $1 AND k.key = e.key
                                               AND k.tenant = s.tenant
                                               AND k.expires_at > pg_catalog.now()
                                             OFFSET 0) v)
                            END)
                  || CASE WHEN $4 THEN pg_catalog.jsonb_build_object('sessionMetadata', s.metadata)
                          ELSE '{}'::jsonb END END,
                z.bytes
         FROM agent_memory.sessions s
         CROSS JOIN LATERAL (
           SELECT CASE WHEN $4 THEN agent_memory.value_bytes(s.metadata) ELSE 0 END
                  + CASE WHEN $3::text[] IS NULL THEN
                      (SELECT coalesce(sum(pg_catalog.octet_length(k.key)::int8
                                           + agent_memory.value_bytes(k.value) + ",
        kv_entry_overhead!(),
        "), 0)
                       FROM agent_memory.kv_entries k
                       WHERE k.session_id = $1 AND k.tenant = s.tenant
                         AND k.expires_at > pg_catalog.now())
                    ELSE
                      (SELECT coalesce(sum(pg_catalog.octet_length(e.key)::int8 + v.bytes + ",
        kv_entry_overhead!(),
        "), 0)
                       FROM (SELECT DISTINCT u.key FROM pg_catalog.unnest($3::text[]) AS u(key)) e,
                            LATERAL (SELECT agent_memory.value_bytes(k.value) AS bytes
                                     FROM agent_memory.kv_entries k
                                     WHERE k.session_id = $1 AND k.key = e.key
                                       AND k.tenant = s.tenant
                                       AND k.expires_at > pg_catalog.now()
                                     OFFSET 0) v)
                    END AS bytes) z
         WHERE ",
        callers_active_session!("$2")
    ),
    &[TEXT, INT4, TEXT_ARRAY, BOOL, INT4],
);

/// What build_context answers for a session that is missing or expired:
/// `{"error": …, "sessionId": …, "timestamp": …}` (jsonb's key order).
fn session_missing(session_id: &str) -> SqlResult<JsonbBytes> {
    // now(): the transaction's start.
    // SAFETY: reads a backend global, set for every transaction.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    let timestamp = iso_utc(now.saturating_add(POSTGRES_EPOCH_UNIX_MICROS), 3);
    let mut w = JsonbWriter::with_capacity(96 + session_id.len());
    w.begin_object(3);
    for name in ["error", "sessionId", "timestamp"] {
        w.string(name);
    }
    w.string("session not found or expired");
    w.string(session_id);
    w.string(&timestamp);
    w.end();
    Ok(JsonbBytes(w.finish().or_report()?))
}
