-- agent_memory 0.2.0 -> 0.3.0: recall. Every memory table gets the search
-- column recall matches (rewriting the table once) and its GIN index;
-- recall, recall_rebuild and the table of recall's settings come; the
-- tenant policies lose their sub-select and the session_id columns their
-- domain, both for Citus; Claude's dialect gets a table of the empty
-- directories it keeps; every key holds the tenant second. Run by ALTER
-- EXTENSION agent_memory UPDATE; scripts/upgrade_test.sh checks that the
-- result equals a fresh 0.3.0 install, object by object.
\echo Use "ALTER EXTENSION agent_memory UPDATE TO '0.3.0'" to load this file. \quit

ALTER TABLE agent_memory.kv_entries ADD COLUMN search tsvector GENERATED ALWAYS AS (
    pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(key, 1000)), 'A')
    || CASE WHEN pg_catalog.octet_length(value::text) <= 800000
    THEN pg_catalog.jsonb_to_tsvector('english', value, '["string", "numeric", "key"]')
    ELSE pg_catalog.to_tsvector('english', pg_catalog.left(value::text, 200000)) END) STORED;

ALTER TABLE agent_memory.thread_messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    pg_catalog.to_tsvector('english', pg_catalog.left(content, 200000))) STORED;

ALTER TABLE agent_memory.wm_parts ADD COLUMN search tsvector GENERATED ALWAYS AS (
    CASE WHEN pg_catalog.octet_length(value::text) <= 800000
    THEN pg_catalog.jsonb_to_tsvector('english', value, '["string", "numeric"]')
    ELSE pg_catalog.to_tsvector('english', pg_catalog.left(value::text, 200000)) END) STORED;

ALTER TABLE agent_memory.graph_nodes ADD COLUMN search tsvector GENERATED ALWAYS AS (
    pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(title, 10000)), 'A')
    || pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(description, 40000)), 'B')
    || pg_catalog.to_tsvector('english', pg_catalog.left(body, 150000))) STORED;

ALTER TABLE agent_memory.memory_files ADD COLUMN search tsvector GENERATED ALWAYS AS (
    pg_catalog.setweight(pg_catalog.to_tsvector('english',
    pg_catalog.translate(pg_catalog.left(path, 1000), '/._-', '    ')), 'A')
    || pg_catalog.to_tsvector('english', pg_catalog.left(content, 200000))) STORED;

-- Each key holds the tenant right after the session, owner or scope, so
-- that a scan of one tenant's session, owner or scope reads none of
-- another tenant's rows under the same name.
ALTER TABLE agent_memory.thread_messages DROP CONSTRAINT thread_messages_session_id_thread_key_tenant_fkey;
ALTER TABLE agent_memory.kv_entries DROP CONSTRAINT kv_entries_pkey, ADD PRIMARY KEY (session_id, tenant, key);
ALTER TABLE agent_memory.message_threads DROP CONSTRAINT message_threads_pkey, ADD PRIMARY KEY (session_id, tenant, thread_key);
ALTER TABLE agent_memory.thread_messages DROP CONSTRAINT thread_messages_pkey, ADD PRIMARY KEY (session_id, tenant, thread_key, slot),
    ADD FOREIGN KEY (session_id, tenant, thread_key) REFERENCES agent_memory.message_threads ON DELETE CASCADE;
DROP INDEX agent_memory.thread_messages_idempotency_idx;
CREATE UNIQUE INDEX thread_messages_idempotency_idx ON agent_memory.thread_messages (session_id, tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
ALTER TABLE agent_memory.wm_parts DROP CONSTRAINT wm_parts_pkey, ADD PRIMARY KEY (session_id, tenant, node_key, part);
ALTER TABLE agent_memory.graph_nodes DROP CONSTRAINT graph_nodes_pkey, ADD PRIMARY KEY (owner, tenant, node_id);
ALTER TABLE agent_memory.graph_node_versions DROP CONSTRAINT graph_node_versions_pkey, ADD PRIMARY KEY (owner, tenant, node_id, version);
ALTER TABLE agent_memory.memory_files DROP CONSTRAINT memory_files_pkey, ADD PRIMARY KEY (scope, tenant, path);

-- The index of each search column.
CREATE INDEX kv_entries_search_idx ON agent_memory.kv_entries USING gin (search) WHERE search IS NOT NULL;
CREATE INDEX thread_messages_search_idx ON agent_memory.thread_messages USING gin (search) WHERE search IS NOT NULL;
CREATE INDEX wm_parts_search_idx ON agent_memory.wm_parts USING gin (search) WHERE search IS NOT NULL;
CREATE INDEX graph_nodes_search_idx ON agent_memory.graph_nodes USING gin (search) WHERE search IS NOT NULL;
CREATE INDEX memory_files_search_idx ON agent_memory.memory_files USING gin (search) WHERE search IS NOT NULL;

-- The meaning recall compares: an embedding of each item's text, and the
-- md5 of the text it was made of.
ALTER TABLE agent_memory.kv_entries ADD COLUMN embedding real[], ADD COLUMN embedding_md5 text;
ALTER TABLE agent_memory.thread_messages ADD COLUMN embedding real[], ADD COLUMN embedding_md5 text;
ALTER TABLE agent_memory.wm_parts ADD COLUMN embedding real[], ADD COLUMN embedding_md5 text;
ALTER TABLE agent_memory.graph_nodes ADD COLUMN embedding real[], ADD COLUMN embedding_md5 text;
ALTER TABLE agent_memory.memory_files ADD COLUMN embedding real[], ADD COLUMN embedding_md5 text;

-- Recall (as src/recall/mod.rs declares it), its comment and grants.
CREATE FUNCTION agent_memory.recall(
    query text,
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    k integer DEFAULT 10,
    embedding real[] DEFAULT NULL,
    weights jsonb DEFAULT NULL)
RETURNS TABLE (kind text, key text, ref text, snippet text, score double precision,
               updated_at timestamp with time zone, signals jsonb)
-- Not parallel safe: a search through pgvector sets hnsw.iterative_scan
-- for the transaction, which no parallel operation may do.
STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
-- A query of only common words is no error: no NOTICE either.
SET client_min_messages = warning
-- Its statements are planned once per connection, not once per call.
SET plan_cache_mode = force_generic_plan
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_wrapper';
COMMENT ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer, real[], jsonb) IS
    'The k memories of a scope (session, user, graph owner or file scope) that best match a query by their words and, given an embedding, their meaning, across key-value entries, messages, working memory, graph nodes and files, newer ones weighing more; each with a snippet that marks the query''s words';
