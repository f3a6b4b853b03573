//! Calls reach the rows they need through every key column, whatever the
//! statistics say. A few huge owners (scopes, sessions) and many tiny ones
//! are analysed; then a new one grows, first inside one transaction, then
//! across many, with no ANALYZE after (autovacuum is off for the tables).
//! The statistics take the new key for a sliver of a row, which once made
//! the planner read every row of the key and filter out all but a few.
//!
//! Work is counted, not timed: the tuples the calling transaction read
//! from the table and its indexes (`pg_stat_get_xact_tuples_returned` and
//! `_fetched`), before and after one call. A call probes a handful of rows;
//! reading the grown key would count thousands, so a plan that degrades
//! fails the test on any machine.

use agent_memory_integration::{drop_database, fresh_database};
use postgres::{Client, Transaction};

/// The huge keys the statistics know (each of `BIG_ROWS` rows) and the tiny
/// ones (a row each).
const BIG_KEYS: i32 = 3;
const BIG_ROWS: i32 = 20_000;
const TINY_KEYS: i32 = 1_000;
/// Rows of the new key grown inside one transaction, then across
/// transactions (one row each).
const GROWN_IN_ONE: i32 = 3_000;
const GROWN_ACROSS: i32 = 300;
/// The most tuples one call may read from a table and its indexes: a few
/// probes of a few tuples each. Reading the grown key counts over 3,000.
const MOST_READ: i64 = 100;

/// Tuples the transaction has read so far from `table` and its indexes.
fn tuples_read(tx: &mut Transaction<'_>, table: &str) -> i64 {
    tx.query_one(
        "SELECT sum(pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid))::int8
         FROM pg_class c
         WHERE c.oid = $1::text::regclass
            OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::text::regclass)",
        &[&table],
    )
    .unwrap()
    .get(0)
}

