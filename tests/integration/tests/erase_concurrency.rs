//! An erasure that waits for a concurrent edit leaves nothing of what it
//! erases: the version the edit kept of a file or a graph node goes too.

use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database, wait_for_lock_waiter};

/// Run `edit` in an open transaction with history on, erase user "bob"'s
/// graph owner "o1" and file scope "u1" from another connection while the
/// edit holds its row, commit the edit, and return what is left of both,
/// with the erasure's answer.
fn left_after_erasing_during(db: &str, edit: &str) -> (i64, String) {
    let mut setup = fresh_database(db);
    setup
        .batch_execute(
            r#"SELECT agent_memory.memory_tool('u1', '{"path": "/a.md", "command": "append", "content": "x"}');
               SELECT agent_memory.graph_create('o1', 'Plan', 'the plan', 'first', ARRAY['__root__'], node_id => 'plan');"#,
        )
        .expect("a file and a node");
    let mut editor = connect(db);
    editor.batch_execute("BEGIN; SET LOCAL agent_memory.history_retention = 3;").unwrap();
    editor.batch_execute(edit).expect("the edit");
    let eraser = thread::spawn({
        let db = db.to_string();
        move || {
            connect(&db)
                .query_one(
                    "SELECT agent_memory.erase_user('bob', owners => ARRAY['o1'], scopes => ARRAY['u1'])::text",
                    &[],
                )
                .expect("erase_user")
                .get::<_, String>(0)
        }
    });
    wait_for_lock_waiter(&mut setup, db, "erase_user", "the erasure waits for the edit");
    editor.batch_execute("COMMIT").unwrap();
    let erased = eraser.join().unwrap();
    let left: i64 = setup
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.memory_files)
                  + (SELECT count(*) FROM agent_memory.memory_file_versions)
                  + (SELECT count(*) FROM agent_memory.graph_nodes)
                  + (SELECT count(*) FROM agent_memory.graph_node_versions)",
            &[],
        )
        .unwrap()
        .get(0);
    drop(setup);
    drop(editor);
    drop_database(db);
    (left, erased)
}

#[test]
fn an_erasure_waiting_for_a_file_edit_removes_the_version_it_kept() {
    let (left, erased) = left_after_erasing_during(
        "am_it_erase_file_edit",
        r#"SELECT agent_memory.memory_tool('u1', '{"path": "/a.md", "command": "update", "oldContent": "x", "content": "y"}');"#,
    );
    assert_eq!(left, 0, "rows left after {erased}");
    assert!(erased.contains(r#""file_versions": 1"#), "{erased}");
}

#[test]
fn an_erasure_waiting_for_a_node_edit_removes_the_version_it_kept() {
    let (left, erased) = left_after_erasing_during(
        "am_it_erase_node_edit",
        "SELECT agent_memory.graph_write('o1', 'plan', NULL, NULL, 'second', change_description => 'rewritten');",
    );
    assert_eq!(left, 0, "rows left after {erased}");
    assert!(erased.contains(r#""node_versions": 1"#), "{erased}");
}
