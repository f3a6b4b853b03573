//! Two transactions patch the same working-memory part at once: the second
//! waits for the first (the session's write lock) and merges into what it
//! committed, so both patches survive.

use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database, wait_for_lock_waiter};

#[test]
fn concurrent_patches_of_one_part_both_survive() {
    let db = "am_it_wm_patch";
    let mut setup = fresh_database(db);
    setup
        .batch_execute(
            "SELECT agent_memory.create_session('ana', session_id => 'wm');
             SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"base\": true}');",
        )
        .unwrap();

    let mut first = connect(db);
    first.batch_execute("BEGIN").unwrap();
    first
        .batch_execute("SELECT agent_memory.wm_patch('wm', 'fetched_context', '{\"first\": 1}')")
        .unwrap();

    let second = thread::spawn(move || {
        let mut second = connect(db);
        second
            .query_one(
                "SELECT agent_memory.wm_patch('wm', 'fetched_context', '{\"second\": 2}')::text",
                &[],
            )
            .map(|row| row.get::<_, String>(0))
    });
    // The second patch waits for the first transaction.
    wait_for_lock_waiter(&mut setup, db, "wm_patch", "the second patch never waited");
    first.batch_execute("COMMIT").unwrap();
    let returned = second
        .join()
        .unwrap()
        .expect("no error reaches the second patch");
    let expected = serde_json::json!({"base": true, "first": 1, "second": 2});
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&returned).unwrap(),
        expected
    );
    let stored: String = setup
        .query_one(
            "SELECT agent_memory.wm_get('wm', 'fetched_context')::text",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stored).unwrap(),
        expected
    );
    drop(setup);
    drop_database(db);
}