/// Sequential scans this transaction has begun on the extension's tables.
fn sequential_scans(tx: &mut Transaction<'_>) -> Vec<(String, i64)> {
    tx.query(
        "SELECT relname::text, seq_scan FROM pg_stat_xact_user_tables
         WHERE schemaname = 'agent_memory' ORDER BY relname",
        &[],
    )
    .unwrap()
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

/// What one call did: the tuples it read from a table and its indexes,
/// and the extension's tables it began a sequential scan of.
struct Measured {
    read: i64,
    scanned: Vec<String>,
}

/// Run `call` (a query of one boolean: whether the call did its work) in
/// a transaction of its own, rolled back after, and measure it against
/// `table`. A call that did not do its work fails the test (reading
/// nothing proves nothing).
fn measure(client: &mut Client, table: &str, call: &str) -> Measured {
    let mut tx = client.transaction().unwrap();
    let scans_before = sequential_scans(&mut tx);
    let before = tuples_read(&mut tx, table);
    let done: bool = tx.query_one(call, &[]).unwrap_or_else(|e| panic!("{call}: {e}")).get(0);
    assert!(done, "the call did not do its work: {call}");
    let read = tuples_read(&mut tx, table) - before;
    let scans_after = sequential_scans(&mut tx);
    tx.rollback().unwrap();
    let scanned = scans_after
        .into_iter()
        .filter(|(name, after)| {
            let before = scans_before.iter().find(|(b, _)| b == name).map_or(0, |(_, n)| *n);
            *after > before
        })
        .map(|(name, _)| name)
        .collect();
    Measured { read, scanned }
}

/// The tuples `call` reads from `table` and its indexes (see measure).
fn read_by(client: &mut Client, table: &str, call: &str) -> i64 {
    measure(client, table, call).read
}

/// Every call reads at most MOST_READ tuples of `table`.
fn assert_probes(client: &mut Client, table: &str, calls: &[(&str, &str)], when: &str) {
    assert_reads_at_most(client, MOST_READ, table, calls, when);
}

/// Every call reads at most `most` tuples of `table`.
fn assert_reads_at_most(
    client: &mut Client, most: i64, table: &str, calls: &[(&str, &str)], when: &str,
) {
    for (what, call) in calls {
        let read = read_by(client, table, call);
        println!("{what}: {read} tuples read {when}");
        assert!(
            read <= most,
            "{what} read {read} tuples of {table} and its indexes {when} \
             (a probe per row reads a few; the grown key holds over {GROWN_IN_ONE})"
        );
    }
}

/// Grow the new key with `grow(from, to)` (the SQL adding rows `from..=to`):
/// GROWN_IN_ONE rows in one transaction, then GROWN_ACROSS one per
/// transaction; after each, every call reads at most MOST_READ tuples of
/// `table`.
fn grow_then_probe(
    client: &mut Client, table: &str, grow: impl Fn(i32, i32) -> String, calls: &[(&str, &str)],
) {
    client.batch_execute("BEGIN").unwrap();
    client.batch_execute(&grow(0, GROWN_IN_ONE - 1)).unwrap();
    client.batch_execute("COMMIT").unwrap();
    assert_probes(client, table, calls, "after one transaction grew its key");
    for i in GROWN_IN_ONE..GROWN_IN_ONE + GROWN_ACROSS {
        client.batch_execute(&grow(i, i)).unwrap();
    }
    assert_probes(client, table, calls, "after many transactions grew it");
}

/// A fresh database whose sessions run with `setting` (`name = value`).
fn database_with(db: &str, setting: &str) -> Client {
    fresh_database(db).batch_execute(&format!("ALTER DATABASE {db} SET {setting}")).unwrap();
    agent_memory_integration::connect(db)
}

/// Fill `table` with skewed keys and analyse it, with autovacuum off so
/// that nothing refreshes the statistics after. `rows` is an INSERT ...
/// SELECT over `key` and `i` (rows per key).
fn skewed(client: &mut Client, table: &str, rows: &str) {
    client
        .batch_execute(&format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = false);
             {rows};
             ANALYZE {table};",
            rows = rows
                .replace(
                    "KEYS",
                    &format!(
                        "(SELECT 'big' || b AS key, {BIG_ROWS} AS n FROM generate_series(1, {BIG_KEYS}) b
                          UNION ALL
                          SELECT 'tiny' || t, 1 FROM generate_series(1, {TINY_KEYS}) t) keys,
                         generate_series(1, keys.n) i"
                    )
                )
        ))
        .unwrap();
}

#[test]
fn graph_calls_probe_their_nodes_in_an_owner_the_statistics_call_tiny() {
    const DB: &str = "agent_memory_skewed_graph";
    let mut client = fresh_database(DB);
    skewed(
        &mut client,
        "agent_memory.graph_nodes",
        "INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, links, refs)
         SELECT keys.key, 'n' || i, 'node ' || i, '', 'notes of node ' || i, '{}', '{}' FROM KEYS",
    );
    // The issue's shape: node k under node (k - 1) / 8, so parents fill up.
    let grow = |from: i32, to: i32| {
        format!(
            "DO $$ BEGIN
               FOR k IN {from}..{to} LOOP
                 PERFORM agent_memory.graph_create('grows', 'node ' || k, '', 'notes [[g' || (k + 1) || ']]',
                   ARRAY[CASE WHEN k = 0 THEN '__root__' ELSE 'g' || ((k - 1) / 8) END], 'g' || k);
               END LOOP;
             END $$"
        )
    };
    let calls = [
        (
            "graph_create under a parent",
            "SELECT agent_memory.graph_create('grows', 'new', '', '', ARRAY['g20', 'g21'], 'new') = 'new'",
        ),
        (
            "graph_write of refs",
            "SELECT agent_memory.graph_write('grows', 'g30', NULL, NULL, 'changed', ARRAY['g31', 'g32']) >= 1",
        ),
        (
            "graph_write with a change description",
            "SELECT agent_memory.graph_write('grows', 'g40', NULL, NULL, 'changed', change_description => 'why') = 2",
        ),
        (
            "graph_read of a node with refs",
            "SELECT agent_memory.graph_read('grows', 'g5') -> 'refs' ? 'g41'",
        ),
        ("graph_delete", "SELECT agent_memory.graph_delete('grows', 'g2999')"),
    ];
    grow_then_probe(&mut client, "agent_memory.graph_nodes", grow, &calls);
    let stored: i64 = client
        .query_one("SELECT count(*) FROM agent_memory.graph_nodes WHERE owner = 'grows'", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, i64::from(GROWN_IN_ONE + GROWN_ACROSS), "every node was created");
    drop(client);
    drop_database(DB);
}

