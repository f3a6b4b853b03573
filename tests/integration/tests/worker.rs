//! The cleanup background worker, against a cluster that preloads the
//! library with agent_memory.cleanup_interval = 1s (scripts/test.sh).

use std::time::Duration;

use agent_memory_integration::{
    SystemSettings, connect, next_cleanup_run, wait_until, worker_database, worker_pid,
};
use postgres::Client;

/// A session with `n` entries, of which the first `expired` have expired.
fn session_with_entries(client: &mut Client, id: &str, n: i32, expired: i32) {
    client
        .execute(
            "SELECT agent_memory.create_session('worker-test', session_id => $1)",
            &[&id],
        )
        .unwrap();
    client
        .execute(
            "SELECT agent_memory.kv_set($1, 'k' || i, to_jsonb(i)) FROM generate_series(1, $2) i",
            &[&id, &n],
        )
        .unwrap();
    client
        .execute(
            "UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 second'
             WHERE session_id = $1 AND substr(key, 2)::int <= $2",
            &[&id, &expired],
        )
        .unwrap();
}

fn stored_entries(client: &mut Client, id: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM agent_memory.kv_entries WHERE session_id = $1",
            &[&id],
        )
        .unwrap()
        .get(0)
}

#[test]
fn the_worker_runs_under_its_own_name_in_its_database() {
    let mut client = worker_database();
    let (running, _) = wait_until(Duration::from_secs(10), || {
        worker_pid(&mut client).is_some()
    });
    assert!(
        running,
        "no 'agent_memory cleanup' backend in pg_stat_activity"
    );
    let database: String = client
        .query_one(
            "SELECT datname FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(database, "postgres");
}

#[test]
fn the_worker_removes_expired_rows_and_keeps_live_ones() {
    let mut client = worker_database();
    let first_run = next_cleanup_run(&mut client);
    session_with_entries(&mut client, "w-remove", 10, 4);
    client
        .execute(
            "SELECT agent_memory.create_session('worker-test', session_id => 'w-idle')",
            &[],
        )
        .unwrap();
    client
        .execute(
            "UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'w-idle'",
            &[],
        )
        .unwrap();
    let (removed, took) = wait_until(Duration::from_secs(10), || {
        let sessions: i64 = client
            .query_one(
                "SELECT count(*) FROM agent_memory.sessions WHERE session_id = 'w-idle'",
                &[],
            )
            .unwrap()
            .get(0);
        stored_entries(&mut client, "w-remove") == 6 && sessions == 0
    });
    assert!(removed, "expired rows still there after {took:?}");
    let run = client
        .query_one(
            "SELECT sum(entries_deleted)::int8, sum(sessions_deleted)::int8, count(*) FILTER (WHERE error IS NOT NULL)
             FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND run_id >= $1",
            &[&first_run],
        )
        .unwrap();
    assert!(
        run.get::<_, i64>(0) >= 4 && run.get::<_, i64>(1) >= 1,
        "runs recorded"
    );
    assert_eq!(run.get::<_, i64>(2), 0, "no failed run");
    client
        .execute("SELECT agent_memory.end_session('w-remove')", &[])
        .unwrap();
}

/// An expired entry the application holds (locked in an open transaction)
/// neither holds the worker up nor fails its run: the worker's direct
/// delete gives up after 1 ms and the batch is redone with SKIP LOCKED, so
/// every other expired entry goes at once while the application still
/// holds its row, and that one goes once it is released.
#[test]
fn the_worker_removes_expired_entries_around_one_the_application_holds() {
    let mut client = worker_database();
    let mut holder = worker_database();
    let first_run = next_cleanup_run(&mut client);
    // Held before anything expires, so the worker cannot remove it first;
    // FOR KEY SHARE lets the expiring UPDATE below through, and stops a
    // DELETE (and FOR UPDATE, so SKIP LOCKED skips it).
    session_with_entries(&mut client, "w-held", 10, 0);
    let mut held = holder.transaction().unwrap();
    held.query_one(
        "SELECT key FROM agent_memory.kv_entries WHERE session_id = 'w-held' AND key = 'k3' FOR KEY SHARE",
        &[],
    )
    .unwrap();
    client
        .execute(
            "UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 second'
             WHERE session_id = 'w-held' AND substr(key, 2)::int <= 6",
            &[],
        )
        .unwrap();
    let (around, took) = wait_until(Duration::from_secs(10), || {
        stored_entries(&mut client, "w-held") == 5
    });
    assert!(
        around,
        "the five expired entries nobody holds still there after {took:?}"
    );
    let kept: i64 = client
        .query_one(
            "SELECT count(*) FROM agent_memory.kv_entries WHERE session_id = 'w-held' AND key = 'k3'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(kept, 1, "the held entry is left to its holder");
    // The run that removed them gave up on the held row after 1 ms, not
    // after the worker's own lock_timeout of 1 s.
    let slowest: f64 = client
        .query_one(
            "SELECT extract(epoch FROM max(finished_at - started_at))::float8
             FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND run_id >= $1",
            &[&first_run],
        )
        .unwrap()
        .get(0);
    assert!(
        slowest < 0.5,
        "a run took {slowest} s: it waited for the held row"
    );
    held.commit().unwrap();
    let (gone, took) = wait_until(Duration::from_secs(10), || {
        stored_entries(&mut client, "w-held") == 4
    });
    assert!(gone, "the released entry still there after {took:?}");
    let failed: i64 = client
        .query_one(
            "SELECT count(*) FROM agent_memory.cleanup_runs
             WHERE triggered_by = 'worker' AND run_id >= $1 AND error IS NOT NULL",
            &[&first_run],
        )
        .unwrap()
        .get(0);
    assert_eq!(failed, 0, "no failed run");
    client
        .execute("SELECT agent_memory.end_session('w-held')", &[])
        .unwrap();
}

#[test]
fn sigterm_stops_the_worker_within_a_second_and_it_comes_back() {
    let mut client = worker_database();
    let (_, _) = wait_until(Duration::from_secs(10), || {
        worker_pid(&mut client).is_some()
    });
    let pid = worker_pid(&mut client).expect("worker running");
    let terminated: bool = client
        .query_one("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap()
        .get(0);
    assert!(terminated);
    let (gone, took) = wait_until(Duration::from_secs(3), || {
        worker_pid(&mut client) != Some(pid)
    });
    assert!(
        gone && took <= Duration::from_secs(1),
        "worker {pid} still there after {took:?}"
    );
    // The postmaster starts it again after its restart delay (5 s).
    let (back, took) = wait_until(Duration::from_secs(15), || {
        worker_pid(&mut client).is_some_and(|new| new != pid)
    });
    assert!(back, "no new worker after {took:?}");
}

#[test]
fn sighup_reloads_the_interval() {
    let mut client = worker_database();
    session_with_entries(&mut client, "w-hup", 4, 0);
    {
        // A one-hour interval: once the worker has reloaded it, expired rows stay.
        let _slow = SystemSettings::set(&[("agent_memory.cleanup_interval", "1h")]);
        std::thread::sleep(Duration::from_millis(1500));
        client
            .execute(
                "UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 second' WHERE session_id = 'w-hup'",
                &[],
            )
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(
            stored_entries(&mut client, "w-hup"),
            4,
            "the worker ignored the 1h interval"
        );
        // Leaving the block resets the setting and reloads: the SIGHUP wakes
        // the worker, which runs at once.
    }
    let (removed, took) = wait_until(Duration::from_secs(5), || {
        stored_entries(&mut client, "w-hup") == 0
    });
    assert!(removed, "rows still there {took:?} after the reload");
    client
        .execute("SELECT agent_memory.end_session('w-hup')", &[])
        .unwrap();
}

#[test]
fn an_error_is_recorded_and_the_worker_restarts_without_half_done_work() {
    let mut client = worker_database();
    session_with_entries(&mut client, "w-err", 6, 6);
    let pid = {
        let (_, _) = wait_until(Duration::from_secs(10), || {
            worker_pid(&mut client).is_some()
        });
        worker_pid(&mut client).expect("worker running")
    };
    // Hold a lock that makes the worker's delete time out (lock_timeout 1s).
    let mut locker = connect("postgres");
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE agent_memory.kv_entries IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let (failed, took) = wait_until(Duration::from_secs(10), || {
        client
            .query_one(
                "SELECT count(*) FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND error LIKE '%lock timeout%'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            > 0
    });
    tx.rollback().unwrap();
    assert!(failed, "no failed run recorded after {took:?}");
    // The failed batch left every row in place.
    assert_eq!(stored_entries(&mut client, "w-err"), 6);
    // The worker restarted and finishes the job.
    let (restarted, took) = wait_until(Duration::from_secs(15), || {
        worker_pid(&mut client).is_some_and(|new| new != pid)
    });
    assert!(restarted, "worker not restarted after {took:?}");
    let (removed, took) = wait_until(Duration::from_secs(10), || {
        stored_entries(&mut client, "w-err") == 0
    });
    assert!(removed, "rows still there {took:?} after the restart");
    client
        .execute("SELECT agent_memory.end_session('w-err')", &[])
        .unwrap();
}

#[test]
fn expired_rows_not_yet_removed_are_invisible_to_every_read() {
    // Keep the worker away for the duration of the test.
    let _slow = SystemSettings::set(&[("agent_memory.cleanup_interval", "1h")]);
    std::thread::sleep(Duration::from_millis(1500));
    let mut client = worker_database();
    session_with_entries(&mut client, "w-vis", 3, 1);
    session_with_entries(&mut client, "w-gone", 2, 0);
    client
        .execute(
            "UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'w-gone'",
            &[],
        )
        .unwrap();
    // The rows are still stored ...
    assert_eq!(stored_entries(&mut client, "w-vis"), 3);
    assert_eq!(stored_entries(&mut client, "w-gone"), 2);
    // ... and no read shows them.
    let row = client
        .query_one(
            "SELECT agent_memory.kv_get('w-vis', 'k1') IS NULL,
                    NOT agent_memory.kv_has('w-vis', 'k1'),
                    NOT agent_memory.kv_get_all('w-vis') ? 'k1',
                    NOT (agent_memory.build_context('w-vis') -> 'memory') ? 'k1',
                    (agent_memory.build_context('w-vis', ARRAY['k1']) -> 'memory') = '{}',
                    agent_memory.kv_get('w-gone', 'k1') IS NULL,
                    agent_memory.kv_get_all('w-gone') IS NULL,
                    NOT agent_memory.is_active('w-gone'),
                    agent_memory.build_context('w-gone') ? 'error',
                    NOT agent_memory.renew_activity('w-gone')",
            &[],
        )
        .unwrap();
    for i in 0..row.len() {
        assert!(row.get::<_, bool>(i), "read {i} showed an expired row");
    }
    let kv_set_error = client
        .execute("SELECT agent_memory.kv_set('w-gone', 'k9', '1')", &[])
        .unwrap_err();
    assert_eq!(kv_set_error.code().map(|c| c.code()), Some("P0002"));
    client
        .batch_execute("DELETE FROM agent_memory.sessions")
        .unwrap();
}
