//! Eight connections append 500 messages each to one (session, node) with
//! keep = 50. Afterwards exactly 50 remain, their sequence numbers increase,
//! every caller got a distinct sequence number, and no error reached anyone.

use std::collections::HashSet;
use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database};

const WRITERS: usize = 8;
const APPENDS_PER_WRITER: usize = 500;
const KEEP: i32 = 50;
const SESSION: &str = "crowded";
const NODE: &str = "n1";

#[test]
fn eight_appenders_leave_exactly_keep_messages_in_order() {
    let db = "am_it_messages";
    let mut setup = fresh_database(db);
    setup
        .execute("SELECT agent_memory.create_session('writer', session_id => $1)", &[&SESSION])
        .unwrap();

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || -> Result<Vec<i64>, String> {
                let mut client = connect(db);
                let mut seqs = Vec::with_capacity(APPENDS_PER_WRITER);
                for i in 0..APPENDS_PER_WRITER {
                    let content = format!("writer {w} message {i}");
                    let seq: i64 = client
                        .query_one(
                            "SELECT agent_memory.append_message($1, 'user', $2, node_id => $3, keep => $4)",
                            &[&SESSION, &content, &NODE, &KEEP],
                        )
                        .map_err(|e| format!("writer {w}, append {i}: {e}"))?
                        .get(0);
                    seqs.push(seq);
                }
                Ok(seqs)
            })
        })
        .collect();

    let mut all = Vec::new();
    for writer in writers {
        let seqs = writer
            .join()
            .expect("writer thread panicked")
            .unwrap_or_else(|e| panic!("an error reached a caller: {e}"));
        // Each caller's own appends come back in increasing order.
        assert!(seqs.windows(2).all(|p| p[0] < p[1]), "a writer's seqs went backwards");
        all.extend(seqs);
    }
    let distinct: HashSet<i64> = all.iter().copied().collect();
    assert_eq!(distinct.len(), WRITERS * APPENDS_PER_WRITER, "two appends got the same seq");

    let rows = setup
        .query("SELECT seq FROM agent_memory.messages($1, $2, lim => 1000)", &[&SESSION, &NODE])
        .unwrap();
    let kept: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(kept.len(), KEEP as usize, "keep = {KEEP} must leave exactly {KEEP}");
    assert!(kept.windows(2).all(|p| p[0] < p[1]), "seqs are not strictly increasing");
    // The 50 kept are the 50 newest of all appends.
    let mut newest = all.clone();
    newest.sort_unstable();
    assert_eq!(kept, newest[newest.len() - KEEP as usize..].to_vec());

    let stored: i64 = setup
        .query_one(
            "SELECT count(*) FROM agent_memory.thread_messages WHERE session_id = $1",
            &[&SESSION],
        )
        .unwrap()
        .get(0);
    assert_eq!(stored, i64::from(KEEP), "the table itself holds exactly keep rows");

    drop(setup);
    drop_database(db);
}

/// Eight connections append to three threads of one session at once (each
/// writer moving between them; half of them three messages at a time with
/// append_messages, some of them a tool call and its result), under READ
/// COMMITTED and, retrying on serialization failures, under REPEATABLE
/// READ: the session's numbers are exactly 1..=n, each given once, and each
/// writer's come back increasing.
#[test]
fn appends_to_many_threads_of_one_session_number_it_without_gaps_or_twins() {
    for (db, isolation, level) in [
        ("am_it_messages_threads_rc", "READ COMMITTED", postgres::IsolationLevel::ReadCommitted),
        ("am_it_messages_threads_rr", "REPEATABLE READ", postgres::IsolationLevel::RepeatableRead),
    ] {
        const PER_WRITER: usize = 150;
        const BATCH: usize = 3;
        let mut setup = fresh_database(db);
        setup
            .execute("SELECT agent_memory.create_session('writer', session_id => 'threads')", &[])
            .unwrap();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                thread::spawn(move || -> Result<(Vec<i64>, usize), String> {
                    let mut client = connect(db);
                    let mut seqs = Vec::with_capacity(PER_WRITER);
                    let mut retries = 0;
                    // Odd writers append BATCH messages per call.
                    let batched = w % 2 == 1;
                    let calls = if batched { PER_WRITER / BATCH } else { PER_WRITER };
                    for i in 0..calls {
                        let node = format!("n{}", (w + i) % 3);
                        loop {
                            let mut tx = client
                                .build_transaction()
                                .isolation_level(level)
                                .start()
                                .map_err(|e| e.to_string())?;
                            let appended = if batched {
                                // Every fourth batch is a tool call, its
                                // result and a user message.
                                let batch = if i % 4 == 0 {
                                    let call = format!("call-{w}-{i}");
                                    serde_json::json!([
                                        {"role": "assistant", "content": "", "metadata": {"tool_calls": [call]}},
                                        {"role": "tool", "content": "42", "metadata": {"tool_call_id": call}},
                                        {"role": "user", "content": format!("writer {w} message {i}")},
                                    ])
                                } else {
                                    serde_json::Value::Array(
                                        (0..BATCH)
                                            .map(|j| serde_json::json!({"role": "user", "content": format!("writer {w} message {i}.{j}")}))
                                            .collect(),
                                    )
                                }
                                .to_string();
                                tx.query_one(
                                    "SELECT agent_memory.append_messages('threads', $1::text::jsonb, node_id => $2)",
                                    &[&batch, &node],
                                )
                                .map(|row| row.get::<_, Vec<i64>>(0))
                            } else {
                                tx.query_one(
                                    "SELECT agent_memory.append_message('threads', 'user', $1, node_id => $2)",
                                    &[&format!("writer {w} message {i}"), &node],
                                )
                                .map(|row| vec![row.get::<_, i64>(0)])
                            };
                            match appended.and_then(|got| tx.commit().map(|_| got)) {
                                Ok(got) => {
                                    seqs.extend(got);
                                    break;
                                }
                                Err(e)
                                    if e.code()
                                        == Some(&postgres::error::SqlState::T_R_SERIALIZATION_FAILURE) =>
                                {
                                    retries += 1;
                                }
                                Err(e) => return Err(format!("writer {w}, append {i}: {e}")),
                            }
                        }
                    }
                    Ok((seqs, retries))
                })
            })
            .collect();
        let mut all = Vec::new();
        let mut retries = 0;
        for writer in writers {
            let (seqs, r) = writer
                .join()
                .expect("writer thread panicked")
                .unwrap_or_else(|e| panic!("{isolation}: an error reached a caller: {e}"));
            assert!(
                seqs.windows(2).all(|p| p[0] < p[1]),
                "{isolation}: a writer's seqs went backwards"
            );
            all.extend(seqs);
            retries += r;
        }
        all.sort_unstable();
        let expected: Vec<i64> = (1..=(WRITERS * PER_WRITER) as i64).collect();
        assert!(
            all == expected,
            "{isolation}: the session's numbers are not exactly 1..={} once each",
            WRITERS * PER_WRITER
        );
        println!(
            "{isolation}: {} appends numbered 1..={0}, {retries} serialization retries",
            all.len()
        );
        drop_database(db);
    }
}
