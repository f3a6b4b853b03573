-- Tenant isolation through the coordinator. Citus connects to the workers
-- as the calling role, so the roles can log in, and each role's settings
-- are set with ALTER ROLE, which Citus propagates to every node: the
-- functions' own filters and the row-level security policies on the
-- workers' shards both see them. Errors print their SQLSTATE next.
CREATE ROLE cten_ana LOGIN;
CREATE ROLE cten_bo LOGIN;
GRANT agent_memory_writer TO cten_ana, cten_bo;
ALTER ROLE cten_ana SET agent_memory.tenant_isolation = on;
ALTER ROLE cten_bo SET agent_memory.tenant_isolation = on;
SELECT result FROM run_command_on_workers(
  $$SELECT string_agg(rolname || ':' || array_to_string(s.setconfig, ','), ' ' ORDER BY rolname)
    FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE rolname LIKE 'cten_%'$$);

-- Ana stores memory of every group: a session, a graph, a file scope.
\c - cten_ana
SELECT agent_memory.caller_tenant();
SELECT agent_memory.create_session('ana', session_id => 'ct-a');
SELECT agent_memory.kv_set('ct-a', 'secret', '"ana''s secret"') ->> 'stored' AS stored;
SELECT agent_memory.append_message('ct-a', 'user', 'ana''s message') AS seq;
SELECT agent_memory.graph_create('ct-owner', 'Ana''s node', 'private', 'ana''s body', ARRAY['__root__'], node_id => 'a-node');
SELECT agent_memory.memory_tool('ct-scope', '{"command": "append", "path": "/ana", "content": "ana''s file"}') ->> 'ok' AS ok;

-- Bo reads none of it, through the functions (delegated or not)...
\c - cten_bo
SELECT agent_memory.caller_tenant();
SELECT agent_memory.is_active('ct-a');
SELECT agent_memory.kv_get('ct-a', 'secret');
SELECT agent_memory.kv_get_all('ct-a'), agent_memory.messages_json('ct-a');
SELECT agent_memory.graph_read('ct-owner', 'a-node');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_tool('ct-scope', '{"command": "read", "path": "/ana"}') -> 'error' ->> 'code' AS read;
SELECT count(*) AS recalled FROM agent_memory.recall('ana', owner => 'ct-owner', scope => 'ct-scope');
-- ... nor through the tables, on every shard.
SELECT count(*) AS sessions FROM agent_memory.sessions;
SELECT count(*) AS entries FROM agent_memory.kv_entries;
SELECT count(*) AS messages FROM agent_memory.thread_messages;
SELECT count(*) AS nodes FROM agent_memory.graph_nodes WHERE node_id = 'a-node';
SELECT count(*) AS files FROM agent_memory.memory_files;
-- Bo's session of the same id is another row, on the same shard.
SELECT agent_memory.create_session('bo', session_id => 'ct-a');
SELECT agent_memory.kv_set('ct-a', 'secret', '"bo''s secret"') ->> 'stored' AS stored;
SELECT agent_memory.kv_get('ct-a', 'secret');
-- Direct writes at Ana's rows reach none of them.
UPDATE agent_memory.kv_entries SET value = '"overwritten"' WHERE session_id = 'ct-a';
DELETE FROM agent_memory.thread_messages WHERE session_id = 'ct-a';
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, tenant, expires_at)
VALUES ('ct-a', 'planted', '1', 1, 'cten_ana', now() + interval '1 hour');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.end_session('ct-a');

-- Ana's memory is whole.
\c - cten_ana
SELECT agent_memory.kv_get_all('ct-a');
SELECT content FROM agent_memory.messages('ct-a');
SELECT agent_memory.graph_read('ct-owner', 'a-node') ->> 'body' AS body;
SELECT agent_memory.memory_tool('ct-scope', '{"command": "read", "path": "/ana"}') -> 'result' AS read;
SELECT kind, snippet FROM agent_memory.recall('ana', session_id => 'ct-a', owner => 'ct-owner', scope => 'ct-scope')
ORDER BY kind;
SELECT agent_memory.end_session('ct-a');

\c - postgres
SELECT tenant, count(*) FROM agent_memory.sessions WHERE session_id LIKE 'ct-%' GROUP BY tenant ORDER BY tenant;
