-- Tenant isolation: with agent_memory.tenant_isolation on, two roles (and
-- two tenants of one role) neither read, list, overwrite nor delete each
-- other's memory, through the functions or the tables. Errors print their
-- SQLSTATE on the next line.

-- Every memory table: a tenant column, a policy, row-level security forced,
-- owned by a role that is not a superuser.
SELECT c.relname, c.relrowsecurity AS rls, c.relforcerowsecurity AS forced,
       c.relowner::regrole AS owner, r.rolsuper AS owner_is_superuser,
       (SELECT count(*) FROM pg_policy p WHERE p.polrelid = c.oid) AS policies,
       EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant') AS has_tenant
FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner
WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r'
ORDER BY c.relname;
SELECT reloptions FROM pg_class WHERE oid = 'agent_memory.message_thread_stats'::regclass;

-- LOGIN: on Citus the coordinator connects to the workers as the
-- calling role.
CREATE ROLE ten_ana LOGIN;
CREATE ROLE ten_bo LOGIN;
GRANT agent_memory_writer TO ten_ana, ten_bo;
SET agent_memory.tenant_isolation = on;

-- Ana stores memory of every kind.
SET ROLE ten_ana;
SELECT agent_memory.caller_tenant(), agent_memory.visible_tenant();
SELECT agent_memory.create_session('ana', '{"plan": "pro"}', 'ten-a');
SELECT agent_memory.kv_set('ten-a', 'secret', '"ana''s secret"') ->> 'stored' AS stored;
SELECT agent_memory.append_message('ten-a', 'user', 'ana''s message') > 0 AS appended;
SELECT agent_memory.wm_set('ten-a', 'working_history', '"ana''s history"') IS NOT NULL AS wm_set;
SELECT agent_memory.graph_create('ten-owner', 'Ana''s node', 'private', 'ana''s body', ARRAY['__root__'], node_id => 'a-node');
SELECT agent_memory.memory_tool('ten-scope', '{"command": "append", "path": "/ana/notes", "content": "ana''s file"}') ->> 'ok' AS ok;
RESET ROLE;

-- Bo reads nothing of it...
SET ROLE ten_bo;
SELECT agent_memory.caller_tenant(), agent_memory.visible_tenant();
SELECT agent_memory.is_active('ten-a'), agent_memory.kv_get('ten-a', 'secret'), agent_memory.kv_has('ten-a', 'secret'),
       agent_memory.kv_get_all('ten-a');
SELECT count(*) AS messages FROM agent_memory.messages('ten-a');
SELECT agent_memory.messages_json('ten-a'), agent_memory.last_user_message('ten-a');
SELECT agent_memory.working_memory('ten-a');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.wm_get('ten-a', 'working_history');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.build_context('ten-a') - 'timestamp' AS build_context;
SELECT * FROM agent_memory.user_sessions('ana');
SELECT agent_memory.session_stats() ->> 'total' AS sessions_bo_sees;
SELECT agent_memory.graph_read('ten-owner', 'a-node');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS nodes FROM agent_memory.graph_nodes('ten-owner');
SELECT count(*) AS tree_rows FROM agent_memory.graph_tree_rows('ten-owner');
SELECT agent_memory.graph_export('ten-owner');
SELECT agent_memory.memory_tool('ten-scope', '{"command": "read", "path": "/ana/notes"}') -> 'error' ->> 'code' AS read;
SELECT agent_memory.memory_tool('ten-scope', '{"command": "list", "path": "/"}') -> 'result' AS list;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "view", "path": "/memories/ana/notes"}');
SELECT agent_memory.claude_memory_tool_result('ten-scope', '{"type": "tool_use", "id": "t1", "name": "memory", "input": {"command": "view", "path": "/memories/ana"}}') ->> 'content' AS tool_result;
SELECT agent_memory.working_memory_entry('ten-a');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.wm_context('ten-a');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS versions FROM agent_memory.graph_versions('ten-owner', 'a-node');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_version('ten-owner', 'a-node', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_to_markdown('ten-owner', 'a-node');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_tree('ten-owner') -> 'children' AS tree_children;
-- ...nor through the tables and the view.
SELECT (SELECT count(*) FROM agent_memory.sessions) AS sessions, (SELECT count(*) FROM agent_memory.kv_entries) AS entries,
       (SELECT count(*) FROM agent_memory.thread_messages) AS messages, (SELECT count(*) FROM agent_memory.wm_parts) AS parts,
       (SELECT count(*) FROM agent_memory.graph_nodes) AS nodes, (SELECT count(*) FROM agent_memory.memory_files) AS files,
       (SELECT count(*) FROM agent_memory.message_thread_stats) AS threads;

-- Ids are per tenant: every key, unique index and foreign key of a memory
-- table holds the tenant, right after the session, owner or scope, so that
-- a read of one tenant's session, owner or scope reads none of another
-- tenant's rows under the same name (cleanup_runs and recall_settings are
-- not memory).
SELECT c.conrelid::regclass AS "table", c.contype AS kind,
       (SELECT a.attname FROM pg_attribute a
        WHERE a.attrelid = c.conrelid AND a.attnum = c.conkey[1]) AS first_column,
       (SELECT a.attname FROM pg_attribute a
        WHERE a.attrelid = c.conrelid AND a.attnum = c.conkey[2]) AS second_column
