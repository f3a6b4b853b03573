//! Every real change of a working-memory part sends one notification on
//! channel agent_memory, after commit; a write equal to what is stored
//! sends none.

use agent_memory_integration::{connect, drop_database, fresh_database, received_payloads};

#[test]
fn one_notification_per_real_change_and_none_for_a_no_op() {
    let db = "am_it_wm_notify";
    let mut client = fresh_database(db);
    client
        .batch_execute(
            "SELECT agent_memory.create_session('ana', session_id => 'wm');
             LISTEN agent_memory;",
        )
        .unwrap();
    let set = |client: &mut postgres::Client, value: &str| -> bool {
        client
            .query_one(
                "SELECT agent_memory.wm_set('wm', 'node_context', $1::text::jsonb, 'n1')",
                &[&value],
            )
            .unwrap()
            .get(0)
    };
    assert!(set(&mut client, r#"{"title": "A"}"#));
    assert!(!set(&mut client, r#"{"title": "A"}"#), "the same value again is a no-op");
    assert!(set(&mut client, r#"{"title": "B"}"#));
    // A patch that changes nothing is a no-op too.
    client
        .batch_execute(
            "SELECT agent_memory.wm_patch('wm', 'node_context', '{\"title\": \"B\"}', 'n1')",
        )
        .unwrap();

    let payloads = received_payloads(&mut client, "agent_memory");
    assert_eq!(
        payloads,
        vec![
            serde_json::json!({"session_id": "wm", "node_id": "n1", "part": "node_context", "version": 1}),
            serde_json::json!({"session_id": "wm", "node_id": "n1", "part": "node_context", "version": 2}),
        ]
    );
    drop(client);
    drop_database(db);
}

/// Notifications are sent at commit, only while someone listens: a
/// listener in another connection gets the changes committed after its
/// LISTEN (also those of a transaction that was already open), nothing of
/// a rolled back transaction or savepoint, and one notification per entry
/// that wm_clear removes. After the last listener leaves, a new one is
/// counted again.
#[test]
fn listeners_in_other_connections_get_committed_changes_only() {
    let db = "am_it_wm_notify_others";
    let mut writer = fresh_database(db);
    writer.batch_execute("SELECT agent_memory.create_session('ana', session_id => 'wm')").unwrap();
    // Nobody listens yet: the change is not announced to anyone later.
    writer
        .batch_execute("SELECT agent_memory.wm_set('wm', 'working_history', '\"before\"')")
        .unwrap();

    // A transaction that writes before the LISTEN and commits after it.
    writer
        .batch_execute("BEGIN; SELECT agent_memory.wm_set('wm', 'working_history', '\"during\"');")
        .unwrap();
    let mut listener = connect(db);
    listener.batch_execute("LISTEN agent_memory").unwrap();
    writer.batch_execute("COMMIT").unwrap();

    // Rolled back: a whole transaction, and a savepoint inside one.
    writer
        .batch_execute(
            "BEGIN; SELECT agent_memory.wm_set('wm', 'node_context', '{\"a\": 1}'); ROLLBACK;
             BEGIN;
             SELECT agent_memory.wm_set('wm', 'last_user_message', '\"kept\"');
             SAVEPOINT s;
             SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"dropped\": true}');
             ROLLBACK TO SAVEPOINT s;
             SAVEPOINT t;
             SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"kept\": true}');
             RELEASE SAVEPOINT t;
             COMMIT;",
        )
        .unwrap();
    writer.batch_execute("SELECT agent_memory.wm_clear('wm', '__global__')").unwrap();

    let part = |part: &str, version: i32| serde_json::json!({"session_id": "wm", "node_id": null, "part": part, "version": version});
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![
            part("working_history", 2),
            part("last_user_message", 1),
            part("fetched_context", 1),
            serde_json::json!({"session_id": "wm", "node_id": null, "part": null, "version": null}),
        ]
    );

    // The listener leaves; a new one is counted from zero again.
    listener.batch_execute("UNLISTEN agent_memory").unwrap();
    drop(listener);
    let mut second = connect(db);
    second.batch_execute("LISTEN agent_memory").unwrap();
    writer
        .batch_execute("SELECT agent_memory.wm_set('wm', 'working_history', '\"again\"')")
        .unwrap();
    assert_eq!(received_payloads(&mut second, "agent_memory"), vec![part("working_history", 1)]);
    drop(second);
    drop(writer);
    drop_database(db);
}

/// A transaction announces each part it changed once, with the version
/// that stands at commit, in the order of each part's last change: a
/// released savepoint's change counts, a rolled back one's does not, and a
/// loop that writes one part in a subtransaction per turn sends one
/// notification.
#[test]
fn a_transaction_announces_each_part_once_with_its_last_version() {
    let db = "am_it_wm_notify_once";
    let mut writer = fresh_database(db);
    writer.batch_execute("SELECT agent_memory.create_session('ana', session_id => 'wm')").unwrap();
    let mut listener = connect(db);
    listener.batch_execute("LISTEN agent_memory").unwrap();
    writer
        .batch_execute(
            "BEGIN;
             SELECT agent_memory.wm_set('wm', 'working_history', '\"1\"');
             SELECT agent_memory.wm_set('wm', 'node_context', '{\"a\": 1}');
             SAVEPOINT a;
             SELECT agent_memory.wm_set('wm', 'working_history', '\"2\"');
             RELEASE SAVEPOINT a;
             SAVEPOINT b;
             SELECT agent_memory.wm_set('wm', 'working_history', '\"3\"');
             SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"dropped\": true}');
             ROLLBACK TO SAVEPOINT b;
             DO $$
             BEGIN
               FOR turn IN 1..500 LOOP
                 BEGIN
                   PERFORM agent_memory.wm_set('wm', 'last_user_message', pg_catalog.to_jsonb('m' || turn));
                 EXCEPTION WHEN raise_exception THEN NULL;
                 END;
               END LOOP;
             END $$;
             COMMIT;",
        )
        .unwrap();
    let part = |part: &str, version: i32| serde_json::json!({"session_id": "wm", "node_id": null, "part": part, "version": version});
    assert_eq!(
        received_payloads(&mut listener, "agent_memory"),
        vec![part("node_context", 1), part("working_history", 2), part("last_user_message", 500),]
    );
    drop(listener);
    drop(writer);
    drop_database(db);
}
