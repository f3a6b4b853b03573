//! Concurrent versioned writes to one graph node never lose an update and
//! never produce two snapshots of one version.

use std::collections::{HashMap, HashSet};
use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database, wait_for_lock_waiter};

const OWNER: &str = "team";
const NODE: &str = "plan";

fn create_node(db: &str) -> postgres::Client {
    let mut setup = fresh_database(db);
    setup
        .execute(
            "SELECT agent_memory.graph_create($1, 'Plan', '', 'v1 body', ARRAY['__root__'], node_id => $2)",
            &[&OWNER, &NODE],
        )
        .unwrap();
    setup
}

fn write(client: &mut postgres::Client, body: &str, why: &str) -> Result<i32, postgres::Error> {
    client
        .query_one(
            "SELECT agent_memory.graph_write($1, $2, NULL, NULL, $3, change_description => $4)",
            &[&OWNER, &NODE, &body, &why],
        )
        .map(|row| row.get(0))
}

/// The second writer waits for the first to commit, then snapshots what the
/// first wrote: versions N+1 and N+2, both snapshots present.
#[test]
fn two_concurrent_versioned_writes_get_consecutive_versions() {
    let db = "am_it_graph_pair";
    let mut setup = create_node(db);

    let mut first = connect(db);
    first.batch_execute("BEGIN").unwrap();
    assert_eq!(write(&mut first, "first body", "first change").unwrap(), 2);

    let second = thread::spawn(move || {
        let mut second = connect(db);
        write(&mut second, "second body", "second change")
    });
    // The second writer queues on the node's row lock.
    wait_for_lock_waiter(
        &mut setup,
        db,
        "graph_write",
        "the second writer never waited for the first",
    );
    first.batch_execute("COMMIT").unwrap();
    let second_version = second.join().unwrap().expect("no error reaches the second writer");
    assert_eq!(second_version, 3);

    let snapshots: Vec<(i32, String, String)> = setup
        .query(
            "SELECT version, body, change_description FROM agent_memory.graph_node_versions
             WHERE owner = $1 AND node_id = $2 ORDER BY version",
            &[&OWNER, &NODE],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        snapshots,
        vec![
            (1, "v1 body".to_string(), "first change".to_string()),
            (2, "first body".to_string(), "second change".to_string()),
        ],
        "the second snapshot holds the first writer's state: no update lost"
    );
    let current: (i32, String) = setup
        .query_one(
            "SELECT version, body FROM agent_memory.graph_nodes WHERE owner = $1 AND node_id = $2",
            &[&OWNER, &NODE],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(current, (3, "second body".to_string()));
    drop(setup);
    drop_database(db);
}

/// Eight writers, 50 versioned writes each: every call gets its own
/// version, and the state saved at each version is the one its writer wrote.
#[test]
fn eight_versioned_writers_lose_nothing() {
    const WRITERS: usize = 8;
    const WRITES: usize = 50;
    let db = "am_it_graph_crowd";
    let mut setup = create_node(db);

    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || -> Result<Vec<(i32, String)>, String> {
                let mut client = connect(db);
                (0..WRITES)
                    .map(|i| {
                        let body = format!("writer {w} write {i}");
                        write(&mut client, &body, &format!("change {w}/{i}"))
                            .map(|version| (version, body))
                            .map_err(|e| format!("writer {w}, write {i}: {e}"))
                    })
                    .collect()
            })
        })
        .collect();
    let mut written: HashMap<i32, String> = HashMap::new();
    for writer in writers {
        for (version, body) in writer
            .join()
            .expect("writer thread panicked")
            .unwrap_or_else(|e| panic!("an error reached a caller: {e}"))
        {
            assert!(written.insert(version, body).is_none(), "version {version} returned twice");
        }
    }
    let last = (WRITERS * WRITES) as i32 + 1;
    assert_eq!(written.keys().copied().collect::<HashSet<_>>(), (2..=last).collect());

    // The state at version v (a snapshot, or the node for the last one) is
    // exactly what the call that returned v wrote.
    let mut states: HashMap<i32, String> = setup
        .query(
            "SELECT version, body FROM agent_memory.graph_node_versions WHERE owner = $1 AND node_id = $2",
            &[&OWNER, &NODE],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(states.len(), last as usize - 1, "one snapshot per earlier version");
    assert_eq!(states.get(&1).map(String::as_str), Some("v1 body"));
    let (current_version, current_body): (i32, String) = setup
        .query_one(
            "SELECT version, body FROM agent_memory.graph_nodes WHERE owner = $1 AND node_id = $2",
            &[&OWNER, &NODE],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(current_version, last);
    states.insert(current_version, current_body);
    for (version, body) in &written {
        assert_eq!(states.get(version), Some(body), "state at version {version}");
    }
    drop(setup);
    drop_database(db);
}

/// A creation locks its parents in id order, whatever order it names
/// them in: while it waits for the first, it holds none of the others,
/// so two creations naming the same parents in other orders never wait
/// for each other in a circle (a deadlock).
#[test]
fn a_creation_locks_its_parents_in_id_order() {
    let db = "am_it_graph_parent_order";
    let mut setup = fresh_database(db);
    setup
        .batch_execute(
            "SELECT agent_memory.graph_create('team', 'A', '', '', ARRAY['__root__'], node_id => 'a');
             SELECT agent_memory.graph_create('team', 'B', '', '', ARRAY['__root__'], node_id => 'b');",
        )
        .unwrap();
    // A creation under a holds a until it commits.
    let mut holder = connect(db);
    holder.batch_execute("BEGIN").unwrap();
    holder
        .execute("SELECT agent_memory.graph_create('team', 'Under a', '', '', ARRAY['a'])", &[])
        .unwrap();
    let creation = thread::spawn(move || {
        let mut creator = connect(db);
        creator
            .execute(
                "SELECT agent_memory.graph_create('team', 'Under b and a', '', '', ARRAY['b', 'a'])",
                &[],
            )
            .map(|_| ())
    });
    wait_for_lock_waiter(&mut setup, db, "Under b and a", "the creation under b and a waits for a");
    // It waits for a; b is free.
    setup.batch_execute("BEGIN").unwrap();
    let b_free = setup.query(
        "SELECT FROM agent_memory.graph_nodes WHERE owner = 'team' AND node_id = 'b' FOR UPDATE NOWAIT",
        &[],
    );
    assert!(b_free.is_ok(), "b was locked while a was awaited: {b_free:?}");
    setup.batch_execute("ROLLBACK").unwrap();
    holder.batch_execute("COMMIT").unwrap();
    creation.join().unwrap().expect("the creation under b and a");
    let refs: i64 = setup
        .query_one(
            "SELECT count(*) FROM agent_memory.graph_nodes
             WHERE owner = 'team' AND node_id IN ('a', 'b') AND cardinality(refs) = 1",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(refs, 1, "b holds one child; a holds two");
    drop(holder);
    drop(setup);
    drop_database(db);
}
