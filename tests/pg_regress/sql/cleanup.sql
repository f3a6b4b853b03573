-- cleanup_expired(): removes expired sessions (with all they own) and
-- expired entries, in batches, and records each run.

SELECT agent_memory.create_session('u', session_id => 'live');
SELECT agent_memory.create_session('u', session_id => 'idle');
SELECT agent_memory.kv_set('idle', 'k' || i, to_jsonb(i)) ->> 'stored' AS stored
FROM generate_series(1, 3) i;
SELECT agent_memory.kv_set('live', 'k' || i, to_jsonb(i)) ->> 'stored' AS stored
FROM generate_series(1, 5) i;
-- 'idle' expires; two of 'live''s entries expire.
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'idle';
UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 second'
WHERE session_id = 'live' AND key IN ('k1', 'k2');

-- Batches of 1: two kinds, each ends with a short batch.
SELECT agent_memory.cleanup_expired(1) - 'run_id' AS removed;
SELECT session_id, count(*) FROM agent_memory.kv_entries GROUP BY 1 ORDER BY 1;
SELECT session_id FROM agent_memory.sessions ORDER BY 1;
-- Nothing left to do.
SELECT agent_memory.cleanup_expired() - 'run_id' AS removed;

-- Runs are recorded.
SELECT triggered_by, sessions_deleted, entries_deleted, batches, error,
       finished_at >= started_at AS ordered
FROM agent_memory.cleanup_runs ORDER BY run_id;

SELECT agent_memory.cleanup_expired(0);
\echo :LAST_ERROR_SQLSTATE

-- A run of equal expiries (one statement wrote them all) is removed in a
-- number of batches that grows with the logarithm of its length, not with
-- its length: all batches of one call share a transaction, and each batch
-- that ends inside the run doubles the next (10, 10, 20, ..., 640 here).
SELECT agent_memory.create_session('u', session_id => 'many') AS many;
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
SELECT 'many', 'k' || i, '1', 1, now() - interval '1 minute' FROM generate_series(1, 1000) i;
SELECT agent_memory.cleanup_expired(10) - 'run_id' AS removed;
SELECT count(*) AS left_behind FROM agent_memory.kv_entries WHERE session_id = 'many';

-- Where the next batch starts reads back as the same instant whatever the
-- date style and time zone (written as text there, IST named Israel's
-- zone, not India's, and the run stopped hours short).
SELECT agent_memory.create_session('u', session_id => 'styled') AS styled;
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
SELECT 'styled', 'k' || i, '1', 1, now() - i * interval '10 minutes' FROM generate_series(1, 6) i;
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Kolkata';
SELECT agent_memory.cleanup_expired(2) IS NOT NULL AS ran;
SELECT count(*) AS left_behind FROM agent_memory.kv_entries WHERE session_id = 'styled';
RESET DateStyle;
RESET TimeZone;
SELECT agent_memory.end_session('styled');

-- Entries are deleted directly first, in a subtransaction of the
-- extension's own. An error there (here, a trigger of the application's)
-- reaches the caller with its own SQLSTATE, changes nothing, and leaves
-- the caller's transaction usable: no half-open subtransaction. After a
-- call that succeeds, the caller's lock_timeout is back in force.
SELECT agent_memory.create_session('u', session_id => 'guarded') AS guarded;
SELECT agent_memory.kv_set('guarded', 'k', '1', ttl => interval '1 microsecond') ->> 'stored' AS stored;
CREATE FUNCTION public.refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'this application keeps its entries'; END $$;
CREATE TRIGGER refuse_delete BEFORE DELETE ON agent_memory.kv_entries
    FOR EACH ROW EXECUTE FUNCTION public.refuse_delete();
SELECT agent_memory.cleanup_expired();
\echo :LAST_ERROR_SQLSTATE
SELECT 'usable' AS after_the_error;
SET lock_timeout = '5s';
BEGIN;
SAVEPOINT before_cleanup;
SELECT agent_memory.cleanup_expired();
ROLLBACK TO SAVEPOINT before_cleanup;
SHOW lock_timeout;
SELECT count(*) AS kept FROM agent_memory.kv_entries WHERE session_id = 'guarded';
COMMIT;
RESET lock_timeout;
DROP TRIGGER refuse_delete ON agent_memory.kv_entries;
DROP FUNCTION public.refuse_delete();
BEGIN;
SET LOCAL lock_timeout = '5s';
SELECT agent_memory.cleanup_expired() - 'run_id' AS removed;
SHOW lock_timeout;
COMMIT;

-- Expiries in a year BC, or at -infinity (which only direct writes store),
-- go in order with the rest, batch after batch.
SELECT agent_memory.create_session('u', session_id => 'eras');
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
SELECT 'eras', 'bc' || i, '1', 0, timestamptz '4000-01-01 00:00:00+00 BC' + i * interval '1 day'
FROM generate_series(1, 3) i;
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
VALUES ('eras', 'minus', '1', 0, '-infinity'), ('eras', 'recent', '1', 0, now() - interval '1 minute'),
       ('eras', 'live', '1', 0, now() + interval '1 day');
SELECT agent_memory.cleanup_expired(2) ->> 'entries' AS entries;
SELECT key FROM agent_memory.kv_entries WHERE session_id = 'eras';
SELECT agent_memory.end_session('eras');

-- The history is bounded: recording a run drops all but the newest
-- agent_memory.cleanup_history runs.
SET agent_memory.cleanup_history = 3;
SELECT count(*) FROM (SELECT agent_memory.cleanup_expired() FROM generate_series(1, 5)) AS runs;
SELECT count(*) AS runs_kept, max(run_id) - min(run_id) AS id_span FROM agent_memory.cleanup_runs;
RESET agent_memory.cleanup_history;

-- Leave the database empty for the next suite.
DELETE FROM agent_memory.sessions;
