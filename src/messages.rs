//! Bounded message history (seeds 000 and 001): append, read, pop, clear.
//!
//! Each (session, node) is a thread whose messages live in a ring of `keep`
//! slots (sql/schema.sql). Under the session's write lock an append reads
//! the thread's state in one statement, then writes the next slot, bumps
//! the thread and, when due, renews the session in another: the slot it
//! overwrites is the oldest message, so trimming costs one in-place update
//! whatever the table holds. A tool call dropped this way takes its results
//! with it. Only an append with a different `keep` repacks the ring.

use pgrx::prelude::*;
use pgrx::{JsonB, PgBuiltInOids, PgOid};
use serde_json::json;

use agent_memory_core::Error;
use agent_memory_core::messages::{self, Stored};

use crate::error::{OrReport, SqlResult};
use crate::plans::{FirstRow, Statement, first_value_of, kept};
use crate::sessions::{
    INT4, JSONB, TEXT, TEXT_ARRAY, active, checked_id, idle_timeout_minutes, lock_session,
    required, session_gone,
};
use crate::settings;

const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
const BOOL: PgOid = PgOid::BuiltIn(PgBuiltInOids::BOOLOID);
const INT4_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4ARRAYOID);

/// The thread key of a node: the node id, or '' for session-wide messages
/// (node ids are never empty).
fn thread_key(node_id: Option<&str>) -> &str {
    node_id.unwrap_or("")
}

/// The common append, in one statement: the thread exists with this keep
/// ($3), the session is active (default idle minutes $4), and the slot to
/// write (the oldest message's) holds no tool call. Then write the slot,
/// count the append and what it trimmed (the slot's previous message) on
/// the thread, and renew the session when its activity is over a second
/// old. Otherwise it writes nothing and returns no row: the careful path
/// (APPEND_STATE and what follows) takes over.
static APPEND_FAST: Statement = Statement {
    sql: concat!(
        "WITH target AS (
           SELECT t.appended % t.keep AS slot,
                  s.last_activity_at < pg_catalog.now() - interval '1 second' AS stale,
                  o.role IS NOT NULL AS occupied
           FROM agent_memory.message_threads t
           JOIN agent_memory.sessions s ON s.session_id = t.session_id
           LEFT JOIN agent_memory.thread_messages o
             ON o.session_id = t.session_id AND o.thread_key = t.thread_key AND o.slot = t.appended % t.keep
           WHERE t.session_id = $1 AND t.thread_key = $2 AND t.keep = $3 AND ",
        active!("s", "$4"),
        "
             AND NOT (o.role IS NOT DISTINCT FROM 'assistant' AND coalesce(o.metadata ? 'tool_calls', false))),
         written AS (
           INSERT INTO agent_memory.thread_messages AS m
             (session_id, thread_key, slot, seq, node_id, role, content, metadata, idempotency_key, created_at)
           SELECT $1, $2, target.slot, pg_catalog.nextval('agent_memory.message_seq'), $5, $6, $7, $8, $9,
                  pg_catalog.now()
           FROM target
           ON CONFLICT (session_id, thread_key, slot) DO UPDATE
           SET seq = excluded.seq, node_id = excluded.node_id, role = excluded.role,
               content = excluded.content, metadata = excluded.metadata,
               idempotency_key = excluded.idempotency_key, created_at = excluded.created_at
           RETURNING m.seq),
         thread AS (
           UPDATE agent_memory.message_threads t
           SET appended = t.appended + 1,
               last_trimmed = target.occupied::int4,
               trimmed = t.trimmed + target.occupied::int4
           FROM target WHERE t.session_id = $1 AND t.thread_key = $2),
         renewed AS (
           UPDATE agent_memory.sessions s SET last_activity_at = pg_catalog.now()
           FROM target WHERE s.session_id = $1 AND target.stale)
         SELECT seq FROM written"
    ),
    args: &[TEXT, TEXT, INT4, INT4, TEXT, TEXT, TEXT, JSONB, TEXT],
    writes: true,
};

