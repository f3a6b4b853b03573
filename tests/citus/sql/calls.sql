-- Every kind of call through the coordinator: alone (delegated to the
-- key's node when Citus can), in a transaction block (run on the
-- coordinator, each statement routed, unless forced), and in a form Citus
-- never delegates (two calls in one SELECT).
SET search_path = agent_memory, public;

-- Sessions and key-value memory.
SELECT create_session('citus-alice', '{"channel": "web"}', session_id => 'citus-c1');
SELECT kv_set('citus-c1', 'goal', '"find a flight to Lisbon"');
SELECT update_context('citus-c1', '{"budget": 1200, "seat": "window"}');
SELECT kv_get('citus-c1', 'goal');
SELECT kv_has('citus-c1', 'seat'), kv_get('citus-c1', 'budget');
SELECT build_context('citus-c1') -> 'memory' AS memory;
SELECT build_context('citus-c1', ARRAY['seat']) -> 'memory' AS one_key;
SELECT build_context('citus-nobody') - 'timestamp' AS missing;
BEGIN;
SELECT kv_set('citus-c1', 'meal', '"vegetarian"') ->> 'total_words' AS total_words;
SELECT kv_delete('citus-c1', 'budget');
SELECT kv_get_all('citus-c1');
COMMIT;
SELECT kv_get_all('citus-c1');
BEGIN;
SELECT clear_context_keys('citus-c1', ARRAY['meal']);
ROLLBACK;
SELECT kv_get('citus-c1', 'meal');

-- The word budget, as a session SET: the call runs where the SET holds.
SET agent_memory.kv_word_budget = 6;
SELECT kv_set('citus-c1', 'plan', '"compare three airlines"') -> 'evicted' AS evicted;
RESET agent_memory.kv_word_budget;
SELECT kv_get_all('citus-c1');

-- Messages: seq increases within the session, in and out of transactions.
SELECT append_message('citus-c1', 'user', 'Find me a flight.');
BEGIN;
SELECT append_message('citus-c1', 'assistant', 'Searching.',
         metadata => '{"tool_calls": [{"id": "call_1", "type": "function"}]}');
SELECT append_message('citus-c1', 'tool', '3 flights found', metadata => '{"tool_call_id": "call_1"}');
COMMIT;
SELECT append_messages('citus-c1', '[{"role": "assistant", "content": "TAP at 9:00."},
                               {"role": "user", "content": "Book it."}]');
SELECT append_message('citus-c1', 'user', 'Again?', metadata => '{"idempotency_key": "k1"}'),
       append_message('citus-c1', 'user', 'Again?', metadata => '{"idempotency_key": "k1"}');
SELECT seq, role, content FROM messages('citus-c1');
SELECT jsonb_array_length(messages_json('citus-c1'));
SELECT last_user_message('citus-c1');
SELECT pop_message('citus-c1') ->> 'content' AS popped;
SELECT append_message('citus-c1', 'user', 'Kept three.', keep => 3);
SELECT seq, role FROM messages('citus-c1');

-- Graph memory and working memory composed from it.
SELECT graph_create('citus-alice', 'Travel', 'How Alice travels', 'Prefers trains.',
                    ARRAY['__root__'], node_id => 'travel');
SELECT graph_create('citus-alice', 'Lisbon', 'May', 'Flight booked.', ARRAY['travel'], node_id => 'lisbon');
BEGIN;
SELECT graph_write('citus-alice', 'lisbon', NULL, NULL, 'Flight booked. Hotel in Alfama.',
                   change_description => 'hotel');
SELECT graph_append('citus-alice', 'lisbon', 'Tram 28.');
COMMIT;
SELECT graph_read('citus-alice', 'lisbon') - 'createdAt' - 'updatedAt' AS node;
SELECT version, change_description FROM graph_versions('citus-alice', 'lisbon');
SELECT graph_version('citus-alice', 'lisbon', 1) ->> 'body' AS first_body;
SELECT node_id, parent_id, depth FROM graph_tree_rows('citus-alice');
-- A list in FROM made after a session SET runs where the SET holds.
SET agent_memory.max_tree_rows = 1;
SELECT node_id, parent_id, depth FROM graph_tree_rows('citus-alice');
RESET agent_memory.max_tree_rows;
SELECT graph_to_markdown('citus-alice', 'lisbon') LIKE '%Hotel in Alfama%' AS markdown;
SELECT array_agg(f ORDER BY f) AS exported FROM jsonb_object_keys(graph_export('citus-alice')) f;
SELECT wm_init('citus-c1', 'lisbon', 'citus-alice') -> 'node_context' ->> 'id' AS node;
SELECT wm_set('citus-c1', 'fetched_context', '{"hotels": ["Alfama Loft"]}', 'lisbon');
BEGIN;
SELECT wm_patch('citus-c1', 'config', '{"history_length": 2}');
SELECT wm_get('citus-c1', 'config');
COMMIT;
SELECT working_memory('citus-c1', 'lisbon') -> 'fetched_context' AS fetched;
SELECT working_memory_entry('citus-c1', 'lisbon') -> 'structure_index' -> 'edges' AS edges;
SELECT set_active_node('citus-c1', 'travel') #> '{session,active_node_id}' AS active;
SELECT wm_clear('citus-c1', 'lisbon');

