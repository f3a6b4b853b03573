//! Concurrent memory tool commands: appends to one file from many
//! connections all land, also when the file does not exist yet; a
//! directory delete racing appends leaves every file either whole or gone;
//! with history kept, appends racing a delete and a creation keep every
//! version they replace.

use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database};

fn tool(client: &mut postgres::Client, request: &str) -> serde_json::Value {
    let text: String = client
        .query_one("SELECT agent_memory.memory_tool('s', $1::text::jsonb)::text", &[&request])
        .unwrap()
        .get(0);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn concurrent_appends_to_one_file_all_land() {
    let db = "am_it_memory_tool";
    let mut setup = fresh_database(db);
    const WRITERS: usize = 4;
    const APPENDS: usize = 50;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(db);
                for i in 0..APPENDS {
                    // The first appends race to create the file.
                    let answer = tool(
                        &mut client,
                        &format!(
                            r#"{{"path": "/log/shared", "command": "append", "content": "[{w}:{i}]"}}"#
                        ),
                    );
                    assert_eq!(answer["ok"], true, "{answer}");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let answer = tool(&mut setup, r#"{"path": "/log/shared", "command": "read"}"#);
    let content = answer["result"]["content"].as_str().unwrap();
    for w in 0..WRITERS {
        for i in 0..APPENDS {
            assert_eq!(
                content.matches(&format!("[{w}:{i}]")).count(),
                1,
                "append {w}:{i} landed once"
            );
        }
    }
    let files: i32 = setup
        .query_one("SELECT files FROM agent_memory.memory_scopes WHERE scope = 's'", &[])
        .unwrap()
        .get(0);
    assert_eq!(files, 1, "the file was counted once");
    drop(setup);
    drop_database(db);
}

#[test]
fn a_directory_delete_racing_appends_leaves_whole_files_or_none() {
    let db = "am_it_memory_tool_delete";
    let mut setup = fresh_database(db);
    for f in 0..20 {
        tool(
            &mut setup,
            &format!(r#"{{"path": "/dir/f{f}", "command": "append", "content": "start;"}}"#),
        );
    }
    let appender = thread::spawn(move || {
        let mut client = connect(db);
        for round in 0..30 {
            for f in 0..20 {
                tool(
                    &mut client,
                    &format!(
                        r#"{{"path": "/dir/f{f}", "command": "append", "content": "r{round};"}}"#
                    ),
                );
            }
        }
    });
    let mut deleter = connect(db);
    for _ in 0..10 {
        tool(&mut deleter, r#"{"path": "/dir", "command": "delete"}"#);
    }
    appender.join().unwrap();
    // Every file left is a run of whole appends: what a delete cut off is
    // gone entirely, and the counter matches the files.
    let rows = setup
        .query("SELECT path, content FROM agent_memory.memory_files WHERE scope = 's'", &[])
        .unwrap();
    for row in &rows {
        let content: String = row.get(1);
        assert!(
            content.split_terminator(';').all(|piece| piece == "start" || piece.starts_with('r')),
            "{content}"
        );
    }
    let counted: i32 = setup
        .query_one(
            "SELECT coalesce(sum(files), 0)::int4 FROM agent_memory.memory_scopes WHERE scope = 's'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(
        counted as usize >= rows.len(),
        "the scope's count ({counted}) bounds its files ({})",
        rows.len()
    );
    drop(setup);
    drop(deleter);
    drop_database(db);
}

#[test]
fn concurrent_updates_of_one_file_are_none_lost() {
    let db = "am_it_memory_tool_update";
    let mut setup = fresh_database(db);
    const WRITERS: usize = 4;
    const TOKENS: usize = 40;
    let mut content = String::new();
    for w in 0..WRITERS {
        for i in 0..TOKENS {
            content.push_str(&format!("[{w}:{i}]"));
        }
    }
    let created = tool(
        &mut setup,
        &serde_json::json!({"path": "/shared", "command": "append", "content": content})
            .to_string(),
    );
    assert_eq!(created["ok"], true, "{created}");
    // Each writer rewrites its own tokens of the one file: an update that
    // wrote over another's would bring a token back.
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(db);
                for i in 0..TOKENS {
                    let answer = tool(
                        &mut client,
                        &format!(
                            r#"{{"path": "/shared", "command": "update", "oldContent": "[{w}:{i}]", "content": "<{w}:{i}>"}}"#
                        ),
                    );
                    assert_eq!(answer["result"]["replaced"], 1, "{answer}");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let answer = tool(&mut setup, r#"{"path": "/shared", "command": "read"}"#);
    let content = answer["result"]["content"].as_str().unwrap();
    let mut expected = String::new();
    for w in 0..WRITERS {
        for i in 0..TOKENS {
            expected.push_str(&format!("<{w}:{i}>"));
        }
    }
    assert_eq!(content, expected);
    drop(setup);
    drop_database(db);
}

#[test]
fn concurrent_creates_and_deletes_never_pass_the_file_limit() {
    let db = "am_it_memory_tool_limit";
    let mut setup = fresh_database(db);
    const WRITERS: usize = 4;
    const LIMIT: i64 = 10;
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            thread::spawn(move || {
                let mut client = connect(db);
                client
                    .batch_execute(&format!("SET agent_memory.max_files_per_scope = {LIMIT}"))
                    .unwrap();
                let (mut created, mut deleted, mut refused) = (0i64, 0i64, 0i64);
                for i in 0..40 {
                    let answer = tool(
                        &mut client,
                        &format!(
                            r#"{{"path": "/w{w}/f{i}", "command": "append", "content": "x"}}"#
                        ),
                    );
                    if answer["ok"] == true {
                        created += 1;
                        // Delete every other file again, so the count goes
                        // down as well as up.
                        if i % 2 == 0 {
                            let gone = tool(
                                &mut client,
                                &format!(r#"{{"path": "/w{w}/f{i}", "command": "delete"}}"#),
                            );
                            assert_eq!(gone["result"]["files"], 1, "{gone}");
                            deleted += 1;
                        }
                    } else {
                        assert_eq!(answer["error"]["code"], "ENOSPC", "{answer}");
                        refused += 1;
                    }
                    let files: i64 = client
                        .query_one(
                            "SELECT count(*) FROM agent_memory.memory_files WHERE scope = 's'",
                            &[],
                        )
                        .unwrap()
                        .get(0);
                    assert!(files <= LIMIT, "{files} files, more than {LIMIT}");
                }
                (created, deleted, refused)
            })
        })
        .collect();
    let totals: Vec<(i64, i64, i64)> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let files: i64 = setup
        .query_one("SELECT count(*) FROM agent_memory.memory_files WHERE scope = 's'", &[])
        .unwrap()
        .get(0);
    let created: i64 = totals.iter().map(|t| t.0).sum();
    let deleted: i64 = totals.iter().map(|t| t.1).sum();
    let refused: i64 = totals.iter().map(|t| t.2).sum();
    assert_eq!(files, created - deleted);
    assert!(files <= LIMIT);
    assert!(refused > 0, "the limit was reached");
    drop(setup);
    drop_database(db);
}

/// A change with a precondition that may create its file (a memory-tool
/// append, a Claude-dialect create) takes the scope's row before the
/// file's, as a delete does: while it waits for the row, it holds no file
/// a delete of the scope would then wait for (a deadlock).
#[test]
fn a_change_with_a_precondition_waits_for_the_scope_before_any_file() {
    let db = "am_it_memory_tool_lock_order";
    let mut setup = fresh_database(db);
    let stored =
        tool(&mut setup, r#"{"path": "/a", "command": "append", "content": "0123456789"}"#);
    assert_eq!(stored["ok"], true, "{stored}");
    let requests = [
        (
            "SELECT agent_memory.memory_tool('s', $1::text::jsonb)::text",
            r#"{"path": "/a", "command": "append", "content": "abc", "expectedVersion": 1}"#,
            "EFBIG",
        ),
        (
            "SELECT agent_memory.claude_memory('s', $1::text::jsonb, expected_version => 1)",
            r#"{"command": "create", "path": "/memories/a", "file_text": "again"}"#,
            "already exists",
        ),
    ];
    for (call, request, answered) in requests {
        // A creation holds the scope's row until it commits.
        let mut holder = connect(db);
        holder.batch_execute("BEGIN").unwrap();
        let created =
            tool(&mut holder, r#"{"path": "/held", "command": "append", "content": "x"}"#);
        assert_eq!(created["ok"], true, "{created}");
        let mut changer = connect(db);
        let changer_pid: i32 = changer.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        let change = thread::spawn(move || {
            changer.batch_execute("SET agent_memory.max_file_bytes = 12").unwrap();
            let answer: String = changer.query_one(call, &[&request]).unwrap().get(0);
            answer
        });
        let mut watcher = connect(db);
        while !watcher
            .query_one(
                "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
                &[&changer_pid],
            )
            .unwrap()
            .get::<_, bool>(0)
        {
            thread::sleep(std::time::Duration::from_millis(10));
        }
        // The change waits for the scope's row; the file is free.
        watcher.batch_execute("BEGIN").unwrap();
        let file_free = watcher.query(
            "SELECT FROM agent_memory.memory_files WHERE scope = 's' AND path = '/a' FOR UPDATE NOWAIT",
            &[],
        );
        assert!(
            file_free.is_ok(),
            "{request}: the file was locked while the scope's row was awaited: {file_free:?}"
        );
        watcher.batch_execute("ROLLBACK").unwrap();
        holder.batch_execute("ROLLBACK").unwrap();
        let answer = change.join().unwrap();
        assert!(answer.contains(answered), "{request}: {answer}");
    }
    drop(setup);
    drop_database(db);
}

#[test]
fn appends_racing_a_delete_and_create_keep_every_version() {
    let db = "am_it_memory_tool_append_history";
    let mut setup = fresh_database(db);
    const ROUNDS: usize = 300;
    let history_on = "SET agent_memory.history_retention = 1000";
    // One connection deletes the file and creates it again, the other
    // appends: an append that saved nothing (the file was not there yet)
    // must not then append to the file created meanwhile, unsaved.
    let recreator = thread::spawn(move || {
        let mut client = connect(db);
        client.batch_execute(history_on).unwrap();
        for i in 0..ROUNDS {
            tool(&mut client, r#"{"path": "/f", "command": "delete"}"#);
            let answer = tool(
                &mut client,
                &format!(r#"{{"path": "/f", "command": "append", "content": "new {i};"}}"#),
            );
            assert_eq!(answer["ok"], true, "{answer}");
        }
    });
    let appender = thread::spawn(move || {
        let mut client = connect(db);
        client.batch_execute(history_on).unwrap();
        for i in 0..ROUNDS {
            let answer = tool(
                &mut client,
                &format!(r#"{{"path": "/f", "command": "append", "content": "more {i};"}}"#),
            );
            assert_eq!(answer["ok"], true, "{answer}");
        }
    });
    recreator.join().unwrap();
    appender.join().unwrap();
    // Every version below the file's is kept: each write made one and
    // saved the one it replaced, a delete included.
    let row = setup
        .query_one(
            "SELECT f.version,
                    (SELECT count(*) FROM agent_memory.memory_file_versions v
                     WHERE v.scope = 's' AND v.path = '/f'),
                    (SELECT string_agg(n::text, ',') FROM generate_series(1, f.version - 1) n
                     WHERE NOT EXISTS (SELECT FROM agent_memory.memory_file_versions v
                                       WHERE v.scope = 's' AND v.path = '/f' AND v.version = n))
             FROM agent_memory.memory_files f WHERE f.scope = 's' AND f.path = '/f'",
            &[],
        )
        .unwrap();
    let (current, kept, missing): (i32, i64, Option<String>) = (row.get(0), row.get(1), row.get(2));
    let kept_expected = i64::from(current - 1);
    assert_eq!(missing, None, "versions never kept (file at {current}, {kept} kept)");
    assert_eq!(kept, kept_expected, "one kept version per number");
    drop(setup);
    drop_database(db);
}