/// Everything an append needs to decide, read at once under the lock: does
/// the session exist, is it active, is its recorded activity over a second
/// old; the thread's keep and appends; the seq of a message with the same
/// idempotency key; and what the next slot holds (present, and its tool
/// calls when it is an assistant message).
static APPEND_STATE: Statement = Statement {
    sql: concat!(
        "SELECT s.session_id IS NOT NULL,
                coalesce(",
        active!("s", "$4"),
        ", false),
                coalesce(s.last_activity_at < pg_catalog.now() - interval '1 second', false),
                t.keep, t.appended,
                (SELECT d.seq FROM agent_memory.thread_messages d
                 WHERE d.session_id = $1 AND d.idempotency_key = $3),
                o.slot IS NOT NULL,
                o.calls
         FROM (SELECT) AS one
         LEFT JOIN agent_memory.sessions s ON s.session_id = $1
         LEFT JOIN agent_memory.message_threads t ON t.session_id = $1 AND t.thread_key = $2
         LEFT JOIN LATERAL (
           SELECT m.slot, CASE WHEN m.role = 'assistant' THEN m.metadata -> 'tool_calls' END AS calls
           FROM agent_memory.thread_messages m
           WHERE m.session_id = $1 AND m.thread_key = $2 AND m.slot = t.appended % t.keep) AS o ON true"
    ),
    args: &[TEXT, TEXT, TEXT, INT4],
    // Run as a write although it only reads: a read-only SPI statement would
    // reuse the calling statement's snapshot, taken before the session's
    // write lock, and miss appends committed while this one waited.
    writes: true,
};

/// A session appended to before anyone created it: no user yet.
static CREATE_IMPLICIT: Statement = Statement {
    sql: "INSERT INTO agent_memory.sessions (session_id) VALUES ($1) ON CONFLICT (session_id) DO NOTHING",
    args: &[TEXT],
    writes: true,
};

/// Write slot $3 of the thread: the new message overwrites whatever the
/// slot held (the oldest message) in place. Count the append and what it
/// trimmed ($9) on the thread, and renew the session when $10.
static WRITE: Statement = Statement {
    sql: "WITH written AS (
            INSERT INTO agent_memory.thread_messages AS m
              (session_id, thread_key, slot, seq, node_id, role, content, metadata, idempotency_key, created_at)
            VALUES ($1, $2, $3, pg_catalog.nextval('agent_memory.message_seq'), $4, $5, $6, $7, $8, pg_catalog.now())
            ON CONFLICT (session_id, thread_key, slot) DO UPDATE
            SET seq = excluded.seq, node_id = excluded.node_id, role = excluded.role,
                content = excluded.content, metadata = excluded.metadata,
                idempotency_key = excluded.idempotency_key, created_at = excluded.created_at
            RETURNING m.seq),
          thread AS (
            UPDATE agent_memory.message_threads
            SET appended = appended + 1, last_trimmed = $9, trimmed = trimmed + $9
            WHERE session_id = $1 AND thread_key = $2),
          renewed AS (
            UPDATE agent_memory.sessions SET last_activity_at = pg_catalog.now()
            WHERE session_id = $1 AND $10)
          SELECT seq FROM written",
    args: &[TEXT, TEXT, INT4, TEXT, TEXT, TEXT, JSONB, TEXT, INT4, BOOL],
    writes: true,
};

/// The results ($4 call ids) of a tool call being overwritten in slot $3:
/// they go with it.
static DROP_RESULTS: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.thread_messages
            WHERE session_id = $1 AND thread_key = $2 AND slot <> $3 AND role = 'tool'
              AND metadata ->> 'tool_call_id' = ANY ($4)
            RETURNING 1)
          SELECT count(*)::int4 FROM gone",
    args: &[TEXT, TEXT, INT4, TEXT_ARRAY],
    writes: true,
};

/// A thread's messages, as a repack sees them.
static THREAD_MESSAGES: Statement = Statement {
    sql: "SELECT slot, seq,
                 CASE WHEN role = 'assistant' THEN metadata -> 'tool_calls' END,
                 CASE WHEN role = 'tool' THEN metadata ->> 'tool_call_id' END
          FROM agent_memory.thread_messages WHERE session_id = $1 AND thread_key = $2",
    args: &[TEXT, TEXT],
    writes: false,
};