-- The memory tools.
SELECT memory_tool('citus-s1', '{"path": "/notes/today", "command": "append", "content": "hello"}');
BEGIN;
SELECT memory_tool('citus-s1', '{"path": "/notes/today", "command": "read"}');
SELECT memory_tool('citus-s1', '{"path": "/notes", "command": "list"}');
COMMIT;
SELECT claude_memory('citus-s2', '{"command": "create", "path": "/memories/a.md", "file_text": "one\ntwo"}');
BEGIN;
SELECT claude_memory('citus-s2', '{"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "uno"}');
SELECT claude_memory('citus-s2', '{"command": "insert", "path": "/memories/a.md", "insert_line": 2, "insert_text": "tres"}');
COMMIT;
SELECT claude_memory('citus-s2', '{"command": "view", "path": "/memories/a.md"}');
SELECT claude_memory('citus-s2', '{"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}');
SELECT claude_memory('citus-s2', '{"command": "view", "path": "/memories"}');
SELECT claude_memory('citus-s2', '{"command": "delete", "path": "/memories/b.md"}');
SELECT memory_render('citus-s1');

-- A NULL key is refused as on one server (Citus would crash delegating it).
SELECT kv_set(NULL, 'a', '1');
SELECT working_memory(NULL);
SELECT * FROM graph_nodes(NULL);
SELECT count(*) FROM messages(NULL);
PREPARE nodes_of(text) AS SELECT * FROM graph_nodes($1);
EXECUTE nodes_of(NULL);
DEALLOCATE nodes_of;
SELECT * FROM graph_nodes(owner => NULL);
SELECT kv_get(key => 'a', session_id => NULL);
SELECT * FROM (SELECT * FROM graph_nodes(NULL)) AS s;
WITH c AS (SELECT * FROM graph_nodes(NULL)) SELECT * FROM c WHERE true;
SELECT * FROM graph_nodes(NULL) WHERE true;
-- A key that folds to NULL, or a NULL key beside a WITH query or a sublink.
SELECT kv_get(nullif('a', 'a'), 'k');
SELECT * FROM graph_nodes(nullif('a', 'a'));
WITH c AS (SELECT 1) SELECT kv_get(NULL, 'k');
SELECT kv_get(NULL, 'k') LIMIT (SELECT 1);
-- A call in an expression the planner folds away to the bare call.
SELECT CASE WHEN true THEN kv_get(NULL, 'k') END;
SELECT CASE WHEN false THEN NULL ELSE kv_get(NULL, 'k') END;
-- A SQL function the planner inlines, whose body calls the extension.
CREATE FUNCTION pg_temp.goal_of(s text) RETURNS jsonb LANGUAGE sql
    AS 'SELECT agent_memory.kv_get(s, ''goal'')';
CREATE FUNCTION pg_temp.nodes_of(o text)
    RETURNS TABLE (node_id text, title text, description text, version integer, updated_at timestamptz)
    LANGUAGE sql STABLE AS 'SELECT * FROM agent_memory.graph_nodes(o)';
SELECT pg_temp.goal_of(NULL);
SELECT * FROM pg_temp.nodes_of(NULL);
SELECT node_id FROM pg_temp.nodes_of('citus-alice') ORDER BY node_id;
-- A call within a subquery, a WITH query or a sublink, or beside another
-- FROM item, runs on the coordinator (Citus would crash delegating it).
SELECT node_id FROM (SELECT * FROM graph_nodes('citus-alice')) AS s ORDER BY node_id;
WITH c AS (SELECT * FROM graph_nodes('citus-alice')) SELECT node_id FROM c ORDER BY node_id;
SELECT * FROM (SELECT kv_get('citus-c1', 'goal')) AS s WHERE true;
SELECT x, node_id FROM (VALUES (1)) AS v(x), graph_nodes('citus-alice') ORDER BY node_id;
SELECT x, s.node_id FROM (VALUES (1)) AS v(x),
       LATERAL (SELECT * FROM graph_nodes('citus-alice')) AS s ORDER BY node_id;
SELECT (SELECT count(*) FROM messages('citus-c1')) AS messages;
SELECT node_id FROM graph_nodes('citus-alice')
UNION SELECT node_id FROM graph_nodes('citus-alice') ORDER BY node_id;
-- A key left to its default is NULL: wm_clear() clears every session.
SELECT wm_clear() > 0 AS cleared;
SELECT * FROM wm_clear();
SELECT length(create_session('citus-bob')) AS generated_id_length;

-- A session's rows are on one node: every table of its group puts the key
-- on the same worker.
SELECT count(DISTINCT p.groupid) AS nodes
FROM unnest(ARRAY['agent_memory.sessions', 'agent_memory.kv_entries', 'agent_memory.message_threads',
                  'agent_memory.thread_messages', 'agent_memory.wm_parts']::regclass[]) AS t(tbl)
JOIN pg_dist_placement p ON p.shardid = get_shard_id_for_distribution_column(t.tbl, 'citus-c1');

-- Sessions end; what they owned goes with them, on every node.
SELECT end_session('citus-c1');
SELECT is_active('citus-c1'), kv_get_all('citus-c1'), messages_json('citus-c1');
SELECT count(*) FROM kv_entries WHERE session_id = 'citus-c1';
