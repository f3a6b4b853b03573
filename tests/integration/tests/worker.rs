//! The cleanup background worker, against a cluster that preloads the
//! library with agent_memory.cleanup_interval = 1s (scripts/test.sh).

use std::time::Duration;

use agent_memory_integration::{
    SystemSettings, connect, next_cleanup_run, wait_until, worker_database, worker_held_off,
    worker_pid,
};
use postgres::Client;

/// A session with `n` entries, of which the first `expired` have expired.
fn session_with_entries(client: &mut Client, id: &str, n: i32, expired: i32) {
    client
        .execute("SELECT agent_memory.create_session('worker-test', session_id => $1)", &[&id])
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

/// Runs of the worker from `first_run` on whose error is LIKE `pattern`.
fn worker_runs_with_error(client: &mut Client, first_run: i64, pattern: &str) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM agent_memory.cleanup_runs
             WHERE triggered_by = 'worker' AND run_id >= $1 AND error LIKE $2",
            &[&first_run, &pattern],
        )
        .unwrap()
        .get(0)
}

/// Runs of the worker from `first_run` on that ended with an error.
fn failed_worker_runs(client: &mut Client, first_run: i64) -> i64 {
    worker_runs_with_error(client, first_run, "%")
}

fn stored_entries(client: &mut Client, id: &str) -> i64 {
    client
        .query_one("SELECT count(*) FROM agent_memory.kv_entries WHERE session_id = $1", &[&id])
        .unwrap()
        .get(0)
}

#[test]
fn the_worker_runs_under_its_own_name_in_its_database() {
    let mut client = worker_database();
    let (running, _) = wait_until(Duration::from_secs(10), || worker_pid(&mut client).is_some());
    assert!(running, "no 'agent_memory cleanup' backend in pg_stat_activity");
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
        .execute("SELECT agent_memory.create_session('worker-test', session_id => 'w-idle')", &[])
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
    // A run is recorded when it ends, after the batches that removed the
    // rows were committed: wait for it too.
    let worker_runs = |client: &mut postgres::Client| {
        client
            .query_one(
                "SELECT coalesce(sum(entries_deleted), 0)::int8, coalesce(sum(sessions_deleted), 0)::int8,
                        count(*) FILTER (WHERE error IS NOT NULL)
                 FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND run_id >= $1",
                &[&first_run],
            )
            .unwrap()
    };
    let (recorded, took) = wait_until(Duration::from_secs(10), || {
        let run = worker_runs(&mut client);
        run.get::<_, i64>(0) >= 4 && run.get::<_, i64>(1) >= 1
    });
    assert!(recorded, "runs not recorded after {took:?}");
    assert_eq!(worker_runs(&mut client).get::<_, i64>(2), 0, "no failed run");
    client.execute("SELECT agent_memory.end_session('w-remove')", &[]).unwrap();
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
    // A run's batches commit before the run is recorded: wait for both.
    let (around, took) = wait_until(Duration::from_secs(10), || {
        stored_entries(&mut client, "w-held") == 5 && worker_runs_since(&mut client, first_run) > 0
    });
    assert!(around, "the five expired entries nobody holds still there after {took:?}");
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
    assert!(slowest < 0.5, "a run took {slowest} s: it waited for the held row");
    held.commit().unwrap();
    let (gone, took) =
        wait_until(Duration::from_secs(10), || stored_entries(&mut client, "w-held") == 4);
    assert!(gone, "the released entry still there after {took:?}");
    assert_eq!(failed_worker_runs(&mut client, first_run), 0, "no failed run");
    client.execute("SELECT agent_memory.end_session('w-held')", &[]).unwrap();
}

#[test]
fn sigterm_stops_the_worker_within_a_second_and_it_comes_back() {
    let mut client = worker_database();
    let (_, _) = wait_until(Duration::from_secs(10), || worker_pid(&mut client).is_some());
    let pid = worker_pid(&mut client).expect("worker running");
    let terminated: bool =
        client.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap().get(0);
    assert!(terminated);
    let (gone, took) = wait_until(Duration::from_secs(3), || worker_pid(&mut client) != Some(pid));
    assert!(gone && took <= Duration::from_secs(1), "worker {pid} still there after {took:?}");
    // Its launcher starts it again after the restart delay (5 s).
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
        // The worker has loaded a one-hour interval: expired rows stay.
        let _held_off = worker_held_off(&mut client);
        client
            .execute(
                "UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 second' WHERE session_id = 'w-hup'",
                &[],
            )
            .unwrap();
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(stored_entries(&mut client, "w-hup"), 4, "the worker ignored the 1h interval");
        // Leaving the block resets the setting and reloads: the SIGHUP wakes
        // the worker, which runs at once.
    }
    let (removed, took) =
        wait_until(Duration::from_secs(5), || stored_entries(&mut client, "w-hup") == 0);
    assert!(removed, "rows still there {took:?} after the reload");
    client.execute("SELECT agent_memory.end_session('w-hup')", &[]).unwrap();
}