#[test]
fn memory_file_calls_probe_their_paths_in_a_scope_the_statistics_call_tiny() {
    const DB: &str = "agent_memory_skewed_files";
    let mut client = database_with(DB, "agent_memory.max_files_per_scope = 1000000");
    skewed(
        &mut client,
        "agent_memory.memory_files",
        "INSERT INTO agent_memory.memory_files (scope, path, content)
         SELECT keys.key, '/d' || (i % 30) || '/f' || i, 'notes of file ' || i FROM KEYS",
    );
    // Files /d0 .. /d29, a hundred in each, through the memory tool.
    let grow = |from: i32, to: i32| {
        format!(
            "SELECT count(agent_memory.memory_tool('grows', jsonb_build_object(
               'command', 'append', 'path', '/d' || (i % 30) || '/f' || i, 'content', 'notes of file ' || i)))
             FROM generate_series({from}, {to}) i"
        )
    };
    let calls = [
        (
            "memory_tool create",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "append", "path": "/d7/sub/new", "content": "x"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "memory_tool append",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "append", "path": "/d7/f7", "content": "x"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "memory_tool update",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "update", "path": "/d8/f8", "oldContent": "notes", "content": "facts"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "memory_tool read",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "read", "path": "/d9/f9"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "memory_tool delete of a file",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "delete", "path": "/d10/f10"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "claude_memory create",
            r#"SELECT agent_memory.claude_memory('grows', '{"command": "create", "path": "/memories/d11/new.md", "file_text": "x"}') NOT LIKE 'Error%'"#,
        ),
        (
            "claude_memory str_replace",
            r#"SELECT agent_memory.claude_memory('grows', '{"command": "str_replace", "path": "/memories/d12/f12", "old_str": "notes", "new_str": "facts"}') NOT LIKE 'Error%'"#,
        ),
        (
            "claude_memory rename of a file",
            r#"SELECT agent_memory.claude_memory('grows', '{"command": "rename", "old_path": "/memories/d13/f13", "new_path": "/memories/d14/moved"}') NOT LIKE 'Error%'"#,
        ),
    ];
    grow_then_probe(&mut client, "agent_memory.memory_files", grow, &calls);
    let stored: i64 = client
        .query_one("SELECT count(*) FROM agent_memory.memory_files WHERE scope = 'grows'", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, i64::from(GROWN_IN_ONE + GROWN_ACROSS), "every file was created");
    drop(client);
    drop_database(DB);
}

