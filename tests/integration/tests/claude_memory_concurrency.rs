//! Concurrent calls of Claude's memory tool: edits of one file from many
//! connections are applied one after the other (none lost), of concurrent
//! creates of one path exactly one succeeds, and creates, deletes and
//! renames that keep empty directories in one scope never fail or leave a
//! directory where a file is.

use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database};

fn claude(client: &mut postgres::Client, request: &str) -> String {
    client
        .query_one("SELECT agent_memory.claude_memory('s', $1::text::jsonb)", &[&request])
        .unwrap()
        .get(0)
}

/// The files scope 's' counts, and the files it holds.
fn counted_and_stored(client: &mut postgres::Client) -> (i64, i64) {
    let row = client
        .query_one(
            "SELECT s.files::int8, (SELECT count(*) FROM agent_memory.memory_files f WHERE f.scope = 's')
             FROM agent_memory.memory_scopes s WHERE s.scope = 's'",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn concurrent_inserts_into_one_file_all_land() {
    let db = "am_it_claude_insert";
    let mut setup = fresh_database(db);
    assert_eq!(
        claude(
            &mut setup,
            r#"{"command": "create", "path": "/memories/log.md", "file_text": "end\n"}"#
        ),
        "File created successfully at: /memories/log.md"
    );
    const WRITERS: usize = 4;
    const INSERTS: usize = 25;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(db);
                for i in 0..INSERTS {
                    let answer = claude(
                        &mut client,
                        &format!(
                            r#"{{"command": "insert", "path": "/memories/log.md", "insert_line": 0, "insert_text": "[{w}:{i}]"}}"#
                        ),
                    );
                    assert_eq!(answer, "The file /memories/log.md has been edited.");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let content: String = setup
        .query_one(
            "SELECT content FROM agent_memory.memory_files WHERE scope = 's' AND path = '/log.md'",
            &[],
        )
        .unwrap()
        .get(0);
    let lines: Vec<&str> = content.lines().collect();
    assert_eq!(lines.len(), WRITERS * INSERTS + 1, "{content}");
    assert_eq!(lines.last(), Some(&"end"));
    for w in 0..WRITERS {
        // Each writer's lines are all there, newest on top.
        let mine: Vec<&str> =
            lines.iter().copied().filter(|l| l.starts_with(&format!("[{w}:"))).collect();
        let expected: Vec<String> = (0..INSERTS).rev().map(|i| format!("[{w}:{i}]")).collect();
        assert_eq!(mine, expected);
    }
    drop(setup);
    drop_database(db);
}

#[test]
fn of_concurrent_creates_of_one_path_one_wins() {
    let db = "am_it_claude_create";
    let setup = fresh_database(db);
    const CREATORS: usize = 4;
    const ROUNDS: usize = 20;
    let creators: Vec<_> = (0..CREATORS)
        .map(|c| {
            thread::spawn(move || {
                let mut client = connect(db);
                (0..ROUNDS)
                    .map(|r| {
                        claude(
                            &mut client,
                            &format!(
                                r#"{{"command": "create", "path": "/memories/race/{r}.md", "file_text": "by {c}"}}"#
                            ),
                        )
                    })
                    .collect::<Vec<String>>()
            })
        })
        .collect();
    let answers: Vec<Vec<String>> = creators.into_iter().map(|c| c.join().unwrap()).collect();
    for r in 0..ROUNDS {
        let created = answers
            .iter()
            .filter(|a| a[r] == format!("File created successfully at: /memories/race/{r}.md"))
            .count();
        let refused = answers
            .iter()
            .filter(|a| a[r] == format!("File /memories/race/{r}.md already exists"))
            .count();
        assert_eq!((created, refused), (1, CREATORS - 1), "round {r}");
    }
    let mut setup = setup;
    assert_eq!(counted_and_stored(&mut setup), (ROUNDS as i64, ROUNDS as i64));
    drop(setup);
    drop_database(db);
}

#[test]
fn creates_deletes_and_renames_in_one_scope_keep_the_tree_whole() {
    let db = "am_it_claude_tree";
    let mut setup = fresh_database(db);
    const WORKERS: usize = 4;
    const ROUNDS: usize = 40;
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(db);
                for r in 0..ROUNDS {
                    let d = r % 3;
                    let request = match (r + w) % 4 {
                        0 => format!(
                            r#"{{"command": "create", "path": "/memories/d{d}/e/{w}.md", "file_text": "{r}"}}"#
                        ),
                        1 => format!(r#"{{"command": "delete", "path": "/memories/d{d}/e/{w}.md"}}"#),
                        2 => format!(
                            r#"{{"command": "rename", "old_path": "/memories/d{d}", "new_path": "/memories/m/d{d}-{w}-{r}"}}"#
                        ),
                        _ => r#"{"command": "delete", "path": "/memories/m"}"#.to_string(),
                    };
                    // Any answer will do; an SQL error (a deadlock) panics.
                    claude(&mut client, &request);
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let row = setup
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.memory_directories d
                     WHERE EXISTS (SELECT FROM agent_memory.memory_files f
                                   WHERE f.scope = d.scope
                                     AND (f.path = d.path OR starts_with(d.path, f.path || '/')))),
                    coalesce((SELECT s.files::int8 FROM agent_memory.memory_scopes s WHERE s.scope = 's'), 0)
                    - (SELECT count(*) FROM agent_memory.memory_files f WHERE f.scope = 's')
                    - (SELECT count(*) FROM agent_memory.memory_directories d WHERE d.scope = 's')",
            &[],
        )
        .unwrap();
    // A scope left with nothing has no row: its bound is 0.
    let (under_files, room): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!(under_files, 0, "a kept directory at or under a file");
    assert!(room >= 0, "the scope's bound is below its files and directories");
    drop(setup);
    drop_database(db);
}

/// A rename that found the scope's row gone (deleted by a transaction that
/// then created a file, making a new row) still locks the scope: a
/// creation waits for it, as it would for a rename in a scope with a row.
/// Were the rename to go on unlocked, a creation could lock the scope and
/// then wait for a file the rename moves, while the rename waits for the
/// scope: a deadlock.
#[test]
fn a_rename_locks_a_scope_whose_row_was_made_again() {
    let db = "am_it_claude_scope_row";
    let mut first = fresh_database(db);
    claude(&mut first, r#"{"command": "create", "path": "/memories/z.md", "file_text": "z"}"#);
    first.batch_execute("BEGIN").unwrap();
    claude(&mut first, r#"{"command": "delete", "path": "/memories/z.md"}"#);
    let mut renamer = connect(db);
    let renamer_pid: i32 = renamer.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let (renamed_tx, renamed_rx) = std::sync::mpsc::channel();
    let (finish_tx, finish_rx) = std::sync::mpsc::channel::<()>();
    let rename = thread::spawn(move || {
        renamer.batch_execute("BEGIN").unwrap();
        let answer = claude(
            &mut renamer,
            r#"{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}"#,
        );
        renamed_tx.send(answer).unwrap();
        finish_rx.recv().unwrap();
        renamer.batch_execute("COMMIT").unwrap();
    });
    // The rename waits for the scope's row, which the delete removed.
    let mut watcher = connect(db);
    while !watcher
        .query_one(
            "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
            &[&renamer_pid],
        )
        .unwrap()
        .get::<_, bool>(0)
    {
        thread::sleep(std::time::Duration::from_millis(10));
    }
    claude(&mut first, r#"{"command": "create", "path": "/memories/a/x.md", "file_text": "x"}"#);
    first.batch_execute("COMMIT").unwrap();
    assert_eq!(renamed_rx.recv().unwrap(), "Successfully renamed /memories/a to /memories/b");
    // The rename's transaction is open: a creation waits for it.
    watcher.batch_execute("SET lock_timeout = '200ms'").unwrap();
    let error = watcher
        .query_one(
            "SELECT agent_memory.claude_memory('s', $1::text::jsonb)",
            &[&r#"{"command": "create", "path": "/memories/c.md", "file_text": "c"}"#],
        )
        .expect_err("a creation went ahead of an open rename");
    assert_eq!(error.code(), Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE), "{error}");
    finish_tx.send(()).unwrap();
    rename.join().unwrap();
    assert_eq!(
        claude(
            &mut watcher,
            r#"{"command": "create", "path": "/memories/c.md", "file_text": "c"}"#
        ),
        "File created successfully at: /memories/c.md"
    );
    assert_eq!(counted_and_stored(&mut watcher), (2, 2));
    drop((first, watcher));
    drop_database(db);
}

/// A delete or a rename that finds nothing in a scope without a row
/// leaves no row behind.
#[test]
fn refused_deletes_and_renames_leave_no_scope_row() {
    let db = "am_it_claude_no_scope_row";
    let mut client = fresh_database(db);
    claude(&mut client, r#"{"command": "delete", "path": "/memories/none.md"}"#);
    claude(
        &mut client,
        r#"{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}"#,
    );
    let rows: i64 =
        client.query_one("SELECT count(*) FROM agent_memory.memory_scopes", &[]).unwrap().get(0);
    assert_eq!(rows, 0);
    drop(client);
    drop_database(db);
}