/// A batch that fails (here on a lock timeout) is undone whole and recorded
/// with the kind it left; the worker keeps running, and a later run
/// finishes the job once the lock is gone.
#[test]
fn a_failed_batch_is_undone_recorded_and_done_by_a_later_run() {
    let mut client = worker_database();
    let first_run = next_cleanup_run(&mut client);
    // No run may start before the lock below is held.
    let held_off = worker_held_off(&mut client);
    session_with_entries(&mut client, "w-err", 6, 6);
    let pid = worker_pid(&mut client).expect("worker running");
    // Hold a lock that makes the worker's delete time out (lock_timeout 1s).
    let mut locker = connect("postgres");
    let mut tx = locker.transaction().unwrap();
    tx.batch_execute("LOCK TABLE agent_memory.kv_entries IN ACCESS EXCLUSIVE MODE").unwrap();
    // Resetting the interval reloads the worker, which runs at once.
    drop(held_off);
    let (failed, took) = wait_until(Duration::from_secs(15), || {
        worker_runs_with_error(&mut client, first_run, "%entries left: %lock timeout%") > 0
    });
    tx.rollback().unwrap();
    assert!(failed, "no failed run recorded after {took:?}");
    // The failed batch left every row in place.
    assert_eq!(stored_entries(&mut client, "w-err"), 6);
    let (removed, took) =
        wait_until(Duration::from_secs(10), || stored_entries(&mut client, "w-err") == 0);
    assert!(removed, "rows still there {took:?} after the lock was released");
    assert_eq!(worker_pid(&mut client), Some(pid), "a failed batch does not end the worker");
    client.execute("SELECT agent_memory.end_session('w-err')", &[]).unwrap();
}

#[test]
fn expired_rows_not_yet_removed_are_invisible_to_every_read() {
    let mut client = worker_database();
    // Keep the worker away for the duration of the test.
    let _held_off = worker_held_off(&mut client);
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
    let kv_set_error =
        client.execute("SELECT agent_memory.kv_set('w-gone', 'k9', '1')", &[]).unwrap_err();
    assert_eq!(kv_set_error.code().map(|c| c.code()), Some("P0002"));
    client.batch_execute("DELETE FROM agent_memory.sessions").unwrap();
}

/// An expired session whose entry the application holds (an idle
/// transaction with the row locked) neither stops the worker nor fails its
/// runs: deleting that session would wait for the holder, so the worker
/// leaves it for a later run and removes every other expired session at
/// once; the held one goes once it is released.
#[test]
fn a_held_session_does_not_stop_the_worker_removing_the_others() {
    let mut client = worker_database();
    let mut holder = worker_database();
    let first_run = next_cleanup_run(&mut client);
    client
        .batch_execute(
            "SELECT agent_memory.create_session('worker-test', session_id => s)
             FROM (SELECT 'w-stall' UNION ALL SELECT 'w-other-' || i FROM generate_series(1, 50) i) ids(s);
             SELECT agent_memory.kv_set(session_id, 'k', '\"v\"') FROM agent_memory.sessions
             WHERE session_id = 'w-stall' OR session_id LIKE 'w-other-%'",
        )
        .unwrap();
    let mut held = holder.transaction().unwrap();
    held.query_one(
        "SELECT key FROM agent_memory.kv_entries WHERE session_id = 'w-stall' FOR UPDATE",
        &[],
    )
    .unwrap();
    client
        .execute(
            "UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day'
             WHERE session_id = 'w-stall' OR session_id LIKE 'w-other-%'",
            &[],
        )
        .unwrap();
    let sessions_left = |client: &mut Client, pattern: &str| -> i64 {
        client
            .query_one(
                "SELECT count(*) FROM agent_memory.sessions WHERE session_id LIKE $1",
                &[&pattern],
            )
            .unwrap()
            .get(0)
    };
    let (others_gone, took) =
        wait_until(Duration::from_secs(10), || sessions_left(&mut client, "w-other-%") == 0);
    assert!(
        others_gone,
        "{} of 50 expired sessions still there {took:?} after they expired",
        sessions_left(&mut client, "w-other-%")
    );
    assert_eq!(sessions_left(&mut client, "w-stall"), 1, "the held one waits");
    held.commit().unwrap();
    let (stall_gone, took) =
        wait_until(Duration::from_secs(10), || sessions_left(&mut client, "w-stall") == 0);
    assert!(stall_gone, "the released session still there after {took:?}");
    assert_eq!(failed_worker_runs(&mut client, first_run), 0, "no failed run");
}

