//! No call holds memory in proportion to what is stored. Over a session of
//! 200 MB of messages and a scope of 200 MB of files, each call's peak
//! private memory (RssAnon of its backend, read every millisecond while the
//! call runs, above what it held just before) stays within the bound the
//! README and docs/reference.md give:
//!
//! - `messages(s, NULL, 100000)` streams its rows: at most `SMALL`;
//! - `messages_json(s, NULL, 100000)` stops at `max_result_bytes` (54000),
//!   holding at most three times that plus `SMALL`;
//! - `memory_render(scope, 'full', 400000000)` likewise;
//! - `memory_render(scope, 'full', 4000)` keeps what fits: at most `SMALL`;
//! - `working_memory(s)` over a window of 20 MB of messages (with
//!   `max_result_bytes` at 8 MB), and
//!   `kv_get_all(s)` and `build_context(s)` over 100 MB of entries (of one
//!   long word each, within the word budget), count what they would hold
//!   before building it and refuse (54000): at most `SMALL`;
//! - `build_context(s, keys)` naming one entry of 200 kB 3,000 times
//!   reads it once: at most `SMALL`;
//! - `recall(NULL, s, embedding => …)` compares 2,000 stored embeddings of
//!   16,000 numbers (over 120 MB) with the query's one at a time (the exact
//!   comparison, without pgvector's index): at most `SMALL`;
//! - `kv_versions(s, key)` over 1,000 kept versions of 200 kB,
//!   `memory_versions(scope, path)` over 1,000 of 99 kB, `graph_nodes(owner)`
//!   over 1,000 nodes of 200 kB descriptions and `graph_versions(owner,
//!   node)` over 500 versions of 200 kB change descriptions stream their
//!   rows: at most `SMALL`.
//!
//! It prints `memory: N calls over M MB stored, K within their bounds
//! (peaks ...)`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;

const DB: &str = "am_it_memory_peaks";
const MB: u64 = 1024 * 1024;
/// What a streaming call may hold: a few rows, plans and buffers.
const SMALL: u64 = 48 * MB;
/// agent_memory.max_result_bytes by default.
const MAX_RESULT: u64 = 64 * MB;
const MESSAGES: i64 = 2000;
const FILES: i64 = 2000;
const ENTRIES: i64 = 500;
/// Versions kept of one entry and of one file.
const VERSIONS: i64 = 1000;
/// The largest dimension recall takes; an embedding of random numbers
/// does not compress.
const DIMENSION: i64 = 16_000;

/// The backend's private resident memory, in bytes.
fn rss_anon(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("reading /proc/{pid}/status (the server must run here): {e}"));
    let line =
        status.lines().find(|l| l.starts_with("RssAnon:")).expect("RssAnon in /proc/PID/status");
    let kb: u64 =
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number of kB");
    kb * 1024
}

/// Run `sql` and return its SQLSTATE (None on success) and the peak of the
/// backend's private memory above what it held before.
fn peak_of(client: &mut Client, pid: i32, sql: &str) -> (Option<String>, u64) {
    let before = rss_anon(pid);
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = done.clone();
        thread::spawn(move || {
            let mut peak = rss_anon(pid);
            while !done.load(Ordering::Relaxed) {
                peak = peak.max(rss_anon(pid));
                thread::sleep(Duration::from_millis(1));
            }
            peak.max(rss_anon(pid))
        })
    };
    let outcome = client
        .simple_query(sql)
        .err()
        .map(|e| e.code().map_or_else(|| e.to_string(), |c| c.code().to_owned()));
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().expect("the sampler");
    (outcome, peak.saturating_sub(before))
}

