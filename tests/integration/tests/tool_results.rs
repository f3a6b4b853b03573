//! No stored thread and no read window holds a tool result without its call.
//!
//! A seeded random generator appends user messages, assistant messages with
//! tool calls, tool results (for recent calls, trimmed calls and calls that
//! never were) and pops, one at a time and in batches, to two threads with
//! small keeps, and after every step compares what the extension stores and
//! returns with a model of the rule:
//!
//! - a thread is a ring of `keep` slots: append number p goes to slot
//!   p % keep, and the message it replaces goes; if that one is an
//!   assistant's tool call, the results answering it go too (a result
//!   answers the newest call of its id before it: ids may repeat), and
//!   the thread is then repacked: its messages take slots 0, 1, ... in seq
//!   order and the next append goes after them, so no slot stays empty
//!   while a later append trims a message;
//! - a tool result (role `tool`, string `metadata.tool_call_id`) whose call
//!   no slot holds is not stored and takes no position; one whose call only
//!   the slot it takes holds trims that call and is not stored either, and
//!   the next append takes that slot;
//! - pop removes the newest stored message of the thread and gives one
//!   position back;
//! - a read window is the newest `lim` stored messages, without the tool
//!   results whose call is not in the window before them, in their own
//!   thread (the threads reuse call ids).
//!
//! Set TOOL_RESULTS_SEED to replay a run; the seed is printed.

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;
use serde_json::{Value, json};

const SESSION: &str = "model";
const THREADS: [&str; 2] = ["a", "b"];
const STEPS: usize = 600;

/// xorshift64*: small, seedable and good enough to pick operations.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Message {
    seq: i64,
    role: String,
    content: String,
    metadata: Value,
}

impl Message {
    fn calls(&self) -> Vec<String> {
        if self.role != "assistant" {
            return Vec::new();
        }
        match self.metadata.get("tool_calls") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|item| match item {
                    Value::String(id) => Some(id.clone()),
                    Value::Object(o) => o.get("id").and_then(Value::as_str).map(str::to_string),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }
    fn answers(&self) -> Option<String> {
        if self.role != "tool" {
            return None;
        }
        self.metadata.get("tool_call_id").and_then(Value::as_str).map(str::to_string)
    }
}

/// The rule's model of one thread.
struct Ring {
    keep: usize,
    slots: Vec<Option<Message>>,
    appended: usize,
    /// Repacks after results left with their call.
    repacks: usize,
}

impl Ring {
    fn new(keep: usize) -> Self {
        Ring { keep, slots: vec![None; keep], appended: 0, repacks: 0 }
    }

    /// Append; returns what became of a tool result (None: not one).
    fn append(&mut self, message: Message) -> Option<bool> {
        let slot = self.appended % self.keep;
        // A result whose call no slot holds is not stored and takes no
        // room.
        if let Some(id) = message.answers()
            && !self.slots.iter().flatten().any(|m| m.calls().contains(&id))
        {
            return Some(false);
        }
        let mut emptied = false;
        if let Some(old) = self.slots[slot].take() {
            // A result answers the newest call of its id before it: one
            // that follows a later call reusing the id stays.
            let calls = old.calls();
            let others: Vec<Message> = self.slots.iter().flatten().cloned().collect();
            for other in self.slots.iter_mut() {
                let answered_old = other.as_ref().is_some_and(|result| {
                    result.answers().is_some_and(|id| {
                        calls.contains(&id)
                            && !others.iter().any(|c| c.seq < result.seq && c.calls().contains(&id))
                    })
                });
                if answered_old {
                    *other = None;
                    emptied = true;
                }
            }
        }
        let answers = message.answers();
        let held = match &answers {
            None => true,
            Some(id) => self.slots.iter().flatten().any(|m| m.calls().contains(id)),
        };
        if held {
            self.slots[slot] = Some(message);
            self.appended += 1;
        }
        if emptied {
            self.repack();
        }
        answers.map(|_| held)
    }

    /// The stored messages into slots 0, 1, ... in seq order; the next
    /// append goes after them.
    fn repack(&mut self) {
        let stored = self.stored();
        self.repacks += 1;
        self.appended = stored.len();
        self.slots = vec![None; self.keep];
        for (slot, message) in stored.into_iter().enumerate() {
            self.slots[slot] = Some(message);
        }
    }

