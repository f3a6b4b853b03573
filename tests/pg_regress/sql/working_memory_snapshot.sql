-- Composed working memory: the snapshot and its JSON
-- contract, messages from the history, toggles, fallback to the global
-- entry, the flat entry and the context bundle, hydration from the
-- graph (wm_init, set_active_node, wm_refresh_structure) and wm_clear.
-- Timestamps vary from run to run: they are checked by shape, not printed.
SET search_path = agent_memory, public;
-- Message sequence numbers are printed below: they count within the
-- session, whatever the suites before this one appended.
SELECT create_session('ana', session_id => 'snap');

-- A session with nothing stored composes to the documented empty snapshot,
-- but for the session's id and the time of its last activity.
SELECT working_memory('snap') #- '{session,timestamp}' = '{
  "session": { "session_id": "snap", "project_id": "", "active_node_id": "" },
  "project_structure": {
    "project_graph": { "nodes": [], "edges": [] },
    "elements_graph": { "nodes": [], "edges": [] }
  },
  "node_context": {},
  "fetched_context": {},
  "working_history": "",
  "messages": [],
  "last_user_message": "",
  "config": {
    "history_length": 20,
    "include_project_structure": true,
    "include_context": true,
    "include_working_history": true,
    "auto_refresh_interval": 0
  }
}'::jsonb AS is_the_contract;
SELECT working_memory('snap') #>> '{session,timestamp}' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' AS iso_timestamp;

-- Every part set: each shows in its place, under the contract's keys.
SELECT wm_set_many('snap', '{
  "session": {"project_id": "atlas", "active_node_id": "n1"},
  "project_structure": {"project_graph": {"nodes": [{"id": "n1", "builder": {"big": true}}], "edges": []},
                        "elements_graph": {"nodes": [{"id": "e1"}], "edges": [{"source": "e1", "target": "e1"}]}},
  "node_context": {"id": "n1", "title": "Plan"},
  "fetched_context": {"doc": "notes"},
  "working_history": "we planned the trip",
  "last_user_message": "stored question",
  "config": {"history_length": 3}
}');
SELECT append_message('snap', 'user', 'first question');
SELECT append_message('snap', 'assistant', 'first answer');
SELECT append_message('snap', 'user', 'second question');
SELECT append_message('snap', 'assistant', 'second answer');
SELECT append_message('snap', 'user', 'about n1', node_id => 'n1');
SELECT working_memory('snap') - 'messages' #- '{session,timestamp}' AS snapshot;
SELECT k AS contract_keys FROM jsonb_object_keys(working_memory('snap')) k ORDER BY k;
-- messages: the newest history_length (3) of the whole session, oldest
-- first, in messages_json's shape; last_user_message from the history.
SELECT jsonb_path_query_array(working_memory('snap'), '$.messages[*].content') AS messages,
       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(working_memory('snap') -> 'messages' -> 0) k) AS message_keys,
       working_memory('snap') -> 'messages' = messages_json('snap', lim => 3) AS same_as_messages_json;

-- A node entry: its own parts, else the global ones; its messages are its
-- own thread's.
SELECT wm_set('snap', 'node_context', '{"id": "n1", "title": "Plan for n1"}', 'n1');
SELECT working_memory('snap', 'n1') -> 'node_context' AS own,
       working_memory('snap', 'n1') -> 'fetched_context' AS global,
       jsonb_path_query_array(working_memory('snap', 'n1'), '$.messages[*].content') AS messages,
       working_memory('snap', 'n1') -> 'last_user_message' AS last_user_message;
SELECT working_memory('snap', 'n1') = working_memory('snap', 'n1') AS stable,
       working_memory('snap', '__global__') = working_memory('snap') AS global_by_name;

-- Without any history, the stored messages and last user message show.
SELECT create_session('ana', session_id => 'pushed');
SELECT wm_set_many('pushed', '{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                            {"role": "user", "content": "c"}],
                               "last_user_message": "c", "config": {"history_length": 2}}');
SELECT working_memory('pushed') -> 'messages' AS newest_two, working_memory('pushed') -> 'last_user_message' AS last_user_message;

-- The configuration is clamped where it is stored, so every read agrees.
SELECT wm_patch('snap', 'config', '{"history_length": 999}') -> 'history_length' AS clamped;
SELECT jsonb_array_length(working_memory('snap') -> 'messages') AS all_five;

-- Toggles hide their sections at once, in every composed read.
SELECT wm_patch('snap', 'config', '{"include_project_structure": false, "include_context": false, "include_working_history": false}') IS NOT NULL;
SELECT working_memory('snap') -> 'project_structure' AS structure, working_memory('snap') -> 'node_context' AS node_context,
       working_memory('snap') -> 'fetched_context' AS fetched, working_memory('snap') -> 'working_history' AS history;