/// A trigger that makes each removed entry take `seconds`: a batch of the
/// worker then runs as long as the test needs. Dropped with the value.
/// A trigger that makes each delete of an entry whose key starts with
/// `keys` take `seconds`; every delete attempted, kept or undone, takes a
/// number of `public.agent_memory_test_deletes`.
struct SlowEntryDeletes;

impl SlowEntryDeletes {
    fn install(client: &mut Client, seconds: f64, keys: &str) -> Self {
        client
            .batch_execute(&format!(
                "CREATE SEQUENCE IF NOT EXISTS public.agent_memory_test_deletes;
                 -- A session's entries go by cascade, run as the table's owner.
                 GRANT USAGE ON SEQUENCE public.agent_memory_test_deletes TO PUBLIC;
                 CREATE OR REPLACE FUNCTION public.agent_memory_test_slow_delete() RETURNS trigger
                 LANGUAGE plpgsql AS $$ BEGIN
                   PERFORM pg_catalog.nextval('public.agent_memory_test_deletes');
                   IF starts_with(OLD.key, '{keys}') THEN PERFORM pg_catalog.pg_sleep({seconds}); END IF;
                   RETURN OLD;
                 END $$;
                 CREATE TRIGGER agent_memory_test_slow_delete BEFORE DELETE ON agent_memory.kv_entries
                 FOR EACH ROW EXECUTE FUNCTION public.agent_memory_test_slow_delete()"
            ))
            .expect("install the slow trigger");
        SlowEntryDeletes
    }

    /// Deletes attempted so far, kept or undone.
    fn attempts(client: &mut Client) -> i64 {
        client
            .query_one(
                "SELECT CASE WHEN is_called THEN last_value ELSE 0 END
                 FROM public.agent_memory_test_deletes",
                &[],
            )
            .unwrap()
            .get(0)
    }
}

impl Drop for SlowEntryDeletes {
    fn drop(&mut self) {
        connect("postgres")
            .batch_execute(
                "DROP TRIGGER IF EXISTS agent_memory_test_slow_delete ON agent_memory.kv_entries;
                 DROP FUNCTION IF EXISTS public.agent_memory_test_slow_delete();
                 DROP SEQUENCE IF EXISTS public.agent_memory_test_deletes",
            )
            .ok();
    }
}

/// The worker's pid while it is inside a batch that removes entries.
fn worker_in_entries_batch(client: &mut Client) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_stat_activity
             WHERE backend_type = 'agent_memory cleanup' AND query LIKE '%removing expired entries%'
               AND backend_xid IS NOT NULL",
            &[],
        )
        .unwrap()
        .map(|row| row.get(0))
}

/// SIGTERM (pg_terminate_backend) ends the worker inside a batch, not after
/// it: here a batch would run for ten seconds.
#[test]
fn sigterm_ends_the_worker_inside_a_long_batch() {
    let mut client = worker_database();
    let slow = SlowEntryDeletes::install(&mut client, 0.02, "");
    session_with_entries(&mut client, "w-long", 500, 500);
    let (in_batch, took) =
        wait_until(Duration::from_secs(10), || worker_in_entries_batch(&mut client).is_some());
    assert!(in_batch, "the worker was not seen in a batch after {took:?}");
    let pid = worker_in_entries_batch(&mut client).expect("worker in a batch");
    std::thread::sleep(Duration::from_millis(200));
    let terminated: bool =
        client.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap().get(0);
    assert!(terminated);
    let (gone, took) = wait_until(Duration::from_secs(15), || worker_pid(&mut client) != Some(pid));
    println!("worker: exit on SIGTERM inside a batch took {} ms", took.as_millis());
    assert!(
        gone && took <= Duration::from_secs(1),
        "the worker ended {took:?} after SIGTERM (gone: {gone})"
    );
    drop(slow);
    client.execute("SELECT agent_memory.end_session('w-long')", &[]).unwrap();
}