static REMOVE_SLOTS: Statement = Statement {
    sql: "DELETE FROM agent_memory.thread_messages WHERE session_id = $1 AND thread_key = $2 AND slot = ANY ($3)",
    args: &[TEXT, TEXT, INT4_ARRAY],
    writes: true,
};

// A repack moves messages to new slots in two steps, through slots past any
// keep (MAX_KEEP is far below the offset), so that no two rows ever hold
// the same slot at once.
static MOVE_SLOTS_OUT: Statement = Statement {
    sql: "UPDATE agent_memory.thread_messages m SET slot = mv.new_slot + 1000000000
          FROM ROWS FROM (pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::int4[])) AS mv(old_slot, new_slot)
          WHERE m.session_id = $1 AND m.thread_key = $2 AND m.slot = mv.old_slot",
    args: &[TEXT, TEXT, INT4_ARRAY, INT4_ARRAY],
    writes: true,
};

static MOVE_SLOTS_IN: Statement = Statement {
    sql: "UPDATE agent_memory.thread_messages SET slot = slot - 1000000000
          WHERE session_id = $1 AND thread_key = $2 AND slot >= 1000000000",
    args: &[TEXT, TEXT],
    writes: true,
};

/// Set a thread's ring: keep $3, $4 messages in slots 0 .. $4 - 1.
static SET_THREAD: Statement = Statement {
    sql: "INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended)
          VALUES ($1, $2, $3, $4)
          ON CONFLICT (session_id, thread_key) DO UPDATE SET keep = excluded.keep, appended = excluded.appended",
    args: &[TEXT, TEXT, INT4, INT8],
    writes: true,
};

// Reads: the newest $3 messages of a thread ($2), or of the whole session
// when $2 is NULL, of an active session (default idle minutes $4).
macro_rules! newest_messages {
    () => {
        concat!(
            "SELECT m.seq, m.node_id, m.role, m.content, m.metadata, m.created_at
             FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id)
             WHERE m.session_id = $1 AND ($2::text IS NULL OR m.thread_key = $2) AND ",
            active!("s", "$4"),
            " ORDER BY m.seq DESC LIMIT $3"
        )
    };
}

static READ_MESSAGES: Statement = Statement {
    sql: concat!(
        "SELECT * FROM (",
        newest_messages!(),
        ") AS newest ORDER BY seq"
    ),
    args: &[TEXT, TEXT, INT4, INT4],
    writes: false,
};

static READ_JSON: Statement = Statement {
    sql: concat!(
        "SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'role', role, 'content', content, 'metadata', metadata,
                   'seq', seq, 'created_at', created_at) ORDER BY seq), '[]')
         FROM (",
        newest_messages!(),
        ") AS newest"
    ),
    args: &[TEXT, TEXT, INT4, INT4],
    writes: false,
};

static LAST_USER: Statement = Statement {
    sql: concat!(
        "SELECT m.content
         FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id)
         WHERE m.session_id = $1 AND ($2::text IS NULL OR m.thread_key = $2) AND m.role = 'user' AND ",
        active!("s", "$3"),
        " ORDER BY m.seq DESC LIMIT 1"
    ),
    args: &[TEXT, TEXT, INT4],
    writes: false,
};

/// Remove the newest message (of thread $2, or of the session) and give its
/// slot back to its thread: the newest is always the thread's last append.
static POP: Statement = Statement {
    sql: concat!(
        "WITH newest AS (
           SELECT m.session_id, m.thread_key, m.slot
           FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id)
           WHERE m.session_id = $1 AND ($2::text IS NULL OR m.thread_key = $2) AND ",
        active!("s", "$3"),
        " ORDER BY m.seq DESC LIMIT 1),
         gone AS (
           DELETE FROM agent_memory.thread_messages m USING newest n
           WHERE m.session_id = n.session_id AND m.thread_key = n.thread_key AND m.slot = n.slot
           RETURNING m.*),
         thread AS (
           UPDATE agent_memory.message_threads t SET appended = t.appended - 1
           FROM newest n WHERE t.session_id = n.session_id AND t.thread_key = n.thread_key)
         SELECT pg_catalog.jsonb_build_object('seq', seq, 'node_id', node_id, 'role', role,
                  'content', content, 'metadata', metadata, 'created_at', created_at)
         FROM gone"
    ),
    args: &[TEXT, TEXT, INT4],
    writes: true,
};

