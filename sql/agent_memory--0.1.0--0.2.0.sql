-- agent_memory 0.1.0 -> 0.2.0: tenants (row-level security), roles, grants,
-- messages numbered per session and appended many at once
-- (append_messages), table checks as domains, sessions remembered by the
-- reads, the trigger function's search_path pinned and the key-value
-- reads' and memory_tool's unpinned (fully qualified instead). Run by ALTER EXTENSION agent_memory UPDATE; scripts/upgrade_test.sh
-- checks that the result equals a fresh 0.2.0 install, object by object.
\echo Use "ALTER EXTENSION agent_memory UPDATE TO '0.2.0'" to load this file. \quit

-- The two functions that run no SQL, version() and sensitive_findings(),
-- stay unpinned, as in 0.1.0: no SQL, no search_path to pin.

-- The tenant functions (as cargo pgrx schema generates them).
CREATE FUNCTION agent_memory.caller_tenant() RETURNS text
STRICT STABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'caller_tenant_wrapper';
CREATE FUNCTION agent_memory.visible_tenant() RETURNS text
STRICT STABLE PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'visible_tenant_wrapper';
COMMENT ON FUNCTION agent_memory.caller_tenant() IS
    'The tenant the caller reads and writes as: '''' (one memory for every role) while agent_memory.tenant_isolation is off, else the current role, or role/tenant after SET agent_memory.tenant';
COMMENT ON FUNCTION agent_memory.visible_tenant() IS
    'The tenant whose rows the caller sees and changes while agent_memory.tenant_isolation is on; NULL (every tenant) while it is off';

-- Each tenant's notification channel, named from a secret only the owner
-- reads (as cargo pgrx schema generates the function).
CREATE FUNCTION agent_memory.notify_channel() RETURNS text
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'notify_channel_wrapper';
COMMENT ON FUNCTION agent_memory.notify_channel() IS
    'The channel to LISTEN on for the caller''s changes: agent_memory while agent_memory.tenant_isolation is off, else one per tenant that no other tenant can name';
CREATE TABLE agent_memory.notify_secret (
    secret text NOT NULL
);
INSERT INTO agent_memory.notify_secret
SELECT pg_catalog.replace(pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, '-', '');
COMMENT ON TABLE agent_memory.notify_secret IS
    'The secret that names each tenant''s notification channel; readable by its owner only';

-- Many messages to one thread in one call (as cargo pgrx schema generates it).
CREATE FUNCTION agent_memory.append_messages(
    session_id text, messages jsonb, node_id text DEFAULT NULL, keep integer DEFAULT NULL
) RETURNS bigint[]
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'append_messages_wrapper';
COMMENT ON FUNCTION agent_memory.append_messages(text, jsonb, text, integer) IS
    'Append a JSON array of {role, content, metadata} messages, oldest first, to the (session, node) thread, as append_message would one by one (plain messages in one statement); returns their seqs in order';

-- From here on: sql/tenants.sql as it is in 0.2.0. Rows stored before the
-- update belong to the role that runs it.
DO $owner$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_owner') THEN
        CREATE ROLE agent_memory_owner NOLOGIN;
    END IF;
END
$owner$;
-- Foreign-key checks and cascades run as the owner of the tables.
GRANT USAGE ON SCHEMA agent_memory TO agent_memory_owner;

-- Rules on columns that hot statements write become domains, as in
-- sql/schema.sql: PostgreSQL plans a table's CHECK expressions again for
-- every statement that writes the table, a domain's once per connection.
CREATE DOMAIN agent_memory.session_key AS text CHECK (VALUE <> '');
COMMENT ON DOMAIN agent_memory.session_key IS 'A session id: any non-empty text';
CREATE DOMAIN agent_memory.positive_interval AS interval CHECK (VALUE > interval '0');
COMMENT ON DOMAIN agent_memory.positive_interval IS 'An interval longer than zero (a session''s idle timeout)';
CREATE DOMAIN agent_memory.memory_path AS text COLLATE "C" CHECK (VALUE LIKE '/_%');
COMMENT ON DOMAIN agent_memory.memory_path IS 'A memory tool path: absolute and normalised, compared bytewise';
CREATE DOMAIN agent_memory.file_count AS integer CHECK (VALUE >= 0);
COMMENT ON DOMAIN agent_memory.file_count IS 'A number of files: zero or more';
-- Every session_id column takes the domain; the view over two of them is
-- made again around the change.
DROP VIEW agent_memory.message_thread_stats;
ALTER TABLE agent_memory.sessions
    DROP CONSTRAINT sessions_id_not_empty,
    DROP CONSTRAINT sessions_idle_timeout_positive,
    ALTER COLUMN session_id TYPE agent_memory.session_key,
    ALTER COLUMN idle_timeout TYPE agent_memory.positive_interval;
ALTER TABLE agent_memory.kv_entries ALTER COLUMN session_id TYPE agent_memory.session_key;
ALTER TABLE agent_memory.message_threads ALTER COLUMN session_id TYPE agent_memory.session_key;
ALTER TABLE agent_memory.thread_messages ALTER COLUMN session_id TYPE agent_memory.session_key;
ALTER TABLE agent_memory.wm_parts ALTER COLUMN session_id TYPE agent_memory.session_key;
CREATE VIEW agent_memory.message_thread_stats AS
SELECT t.session_id,
       nullif(t.thread_key, '') AS node_id,
       t.keep,
       count(m.slot) AS messages,
       t.appends,
       t.appends - count(m.slot) AS trimmed
FROM agent_memory.message_threads t
LEFT JOIN agent_memory.thread_messages m USING (session_id, thread_key)
GROUP BY t.session_id, t.thread_key, t.keep, t.appends;
COMMENT ON VIEW agent_memory.message_thread_stats IS
    'Per (session, node) thread: keep, messages held, appends so far (minus pops), and how many trimming removed';
ALTER TABLE agent_memory.memory_files
    DROP CONSTRAINT memory_files_path_absolute,
    ALTER COLUMN path TYPE agent_memory.memory_path;
ALTER TABLE agent_memory.memory_scopes
    DROP CONSTRAINT memory_scopes_files_check,
    ALTER COLUMN files TYPE agent_memory.file_count;

-- Message seq: counted per session (sessions.last_message_seq and
-- last_thread_key, message_threads.last_seq) instead of the global sequence
-- agent_memory.message_seq, so that an append writes nothing shared between
-- sessions (see docs/scaling.md). Every session and thread carries on from
-- its newest message, so seq keeps increasing within every session.
ALTER TABLE agent_memory.sessions ADD COLUMN last_message_seq bigint NOT NULL DEFAULT 0,
                                  ADD COLUMN last_thread_key text;
ALTER TABLE agent_memory.message_threads ADD COLUMN last_seq bigint NOT NULL DEFAULT 0;
UPDATE agent_memory.message_threads t SET last_seq = newest.seq
FROM (SELECT session_id, thread_key, max(seq) AS seq FROM agent_memory.thread_messages
      GROUP BY session_id, thread_key) AS newest
WHERE newest.session_id = t.session_id AND newest.thread_key = t.thread_key;
UPDATE agent_memory.sessions s SET last_message_seq = newest.seq
FROM (SELECT session_id, max(last_seq) AS seq FROM agent_memory.message_threads GROUP BY session_id) AS newest
WHERE newest.session_id = s.session_id;
-- Out of the extension first: that also takes it off the list of tables
-- pg_dump dumps (pg_extension.extconfig), which a plain DROP would leave.
ALTER EXTENSION agent_memory DROP SEQUENCE agent_memory.message_seq;
DROP SEQUENCE agent_memory.message_seq;

ALTER TABLE agent_memory.sessions ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.kv_entries ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.message_threads ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.thread_messages ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.wm_parts ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.graph_nodes ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.graph_node_versions ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_files ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_scopes ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant();

-- Ids per tenant: the tenant ends every key, unique index and foreign key,
-- as in a fresh install (sql/schema.sql). Rows already stored belong to the
-- tenant of the role running the update: '' (shared) while isolation is off.
ALTER TABLE agent_memory.kv_entries DROP CONSTRAINT kv_entries_session_id_fkey;
ALTER TABLE agent_memory.message_threads DROP CONSTRAINT message_threads_session_id_fkey;
ALTER TABLE agent_memory.thread_messages DROP CONSTRAINT thread_messages_session_id_thread_key_fkey;
ALTER TABLE agent_memory.wm_parts DROP CONSTRAINT wm_parts_session_id_fkey;
ALTER TABLE agent_memory.sessions DROP CONSTRAINT sessions_pkey, ADD PRIMARY KEY (session_id, tenant);
DROP INDEX agent_memory.sessions_user_idx;
CREATE INDEX sessions_user_idx ON agent_memory.sessions (user_id, tenant);
ALTER TABLE agent_memory.kv_entries DROP CONSTRAINT kv_entries_pkey, ADD PRIMARY KEY (session_id, key, tenant),
    ADD FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE;
ALTER TABLE agent_memory.message_threads DROP CONSTRAINT message_threads_pkey, ADD PRIMARY KEY (session_id, thread_key, tenant),
    ADD FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE;
ALTER TABLE agent_memory.thread_messages DROP CONSTRAINT thread_messages_pkey, ADD PRIMARY KEY (session_id, thread_key, slot, tenant),
    ADD FOREIGN KEY (session_id, thread_key, tenant) REFERENCES agent_memory.message_threads ON DELETE CASCADE;
DROP INDEX agent_memory.thread_messages_idempotency_idx;
CREATE UNIQUE INDEX thread_messages_idempotency_idx ON agent_memory.thread_messages (session_id, idempotency_key, tenant)
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE agent_memory.wm_parts DROP CONSTRAINT wm_parts_pkey, ADD PRIMARY KEY (session_id, node_key, part, tenant),
    ADD FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE;
ALTER TABLE agent_memory.graph_nodes DROP CONSTRAINT graph_nodes_pkey, ADD PRIMARY KEY (owner, node_id, tenant);
ALTER TABLE agent_memory.graph_node_versions DROP CONSTRAINT graph_node_versions_pkey, ADD PRIMARY KEY (owner, node_id, version, tenant);
ALTER TABLE agent_memory.memory_files DROP CONSTRAINT memory_files_pkey, ADD PRIMARY KEY (scope, path, tenant);
ALTER TABLE agent_memory.memory_scopes DROP CONSTRAINT memory_scopes_pkey, ADD PRIMARY KEY (scope, tenant);
CREATE OR REPLACE VIEW agent_memory.message_thread_stats AS
SELECT t.session_id,
       nullif(t.thread_key, '') AS node_id,
       t.keep,
       count(m.slot) AS messages,
       t.appends,
       t.appends - count(m.slot) AS trimmed
FROM agent_memory.message_threads t
LEFT JOIN agent_memory.thread_messages m USING (session_id, thread_key, tenant)
GROUP BY t.session_id, t.thread_key, t.tenant, t.keep, t.appends;

-- One policy per table. The sub-select runs once per statement, not per row.
CREATE POLICY tenant_rows ON agent_memory.sessions
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.kv_entries
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.message_threads
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.thread_messages
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.wm_parts
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.graph_nodes
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.graph_node_versions
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_files
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_scopes
    USING (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant))
    WITH CHECK (tenant = coalesce((SELECT agent_memory.visible_tenant()), tenant));

ALTER TABLE agent_memory.sessions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.kv_entries ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.message_threads ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.thread_messages ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.wm_parts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_nodes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_node_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_files ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_scopes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.notify_secret OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.cleanup_runs OWNER TO agent_memory_owner;

-- A view runs with its owner's rights unless told otherwise, which would
-- show every tenant's threads.
ALTER VIEW agent_memory.message_thread_stats SET (security_invoker = true);

-- Backends remember many sessions, and reads trust them too: an update
-- that may end a session sooner than remembered (activity moved back, its
-- own timeout changed) makes every backend forget, as a deletion does
-- (src/session_cache.rs).
CREATE TRIGGER sessions_shortened
    AFTER UPDATE OF last_activity_at, idle_timeout ON agent_memory.sessions
    FOR EACH ROW
    WHEN (NEW.last_activity_at < OLD.last_activity_at
          OR NEW.idle_timeout IS DISTINCT FROM OLD.idle_timeout)
    EXECUTE FUNCTION agent_memory.note_session_deletions();
COMMENT ON FUNCTION agent_memory.note_session_deletions() IS
    'Trigger of agent_memory.sessions: once a transaction that deleted sessions, or moved a session''s activity back or changed its timeout, commits, backends stop trusting what they remember of any session''s activity';

-- The two key-value reads and memory_tool run without a pinned
-- search_path: their statements are fully qualified (src/kv.rs).
ALTER FUNCTION agent_memory.kv_get(text, text) RESET search_path;
ALTER FUNCTION agent_memory.kv_has(text, text) RESET search_path;
-- memory_tool too (src/memory_tool.rs), which also forces generic plans
-- itself, for the length of a command, instead of by a SET clause.
ALTER FUNCTION agent_memory.memory_tool(text, jsonb) RESET search_path;
ALTER FUNCTION agent_memory.memory_tool(text, jsonb) RESET plan_cache_mode;

-- From here on: sql/security.sql as it is in 0.2.0.
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
    agent_memory.is_active(text),
    agent_memory.session_stats(),
    agent_memory.user_sessions(text),
    agent_memory.kv_get(text, text),
    agent_memory.kv_get_all(text),
    agent_memory.kv_has(text, text),
    agent_memory.build_context(text, text[], boolean),
    agent_memory.sensitive_findings(text),
    agent_memory.messages(text, text, integer),
    agent_memory.messages_json(text, text, integer),
    agent_memory.last_user_message(text, text),
    agent_memory.wm_get(text, text, text),
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
    agent_memory.claude_memory(text, jsonb),
    agent_memory.claude_memory_tool_result(text, jsonb)
TO agent_memory_reader;

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

-- Catalog comments that describe the functions in their own words.
COMMENT ON FUNCTION agent_memory.graph_to_markdown(text, text) IS
    'A node as its markdown file <id>.md: frontmatter (title, description, version, createdAt, updatedAt, refs) then the body';
COMMENT ON FUNCTION agent_memory.graph_from_markdown(text, text, text, text) IS
    'Rewrite an existing node from its markdown file; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_import(text, jsonb) IS
    'Import a folder of node markdown files given as {"<file name>": "<content>"} (<id>.v<N>.md files become versions) into an owner that has none of its nodes; returns the files imported';
COMMENT ON FUNCTION agent_memory.working_memory(text, text) IS
    'The composed snapshot of an entry as JSON, read under one snapshot: parts with fallback to the global entry, the last config.history_length messages of the history, config toggles applied';
COMMENT ON FUNCTION agent_memory.working_memory_entry(text, text) IS
    'An entry as one flat object: project_id, current_node, structure_index, recent_messages (newest 50), work_history_summary, context_data, last_user_input, created_at, updated_at';
COMMENT ON FUNCTION agent_memory.wm_context(text, text, text) IS
    'The context bundle of an entry: messages, message_metadata, working_history, last_user_message; a project_id that is not the session''s is refused';
COMMENT ON FUNCTION agent_memory.memory_scope(text, text, text) IS
    'The scope key of a memory node: global (one per node) or perThread (one per node and thread)';
COMMENT ON FUNCTION agent_memory.memory_tool(text, jsonb) IS
    'Run one memory tool request {path, command, content?, oldContent?} on a scope''s files; returns the JSON envelope, never an SQL error for a bad request';
COMMENT ON FUNCTION agent_memory.memory_render(text, text, integer) IS
    'A scope''s files for a prompt: tree (the paths, indented) or full (paths and contents), within max_chars, saying at the end what a cut left out';
