-- agent_memory: tenants.
--
-- Every memory table has a tenant column, in every key right after the
-- session, owner or scope (sql/schema.sql), filled on insert with caller_tenant(): while
-- agent_memory.tenant_isolation is on, the caller's role (or role/tenant
-- after SET agent_memory.tenant); while it is off, '' (one memory shared by
-- every role). The functions address rows of the caller's tenant only, and
-- a policy on every table shows a role, while isolation is on, only the
-- rows of its own tenant, through the functions and the tables alike.
-- Since keys and foreign keys include the tenant, no statement a tenant
-- runs can meet another tenant's row: not in a conflict (ON CONFLICT, a
-- unique violation), not as a parent (a foreign key), not in a lock.
-- While isolation is off, visible_tenant() is NULL and the policy lets
-- every row through.
--
-- Owners and superusers bypass row-level security: the tables belong to
-- agent_memory_owner, a role that cannot log in, and FORCE makes the
-- policies apply even to it. Superusers (and the cleanup worker, which
-- runs as one) still see every tenant's rows in the tables.
--
-- The default is set here rather than in schema.sql because it calls a
-- function of the library, created after the tables.

DO $owner$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'agent_memory_owner') THEN
        CREATE ROLE agent_memory_owner NOLOGIN;
    END IF;
END
$owner$;
-- Foreign-key checks and cascades run as the owner of the tables.
GRANT USAGE ON SCHEMA agent_memory TO agent_memory_owner;

ALTER TABLE agent_memory.sessions ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.kv_entries ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.kv_entry_versions ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.message_threads ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.thread_messages ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.wm_parts ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.graph_nodes ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.graph_node_versions ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_files ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_file_versions ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_scopes ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();
ALTER TABLE agent_memory.memory_directories ALTER COLUMN tenant SET DEFAULT agent_memory.caller_tenant();

-- One policy per table. visible_tenant() is called as a plain function, not
-- through a sub-select: Citus refuses sub-selects in the policies of
-- distributed tables. It reads two settings and is STABLE, so it answers
-- the same for every row of a statement.
CREATE POLICY tenant_rows ON agent_memory.sessions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.kv_entries
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.kv_entry_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.message_threads
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.thread_messages
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.wm_parts
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.graph_nodes
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.graph_node_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_files
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_file_versions
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_scopes
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));
CREATE POLICY tenant_rows ON agent_memory.memory_directories
    USING (tenant = coalesce(agent_memory.visible_tenant(), tenant))
    WITH CHECK (tenant = coalesce(agent_memory.visible_tenant(), tenant));

ALTER TABLE agent_memory.sessions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.kv_entries ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.kv_entry_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.message_threads ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.thread_messages ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.wm_parts ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_nodes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.graph_node_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_files ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_file_versions ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_scopes ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.memory_directories ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY, OWNER TO agent_memory_owner;
-- Read by the extension as its owner only (see notify_channel()).
ALTER TABLE agent_memory.notify_secret OWNER TO agent_memory_owner;
-- Written by the extension as its owner only: roles may read the worker's
-- runs and their own tenant's (the owner is not subject to the policy).
ALTER TABLE agent_memory.cleanup_runs OWNER TO agent_memory_owner;
ALTER TABLE agent_memory.cleanup_runs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_runs ON agent_memory.cleanup_runs FOR SELECT
    USING (tenant IS NULL OR tenant = agent_memory.visible_tenant());
-- Changed by recall_rebuild() with the search columns, owned like them.
ALTER TABLE agent_memory.recall_settings OWNER TO agent_memory_owner;

-- A view runs with its owner's rights unless told otherwise, which would
-- show every tenant's threads.
ALTER VIEW agent_memory.message_thread_stats SET (security_invoker = true);
