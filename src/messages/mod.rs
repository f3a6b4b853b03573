//! Bounded message history: append, read, pop, clear.
//!
//! Each (session, node) is a thread whose messages live in a ring of `keep`
//! slots (sql/schema.sql). Every statement reads and writes only rows of
//! the caller's tenant (agent_memory.caller_tenant(), second in every
//! key), even for a superuser, whom row-level security does not
//! restrict. Under the session's write lock, one statement takes the
//! thread's next position and writes its slot, overwriting the
//! oldest message in place: trimming costs one in-place update whatever the
//! table holds. When that message is a tool call, its results are removed
//! first, and the ring is repacked when that empties other slots: the
//! messages a thread holds always take the positions just before its next
//! one, so an append trims a message only when the ring is full. A new
//! thread, another `keep`, an idempotency key or a missing session take the
//! general path, which may repack the ring.
//!
//! `append_messages` gives the result of appending its messages one by one.
//! A run of plain messages (no tool call or result, no idempotency key)
//! goes in one statement, up to the first ring slot that holds a tool call
//! (the message that overwrites it goes alone, taking the call's results
//! with it); of a run longer than `keep` only the last `keep` are written.

use pgrx::prelude::*;
use serde_json::json;

use agent_memory_core::jsonb::JsonbWriter;
use agent_memory_core::messages::{self, Stored};
use agent_memory_core::{Error, ErrorKind};

use crate::pg::args::{
    INT4, INT4_ARRAY, INT8, JSONB, TEXT, TEXT_ARRAY, checked_id, checked_optional_id, required,
};
use crate::pg::c_functions::{TableCall, materialized_table_function};
use crate::pg::datums::{JsonB, JsonbArg, JsonbBytes, numeric_bytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement, first_value_of, on_citus};
use crate::pg::settings;
use crate::pg::stream::{StreamRow, StreamStatement, for_each_row};
use crate::sessions::{
    active, callers_active_session, idle_timeout_minutes, lock_session, lock_session_creating,
    renew_in, session_expired, session_gone,
};

/// The thread key of a node: the node id, or '' for session-wide messages
/// (node ids are never empty).
fn thread_key(node_id: Option<&str>) -> &str {
    node_id.unwrap_or("")
}

/// An optional node id: absent, or a valid id.
fn checked_node(node_id: Option<&str>) -> SqlResult<Option<&str>> {
    checked_optional_id("node_id", node_id)
}

/// The session and node a call on a thread addresses, checked in that
/// order.
fn checked_thread<'a>(
    session_id: Option<&'a str>, node_id: Option<&'a str>,
) -> SqlResult<(&'a str, Option<&'a str>)> {
    Ok((checked_id("session_id", session_id)?, checked_node(node_id)?))
}

/// Checked `lim` of the reads.
fn checked_limit(lim: Option<i32>) -> SqlResult<i32> {
    messages::checked_limit(lim).or_report()
}

/// How much of a ring a repack leaves free.
#[derive(Clone, Copy)]
enum Room<'a> {
    /// None: the newest `keep` messages stay.
    None,
    /// One slot, for a message about to be appended that answers call
    /// `.0` when it is a tool result; none where the call does not stay,
    /// since such a result is not stored.
    For(Option<&'a str>),
}