FROM pg_constraint c
WHERE c.connamespace = 'agent_memory'::regnamespace AND c.contype IN ('p', 'u', 'f')
ORDER BY c.conrelid::regclass::text, 2, 3;
SELECT i.indexrelid::regclass AS unique_index,
       (SELECT a.attname FROM pg_attribute a
        WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[0]) AS first_column,
       (SELECT a.attname FROM pg_attribute a
        WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[1]) AS second_column
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relnamespace = 'agent_memory'::regnamespace AND i.indisunique AND NOT i.indisprimary
ORDER BY 1;

-- Bo can neither plant a row among Ana's nor learn whether she has a key:
-- each insert answers the same for a key Ana has (ten-a, secret, a-node,
-- /ana/notes, ten-scope) as for one nobody has, and lands in Bo's memory.
BEGIN;
WITH i AS (INSERT INTO agent_memory.sessions (session_id) VALUES ('ten-a'), ('ten-none')
           ON CONFLICT DO NOTHING RETURNING session_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
           VALUES ('ten-a', 'secret', '"x"', 1, now() + interval '1 hour'), ('ten-a', 'none', '"x"', 1, now() + interval '1 hour')
           ON CONFLICT DO NOTHING RETURNING key, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.message_threads (session_id, thread_key, keep) VALUES ('ten-a', '', 5), ('ten-none', '', 5)
           ON CONFLICT DO NOTHING RETURNING session_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.thread_messages (session_id, thread_key, slot, seq, role, content)
           VALUES ('ten-a', '', 0, 1, 'user', 'x'), ('ten-none', '', 0, 1, 'user', 'x')
           ON CONFLICT DO NOTHING RETURNING session_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value)
           VALUES ('ten-a', '', 'working_history', '"x"'), ('ten-none', '', 'working_history', '"x"')
           ON CONFLICT DO NOTHING RETURNING session_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.graph_nodes (owner, node_id, title) VALUES ('ten-owner', 'a-node', 'x'), ('ten-owner', 'none', 'x')
           ON CONFLICT DO NOTHING RETURNING node_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.graph_node_versions (owner, node_id, version, title, description, body, links, refs,
                                                          created_at, updated_at, change_description)
           SELECT 'ten-owner', n, 1, 'x', '', '', '{}', '{}', now(), now(), 'x' FROM unnest(ARRAY['a-node', 'none']) n
           ON CONFLICT DO NOTHING RETURNING node_id, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.memory_files (scope, path, content) VALUES ('ten-scope', '/ana/notes', 'x'), ('ten-scope', '/none', 'x')
           ON CONFLICT DO NOTHING RETURNING path, tenant) SELECT * FROM i ORDER BY 1;
WITH i AS (INSERT INTO agent_memory.memory_scopes (scope) VALUES ('ten-scope'), ('ten-none')
           ON CONFLICT DO NOTHING RETURNING scope, tenant) SELECT * FROM i ORDER BY 1;
-- A child of Ana's session is refused as a child of none: Bo has no such
-- session (a foreign key includes the tenant).
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
VALUES ('ten-a-only', 'secret', '"x"', 1, now() + interval '1 hour');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;

