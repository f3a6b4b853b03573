-- The context builder: build_context, update_context,
-- clear_context_keys, clear_context. Errors print their SQLSTATE next.

SELECT agent_memory.create_session('u1', '{"channel": "web"}', 'ctx');

-- Several keys in one change.
SELECT agent_memory.update_context('ctx', '{"city": "São Paulo", "budget": 1200, "dates": ["2025-03-01", "2025-03-08"]}');

-- The context, without the fields that vary run to run.
SELECT agent_memory.build_context('ctx') - 'timestamp' - 'sessionCreatedAt' - 'sessionDuration' AS context;
SELECT agent_memory.build_context('ctx', include_metadata => true) -> 'sessionMetadata' AS metadata;
SELECT agent_memory.build_context('ctx', ARRAY['city', 'missing']) -> 'memory' AS only_asked_keys;
-- The varying fields have the documented shapes.
SELECT (c ->> 'timestamp') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' AS iso_timestamp,
       (c ->> 'sessionCreatedAt') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' AS iso_created,
       jsonb_typeof(c -> 'sessionDuration') AS duration_type,
       (c ->> 'sessionDuration')::numeric >= 0 AS duration_not_negative
FROM agent_memory.build_context('ctx') AS c;
-- A missing session.
SELECT agent_memory.build_context('nope') - 'timestamp' AS context;

-- update_context is all or nothing: one sensitive value refuses the batch.
SELECT agent_memory.update_context('ctx', '{"note": "fine", "token": "Bearer abcdefghijklmnopqrstu"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_has('ctx', 'note') AS note_stored;
-- A batch larger than the budget is refused whole.
SET agent_memory.kv_word_budget = 5;
SELECT agent_memory.update_context('ctx', '{"a": "one two three", "b": "four five six"}');
\echo :LAST_ERROR_SQLSTATE
-- A batch that fits evicts older entries, never its own keys.
SELECT agent_memory.update_context('ctx', '{"a": "one two", "b": "three"}');
SELECT agent_memory.kv_get_all('ctx');
RESET agent_memory.kv_word_budget;
-- Not an object, or empty.
SELECT agent_memory.update_context('ctx', '["a"]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.update_context('ctx', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.update_context('nope', '{"a": 1}');
\echo :LAST_ERROR_SQLSTATE

-- Clearing.
SELECT agent_memory.update_context('ctx', '{"x": 1, "y": 2, "z": 3}') -> 'keys' AS keys;
SELECT agent_memory.clear_context_keys('ctx', ARRAY['x', 'y', 'missing']);
SELECT agent_memory.clear_context_keys('ctx', ARRAY[]::text[]);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.clear_context('ctx');
SELECT agent_memory.build_context('ctx') -> 'memory' AS memory;

-- One value is bounded by agent_memory.max_result_bytes, counted before it
-- is built: the entries named, or every entry. A word budget does not
-- bound it (a long word counts as one).
SELECT agent_memory.update_context('ctx', jsonb_build_object('big', repeat('w', 2000), 'small', 's')) ->> 'stored' AS stored;
SET agent_memory.max_result_bytes = 1024;
SELECT agent_memory.build_context('ctx');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_get_all('ctx');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.build_context('ctx', ARRAY['small']) -> 'memory' AS named;
SELECT agent_memory.build_context('ctx', ARRAY['big']);
\echo :LAST_ERROR_SQLSTATE
-- A key named twice is shown, and counted, once.
SET agent_memory.max_result_bytes = 3000;
SELECT jsonb_object_keys(agent_memory.build_context('ctx', ARRAY['big', 'big']) -> 'memory') AS shown;
RESET agent_memory.max_result_bytes;
SELECT agent_memory.clear_context('ctx') AS cleared;

-- Each entry counts its place in the object too: 110 empty objects take
-- more than 1kB.
SELECT count(agent_memory.kv_set('ctx', 'k' || i, '{}')) AS stored FROM generate_series(1, 110) i;
SELECT pg_column_size(agent_memory.kv_get_all('ctx')) > 1024 AS over_1kB;
SET agent_memory.max_result_bytes = '1kB';
SELECT agent_memory.kv_get_all('ctx');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.build_context('ctx');
\echo :LAST_ERROR_SQLSTATE
SELECT pg_column_size(agent_memory.build_context('ctx', ARRAY['k1', 'k2', 'k3']) -> 'memory') <= 1024 AS named_within;
RESET agent_memory.max_result_bytes;
SELECT agent_memory.clear_context('ctx') AS cleared;

-- update_context renews the session's activity.
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'ctx';
SELECT agent_memory.update_context('ctx', '{"k": "v"}') ->> 'stored' AS stored;
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM agent_memory.sessions WHERE session_id = 'ctx';

-- Leave the database empty for the next suite.
DELETE FROM agent_memory.sessions;