/// Repack a thread under `keep` (a new or first one, or its own after
/// slots were emptied): keep its newest messages, leaving `room`, without
/// splitting a tool call from its results, renumber them from slot 0, and
/// set the thread's ring. Returns how many it kept: the next position.
fn repack(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, keep: i32, room: Room<'_>,
) -> SqlResult<i32> {
    let mut stored = Vec::new();
    for row in THREAD_MESSAGES.read(client, &[session_id.into(), key.into()])? {
        let calls = row.value::<JsonB>(3)?.map(|j| j.0);
        stored.push(Stored {
            slot: row.required::<i32>(1, "slot")?,
            seq: row.required::<i64>(2, "seq")?,
            calls: calls.map(|calls| messages::call_ids(&calls)).unwrap_or_default(),
            answers: row.value::<String>(4)?,
        });
    }
    let keep_messages = keep.max(0) as usize;
    let plan = match room {
        Room::None => messages::plan_keeping(&stored, keep_messages),
        Room::For(call) => messages::plan_with_room(&stored, keep_messages, call),
    };
    if !plan.removed.is_empty() {
        remove_slots(client, session_id, key, plan.removed.clone())?;
    }
    let moves: Vec<(i32, i32)> =
        plan.moves.iter().copied().filter(|(from, to)| from != to).collect();
    if !moves.is_empty() {
        let (from, to): (Vec<i32>, Vec<i32>) = moves.into_iter().unzip();
        let move_slots_out = if on_citus()? { &MOVE_SLOTS_OUT_ON_CITUS } else { &MOVE_SLOTS_OUT };
        move_slots_out.run(client, &[session_id.into(), key.into(), from.into(), to.into()])?;
        MOVE_SLOTS_IN.run(client, &[session_id.into(), key.into()])?;
    }
    SET_THREAD.run(
        client,
        &[session_id.into(), key.into(), keep.into(), (plan.moves.len() as i64).into()],
    )?;
    Ok(plan.moves.len() as i32)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn append_message(
    session_id: Option<&str>, role: Option<&str>, content: Option<&str>,
    node_id: default!(Option<&str>, "NULL"), metadata: default!(Option<JsonbArg>, "'{}'"),
    keep: default!(Option<i32>, "NULL"),
) -> SqlResult<i64> {
    let session_id = checked_id("session_id", session_id)?;
    let role = role.ok_or_else(|| Error::null("role")).or_report()?;
    messages::check_role(role).or_report()?;
    let content = content.ok_or_else(|| Error::null("content")).or_report()?;
    let node_id = checked_node(node_id)?;
    // Decoded for the checks (tool calls, idempotency key); stored as passed.
    let metadata_arg = metadata;
    let metadata = match &metadata_arg {
        Some(arg) => arg.decode().ok_or_else(|| Error::null("metadata")).or_report()?,
        None => json!({}),
    };
    let max_bytes = settings::MAX_MESSAGE_BYTES.get().max(0) as usize;
    messages::check_message(content, &metadata, max_bytes).or_report()?;
    let keep = messages::resolve_keep(keep, settings::MAX_MESSAGES.get()).or_report()?;
    let key = thread_key(node_id);

    let message = NewMessage {
        metadata_arg: metadata_arg.as_ref(),
        ..NewMessage::new(node_id, role, content, metadata)
    };

    lock_session_creating(session_id)?;
    Spi::connect_mut(|client| {
        lock_threads_for_snapshot(client, session_id)?;
        append_locked(client, session_id, key, keep, &message)
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn append_messages(
    session_id: Option<&str>, messages: Option<JsonbArg>, node_id: default!(Option<&str>, "NULL"),
    keep: default!(Option<i32>, "NULL"),
) -> SqlResult<Vec<i64>> {
    let (session_id, node_id) = checked_thread(session_id, node_id)?;
    let messages_arg = messages.ok_or_else(|| Error::null("messages")).or_report()?;
    let decoded = messages_arg.decode().ok_or_else(|| Error::null("messages")).or_report()?;
    let max_bytes = settings::MAX_MESSAGE_BYTES.get().max(0) as usize;
    // Every message is checked before anything is written.
    let batch = messages::parse_batch(&decoded, max_bytes).or_report()?;
    let keep = messages::resolve_keep(keep, settings::MAX_MESSAGES.get()).or_report()?;
    let key = thread_key(node_id);
    if batch.is_empty() {
        // Nothing to write, and no session to create; an expired one is
        // refused all the same, as an append to it is.
        if session_expired(session_id)? {
            return Err(session_gone(session_id)).or_report();
        }
        return Ok(Vec::new());
    }

    lock_session_creating(session_id)?;
    Spi::connect_mut(|client| {
        lock_threads_for_snapshot(client, session_id)?;
        let mut seqs = Vec::with_capacity(batch.len());
        while seqs.len() < batch.len() {
            // A run of two or more plain messages goes in one statement, as
            // far as it can; the message after it goes on its own (when the
            // run stopped short, it is the one that overwrites a tool call).
            let done = seqs.len();
            let run = batch[done..].iter().take_while(|m| m.is_plain()).count();
            if run >= 2
                && !on_citus()?
                && let Some((first, count)) = append_plain_run(
                    client,
                    session_id,
                    key,
                    keep,
                    node_id,
                    &messages_arg,
                    done,
                    run,
                )?
            {
                seqs.extend(first..first + i64::from(count));
                if count as usize == run {
                    continue;
                }
            }
            let one = &batch[seqs.len()];
            let metadata = one.metadata.cloned().unwrap_or_else(|| json!({}));
            let message = NewMessage::new(node_id, one.role, one.content, metadata);
            seqs.push(append_locked(client, session_id, key, keep, &message)?);
        }
        Ok(seqs)
    })
}

/// Append the run of plain messages `done..done + run` of `messages`, as
/// many as go in one statement (APPEND_BATCH); returns the first one's seq
/// and how many went, or None when none could (nothing was written).
#[allow(clippy::too_many_arguments)]
fn append_plain_run(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, keep: i32,
    node_id: Option<&str>, messages: &JsonbArg, done: usize, run: usize,
) -> SqlResult<Option<(i64, i32)>> {
    let (Ok(done), Ok(run)) = (i32::try_from(done), i32::try_from(run)) else {
        return Ok(None);
    };
    let batch = Batch { session_id, key, keep, node_id, done, run };
    let Some(appended) = batch.append(client, &APPEND_BATCH, messages.into())? else {
        return Ok(None);
    };
    // One by one, only the first of them would have moved the session to
    // this thread: the session records that one's seq.
    record_append_on_session(
        client,
        session_id,
        key,
        appended.first,
        appended.moved,
        appended.stale,
    )?;
    let (first, count) = (appended.first, appended.count);
    Ok(Some((first, count)))
}

/// Messages `done + 1 ..= done + run` of a jsonb array, for APPEND_BATCH or
/// IMPORT_BATCH to append to a session's thread.
struct Batch<'a> {
    session_id: &'a str,
    key: &'a str,
    keep: i32,
    node_id: Option<&'a str>,
    done: i32,
    run: i32,
}

/// What a batch statement appended: the first seq, how many, whether they
/// moved the session to another thread, whether its activity is stale.
struct Appended {
    first: i64,
    count: i32,
    moved: bool,
    stale: bool,
}

impl Batch<'_> {
    /// None when nothing could go (nothing was written).
    fn append(
        &self, client: &mut pgrx::spi::SpiClient<'_>, statement: &'static Statement,
        messages: pgrx::datum::DatumWithOid<'_>,
    ) -> SqlResult<Option<Appended>> {
        let rows = statement.run(
            client,
            &[
                self.session_id.into(),
                self.key.into(),
                self.keep.into(),
                idle_timeout_minutes().into(),
                self.node_id.into(),
                messages,
                self.done.into(),
                self.run.into(),
            ],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        let row = rows.first();
        Ok(Some(Appended {
            first: row.required::<i64>(1, "seq")?,
            count: row.required::<i32>(2, "count")?,
            moved: row.value::<bool>(3)?.unwrap_or(true),
            stale: row.value::<bool>(4)?.unwrap_or(false),
        }))
    }
}

/// Under REPEATABLE READ or SERIALIZABLE, lock the session's row and
/// threads (see LOCK_THREADS).
fn lock_threads_for_snapshot(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str,
) -> SqlResult<()> {
    if crate::sessions::uses_transaction_snapshot() {
        LOCK_THREADS.run(client, &[session_id.into()])?;
    }
    Ok(())
}

/// Append one message to thread `key` under the session's write lock;
/// returns its seq.
fn append_locked(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, keep: i32,
    message: &NewMessage<'_>,
) -> SqlResult<i64> {
    // A repeated idempotency key is rare: only a call that has one takes
    // the general path, which looks for it first. So does a tool result,
    // which is stored only while its call is. Citus cannot route the
    // common append (an INSERT in a CTE): there every append takes the
    // general path, whose statements it routes one by one.
    if message.idempotency_key().is_none() && message.answers().is_none() && !on_citus()? {
        let [node_id, role, content, metadata] = message.columns();
        let idle = idle_timeout_minutes();
        let rows = APPEND_FAST.run(
            client,
            &[
                session_id.into(),
                key.into(),
                keep.into(),
                idle.into(),
                node_id,
                role,
                content,
                metadata,
            ],
        )?;
        if !rows.is_empty() {
            let row = rows.first();
            let written = row.value::<i64>(1)?;
            let slot = row.required::<i32>(2, "slot")?;
            let seq = row.required::<i64>(3, "seq")?;
            let moved = row.value::<bool>(4)?.unwrap_or(true);
            let stale = row.value::<bool>(5)?.unwrap_or(false);
            if written.is_none() {
                // The slot holds a tool call: its results go first. (This
                // message is no tool result, so it is stored.)
                let held = slot_held(client, session_id, key, slot, message)?;
                overwrite_slot(client, session_id, key, keep, slot, message, seq, &held)?;
            }
            record_append_on_session(client, session_id, key, seq, moved, stale)?;
            return Ok(seq);
        }
    }

    // The general path: a new thread, another keep, an idempotency key,
    // or a session that is missing or expired.
    let state = APPEND_STATE
        .run(
            client,
            &[
                session_id.into(),
                key.into(),
                message.idempotency_key().into(),
                idle_timeout_minutes().into(),
            ],
        )?
        .first();
    let exists = state.value::<bool>(1)?.unwrap_or(false);
    let active = state.value::<bool>(2)?.unwrap_or(false);
    let stale = state.value::<bool>(3)?.unwrap_or(false);
    let ring_keep = state.value::<i32>(4)?;
    let appended = state.value::<i64>(5)?;
    let duplicate = state.value::<i64>(6)?;

    if exists && !active {
        return Err(session_gone(session_id)).or_report();
    }
    if let Some(seq) = duplicate {
        // A retry renews the session, as the append it repeats did.
        record_append_on_session(client, session_id, key, seq, false, stale)?;
        return Ok(seq);
    }
    if !exists {
        crate::sessions::CREATE_IMPLICIT.run(client, &[session_id.into()])?;
    }
    let slot = match (ring_keep, appended) {
        (Some(ring_keep), Some(appended)) if ring_keep == keep => {
            (appended % i64::from(keep)) as i32
        }
        // A result that takes no room may leave a full ring: its next
        // position is then slot 0.
        _ => repack(client, session_id, key, keep, Room::For(message.answers()))? % keep,
    };
    let held = slot_held(client, session_id, key, slot, message)?;
    // A tool result whose call the thread does not hold (never appended,
    // or trimmed) is not stored: it takes a seq but no room, so no message
    // is trimmed for it. One whose call is in the slot it takes trims the
    // call (and the call's other results) and is then not stored either:
    // the position stays at the emptied slot, which the next append takes.
    let call_in_slot = message.answers().is_some_and(|id| held.calls.iter().any(|call| call == id));
    let stored = held.call_held;
    let claimed =
        CLAIM_POSITION.run(client, &[session_id.into(), key.into(), i64::from(stored).into()])?;
    // No thread any more: the cleanup removed the session, found expired
    // by its own clock, since the state was read.
    if claimed.is_empty() {
        return Err(session_gone(session_id)).or_report();
    }
    let claimed = claimed.first();
    let seq = claimed.required::<i64>(1, "seq")?;
    let moved = claimed.value::<bool>(2)?.unwrap_or(true);
    if stored {
        overwrite_slot(client, session_id, key, keep, slot, message, seq, &held)?;
    } else if call_in_slot {
        let dropped = drop_results(client, session_id, key, slot, &held)?;
        remove_slots(client, session_id, key, vec![slot])?;
        if dropped {
            repack(client, session_id, key, keep, Room::None)?;
        }
    }
    record_append_on_session(client, session_id, key, seq, moved, stale)?;
    Ok(seq)
}

/// After an append of `seq` to thread `key`: record the thread on the
/// session when the append moved there from another (which also renews the
/// session), else renew a session whose recorded activity is stale.
fn record_append_on_session(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, seq: i64, moved: bool,
    stale: bool,
) -> SqlResult<()> {
    if moved {
        MOVE_TO_THREAD.run(client, &[session_id.into(), key.into(), seq.into()])?;
    } else if stale {
        RENEW_SESSION.run(client, &[session_id.into()])?;
    }
    Ok(())
}

/// A message being appended, already checked.
struct NewMessage<'a> {
    node_id: Option<&'a str>,
    role: &'a str,
    content: &'a str,
    metadata: serde_json::Value,
    /// The metadata as the caller passed it, handed to the statements as it
    /// is (None: NULL was passed, or the message came in a batch, and
    /// `metadata` is what stands for it).
    metadata_arg: Option<&'a JsonbArg>,
}

impl<'a> NewMessage<'a> {
    fn new(
        node_id: Option<&'a str>, role: &'a str, content: &'a str, metadata: serde_json::Value,
    ) -> Self {
        NewMessage { node_id, role, content, metadata, metadata_arg: None }
    }

    fn idempotency_key(&self) -> Option<&str> {
        messages::idempotency_key(&self.metadata)
    }

    /// The call it answers, when it is a tool result.
    fn answers(&self) -> Option<&str> {
        messages::answered_call_of(self.role, &self.metadata)
    }

    /// The stored columns node_id, role, content and metadata, as
    /// statement arguments.
    fn columns(&self) -> [pgrx::datum::DatumWithOid<'_>; 4] {
        let metadata = match self.metadata_arg {
            Some(arg) => arg.into(),
            None => JsonB(self.metadata.clone()).into(),
        };
        [self.node_id.into(), self.role.into(), self.content.into(), metadata]
    }
}

/// What slot `slot` of thread `key` holds before a message takes it: the
/// tool calls of the message there, and whether the thread holds, in
/// another slot, the call the new message answers (true when it answers
/// none).
struct SlotHeld {
    calls: Vec<String>,
    call_held: bool,
}

fn slot_held(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, slot: i32,
    message: &NewMessage<'_>,
) -> SqlResult<SlotHeld> {
    let row = SLOT_CALLS
        .run(client, &[session_id.into(), key.into(), slot.into(), message.answers().into()])?
        .first();
    let calls =
        row.value::<JsonB>(1)?.map(|calls| messages::call_ids(&calls.0)).unwrap_or_default();
    let call_held = row.required::<bool>(2, "call held")?;
    Ok(SlotHeld { calls, call_held })
}

/// Before slot `slot` is overwritten or emptied: the results of the tool
/// calls it holds go with them. Returns whether any went (their slots are
/// then empty).
fn drop_results(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, slot: i32, held: &SlotHeld,
) -> SqlResult<bool> {
    if held.calls.is_empty() {
        return Ok(false);
    }
    let dropped = DROP_RESULTS
        .run(client, &[session_id.into(), key.into(), slot.into(), held.calls.clone().into()])?
        .first()
        .value::<i32>(1)?
        .unwrap_or(0);
    Ok(dropped > 0)
}

/// Write `message` as `seq` in the slot its thread's next position has
/// taken: the message the slot holds goes, and if it is a tool call its
/// results go with it. Their slots would stay empty while later appends
/// trimmed the messages after them, so the ring (of `keep`, the thread's)
/// is then repacked, leaving those slots to the next appends.
#[allow(clippy::too_many_arguments)]
fn overwrite_slot(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, keep: i32, slot: i32,
    message: &NewMessage<'_>, seq: i64, held: &SlotHeld,
) -> SqlResult<()> {
    let dropped = drop_results(client, session_id, key, slot, held)?;
    let [node_id, role, content, metadata] = message.columns();
    let idempotency_key = message.idempotency_key();
    OVERWRITE.run(
        client,
        &[
            session_id.into(),
            key.into(),
            slot.into(),
            node_id,
            role,
            content,
            metadata,
            idempotency_key.into(),
            seq.into(),
        ],
    )?;
    if dropped {
        repack(client, session_id, key, keep, Room::None)?;
    }
    Ok(())
}

/// The newest `lim` messages of a thread (or of the whole session when
/// `node_id` is NULL) of an active session, oldest first, handed one by one
/// to `each`.
fn for_each_newest(
    session_id: &str, node_id: Option<&str>, lim: i32,
    each: &mut dyn FnMut(&StreamRow<'_>) -> SqlResult<()>,
) -> SqlResult<()> {
    let lim = lim.to_string();
    let idle = idle_timeout_minutes().to_string();
    for_each_row(&READ_MESSAGES, &[Some(session_id), node_id, Some(&lim), Some(&idle)], each)
}

// messages returns its rows in materialize mode: each row goes into the
// result store (which spills to disk past work_mem) as it is read, so a
// call holds one message in memory whatever `lim` is; pgrx's table
// functions collect every row first. The C symbol keeps the name earlier
// versions declared, so their catalogs find it.
materialized_table_function! { "messages", messages_wrapper, put_message_rows, r#"
CREATE FUNCTION agent_memory.messages(session_id text, node_id text DEFAULT NULL, lim integer DEFAULT 50)
RETURNS TABLE (seq bigint, node_id text, role text, content text, metadata jsonb,
               created_at timestamp with time zone)
LANGUAGE c STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'messages_wrapper';
"# }

/// Read the newest messages and put them into the result store.
fn put_message_rows(call: &TableCall) -> SqlResult<()> {
    let session_id = checked_id("session_id", call.text(0)?)?;
    let node_id = checked_node(call.text(1)?)?;
    let lim = checked_limit(call.int4(2)?)?.to_string();
    let idle = idle_timeout_minutes().to_string();
    let params = [Some(session_id), node_id, Some(&lim), Some(&idle)];
    call.put_rows(&READ_MESSAGES, &params)?;
    Ok(())
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn messages_json(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
    lim: default!(Option<i32>, "50"),
) -> SqlResult<JsonbBytes> {
    let (session_id, node_id) = checked_thread(session_id, node_id)?;
    let lim = checked_limit(lim)?;
    let max_bytes = settings::max_result_bytes();
    // Each message's object is written in jsonb's binary form as its row is
    // read (the same bytes jsonb_build_object makes), then the array of
    // them, whose header needs their count.
    let mut objects = JsonbWriter::with_capacity(4096);
    let mut bytes: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    let mut stamp = [0 as std::ffi::c_char; pg_sys::MAXDATELEN as usize + 1];
    for_each_newest(session_id, node_id, lim, &mut |row| {
        let w = &mut objects;
        // SAFETY: column 5 is a jsonb of the row.
        let metadata = unsafe { JsonbBytes::from_datum(row.datum(5, "metadata")?, false) };
        let metadata = required(metadata, "metadata")?;
        // Keys in jsonb's order: by length, then bytes.
        w.begin_object(5);
        for key in ["seq", "role", "content", "metadata", "created_at"] {
            w.string(key);
        }
        w.numeric(&numeric_bytes(row.int8(1, "seq")?));
        w.string(row.text(3, "role")?);
        w.string(row.text(4, "content")?);
        w.jsonb(&metadata.0);
        w.string(&json_timestamptz(&mut stamp, row.timestamptz(6, "created_at")?));
        w.end();
        w.finish_into(&mut bytes).or_report()?;
        ends.push(bytes.len());
        if bytes.len() > max_bytes {
            return Err(too_large_for_json(max_bytes)).or_report();
        }
        Ok(())
    })?;
    let mut w = JsonbWriter::with_capacity(64 + bytes.len() + ends.len() * 8);
    w.begin_array(ends.len());
    let mut start = 0;
    for &end in &ends {
        w.container(&bytes[start..end]);
        start = end;
    }
    drop(bytes);
    w.end();
    let document = w
        .finish()
        .map_err(|e| match e.kind {
            ErrorKind::LimitExceeded => too_large_for_json(max_bytes),
            _ => e,
        })
        .or_report()?;
    Ok(JsonbBytes(document))
}

fn too_large_for_json(max_bytes: usize) -> Error {
    Error::too_large_to_build("the messages take", max_bytes)
        .with_hint("read them as rows with messages(), or ask for fewer with lim")
}

/// A timestamptz as jsonb_build_object writes it (ISO 8601, in the
/// session's time zone).
fn json_timestamptz(
    buffer: &mut [std::ffi::c_char; pg_sys::MAXDATELEN as usize + 1], at: TimestampWithTimeZone,
) -> String {
    // SAFETY: JsonEncodeDateTime writes at most MAXDATELEN + 1 bytes (a
    // NUL-terminated string) into the buffer it is given, and raises an
    // ordinary error for a timestamp it cannot show.
    unsafe {
        let text = pg_sys::JsonEncodeDateTime(
            buffer.as_mut_ptr(),
            pg_sys::Datum::from(at.into_inner()),
            pg_sys::TIMESTAMPTZOID,
            std::ptr::null(),
        );
        std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// Column 1 of the first row of `statement` run on one thread of a live
/// session (None: no row, or NULL).
fn on_thread<T: FromDatum + IntoDatum>(
    statement: &'static Statement, session_id: &str, node_id: Option<&str>,
) -> SqlResult<Option<T>> {
    first_value_of::<T>(
        statement,
        &[session_id.into(), node_id.into(), idle_timeout_minutes().into()],
    )
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn pop_message(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<Option<JsonbBytes>> {
    let (session_id, node_id) = checked_thread(session_id, node_id)?;
    lock_session(session_id)?;
    let popped = on_thread(&POP, session_id, node_id)?;
    renew(session_id)?;
    Ok(popped)
}

/// Renew an active session after a write that removed messages (an append
/// renews it in its own statements).
fn renew(session_id: &str) -> SqlResult<()> {
    Spi::connect_mut(|client| renew_in(client, session_id)).map(|_| ())
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn last_user_message(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<Option<String>> {
    let (session_id, node_id) = checked_thread(session_id, node_id)?;
    on_thread(&LAST_USER, session_id, node_id)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn clear_messages(
    session_id: Option<&str>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let (session_id, node_id) = checked_thread(session_id, node_id)?;
    lock_session(session_id)?;
    let cleared = on_thread(&CLEAR, session_id, node_id)?.unwrap_or(0);
    renew(session_id)?;
    Ok(cleared)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::pg::datums::JsonbBytes;

    /// messages_json writes its jsonb itself: byte for byte what
    /// jsonb_agg(jsonb_build_object(...)) makes of the same rows, whatever
    /// the metadata (nested, long, big numbers, over 32 keys), the content
    /// (escapes, non-ASCII, toasted) and the session's time zone.
    #[pg_test]
    fn messages_json_writes_what_jsonb_build_object_makes() {
        Spi::run(
            r#"SELECT agent_memory.append_message('mj', 'system', 'You are terse.');
               SELECT agent_memory.append_message('mj', 'user', E'Ünïcode "quotes" \\ back\nline\t€',
                 metadata => '{"n": 12345678901234567890.50, "deep": {"a": [1, 2.50, null, true, {"b": "c"}]}, "s": "x"}');
               SELECT agent_memory.append_message('mj', 'assistant', '', metadata => '{"tool_calls": [{"id": "t1"}]}');
               SELECT agent_memory.append_message('mj', 'tool', repeat('big ', 5000), metadata => '{"tool_call_id": "t1"}');
               SELECT agent_memory.append_message('mj', 'user', 'forty keys', node_id => 'n1',
                 metadata => (SELECT jsonb_object_agg('k' || i, i) FROM generate_series(1, 40) i));"#,
        )
        .expect("messages");
        for zone in ["UTC", "Asia/Kolkata", "America/St_Johns"] {
            Spi::run(&format!("SET TimeZone = '{zone}'")).expect("time zone");
            for (node, lim) in [("NULL", 50), ("'n1'", 50), ("NULL", 2), ("'none'", 50)] {
                let (written, built) = Spi::connect(|client| {
                    let row = client
                        .select(
                            &format!(
                                "SELECT agent_memory.messages_json('mj', {node}, {lim}),
                                        coalesce(jsonb_agg(jsonb_build_object(
                                          'role', role, 'content', content, 'metadata', metadata,
                                          'seq', seq, 'created_at', created_at) ORDER BY seq), '[]')
                                 FROM agent_memory.messages('mj', {node}, {lim})"
                            ),
                            None,
                            &[],
                        )
                        .expect("select")
                        .first();
                    (
                        row.get::<JsonbBytes>(1).expect("written").expect("not null").0,
                        row.get::<JsonbBytes>(2).expect("built").expect("not null").0,
                    )
                });
                assert_eq!(written.len() > 8, node != "'none'", "{zone} {node} {lim}: rows");
                assert!(written == built, "{zone} {node} {lim}: bytes differ");
            }
        }
    }
}

/// Remove `slots` of thread `key` of session `session_id`.
fn remove_slots(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, slots: Vec<i32>,
) -> SqlResult<()> {
    let statement = if on_citus()? { &REMOVE_SLOTS_ON_CITUS } else { &REMOVE_SLOTS };
    statement.run(client, &[session_id.into(), key.into(), slots.into()])?;
    Ok(())
}

// The statements, and the SQL they share.

/// The seq an append to thread $2 takes, for the statements below, which
/// join the thread as t and the session as s (both of the caller's
/// tenant): one more than the largest of
/// the thread's last_seq, the session's last_message_seq and, when the
/// session's previous append went to another thread, that thread's last_seq
/// (every other thread's is at most last_message_seq).
macro_rules! next_seq {
    () => {
        "greatest(t.last_seq, s.last_message_seq,
           CASE WHEN s.last_thread_key IS DISTINCT FROM $2 THEN
             (SELECT o.last_seq FROM agent_memory.message_threads o
              WHERE o.session_id = $1 AND o.thread_key = s.last_thread_key
                AND o.tenant = s.tenant) END) + 1"
    };
}

/// The common append, in one statement: if the thread exists with this
/// keep ($3) and the session is active (default idle minutes $4), take the
/// thread's next position and the session's next seq, and write the slot,
/// overwriting the oldest message in place, unless that message is a tool
/// call (its results must go with it: the write is skipped and the caller
/// finishes the append). Returns the seq as written (NULL when skipped), the
/// slot, the seq taken, whether the append moved to another thread than
/// the session's previous one (the caller then records it on the session),
/// and whether the session's recorded activity is over a second old; no row
/// when the thread or the session does not qualify (nothing was written).
///
/// Seq is counted per session, not taken from a sequence, so that an append
/// writes nothing shared between sessions (see docs/scaling.md); while a
/// session's appends stay on one thread they write only that thread's row.
static APPEND_FAST: Statement = Statement::read_write(
    concat!(
        "WITH claimed AS (
           UPDATE agent_memory.message_threads t
           SET appended = t.appended + 1, appends = t.appends + 1, last_seq = ",
        next_seq!(),
        "
           FROM agent_memory.sessions s
           WHERE t.session_id = $1 AND t.thread_key = $2 AND t.tenant = agent_memory.caller_tenant()
             AND t.keep = $3
             AND ",
        callers_active_session!("$4"),
        "
           RETURNING (t.appended - 1) % t.keep AS slot, t.last_seq AS seq, t.tenant,
                     s.last_thread_key IS DISTINCT FROM $2 AS moved, s.last_activity_at),
         written AS (
           INSERT INTO agent_memory.thread_messages AS m
             (session_id, thread_key, slot, tenant, seq, node_id, role, content, metadata, created_at)
           SELECT $1, $2, claimed.slot, claimed.tenant, claimed.seq, $5, $6, $7, $8, pg_catalog.now()
           FROM claimed
           ON CONFLICT (session_id, thread_key, slot, tenant) DO UPDATE
           SET seq = excluded.seq, node_id = excluded.node_id, role = excluded.role,
               content = excluded.content, metadata = excluded.metadata,
               idempotency_key = NULL, created_at = excluded.created_at
           WHERE NOT (m.role = 'assistant' AND m.metadata ? 'tool_calls')
           RETURNING m.seq)
         SELECT written.seq, claimed.slot::int4, claimed.seq, claimed.moved,
                claimed.last_activity_at < pg_catalog.now() - interval '1 second'
         FROM claimed LEFT JOIN written ON true"
    ),
    &[TEXT, TEXT, INT4, INT4, TEXT, TEXT, TEXT, JSONB],
);

/// A run of plain messages (no tool call or result, no idempotency key) in
/// one statement: if the thread exists with this keep ($3) and the session
/// is active (default idle minutes $4), take the positions and seqs of as
/// many of the run's $8 messages as go before one would overwrite a tool
/// call (that one goes one by one, taking the call's results with it), and
/// write the last keep of them: messages $7 + 1, $7 + 2, ... of $6 (a jsonb
/// array; the first $7 went before). The earlier ones would be trimmed by
/// the later ones at once, so they are counted (appends) but never
/// written. The run's messages are read from $6 by position: expanding
/// the whole batch for each run would copy all of it once per run. Returns
/// the first seq taken, how many messages were appended, whether they moved
/// to another thread than the session's previous append, and whether the
/// session's recorded activity is over a second old; no row when nothing
/// could go (nothing was written). The ring's
/// scan is materialized: inlined, it would run once for each use of n.
macro_rules! append_batch {
    ($created_at:literal) => {
        concat!(
        "WITH ring AS MATERIALIZED (
           SELECT least($8, coalesce(
                    -- the tool call nearest the ring's position: the
                    -- (k+1)th message of the run would overwrite it
                    (SELECT min((o.slot - t.appended % t.keep + t.keep) % t.keep)
                     FROM agent_memory.thread_messages o
                     WHERE o.session_id = $1 AND o.thread_key = $2 AND o.tenant = t.tenant
                       AND o.role = 'assistant' AND o.metadata ? 'tool_calls'), $8))::int4 AS n
           FROM agent_memory.message_threads t
           WHERE t.session_id = $1 AND t.thread_key = $2 AND t.tenant = agent_memory.caller_tenant()
             AND t.keep = $3),
         claimed AS (
           UPDATE agent_memory.message_threads t
           SET appended = t.appended + r.n, appends = t.appends + r.n, last_seq = ",
        next_seq!(),
        " + r.n - 1
           FROM agent_memory.sessions s, ring r
           WHERE t.session_id = $1 AND t.thread_key = $2 AND t.tenant = agent_memory.caller_tenant()
             AND t.keep = $3 AND r.n > 0
             AND ",
        callers_active_session!("$4"),
        "
           RETURNING t.appended - r.n AS first_position, t.last_seq - r.n + 1 AS first_seq, r.n,
                     t.tenant,
                     s.last_thread_key IS DISTINCT FROM $2 AS moved, s.last_activity_at),
         run AS (
           SELECT $6 -> (u.ord - 1) AS message, u.ord - $7 AS k
           FROM claimed c, pg_catalog.generate_series($7 + greatest(c.n - $3, 0) + 1, $7 + c.n) AS u(ord)),
         written AS (
           INSERT INTO agent_memory.thread_messages AS m
             (session_id, thread_key, slot, tenant, seq, node_id, role, content, metadata, created_at)
           SELECT $1, $2, ((c.first_position + r.k - 1) % $3)::int4, c.tenant, c.first_seq + r.k - 1, $5,
                  r.message ->> 'role', r.message ->> 'content',
                  CASE WHEN pg_catalog.jsonb_typeof(r.message -> 'metadata') = 'object'
                       THEN r.message -> 'metadata' ELSE '{}' END,
                  ",
            $created_at,
            "
           FROM claimed c, run r
           ON CONFLICT (session_id, thread_key, slot, tenant) DO UPDATE
           SET seq = excluded.seq, node_id = excluded.node_id, role = excluded.role,
               content = excluded.content, metadata = excluded.metadata,
               idempotency_key = NULL, created_at = excluded.created_at)
         SELECT first_seq, n, moved, last_activity_at < pg_catalog.now() - interval '1 second'
         FROM claimed"
        )
    };
}

static APPEND_BATCH: Statement = Statement::read_write(
    append_batch!("pg_catalog.now()"),
    &[TEXT, TEXT, INT4, INT4, TEXT, JSONB, INT4, INT4],
);

/// APPEND_BATCH for an import: each message is dated by its
/// `created_at`.
static IMPORT_BATCH: Statement = Statement::read_write(
    append_batch!("(r.message ->> 'created_at')::pg_catalog.timestamptz"),
    &[TEXT, TEXT, INT4, INT4, TEXT, JSONB, INT4, INT4],
);

/// Renew a session whose recorded activity is over a second old.
static RENEW_SESSION: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions SET last_activity_at = greatest(last_activity_at, pg_catalog.now()) WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()",
    &[TEXT],
);

/// Record that the session's newest append, seq $3, went to thread $2, and
/// renew the session.
static MOVE_TO_THREAD: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions
     SET last_thread_key = $2, last_message_seq = $3, last_activity_at = greatest(last_activity_at, pg_catalog.now())
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT, INT8],
);

/// Under REPEATABLE READ or SERIALIZABLE the statements read the
/// transaction's snapshot, which may predate an append to another thread of
/// the session that committed while this one waited for the session's lock,
/// and so miss its seq. Locking the session's row and threads then fails
/// with a serialization failure, as a concurrent update of one row does (an
/// append that made a thread also wrote the session's row).
static LOCK_THREADS: Statement = Statement::read_write(
    "SELECT (SELECT count(*) FROM (SELECT FROM agent_memory.sessions
                                  WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                                  FOR SHARE) AS session),
            (SELECT count(*) FROM (SELECT FROM agent_memory.message_threads
                                  WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
                                  FOR SHARE) AS threads)",
    &[TEXT],
);

/// Before slot $3 is written: the tool calls of the message it holds, when
/// it is an assistant's; and whether another slot holds the assistant
/// message that makes call $4 (true when $4 is NULL: the new message is no
/// tool result).
static SLOT_CALLS: Statement = Statement::read_write(
    "SELECT (SELECT CASE WHEN o.role = 'assistant' THEN o.metadata -> 'tool_calls' END
             FROM agent_memory.thread_messages o
             WHERE o.session_id = $1 AND o.thread_key = $2 AND o.slot = $3
               AND o.tenant = agent_memory.caller_tenant()),
            $4::text IS NULL OR EXISTS (
              SELECT FROM agent_memory.thread_messages c
              WHERE c.session_id = $1 AND c.thread_key = $2 AND c.slot <> $3
                AND c.tenant = agent_memory.caller_tenant() AND c.role = 'assistant'
                AND (c.metadata -> 'tool_calls' @> pg_catalog.jsonb_build_array($4::text)
                     OR c.metadata -> 'tool_calls'
                        @> pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('id', $4::text))))",
    &[TEXT, TEXT, INT4, TEXT],
);

/// Write slot $3 whatever it holds; the thread's position was already taken.
static OVERWRITE: Statement = Statement::read_write(
    "INSERT INTO agent_memory.thread_messages AS m
       (session_id, thread_key, slot, tenant, seq, node_id, role, content, metadata, idempotency_key, created_at)
     VALUES ($1, $2, $3, agent_memory.caller_tenant(), $9, $4, $5, $6, $7, $8, pg_catalog.now())
     ON CONFLICT (session_id, thread_key, slot, tenant) DO UPDATE
     SET seq = excluded.seq, node_id = excluded.node_id, role = excluded.role,
         content = excluded.content, metadata = excluded.metadata,
         idempotency_key = excluded.idempotency_key, created_at = excluded.created_at
     RETURNING m.seq",
    &[TEXT, TEXT, INT4, TEXT, TEXT, TEXT, JSONB, TEXT, INT8],
);

/// Take the session's next seq and move the thread's position by $3 (1,
/// or 0 for a message that is not stored) (the general path); returns the
/// seq and whether the append moved to another thread than the session's
/// previous one.
static CLAIM_POSITION: Statement = Statement::read_write(
    concat!(
        "UPDATE agent_memory.message_threads t
         SET appended = t.appended + $3, appends = t.appends + 1, last_seq = ",
        next_seq!(),
        "
         FROM agent_memory.sessions s
         WHERE t.session_id = $1 AND t.thread_key = $2 AND t.tenant = agent_memory.caller_tenant()
           AND s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()
         RETURNING t.last_seq, s.last_thread_key IS DISTINCT FROM $2"
    ),
    &[TEXT, TEXT, INT8],
);

/// What the general path needs, read at once under the lock: does the
/// session exist, is it active, is its recorded activity over a second old;
/// the thread's keep and position; and the seq of a message with the same
/// idempotency key ($3). Read-write although it only reads: a read-only
/// statement would reuse the calling statement's snapshot, taken before
/// the session's write lock, and miss appends committed while it waited.
static APPEND_STATE: Statement = Statement::read_write(
    concat!(
        "SELECT s.session_id IS NOT NULL,
                coalesce(",
        active!("s", "$4"),
        ", false),
                coalesce(s.last_activity_at < pg_catalog.now() - interval '1 second', false),
                t.keep, t.appended,
                (SELECT d.seq FROM agent_memory.thread_messages d
                 WHERE d.session_id = $1 AND d.idempotency_key = $3
                   AND d.tenant = agent_memory.caller_tenant())
         FROM (SELECT) AS one
         LEFT JOIN agent_memory.sessions s
           ON s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()
         LEFT JOIN agent_memory.message_threads t
           ON t.session_id = $1 AND t.thread_key = $2 AND t.tenant = agent_memory.caller_tenant()"
    ),
    &[TEXT, TEXT, TEXT, INT4],
);

/// The results ($4 call ids) of a tool call being overwritten in slot $3:
/// they go with it. A result answers the newest call of its id before it,
/// so one that follows a later call reusing the id (another message of
/// the thread, newer than the oldest being overwritten) stays. The later
/// calls of each id are found in one pass over the thread's calls, and
/// each result compared with its id's first: no scan per result.
static DROP_RESULTS: Statement = Statement::read_write(
    "WITH later AS MATERIALIZED (
       SELECT i.id, pg_catalog.min(c.seq) AS seq
       FROM agent_memory.thread_messages c,
            pg_catalog.jsonb_array_elements(
              CASE WHEN pg_catalog.jsonb_typeof(c.metadata -> 'tool_calls') = 'array'
                   THEN c.metadata -> 'tool_calls' END) AS e (item),
            LATERAL (SELECT CASE pg_catalog.jsonb_typeof(e.item)
                              WHEN 'string' THEN e.item #>> '{}'
                              WHEN 'object' THEN CASE WHEN pg_catalog.jsonb_typeof(e.item -> 'id') = 'string'
                                                      THEN e.item ->> 'id' END END AS id) AS i
       WHERE c.session_id = $1 AND c.thread_key = $2 AND c.tenant = agent_memory.caller_tenant()
         AND c.slot <> $3 AND c.role = 'assistant' AND i.id = ANY ($4)
       GROUP BY i.id),
     gone AS (
       DELETE FROM agent_memory.thread_messages r
       WHERE r.session_id = $1 AND r.thread_key = $2 AND r.tenant = agent_memory.caller_tenant()
         AND r.slot <> $3 AND r.role = 'tool'
         AND r.metadata ->> 'tool_call_id' = ANY ($4)
         AND NOT EXISTS (SELECT FROM later l
                         WHERE l.id = r.metadata ->> 'tool_call_id' AND l.seq < r.seq)
       RETURNING 1)
     SELECT count(*)::int4 FROM gone",
    &[TEXT, TEXT, INT4, TEXT_ARRAY],
);

/// A thread's messages, as a repack sees them.
static THREAD_MESSAGES: Statement = Statement::read_only(
    "SELECT slot, seq,
            CASE WHEN role = 'assistant' THEN metadata -> 'tool_calls' END,
            CASE WHEN role = 'tool' AND pg_catalog.jsonb_typeof(metadata -> 'tool_call_id') = 'string'
                 THEN metadata ->> 'tool_call_id' END
     FROM agent_memory.thread_messages
     WHERE session_id = $1 AND thread_key = $2 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT],
);

/// Remove slots $3 of a thread: a probe per slot (a fenced list joined on
/// every primary-key column, whatever the statistics say of the thread).
static REMOVE_SLOTS: Statement = Statement::read_write(
    "DELETE FROM agent_memory.thread_messages m
     USING (SELECT $1::text AS session_id, $2::text AS thread_key, slot,
                   agent_memory.caller_tenant() AS tenant
            FROM pg_catalog.unnest($3::int4[]) AS slot OFFSET 0) k
     WHERE m.session_id = k.session_id AND m.thread_key = k.thread_key
       AND m.slot = k.slot AND m.tenant = k.tenant",
    &[TEXT, TEXT, INT4_ARRAY],
);

/// REMOVE_SLOTS on Citus, filtered by the keys themselves: inside a
/// function delegated with force_delegation, Citus refuses a statement
/// whose key comes from a join.
static REMOVE_SLOTS_ON_CITUS: Statement = Statement::read_write(
    "DELETE FROM agent_memory.thread_messages m
     WHERE m.session_id = $1 AND m.thread_key = $2 AND m.slot = ANY ($3)
       AND m.tenant = agent_memory.caller_tenant()",
    REMOVE_SLOTS.args,
);

// A repack moves messages to new slots in two steps, through slots past any
// keep (MAX_KEEP is far below the offset), so that no two rows ever hold
// the same slot at once. The moves are probed one by one, as REMOVE_SLOTS.
static MOVE_SLOTS_OUT: Statement = Statement::read_write(
    "UPDATE agent_memory.thread_messages m SET slot = mv.new_slot + 1000000000
     FROM (SELECT $1::text AS session_id, $2::text AS thread_key, old_slot, new_slot,
                  agent_memory.caller_tenant() AS tenant
           FROM ROWS FROM (pg_catalog.unnest($3::int4[]), pg_catalog.unnest($4::int4[]))
                  AS moves(old_slot, new_slot)
           OFFSET 0) mv
     WHERE m.session_id = mv.session_id AND m.thread_key = mv.thread_key
       AND m.slot = mv.old_slot AND m.tenant = mv.tenant",
    &[TEXT, TEXT, INT4_ARRAY, INT4_ARRAY],
);

/// MOVE_SLOTS_OUT on Citus (see REMOVE_SLOTS_ON_CITUS): slot $3[i] moves
/// to $4[i].
static MOVE_SLOTS_OUT_ON_CITUS: Statement = Statement::read_write(
    "UPDATE agent_memory.thread_messages m
     SET slot = ($4::int4[])[pg_catalog.array_position($3::int4[], m.slot)] + 1000000000
     WHERE m.session_id = $1 AND m.thread_key = $2 AND m.slot = ANY ($3)
       AND m.tenant = agent_memory.caller_tenant()",
    MOVE_SLOTS_OUT.args,
);

static MOVE_SLOTS_IN: Statement = Statement::read_write(
    "UPDATE agent_memory.thread_messages SET slot = slot - 1000000000
     WHERE session_id = $1 AND thread_key = $2 AND tenant = agent_memory.caller_tenant()
       AND slot >= 1000000000",
    &[TEXT, TEXT],
);

/// Set a thread's ring: keep $3, $4 messages in slots 0 .. $4 - 1.
static SET_THREAD: Statement = Statement::read_write(
    "INSERT INTO agent_memory.message_threads (session_id, thread_key, tenant, keep, appended)
     VALUES ($1, $2, agent_memory.caller_tenant(), $3, $4)
     ON CONFLICT (session_id, thread_key, tenant) DO UPDATE SET keep = excluded.keep, appended = excluded.appended",
    &[TEXT, TEXT, INT4, INT8],
);

// Reads: the newest $3 messages of a thread ($2), or of the whole session
// when $2 is NULL, of an active session (default idle minutes $4).
macro_rules! newest_messages {
    () => {
        concat!(
            "SELECT m.seq, m.node_id, m.role, m.content, m.metadata, m.created_at, m.thread_key
             FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id, tenant)
             WHERE m.session_id = $1 AND m.tenant = agent_memory.caller_tenant()
               AND ($2::text IS NULL OR m.thread_key = $2) AND ",
            active!("s", "$4::int4"),
            " ORDER BY m.seq DESC LIMIT $3::int4"
        )
    };
}