#[test]
fn no_call_holds_memory_in_proportion_to_what_is_stored() {
    let mut admin = fresh_database(DB);
    // Compressible text: hundreds of megabytes when read, little on disk.
    admin
        .batch_execute(&format!(
            "SELECT agent_memory.create_session('peaks', session_id => 'peaks');
             SELECT count(agent_memory.append_message('peaks', 'user',
                      repeat('a message of the peaks test ', 3700), 'n' || (i % 20)))
             FROM generate_series(1, {MESSAGES}) i;
             SELECT count(agent_memory.memory_tool('peaks', jsonb_build_object(
                      'command', 'append', 'path', '/files/' || i,
                      'content', repeat('a file of the peaks test ', 4000))))
             FROM generate_series(1, {FILES}) i;
             SELECT agent_memory.wm_set('peaks', 'config', '{{\"history_length\": 1000}}') IS NOT NULL;
             SELECT count(agent_memory.kv_set('peaks', 'k' || i, to_jsonb(repeat('x', 200000))))
             FROM generate_series(1, {ENTRIES}) i;
             SELECT agent_memory.recall_enable_embeddings({DIMENSION}) IS NOT NULL;
             SELECT count(agent_memory.recall_embed('message', 'peaks', i::text,
                      (SELECT array_agg((random() + j * 0 + i * 0)::float4) FROM generate_series(1, {DIMENSION}) j)))
             FROM generate_series(1, {MESSAGES}) i;
             SET agent_memory.history_retention = {VERSIONS};
             SELECT count(agent_memory.kv_set('peaks', 'history', to_jsonb(repeat('x', 200000) || i)))
             FROM generate_series(1, {VERSIONS}) i;
             DO $$ BEGIN
               FOR i IN 1..{VERSIONS} LOOP
                 PERFORM agent_memory.memory_tool('peaks', jsonb_build_object(
                   'command', 'append', 'path', '/history', 'content', repeat('a version ', 9900) || i));
                 PERFORM agent_memory.memory_tool('peaks', '{{\"command\": \"delete\", \"path\": \"/history\"}}');
               END LOOP;
             END $$;
             SELECT count(agent_memory.graph_create('peaks', 'node ' || i, repeat('d', 200000) || i, '', '{{__root__}}', 'n' || i))
             FROM generate_series(1, {VERSIONS}) i;
             SELECT count(agent_memory.graph_write('peaks', 'n1', 'node 1', 'version ' || i, '',
                      change_description => repeat('c', 200000) || i))
             FROM generate_series(1, {VERSIONS} / 2) i;"
        ))
        .unwrap();
    let embedded: i64 = admin
        .query_one("SELECT pg_total_relation_size('agent_memory.thread_messages')", &[])
        .unwrap()
        .get(0);
    assert!(embedded as u64 > 120 * MB, "the messages take only {embedded} bytes");
    let stored: i64 = admin
        .query_one(
            "SELECT (SELECT sum(octet_length(content)) FROM agent_memory.thread_messages)
                  + (SELECT sum(octet_length(content)) FROM agent_memory.memory_files)",
            &[],
        )
        .unwrap()
        .get::<_, Option<i64>>(0)
        .unwrap_or_default();
    assert!(stored as u64 > 300 * MB, "only {stored} bytes stored");
    let kept: i64 = admin
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.kv_entry_versions WHERE key = 'history')
                  + (SELECT count(*) FROM agent_memory.memory_file_versions WHERE path = '/history')
                  + (SELECT count(*) FROM agent_memory.graph_node_versions WHERE node_id = 'n1')
                  + (SELECT count(*) FROM agent_memory.graph_nodes WHERE owner = 'peaks')",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        kept >= 2 * (VERSIONS - 1) + VERSIONS / 2 + VERSIONS,
        "only {kept} versions and nodes kept"
    );
    drop(admin);

    let calls: [(&str, Option<&str>, u64); 13] = [
        (
            "SELECT count(*), sum(octet_length(content)) FROM agent_memory.messages('peaks', NULL, 100000)",
            None,
            SMALL,
        ),
        (
            "SELECT agent_memory.messages_json('peaks', NULL, 100000) IS NOT NULL",
            Some("54000"),
            3 * MAX_RESULT + SMALL,
        ),
        (
            "SELECT length(agent_memory.memory_render('peaks', 'full', 400000000))",
            Some("54000"),
            3 * MAX_RESULT + SMALL,
        ),
        (
            "SELECT length(agent_memory.memory_render('peaks', 'full', 4000))",
            None,
            SMALL,
        ),
        (
            "SET agent_memory.max_result_bytes = '8MB';
             SELECT agent_memory.working_memory('peaks') IS NOT NULL",
            Some("54000"),
            SMALL,
        ),
        (
            "SELECT agent_memory.kv_get_all('peaks') IS NOT NULL",
            Some("54000"),
            SMALL,
        ),
        (
            "SELECT agent_memory.build_context('peaks') IS NOT NULL",
            Some("54000"),
            SMALL,
        ),
        (
            "SELECT agent_memory.build_context('peaks', array_fill('k1'::text, ARRAY[3000])) IS NOT NULL",
            None,
            SMALL,
        ),
        (
            "SELECT count(*) FROM agent_memory.recall(NULL, session_id => 'peaks', kinds => '{message}',
                embedding => (SELECT array_agg(random()::float4) FROM generate_series(1, 16000)))",
            None,
            SMALL,
        ),
        (
            "SELECT count(*), sum(octet_length(value::text)) FROM agent_memory.kv_versions('peaks', 'history')",
            None,
            SMALL,
        ),
        (
            "SELECT count(*), sum(octet_length(content)) FROM agent_memory.memory_versions('peaks', '/history')",
            None,
            SMALL,
        ),
        (
            "SELECT count(*), sum(octet_length(description)) FROM agent_memory.graph_nodes('peaks')",
            None,
            SMALL,
        ),
        (
            "SELECT count(*), sum(octet_length(change_description)) FROM agent_memory.graph_versions('peaks', 'n1')",
            None,
            SMALL,
        ),
    ];
    let mut report = Vec::new();
    let mut within = 0;
    for (sql, expected, bound) in calls {
        // A backend of its own, warmed up (library loaded, plans made).
        let mut client = agent_memory_integration::connect(DB);
        let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        client
            .batch_execute(
                "SELECT count(*) FROM agent_memory.messages('peaks', NULL, 1);
                 SELECT agent_memory.messages_json('peaks', NULL, 1);
                 SELECT agent_memory.memory_render('peaks', 'full', 10);",
            )
            .unwrap();
        let (outcome, peak) = peak_of(&mut client, pid, sql);
        assert_eq!(outcome.as_deref(), expected, "{sql}");
        report.push(format!("{} MB of {} MB", peak / MB, bound / MB));
        if peak <= bound {
            within += 1;
        } else {
            eprintln!("over its bound: {sql}: {} MB", peak / MB);
        }
    }
    drop_database(DB);
    println!(
        "memory: {} calls over {} MB stored, {within} within their bounds (peaks {})",
        calls.len(),
        stored as u64 / MB,
        report.join(", ")
    );
    assert_eq!(within, calls.len());
}
