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