/// The predicate "message `$row` is not a tool result, or window
/// `$window` (rows with role, metadata and the non-NULL thread key
/// `$thread`, in the order of `$order`) holds an assistant message of its
/// thread before it that makes its call": a tool result is a `tool`
/// message whose `metadata.tool_call_id` is a string, and a call's id is a
/// string item of `metadata.tool_calls` or the string `id` of an object
/// item. Reads drop the results whose call is outside their window, so
/// that no window starts with a result an LLM API would refuse; a call
/// after the result (a later turn reusing the id), or in another thread
/// (which may reuse it too), does not count. The window's results without
/// such a call are one uncorrelated subquery, which PostgreSQL hashes.
macro_rules! holds_its_call {
    ($row:literal, $window:literal, $order:literal, $thread:literal) => {
        concat!(
            "(", $row, ".role <> 'tool'
              OR pg_catalog.jsonb_typeof(", $row, ".metadata -> 'tool_call_id') IS DISTINCT FROM 'string'
              OR ", $row, ".", $order, " NOT IN (
                   SELECT r.", $order, " FROM ", $window, " r
                   LEFT JOIN (
                     SELECT w.", $thread, " AS thread,
                            CASE pg_catalog.jsonb_typeof(c.item)
                              WHEN 'string' THEN c.item #>> '{}'
                              WHEN 'object' THEN CASE WHEN pg_catalog.jsonb_typeof(c.item -> 'id') = 'string'
                                                      THEN c.item ->> 'id' END END AS id,
                            pg_catalog.min(w.", $order, ") AS first
                     FROM ", $window, " w,
                          pg_catalog.jsonb_array_elements(
                            CASE WHEN w.role = 'assistant'
                                  AND pg_catalog.jsonb_typeof(w.metadata -> 'tool_calls') = 'array'
                                 THEN w.metadata -> 'tool_calls' END) AS c (item)
                     GROUP BY 1, 2) f
                     ON f.thread = r.", $thread, " AND f.id = r.metadata ->> 'tool_call_id'
                   WHERE r.role = 'tool' AND pg_catalog.jsonb_typeof(r.metadata -> 'tool_call_id') = 'string'
                     AND (f.first IS NULL OR f.first > r.", $order, ")))"
        )
    };
}
pub(crate) use holds_its_call;

