-- agent_memory on Citus: distribute the tables, delegate the functions,
-- and install a per-shard cleanup. See docs/scaling.md for the why.
--
-- Run it once, on the coordinator, in the application's database, as the
-- superuser that ran CREATE EXTENSION agent_memory, after:
--
--   * shared_preload_libraries = 'citus,agent_memory' on EVERY node
--     (Citus refuses to load after another library that set a hook);
--   * the same agent_memory build installed on every node;
--   * CREATE EXTENSION citus; SELECT citus_add_node(...) for each worker;
--   * CREATE EXTENSION agent_memory;  (Citus creates it on the workers too)
--
--   psql -v ON_ERROR_STOP=1 -f sql/citus.sql
--   psql -v ON_ERROR_STOP=1 -v force_delegation=true -f sql/citus.sql   (see below)
--
-- WHAT IS VERIFIED AND WHAT IS PLANNED
--
-- make test-citus runs this file on a real Citus 13.2 cluster
-- (scripts/citus.sh) and every regress suite through its coordinator;
-- docs/scaling.md ("On a real cluster") lists what differs from a single
-- server, in both modes below.
-- scripts/citus_check.sh also runs this file on
-- plain PostgreSQL, with stub functions that have the argument names,
-- types and defaults of Citus's own and that reproduce some of its checks.
-- That run verifies:
--   * the file parses and runs to the end with ON_ERROR_STOP;
--   * every table and every function signature named here exists in the
--     installed extension;
--   * every table of schema agent_memory is distributed here or is listed
--     below as staying local;
--   * every function of schema agent_memory is delegated here or is listed
--     below as not delegated, with the reason;
--   * each colocation group has one distribution column. Every primary
--     key, unique index and foreign key includes it, and every foreign key
--     stays inside its group;
--   * each delegated function's distribution argument has the name and
--     type of its group's distribution column;
--   * no sequence is left in the schema outside the identity column of
--     the local cleanup_runs table;
--   * the per-shard cleanup below deletes the right rows, with each table
--     standing in for one shard. Citus would run the same SQL on each shard.
--
-- Markers read by scripts/citus_check.sh (keep them up to date):
--   "-- citus_check: local <table>"            a table left undistributed
--   "-- citus_check: not_delegated <function>" a function left on the node it is called on

-- force_delegation: false (the default) delegates a call only when it is
-- made outside a transaction block. true also delegates calls made inside
-- one. It is given only to the functions whose every statement touches
-- their own key. See docs/scaling.md, "Delegated functions".
\if :{?force_delegation}
\else
\set force_delegation false
\endif

DO $check$
BEGIN
    IF NOT (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'run sql/citus.sql as a superuser (Citus requires the owner of the functions it distributes)';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'agent_memory') THEN
        RAISE EXCEPTION 'CREATE EXTENSION agent_memory first';
    END IF;
END
$check$;

-- Delegation needs shards with one placement (Citus: "streaming
-- replication model"). sessions carries three triggers (the shared-memory
-- counter of session deletions), and Citus distributes a table with
-- triggers only while this setting is on. Set it on every node too (see
-- docs/scaling.md).
SET citus.shard_replication_factor = 1;
SET citus.enable_unsafe_triggers = on;

-- ---------------------------------------------------------------------
-- Tables: three colocation groups, one per tenant-like key. Every foreign
-- key is inside one group and includes its key. Each group starts a new
-- colocation group: the keys are unrelated values, and the graph and
-- memory-tool keys are COLLATE "C" while session_id is not.
-- A table already distributed is left alone, so the file can be run again
-- after a failure. The check at the end says whether the result is right.
-- ---------------------------------------------------------------------

-- Group 1: session_id. Everything a session owns references
-- sessions(session_id, tenant) ON DELETE CASCADE, so ending a session cascades
-- inside one shard group, on one node. The referenced tables come first.
SELECT create_distributed_table('agent_memory.sessions', 'session_id', colocate_with => 'none')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.sessions'::regclass);
SELECT create_distributed_table('agent_memory.kv_entries', 'session_id', colocate_with => 'agent_memory.sessions')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.kv_entries'::regclass);
SELECT create_distributed_table('agent_memory.kv_entry_versions', 'session_id', colocate_with => 'agent_memory.sessions')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.kv_entry_versions'::regclass);
SELECT create_distributed_table('agent_memory.message_threads', 'session_id', colocate_with => 'agent_memory.sessions')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.message_threads'::regclass);
SELECT create_distributed_table('agent_memory.thread_messages', 'session_id', colocate_with => 'agent_memory.sessions')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.thread_messages'::regclass);
SELECT create_distributed_table('agent_memory.wm_parts', 'session_id', colocate_with => 'agent_memory.sessions')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.wm_parts'::regclass);