#[test]
fn key_value_calls_probe_their_keys_in_a_session_the_statistics_call_tiny() {
    const DB: &str = "agent_memory_skewed_kv";
    let mut client = database_with(DB, "agent_memory.kv_word_budget = 10000000");
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.sessions (session_id, user_id)
             SELECT 'big' || b, 'u' FROM generate_series(1, {BIG_KEYS}) b
             UNION ALL SELECT 'tiny' || t, 'u' FROM generate_series(1, {TINY_KEYS}) t;
             SELECT agent_memory.create_session('u', session_id => 'grows');"
        ))
        .unwrap();
    skewed(
        &mut client,
        "agent_memory.kv_entries",
        "INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
         SELECT keys.key, 'k' || i, '\"v\"', 1, now() + interval '1 day' FROM KEYS",
    );
    let grow = |from: i32, to: i32| {
        format!(
            "SELECT count(agent_memory.kv_set('grows', 'k' || i, to_jsonb(i))) FROM generate_series({from}, {to}) i"
        )
    };
    let calls = [
        ("kv_get", "SELECT agent_memory.kv_get('grows', 'k7') = '7'"),
        ("kv_set of a known key", "SELECT agent_memory.kv_set('grows', 'k8', '1') IS NOT NULL"),
        ("kv_delete", "SELECT agent_memory.kv_delete('grows', 'k9')"),
        (
            "clear_context_keys",
            "SELECT agent_memory.clear_context_keys('grows', ARRAY['k10', 'k11']) = 2",
        ),
        (
            "build_context of some keys",
            "SELECT agent_memory.build_context('grows', ARRAY['k12', 'k13']) -> 'memory' = '{\"k12\": 12, \"k13\": 13}'",
        ),
    ];
    grow_then_probe(&mut client, "agent_memory.kv_entries", grow, &calls);
    drop(client);
    drop_database(DB);
}

#[test]
fn working_memory_reads_its_entry_in_a_session_the_statistics_call_tiny() {
    const DB: &str = "agent_memory_skewed_working_memory";
    // Threads and node entries of the new session.
    const NODES: i32 = 300;
    let mut client = fresh_database(DB);
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.sessions (session_id, user_id)
             SELECT 'big' || b, 'u' FROM generate_series(1, {BIG_KEYS}) b
             UNION ALL SELECT 'tiny' || t, 'u' FROM generate_series(1, {TINY_KEYS}) t;
             SELECT agent_memory.create_session('u', session_id => 'grows');"
        ))
        .unwrap();
    // Threads of 50 messages: BIG_ROWS messages in each big session, one in
    // each tiny one.
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended, last_seq)
             SELECT 'big' || b, 't' || t, 50, 50, t * 50 + 49
             FROM generate_series(1, {BIG_KEYS}) b, generate_series(0, {BIG_ROWS} / 50 - 1) t
             UNION ALL SELECT 'tiny' || t, '', 50, 1, 0 FROM generate_series(1, {TINY_KEYS}) t;"
        ))
        .unwrap();
    skewed(
        &mut client,
        "agent_memory.thread_messages",
        "INSERT INTO agent_memory.thread_messages (session_id, thread_key, slot, seq, role, content, metadata)
         SELECT keys.key, CASE WHEN keys.n = 1 THEN '' ELSE 't' || ((i - 1) / 50) END, (i - 1) % 50, i,
                'user', 'message ' || i, '{}'
         FROM KEYS",
    );
    skewed(
        &mut client,
        "agent_memory.wm_parts",
        "INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value)
         SELECT keys.key, 'n' || i, 'working_history', '\"worked\"' FROM KEYS",
    );
    // Ten messages in each node's thread, and each node's own parts.
    let grow = |from: i32, to: i32| {
        format!(
            "SELECT count(agent_memory.append_message('grows', 'user', 'message ' || i,
                                                      node_id => 'n' || (i % {NODES})))
             FROM generate_series({from}, {to}) i;
             INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value)
             SELECT 'grows', 'n' || (i % {NODES}), p, '\"notes\"'
             FROM generate_series({from}, {to}) i,
                  unnest(ARRAY['working_history', 'fetched_context', 'last_user_message']) p
             WHERE i < {NODES}
             ON CONFLICT DO NOTHING"
        )
    };
    let calls = [
        (
            "working_memory of a node",
            "SELECT jsonb_array_length(agent_memory.working_memory('grows', 'n7') -> 'messages') = 10",
        ),
        (
            "working_memory_entry of a node",
            "SELECT jsonb_array_length(agent_memory.working_memory_entry('grows', 'n8') -> 'recent_messages') = 10",
        ),
        (
            "wm_context of a node",
            "SELECT (agent_memory.wm_context('grows', 'n9') -> 'message_metadata' ->> 'in_history')::int = 10",
        ),
    ];
    client.batch_execute("BEGIN").unwrap();
    client.batch_execute(&grow(0, NODES * 10 - 1)).unwrap();
    client.batch_execute("COMMIT").unwrap();
    // A node's entry reads its own thread (ten messages) a few times
    // over: the window and the last user message, each once to count
    // their bytes and once to show them, the calls its tool results need,
    // the count. The session holds 3,000 messages in 300 threads.
    const THREAD_READS: i64 = 500;
    for table in ["agent_memory.thread_messages", "agent_memory.wm_parts"] {
        assert_reads_at_most(
            &mut client,
            THREAD_READS,
            table,
            &calls,
            "after one transaction grew the session",
        );
    }
    for i in NODES * 10..NODES * 11 {
        client.batch_execute(&grow(i, i)).unwrap();
    }
    let calls = [
        (
            "working_memory of a node",
            "SELECT jsonb_array_length(agent_memory.working_memory('grows', 'n7') -> 'messages') = 11",
        ),
        (
            "wm_context of a node",
            "SELECT (agent_memory.wm_context('grows', 'n9') -> 'message_metadata' ->> 'in_history')::int = 11",
        ),
    ];
    for table in ["agent_memory.thread_messages", "agent_memory.wm_parts"] {
        assert_reads_at_most(
            &mut client,
            THREAD_READS,
            table,
            &calls,
            "after many transactions grew it",
        );
    }
    drop(client);
    drop_database(DB);
}

