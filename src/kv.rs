//! Key-value working memory per session (seed 004's working memory).
//!
//! Every write goes through [`write_entries`]: sensitive-data guard, word
//! budget, then, under the session's row lock (which also renews its
//! activity), one statement that upserts the entries and sums the session's
//! words; only a write that overflows the budget reads the entries back to
//! evict the oldest. Expired entries, and every entry of an expired session,
//! are invisible to reads at once.

use pgrx::prelude::*;
use pgrx::{JsonB, PgBuiltInOids, PgOid};
use serde_json::{Value, json};

use agent_memory_core::budget::{self, Held};
use agent_memory_core::{Error, kv, words};

use crate::error::{OrReport, SqlResult};
use crate::plans::{FirstRow, Statement, kept};
use crate::sessions::{
    INT4, INTERVAL, TEXT, TEXT_ARRAY, active, checked_id, checked_positive, idle_timeout_minutes,
    renew_in, required, session_gone,
};
use crate::{sensitive, settings};

const JSONB_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::JSONBARRAYOID);
const INT4_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4ARRAYOID);

/// Upsert the entries ($2 keys, $3 values, $4 words; $5 ttl or NULL for
/// agent_memory.memory_ttl in minutes $6) and return the session's words
/// afterwards. It runs after the session row is locked, so its snapshot sees
/// every committed write of the session.
static UPSERT_AND_TOTAL: Statement = Statement {
    sql: "WITH written AS (
            INSERT INTO agent_memory.kv_entries AS k (session_id, key, value, words, expires_at)
            SELECT $1, e.key, e.value, e.words,
                   pg_catalog.now() + coalesce($5, pg_catalog.make_interval(mins => $6))
            FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::jsonb[]),
                            pg_catalog.unnest($4::int4[])) AS e(key, value, words)
            ON CONFLICT (session_id, key) DO UPDATE
               SET value = excluded.value,
                   words = excluded.words,
                   expires_at = excluded.expires_at,
                   updated_at = pg_catalog.now(),
                   created_at = CASE WHEN k.expires_at <= pg_catalog.now() THEN pg_catalog.now()
                                     ELSE k.created_at END
            RETURNING k.words)
          SELECT (SELECT sum(words) FROM written)
               + coalesce((SELECT sum(o.words) FROM agent_memory.kv_entries o
                           WHERE o.session_id = $1 AND o.key <> ALL ($2)
                             AND o.expires_at > pg_catalog.now()), 0)",
    args: &[TEXT, TEXT_ARRAY, JSONB_ARRAY, INT4_ARRAY, INTERVAL, INT4],
    writes: true,
};

/// The session's live entries, oldest first: the eviction order.
static HELD: Statement = Statement {
    sql: "SELECT key, words FROM agent_memory.kv_entries
          WHERE session_id = $1 AND expires_at > pg_catalog.now()
          ORDER BY updated_at, key",
    args: &[TEXT],
    writes: false,
};

static EVICT: Statement = Statement {
    sql: "DELETE FROM agent_memory.kv_entries WHERE session_id = $1 AND key = ANY ($2)",
    args: &[TEXT, TEXT_ARRAY],
    writes: true,
};

static GET: Statement = Statement {
    sql: concat!(
        "SELECT k.value FROM agent_memory.kv_entries k JOIN agent_memory.sessions s USING (session_id)
         WHERE k.session_id = $1 AND k.key = $3 AND k.expires_at > pg_catalog.now() AND ",
        active!("s", "$2")
    ),
    args: &[TEXT, INT4, TEXT],
    writes: false,
};

/// All live entries as one object, or NULL when the session is gone.
static GET_ALL: Statement = Statement {
    sql: concat!(
        "SELECT (SELECT coalesce(pg_catalog.jsonb_object_agg(k.key, k.value), '{}')
                 FROM agent_memory.kv_entries k
                 WHERE k.session_id = s.session_id AND k.expires_at > pg_catalog.now())
         FROM agent_memory.sessions s WHERE s.session_id = $1 AND ",
        active!("s", "$2")
    ),
    args: &[TEXT, INT4],
    writes: false,
};

/// Delete live entries ($3 keys, or all when NULL) of a session that the
/// caller has just renewed (so it is active); returns how many.
static DELETE_KEYS: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.kv_entries
            WHERE session_id = $1 AND ($2::text[] IS NULL OR key = ANY ($2))
            RETURNING expires_at)
          SELECT count(*) FILTER (WHERE expires_at > pg_catalog.now())::int4 FROM gone",
    args: &[TEXT, TEXT_ARRAY],
    writes: true,
};

/// What a write did.
pub struct Written {
    pub words: u64,
    pub total_words: u64,
    pub evicted: Vec<String>,
}