-- Group 2: owner (a user or project id) of graph memory.
SELECT create_distributed_table('agent_memory.graph_nodes', 'owner', colocate_with => 'none')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.graph_nodes'::regclass);
SELECT create_distributed_table('agent_memory.graph_node_versions', 'owner', colocate_with => 'agent_memory.graph_nodes')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.graph_node_versions'::regclass);

-- Group 3: scope of the memory tool's files.
SELECT create_distributed_table('agent_memory.memory_files', 'scope', colocate_with => 'none')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.memory_files'::regclass);
SELECT create_distributed_table('agent_memory.memory_scopes', 'scope', colocate_with => 'agent_memory.memory_files')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.memory_scopes'::regclass);
SELECT create_distributed_table('agent_memory.memory_directories', 'scope', colocate_with => 'agent_memory.memory_files')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.memory_directories'::regclass);
SELECT create_distributed_table('agent_memory.memory_file_versions', 'scope', colocate_with => 'agent_memory.memory_files')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.memory_file_versions'::regclass);

-- cleanup_runs stays a plain local table on each node. It holds history
-- of the node it is on, has an identity column, and nothing joins it to
-- memory. A reference table would turn every recorded run into a write
-- on every node.
-- citus_check: local agent_memory.cleanup_runs

-- notify_secret stays local too: a notification is sent by the node that
-- runs the write and heard by the listeners of that node, so each node
-- names its tenants' channels from its own secret, and notify_channel()
-- (not delegated) answers for the node it is called on.
-- citus_check: local agent_memory.notify_secret

-- recall_settings is a reference table: a copy on every node, which
-- Citus joins with any shard. recall and the memory tool's search read it
-- beside the shards they search; recall_rebuild() and
-- recall_enable_embeddings(), run on the coordinator, write every copy with
-- the search columns' DDL (which Citus propagates to the shards).
SELECT create_reference_table('agent_memory.recall_settings')
WHERE NOT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.recall_settings'::regclass);

-- Citus's row-level security test re-runs ALTER TABLE ... OWNER TO after
-- distributing, noting that ownership is otherwise lost on the shards.
-- The policies and FORCE ROW LEVEL SECURITY of sql/tenants.sql go with the
-- tables.
ALTER TABLE agent_memory.sessions OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.kv_entries OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.kv_entry_versions OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.message_threads OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.thread_messages OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.wm_parts OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_nodes OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_node_versions OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_files OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_scopes OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_directories OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_file_versions OWNER TO agent_memory_owner;

-- ---------------------------------------------------------------------
-- Functions. A call written as SELECT agent_memory.f(...), whose
-- distribution argument is a constant or a bind parameter, runs on the
-- node that holds that key's shards. Its statements then run against
-- local shards. Citus refuses an extension's function without a
-- distribution argument, so the functions below that have none are not
-- passed to create_distributed_function at all. CREATE EXTENSION already
-- created them on every node.
-- ---------------------------------------------------------------------