/// Drop the threads (all, or $2) of an active session; their messages go
/// with them. Returns how many messages there were.
static CLEAR: Statement = Statement {
    sql: concat!(
        "WITH live AS (
           SELECT s.session_id FROM agent_memory.sessions s WHERE s.session_id = $1 AND ",
        active!("s", "$3"),
        "),
         threads AS (
           DELETE FROM agent_memory.message_threads t USING live
           WHERE t.session_id = live.session_id AND ($2::text IS NULL OR t.thread_key = $2)
           RETURNING t.session_id, t.thread_key)
         SELECT count(*)::int4 FROM agent_memory.thread_messages m JOIN threads USING (session_id, thread_key)"
    ),
    args: &[TEXT, TEXT, INT4],
    writes: true,
};

/// An optional node id: absent, or a valid id.
fn checked_node(node_id: Option<&str>) -> SqlResult<Option<&str>> {
    node_id.map(|n| checked_id("node_id", Some(n))).transpose()
}

/// Checked `lim` of the reads.
fn checked_limit(lim: Option<i32>) -> SqlResult<i32> {
    match lim {
        Some(l) if l >= 1 => Ok(l),
        Some(l) => Err(Error::invalid(format!("lim must be at least 1, not {l}"))).or_report(),
        None => Err(Error::null("lim")).or_report(),
    }
}