SELECT working_memory_entry('snap') -> 'structure_index' AS structure_index, working_memory_entry('snap') -> 'current_node' AS current_node,
       working_memory_entry('snap') -> 'context_data' AS context_data, working_memory_entry('snap') -> 'work_history_summary' AS summary;
SELECT wm_context('snap') -> 'working_history' AS bundle_history;
SELECT wm_get('snap', 'node_context') AS still_stored;
SELECT wm_patch('snap', 'config', '{"include_project_structure": null, "include_context": null, "include_working_history": null}');
SELECT working_memory('snap') -> 'node_context' AS shown_again;

-- The flat entry: its keys, the newest 50 messages, the working history
-- with the time it was written, and when the entry's own parts were
-- first and last written.
SELECT k AS entry_keys FROM jsonb_object_keys(working_memory_entry('snap')) k ORDER BY k;
SELECT e -> 'project_id' AS project_id, e -> 'current_node' AS current_node, e -> 'context_data' AS context_data,
       e -> 'last_user_input' AS last_user_input, e #> '{work_history_summary,content}' AS summary,
       jsonb_array_length(e -> 'recent_messages') AS recent
FROM working_memory_entry('snap') e;
SELECT e #>> '{work_history_summary,timestamp}' ~ '^\d{4}-.*Z$' AS summary_time,
       (e ->> 'created_at') <= (e ->> 'updated_at') AS created_first
FROM working_memory_entry('snap') e;
SELECT working_memory_entry('snap', 'n7') -> 'created_at' AS never_written;

-- The context bundle: messages with what describes them.
SELECT b - 'messages' AS bundle, jsonb_path_query_array(b, '$.messages[*].content') AS messages
FROM wm_context('snap', 'n1', 'atlas') b;
SELECT wm_context('snap', NULL, 'other');
\echo :LAST_ERROR_SQLSTATE
-- A session of no project belongs to none named.
SELECT create_session('ana', session_id => 'no-project') IS NOT NULL AS made;
SELECT wm_context('no-project', NULL, 'atlas');
\echo :LAST_ERROR_SQLSTATE
SELECT end_session('no-project');

-- Writes renew the session's activity (a backend renews a session at most
-- once a second, so a new connection shows it at once).
UPDATE sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'snap';
\c
SET search_path = agent_memory, public;
SELECT wm_set('snap', 'working_history', '"renewed"');
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM sessions WHERE session_id = 'snap';

-- Hydration from the graph: the project id is the graph's owner.
SELECT graph_create('trip', 'Trip', 'the whole trip', E'---\nstatus: draft\npriority: 2\n---\nSee [[flights]] and [[hotels]].',
                    ARRAY['__root__'], node_id => 'trip');
SELECT graph_create('trip', 'Flights', 'how we fly', 'Window seats. [[nowhere]]', ARRAY['trip'], node_id => 'flights');
SELECT create_session('ana', session_id => 'hydrate');
SELECT wm_set('hydrate', 'working_history', '"summary of the day"', 'older');
SELECT append_message('hydrate', 'user', 'book flights', node_id => 'trip');
SELECT w #- '{session,timestamp}' #- '{messages,0,created_at}'
          #- '{node_context,createdAt}' #- '{node_context,updatedAt}'
          #- '{project_structure,project_graph,nodes,0,updatedAt}' #- '{project_structure,project_graph,nodes,1,updatedAt}' AS initialised
FROM wm_init('hydrate', 'trip', 'trip') w;
SELECT project_id, active_node_id FROM sessions WHERE session_id = 'hydrate';
-- Initialising again changes nothing.
SELECT part, version FROM wm_parts WHERE session_id = 'hydrate' AND node_key = 'trip' ORDER BY part;
SELECT wm_init('hydrate', 'trip', 'trip') IS NOT NULL;
SELECT part, version FROM wm_parts WHERE session_id = 'hydrate' AND node_key = 'trip' ORDER BY part;

-- Focusing a node initialises its entry from the session's project;
-- unfocusing clears the node entries and keeps the global one.
SELECT (s -> 'session') - 'timestamp' AS session, s #>> '{node_context,title}' AS node
FROM set_active_node('hydrate', 'flights') s;
SELECT active_node_id FROM sessions WHERE session_id = 'hydrate';
SELECT node_key, count(*) FROM wm_parts WHERE session_id = 'hydrate' GROUP BY node_key ORDER BY node_key;
SELECT (s -> 'session') - 'timestamp' AS session, s -> 'node_context' AS node
FROM set_active_node('hydrate', NULL) s;
SELECT node_key, count(*) FROM wm_parts WHERE session_id = 'hydrate' GROUP BY node_key ORDER BY node_key;
SELECT active_node_id FROM sessions WHERE session_id = 'hydrate';

