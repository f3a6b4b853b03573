//! A working-memory write refuses a session that ended or expired with
//! P0002, also when the writing connection remembers the session as active
//! from its previous write (see src/sessions/cache.rs): the deletion, or the
//! passing of its idle timeout, is noticed.

use std::thread::sleep;
use std::time::Duration;

use agent_memory_integration::{connect, drop_database, fresh_database};

fn wm_set(client: &mut postgres::Client, session: &str, value: &str) -> Result<bool, String> {
    client
        .query_one(
            "SELECT agent_memory.wm_set($1, 'working_history', to_jsonb($2::text))",
            &[&session, &value],
        )
        .map(|row| row.get(0))
        .map_err(|e| {
            e.as_db_error().map(|db| db.code().code().to_owned()).unwrap_or_else(|| e.to_string())
        })
}

#[test]
fn a_session_ended_or_deleted_elsewhere_or_expired_is_refused() {
    let db = "am_it_wm_sessions";
    let mut writer = fresh_database(db);
    let mut other = connect(db);
    writer
        .batch_execute(
            "SELECT agent_memory.create_session('ana', session_id => 'ended');
             SELECT agent_memory.create_session('ana', session_id => 'deleted');
             SELECT agent_memory.create_session('ana', session_id => 'brief', idle_timeout => '1 second');",
        )
        .unwrap();

    // Ended by another connection right after this one wrote to it.
    assert_eq!(wm_set(&mut writer, "ended", "one"), Ok(true));
    other.batch_execute("SELECT agent_memory.end_session('ended')").unwrap();
    assert_eq!(wm_set(&mut writer, "ended", "two"), Err("P0002".into()));

    // Ended by this connection, in the transaction that writes next.
    assert_eq!(wm_set(&mut writer, "mine", "one"), Err("P0002".into()));
    writer
        .batch_execute("SELECT agent_memory.create_session('ana', session_id => 'mine')")
        .unwrap();
    assert_eq!(wm_set(&mut writer, "mine", "one"), Ok(true));
    writer.batch_execute("BEGIN; SELECT agent_memory.end_session('mine')").unwrap();
    assert_eq!(wm_set(&mut writer, "mine", "two"), Err("P0002".into()));
    writer.batch_execute("ROLLBACK").unwrap();

    // Deleted by hand, not through the extension.
    assert_eq!(wm_set(&mut writer, "deleted", "one"), Ok(true));
    other.batch_execute("DELETE FROM agent_memory.sessions WHERE session_id = 'deleted'").unwrap();
    assert_eq!(wm_set(&mut writer, "deleted", "two"), Err("P0002".into()));

    // Idle past its own timeout.
    assert_eq!(wm_set(&mut writer, "brief", "one"), Ok(true));
    sleep(Duration::from_millis(1500));
    assert_eq!(wm_set(&mut writer, "brief", "two"), Err("P0002".into()));

    // What a rolled back transaction saw is not remembered: here it renewed
    // the session, wrote, and rolled back, so the session still expires
    // at its last committed activity.
    writer
        .batch_execute(
            "SELECT agent_memory.create_session('ana', session_id => 'rolled', idle_timeout => '2 seconds');
             UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1.5 seconds'
             WHERE session_id = 'rolled';",
        )
        .unwrap();
    // (A batch holding BEGIN would take the lines above into its transaction.)
    writer
        .batch_execute(
            "BEGIN;
             SELECT agent_memory.renew_activity('rolled');
             SELECT agent_memory.wm_set('rolled', 'working_history', '\"one\"');
             ROLLBACK;",
        )
        .unwrap();
    sleep(Duration::from_millis(800));
    assert_eq!(wm_set(&mut writer, "rolled", "two"), Err("P0002".into()));

    // Nothing was written to any of them after they went.
    let rows: i64 = other
        .query_one("SELECT count(*) FROM agent_memory.wm_parts WHERE value IN ('\"two\"')", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 0);
    drop(writer);
    drop(other);
    drop_database(db);
}
