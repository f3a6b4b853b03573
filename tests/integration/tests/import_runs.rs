//! import_lines takes an export's lines as import takes each one, with the
//! same result for every line and the same memory after, but writes runs
//! of lines together: a subtransaction per run, not per line. Subtransactions
//! that write take transaction ids, so the ids one import uses count them.

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;

const USER_MEMORY: &str = r#"
SELECT count(agent_memory.create_session('porter', session_id => 'p' || i)) FROM generate_series(1, 3) i;
SELECT count(agent_memory.kv_set('p' || (i % 3 + 1), 'key' || (i / 3), to_jsonb('value ' || i))) FROM generate_series(0, 59) i;
-- Left at 2: an import takes only the history the retention keeps.
SET agent_memory.history_retention = 2;
SELECT count(agent_memory.kv_set('p' || i, 'key0', to_jsonb('changed ' || i))) FROM generate_series(1, 3) i;
SELECT count(agent_memory.append_message('p' || (i % 3 + 1), CASE WHEN i % 2 = 0 THEN 'user' ELSE 'assistant' END,
                                         'message ' || i)) FROM generate_series(0, 59) i;
SELECT count(agent_memory.append_message('p1', 'assistant', '', metadata => '{"tool_calls": [{"id": "c1"}]}'));
SELECT count(agent_memory.append_message('p1', 'tool', 'done', metadata => '{"tool_call_id": "c1"}'));
SELECT count(agent_memory.append_message('p1', 'user', 'on the node ' || i, node_id => 'n1', keep => 5)) FROM generate_series(1, 8) i;
SELECT count(agent_memory.wm_set('p' || i, 'working_history', to_jsonb('step ' || i))) FROM generate_series(1, 3) i;
SELECT count(agent_memory.graph_create('porter', 'Node ' || i, 'about ' || i, 'body ' || i, ARRAY['__root__'], node_id => 'n' || i))
FROM generate_series(1, 10) i;
SELECT count(agent_memory.memory_tool('porter', jsonb_build_object('command', 'append', 'path', '/notes/' || i || '.md', 'content', 'note ' || i)))
FROM generate_series(1, 10) i;
CREATE TABLE exported AS
SELECT row_number() OVER () AS n, line::text AS line
FROM agent_memory.export(user_id => 'porter', owner => 'porter', scope => 'porter') AS line;
"#;

const ERASE: &str = "SELECT agent_memory.erase_user('porter', owners => ARRAY['porter'], scopes => ARRAY['porter'])";

/// Everything the user holds, as the export has it (activity renewed by
/// the writes left out), sorted.
fn exported_now(client: &mut Client) -> Vec<String> {
    client
        .query(
            "SELECT (line::jsonb - 'last_activity_at')::text
             FROM agent_memory.export(user_id => 'porter', owner => 'porter', scope => 'porter') AS line
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Run `import` in a transaction of its own: each line's result, and the
/// transaction ids it used (its own and those of its subtransactions).
fn imported(client: &mut Client, import: &str) -> (Vec<String>, i64) {
    let before: i64 =
        client.query_one("SELECT pg_current_xact_id()::text::int8", &[]).unwrap().get(0);
    let results =
        client.query(import, &[]).unwrap().iter().map(|row| row.get::<_, String>(0)).collect();
    let after: i64 =
        client.query_one("SELECT pg_current_xact_id()::text::int8", &[]).unwrap().get(0);
    (results, after - before - 1)
}

#[test]
fn import_lines_takes_runs_together_with_the_results_of_import() {
    let db = "am_it_import_runs";
    let mut client = fresh_database(db);
    client.batch_execute(USER_MEMORY).unwrap();
    let lines: i64 = client.query_one("SELECT count(*) FROM exported", &[]).unwrap().get(0);
    let original: Vec<String> = client
        .query("SELECT (line::jsonb - 'last_activity_at')::text FROM exported ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();

    client.batch_execute(ERASE).unwrap();
    let (each, each_ids) =
        imported(&mut client, "SELECT agent_memory.import(line)::text FROM exported ORDER BY n");
    assert_eq!(exported_now(&mut client), original);

    client.batch_execute(ERASE).unwrap();
    let (together, together_ids) = imported(
        &mut client,
        "SELECT r::text FROM agent_memory.import_lines(ARRAY(SELECT line FROM exported ORDER BY n)) AS r",
    );
    assert_eq!(together, each, "the same result for every line");
    assert_eq!(exported_now(&mut client), original, "the same memory after");
    assert!(each.iter().all(|r| r.contains(r#""status": "imported""#)), "{each:?}");

    // One line a subtransaction, against one run a subtransaction.
    assert!(each_ids > lines, "{each_ids} ids for {lines} lines");
    assert!(together_ids * 5 < lines, "{together_ids} ids for {lines} lines");

    // Twice: every line unchanged, both ways.
    let (again, _) = imported(
        &mut client,
        "SELECT r ->> 'status' FROM agent_memory.import_lines(ARRAY(SELECT line FROM exported ORDER BY n)) AS r",
    );
    assert!(again.iter().all(|status| status == "unchanged"), "{again:?}");
    assert_eq!(again.len() as i64, lines);

    drop(client);
    drop_database(db);
}
