//! The context builder: one call at the start of each agent cycle
//! returns the session's facts and memory; one call at its end stores what
//! the cycle learnt.

use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::Error;
use agent_memory_core::sessions::kv;

use crate::pg::args::{BOOL, INT4, TEXT, TEXT_ARRAY, checked_id, checked_list, required};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Statement, first_value_of, iso};
use crate::sessions::kv::{delete_keys, write_entries};
use crate::sessions::{callers_active_session, idle_timeout_minutes};

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn build_context(
    session_id: Option<&str>,
    keys: default!(Option<Vec<Option<String>>>, "NULL"),
    include_metadata: default!(Option<bool>, false),
) -> SqlResult<JsonbBytes> {
    let session_id = checked_id("session_id", session_id)?;
    let keys = keys.map(|keys| checked_list("keys", keys)).transpose()?;
    let include_metadata = include_metadata.unwrap_or(false);
    let context = first_value_of::<JsonbBytes>(
        &BUILD,
        &[
            session_id.into(),
            idle_timeout_minutes().into(),
            keys.into(),
            include_metadata.into(),
        ],
    )?;
    required(context, "context")
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn update_context(session_id: &str, entries: JsonB) -> SqlResult<JsonB> {
    let batch = kv::batch_entries(&entries.0).or_report()?;
    let written = write_entries(session_id, &batch, None, None)?;
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
/// all, else a probe per key), $4 include metadata.
static BUILD: Statement = Statement {
    sql: concat!(
        "SELECT CASE WHEN s.session_id IS NULL THEN
                  pg_catalog.jsonb_build_object('sessionId', $1::text, 'timestamp', ",
        iso!("pg_catalog.now()"),
        ", 'error', 'session not found or expired')
                ELSE pg_catalog.jsonb_build_object(
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
                               WHERE k.session_id = s.session_id AND k.tenant = s.tenant
                                 AND k.expires_at > pg_catalog.now())
                            ELSE
                              (SELECT coalesce(pg_catalog.jsonb_object_agg(k.key, k.value), '{}')
                               FROM (SELECT s.session_id, key, s.tenant
                                     FROM pg_catalog.unnest($3::text[]) AS key OFFSET 0) e
                               JOIN agent_memory.kv_entries k
                                 ON k.session_id = e.session_id AND k.key = e.key AND k.tenant = e.tenant
                               WHERE k.expires_at > pg_catalog.now())
                            END)
                  || CASE WHEN $4 THEN pg_catalog.jsonb_build_object('sessionMetadata', s.metadata)
                          ELSE '{}'::jsonb END
                END
         FROM (SELECT) AS one
         LEFT JOIN agent_memory.sessions s
           ON ",
        callers_active_session!("$2")
    ),
    args: &[TEXT, INT4, TEXT_ARRAY, BOOL],
    writes: false,
};