-- Group 1, by session_id. Every statement of these touches only the
-- session's own rows.
SELECT create_distributed_function('agent_memory.renew_activity(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.is_active(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.end_session(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_set(text,text,jsonb,interval,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_get(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_get_all(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_has(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_entry(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_delete(text,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_clear(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_versions(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_version(text,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_restore(text,text,integer,integer,interval)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.kv_purge_history(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.build_context(text,text[],boolean)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.update_context(text,jsonb)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.clear_context_keys(text,text[])', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.clear_context(text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.append_message(text,text,text,text,jsonb,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.append_messages(text,jsonb,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.messages(text,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.messages_json(text,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.pop_message(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.last_user_message(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.clear_messages(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_set(text,text,jsonb,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_set_many(text,jsonb,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_patch(text,text,jsonb,text,integer)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_get(text,text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_part(text,text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.working_memory(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.working_memory_entry(text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.wm_context(text,text,text)', 'session_id', colocate_with => 'agent_memory.sessions', force_delegation => :force_delegation);

-- Group 1, never forced: each may run a statement outside the session's
-- own key, which forced delegation refuses.
--   wm_init, set_active_node: read graph_nodes of the session's project,
--     which is another key in another group, usually on another node.
--   wm_clear: with session_id NULL it clears every session.
SELECT create_distributed_function('agent_memory.wm_init(text,text,text)', 'session_id', colocate_with => 'agent_memory.sessions');
SELECT create_distributed_function('agent_memory.set_active_node(text,text)', 'session_id', colocate_with => 'agent_memory.sessions');
SELECT create_distributed_function('agent_memory.wm_clear(text,text)', 'session_id', colocate_with => 'agent_memory.sessions');

-- Group 2, by owner.
SELECT create_distributed_function('agent_memory.graph_create(text,text,text,text,text[],text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_read(text,text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_write(text,text,text,text,text,text[],text,integer)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_append(text,text,text,integer)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_delete(text,text,integer)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_nodes(text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_versions(text,text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_version(text,text,integer)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_tree(text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_tree_rows(text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_to_markdown(text,text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_from_markdown(text,text,text,text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_export(text)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.graph_import(text,jsonb)', 'owner', colocate_with => 'agent_memory.graph_nodes', force_delegation => :force_delegation);

-- Group 3, by scope.
SELECT create_distributed_function('agent_memory.memory_render(text,text,integer)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.memory_versions(text,text)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.memory_version(text,text,integer)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.memory_restore(text,text,integer,integer)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.memory_purge_history(text,text)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.memory_tool(text,jsonb)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.claude_memory(text,jsonb,integer,text)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);
SELECT create_distributed_function('agent_memory.claude_memory_tool_result(text,jsonb,integer,text)', 'scope', colocate_with => 'agent_memory.memory_files', force_delegation => :force_delegation);

-- Not delegated, and why:
-- Its session_id may be NULL (it then makes one up), and Citus 13.2 crashes
-- the backend that delegates a call whose distribution argument is a NULL
-- constant (function_call_delegation.c hashes it unchecked). Its one
-- INSERT is routed to the session's shard from the node it is called on:
-- citus_check: not_delegated agent_memory.create_session(text,jsonb,text,interval)
-- They read no table, so they run wherever they are called:
-- citus_check: not_delegated agent_memory.version()
-- citus_check: not_delegated agent_memory.caller_tenant()
-- citus_check: not_delegated agent_memory.visible_tenant()
-- citus_check: not_delegated agent_memory.value_bytes(jsonb)
-- It reads the secret of the node it is called on (see notify_secret):
-- citus_check: not_delegated agent_memory.notify_channel()
-- citus_check: not_delegated agent_memory.sensitive_findings(text)
-- citus_check: not_delegated agent_memory.memory_scope(text,text,text)
-- citus_check: not_delegated agent_memory.memory_tool_definition(text,text,text,text)
-- citus_check: not_delegated agent_memory.recall_tool_definition(text,text,text,text)
-- The trigger function fires on each shard of sessions, on the shard's node:
-- citus_check: not_delegated agent_memory.note_session_deletions()
-- These cover many keys and run on the node they are called on, querying every shard:
-- citus_check: not_delegated agent_memory.session_stats()
-- citus_check: not_delegated agent_memory.user_sessions(text)
-- It erases every session of a user (split by session_id) and the owners
-- and scopes it names, each group read by its own key:
-- citus_check: not_delegated agent_memory.erase_user(text,text[],text[])
-- An export spans the keys of three groups too, and reads each by its key:
-- citus_check: not_delegated agent_memory.export(text,text,text,text)
-- An import line names its own key, which the call's arguments may rename;
-- import_lines takes lines of many keys:
-- citus_check: not_delegated agent_memory.import(text,text,text,text,text)
-- citus_check: not_delegated agent_memory.import_lines(text[],text,text,text,text)
-- citus_check: not_delegated agent_memory.wm_refresh_structure(text)
-- Its scope spans keys of three groups (a user's sessions, an owner, a
-- scope); it reads each group by its key, and each snippet from the
-- shard of its item's key:
-- citus_check: not_delegated agent_memory.recall(text,text,text,text,text,text[],integer,real[],jsonb)
-- citus_check: not_delegated agent_memory.recall_tool(jsonb,text,text,text,text)
-- citus_check: not_delegated agent_memory.recall_outbox(text,text,text,text,text[],integer)
-- Its key is a session, an owner or a scope, as its kind says:
-- citus_check: not_delegated agent_memory.recall_embed(text,text,text,real[],text)
-- It writes recall_settings, local to each node (see above):
-- citus_check: not_delegated agent_memory.recall_enable_embeddings(integer)
-- DDL on a table of every group; Citus propagates it to the shards:
-- citus_check: not_delegated agent_memory.recall_rebuild()
-- Does not work on distributed tables. Use the per-shard cleanup below:
-- citus_check: not_delegated agent_memory.cleanup_expired(integer)

-- Plans for the values. On a single server these functions run their
-- statements with generic plans (planned once per connection); Citus can
-- route a generic plan of a statement over one table only, and refuses the
-- others ("could not create distributed plan").
ALTER FUNCTION agent_memory.claude_memory(text, jsonb, integer, text) RESET plan_cache_mode;
ALTER FUNCTION agent_memory.claude_memory_tool_result(text, jsonb, integer, text) RESET plan_cache_mode;
ALTER FUNCTION agent_memory.recall(text,text,text,text,text,text[],integer,real[],jsonb) RESET plan_cache_mode;

-- ---------------------------------------------------------------------
-- Check what Citus recorded (pg_dist_partition: table, key, colocation
-- group). A table distributed earlier by another column, or into another
-- group, stops the script here.
-- ---------------------------------------------------------------------
DO $verify$
DECLARE
    expected CONSTANT text[][] := ARRAY[
        ['agent_memory.sessions',            'session_id', 'agent_memory.sessions'],
        ['agent_memory.kv_entries',          'session_id', 'agent_memory.sessions'],
        ['agent_memory.kv_entry_versions',   'session_id', 'agent_memory.sessions'],
        ['agent_memory.message_threads',     'session_id', 'agent_memory.sessions'],
        ['agent_memory.thread_messages',     'session_id', 'agent_memory.sessions'],
        ['agent_memory.wm_parts',            'session_id', 'agent_memory.sessions'],
        ['agent_memory.graph_nodes',         'owner',      'agent_memory.graph_nodes'],
        ['agent_memory.graph_node_versions', 'owner',      'agent_memory.graph_nodes'],
        ['agent_memory.memory_files',        'scope',      'agent_memory.memory_files'],
        ['agent_memory.memory_scopes',       'scope',      'agent_memory.memory_files'],
        ['agent_memory.memory_directories',  'scope',      'agent_memory.memory_files'],
        ['agent_memory.memory_file_versions', 'scope',     'agent_memory.memory_files']];
    i integer;
    got_column text;
    got_group integer;
    anchor_group integer;
BEGIN
    FOR i IN 1 .. pg_catalog.array_length(expected, 1) LOOP
        SELECT column_to_column_name(p.logicalrelid, p.partkey), p.colocationid
          INTO got_column, got_group
          FROM pg_dist_partition p WHERE p.logicalrelid = expected[i][1]::regclass;
        SELECT p.colocationid INTO anchor_group
          FROM pg_dist_partition p WHERE p.logicalrelid = expected[i][3]::regclass;
        IF got_column IS DISTINCT FROM expected[i][2] OR got_group IS DISTINCT FROM anchor_group THEN
            RAISE EXCEPTION '% is distributed by % in colocation group %, expected % in the group of %',
                expected[i][1], coalesce(got_column, '(nothing)'), coalesce(got_group::text, '(none)'),
                expected[i][2], expected[i][3];
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = 'agent_memory.cleanup_runs'::regclass) THEN
        RAISE EXCEPTION 'agent_memory.cleanup_runs must stay a local table';
    END IF;
    RAISE NOTICE 'agent_memory: % tables distributed in 3 colocation groups', pg_catalog.array_length(expected, 1);
END
$verify$;

-- ---------------------------------------------------------------------
-- Cleanup. Neither cleanup_expired() nor the background worker can run
-- against distributed tables. Their batches select rows by ctid, which
-- only means something inside one shard, and lock them with FOR UPDATE,
-- which Citus refuses in a query over many shards. Keep the worker idle on
-- every node (docs/scaling.md) and run this instead, e.g. from pg_cron on
-- the coordinator:
--
--   SELECT cron.schedule('agent-memory-cleanup', '*/5 * * * *',
--                        'SELECT agent_memory_citus.cleanup_expired_shards()');
--
-- The function sends the extension's own batch statements to each shard
-- with run_command_on_shards(). Each shard's batch is one short
-- transaction on the shard's node. Deleting a session cascades to the
-- colocated shards of what it owns, on the same node, and fires the
-- deletion trigger there. Rounds repeat until no shard returns a full
-- batch. The run is recorded in the coordinator's cleanup_runs, as
-- 'manual'. The idle timeout and batch size are read from the coordinator's
-- settings, so the shards use the same values.
-- ---------------------------------------------------------------------
CREATE SCHEMA IF NOT EXISTS agent_memory_citus;
REVOKE ALL ON SCHEMA agent_memory_citus FROM PUBLIC;

CREATE OR REPLACE FUNCTION agent_memory_citus.cleanup_expired_shards(
    batch_size integer DEFAULT NULL,
    max_rounds integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    size CONSTANT integer := coalesce(batch_size, current_setting('agent_memory.cleanup_batch_size')::integer);
    idle CONSTANT text := current_setting('agent_memory.session_idle_timeout');
    started CONSTANT timestamptz := clock_timestamp();
    -- %1$s is left for run_command_on_shards, which puts each shard's name there.
    sessions_sql CONSTANT text := format(
        $cmd$WITH gone AS (
               DELETE FROM %%1$s WHERE ctid = ANY (ARRAY (
                 SELECT s.ctid FROM %%1$s s
                 WHERE s.last_activity_at <= pg_catalog.now() - coalesce(s.idle_timeout, %L::interval)
                 LIMIT %s FOR UPDATE SKIP LOCKED))
               RETURNING 1)
             SELECT pg_catalog.count(*) FROM gone$cmd$, idle, size);
    entries_sql CONSTANT text := format(
        $cmd$WITH gone AS (
               DELETE FROM %%1$s WHERE ctid = ANY (ARRAY (
                 SELECT k.ctid FROM %%1$s k
                 WHERE k.expires_at <= pg_catalog.now()
                 ORDER BY k.expires_at
                 LIMIT %s FOR UPDATE SKIP LOCKED))
               RETURNING 1)
             SELECT pg_catalog.count(*) FROM gone$cmd$, size);
    -- Expired kept versions of entries count as entries, as the worker counts them.
    kinds CONSTANT text[][] := ARRAY[['agent_memory.sessions', 'sessions'], ['agent_memory.kv_entries', 'entries'],
                                     ['agent_memory.kv_entry_versions', 'entry versions']];
    deleted bigint[] := ARRAY[0, 0, 0];
    batches integer := 0;
    failure text;
    round_deleted bigint;
    round_fullest bigint;
    round_shards integer;
    round_failure text;
    run bigint;
BEGIN
    IF size < 1 THEN
        RAISE EXCEPTION 'batch_size must be at least 1, not %', size;
    END IF;
    <<kinds_loop>>
    FOR k IN 1 .. 3 LOOP
        FOR r IN 1 .. max_rounds LOOP
            SELECT coalesce(sum(CASE WHEN c.success THEN c.result::bigint END), 0),
                   coalesce(max(CASE WHEN c.success THEN c.result::bigint END), 0),
                   count(*),
                   min(CASE WHEN NOT c.success THEN c.result END)
              INTO round_deleted, round_fullest, round_shards, round_failure
              FROM run_command_on_shards(kinds[k][1]::regclass,
                                         CASE k WHEN 1 THEN sessions_sql ELSE entries_sql END) AS c;
            batches := batches + round_shards;
            deleted[k] := deleted[k] + round_deleted;
            IF round_failure IS NOT NULL THEN
                failure := kinds[k][2] || ': ' || round_failure;
                EXIT kinds_loop;
            END IF;
            EXIT WHEN round_fullest < size;
        END LOOP;
    END LOOP;
    -- Like the worker: runs that removed nothing and failed nowhere are not recorded.
    IF failure IS NOT NULL OR deleted[1] > 0 OR deleted[2] > 0 OR deleted[3] > 0 THEN
        INSERT INTO agent_memory.cleanup_runs
            (started_at, finished_at, triggered_by, sessions_deleted, entries_deleted, batches, error)
        VALUES (started, clock_timestamp(), 'manual', deleted[1], deleted[2] + deleted[3], batches, failure)
        RETURNING run_id INTO run;
    END IF;
    IF failure IS NOT NULL THEN
        RAISE WARNING 'agent_memory per-shard cleanup stopped: %', failure;
    END IF;
    RETURN jsonb_build_object('sessions', deleted[1], 'entries', deleted[2] + deleted[3],
                              'batches', batches, 'run_id', run, 'error', failure);
END
$fn$;

COMMENT ON FUNCTION agent_memory_citus.cleanup_expired_shards(integer, integer) IS
    'Citus: remove expired sessions, key-value entries and their kept versions shard by shard (run_command_on_shards), batch_size rows per shard and transaction; records the run in the local agent_memory.cleanup_runs';
REVOKE ALL ON FUNCTION agent_memory_citus.cleanup_expired_shards(integer, integer) FROM PUBLIC;

-- ---------------------------------------------------------------------
-- Shard moves. Citus copies a shard as the owner of its table, over
-- connections of its own: agent_memory_owner must log in to the nodes
-- and create the shard's table in schema agent_memory. The role cannot
-- log in otherwise (sql/tenants.sql); this procedure lets it for the move
-- alone, and takes the right back whether the move succeeds or fails:
--
--   CALL agent_memory_citus.move_shard_placement(shard_id,
--          'source-host', 5432, 'target-host', 5432, 'block_writes');
--
-- Call it outside a transaction block: the role change is committed
-- before the move, so that Citus's connections see it. They authenticate
-- as agent_memory_owner like any connection between the nodes (pg_hba.conf
-- and a password or certificate, or pg_dist_authinfo).
-- ---------------------------------------------------------------------
GRANT CREATE ON SCHEMA agent_memory TO agent_memory_owner;

CREATE OR REPLACE PROCEDURE agent_memory_citus.move_shard_placement(
    shard_id bigint,
    source_node_name text,
    source_node_port integer,
    target_node_name text,
    target_node_port integer,
    shard_transfer_mode text DEFAULT 'auto')
LANGUAGE plpgsql
-- No SET search_path: a procedure with SET clauses cannot commit. Every
-- name below is qualified instead.
AS $proc$
DECLARE
    could_log_in CONSTANT boolean := (SELECT r.rolcanlogin FROM pg_catalog.pg_roles r
                                      WHERE r.rolname = 'agent_memory_owner');
    failure text;
    failure_state text;
BEGIN
    IF NOT could_log_in THEN
        ALTER ROLE agent_memory_owner LOGIN;
        COMMIT;
    END IF;
    BEGIN
        PERFORM pg_catalog.citus_move_shard_placement(shard_id, source_node_name, source_node_port,
                                                      target_node_name, target_node_port,
                                                      shard_transfer_mode => shard_transfer_mode::citus.shard_transfer_mode);
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS failure = MESSAGE_TEXT, failure_state = RETURNED_SQLSTATE;
    END;
    IF NOT could_log_in THEN
        ALTER ROLE agent_memory_owner NOLOGIN;
        COMMIT;
    END IF;
    IF failure IS NOT NULL THEN
        RAISE EXCEPTION USING MESSAGE = failure, ERRCODE = failure_state;
    END IF;
END
$proc$;

COMMENT ON PROCEDURE agent_memory_citus.move_shard_placement(bigint, text, integer, text, integer, text) IS
    'Citus: citus_move_shard_placement, with agent_memory_owner, which Citus copies the shard as, allowed to log in for the move alone';
REVOKE ALL ON PROCEDURE agent_memory_citus.move_shard_placement(bigint, text, integer, text, integer, text) FROM PUBLIC;