-- Bo squats ids Ana has not used yet; her own calls on them are unaffected.
SELECT agent_memory.create_session('bo', session_id => 'ten-later');
SELECT agent_memory.kv_set('ten-later', 'k', '"bo"') ->> 'stored' AS stored;
SELECT agent_memory.append_message('ten-later', 'user', 'bo', metadata => '{"idempotency_key": "ik-1"}') > 0 AS appended;
SELECT agent_memory.wm_set('ten-later', 'working_history', '"bo"') IS NOT NULL AS wm_set;
SELECT agent_memory.memory_tool('ten-scope', '{"command": "append", "path": "/ana/later", "content": "bo"}') ->> 'ok' AS ok;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "create", "path": "/memories/ana/later.md", "file_text": "bo"}');
SELECT agent_memory.graph_create('ten-owner', 'Bo', 'd', 'b', ARRAY['__root__'], node_id => 'a-later');
SELECT agent_memory.graph_write('ten-owner', 'a-later', 'Bo 2', NULL, NULL, change_description => 'bo');
RESET ROLE;
SET ROLE ten_ana;
SELECT agent_memory.create_session('ana', session_id => 'ten-later');
SELECT agent_memory.kv_set('ten-later', 'k', '"ana"') ->> 'stored' AS stored;
SELECT agent_memory.append_message('ten-later', 'user', 'ana', metadata => '{"idempotency_key": "ik-1"}') > 0 AS appended;
SELECT agent_memory.wm_set('ten-later', 'working_history', '"ana"') IS NOT NULL AS wm_set;
SELECT agent_memory.memory_tool('ten-scope', '{"command": "append", "path": "/ana/later", "content": "ana"}') ->> 'ok' AS ok;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "create", "path": "/memories/ana/later.md", "file_text": "ana"}');
SELECT agent_memory.graph_create('ten-owner', 'Ana', 'd', 'b', ARRAY['__root__'], node_id => 'a-later');
SELECT agent_memory.graph_write('ten-owner', 'a-later', 'Ana 2', NULL, NULL, change_description => 'ana');
SELECT agent_memory.kv_get('ten-later', 'k') AS ana_value, (SELECT count(*) FROM agent_memory.messages('ten-later')) AS ana_messages;
-- The extension's group roles are every tenant's: none has memory.
SET ROLE agent_memory_writer;
SELECT agent_memory.kv_get('ten-later', 'k');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM agent_memory.sessions;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SET ROLE ten_bo;

