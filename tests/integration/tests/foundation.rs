//! The extension as a client sees it: preloaded settings, and a pg_dump /
//! pg_restore round trip that keeps the extension's tables and rows.

use std::process::Command;

use agent_memory_integration::{
    connect, drop_database, fresh_database, pg_program, program_args, recreate_database,
};

#[test]
fn preloaded_settings_exist_before_any_function_is_called() {
    // A brand-new connection has not loaded the library itself; the settings
    // are there because the postmaster preloaded it.
    let mut client = connect("postgres");
    let row = client
        .query_one("SELECT current_setting('shared_preload_libraries'), current_setting('agent_memory.kv_word_budget')", &[])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "agent_memory");
    assert_eq!(row.get::<_, String>(1), "600");
}

#[test]
fn pg_dump_and_restore_keep_the_tables_and_their_rows() {
    let source = "am_it_dump_source";
    let target = "am_it_dump_target";
    let mut client = fresh_database(source);
    client
        .batch_execute(
            "INSERT INTO agent_memory.sessions (session_id, user_id, project_id, metadata, idle_timeout)
             VALUES ('s-1', 'alice', 'p-1', '{\"tier\": \"pro\", \"n\": 12345678901234567890}', '15 minutes'),
                    ('s-2', 'bob', NULL, '{}', NULL)",
        )
        .unwrap();
    client
        .batch_execute(
            "SELECT agent_memory.kv_set('s-1', 'goal', '\"book a table for two\"');
             SELECT agent_memory.update_context('s-1', '{\"n\": 12345678901234567890.5, \"tags\": [\"a\", \"b\"]}');
             SELECT agent_memory.append_message('s-2', 'user', 'hello', keep => 2);
             SELECT agent_memory.append_message('s-2', 'assistant', 'hi', node_id => 'n1', keep => 2);
             SELECT agent_memory.graph_create('alice', 'Plans', '', 'See [[trip]]', ARRAY['__root__'], node_id => 'plans');
             SELECT agent_memory.graph_write('alice', 'plans', 'Plans 2', NULL, NULL, change_description => 'retitle')",
        )
        .unwrap();
    let snapshot = |client: &mut postgres::Client| -> Vec<String> {
        client
            .query(
                "SELECT to_jsonb(s)::text FROM agent_memory.sessions s
                 UNION ALL
                 SELECT to_jsonb(k)::text FROM agent_memory.kv_entries k
                 UNION ALL
                 SELECT to_jsonb(t)::text FROM agent_memory.message_threads t
                 UNION ALL
                 SELECT to_jsonb(m)::text FROM agent_memory.thread_messages m
                 UNION ALL
                 SELECT to_jsonb(g)::text FROM agent_memory.graph_nodes g
                 UNION ALL
                 SELECT to_jsonb(v)::text FROM agent_memory.graph_node_versions v
                 ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    };
    let before = snapshot(&mut client);
    assert_eq!(
        before.len(),
        11,
        "two sessions (with their message counters), three entries, two threads of one message each, a graph node and its version"
    );

    let dump =
        std::env::temp_dir().join(format!("agent_memory_dump_{}.custom", std::process::id()));
    let status = Command::new(pg_program("pg_dump"))
        .args(program_args(source))
        .args(["--format=custom", "--file"])
        .arg(&dump)
        .status()
        .expect("run pg_dump");
    assert!(status.success(), "pg_dump failed");

    recreate_database(&mut connect("postgres"), target);
    let status = Command::new(pg_program("pg_restore"))
        .args(program_args(target))
        .arg("--exit-on-error")
        .arg(&dump)
        .status()
        .expect("run pg_restore");
    assert!(status.success(), "pg_restore failed");

    let mut restored = connect(target);
    assert_eq!(snapshot(&mut restored), before);
    let same_version: bool = restored
        .query_one("SELECT extversion = agent_memory.version() FROM pg_extension WHERE extname = 'agent_memory'", &[])
        .unwrap()
        .get(0);
    assert!(same_version, "the restored extension is the installed library's version");

    std::fs::remove_file(&dump).ok();
    drop(client);
    drop(restored);
    drop_database(source);
    drop_database(target);
}