REVOKE ALL ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer, real[], jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer, real[], jsonb)
    TO agent_memory_reader, agent_memory_writer;

-- Recall's search columns: the text search configuration they are written
-- in and the kinds kept in step (the others' columns are NULL), as
-- recall_rebuild() last made them from the settings. One row. Not dumped:
-- a restored database has the columns of a fresh install, and this row's
-- defaults say so.
CREATE TABLE agent_memory.recall_settings (
    config regconfig NOT NULL DEFAULT 'english',
    kinds  text[]    NOT NULL DEFAULT '{kv,message,node,file,working_memory}',
    -- The embeddings' dimension, as recall_enable_embeddings() set it;
    -- NULL: none are taken.
    dimension integer CHECK (dimension BETWEEN 1 AND 16000),
    one_row boolean  NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);
INSERT INTO agent_memory.recall_settings DEFAULT VALUES;

COMMENT ON TABLE agent_memory.recall_settings IS
    'The text search configuration of recall''s search columns and the kinds they are kept for, as recall_rebuild() last made them, and the embeddings'' dimension';
ALTER TABLE agent_memory.recall_settings OWNER TO agent_memory_owner;
GRANT SELECT ON agent_memory.recall_settings TO agent_memory_reader;

-- recall_rebuild (as cargo pgrx schema generates it), its comment and grant.
CREATE FUNCTION agent_memory.recall_rebuild() RETURNS jsonb
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'recall_rebuild_wrapper';
COMMENT ON FUNCTION agent_memory.recall_rebuild() IS
    'Rewrite recall''s search columns in agent_memory.text_search_config, kept for the kinds of agent_memory.recall_kinds only; returns them as JSON';
REVOKE ALL ON FUNCTION agent_memory.recall_rebuild() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.recall_rebuild() TO agent_memory_writer;

-- The memory tool's search command.
COMMENT ON FUNCTION agent_memory.memory_tool(text, jsonb) IS
    'Run one memory tool request {path, command, content?, oldContent?, query?} on a scope''s files; returns the JSON envelope, never an SQL error for a bad request';

-- Recall as a tool (as cargo pgrx schema generates them), comments, grants.
CREATE FUNCTION agent_memory.recall_tool(
    request jsonb,
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL) RETURNS jsonb
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'recall_tool_wrapper';
CREATE FUNCTION agent_memory.recall_tool_definition(
    name text DEFAULT 'recall',
    description text DEFAULT NULL,
    title text DEFAULT NULL,
    format text DEFAULT 'anthropic') RETURNS jsonb
IMMUTABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'recall_tool_definition_wrapper';
COMMENT ON FUNCTION agent_memory.recall_tool(jsonb, text, text, text, text) IS
    'Recall as a tool a model calls: the request {query, kinds?, k?} is the model''s, the scope the application''s; answers {ok, result: {memories}} or, for a bad request, {ok: false, error: {message, code}}';
COMMENT ON FUNCTION agent_memory.recall_tool_definition(text, text, text, text) IS
    'A definition of recall as a tool with the JSON Schema of its request, in Anthropic''s (name, description, input_schema) or OpenAI''s function format';
REVOKE ALL ON FUNCTION agent_memory.recall_tool(jsonb, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION agent_memory.recall_tool_definition(text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.recall_tool(jsonb, text, text, text, text),
    agent_memory.recall_tool_definition(text, text, text, text)
    TO agent_memory_reader, agent_memory_writer;

-- Recall by meaning (as src/recall/embeddings.rs declares them), comments,
-- grants.
CREATE FUNCTION agent_memory.recall_embed(
    kind text,
    key text,
    ref text,
    embedding real[],
    source_md5 text DEFAULT NULL)
RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_embed_wrapper';
CREATE FUNCTION agent_memory.recall_outbox(
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    max_items integer DEFAULT 100)
RETURNS TABLE (kind text, key text, ref text, content text, source_md5 text)
STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_outbox_wrapper';
CREATE FUNCTION agent_memory.recall_enable_embeddings(dimension integer) RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'recall_enable_embeddings_wrapper';
COMMENT ON FUNCTION agent_memory.recall_embed(text, text, text, real[], text) IS
    'Store an application''s embedding of an item''s text (kind, key and ref as recall names the item); with source_md5, only if the item still holds that text; true when stored';
COMMENT ON FUNCTION agent_memory.recall_outbox(text, text, text, text, text[], integer) IS
    'The items of a scope that need an embedding (none yet, or one of another text or dimension), each with the text to embed and its md5, at most max_items';
COMMENT ON FUNCTION agent_memory.recall_enable_embeddings(integer) IS
    'Take embeddings of this dimension for recall by meaning; stored embeddings of another dimension become stale';
REVOKE ALL ON FUNCTION agent_memory.recall_embed(text, text, text, real[], text),
    agent_memory.recall_outbox(text, text, text, text, text[], integer),
    agent_memory.recall_enable_embeddings(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.recall_outbox(text, text, text, text, text[], integer)
    TO agent_memory_reader, agent_memory_writer;
GRANT EXECUTE ON FUNCTION agent_memory.recall_embed(text, text, text, real[], text),
    agent_memory.recall_enable_embeddings(integer) TO agent_memory_writer;

-- The tenant policies call visible_tenant() without a sub-select, which
-- Citus refuses in the policies of distributed tables (sql/tenants.sql).
ALTER POLICY tenant_rows ON agent_memory.sessions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.kv_entries
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.message_threads
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.thread_messages
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.wm_parts
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.graph_nodes
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.graph_node_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.memory_files
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER POLICY tenant_rows ON agent_memory.memory_scopes
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));

-- Every session_id column becomes plain text (sql/schema.sql): Citus routes
-- a call by coercing its argument to the column's type, which it cannot do
-- to a domain. The domain's check stays on sessions, which every other
-- session_id references. The view over two of the columns goes and comes
-- back as it was.
DROP VIEW agent_memory.message_thread_stats;
ALTER TABLE agent_memory.sessions ALTER COLUMN session_id TYPE text,
    ADD CONSTRAINT sessions_session_id_check CHECK (session_id <> '');
ALTER TABLE agent_memory.kv_entries ALTER COLUMN session_id TYPE text;
ALTER TABLE agent_memory.message_threads ALTER COLUMN session_id TYPE text;
ALTER TABLE agent_memory.thread_messages ALTER COLUMN session_id TYPE text;
ALTER TABLE agent_memory.wm_parts ALTER COLUMN session_id TYPE text;
DROP DOMAIN agent_memory.session_key;
CREATE VIEW agent_memory.message_thread_stats AS
SELECT t.session_id,
       nullif(t.thread_key, '') AS node_id,
       t.keep,
       count(m.slot) AS messages,
       t.appends,
       t.appends - count(m.slot) AS trimmed
FROM agent_memory.message_threads t
LEFT JOIN agent_memory.thread_messages m USING (session_id, thread_key, tenant)
GROUP BY t.session_id, t.thread_key, t.tenant, t.keep, t.appends;
COMMENT ON VIEW agent_memory.message_thread_stats IS
    'Per (session, node) thread: keep, messages held, appends so far (minus pops), and how many trimming removed';
ALTER VIEW agent_memory.message_thread_stats SET (security_invoker = true);
GRANT SELECT ON agent_memory.message_thread_stats TO agent_memory_reader;
GRANT INSERT, UPDATE, DELETE ON agent_memory.message_thread_stats TO agent_memory_writer;

-- The directories Claude's dialect keeps with no file under them
-- (sql/schema.sql), with their tenant policy and grants.
CREATE TABLE agent_memory.memory_directories (
    scope  text COLLATE "C" NOT NULL,
    path   agent_memory.memory_path NOT NULL,
    tenant text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant(),
    PRIMARY KEY (scope, tenant, path)
);
COMMENT ON TABLE agent_memory.memory_directories IS
    'Memory tool directories Claude''s dialect keeps with no file under them: one row per such directory of a scope';
SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_directories', '');
CREATE POLICY tenant_rows ON agent_memory.memory_directories
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER TABLE agent_memory.memory_directories ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
GRANT SELECT ON agent_memory.memory_directories TO agent_memory_reader;
GRANT INSERT, UPDATE, DELETE ON agent_memory.memory_directories TO agent_memory_writer;

-- The tables' owner runs what the tables call (sql/security.sql).
GRANT EXECUTE ON FUNCTION
    agent_memory.caller_tenant(),
    agent_memory.visible_tenant(),
    agent_memory.note_session_deletions()
TO agent_memory_owner;

-- Preconditions (src/sessions/kv.rs, src/files/memory_tool.rs):
-- key-value entries and memory files get a version; kv_set and kv_delete
-- take the version the writer expects, kv_entry reads it, and the memory
-- tool's requests carry theirs in the request.
ALTER TABLE agent_memory.kv_entries ADD COLUMN version integer NOT NULL DEFAULT 1;
ALTER TABLE agent_memory.memory_files ADD COLUMN version integer NOT NULL DEFAULT 1;
DROP FUNCTION agent_memory.kv_set(text, text, jsonb, interval);
CREATE FUNCTION agent_memory.kv_set(
    session_id text, key text, value jsonb, ttl interval DEFAULT NULL, expected_version integer DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_set_wrapper';
DROP FUNCTION agent_memory.kv_delete(text, text);
CREATE FUNCTION agent_memory.kv_delete(session_id text, key text, expected_version integer DEFAULT NULL)
RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_delete_wrapper';
CREATE FUNCTION agent_memory.kv_entry(session_id text, key text) RETURNS jsonb
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_entry_wrapper';
COMMENT ON FUNCTION agent_memory.kv_set(text, text, jsonb, interval, integer) IS
    'Store value under key in an active session (renewing it), only if the entry is at expected_version when given (0: none); evicts the oldest entries past the word budget; returns {stored, key, words, total_words, evicted, version}';
COMMENT ON FUNCTION agent_memory.kv_entry(text, text) IS
    'The live entry under key as {key, value, version, createdAt, updatedAt, expiresAt}, or NULL; version is what a precondition names';
COMMENT ON FUNCTION agent_memory.kv_delete(text, text, integer) IS
    'Delete one key of an active session (renewing it), only if it is at expected_version when given; whether a live entry was deleted';
REVOKE ALL ON FUNCTION agent_memory.kv_set(text, text, jsonb, interval, integer),
    agent_memory.kv_delete(text, text, integer),
    agent_memory.kv_entry(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.kv_entry(text, text) TO agent_memory_reader;
GRANT EXECUTE ON FUNCTION agent_memory.kv_set(text, text, jsonb, interval, integer),
    agent_memory.kv_delete(text, text, integer),
    agent_memory.kv_entry(text, text) TO agent_memory_writer;

-- Preconditions on working-memory parts (src/working_memory/parts.rs):
-- wm_set and wm_patch take the version of the entry's own part the writer
-- expects, and wm_part reads it.
DROP FUNCTION agent_memory.wm_set(text, text, jsonb, text);
CREATE FUNCTION agent_memory.wm_set(
    session_id text, part text, value jsonb, node_id text DEFAULT NULL, expected_version integer DEFAULT NULL)
RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'wm_set_wrapper';
DROP FUNCTION agent_memory.wm_patch(text, text, jsonb, text);
CREATE FUNCTION agent_memory.wm_patch(
    session_id text, part text, patch jsonb, node_id text DEFAULT NULL, expected_version integer DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'wm_patch_wrapper';
CREATE FUNCTION agent_memory.wm_part(session_id text, part text, node_id text DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'wm_part_wrapper';
COMMENT ON FUNCTION agent_memory.wm_set(text, text, jsonb, text, integer) IS
    'Store one part of a working-memory entry (node NULL: the session''s global entry), sanitised, only if the entry''s own part is at expected_version when given (0: none); false when it equals what is stored (nothing written, no notification)';
COMMENT ON FUNCTION agent_memory.wm_patch(text, text, jsonb, text, integer) IS
    'Apply an RFC 7396 merge patch to one part of an entry (starting from what the entry shows), only if the entry''s own part is at expected_version when given, and return the new value';
COMMENT ON FUNCTION agent_memory.wm_part(text, text, text) IS
    'One part of an entry as wm_get shows it, with the version of the entry''s own part (0: none) that a precondition names: {part, value, version}';
REVOKE ALL ON FUNCTION agent_memory.wm_set(text, text, jsonb, text, integer),
    agent_memory.wm_patch(text, text, jsonb, text, integer),
    agent_memory.wm_part(text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.wm_part(text, text, text) TO agent_memory_reader;
GRANT EXECUTE ON FUNCTION agent_memory.wm_set(text, text, jsonb, text, integer),
    agent_memory.wm_patch(text, text, jsonb, text, integer),
    agent_memory.wm_part(text, text, text) TO agent_memory_writer;

-- Preconditions on graph nodes (src/graph/nodes.rs): a node's revision
-- counts every change (its version only the versions saved); graph_read
-- returns it, and graph_write, graph_append and graph_delete take the
-- revision the writer expects.
ALTER TABLE agent_memory.graph_nodes ADD COLUMN revision integer NOT NULL DEFAULT 1;
DROP FUNCTION agent_memory.graph_write(text, text, text, text, text, text[], text);
CREATE FUNCTION agent_memory.graph_write(
    owner text, node_id text, title text, description text, body text, refs text[] DEFAULT NULL,
    change_description text DEFAULT NULL, expected_revision integer DEFAULT NULL)
RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'graph_write_wrapper';
DROP FUNCTION agent_memory.graph_append(text, text, text);
CREATE FUNCTION agent_memory.graph_append(
    owner text, node_id text, content text, expected_revision integer DEFAULT NULL)
RETURNS integer
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'graph_append_wrapper';
DROP FUNCTION agent_memory.graph_delete(text, text);
CREATE FUNCTION agent_memory.graph_delete(owner text, node_id text, expected_revision integer DEFAULT NULL)
RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'graph_delete_wrapper';
COMMENT ON FUNCTION agent_memory.graph_read(text, text) IS
    'A node as JSON: id, title, description, version, revision, createdAt, updatedAt, refs, unresolvedRefs, body; also the virtual root ''__root__''';
COMMENT ON FUNCTION agent_memory.graph_write(text, text, text, text, text, text[], text, integer) IS
    'Write a node (NULL keeps a field), only if it is at expected_revision when given; a change with a change_description first saves the previous state as a version; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_append(text, text, text, integer) IS
    'Append content to a node''s body on a new line, in place, only if it is at expected_revision when given; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_delete(text, text, integer) IS
    'Delete a node and its versions, only if it is at expected_revision when given (0: none); refs that named it stay, unresolved; false when there was no such node';
REVOKE ALL ON FUNCTION agent_memory.graph_write(text, text, text, text, text, text[], text, integer),
    agent_memory.graph_append(text, text, text, integer),
    agent_memory.graph_delete(text, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.graph_write(text, text, text, text, text, text[], text, integer),
    agent_memory.graph_append(text, text, text, integer),
    agent_memory.graph_delete(text, text, integer) TO agent_memory_writer;

-- History (src/sessions/kv_versions.rs, src/files/versions.rs): the
-- versions key-value entries and memory files keep while
-- agent_memory.history_retention is above 0, with their tenant policies,
-- grants, and the functions that list, read, restore and purge them.
CREATE TABLE agent_memory.kv_entry_versions (
    session_id  text        NOT NULL,
    key         agent_memory.memory_key NOT NULL,
    version     integer     NOT NULL,
    value       jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    replaced_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant      text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant(),
    PRIMARY KEY (session_id, tenant, key, version),
    FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE
);
CREATE INDEX kv_entry_versions_expires_idx ON agent_memory.kv_entry_versions (expires_at);
COMMENT ON TABLE agent_memory.kv_entry_versions IS
    'Key-value memory: earlier versions of entries, kept per agent_memory.history_retention until they expire';
SELECT pg_catalog.pg_extension_config_dump('agent_memory.kv_entry_versions', '');
CREATE TABLE agent_memory.memory_file_versions (
    scope       text COLLATE "C" NOT NULL,
    path        agent_memory.memory_path NOT NULL,
    version     integer     NOT NULL,
    content     text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    replaced_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant      text COLLATE "C" NOT NULL DEFAULT agent_memory.caller_tenant(),
    PRIMARY KEY (scope, tenant, path, version)
);
COMMENT ON TABLE agent_memory.memory_file_versions IS
    'Memory tool: earlier versions of files, kept per agent_memory.history_retention';
SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_file_versions', '');
CREATE POLICY tenant_rows ON agent_memory.kv_entry_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_file_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
ALTER TABLE agent_memory.kv_entry_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_file_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
GRANT SELECT ON agent_memory.kv_entry_versions, agent_memory.memory_file_versions TO agent_memory_reader;
GRANT INSERT, UPDATE, DELETE ON agent_memory.kv_entry_versions, agent_memory.memory_file_versions
    TO agent_memory_writer;

CREATE FUNCTION agent_memory.kv_versions(session_id text, key text)
RETURNS TABLE (version integer, value jsonb, updated_at timestamptz, replaced_at timestamptz, expires_at timestamptz)
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_versions_wrapper';
CREATE FUNCTION agent_memory.kv_version(session_id text, key text, version integer) RETURNS jsonb
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_version_wrapper';
CREATE FUNCTION agent_memory.kv_restore(
    session_id text, key text, version integer, expected_version integer DEFAULT NULL, ttl interval DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_restore_wrapper';
CREATE FUNCTION agent_memory.kv_purge_history(session_id text, key text DEFAULT NULL) RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'kv_purge_history_wrapper';
CREATE FUNCTION agent_memory.memory_versions(scope text, path text)
RETURNS TABLE (version integer, content text, updated_at timestamptz, replaced_at timestamptz)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'memory_versions_wrapper';
CREATE FUNCTION agent_memory.memory_version(scope text, path text, version integer) RETURNS jsonb
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'memory_version_wrapper';
CREATE FUNCTION agent_memory.memory_restore(
    scope text, path text, version integer, expected_version integer DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'memory_restore_wrapper';
CREATE FUNCTION agent_memory.memory_purge_history(scope text, path text DEFAULT NULL) RETURNS bigint
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'memory_purge_history_wrapper';
COMMENT ON FUNCTION agent_memory.kv_versions(text, text) IS
    'The earlier versions an entry''s history keeps (agent_memory.history_retention), newest first, with when each was written, replaced and expires';
COMMENT ON FUNCTION agent_memory.kv_version(text, text, integer) IS
    'One kept version of an entry as {key, value, version, createdAt, updatedAt, replacedAt, expiresAt}, or NULL';
COMMENT ON FUNCTION agent_memory.kv_restore(text, text, integer, integer, interval) IS
    'Write a kept version''s value back as the entry''s next version, as kv_set does (only if the entry is at expected_version when given); returns what kv_set returns';
COMMENT ON FUNCTION agent_memory.kv_purge_history(text, text) IS
    'Remove the kept versions of one entry (key NULL: of every entry of the session); how many were removed';
COMMENT ON FUNCTION agent_memory.memory_versions(text, text) IS
    'The earlier versions a memory file''s history keeps (agent_memory.history_retention), newest first';
COMMENT ON FUNCTION agent_memory.memory_version(text, text, integer) IS
    'One kept version of a memory file as {path, content, version, sha256, createdAt, updatedAt, replacedAt}, or NULL';
COMMENT ON FUNCTION agent_memory.memory_restore(text, text, integer, integer) IS
    'Write a kept version''s content back as the file''s next version, re-creating a deleted file (only if the file is at expected_version when given; 0: none); returns {path, version}';
COMMENT ON FUNCTION agent_memory.memory_purge_history(text, text) IS
    'Remove the kept versions of a file or directory (path NULL: of the whole scope); how many were removed';
REVOKE ALL ON FUNCTION agent_memory.kv_versions(text, text),
    agent_memory.kv_version(text, text, integer),
    agent_memory.kv_restore(text, text, integer, integer, interval),
    agent_memory.kv_purge_history(text, text),
    agent_memory.memory_versions(text, text),
    agent_memory.memory_version(text, text, integer),
    agent_memory.memory_restore(text, text, integer, integer),
    agent_memory.memory_purge_history(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.kv_versions(text, text),
    agent_memory.kv_version(text, text, integer),
    agent_memory.memory_versions(text, text),
    agent_memory.memory_version(text, text, integer) TO agent_memory_reader;
GRANT EXECUTE ON FUNCTION agent_memory.kv_versions(text, text),
    agent_memory.kv_version(text, text, integer),
    agent_memory.kv_restore(text, text, integer, integer, interval),
    agent_memory.kv_purge_history(text, text),
    agent_memory.memory_versions(text, text),
    agent_memory.memory_version(text, text, integer),
    agent_memory.memory_restore(text, text, integer, integer),
    agent_memory.memory_purge_history(text, text) TO agent_memory_writer;

-- Erasure (src/portability/erase.rs): a user's sessions, and the graph
-- owners and file scopes the application keys by the user.
CREATE FUNCTION agent_memory.erase_user(user_id text, owners text[] DEFAULT NULL, scopes text[] DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'erase_user_wrapper';
COMMENT ON FUNCTION agent_memory.erase_user(text, text[], text[]) IS
    'Remove every session of a user with all it holds, and the graph memory of owners and the memory files of scopes, with their versions; returns how many rows of each kind went';
REVOKE ALL ON FUNCTION agent_memory.erase_user(text, text[], text[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.erase_user(text, text[], text[]) TO agent_memory_writer;

-- A precondition through Claude's dialect (src/files/claude_memory.rs):
-- the application passes the version or hash of the file a call changes.
DROP FUNCTION agent_memory.claude_memory(text, jsonb);
DROP FUNCTION agent_memory.claude_memory_tool_result(text, jsonb);
CREATE FUNCTION agent_memory.claude_memory(
    scope text, request jsonb, expected_version integer DEFAULT NULL, expected_sha256 text DEFAULT NULL)
RETURNS text
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'claude_memory_wrapper';
CREATE FUNCTION agent_memory.claude_memory_tool_result(
    scope text, tool_use jsonb, expected_version integer DEFAULT NULL, expected_sha256 text DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'claude_memory_tool_result_wrapper';
COMMENT ON FUNCTION agent_memory.claude_memory(text, jsonb, integer, text) IS
    'Run one call of Claude''s memory tool (memory_20250818: view, create, str_replace, insert, delete, rename under /memories) on a scope''s files, only if the file it changes is at expected_version or has content expected_sha256 when given; returns the tool''s text, a refusal included';
COMMENT ON FUNCTION agent_memory.claude_memory_tool_result(text, jsonb, integer, text) IS
    'Run the memory call of a Claude tool_use block ({id, input, ...}), with claude_memory''s precondition, and return the tool_result block to send back (is_error true when refused)';
ALTER FUNCTION agent_memory.claude_memory(text, jsonb, integer, text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION agent_memory.claude_memory_tool_result(text, jsonb, integer, text) SET plan_cache_mode = force_generic_plan;
REVOKE ALL ON FUNCTION agent_memory.claude_memory(text, jsonb, integer, text),
    agent_memory.claude_memory_tool_result(text, jsonb, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.claude_memory(text, jsonb, integer, text),
    agent_memory.claude_memory_tool_result(text, jsonb, integer, text) TO agent_memory_reader;
GRANT EXECUTE ON FUNCTION agent_memory.claude_memory(text, jsonb, integer, text),
    agent_memory.claude_memory_tool_result(text, jsonb, integer, text) TO agent_memory_writer;

-- Export and import (sql/portability.sql, src/portability/import.rs):
-- memory as JSON lines, one item per line, taken back one line per call.
-- Export: everything a session, a user, a graph owner or a file scope
-- holds in the caller's tenant, as JSON lines that import() takes back.
-- Each line is one item with its kind, its key, its columns by their
-- names, and the versions kept of it. The lines come in the order import
-- needs: each session before what it holds, a session's messages by seq
-- (then where its numbering stands), then graph nodes, files and
-- directories; items of a kind by their key.
-- RETURN QUERY gathers them in a tuplestore, which spills to disk past
-- work_mem: an export of any size holds at most work_mem of lines in
-- memory. Only live items go: no expired session, entry or version. The
-- versions kept of an entry or a file that is gone have lines of their own
-- (kv_history, file_history); so do an item's versions past the first
-- 16 MB of them (kv_history, file_history, node_history, each with about
-- 16 MB of versions at most, after the item's line), since one JSON value
-- holds at most 256 MB.
CREATE FUNCTION agent_memory.export(
    session_id text DEFAULT NULL,
    user_id    text DEFAULT NULL,
    owner      text DEFAULT NULL,
    scope      text DEFAULT NULL)
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $export$
#variable_conflict use_column
DECLARE
    callers_tenant text := agent_memory.caller_tenant();
    -- Read after caller_tenant() has loaded the library that defines it.
    default_idle interval := current_setting('agent_memory.session_idle_timeout')::interval;
BEGIN
    IF export.session_id IS NULL AND export.user_id IS NULL
       AND export.owner IS NULL AND export.scope IS NULL THEN
        RAISE EXCEPTION 'export needs a session_id, a user_id, an owner or a scope'
            USING ERRCODE = '22004';
    END IF;
    RETURN QUERY
    WITH chosen AS (
        SELECT s.*
        FROM agent_memory.sessions s
        WHERE s.tenant = callers_tenant
          AND (s.session_id = export.session_id OR s.user_id = export.user_id)
          AND s.last_activity_at > now() - coalesce(s.idle_timeout, default_idle)),
    -- Each kept version as its line has it, numbered by the part of its
    -- item's versions it goes in: about 16 MB of versions to a part, the
    -- oldest first. Part 0 goes on the item's line, the others on lines of
    -- their own.
    -- (live: whether the item is there.)
    kv_versions AS (
        SELECT v.session_id, v.key, v.version, v.line, v.live,
               (sum(pg_column_size(v.line)) OVER by_version - pg_column_size(v.line)) / 16777216 AS part
        FROM (SELECT v.session_id, v.key, v.version, k.key IS NOT NULL AS live,
                     jsonb_build_object(
                         'version', v.version, 'value', v.value, 'created_at', v.created_at,
                         'updated_at', v.updated_at, 'expires_at', v.expires_at,
                         'replaced_at', v.replaced_at) AS line
              FROM chosen s
              JOIN agent_memory.kv_entry_versions v ON v.session_id = s.session_id AND v.tenant = s.tenant
              LEFT JOIN agent_memory.kv_entries k
                ON k.session_id = v.session_id AND k.key = v.key AND k.tenant = v.tenant
               AND k.expires_at > now()
              WHERE v.expires_at > now()) v
        WINDOW by_version AS (PARTITION BY v.session_id, v.key ORDER BY v.version)),
    kv_parts AS (
        SELECT v.session_id, v.key, v.part, bool_or(v.live) AS live,
               jsonb_agg(v.line ORDER BY v.version) AS versions
        FROM kv_versions v
        GROUP BY v.session_id, v.key, v.part),
    node_versions AS (
        SELECT v.owner, v.node_id, v.version, v.line,
               (sum(pg_column_size(v.line)) OVER by_version - pg_column_size(v.line)) / 16777216 AS part
        FROM (SELECT v.owner, v.node_id, v.version,
                     jsonb_build_object(
                         'version', v.version, 'title', v.title, 'description', v.description,
                         'body', v.body, 'links', to_jsonb(v.links),
                         'created_at', v.created_at, 'updated_at', v.updated_at,
                         'change_description', v.change_description,
                         'saved_at', v.saved_at) AS line
              FROM agent_memory.graph_node_versions v
              WHERE v.owner = export.owner AND v.tenant = callers_tenant) v
        WINDOW by_version AS (PARTITION BY v.owner, v.node_id ORDER BY v.version)),
    node_parts AS (
        SELECT v.owner, v.node_id, v.part, jsonb_agg(v.line ORDER BY v.version) AS versions
        FROM node_versions v
        GROUP BY v.owner, v.node_id, v.part),
    file_versions AS (
        SELECT v.scope, v.path, v.version, v.line, v.live,
               (sum(pg_column_size(v.line)) OVER by_version - pg_column_size(v.line)) / 16777216 AS part
        FROM (SELECT v.scope, v.path, v.version, f.path IS NOT NULL AS live,
                     jsonb_build_object(
                         'version', v.version, 'content', v.content,
                         'created_at', v.created_at, 'updated_at', v.updated_at,
                         'replaced_at', v.replaced_at) AS line
              FROM agent_memory.memory_file_versions v
              LEFT JOIN agent_memory.memory_files f
                ON f.scope = v.scope AND f.path = v.path AND f.tenant = v.tenant
              WHERE v.scope = export.scope AND v.tenant = callers_tenant) v
        WINDOW by_version AS (PARTITION BY v.scope, v.path ORDER BY v.version)),
    file_parts AS (
        SELECT v.scope, v.path, v.part, bool_or(v.live) AS live,
               jsonb_agg(v.line ORDER BY v.version) AS versions
        FROM file_versions v
        GROUP BY v.scope, v.path, v.part),
    lines AS (
        SELECT s.session_id AS session_key, 0 AS rank, 0::bigint AS seq, '' AS item_key, 0::bigint AS part,
               jsonb_build_object(
                   'kind', 'session', 'session_id', s.session_id, 'user_id', s.user_id,
                   'project_id', s.project_id, 'active_node_id', s.active_node_id,
                   'metadata', s.metadata, 'idle_timeout', s.idle_timeout::text,
                   'created_at', s.created_at, 'last_activity_at', s.last_activity_at) AS line
        FROM chosen s
        UNION ALL
        SELECT k.session_id, 1, 0, k.key::text, 0,
               jsonb_build_object(
                   'kind', 'kv', 'session_id', k.session_id, 'key', k.key, 'value', k.value,
                   'version', k.version, 'created_at', k.created_at, 'updated_at', k.updated_at,
                   'expires_at', k.expires_at, 'versions', coalesce(p.versions, '[]'))
        FROM chosen s
        JOIN agent_memory.kv_entries k ON k.session_id = s.session_id AND k.tenant = s.tenant
        LEFT JOIN kv_parts p ON p.session_id = k.session_id AND p.key = k.key AND p.part = 0
        WHERE k.expires_at > now()
        UNION ALL
        -- The versions kept of an entry that is gone (kv_restore can bring
        -- one back), and those past the first part of a live entry's.
        SELECT p.session_id, 1, 0, p.key::text, p.part,
               jsonb_build_object(
                   'kind', 'kv_history', 'session_id', p.session_id, 'key', p.key,
                   'versions', p.versions)
        FROM kv_parts p
        WHERE p.part > 0 OR NOT p.live
        UNION ALL
        SELECT p.session_id, 2, 0, p.node_key || '/' || p.part, 0,
               jsonb_build_object(
                   'kind', 'part', 'session_id', p.session_id, 'node_id', nullif(p.node_key, ''),
                   'part', p.part, 'value', p.value, 'version', p.version,
                   'created_at', p.created_at, 'updated_at', p.updated_at)
        FROM chosen s
        JOIN agent_memory.wm_parts p ON p.session_id = s.session_id AND p.tenant = s.tenant
        UNION ALL
        SELECT m.session_id, 3, m.seq, '', 0,
               jsonb_build_object(
                   'kind', 'message', 'session_id', m.session_id, 'node_id', m.node_id,
                   'seq', m.seq, 'keep', t.keep, 'role', m.role, 'content', m.content,
                   'metadata', m.metadata, 'created_at', m.created_at)
        FROM chosen s
        JOIN agent_memory.message_threads t ON t.session_id = s.session_id AND t.tenant = s.tenant
        JOIN agent_memory.thread_messages m
          ON m.session_id = t.session_id AND m.thread_key = t.thread_key AND m.tenant = t.tenant
        UNION ALL
        -- Where the session's numbering of messages stands, when past its
        -- newest message (newer ones were popped or cleared, or a tool
        -- result without its call was not stored), so that its next append
        -- after an import takes the seq it would take here.
        -- Its seq orders it after the messages.
        SELECT x.session_id, 3, x.last_seq, '', 0,
               jsonb_build_object('kind', 'message_seq', 'session_id', x.session_id,
                                  'last_seq', x.last_seq)
        FROM (SELECT u.session_id,
                     greatest(u.last_message_seq,
                              (SELECT max(t.last_seq) FROM agent_memory.message_threads t
                               WHERE t.session_id = u.session_id AND t.tenant = u.tenant)) AS last_seq,
                     (SELECT max(m.seq) FROM agent_memory.thread_messages m
                      WHERE m.session_id = u.session_id AND m.tenant = u.tenant) AS newest
              FROM chosen s
              JOIN agent_memory.sessions u ON u.session_id = s.session_id AND u.tenant = s.tenant) x
        WHERE x.last_seq > coalesce(x.newest, 0)
        UNION ALL
        SELECT NULL, 4, 0, n.node_id::text, 0,
               jsonb_build_object(
                   'kind', 'node', 'owner', n.owner, 'node_id', n.node_id, 'title', n.title,
                   'description', n.description, 'body', n.body, 'links', to_jsonb(n.links),
                   'version', n.version, 'revision', n.revision,
                   'created_at', n.created_at, 'updated_at', n.updated_at,
                   'versions', coalesce(p.versions, '[]'))
        FROM agent_memory.graph_nodes n
        LEFT JOIN node_parts p ON p.owner = n.owner AND p.node_id = n.node_id AND p.part = 0
        WHERE n.owner = export.owner AND n.tenant = callers_tenant
        UNION ALL
        -- The versions of a node past the first part.
        SELECT NULL, 4, 0, n.node_id::text, p.part,
               jsonb_build_object(
                   'kind', 'node_history', 'owner', n.owner, 'node_id', n.node_id,
                   'versions', p.versions)
        FROM agent_memory.graph_nodes n
        JOIN node_parts p ON p.owner = n.owner AND p.node_id = n.node_id AND p.part > 0
        WHERE n.owner = export.owner AND n.tenant = callers_tenant
        UNION ALL
        SELECT NULL, 5, 0, f.path::text, 0,
               jsonb_build_object(
                   'kind', 'file', 'scope', f.scope, 'path', f.path, 'content', f.content,
                   'version', f.version, 'created_at', f.created_at, 'updated_at', f.updated_at,
                   'versions', coalesce(p.versions, '[]'))
        FROM agent_memory.memory_files f
        LEFT JOIN file_parts p ON p.scope = f.scope AND p.path = f.path AND p.part = 0
        WHERE f.scope = export.scope AND f.tenant = callers_tenant
        UNION ALL
        -- The versions kept of a file that was deleted, and those past the
        -- first part of a file's.
        SELECT NULL, 5, 0, p.path::text, p.part,
               jsonb_build_object(
                   'kind', 'file_history', 'scope', p.scope, 'path', p.path,
                   'versions', p.versions)
        FROM file_parts p
        WHERE p.part > 0 OR NOT p.live
        UNION ALL
        SELECT NULL, 6, 0, d.path::text, 0,
               jsonb_build_object('kind', 'directory', 'scope', d.scope, 'path', d.path)
        FROM agent_memory.memory_directories d
        WHERE d.scope = export.scope AND d.tenant = callers_tenant)
    SELECT l.line FROM lines l
    ORDER BY l.session_key COLLATE "C" NULLS LAST, l.rank, l.seq, l.item_key COLLATE "C", l.part;
END
$export$;

CREATE FUNCTION agent_memory."import"(
    line text, session_id text DEFAULT NULL, user_id text DEFAULT NULL,
    owner text DEFAULT NULL, scope text DEFAULT NULL)
RETURNS jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'import_wrapper';
CREATE FUNCTION agent_memory.import_lines(
    lines text[], session_id text DEFAULT NULL, user_id text DEFAULT NULL,
    owner text DEFAULT NULL, scope text DEFAULT NULL)
RETURNS SETOF jsonb
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'import_lines_wrapper';
COMMENT ON FUNCTION agent_memory.export(text, text, text, text) IS
    'Everything a session, a user, a graph owner or a file scope holds, as JSON lines: one item per line with its kind, key, columns and kept versions';
COMMENT ON FUNCTION agent_memory.import(text, text, text, text, text) IS
    'Take one line of an export, whole or refused, optionally under another session, user, owner or scope; returns what became of it';
REVOKE ALL ON FUNCTION agent_memory.export(text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION agent_memory.import(text, text, text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION agent_memory.import_lines(text[], text, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.export(text, text, text, text) TO agent_memory_reader, agent_memory_writer;
GRANT EXECUTE ON FUNCTION agent_memory.import(text, text, text, text, text) TO agent_memory_writer;
GRANT EXECUTE ON FUNCTION agent_memory.import_lines(text[], text, text, text, text) TO agent_memory_writer;
COMMENT ON FUNCTION agent_memory.import_lines(text[], text, text, text, text) IS
    'Take the lines of an export in order, as import takes each, writing runs of entries, messages and files together; returns import''s result for each line, in order';

-- An idle timeout is at most 100 years, so that the times it is added to
-- or taken from stay valid timestamps: one past that range made every
-- cleanup run fail, for every tenant. Longer ones become 100 years.
ALTER DOMAIN agent_memory.positive_interval DROP CONSTRAINT positive_interval_check;
UPDATE agent_memory.sessions SET idle_timeout = interval '100 years'
WHERE idle_timeout > interval '100 years';
ALTER DOMAIN agent_memory.positive_interval
    ADD CONSTRAINT positive_interval_check CHECK (VALUE > interval '0' AND VALUE <= interval '100 years');
COMMENT ON DOMAIN agent_memory.positive_interval IS 'An interval longer than zero and at most 100 years (a session''s idle timeout)';

-- visible_tenant() is '' while isolation is off for the caller, not NULL:
-- a role left without isolation where other roles have it saw and changed
-- their rows by direct SQL through the policies.
COMMENT ON FUNCTION agent_memory.visible_tenant() IS
    'The tenant whose rows the caller sees and changes: '''' (the memory every role shares) while agent_memory.tenant_isolation is off for it, else caller_tenant()';

-- The functions that build one value from many stored ones add up the
-- values' sizes first (value_bytes), to refuse past
-- agent_memory.max_result_bytes before building anything.
CREATE FUNCTION agent_memory.value_bytes(value jsonb) RETURNS integer
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE internal AS 'byteaoctetlen';
COMMENT ON FUNCTION agent_memory.value_bytes(jsonb) IS
    'The bytes a jsonb value takes uncompressed, read from its header without fetching the value';
REVOKE ALL ON FUNCTION agent_memory.value_bytes(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.value_bytes(jsonb) TO agent_memory_reader, agent_memory_writer;

-- A manual cleanup run is its tenant's: other tenants no longer see what it
-- removed, and pruning keeps the newest runs of each tenant and of the
-- worker, so no tenant's runs push out another's.
ALTER TABLE agent_memory.cleanup_runs ADD COLUMN tenant text COLLATE "C";
CREATE INDEX cleanup_runs_tenant_idx ON agent_memory.cleanup_runs (tenant, run_id);
ALTER TABLE agent_memory.cleanup_runs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_runs ON agent_memory.cleanup_runs FOR SELECT
    USING (tenant IS NULL OR tenant = agent_memory.visible_tenant());
