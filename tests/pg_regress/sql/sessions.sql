-- Sessions: create, renew, end, inspect; expiry is invisible at once.
-- Errors print their SQLSTATE on the next line (psql's LAST_ERROR_SQLSTATE).

-- create_session returns the id it was given, or a generated one.
SELECT agent_memory.create_session('alice', '{"tier": "pro"}', 's-alice');
SELECT length(agent_memory.create_session('alice')) AS generated_id_length;
-- The same id for the same user is returned as it is (and renewed) ...
SELECT agent_memory.create_session('alice', '{"ignored": true}', 's-alice');
SELECT metadata FROM agent_memory.sessions WHERE session_id = 's-alice';
-- ... for another user it is a conflict.
SELECT agent_memory.create_session('bob', session_id => 's-alice');
\echo :LAST_ERROR_SQLSTATE

-- Bad arguments change nothing.
SELECT agent_memory.create_session(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', '[1, 2]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', session_id => '');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', session_id => repeat('x', 257));
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', session_id => 's-neg', idle_timeout => '-5 minutes');
\echo :LAST_ERROR_SQLSTATE
-- Positive with no part negative (a day or a month has no fixed length),
-- and at most 100 years (times past that are no timestamps).
SELECT agent_memory.create_session('alice', session_id => 's-neg', idle_timeout => '1 day -25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', session_id => 's-neg', idle_timeout => '300000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('alice', session_id => 's-neg', idle_timeout => '100 years 1 second');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS sessions_of_alice FROM agent_memory.sessions WHERE user_id = 'alice';

-- Activity.
SELECT agent_memory.is_active('s-alice'), agent_memory.is_active('nobody');
SELECT agent_memory.renew_activity('s-alice'), agent_memory.renew_activity('nobody');

-- A session with its own short timeout, made idle by moving its clock back.
SELECT agent_memory.create_session('bob', session_id => 's-bob', idle_timeout => '10 minutes');
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '11 minutes' WHERE session_id = 's-bob';
-- Expired: inactive, cannot be renewed, and is invisible to every read ...
SELECT agent_memory.is_active('s-bob'), agent_memory.renew_activity('s-bob');
SELECT agent_memory.kv_get_all('s-bob') AS all_entries, agent_memory.kv_get('s-bob', 'k') AS one_entry;
SELECT agent_memory.build_context('s-bob') - 'timestamp' AS context;
-- ... and refuses writes.
SELECT agent_memory.kv_set('s-bob', 'k', '"v"');
\echo :LAST_ERROR_SQLSTATE
-- Its id can be taken again, by anyone: the expired session is replaced.
SELECT agent_memory.create_session('carol', session_id => 's-bob');
SELECT user_id, idle_timeout FROM agent_memory.sessions WHERE session_id = 's-bob';

-- The default timeout (agent_memory.session_idle_timeout) applies when a
-- session has none of its own.
SELECT agent_memory.create_session('dave', session_id => 's-dave');
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '499 minutes' WHERE session_id = 's-dave';
SELECT agent_memory.is_active('s-dave') AS active_at_499_minutes;
-- It is one value per server (postgresql.conf, ALTER SYSTEM): a role or a
-- database with a longer one would keep sessions the cleanup removes.
SET agent_memory.session_idle_timeout = '8h';
\echo :LAST_ERROR_SQLSTATE
ALTER ROLE CURRENT_USER SET agent_memory.session_idle_timeout = '8h';
\echo :LAST_ERROR_SQLSTATE
UPDATE agent_memory.sessions SET idle_timeout = '8h' WHERE session_id = 's-dave';
SELECT agent_memory.is_active('s-dave') AS active_with_its_own_8h_timeout;
UPDATE agent_memory.sessions SET idle_timeout = NULL WHERE session_id = 's-dave';

-- Stats and per-user listing include expired sessions not yet cleaned up.
-- Durations: three sessions of 90 s, and s-dave of 1 day (now expired).
UPDATE agent_memory.sessions SET created_at = now() - interval '90 seconds', last_activity_at = now()
WHERE session_id <> 's-dave';
UPDATE agent_memory.sessions SET created_at = now() - interval '2 days', last_activity_at = now() - interval '1 day'
WHERE session_id = 's-dave';
SELECT agent_memory.session_stats();
SELECT session_id, last_activity_at - created_at AS duration, active
FROM agent_memory.user_sessions('alice') WHERE session_id = 's-alice';
SELECT session_id, active FROM agent_memory.user_sessions('dave');
SELECT count(*) FROM agent_memory.user_sessions('nobody');

-- end_session removes the session and everything it owns.
SELECT agent_memory.kv_set('s-alice', 'note', '"remember the milk"') ->> 'stored' AS stored;
SELECT agent_memory.end_session('s-alice'), agent_memory.end_session('s-alice') AS again;
SELECT count(*) AS rows_left FROM agent_memory.kv_entries WHERE session_id = 's-alice';
SELECT agent_memory.end_session('s-dave') AS ending_an_expired_session;

-- Leave the database empty for the next suite.
DELETE FROM agent_memory.sessions;
SELECT agent_memory.session_stats();