/// Store `entries` in the session's memory as one change: all of them, or
/// (on any error) none.
pub fn write_entries(
    session_id: &str,
    entries: &[(&str, &Value)],
    ttl: Option<Interval>,
) -> SqlResult<Written> {
    for (key, value) in entries {
        checked_id("key", Some(key))?;
        kv::check_value_size(key, value).or_report()?;
        sensitive::guard_write(key, value)?;
    }
    let counted: Vec<(&str, u64)> = entries
        .iter()
        .map(|(k, v)| (*k, words::words_in_value(v)))
        .collect();
    let budget = settings::KV_WORD_BUDGET.get() as u64;
    let incoming = budget::check_fits(&counted, budget).or_report()?;

    let keys: Vec<&str> = entries.iter().map(|(k, _)| *k).collect();
    let values: Vec<JsonB> = entries.iter().map(|(_, v)| JsonB((*v).clone())).collect();
    let word_counts: Vec<i32> = counted.iter().map(|(_, w)| *w as i32).collect();

    Spi::connect_mut(|client| {
        if !renew_in(client, session_id)? {
            return Err(session_gone(session_id)).or_report();
        }
        let upsert = kept(client, &UPSERT_AND_TOTAL).or_report()?;
        let total = client
            .update(
                &*upsert,
                None,
                &[
                    session_id.into(),
                    keys.clone().into(),
                    values.into(),
                    word_counts.into(),
                    ttl.into(),
                    settings::MEMORY_TTL_MIN.get().into(),
                ],
            )
            .or_report()?
            .first_value::<i64>(1)
            .or_report()?;
        let mut total_words = required(total, "total words")? as u64;
        let mut evicted = Vec::new();
        if total_words > budget {
            let held_plan = kept(client, &HELD).or_report()?;
            let rows = client
                .select(&*held_plan, None, &[session_id.into()])
                .or_report()?;
            let mut held_rows = Vec::with_capacity(rows.len());
            for row in rows {
                let key: String = required(row.get(1).or_report()?, "key")?;
                let words: i32 = required(row.get(2).or_report()?, "words")?;
                held_rows.push((key, words as u64));
            }
            let held: Vec<Held<'_>> = held_rows
                .iter()
                .map(|(key, words)| Held { key, words: *words })
                .collect();
            let plan = budget::plan_writes(&held, &counted, budget).or_report()?;
            let evict = kept(client, &EVICT).or_report()?;
            client
                .update(
                    &*evict,
                    None,
                    &[session_id.into(), plan.evicted.clone().into()],
                )
                .or_report()?;
            total_words = plan.total_words;
            evicted = plan.evicted;
        }
        Ok(Written {
            words: incoming,
            total_words,
            evicted,
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
    value: Option<JsonB>,
    ttl: default!(Option<Interval>, "NULL"),
) -> SqlResult<JsonB> {
    let session_id = checked_id("session_id", session_id)?;
    let key = checked_id("key", key)?;
    let value = value.ok_or_else(|| Error::null("value")).or_report()?.0;
    let ttl = checked_positive("ttl", ttl)?;
    let written = write_entries(session_id, &[(key, &value)], ttl)?;
    Ok(JsonB(json!({
        "stored": true,
        "key": key,
        "words": written.words,
        "total_words": written.total_words,
        "evicted": written.evicted,
    })))
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_get(session_id: &str, key: &str) -> SqlResult<Option<JsonB>> {
    Spi::connect(|client| {
        let plan = kept(client, &GET).or_report()?;
        client
            .select(
                &*plan,
                None,
                &[session_id.into(), idle_timeout_minutes().into(), key.into()],
            )
            .or_report()?
            .first_value::<JsonB>(1)
            .or_report()
    })
}

/// All live entries of a session as one object (NULL for a session that does
/// not exist or has expired).
pub fn get_all(session_id: &str) -> SqlResult<Option<JsonB>> {
    Spi::connect(|client| {
        let plan = kept(client, &GET_ALL).or_report()?;
        client
            .select(
                &*plan,
                None,
                &[session_id.into(), idle_timeout_minutes().into()],
            )
            .or_report()?
            .first_value::<JsonB>(1)
            .or_report()
    })
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_get_all(session_id: &str) -> SqlResult<Option<JsonB>> {
    get_all(session_id)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_has(session_id: &str, key: &str) -> SqlResult<bool> {
    Ok(kv_get(session_id, key)?.is_some())
}

/// Delete the given live keys (all when `keys` is None) of an active
/// session, renewing its activity; 0 when the session is gone.
pub fn delete_keys(session_id: &str, keys: Option<Vec<String>>) -> SqlResult<i32> {
    Spi::connect_mut(|client| {
        if !renew_in(client, session_id)? {
            return Ok(0);
        }
        let plan = kept(client, &DELETE_KEYS).or_report()?;
        let deleted = client
            .update(&*plan, None, &[session_id.into(), keys.into()])
            .or_report()?
            .first_value::<i32>(1)
            .or_report()?;
        Ok(deleted.unwrap_or(0))
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_delete(session_id: &str, key: &str) -> SqlResult<bool> {
    Ok(delete_keys(session_id, Some(vec![key.to_string()]))? > 0)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_clear(session_id: &str) -> SqlResult<i32> {
    delete_keys(session_id, None)
}
