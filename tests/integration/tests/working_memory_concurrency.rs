//! Two transactions patch the same working-memory part at once: the second
//! waits for the first (the session's write lock) and merges into what it
//! committed, so both patches survive. A refresh of a project's structure
//! waits for an entry being tied to the project (the project's lock).

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
    let returned = second.join().unwrap().expect("no error reaches the second patch");
    let expected = serde_json::json!({"base": true, "first": 1, "second": 2});
    assert_eq!(serde_json::from_str::<serde_json::Value>(&returned).unwrap(), expected);
    let stored: String = setup
        .query_one("SELECT agent_memory.wm_get('wm', 'fetched_context')::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(serde_json::from_str::<serde_json::Value>(&stored).unwrap(), expected);
    drop(setup);
    drop_database(db);
}

/// A database with session `wm` and project `proj` of one node `a`, and
/// the statements `extra` run after them.
fn project_database(db: &'static str, extra: &str) -> postgres::Client {
    let mut setup = fresh_database(db);
    setup
        .batch_execute(&format!(
            "SELECT agent_memory.create_session('ana', session_id => 'wm');
             SELECT agent_memory.graph_create('proj', 'A', NULL, NULL, ARRAY['__root__'], node_id => 'a');
             {extra}"
        ))
        .unwrap();
    setup
}

/// `wm_refresh_structure('proj')` in a connection of its own, once the
/// caller has seen it wait (the lock it waits for is named by `what`).
fn refresh_once_waiting(
    setup: &mut postgres::Client, db: &'static str, what: &str,
) -> thread::JoinHandle<Result<i32, postgres::Error>> {
    let refresh = thread::spawn(move || {
        connect(db)
            .query_one("SELECT agent_memory.wm_refresh_structure('proj')", &[])
            .map(|row| row.get::<_, i32>(0))
    });
    wait_for_lock_waiter(setup, db, "wm_refresh_structure", what);
    refresh
}

/// A refresh of a project's structure waits for an entry being tied to the
/// project, then rebuilds it too: the entry's index, read before a node was
/// added, would otherwise stay without it.
#[test]
fn a_refresh_waits_for_an_entry_being_tied_and_rebuilds_it() {
    let db = "am_it_wm_refresh_init";
    let mut setup = project_database(db, "");

    let mut first = connect(db);
    first.batch_execute("BEGIN").unwrap();
    first.batch_execute("SELECT agent_memory.wm_init('wm', 'a', 'proj')").unwrap();
    // A node added after the entry's index was read.
    setup
        .batch_execute(
            "SELECT agent_memory.graph_create('proj', 'B', NULL, NULL, ARRAY['__root__'], node_id => 'b')",
        )
        .unwrap();

    let refresh =
        refresh_once_waiting(&mut setup, db, "the refresh never waited for the entry being tied");
    first.batch_execute("COMMIT").unwrap();
    let changed = refresh.join().unwrap().expect("the refresh succeeds");
    assert!(changed >= 1, "the refresh rebuilt {changed} entries");

    let nodes: Vec<String> = setup
        .query(
            "SELECT n ->> 'id' FROM pg_catalog.jsonb_array_elements(
               agent_memory.wm_get('wm', 'project_structure', 'a') -> 'project_graph' -> 'nodes') n
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(nodes, ["a", "b"]);
    drop(setup);
    drop_database(db);
}

/// A refresh that waits for a session never holds the project's lock
/// meanwhile: a transaction that wrote the session and then ties an entry
/// to the project (taking the project's lock after the session's) goes on,
/// where the two would otherwise wait for each other (40P01).
#[test]
fn a_refresh_waiting_for_a_session_lets_its_writer_tie_entries() {
    let db = "am_it_wm_refresh_writer";
    let mut setup = project_database(db, "SELECT agent_memory.wm_init('wm', NULL, 'proj');");

    let mut writer = connect(db);
    writer
        .batch_execute("BEGIN; SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"x\": 1}');")
        .unwrap();
    let refresh = refresh_once_waiting(&mut setup, db, "the refresh never waited for the session");
    writer
        .batch_execute("SELECT agent_memory.set_active_node('wm', 'a'); COMMIT;")
        .expect("the writer ties its entry while the refresh waits");
    refresh.join().unwrap().expect("the refresh succeeds");
    drop(writer);
    drop(setup);
    drop_database(db);
}