-- Bo overwrites nothing: every write to Ana's ids is refused or lands in
-- Bo's own memory.
SELECT agent_memory.kv_set('ten-a', 'secret', '"bo was here"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('ten-a', 'user', 'bo was here');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.wm_set('ten-a', 'working_history', '"bo was here"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.create_session('ana', session_id => 'ten-a');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.renew_activity('ten-a'), agent_memory.set_active_node('ten-a', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_write('ten-owner', 'a-node', 'Bo''s title', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_append('ten-owner', 'a-node', 'bo was here');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_tool('ten-scope', '{"command": "append", "path": "/ana/notes", "content": "bo was here"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_tool('ten-scope', '{"command": "update", "path": "/ana/notes", "oldContent": "ana", "content": "bo"}') -> 'error' ->> 'code' AS update;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "create", "path": "/memories/ana/notes", "file_text": "bo was here"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.wm_set_many('ten-a', '{"working_history": "bo was here"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.wm_init('ten-a', 'a-node', 'ten-owner');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.update_context('ten-a', '{"secret": "bo was here"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_from_markdown('ten-owner', 'a-node', E'---\ntitle: Bo\n---\nbo was here');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_import('ten-owner', '{"a-node.md": "---\ntitle: Bo\n---\nbo was here"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_create('ten-owner', 'Bo', 'd', 'b', ARRAY['__root__'], node_id => 'a-node');
\echo :LAST_ERROR_SQLSTATE
UPDATE agent_memory.kv_entries SET value = '"bo was here"';
INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at, tenant)
VALUES ('ten-a', 'planted', '"bo"', 1, now() + interval '1 hour', 'ten_ana');
\echo :LAST_ERROR_SQLSTATE

-- Bo deletes nothing.
SELECT agent_memory.kv_delete('ten-a', 'secret'), agent_memory.kv_clear('ten-a');
SELECT agent_memory.end_session('ten-a');
SELECT agent_memory.clear_messages('ten-a');
SELECT agent_memory.pop_message('ten-a');
SELECT agent_memory.wm_clear('ten-a');
SELECT agent_memory.clear_context('ten-a'), agent_memory.clear_context_keys('ten-a', ARRAY['secret']);
SELECT (agent_memory.cleanup_expired() ->> 'sessions')::int AS sessions_removed;
SELECT agent_memory.graph_delete('ten-owner', 'a-node');
SELECT agent_memory.memory_tool('ten-scope', '{"command": "delete", "path": "/ana"}') -> 'error' ->> 'code' AS delete;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "delete", "path": "/memories/ana"}');
DELETE FROM agent_memory.sessions;
DELETE FROM agent_memory.memory_files;
-- Bo cannot turn isolation off for itself.
SET agent_memory.tenant_isolation = off;
\echo :LAST_ERROR_SQLSTATE
-- Nor reach Ana's rows through a tenant name.
SET agent_memory.tenant = 'ten_ana';
SELECT agent_memory.caller_tenant(), (SELECT count(*) FROM agent_memory.sessions) AS sessions;
RESET agent_memory.tenant;
RESET ROLE;

-- Ana's memory is all there, unchanged.
SET ROLE ten_ana;
SELECT agent_memory.kv_get_all('ten-a');
SELECT role, content FROM agent_memory.messages('ten-a');
SELECT agent_memory.wm_get('ten-a', 'working_history');
SELECT n ->> 'title' AS title, n ->> 'body' AS body, n ->> 'version' AS version FROM agent_memory.graph_read('ten-owner', 'a-node') n;
SELECT agent_memory.memory_tool('ten-scope', '{"command": "read", "path": "/ana/notes"}') -> 'result' AS notes;
SELECT count(*) AS ana_sessions FROM agent_memory.sessions;

-- A role left without isolation shares the memory of tenant '' only: it
-- neither sees nor changes Ana's rows through the tables.
RESET ROLE;
CREATE ROLE ten_cy LOGIN;
GRANT agent_memory_writer TO ten_cy;
SET agent_memory.tenant_isolation = off;
SET ROLE ten_cy;
SELECT agent_memory.visible_tenant() = '' AS shared, (SELECT count(*) FROM agent_memory.sessions) AS sessions,
       (SELECT count(*) FROM agent_memory.kv_entries) AS entries;
UPDATE agent_memory.kv_entries SET value = '"planted"';
RESET ROLE;
SET agent_memory.tenant_isolation = on;
SET ROLE ten_ana;
SELECT agent_memory.kv_get('ten-a', 'secret') AS ana_secret;
RESET ROLE;
DROP ROLE ten_cy;
SET ROLE ten_ana;

-- Two tenants of one role: the application picks one per transaction.
BEGIN;
SET LOCAL agent_memory.tenant = 'acme';
SELECT agent_memory.caller_tenant();
SELECT agent_memory.kv_get('ten-a', 'secret') IS NULL AS ana_hidden_from_acme;
SELECT agent_memory.create_session('acme-user', session_id => 'ten-acme');
COMMIT;
SELECT agent_memory.is_active('ten-acme') AS ana_sees_acme;
RESET ROLE;

-- A tenant's manual cleanup run is its own: what it removed is not shown
-- to another tenant.
SET ROLE ten_ana;
SELECT agent_memory.cleanup_expired() ->> 'sessions' AS removed;
SELECT count(*) AS own_runs FROM agent_memory.cleanup_runs WHERE tenant = agent_memory.caller_tenant();
SET ROLE ten_bo;
SELECT count(*) AS runs_of_ana FROM agent_memory.cleanup_runs WHERE tenant = 'ten_ana';
RESET ROLE;
SELECT count(*) AS runs_of_ana FROM agent_memory.cleanup_runs WHERE tenant = 'ten_ana';
-- A group role has no tenant of its own: refused before any work.
SET ROLE agent_memory_writer;
SELECT agent_memory.cleanup_expired() ->> 'sessions' AS removed;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Superusers see every tenant (and so does the cleanup worker).
SELECT session_id, tenant FROM agent_memory.sessions WHERE session_id LIKE 'ten-%' ORDER BY session_id;
-- A superuser's cleanup (a pg_cron job's) removes every tenant's expired
-- rows, as the worker does, and is recorded as the worker's runs are.
SET ROLE ten_ana;
SELECT agent_memory.create_session('ana', session_id => 'ten-idle', idle_timeout => '1 minute');
RESET ROLE;
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'ten-idle';
SELECT (agent_memory.cleanup_expired() ->> 'sessions')::int >= 1 AS removed;
SELECT count(*) AS idle_left FROM agent_memory.sessions WHERE session_id = 'ten-idle';
SELECT tenant IS NULL AS every_tenants, triggered_by FROM agent_memory.cleanup_runs ORDER BY run_id DESC LIMIT 1;

-- Clean up, as each tenant.
SET ROLE ten_bo;
SELECT agent_memory.end_session(s) FROM unnest(ARRAY['ten-a', 'ten-later']) s;
SELECT agent_memory.graph_delete('ten-owner', n) FROM unnest(ARRAY['a-node', 'a-later']) n;
SELECT agent_memory.memory_tool('ten-scope', '{"command": "delete", "path": "/ana"}') ->> 'ok' AS deleted;
SELECT agent_memory.claude_memory('ten-scope', '{"command": "delete", "path": "/memories/ana"}');
SET ROLE ten_ana;
SELECT agent_memory.end_session(s) FROM unnest(ARRAY['ten-a', 'ten-later']) s;
SELECT agent_memory.graph_delete('ten-owner', 'a-later');
SELECT agent_memory.graph_delete('ten-owner', 'a-node');
SELECT agent_memory.memory_tool('ten-scope', '{"command": "delete", "path": "/ana"}') ->> 'ok' AS deleted;
SET agent_memory.tenant = 'acme';
SELECT agent_memory.end_session('ten-acme');
RESET agent_memory.tenant;
RESET ROLE;
RESET agent_memory.tenant_isolation;
DELETE FROM agent_memory.memory_scopes WHERE scope = 'ten-scope';
DROP ROLE ten_ana, ten_bo;
