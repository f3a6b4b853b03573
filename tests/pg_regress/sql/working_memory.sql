-- Working memory parts: set, get, patch, set many,
-- fallback to the global entry, sanitising, no-op detection, notifications.
-- Errors print their SQLSTATE on the next line.
SET search_path = agent_memory, public;
SELECT create_session('ana', session_id => 'wm');

-- Parts never set read as their documented empty values; config with defaults.
SELECT wm_get('wm', 'node_context') AS node_context, wm_get('wm', 'messages') AS messages,
       wm_get('wm', 'working_history') AS working_history;
SELECT wm_get('wm', 'project_structure') AS project_structure;
SELECT wm_get('wm', 'config') AS config;

-- A write returns true, the same write again false (nothing written).
SELECT wm_set('wm', 'node_context', '{"id": "n1", "title": "Atlas"}');
SELECT wm_set('wm', 'node_context', '{"title": "Atlas", "id": "n1"}') AS again;
SELECT part, node_key, version FROM wm_parts WHERE session_id = 'wm' ORDER BY part;

-- A node's unset part falls back to the global one; its own wins once set.
SELECT wm_get('wm', 'node_context', 'n2') AS falls_back;
SELECT wm_set('wm', 'node_context', '{"id": "n2"}', 'n2');
SELECT wm_get('wm', 'node_context', 'n2') AS own, wm_get('wm', 'node_context') AS global;

-- Sanitising: the newest 200 messages, no builder payloads in graph nodes,
-- config checked and clamped.
SELECT wm_set('wm', 'messages', (SELECT jsonb_agg(jsonb_build_object('i', i)) FROM generate_series(1, 250) i));
SELECT jsonb_array_length(wm_get('wm', 'messages')) AS kept,
       wm_get('wm', 'messages') -> 0 AS oldest_kept;
SELECT wm_set('wm', 'project_structure',
  '{"project_graph": {"nodes": [{"id": "a", "builder": {"x": 1}, "builderPayload": "big"}], "edges": []}}');
SELECT wm_get('wm', 'project_structure');
SET agent_memory.strip_node_keys = 'secret';
SELECT wm_set('wm', 'project_structure', '{"project_graph": {"nodes": [{"id": "a", "secret": 1, "builder": 2}]}}');
SELECT wm_get('wm', 'project_structure') -> 'project_graph' -> 'nodes' AS nodes;
RESET agent_memory.strip_node_keys;
SELECT wm_set('wm', 'config', '{"history_length": 999, "auto_refresh_interval": -5, "include_context": false}');
SELECT wm_get('wm', 'config');

-- Merge patches (RFC 7396): objects merge, null removes; other parts replace.
SELECT wm_patch('wm', 'node_context', '{"title": "Atlas 2", "id": null, "tags": ["x"]}');
SELECT wm_patch('wm', 'fetched_context', '{"doc": {"a": 1}}', 'n3') AS from_empty;
SELECT wm_patch('wm', 'working_history', '"summary so far"');
SELECT version FROM wm_parts WHERE session_id = 'wm' AND part = 'node_context' AND node_key = '';
-- session and config store only what is set: a first patch starts empty.
SELECT wm_patch('wm', 'session', '{"project_id": "p1"}') AS session;
SELECT wm_patch('wm', 'config', '{"history_length": 5}', 'n9') AS config;

-- Several parts at once, all or nothing.
SELECT wm_set_many('wm', '{"last_user_message": "hi", "working_history": "summary so far", "fetched_context": {"k": 1}}');
SELECT wm_set_many('wm', '{"last_user_message": "changed", "config": {"history_length": "many"}}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_get('wm', 'last_user_message') AS unchanged;
-- No part at all still needs the session.
SELECT wm_set_many('wm', '{}');
SELECT wm_set_many('no-such-session', '{}');
\echo :LAST_ERROR_SQLSTATE

-- A no-op changes nothing, version included (notifications: see the
-- integration test, as psql prints the sender's process id).
SELECT wm_set('wm', 'last_user_message', '"hello"');
SELECT wm_set('wm', 'last_user_message', '"hello"') AS noop;
SELECT version FROM wm_parts WHERE session_id = 'wm' AND part = 'last_user_message';

-- Bad input: a clear error, nothing changed.
SELECT wm_set('wm', 'memories', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'node_context', '[1, 2]');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'working_history', '{"a": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_patch('wm', 'config', '"fast"');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'config', '{"colour": "blue"}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'session', '{"session_id": "other"}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('nobody', 'node_context', '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_get('nobody', 'node_context');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', NULL, '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'node_context', NULL);
\echo :LAST_ERROR_SQLSTATE

-- Preconditions: a write naming the version of the entry's own part
-- (0: none; wm_part reads it) happens only if the part is still at it.
SELECT wm_part('wm', 'fetched_context', 'p1');
SELECT wm_set('wm', 'fetched_context', '{"fares": [412]}', 'p1', expected_version => 0);
SELECT wm_part('wm', 'fetched_context', 'p1');
SELECT wm_set('wm', 'fetched_context', '{"fares": [388]}', 'p1', expected_version => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT wm_patch('wm', 'fetched_context', '{"picked": 412}', 'p1', expected_version => 1);
SELECT wm_patch('wm', 'fetched_context', '{"picked": 388}', 'p1', expected_version => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'fetched_context', '{}', NULL, expected_version => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT wm_set('wm', 'fetched_context', '{}', 'p1', expected_version => -2);
\echo :LAST_ERROR_SQLSTATE
SELECT wm_get('wm', 'fetched_context', 'p1') AS unchanged;
SELECT wm_part('nobody', 'fetched_context');
\echo :LAST_ERROR_SQLSTATE

-- Parts go with their session.
SELECT end_session('wm');
SELECT count(*) AS parts_left FROM wm_parts WHERE session_id = 'wm';
