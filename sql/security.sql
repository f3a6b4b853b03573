-- agent_memory: who may call what.
--
-- Every function runs as its caller (none is SECURITY DEFINER), so the
-- caller's own table privileges and row-level security apply to everything
-- a function reads or writes. Every function pins search_path to
-- pg_catalog, pg_temp and names the extension's tables with their schema,
-- so objects planted in public or another schema on the caller's path are
-- never picked (CVE-2018-1058). The trigger function is the one pgrx cannot
-- pin at creation, so it is pinned here.
ALTER FUNCTION agent_memory.note_session_deletions() SET search_path = pg_catalog, pg_temp;

-- Two group roles, created once per cluster (roles are not per database,
-- so a second database's CREATE EXTENSION finds them and reuses them).
-- Grant them to the login roles of your applications:
--   GRANT agent_memory_writer TO app;   GRANT agent_memory_reader TO dashboard;
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_reader') THEN
        CREATE ROLE agent_memory_reader NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_writer') THEN
        CREATE ROLE agent_memory_writer NOLOGIN;
    END IF;
    IF NOT pg_catalog.pg_has_role('agent_memory_writer', 'agent_memory_reader', 'MEMBER') THEN
        GRANT agent_memory_reader TO agent_memory_writer;
    END IF;
END
$roles$;

-- Nobody may call a function unless granted: PostgreSQL's default is
-- EXECUTE for PUBLIC.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA agent_memory FROM PUBLIC;

-- agent_memory_reader: reads every kind of memory and changes nothing.
-- The tool functions are included for their reading commands (view, read,
-- list); a writing command fails with 42501 for lack of table privileges.
GRANT USAGE ON SCHEMA agent_memory TO agent_memory_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA agent_memory TO agent_memory_reader;
GRANT EXECUTE ON FUNCTION
    agent_memory.version(),
    agent_memory.caller_tenant(),
    agent_memory.visible_tenant(),
    agent_memory.notify_channel(),
    agent_memory.value_bytes(jsonb),
    agent_memory.is_active(text),
    agent_memory.session_stats(),
    agent_memory.user_sessions(text),
    agent_memory.kv_get(text, text),
    agent_memory.kv_get_all(text),
    agent_memory.kv_has(text, text),
    agent_memory.kv_entry(text, text),
    agent_memory.kv_versions(text, text),
    agent_memory.kv_version(text, text, integer),
    agent_memory.build_context(text, text[], boolean),
    agent_memory.sensitive_findings(text),
    agent_memory.messages(text, text, integer),
    agent_memory.messages_json(text, text, integer),
    agent_memory.last_user_message(text, text),
    agent_memory.wm_get(text, text, text),
    agent_memory.wm_part(text, text, text),
    agent_memory.working_memory(text, text),
    agent_memory.working_memory_entry(text, text),
    agent_memory.wm_context(text, text, text),
    agent_memory.graph_read(text, text),
    agent_memory.graph_nodes(text),
    agent_memory.graph_versions(text, text),
    agent_memory.graph_version(text, text, integer),
    agent_memory.graph_tree(text),
    agent_memory.graph_tree_rows(text),
    agent_memory.graph_export(text),
    agent_memory.graph_to_markdown(text, text),
    agent_memory.memory_scope(text, text, text),
    agent_memory.memory_render(text, text, integer),
    agent_memory.memory_tool_definition(text, text, text, text),
    agent_memory.memory_tool(text, jsonb),
    agent_memory.memory_versions(text, text),
    agent_memory.memory_version(text, text, integer),
    agent_memory.claude_memory(text, jsonb, integer, text),
    agent_memory.claude_memory_tool_result(text, jsonb, integer, text),
    agent_memory.recall(text, text, text, text, text, text[], integer, real[], jsonb),
    agent_memory.recall_tool(jsonb, text, text, text, text),
    agent_memory.recall_tool_definition(text, text, text, text),
    agent_memory.recall_outbox(text, text, text, text, text[], integer),
    agent_memory.export(text, text, text, text)
TO agent_memory_reader;
-- recall_enable_embeddings changes recall_settings, which no role writes
-- (see below): it needs the tables' owner, like recall_rebuild.

-- agent_memory_writer: everything the reader may, plus every function and
-- the row changes they make. No DDL, no TRUNCATE, no ownership.
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA agent_memory TO agent_memory_writer;
GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA agent_memory TO agent_memory_writer;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA agent_memory TO agent_memory_writer;

-- The notification secret is for the extension alone (see notify_channel()).
REVOKE ALL ON agent_memory.notify_secret FROM agent_memory_reader, agent_memory_writer;
-- The cleanup history is the extension's record: readable, never written
-- by a role (a run is recorded as the table's owner).
REVOKE INSERT, UPDATE, DELETE ON agent_memory.cleanup_runs FROM agent_memory_writer;
-- Recall's settings are changed by recall_rebuild() alone, with the columns.
REVOKE INSERT, UPDATE, DELETE ON agent_memory.recall_settings FROM agent_memory_writer;

-- agent_memory_owner owns the tables (sql/tenants.sql) and runs what they
-- call when it acts on them itself, as when Citus copies a shard to
-- another node (sql/citus.sql): the policies' visible_tenant(), the tenant
-- column's default and the deletions trigger. Granted last, as the update
-- from 0.2.0 grants it, so that both list the same privileges in order.
GRANT EXECUTE ON FUNCTION
    agent_memory.caller_tenant(),
    agent_memory.visible_tenant(),
    agent_memory.note_session_deletions()
TO agent_memory_owner;