#[test]
fn recall_reads_only_its_scope_whatever_the_statistics_say() {
    const DB: &str = "agent_memory_skewed_recall";
    let mut client = fresh_database(DB);
    // Recall's statements are planned once per connection, for any scope:
    // the statistics of the huge owners must not lead them off the keys.
    skewed(
        &mut client,
        "agent_memory.graph_nodes",
        "INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, embedding, embedding_md5)
         SELECT keys.key, 'n' || i, 'window seat ' || i, '', 'notes', '{1,0,0}',
                md5('window seat ' || i || E'\\n' || E'\\n' || 'notes')
         FROM KEYS",
    );
    client.batch_execute("SELECT agent_memory.recall_enable_embeddings(3)").unwrap();
    let grow = |from: i32, to: i32| {
        format!(
            "INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body)
             SELECT 'grows', 'g' || i, 'garden ' || i, '', 'notes' FROM generate_series({from}, {to}) i"
        )
    };
    let calls = [
        (
            "recall by words in a tiny owner",
            "SELECT count(*) = 1 FROM agent_memory.recall('window seat', owner => 'tiny7')",
        ),
        (
            "recall by meaning in a tiny owner",
            "SELECT count(*) = 1 FROM agent_memory.recall(NULL, owner => 'tiny8', embedding => '{1,0.1,0}')",
        ),
        (
            "recall by both in a tiny owner",
            "SELECT count(*) = 1 FROM agent_memory.recall('seat', owner => 'tiny9', embedding => '{1,0.1,0}')",
        ),
        (
            "recall_outbox of a tiny owner",
            "SELECT count(*) = 0 FROM agent_memory.recall_outbox(owner => 'tiny10')",
        ),
    ];
    // Every call in one connection, so the plans made for the first scope
    // serve the others (and the grown one the statistics know nothing of).
    grow_then_probe(&mut client, "agent_memory.graph_nodes", grow, &calls);
    let grown = read_by(
        &mut client,
        "agent_memory.graph_nodes",
        "SELECT count(*) = 0 FROM agent_memory.recall('window', owner => 'grows')",
    );
    println!("recall in the grown owner: {grown} tuples read");
    // Each of the owner's rows once through its key: an index entry and a
    // heap tuple.
    let owner_rows = i64::from(GROWN_IN_ONE + GROWN_ACROSS);
    assert!(
        grown <= 2 * owner_rows + MOST_READ,
        "recall in the grown owner read {grown} tuples, more than the {owner_rows} rows it holds"
    );
    drop(client);
    drop_database(DB);
}

