-- What the filled memory reads as; the output must be the same in the
-- database it was written to, in one updated from an earlier release with
-- its rows, and in a restored dump.
\set ON_ERROR_STOP on
SET search_path = agent_memory;
SELECT kv_get_all('up-1');
SELECT kv_get('up-2', 'short');
SELECT seq > 0 AS seq, node_id, role, content, metadata FROM messages('up-1');
SELECT seq > 0 AS seq, node_id, role, content FROM messages('up-1', 'node-a');
-- A node's revision counts its changes since the update that added it.
SELECT graph_read('ana', 'atlas') - 'created_at' - 'updated_at' - 'revision';
SELECT version, change_description FROM graph_versions('ana', 'atlas');
SELECT * FROM graph_tree_rows('ana');
SELECT wm_get('up-1', 'node_context'), wm_get('up-1', 'node_context', 'notes');
SELECT memory_tool('ana', '{"command": "read", "path": "/notes/today"}');
SELECT claude_memory('ana', '{"command": "view", "path": "/memories"}');
SELECT session_id, active FROM user_sessions('ana');
-- Rows written before recall existed are found by it after the update.
SELECT kind, key, ref, snippet
FROM recall('tea atlas projects notes', user_id => 'ana', owner => 'ana', scope => 'ana', k => 20)
ORDER BY kind, key, ref;