-- A changed graph: every entry tied to the project gets the new index; a
-- second refresh finds nothing to change.
SELECT set_active_node('hydrate', 'trip') IS NOT NULL;
SELECT wm_init('hydrate', NULL, 'trip') IS NOT NULL;
-- The global entry keeps the session's active node.
SELECT p.value FROM wm_parts p WHERE p.session_id = 'hydrate' AND p.node_key = '' AND p.part = 'session';
SELECT graph_create('trip', 'Hotels', 'where we sleep', '', ARRAY['trip'], node_id => 'hotels');
SELECT wm_refresh_structure('trip') AS refreshed, wm_refresh_structure('trip') AS again, wm_refresh_structure('elsewhere') AS other_project;
SELECT jsonb_path_query_array(working_memory('hydrate', 'trip'), '$.project_structure.project_graph.nodes[*].id') AS nodes,
       working_memory('hydrate', 'trip') #> '{project_structure,project_graph,edges}' AS edges;

-- A node entry built from another project records it on the session, in
-- the global entry's session part too: the next focus builds from it.
SELECT graph_create('trip2', 'Second trip', '', '', ARRAY['__root__'], node_id => 'trip');
SELECT graph_create('trip2', 'Trains', '', '', ARRAY['trip'], node_id => 'trains');
SELECT wm_init('hydrate', 'trip', 'trip2') #>> '{node_context,title}' AS node;
SELECT s.project_id, p.value ->> 'project_id' AS global_project
FROM sessions s JOIN wm_parts p USING (session_id)
WHERE s.session_id = 'hydrate' AND p.node_key = '' AND p.part = 'session';
SELECT jsonb_path_query_array(working_memory('hydrate'), '$.project_structure.project_graph.nodes[*].id') AS global_nodes;
SELECT set_active_node('hydrate', 'trains') #>> '{node_context,title}' AS node;
SELECT set_active_node('hydrate', NULL) IS NOT NULL AS unfocused;
SELECT wm_init('hydrate', 'trip', 'trip') #>> '{node_context,title}' AS node;
SELECT p.value ->> 'project_id' AS global_project
FROM wm_parts p WHERE p.session_id = 'hydrate' AND p.node_key = '' AND p.part = 'session';
SELECT jsonb_path_query_array(working_memory('hydrate'), '$.project_structure.project_graph.nodes[*].id') AS global_nodes;

-- Bad input: a clear error, nothing changed.
SELECT wm_init('hydrate', 'missing', 'trip');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_init('nobody', 'trip', 'trip');
\echo :LAST_ERROR_SQLSTATE
SELECT set_active_node('snap', 'n1');
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory('nobody');
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory('snap', repeat('n', 300));
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory(NULL);
\echo :LAST_ERROR_SQLSTATE
UPDATE sessions SET last_activity_at = now() - interval '1 year' WHERE session_id = 'pushed';
SELECT working_memory('pushed');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_clear(NULL, 'trip');
\echo :LAST_ERROR_SQLSTATE

-- A composed value is bounded by agent_memory.max_result_bytes, counted
-- before it is built: the entry's parts and the messages it shows.
SELECT create_session('lena', session_id => 'big-wm');
SELECT append_message('big-wm', 'user', repeat('m ', 1500), 'trip') AS seq;
SELECT wm_set('big-wm', 'fetched_context', jsonb_build_object('doc', repeat('f ', 1500)), 'trip') IS NOT NULL AS stored;
SET agent_memory.max_result_bytes = 8192;
SELECT working_memory('big-wm') IS NOT NULL AS global_entry_fits;
SELECT wm_clear('big-wm', 'trip') AS cleared;
SELECT working_memory('big-wm', 'trip') IS NOT NULL AS fits_without_parts;
SELECT wm_set('big-wm', 'fetched_context', jsonb_build_object('doc', repeat('f ', 1500)), 'trip') IS NOT NULL AS stored;
SELECT working_memory('big-wm', 'trip');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_context('big-wm', 'trip');
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory_entry('big-wm', 'trip');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_result_bytes = 16384;
SELECT jsonb_array_length(working_memory('big-wm', 'trip') -> 'messages') AS messages;
-- The last user message counts though the window does not show it.
SELECT wm_clear('big-wm', 'trip') AS cleared;
SELECT append_message('big-wm', 'assistant', 'noted', 'trip') AS seq;
SELECT wm_set('big-wm', 'config', '{"history_length": 1}', 'trip') IS NOT NULL AS stored;
SET agent_memory.max_result_bytes = 3000;
SELECT working_memory('big-wm', 'trip');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_result_bytes;
SELECT end_session('big-wm');