#[test]
fn writes_reach_rows_by_index_in_tables_analysed_while_empty() {
    // Statistics taken while every table was empty make a sequential scan
    // the cheapest plan; a plan kept from then scans the whole table on
    // each call, long after the table has grown (nothing invalidates it
    // until the next ANALYZE). A bulk load in one transaction, then the
    // same connection's writes, must still reach rows by their keys.
    const DB: &str = "agent_memory_empty_statistics";
    let mut client = fresh_database(DB);
    client
        .batch_execute(
            "SET agent_memory.max_files_per_scope = 1000000;
             SET agent_memory.kv_word_budget = 10000000;",
        )
        .unwrap();
    client
        .batch_execute(
            "DO $$ DECLARE t regclass; BEGIN
               FOR t IN SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = 'agent_memory' AND c.relkind = 'r' LOOP
                 EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', t);
               END LOOP;
             END $$;
             ANALYZE;",
        )
        .unwrap();
    const GROWN: i32 = 2_000;
    client
        .batch_execute(&format!(
            "BEGIN;
             SELECT agent_memory.create_session('u', session_id => 'grows');
             SELECT count(agent_memory.kv_set('grows', 'k' || i, to_jsonb(i))) FROM generate_series(0, {GROWN}) i;
             SELECT count(agent_memory.append_message('grows', 'user', 'message ' || i, keep => 10000))
             FROM generate_series(0, {GROWN}) i;
             SELECT count(agent_memory.memory_tool('grows', jsonb_build_object(
               'command', 'append', 'path', '/d' || (i % 30) || '/f' || i, 'content', 'notes of file ' || i)))
             FROM generate_series(0, {GROWN}) i;
             SELECT count(agent_memory.graph_create('grows', 'node ' || i, '', 'notes', ARRAY['__root__'], 'g' || i))
             FROM generate_series(0, {GROWN}) i;
             COMMIT;"
        ))
        .unwrap();
    let calls = [
        (
            "kv_set",
            "agent_memory.kv_entries",
            "SELECT agent_memory.kv_set('grows', 'k8', '1') IS NOT NULL",
        ),
        ("kv_get", "agent_memory.kv_entries", "SELECT agent_memory.kv_get('grows', 'k7') = '7'"),
        ("kv_delete", "agent_memory.kv_entries", "SELECT agent_memory.kv_delete('grows', 'k9')"),
        (
            "append_message",
            "agent_memory.thread_messages",
            "SELECT agent_memory.append_message('grows', 'user', 'one more', keep => 10000) IS NOT NULL",
        ),
        (
            "memory_tool append",
            "agent_memory.memory_files",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "append", "path": "/d7/f7", "content": "x"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "memory_tool update",
            "agent_memory.memory_files",
            r#"SELECT (agent_memory.memory_tool('grows', '{"command": "update", "path": "/d8/f8", "oldContent": "notes", "content": "facts"}')::jsonb ->> 'ok')::bool"#,
        ),
        (
            "graph_write",
            "agent_memory.graph_nodes",
            "SELECT agent_memory.graph_write('grows', 'g30', NULL, NULL, 'changed') >= 1",
        ),
        (
            "graph_create",
            "agent_memory.graph_nodes",
            "SELECT agent_memory.graph_create('grows', 'new', '', '', ARRAY['g20'], 'new') = 'new'",
        ),
    ];
    for (what, table, call) in calls {
        let Measured { read, scanned } = measure(&mut client, table, call);
        println!("{what}: {read} tuples read of {table}");
        assert!(
            scanned.is_empty(),
            "{what} scanned {scanned:?} whole, planned from statistics of empty tables"
        );
        assert!(
            read <= MOST_READ,
            "{what} read {read} tuples of {table} and its indexes (the key holds over {GROWN})"
        );
    }
    drop(client);
    drop_database(DB);
}
