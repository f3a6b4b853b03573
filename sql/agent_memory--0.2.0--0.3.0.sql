-- agent_memory 0.2.0 -> 0.3.0: recall. Every memory table gets the search
-- column recall matches (rewriting the table once); recall, recall_rebuild
-- and the table of recall's settings come. Run by ALTER EXTENSION agent_memory UPDATE;
-- scripts/upgrade_test.sh checks that the result equals a fresh 0.3.0
-- install, object by object.
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

-- Recall (as src/recall/mod.rs declares it), its comment and grants.
CREATE FUNCTION agent_memory.recall(
    query text,
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    k integer DEFAULT 10)
RETURNS TABLE (kind text, key text, ref text, snippet text, score double precision,
               updated_at timestamp with time zone, signals jsonb)
STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
-- A query of only common words is no error: no NOTICE either.
SET client_min_messages = warning
-- Its statements are planned once per connection, not once per call.
SET plan_cache_mode = force_generic_plan
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_wrapper';
COMMENT ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer) IS
    'The k memories of a scope (session, user, graph owner or file scope) that best match a query by their words, across key-value entries, messages, working memory, graph nodes and files, newer ones weighing more; each with a snippet that marks the query''s words';
REVOKE ALL ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer)
    TO agent_memory_reader, agent_memory_writer;

-- Recall's search columns: the text search configuration they are written
-- in and the kinds kept in step (the others' columns are NULL), as
-- recall_rebuild() last made them from the settings. One row. Not dumped:
-- a restored database has the columns of a fresh install, and this row's
-- defaults say so.
CREATE TABLE agent_memory.recall_settings (
    config regconfig NOT NULL DEFAULT 'english',
    kinds  text[]    NOT NULL DEFAULT '{kv,message,node,file,working_memory}',
    one_row boolean  NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);
INSERT INTO agent_memory.recall_settings DEFAULT VALUES;

COMMENT ON TABLE agent_memory.recall_settings IS
    'The text search configuration of recall''s search columns and the kinds they are kept for, as recall_rebuild() last made them';
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
