//! The cleanup under statistics that do not know what expired: entries
//! written or expired since the last ANALYZE. A batch must read about the
//! rows it removes, whatever the planner expects; a plan that reads every
//! expired entry for each batch makes a run quadratic.
//!
//! Counts come from `pg_stat_xact_user_tables`: the tuples the calling
//! transaction read from kv_entries, by sequential and by index scans.

use agent_memory_integration::{drop_database, fresh_database};
use postgres::Client;

const DB: &str = "agent_memory_cleanup_statistics";

/// A session with `n` entries, analysed while none had expired, then all
/// expired (as short-TTL writes after an ANALYZE leave them). Autovacuum is
/// off for the table, so nothing corrects the statistics meanwhile.
fn entries_expired_since_analyze(client: &mut Client, n: i32) {
    client
        .batch_execute(
            "ALTER TABLE agent_memory.kv_entries SET (autovacuum_enabled = false);
             SELECT agent_memory.create_session('stats', session_id => 'stale');",
        )
        .unwrap();
    client
        .execute(
            "INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'stale', 'k' || i, to_jsonb(i), 1, now() + interval '1 day' + i * interval '1 second'
             FROM generate_series(1, $1) i",
            &[&n],
        )
        .unwrap();
    client.batch_execute("ANALYZE agent_memory.kv_entries").unwrap();
    client
        .batch_execute(
            "UPDATE agent_memory.kv_entries
             SET expires_at = now() - interval '1 hour' + substr(key, 2)::int * interval '1 millisecond'",
        )
        .unwrap();
}

#[test]
fn a_cleanup_reads_each_expired_entry_a_bounded_number_of_times_on_stale_statistics() {
    let n = 20_000;
    let mut client = fresh_database(DB);
    entries_expired_since_analyze(&mut client, n);
    let mut tx = client.transaction().unwrap();
    let before = tuples_read_in(&mut tx);
    let removed: i32 = tx
        .query_one(
            "SELECT (agent_memory.cleanup_expired(batch_size => 100) ->> 'entries')::int",
            &[],
        )
        .unwrap()
        .get(0);
    let read = tuples_read_in(&mut tx) - before;
    tx.commit().unwrap();
    assert_eq!(removed, n, "every expired entry removed");
    // A linear run reads each entry a few times (the batch's pick, the
    // first try that a held row may undo, where the next batch starts); a
    // quadratic one reads about n * n / batch_size = 4,000,000.
    assert!(
        read <= 5 * i64::from(n),
        "the cleanup read {read} tuples to remove {n} entries in batches of 100"
    );
    drop(client);
    drop_database(DB);
}

/// Tuples the transaction has read from kv_entries so far.
fn tuples_read_in(tx: &mut postgres::Transaction<'_>) -> i64 {
    tx.query_one(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
         FROM pg_stat_xact_user_tables WHERE relid = 'agent_memory.kv_entries'::regclass",
        &[],
    )
    .unwrap()
    .get(0)
}
