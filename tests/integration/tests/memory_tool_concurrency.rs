//! Concurrent memory tool commands: appends to one file from many
//! connections all land, also when the file does not exist yet; a
//! directory delete racing appends leaves every file either whole or gone.

use std::thread;

use agent_memory_integration::{connect, drop_database, fresh_database};

fn tool(client: &mut postgres::Client, request: &str) -> serde_json::Value {
    let text: String = client
        .query_one(
            "SELECT agent_memory.memory_tool('s', $1::text::jsonb)::text",
            &[&request],
        )
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
        .query_one(
            "SELECT files FROM agent_memory.memory_scopes WHERE scope = 's'",
            &[],
        )
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
        .query(
            "SELECT path, content FROM agent_memory.memory_files WHERE scope = 's'",
            &[],
        )
        .unwrap();
    for row in &rows {
        let content: String = row.get(1);
        assert!(
            content
                .split_terminator(';')
                .all(|piece| piece == "start" || piece.starts_with('r')),
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
    assert_eq!(
        counted as usize,
        rows.len(),
        "the scope's counter matches its files"
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