/// A batch that runs past agent_memory.cleanup_batch_timeout ends with a
/// statement timeout and is undone (the worker enforces the limit itself,
/// as no statement timeout applies to a background worker), and the run
/// goes on with smaller batches: a slow stretch of rows does not stall the
/// cleanup.
#[test]
fn a_batch_past_its_time_limit_is_undone_and_tried_smaller() {
    let mut client = worker_database();
    let limit = SystemSettings::set(&[("agent_memory.cleanup_batch_timeout", "300ms")]);
    let slow = SlowEntryDeletes::install(&mut client, 0.02, "");
    session_with_entries(&mut client, "w-limit", 200, 200);
    // Deletes of 20 ms each: only batches of at most 14 rows fit. The
    // bound leaves room for a slow machine: a stalled cleanup never ends.
    let (gone, took) =
        wait_until(Duration::from_secs(60), || stored_entries(&mut client, "w-limit") == 0);
    assert!(gone, "entries still there {took:?} while every full batch is too slow");
    println!("worker: 200 entries of 20 ms each removed in {} ms", took.as_millis());
    let attempts = SlowEntryDeletes::attempts(&mut client);
    assert!(attempts > 200, "{attempts} deletes attempted: no batch was ended and undone");
    drop(slow);
    drop(limit);
    client.execute("SELECT agent_memory.end_session('w-limit')", &[]).unwrap();
}

/// A session or entry too slow to remove even alone is passed over: the
/// run removes the rows after it, and records what it left and why. Once
/// the row is quick to remove again, a later run takes it.
#[test]
fn a_row_too_slow_to_remove_alone_is_passed_over() {
    let mut client = worker_database();
    let first_run = next_cleanup_run(&mut client);
    let held_off = worker_held_off(&mut client);
    let limit = SystemSettings::set(&[("agent_memory.cleanup_batch_timeout", "300ms")]);
    let slow = SlowEntryDeletes::install(&mut client, 1.0, "slow");
    // An idle session that owns a slow entry, then one that does not.
    for (session, key) in [("w-stuck", "slow"), ("w-after", "quick")] {
        client
            .execute(
                "SELECT agent_memory.create_session('worker-test', session_id => $1),
                        agent_memory.kv_set($1, $2, '1')",
                &[&session, &key],
            )
            .unwrap();
    }
    client
        .execute(
            "UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day'
             WHERE session_id IN ('w-stuck', 'w-after')",
            &[],
        )
        .unwrap();
    // A live session: a slow entry expired first, two quick ones after it.
    session_with_entries(&mut client, "w-live", 2, 2);
    client
        .batch_execute(
            "SELECT agent_memory.kv_set('w-live', 'slow', '1');
             UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 minute'
             WHERE session_id = 'w-live' AND key = 'slow'",
        )
        .unwrap();
    drop(held_off);
    let sessions_left = |client: &mut Client| -> Vec<String> {
        client
            .query(
                "SELECT session_id FROM agent_memory.sessions
                 WHERE session_id IN ('w-stuck', 'w-after') ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let live_keys = |client: &mut Client| -> Vec<String> {
        client
            .query(
                "SELECT key FROM agent_memory.kv_entries WHERE session_id = 'w-live' ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    let (recorded, took) = wait_until(Duration::from_secs(30), || {
        worker_runs_with_error(
            &mut client,
            first_run,
            "sessions left: one alone took longer than agent_memory.cleanup_batch_timeout%\
             ; entries left: one alone took longer%",
        ) > 0
    });
    assert!(recorded, "no run recorded what it passed over after {took:?}");
    assert_eq!(sessions_left(&mut client), ["w-stuck"], "sessions after a run");
    assert_eq!(live_keys(&mut client), ["slow"], "entries after a run");
    drop(slow);
    let (done, took) = wait_until(Duration::from_secs(10), || {
        sessions_left(&mut client).is_empty() && live_keys(&mut client).is_empty()
    });
    assert!(done, "passed-over rows still there {took:?} after they became quick");
    drop(limit);
    client.execute("SELECT agent_memory.end_session('w-live')", &[]).unwrap();
}

/// Worker runs recorded from run `first_run` on.
fn worker_runs_since(client: &mut Client, first_run: i64) -> i64 {
    client
        .query_one(
            "SELECT count(*) FROM agent_memory.cleanup_runs WHERE triggered_by = 'worker' AND run_id >= $1",
            &[&first_run],
        )
        .unwrap()
        .get(0)
}
