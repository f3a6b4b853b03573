//! A committed change of a scope's files or of an owner's graph is
//! announced on channel agent_memory, as working memory's changes are:
//! `{"kind": "files", "scope"}` or `{"kind": "graph", "owner"}`, once per
//! transaction and subject. Reads, refusals, writes that change nothing
//! and rolled back transactions announce nothing.

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
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![files.clone()]
    );

    // A read, a search and a refused write change nothing.
    writer
        .batch_execute(
            r#"SELECT agent_memory.memory_tool('notes', '{"command": "read", "path": "/a.md"}');
               SELECT agent_memory.memory_tool('notes', '{"command": "search", "path": "/", "query": "one"}');
               SELECT agent_memory.memory_tool('notes', '{"command": "delete", "path": "/missing.md"}');
               SELECT agent_memory.claude_memory('notes', '{"command": "view", "path": "/memories"}');"#,
        )
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        Vec::<serde_json::Value>::new()
    );

    // Claude's dialect writes files too.
    writer
        .batch_execute(
            r#"SELECT agent_memory.claude_memory('notes', '{"command": "create", "path": "/memories/b.md", "file_text": "b"}');"#,
        )
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![files.clone()]
    );

    // A graph: a creation, a write that changes nothing, a real one, a
    // delete, each in its own transaction.
    let node: String = writer
        .query_one(
            "SELECT agent_memory.graph_create('al', 'Trips', '', 'Lisbon', ARRAY['__root__'])",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![graph.clone()]
    );
    writer
        .execute(
            "SELECT agent_memory.graph_write('al', $1, 'Trips', NULL, NULL)",
            &[&node],
        )
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        Vec::<serde_json::Value>::new(),
        "a write that changes nothing is not announced"
    );
    writer
        .execute(
            "SELECT agent_memory.graph_write('al', $1, NULL, NULL, 'Porto')",
            &[&node],
        )
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![graph.clone()]
    );
    writer
        .execute("SELECT agent_memory.graph_delete('al', $1)", &[&node])
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![graph.clone()]
    );

    // Nothing of a rolled back transaction.
    writer
        .batch_execute(
            r#"BEGIN;
               SELECT agent_memory.memory_tool('notes', '{"command": "append", "path": "/c.md", "content": "c"}');
               SELECT agent_memory.graph_create('al', 'Gone', '', '', ARRAY['__root__']);
               ROLLBACK;"#,
        )
        .unwrap();
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        Vec::<serde_json::Value>::new()
    );

    drop(writer);
    drop(listener);
    drop_database(db);
}
