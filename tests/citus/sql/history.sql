-- History through delegated calls. The retention is set with ALTER ROLE,
-- which Citus propagates to every node, so a call is delegated and keeps
-- history on the worker that holds its key (after a session's SET, the
-- call would run on the coordinator instead). Errors print their SQLSTATE
-- next.
CREATE ROLE chist LOGIN;
GRANT agent_memory_writer TO chist;
ALTER ROLE chist SET agent_memory.history_retention = 2;
SELECT result FROM run_command_on_workers(
  $$SELECT array_to_string(s.setconfig, ',') FROM pg_db_role_setting s
    JOIN pg_roles r ON r.oid = s.setrole WHERE rolname = 'chist'$$);

\c - chist
SHOW agent_memory.history_retention;
SELECT agent_memory.create_session('hist', session_id => 'ch-1');
SELECT agent_memory.kv_set('ch-1', 'plan', '"first"') ->> 'version' AS version;
SELECT agent_memory.kv_set('ch-1', 'plan', '"second"') ->> 'version' AS version;
SELECT agent_memory.kv_set('ch-1', 'plan', '"third"') ->> 'version' AS version;
SELECT agent_memory.kv_set('ch-1', 'plan', '{"step": 4, "nested": {"deep": [1, 2]}}') ->> 'version' AS version;
-- The retention's two versions, newest first.
SELECT version, value FROM agent_memory.kv_versions('ch-1', 'plan');
SELECT agent_memory.kv_restore('ch-1', 'plan', 2, expected_version => 4) ->> 'version' AS restored;
SELECT agent_memory.kv_get('ch-1', 'plan');
SELECT version, value FROM agent_memory.kv_versions('ch-1', 'plan');
SELECT agent_memory.kv_set('ch-1', 'plan', '"stale"', expected_version => 4);
\echo :LAST_ERROR_SQLSTATE
-- Deleted, then written anew: its number goes on past the kept versions.
SELECT agent_memory.kv_delete('ch-1', 'plan');
SELECT agent_memory.kv_set('ch-1', 'plan', '"anew"') ->> 'version' AS version;
-- In a transaction block: run on the coordinator unless forced.
BEGIN;
SELECT agent_memory.kv_set('ch-1', 'plan', '"in a block"') ->> 'version' AS version;
COMMIT;
SELECT version, value FROM agent_memory.kv_versions('ch-1', 'plan');

-- Files: each change keeps what it replaced; a deleted file comes back.
SELECT agent_memory.memory_tool('ch-scope', '{"command": "append", "path": "/notes.md", "content": "one"}') ->> 'ok' AS created;
SELECT agent_memory.memory_tool('ch-scope', '{"command": "append", "path": "/notes.md", "content": " two"}') ->> 'ok' AS appended;
SELECT agent_memory.memory_tool('ch-scope', '{"command": "update", "path": "/notes.md", "oldContent": "two", "content": "three"}') ->> 'ok' AS updated;
SELECT version, content FROM agent_memory.memory_versions('ch-scope', '/notes.md');
SELECT agent_memory.memory_tool('ch-scope', '{"command": "delete", "path": "/notes.md"}') ->> 'ok' AS deleted;
SELECT agent_memory.memory_restore('ch-scope', '/notes.md', 2) AS restored;
SELECT agent_memory.memory_tool('ch-scope', '{"command": "read", "path": "/notes.md"}') -> 'result' ->> 'content' AS content;
SELECT version, content FROM agent_memory.memory_versions('ch-scope', '/notes.md');

-- The versions go with their session; a purge erases a file's.
SELECT agent_memory.end_session('ch-1');
SELECT agent_memory.memory_purge_history('ch-scope') AS purged;
\c - postgres
SELECT count(*) AS entry_versions_left FROM agent_memory.kv_entry_versions WHERE session_id = 'ch-1';
SELECT count(*) AS file_versions_left FROM agent_memory.memory_file_versions WHERE scope = 'ch-scope';