/// Make room for one more message under a new (or first) keep: keep the
/// newest `keep - 1` messages without splitting a tool call from its
/// results, renumber them from slot 0, and set the thread's ring. Returns
/// how many messages it removed and how many it kept (the next free slot).
fn repack(
    client: &mut pgrx::spi::SpiClient<'_>,
    session_id: &str,
    key: &str,
    keep: i32,
) -> SqlResult<(i32, i32)> {
    let plan = kept(client, &THREAD_MESSAGES).or_report()?;
    let mut stored = Vec::new();
    for row in client
        .select(&*plan, None, &[session_id.into(), key.into()])
        .or_report()?
    {
        let calls = row.get::<JsonB>(3).or_report()?.map(|j| j.0);
        stored.push(Stored {
            slot: required(row.get::<i32>(1).or_report()?, "slot")?,
            seq: required(row.get::<i64>(2).or_report()?, "seq")?,
            calls: calls
                .map(|calls| messages::tool_call_ids(&json!({ "tool_calls": calls })))
                .unwrap_or_default(),
            answers: row.get::<String>(4).or_report()?,
        });
    }
    let plan = messages::plan_repack(&stored, keep);
    if !plan.removed.is_empty() {
        let remove = kept(client, &REMOVE_SLOTS).or_report()?;
        client
            .update(
                &*remove,
                None,
                &[session_id.into(), key.into(), plan.removed.clone().into()],
            )
            .or_report()?;
    }
    let moves: Vec<(i32, i32)> = plan
        .moves
        .iter()
        .copied()
        .filter(|(from, to)| from != to)
        .collect();
    if !moves.is_empty() {
        let (from, to): (Vec<i32>, Vec<i32>) = moves.into_iter().unzip();
        let out = kept(client, &MOVE_SLOTS_OUT).or_report()?;
        client
            .update(
                &*out,
                None,
                &[session_id.into(), key.into(), from.into(), to.into()],
            )
            .or_report()?;
        let back = kept(client, &MOVE_SLOTS_IN).or_report()?;
        client
            .update(&*back, None, &[session_id.into(), key.into()])
            .or_report()?;
    }
    let set = kept(client, &SET_THREAD).or_report()?;
    client
        .update(
            &*set,
            None,
            &[
                session_id.into(),
                key.into(),
                keep.into(),
                (plan.moves.len() as i64).into(),
            ],
        )
        .or_report()?;
    Ok((plan.removed.len() as i32, plan.moves.len() as i32))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn append_message(
    session_id: Option<&str>,
    role: Option<&str>,
    content: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
    metadata: default!(Option<JsonB>, "'{}'"),
    keep: default!(Option<i32>, "NULL"),
) -> SqlResult<i64> {
    let session_id = checked_id("session_id", session_id)?;
    let role = role.ok_or_else(|| Error::null("role")).or_report()?;
    messages::check_role(role).or_report()?;
    let content = content.ok_or_else(|| Error::null("content")).or_report()?;
    let node_id = checked_node(node_id)?;
    let metadata = metadata.map(|j| j.0).unwrap_or_else(|| json!({}));
    let max_bytes = settings::MAX_MESSAGE_BYTES.get().max(0) as usize;
    let idempotency_key = messages::check_message(content, &metadata, max_bytes).or_report()?;
    let keep = messages::resolve_keep(keep, settings::MAX_MESSAGES.get()).or_report()?;
    let key = thread_key(node_id);

    lock_session(session_id);
    Spi::connect_mut(|client| {
        // A repeated idempotency key is rare: only a call that has one takes
        // the careful path, which looks for it first.
        if idempotency_key.is_none() {
            let fast = kept(client, &APPEND_FAST).or_report()?;
            let written = client
                .update(
                    &*fast,
                    None,
                    &[
                        session_id.into(),
                        key.into(),
                        keep.into(),
                        idle_timeout_minutes().into(),
                        node_id.into(),
                        role.into(),
                        content.into(),
                        JsonB(metadata.clone()).into(),
                        Option::<&str>::None.into(),
                    ],
                )
                .or_report()?
                .first_value::<i64>(1)
                .or_report()?;
            if let Some(seq) = written {
                return Ok(seq);
            }
        }
        let state = kept(client, &APPEND_STATE).or_report()?;
        let state = client
            .select(
                &*state,
                None,
                &[
                    session_id.into(),
                    key.into(),
                    idempotency_key.as_deref().into(),
                    idle_timeout_minutes().into(),
                ],
            )
            .or_report()?
            .first();
        let exists = state.get::<bool>(1).or_report()?.unwrap_or(false);
        let active = state.get::<bool>(2).or_report()?.unwrap_or(false);
        let stale = state.get::<bool>(3).or_report()?.unwrap_or(false);
        let ring_keep = state.get::<i32>(4).or_report()?;
        let appended = state.get::<i64>(5).or_report()?;
        let duplicate = state.get::<i64>(6).or_report()?;
        let slot_taken = state.get::<bool>(7).or_report()?.unwrap_or(false);
        let slot_calls = state.get::<JsonB>(8).or_report()?.map(|j| j.0);

        if exists && !active {
            return Err(session_gone(session_id)).or_report();
        }
        if let Some(seq) = duplicate {
            return Ok(seq);
        }
        if !exists {
            let create = kept(client, &CREATE_IMPLICIT).or_report()?;
            client
                .update(&*create, None, &[session_id.into()])
                .or_report()?;
        }
        let (slot, trimmed) = match (ring_keep, appended) {
            (Some(ring_keep), Some(appended)) if ring_keep == keep => {
                let slot = (appended % i64::from(keep)) as i32;
                let mut trimmed = i32::from(slot_taken);
                let calls = slot_calls
                    .map(|calls| messages::tool_call_ids(&json!({ "tool_calls": calls })))
                    .unwrap_or_default();
                if !calls.is_empty() {
                    let results = kept(client, &DROP_RESULTS).or_report()?;
                    trimmed += client
                        .update(
                            &*results,
                            None,
                            &[session_id.into(), key.into(), slot.into(), calls.into()],
                        )
                        .or_report()?
                        .first_value::<i32>(1)
                        .or_report()?
                        .unwrap_or(0);
                }
                (slot, trimmed)
            }
            _ => {
                let (removed, kept_count) = repack(client, session_id, key, keep)?;
                (kept_count, removed)
            }
        };
        let write = kept(client, &WRITE).or_report()?;
        let seq = client
            .update(
                &*write,
                None,
                &[
                    session_id.into(),
                    key.into(),
                    slot.into(),
                    node_id.into(),
                    role.into(),
                    content.into(),
                    JsonB(metadata.clone()).into(),
                    idempotency_key.as_deref().into(),
                    trimmed.into(),
                    stale.into(),
                ],
            )
            .or_report()?
            .first_value::<i64>(1)
            .or_report()?;
        required(seq, "seq")
    })
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn messages(
    session_id: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
    lim: default!(Option<i32>, "50"),
) -> Result<
    // Spelled out: pgrx reads the column names from this signature.
    TableIterator<
        'static,
        (
            name!(seq, i64),
            name!(node_id, Option<String>),
            name!(role, String),
            name!(content, String),
            name!(metadata, JsonB),
            name!(created_at, TimestampWithTimeZone),
        ),
    >,
    pgrx::pg_sys::panic::ErrorReport,
> {
    let session_id = checked_id("session_id", session_id)?;
    let node_id = checked_node(node_id)?;
    let lim = checked_limit(lim)?;
    let rows = Spi::connect(|client| -> SqlResult<Vec<_>> {
        let plan = kept(client, &READ_MESSAGES).or_report()?;
        let table = client
            .select(
                &*plan,
                None,
                &[
                    session_id.into(),
                    node_id.into(),
                    lim.into(),
                    idle_timeout_minutes().into(),
                ],
            )
            .or_report()?;
        let mut rows = Vec::with_capacity(table.len());
        for row in table {
            rows.push((
                required(row.get::<i64>(1).or_report()?, "seq")?,
                row.get::<String>(2).or_report()?,
                required(row.get::<String>(3).or_report()?, "role")?,
                required(row.get::<String>(4).or_report()?, "content")?,
                required(row.get::<JsonB>(5).or_report()?, "metadata")?,
                required(
                    row.get::<TimestampWithTimeZone>(6).or_report()?,
                    "created_at",
                )?,
            ));
        }
        Ok(rows)
    })?;
    Ok(TableIterator::new(rows))
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn messages_json(
    session_id: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
    lim: default!(Option<i32>, "50"),
) -> SqlResult<JsonB> {
    let session_id = checked_id("session_id", session_id)?;
    let node_id = checked_node(node_id)?;
    let lim = checked_limit(lim)?;
    let json = first_value_of::<JsonB>(
        &READ_JSON,
        &[
            session_id.into(),
            node_id.into(),
            lim.into(),
            idle_timeout_minutes().into(),
        ],
    )?;
    Ok(json.unwrap_or_else(|| JsonB(json!([]))))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn pop_message(
    session_id: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<Option<JsonB>> {
    let session_id = checked_id("session_id", session_id)?;
    let node_id = checked_node(node_id)?;
    lock_session(session_id);
    first_value_of::<JsonB>(
        &POP,
        &[
            session_id.into(),
            node_id.into(),
            idle_timeout_minutes().into(),
        ],
    )
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn last_user_message(
    session_id: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<Option<String>> {
    let session_id = checked_id("session_id", session_id)?;
    let node_id = checked_node(node_id)?;
    first_value_of::<String>(
        &LAST_USER,
        &[
            session_id.into(),
            node_id.into(),
            idle_timeout_minutes().into(),
        ],
    )
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn clear_messages(
    session_id: Option<&str>,
    node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let session_id = checked_id("session_id", session_id)?;
    let node_id = checked_node(node_id)?;
    lock_session(session_id);
    let cleared = first_value_of::<i32>(
        &CLEAR,
        &[
            session_id.into(),
            node_id.into(),
            idle_timeout_minutes().into(),
        ],
    )?;
    Ok(cleared.unwrap_or(0))
}
