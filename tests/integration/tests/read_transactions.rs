//! The functions that only read leave their transaction without a
//! transaction id: it stays a read-only one, whose commit has nothing to
//! flush and which uses up no transaction id. Each call runs in a new
//! connection, so that it finds nothing remembered (a session's activity,
//! prepared plans) from an earlier call.

use agent_memory_integration::{connect, drop_database, fresh_database};

#[test]
fn reads_take_no_transaction_id() {
    let db = "am_it_read_transactions";
    let mut setup = fresh_database(db);
    setup
        .batch_execute(
            "SELECT agent_memory.create_session('ana', session_id => 'reader');
             SELECT agent_memory.kv_set('reader', 'city', '\"Porto\"');
             SELECT agent_memory.append_message('reader', 'user', 'Which city?');
             SELECT agent_memory.memory_tool('ana', '{\"command\": \"create\", \"path\": \"/notes.md\", \"file_text\": \"Porto\"}');",
        )
        .unwrap();
    let reads = [
        "agent_memory.kv_get('reader', 'city')",
        "agent_memory.kv_get('reader', 'nothing')",
        "agent_memory.kv_get('no-such-session', 'city')",
        "agent_memory.kv_has('reader', 'city')",
        "agent_memory.kv_get_all('reader')",
        "agent_memory.kv_entry('reader', 'city')",
        "agent_memory.messages_json('reader')",
        "agent_memory.working_memory('reader')",
        "agent_memory.graph_read('ana', '__root__')",
        "agent_memory.memory_tool('ana', '{\"command\": \"view\", \"path\": \"/notes.md\"}')",
        "(SELECT count(*) FROM agent_memory.recall('city', session_id => 'reader'))",
    ];
    for read in reads {
        let mut client = connect(db);
        let mut transaction = client.transaction().unwrap();
        transaction
            .execute(&format!("SELECT {read}"), &[])
            .unwrap_or_else(|e| panic!("{read}: {e}"));
        let xid: Option<String> = transaction
            .query_one("SELECT pg_current_xact_id_if_assigned()::text", &[])
            .unwrap()
            .get(0);
        assert_eq!(xid, None, "{read} took a transaction id");
        transaction.commit().unwrap();
    }
    drop_database(db);
}