/// The newest $3 messages of thread $2 (of the session when NULL) of active
/// session $1 (idle timeout $4 minutes), oldest first, read row by row:
/// `messages` and `messages_json` hold one row at a time, however many.
static READ_MESSAGES: StreamStatement = StreamStatement {
    sql: concat!(
        "WITH newest AS MATERIALIZED (",
        newest_messages!(),
        ")
         SELECT n.seq, n.node_id, n.role::text, n.content, n.metadata::jsonb, n.created_at
         FROM newest n WHERE ",
        holds_its_call!("n", "newest", "seq", "thread_key"),
        " ORDER BY seq"
    ),
    params: 4,
    columns: &[
        pg_sys::INT8OID,
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::JSONBOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static LAST_USER: Statement = Statement::read_only(
    concat!(
        "SELECT m.content
         FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id, tenant)
         WHERE m.session_id = $1 AND m.tenant = agent_memory.caller_tenant()
           AND ($2::text IS NULL OR m.thread_key = $2) AND m.role = 'user' AND ",
        active!("s", "$3"),
        " ORDER BY m.seq DESC LIMIT 1"
    ),
    &[TEXT, TEXT, INT4],
);

/// Remove the newest message (of thread $2, or of the session) and give its
/// slot back to its thread: the newest is always the thread's last append.
/// Every part names the session: with none to remove, Citus's forced
/// delegation could not otherwise see that the statement stays on it.
static POP: Statement = Statement::read_write(
    concat!(
        "WITH newest AS (
           SELECT m.session_id, m.thread_key, m.slot, m.tenant
           FROM agent_memory.thread_messages m JOIN agent_memory.sessions s USING (session_id, tenant)
           WHERE m.session_id = $1 AND m.tenant = agent_memory.caller_tenant()
             AND ($2::text IS NULL OR m.thread_key = $2) AND ",
        active!("s", "$3"),
        " ORDER BY m.seq DESC LIMIT 1),
         gone AS (
           DELETE FROM agent_memory.thread_messages m USING newest n
           WHERE m.session_id = $1 AND m.session_id = n.session_id AND m.thread_key = n.thread_key
             AND m.slot = n.slot AND m.tenant = n.tenant
           RETURNING m.*),
         thread AS (
           UPDATE agent_memory.message_threads t SET appended = t.appended - 1, appends = t.appends - 1
           FROM newest n
           WHERE t.session_id = $1 AND t.session_id = n.session_id AND t.thread_key = n.thread_key
             AND t.tenant = n.tenant)
         SELECT pg_catalog.jsonb_build_object('seq', seq, 'node_id', node_id, 'role', role,
                  'content', content, 'metadata', metadata, 'created_at', created_at)
         FROM gone"
    ),
    &[TEXT, TEXT, INT4],
);

/// Drop the threads (all, or $2) of an active session; their messages go
/// with them. Returns how many messages there were.
static CLEAR: Statement = Statement::read_write(
    concat!(
        "WITH live AS (
           SELECT s.session_id, s.tenant FROM agent_memory.sessions s
           WHERE ",
        callers_active_session!("$3"),
        "),
         threads AS (
           DELETE FROM agent_memory.message_threads t USING live
           WHERE t.session_id = live.session_id AND t.tenant = live.tenant
             AND ($2::text IS NULL OR t.thread_key = $2)
           RETURNING t.session_id, t.thread_key, t.tenant, t.last_seq),
         -- The session's numbers go on after those of the cleared messages.
         -- A cleared thread is no longer the session's last: the next
         -- append, to whichever thread, moves to it and so writes this row,
         -- which a REPEATABLE READ append that began before it must see.
         counted AS (
           UPDATE agent_memory.sessions s
           SET last_message_seq = greatest(s.last_message_seq,
                                                      (SELECT pg_catalog.max(d.last_seq) FROM threads d)),
               last_thread_key = CASE WHEN s.last_thread_key IN (SELECT d.thread_key FROM threads d)
                                      THEN NULL ELSE s.last_thread_key END
           WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant() AND EXISTS (SELECT FROM threads))
         SELECT count(*)::int4
         FROM agent_memory.thread_messages m JOIN threads USING (session_id, thread_key, tenant)
         WHERE m.session_id = $1"
    ),
    &[TEXT, TEXT, INT4],
);

/// Import message `seq` of a session as an export line holds it: appended
/// to its thread with the seq it had, then dated as it was. The session
/// must exist; its messages come in seq order, each after every message the
/// session holds. A message already at that seq is unchanged when it is
/// the same, else a conflict.
#[allow(clippy::too_many_arguments)]
pub(crate) fn import_message(
    session_id: &str, node_id: Option<&str>, seq: i64, keep: i32, role: &str, content: &str,
    metadata: serde_json::Value, created_at: &str,
) -> SqlResult<agent_memory_core::portability::Outcome> {
    use agent_memory_core::portability::Outcome;
    let session_id = checked_id("session_id", Some(session_id))?;
    messages::check_role(role).or_report()?;
    let node_id = checked_node(node_id)?;
    let max_bytes = settings::MAX_MESSAGE_BYTES.get().max(0) as usize;
    messages::check_message(content, &metadata, max_bytes).or_report()?;
    let keep = messages::resolve_keep(Some(keep), settings::MAX_MESSAGES.get()).or_report()?;
    let key = thread_key(node_id);
    lock_session(session_id)?;
    Spi::connect_mut(|client| {
        let Some(state) = import_state(client, session_id, key, seq, &metadata)? else {
            return Err(Error::not_found(format!(
                "session {} does not exist: import its session line first",
                agent_memory_core::error::quoted(session_id)
            )))
            .or_report();
        };
        if !state.active {
            return Err(session_gone(session_id)).or_report();
        }
        let newest = state.newest;
        if let Some(held) = state.held {
            if held.role == role
                && held.content.as_deref() == Some(content)
                && held.node_id.as_deref() == node_id
                && held.same_metadata
            {
                return Ok(Outcome::Unchanged);
            }
            return Err(Error::conflict(format!(
                "message {seq} of session {} exists with other content",
                agent_memory_core::error::quoted(session_id)
            )))
            .or_report();
        }
        if seq <= newest {
            return Err(Error::invalid(format!(
                "message {seq} is not after the session's newest message ({newest}): a session's messages import in seq order"
            )))
            .or_report();
        }
        IMPORT_NEXT_SEQ.run(client, &[session_id.into(), seq.into()])?;
        let message = NewMessage::new(node_id, role, content, metadata);
        let appended = append_locked(client, session_id, key, keep, &message)?;
        if appended != seq {
            return Err(Error::conflict(format!(
                "message {seq}'s idempotency key is already message {appended}'s"
            )))
            .or_report();
        }
        let dated = IMPORT_DATE.run(client, &[session_id.into(), seq.into(), created_at.into()])?;
        if dated.is_empty() {
            // Trimmed at once, as an append trims it: a tool result whose
            // call the thread does not hold.
            return Err(Error::invalid(format!(
                "message {seq} is a tool result whose call its thread does not hold"
            )))
            .or_report();
        }
        Ok(Outcome::Imported)
    })
}

/// Import where a session's numbering of messages stands (an export's
/// `message_seq` line): its next append takes `last_seq + 1`, unless it
/// already numbers past that (unchanged).
pub(crate) fn import_message_seq(
    session_id: &str, last_seq: i64,
) -> SqlResult<agent_memory_core::portability::Outcome> {
    use agent_memory_core::portability::Outcome;
    let session_id = checked_id("session_id", Some(session_id))?;
    lock_session(session_id)?;
    let state = Spi::connect_mut(|client| {
        // As import_state: a snapshot that sees every append before.
        lock_threads_for_snapshot(client, session_id)?;
        let table = IMPORT_SEQ
            .run(client, &[session_id.into(), last_seq.into(), idle_timeout_minutes().into()])?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        Ok(Some((row.required::<bool>(1, "active")?, row.required::<bool>(2, "raised")?)))
    })?;
    match state {
        None => Err(Error::not_found(format!(
            "session {} does not exist: import its session line first",
            agent_memory_core::error::quoted(session_id)
        )))
        .or_report(),
        Some((false, _)) => Err(session_gone(session_id)).or_report(),
        Some((true, true)) => Ok(Outcome::Imported),
        Some((true, false)) => Ok(Outcome::Unchanged),
    }
}

/// Import a run of message lines of one thread, seqs one apart (see
/// `agent_memory_core::portability::runs`), into a session that holds
/// none of them yet: in one statement that appends them as
/// append_messages does, dated as their lines say, after making the
/// thread's ring as an append does. Returns false when the run cannot go
/// this way (a message that is not plain, a check that fails, a message
/// there already, or the append stopped short at a tool call); it may
/// have written part of the run, so the caller rolls back and imports
/// line by line, which says what each line meets.
pub(crate) fn import_message_run(
    run: &[&agent_memory_core::portability::Message],
) -> SqlResult<bool> {
    let Some(first) = run.first() else {
        return Ok(false);
    };
    if on_citus()? {
        return Ok(false);
    }
    let max_bytes = settings::MAX_MESSAGE_BYTES.get().max(0) as usize;
    let (Ok(keep), Ok(node_id), Ok(count)) = (
        messages::resolve_keep(Some(first.keep), settings::MAX_MESSAGES.get()),
        checked_node(first.node_id.as_deref()),
        i32::try_from(run.len()),
    ) else {
        return Ok(false);
    };
    let Ok(session_id) = checked_id("session_id", Some(&first.session_id)) else {
        return Ok(false);
    };
    let mut batch = Vec::with_capacity(run.len());
    for m in run {
        let Ok(idempotency_key) = messages::check_message(&m.content, &m.metadata, max_bytes)
        else {
            return Ok(false);
        };
        let message = messages::BatchMessage {
            role: &m.role,
            content: &m.content,
            metadata: Some(&m.metadata),
            idempotency_key,
        };
        if messages::check_role(&m.role).is_err() || !message.is_plain() {
            return Ok(false);
        }
        batch.push(json!({"role": m.role, "content": m.content, "metadata": m.metadata,
                          "created_at": m.created_at}));
    }
    let lines = serde_json::Value::Array(batch);
    let key = thread_key(node_id);
    lock_session(session_id)?;
    Spi::connect_mut(|client| {
        let Some(state) = import_state(client, session_id, key, first.seq, &first.metadata)? else {
            return Ok(false);
        };
        if !state.active || state.held.is_some() || state.newest >= first.seq {
            return Ok(false);
        }
        IMPORT_NEXT_SEQ.run(client, &[session_id.into(), first.seq.into()])?;
        let batch = Batch { session_id, key, keep, node_id, done: 0, run: count };
        // The thread's ring first, as an append makes it: a new one, or
        // one repacked to this keep.
        match state.thread_keep {
            None => {
                SET_THREAD
                    .run(client, &[session_id.into(), key.into(), keep.into(), 0i64.into()])?;
            }
            Some(thread_keep) if thread_keep != keep => {
                repack(client, session_id, key, keep, Room::For(None))?;
            }
            Some(_) => {}
        }
        let Some(Appended { first: seq, count: went, moved, stale }) =
            batch.append(client, &IMPORT_BATCH, JsonB(lines).into())?
        else {
            return Ok(false);
        };
        if seq != first.seq || went != count {
            return Ok(false);
        }
        record_append_on_session(client, session_id, key, seq, moved, stale)?;
        Ok(true)
    })
}

/// The message a session already holds at an imported line's `seq`.
struct HeldMessage {
    role: String,
    content: Option<String>,
    node_id: Option<String>,
    /// Whether its metadata is the line's.
    same_metadata: bool,
}

/// A session as an imported message `seq` finds it, under the session's
/// write lock.
struct ImportState {
    active: bool,
    /// The newest seq the session has given (held or not).
    newest: i64,
    /// The message it holds at `seq`.
    held: Option<HeldMessage>,
    /// The keep of the message's thread, when the session has it.
    thread_keep: Option<i32>,
}

/// None: no session.
fn import_state(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, key: &str, seq: i64,
    metadata: &serde_json::Value,
) -> SqlResult<Option<ImportState>> {
    lock_threads_for_snapshot(client, session_id)?;
    let state = IMPORT_STATE.run(
        client,
        &[
            session_id.into(),
            seq.into(),
            idle_timeout_minutes().into(),
            key.into(),
            JsonB(metadata.clone()).into(),
        ],
    )?;
    if state.is_empty() {
        return Ok(None);
    }
    let row = state.first();
    let held = match row.value::<String>(3)? {
        Some(role) => Some(HeldMessage {
            role,
            content: row.value::<String>(4)?,
            node_id: row.value::<String>(5)?,
            same_metadata: row.required::<bool>(7, "same metadata")?,
        }),
        None => None,
    };
    Ok(Some(ImportState {
        active: row.required::<bool>(1, "active")?,
        newest: row.required::<i64>(2, "newest seq")?,
        held,
        thread_keep: row.value::<i32>(6)?,
    }))
}

/// Before a message $2 is imported: whether the session is active (idle
/// minutes $3), the newest seq it has given, the role, content and node of a
/// message it holds at $2, the keep of its thread $4, and whether that
/// message's metadata is $5. No row: no session.
static IMPORT_STATE: Statement = Statement::read_write(
    concat!(
        "SELECT coalesce(",
        active!("s", "$3"),
        ", false),
                greatest(s.last_message_seq,
                         (SELECT max(t.last_seq) FROM agent_memory.message_threads t
                          WHERE t.session_id = $1 AND t.tenant = s.tenant)),
                m.role::text, m.content, m.node_id,
                (SELECT t.keep FROM agent_memory.message_threads t
                 WHERE t.session_id = $1 AND t.thread_key = $4 AND t.tenant = s.tenant),
                m.metadata = $5
         FROM agent_memory.sessions s
         LEFT JOIN agent_memory.thread_messages m
           ON m.session_id = $1 AND m.tenant = s.tenant AND m.seq = $2
         WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()"
    ),
    &[TEXT, INT8, INT4, TEXT, JSONB],
);

/// Raise session $1's numbering of messages to $2 when it is active (idle
/// minutes $3) and numbers below: its last_message_seq, past which every
/// append numbers (see next_seq!). Returns whether the session is active
/// and whether it was raised; no row: no session.
static IMPORT_SEQ: Statement = Statement::read_write(
    concat!(
        "WITH s AS (
           SELECT s.session_id, s.tenant, coalesce(",
        active!("s", "$3"),
        ", false) AS active,
                  greatest(s.last_message_seq,
                           (SELECT max(t.last_seq) FROM agent_memory.message_threads t
                            WHERE t.session_id = $1 AND t.tenant = s.tenant)) AS newest
           FROM agent_memory.sessions s
           WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()),
         raised AS (
           UPDATE agent_memory.sessions u SET last_message_seq = $2
           FROM s
           WHERE u.session_id = $1 AND u.tenant = s.tenant AND s.active AND $2 > s.newest
           RETURNING 1)
         SELECT s.active, EXISTS (SELECT FROM raised) FROM s"
    ),
    &[TEXT, INT8, INT4],
);

/// Let the session's next append take seq $2: it takes one more than the
/// largest of the session's last_message_seq and its threads' (all below
/// $2, checked by the caller), with no previous thread to move from.
static IMPORT_NEXT_SEQ: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions SET last_message_seq = $2 - 1, last_thread_key = NULL
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, INT8],
);

/// Date imported message $2 as its export did; no row when it was not
/// stored.
static IMPORT_DATE: Statement = Statement::read_write(
    "UPDATE agent_memory.thread_messages SET created_at = $3::timestamptz
     WHERE session_id = $1 AND seq = $2 AND tenant = agent_memory.caller_tenant()
     RETURNING 1",
    &[TEXT, INT8, TEXT],
);
