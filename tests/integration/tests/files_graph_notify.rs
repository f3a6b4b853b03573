//! A committed change of a scope's files or of an owner's graph is
//! announced on channel agent_memory, as working memory's changes are:
//! `{"kind": "files", "scope"}` or `{"kind": "graph", "owner"}`, once per
//! transaction and subject. Reads, refusals, writes that change nothing
//! and rolled back transactions announce nothing. Erasing a user and
//! importing lines announce what they change, as the writes do.

use agent_memory_integration::{connect, drop_database, fresh_database, received_payloads};
use serde_json::json;

#[test]
fn file_and_graph_changes_are_announced_after_commit() {
    let db = "am_it_files_graph_notify";
    let mut writer = fresh_database(db);
    let mut listener = connect(db);
    listener.batch_execute("LISTEN agent_memory").unwrap();
    // Wait for the listener to be counted before the writes.
    listener.batch_execute("SELECT 1").unwrap();

    let files = json!({"kind": "files", "scope": "notes"});
    let graph = json!({"kind": "graph", "owner": "al"});

    // Two writes of one scope in one transaction: one notification.
    writer
        .batch_execute(
            r#"BEGIN;
               SELECT agent_memory.memory_tool('notes', '{"command": "append", "path": "/a.md", "content": "one"}');
               SELECT agent_memory.memory_tool('notes', '{"command": "append", "path": "/a.md", "content": "two"}');
               COMMIT;"#,
        )
        .unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), vec![files.clone()]);

    // A read, a search and a refused write change nothing.
    writer
        .batch_execute(
            r#"SELECT agent_memory.memory_tool('notes', '{"command": "read", "path": "/a.md"}');
               SELECT agent_memory.memory_tool('notes', '{"command": "search", "path": "/", "query": "one"}');
               SELECT agent_memory.memory_tool('notes', '{"command": "delete", "path": "/missing.md"}');
               SELECT agent_memory.claude_memory('notes', '{"command": "view", "path": "/memories"}');"#,
        )
        .unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), Vec::<serde_json::Value>::new());

    // Claude's dialect writes files too.
    writer
        .batch_execute(
            r#"SELECT agent_memory.claude_memory('notes', '{"command": "create", "path": "/memories/b.md", "file_text": "b"}');"#,
        )
        .unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), vec![files.clone()]);

    // A graph: a creation, a write that changes nothing, a real one, a
    // delete, each in its own transaction.
    let node: String = writer
        .query_one(
            "SELECT agent_memory.graph_create('al', 'Trips', '', 'Lisbon', ARRAY['__root__'])",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(received_payloads(&mut listener, "agent_memory"), vec![graph.clone()]);
    writer
        .execute("SELECT agent_memory.graph_write('al', $1, 'Trips', NULL, NULL)", &[&node])
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        Vec::<serde_json::Value>::new(),
        "a write that changes nothing is not announced"
    );
    writer
        .execute("SELECT agent_memory.graph_write('al', $1, NULL, NULL, 'Porto')", &[&node])
        .unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), vec![graph.clone()]);
    writer.execute("SELECT agent_memory.graph_delete('al', $1)", &[&node]).unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), vec![graph.clone()]);

    // Nothing of a rolled back transaction.
    writer
        .batch_execute(
            r#"BEGIN;
               SELECT agent_memory.memory_tool('notes', '{"command": "append", "path": "/c.md", "content": "c"}');
               SELECT agent_memory.graph_create('al', 'Gone', '', '', ARRAY['__root__']);
               ROLLBACK;"#,
        )
        .unwrap();
    assert_eq!(received_payloads(&mut listener, "agent_memory"), Vec::<serde_json::Value>::new());

    drop(writer);
    drop(listener);
    drop_database(db);
}

fn sorted(mut payloads: Vec<String>) -> Vec<String> {
    payloads.sort();
    payloads
}

/// The payloads received since the last call, in a stable order.
fn sorted_payloads(listener: &mut postgres::Client) -> Vec<String> {
    sorted(
        received_payloads(listener, "agent_memory")
            .iter()
            .map(serde_json::Value::to_string)
            .collect(),
    )
}

#[test]
fn erasure_and_import_announce_what_they_change() {
    let db = "am_it_erase_import_notify";
    let mut writer = fresh_database(db);
    let mut listener = connect(db);
    listener.batch_execute("LISTEN agent_memory").unwrap();
    listener.batch_execute("SELECT 1").unwrap();

    writer
        .batch_execute(
            r#"SELECT agent_memory.create_session('ana', session_id => 'ana-1');
               SELECT agent_memory.wm_set('ana-1', 'fetched_context', '{"hotel": "Alfama"}');
               SELECT agent_memory.graph_create('ana', 'Trips', '', 'Lisbon', ARRAY['__root__'], node_id => 'trips');
               SELECT agent_memory.memory_tool('ana', '{"command": "append", "path": "/a.md", "content": "one"}');
               SELECT agent_memory.memory_tool('other', '{"command": "append", "path": "/b.md", "content": "two"}');"#,
        )
        .unwrap();
    sorted_payloads(&mut listener);
    let lines: Vec<String> = writer
        .query(
            "SELECT line::text FROM agent_memory.export(user_id => 'ana', owner => 'ana', scope => 'ana') line",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();

    let files = json!({"kind": "files", "scope": "ana"}).to_string();
    let graph = json!({"kind": "graph", "owner": "ana"}).to_string();
    let part =
        json!({"session_id": "ana-1", "node_id": null, "part": "fetched_context", "version": 1})
            .to_string();

    // Owners and scopes that held nothing are not announced.
    writer
        .execute(
            "SELECT agent_memory.erase_user('ana', owners => ARRAY['ana', 'nobody'], scopes => ARRAY['ana', 'empty'])",
            &[],
        )
        .unwrap();
    assert_eq!(sorted_payloads(&mut listener), sorted(vec![files.clone(), graph.clone()]));

    // The import writes the part, the node and the file again; run again,
    // it changes nothing and announces nothing.
    let import = |writer: &mut postgres::Client| {
        writer
            .execute("SELECT count(*) FROM agent_memory.import_lines($1::text[])", &[&lines])
            .unwrap();
    };
    import(&mut writer);
    assert_eq!(sorted_payloads(&mut listener), sorted(vec![files, graph, part]));
    import(&mut writer);
    assert_eq!(sorted_payloads(&mut listener), Vec::<String>::new());

    drop(writer);
    drop(listener);
    drop_database(db);
}
