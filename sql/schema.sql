-- agent_memory: tables and indexes.
--
-- Every table lives in schema agent_memory, and every row belongs to one
-- tenant-like key (session_id, owner or scope) so a table can later be
-- distributed by that key. Tables are registered with
-- pg_extension_config_dump so that pg_dump keeps their rows.

-- Sessions: the root every session-scoped row belongs to.
CREATE TABLE agent_memory.sessions (
    session_id       text        NOT NULL PRIMARY KEY,
    user_id          text        NOT NULL,
    project_id       text,
    active_node_id   text,
    metadata         jsonb       NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_activity_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    ended_at         timestamptz,
    -- NULL: agent_memory.session_idle_timeout applies.
    idle_timeout     interval,
    CONSTRAINT sessions_id_not_empty CHECK (session_id <> ''),
    CONSTRAINT sessions_metadata_is_object CHECK (jsonb_typeof(metadata) = 'object'),
    CONSTRAINT sessions_idle_timeout_positive CHECK (idle_timeout > interval '0')
);
CREATE INDEX sessions_user_idx ON agent_memory.sessions (user_id);

COMMENT ON TABLE agent_memory.sessions IS
    'Agent sessions: owner, activity timestamps and idle timeout; everything session-scoped belongs to one row here';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.sessions', '');
