//! Every real change of a working-memory part sends one notification on
//! channel agent_memory, after commit; a write equal to what is stored
//! sends none.

use std::time::Duration;

use agent_memory_integration::{drop_database, fresh_database};
use postgres::fallible_iterator::FallibleIterator;

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
    assert!(
        !set(&mut client, r#"{"title": "A"}"#),
        "the same value again is a no-op"
    );
    assert!(set(&mut client, r#"{"title": "B"}"#));
    // A patch that changes nothing is a no-op too.
    client
        .batch_execute(
            "SELECT agent_memory.wm_patch('wm', 'node_context', '{\"title\": \"B\"}', 'n1')",
        )
        .unwrap();

    let mut payloads: Vec<serde_json::Value> = Vec::new();
    {
        let mut notifications = client.notifications();
        let mut waiting = notifications.timeout_iter(Duration::from_millis(500));
        while let Some(note) = waiting.next().unwrap() {
            assert_eq!(note.channel(), "agent_memory");
            payloads.push(serde_json::from_str(note.payload()).unwrap());
        }
    }
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