-- For each part, what counts is the part the entry shows: a node's own
-- node_context hides the session's global one.
SELECT create_session('lena', session_id => 'shown-wm');
SELECT wm_set('shown-wm', 'node_context', jsonb_build_object('notes', repeat('g ', 1500))) IS NOT NULL AS stored_global;
SELECT wm_set('shown-wm', 'node_context', '{"id": "n1", "title": "Own"}', 'n1') IS NOT NULL AS stored_own;
SET agent_memory.max_result_bytes = '2kB';
SELECT w -> 'node_context' AS own_shown, pg_column_size(w) <= 2048 AS within
FROM working_memory('shown-wm', 'n1') w;
SELECT working_memory('shown-wm');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_result_bytes;
SELECT end_session('shown-wm');

-- Each message counts its role, seq, created_at, key names and headers
-- besides its content: twenty one-character messages take more than 1kB
-- in every composed read, as in messages_json.
SELECT create_session('lena', session_id => 'many-wm');
SELECT count(append_message('many-wm', 'user', 'x', 'n1')) AS appended FROM generate_series(1, 20);
SELECT pg_column_size(working_memory('many-wm', 'n1')) > 1024 AS snapshot_over_1kB,
       pg_column_size(messages_json('many-wm', 'n1')) > 1024 AS messages_over_1kB;
SET agent_memory.max_result_bytes = '1kB';
SELECT messages_json('many-wm', 'n1');
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory('many-wm', 'n1');
\echo :LAST_ERROR_SQLSTATE
SELECT wm_context('many-wm', 'n1');
\echo :LAST_ERROR_SQLSTATE
SELECT working_memory_entry('many-wm', 'n1');
\echo :LAST_ERROR_SQLSTATE
-- Fewer messages build, within the limit.
SET agent_memory.max_result_bytes = '2kB';
SELECT wm_set('many-wm', 'config', '{"history_length": 3}', 'n1') IS NOT NULL AS stored;
SELECT jsonb_array_length(w -> 'messages') AS messages, pg_column_size(w) <= 2048 AS within
FROM working_memory('many-wm', 'n1') w;
SELECT jsonb_array_length(w -> 'messages') AS messages, pg_column_size(w) <= 2048 AS within
FROM wm_context('many-wm', 'n1') w;
RESET agent_memory.max_result_bytes;
SELECT end_session('many-wm');

-- The structure index is counted before it is built: a graph whose nodes
-- take more than agent_memory.max_result_bytes is refused (54000) by every
-- function that builds the index, and nothing is written.
SELECT count(graph_create('wide', 'Node ' || i, repeat('d', 600), '', ARRAY['__root__'], node_id => 'w' || i)) AS created
FROM generate_series(1, 4) i;
SELECT create_session('lena', session_id => 'wide-wm');
SET agent_memory.max_result_bytes = '2kB';
SELECT wm_init('wide-wm', NULL, 'wide');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS parts_written FROM wm_parts WHERE session_id = 'wide-wm';
RESET agent_memory.max_result_bytes;
SELECT wm_init('wide-wm', NULL, 'wide') IS NOT NULL AS initialised;
SELECT part, version FROM wm_parts WHERE session_id = 'wide-wm' ORDER BY node_key, part;
SET agent_memory.max_result_bytes = '2kB';
SELECT set_active_node('wide-wm', 'w1');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('wide', 'Node 5', repeat('d', 600), '', ARRAY['__root__'], node_id => 'w5');
SELECT wm_refresh_structure('wide');
\echo :LAST_ERROR_SQLSTATE
SELECT part, version FROM wm_parts WHERE session_id = 'wide-wm' ORDER BY node_key, part;
SELECT active_node_id FROM sessions WHERE session_id = 'wide-wm';
RESET agent_memory.max_result_bytes;
SELECT wm_refresh_structure('wide') AS refreshed;
SELECT end_session('wide-wm');

-- Clearing: one entry, the global entry by name, a session, everything.
SELECT wm_clear('hydrate', 'trip') AS one_entry;
SELECT wm_clear('hydrate', '__global__') AS global_entry;
SELECT count(*) AS left_in_hydrate FROM wm_parts WHERE session_id = 'hydrate';
SELECT wm_clear('snap') AS whole_session;
SELECT count(*) AS left_in_snap FROM wm_parts WHERE session_id = 'snap';
SELECT wm_clear() > 0 AS everything;
SELECT count(*) AS left_anywhere FROM wm_parts;