    fn pop(&mut self) -> Option<Message> {
        let newest = (0..self.keep)
            .filter(|&s| self.slots[s].is_some())
            .max_by_key(|&s| self.slots[s].as_ref().map(|m| m.seq))?;
        self.appended -= 1;
        self.slots[newest].take()
    }

    fn stored(&self) -> Vec<Message> {
        let mut held: Vec<Message> = self.slots.iter().flatten().cloned().collect();
        held.sort_by_key(|m| m.seq);
        held
    }
}

/// How many tool results the model stored, and trimmed at once.
#[derive(Default)]
struct Tally {
    stored_results: usize,
    trimmed_at_once: usize,
}

impl Tally {
    fn count(&mut self, result_stored: Option<bool>) {
        match result_stored {
            Some(true) => self.stored_results += 1,
            Some(false) => self.trimmed_at_once += 1,
            None => {}
        }
    }
}

/// The newest `lim` of `stored` (thread and message, in seq order),
/// without the results whose call the window does not hold before them in
/// their thread.
fn window(stored: &[(usize, Message)], lim: usize) -> Vec<Message> {
    let newest = &stored[stored.len().saturating_sub(lim)..];
    newest
        .iter()
        .filter(|(thread, m)| {
            m.answers().is_none_or(|id| {
                newest.iter().any(|(call_thread, c)| {
                    call_thread == thread && c.seq < m.seq && c.calls().contains(&id)
                })
            })
        })
        .map(|(_, m)| m.clone())
        .collect()
}

fn read_window(client: &mut Client, thread: Option<&str>, lim: i32) -> Vec<Message> {
    client
        .query(
            "SELECT seq, role, content, metadata::text FROM agent_memory.messages($1, $2, $3)",
            &[&SESSION, &thread, &lim],
        )
        .expect("messages")
        .iter()
        .map(|row| Message {
            seq: row.get(0),
            role: row.get(1),
            content: row.get(2),
            metadata: serde_json::from_str(row.get::<_, &str>(3)).expect("metadata"),
        })
        .collect()
}

fn json_window(client: &mut Client, thread: Option<&str>, lim: i32) -> Vec<Message> {
    let text: String = client
        .query_one(
            "SELECT agent_memory.messages_json($1, $2, $3)::text",
            &[&SESSION, &thread, &lim],
        )
        .expect("messages_json")
        .get(0);
    as_messages(serde_json::from_str(&text).expect("json"))
}

fn snapshot_window(client: &mut Client, thread: Option<&str>) -> Vec<Message> {
    let text: String = client
        .query_one(
            "SELECT (agent_memory.working_memory($1, $2) -> 'messages')::text",
            &[&SESSION, &thread],
        )
        .expect("working_memory")
        .get(0);
    as_messages(serde_json::from_str(&text).expect("json"))
}

fn as_messages(array: Value) -> Vec<Message> {
    array
        .as_array()
        .expect("an array")
        .iter()
        .map(|m| Message {
            seq: m["seq"].as_i64().expect("seq"),
            role: m["role"].as_str().expect("role").to_string(),
            content: m["content"].as_str().expect("content").to_string(),
            metadata: m["metadata"].clone(),
        })
        .collect()
}

/// One random message; `recent` are call ids made so far, newest last.
fn random_message(
    random: &mut Random, recent: &mut Vec<String>, n: usize,
) -> (String, String, Value) {
    match random.below(10) {
        0..=2 => ("user".into(), format!("question {n}"), json!({})),
        3..=5 => {
            let calls: Vec<Value> = (0..1 + random.below(3))
                .map(|i| {
                    // Some models name every turn's calls alike.
                    let id = if random.below(4) == 0 {
                        format!("call_{}", random.below(2))
                    } else {
                        format!("call-{n}-{i}")
                    };
                    recent.push(id.clone());
                    if random.below(2) == 0 {
                        json!(id)
                    } else {
                        json!({"id": id, "type": "function"})
                    }
                })
                .collect();
            ("assistant".into(), format!("calling {n}"), json!({"tool_calls": calls}))
        }
        6..=8 => {
            // Mostly a recent call; sometimes an older one or one never made.
            let id = match random.below(8) {
                0 => format!("never-{n}"),
                1 if !recent.is_empty() => recent[random.below(recent.len())].clone(),
                _ if !recent.is_empty() => {
                    recent[recent.len() - 1 - random.below(recent.len().min(3))].clone()
                }
                _ => format!("never-{n}"),
            };
            ("tool".into(), format!("result {n}"), json!({"tool_call_id": id}))
        }
        // A tool message whose call id is no string answers no call.
        _ => ("tool".into(), format!("odd {n}"), json!({"tool_call_id": n})),
    }
}

fn check(client: &mut Client, rings: &[Ring], random: &mut Random, step: usize) {
    let mut all: Vec<(usize, Message)> = rings
        .iter()
        .enumerate()
        .flat_map(|(t, ring)| ring.stored().into_iter().map(move |m| (t, m)))
        .collect();
    all.sort_by_key(|(_, m)| m.seq);
    for (t, (thread, ring)) in THREADS.iter().zip(rings).enumerate() {
        let stored = ring.stored();
        let everything = read_window(client, Some(thread), 1000);
        assert_eq!(everything, stored, "step {step}: thread {thread} holds what the model holds");
        let stored: Vec<(usize, Message)> = stored.into_iter().map(|m| (t, m)).collect();
        let lim = 1 + random.below(ring.keep + 1);
        assert_eq!(
            read_window(client, Some(thread), lim as i32),
            window(&stored, lim),
            "step {step}: messages(thread {thread}, lim {lim})"
        );
        assert_eq!(
            json_window(client, Some(thread), lim as i32),
            window(&stored, lim),
            "step {step}: messages_json(thread {thread}, lim {lim})"
        );
    }
    let lim = 1 + random.below(8);
    assert_eq!(
        read_window(client, None, lim as i32),
        window(&all, lim),
        "step {step}: messages(session, lim {lim})"
    );
    client
        .execute(
            "SELECT agent_memory.wm_set($1, 'config', jsonb_build_object('history_length', $2::int4))",
            &[&SESSION, &(lim as i32)],
        )
        .expect("wm_set config");
    assert_eq!(
        snapshot_window(client, None),
        window(&all, lim),
        "step {step}: working_memory messages (history_length {lim})"
    );
}

#[test]
fn no_thread_and_no_window_holds_a_result_without_its_call() {
    let seed: u64 =
        std::env::var("TOOL_RESULTS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_2026);
    println!("TOOL_RESULTS_SEED={seed}");
    let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let db = "am_it_tool_results";
    let mut client = fresh_database(db);
    client
        .execute("SELECT agent_memory.create_session('modeller', session_id => $1)", &[&SESSION])
        .unwrap();
    let keeps = [1 + random.below(4), 2 + random.below(4)];
    println!("keeps: {keeps:?}");
    let mut rings: Vec<Ring> = keeps.iter().map(|&k| Ring::new(k)).collect();
    let mut recent = Vec::new();
    let mut next_seq = 1i64;
    let mut tally = Tally::default();

    for step in 0..STEPS {
        let t = random.below(THREADS.len());
        let thread = THREADS[t];
        let keep = rings[t].keep as i32;
        match random.below(10) {
            0 => {
                let popped: Option<String> = client
                    .query_one(
                        "SELECT (agent_memory.pop_message($1, $2) ->> 'seq')",
                        &[&SESSION, &thread],
                    )
                    .expect("pop")
                    .get(0);
                let expected = rings[t].pop().map(|m| m.seq.to_string());
                assert_eq!(popped, expected, "step {step}: pop of thread {thread}");
            }
            1..=3 => {
                let count = 2 + random.below(4);
                let batch: Vec<(String, String, Value)> = (0..count)
                    .map(|i| random_message(&mut random, &mut recent, step * 10 + i))
                    .collect();
                let array: Value = batch
                    .iter()
                    .map(|(role, content, metadata)| json!({"role": role, "content": content, "metadata": metadata}))
                    .collect();
                let seqs: Vec<i64> = client
                    .query_one(
                        "SELECT agent_memory.append_messages($1, $2::text::jsonb, $3, $4)",
                        &[&SESSION, &array.to_string(), &thread, &keep],
                    )
                    .expect("append_messages")
                    .get(0);
                assert_eq!(
                    seqs,
                    (next_seq..next_seq + count as i64).collect::<Vec<_>>(),
                    "step {step}: batch seqs"
                );
                for ((role, content, metadata), seq) in batch.into_iter().zip(seqs) {
                    let message = Message { seq, role, content, metadata };
                    tally.count(rings[t].append(message));
                }
                next_seq += count as i64;
            }
            _ => {
                let (role, content, metadata) = random_message(&mut random, &mut recent, step * 10);
                let seq: i64 = client
                    .query_one(
                        "SELECT agent_memory.append_message($1, $2, $3, $4, $5::text::jsonb, $6)",
                        &[&SESSION, &role, &content, &thread, &metadata.to_string(), &keep],
                    )
                    .expect("append_message")
                    .get(0);
                assert_eq!(seq, next_seq, "step {step}: seq");
                next_seq += 1;
                let message = Message { seq, role, content, metadata };
                tally.count(rings[t].append(message));
            }
        }
        check(&mut client, &rings, &mut random, step);
    }
    let repacks: usize = rings.iter().map(|r| r.repacks).sum();
    println!(
        "{STEPS} steps: {} tool results stored, {} trimmed at once, {repacks} repacks",
        tally.stored_results, tally.trimmed_at_once
    );
    // The run exercised both sides of the rule, and the repack.
    assert!(tally.stored_results > 0 && tally.trimmed_at_once > 0 && repacks > 0);
    drop(client);
    drop_database(db);
}

/// Tuples the transaction has read so far from thread_messages and its
/// indexes.
fn thread_tuples_read(tx: &mut postgres::Transaction<'_>) -> i64 {
    tx.query_one(
        "SELECT sum(pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid))::int8
         FROM pg_class c
         WHERE c.oid = 'agent_memory.thread_messages'::regclass
            OR c.oid IN (SELECT indexrelid FROM pg_index
                         WHERE indrelid = 'agent_memory.thread_messages'::regclass)",
        &[],
    )
    .unwrap()
    .get(0)
}

/// Overwriting a call drops its results in passes over the thread, not in
/// one pass per result. Work is counted, not timed: a pass per result
/// reads the thread once for each of its RESULTS results, millions of
/// tuples here.
#[test]
fn overwriting_a_call_reads_its_thread_a_bounded_number_of_times() {
    const RESULTS: i32 = 2_000;
    let keep = RESULTS + 1;
    let db = "am_it_tool_results_cost";
    let mut client = fresh_database(db);
    client
        .execute(
            "SELECT agent_memory.append_message('cost', 'assistant', '', metadata => '{\"tool_calls\": [\"x\"]}', keep => $1)",
            &[&keep],
        )
        .unwrap();
    client
        .execute(
            "SELECT agent_memory.append_messages('cost',
               (SELECT jsonb_agg(jsonb_build_object('role', 'tool', 'content', 'r' || i,
                                                    'metadata', jsonb_build_object('tool_call_id', 'x')))
                FROM generate_series(1, $1) i), keep => $2)",
            &[&RESULTS, &keep],
        )
        .unwrap();
    let mut tx = client.transaction().unwrap();
    let before = thread_tuples_read(&mut tx);
    tx.execute(
        "SELECT agent_memory.append_message('cost', 'user', 'overwrites the call', keep => $1)",
        &[&keep],
    )
    .unwrap();
    let read = thread_tuples_read(&mut tx) - before;
    let held: i64 = tx
        .query_one("SELECT count(*) FROM agent_memory.messages('cost', NULL, $1)", &[&keep])
        .unwrap()
        .get(0);
    tx.rollback().unwrap();
    println!("overwriting a call of {RESULTS} results read {read} tuples of the thread");
    assert_eq!(held, 1, "the call's results went with it");
    assert!(
        read <= 10 * i64::from(keep),
        "overwriting a call read {read} tuples of a thread of {keep} messages"
    );
    drop(client);
    drop_database(db);
}
