-- agent_memory quick start. `make demo` runs this file against a fresh
-- cluster that preloads the library; each capability adds its section.

CREATE EXTENSION IF NOT EXISTS agent_memory;

-- The extension, its version and its settings.
\dx agent_memory
SELECT agent_memory.version();
SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'agent_memory.%' ORDER BY name;

-- Sessions and key-value working memory.
SELECT agent_memory.create_session('alice', '{"channel": "web"}', session_id => 'trip-42');
SELECT agent_memory.kv_set('trip-42', 'goal', '"find a flight to Lisbon next week"');
SELECT agent_memory.update_context('trip-42', '{"budget": 1200, "seat": "window"}');
SELECT jsonb_pretty(agent_memory.build_context('trip-42', include_metadata => true));

-- The word budget evicts the oldest entries (here a budget of 12 words).
SET agent_memory.kv_word_budget = 12;
SELECT agent_memory.kv_set('trip-42', 'plan', '"compare three airlines then book"');
SELECT agent_memory.kv_get_all('trip-42');
RESET agent_memory.kv_word_budget;

-- Sensitive data is refused, naming only what kind it is.
\set ON_ERROR_STOP 0
SELECT agent_memory.kv_set('trip-42', 'card', '"4111 1111 1111 1111"');
\set ON_ERROR_STOP 1
SELECT agent_memory.sensitive_findings('reach me at ana@example.com, cpf 529.982.247-25');

-- Message history, bounded per (session, node): keep the last 3 here; a
-- tool call and its result are trimmed together.
SELECT agent_memory.append_message('trip-42', 'user', 'Find me a flight to Lisbon.', keep => 3);
SELECT agent_memory.append_message('trip-42', 'assistant', 'Searching.', keep => 3,
         metadata => '{"tool_calls": [{"id": "call_1", "type": "function"}]}');
SELECT agent_memory.append_message('trip-42', 'tool', '3 flights found', keep => 3,
         metadata => '{"tool_call_id": "call_1"}');
SELECT agent_memory.append_message('trip-42', 'assistant', 'TAP at 9:00 is the cheapest.', keep => 3);
SELECT agent_memory.append_message('trip-42', 'user', 'Book it.', keep => 3);
SELECT seq, role, content FROM agent_memory.messages('trip-42');
SELECT agent_memory.last_user_message('trip-42');

-- Graph memory: markdown nodes whose refs are their children, versioned.
SELECT agent_memory.graph_delete('alice', id) FROM unnest(ARRAY['travel', 'lisbon']) id;
SELECT agent_memory.graph_create('alice', 'Travel', 'How Alice travels', 'Prefers trains.',
         ARRAY['__root__'], node_id => 'travel');
SELECT agent_memory.graph_create('alice', 'Lisbon trip', 'May 2026', 'Flight booked.',
         ARRAY['travel'], node_id => 'lisbon');
SELECT agent_memory.graph_write('alice', 'lisbon', NULL, NULL, 'Flight booked. Hotel in Alfama.',
         change_description => 'added the hotel');
SELECT version, change_description FROM agent_memory.graph_versions('alice', 'lisbon');
SELECT node_id, parent_id, depth, path FROM agent_memory.graph_tree_rows('alice');
SELECT agent_memory.graph_to_markdown('alice', 'lisbon');

-- Working memory: parts per (session, node), composed into one
-- snapshot; an entry hydrated from the graph, focus moved between nodes.
SELECT agent_memory.set_active_node('trip-42', NULL);
SELECT agent_memory.wm_init('trip-42', 'lisbon', 'alice') -> 'node_context';
SELECT agent_memory.wm_set('trip-42', 'fetched_context', '{"hotels": ["Alfama Loft", "Casa Azul"]}', 'lisbon');
SELECT agent_memory.append_message('trip-42', 'user', 'Which hotel is nearer the tram?', node_id => 'lisbon');
SELECT agent_memory.wm_patch('trip-42', 'config', '{"history_length": 2}');
SELECT jsonb_pretty(agent_memory.working_memory('trip-42', 'lisbon') - 'project_structure');
SELECT agent_memory.working_memory_entry('trip-42', 'lisbon') -> 'structure_index';
SELECT agent_memory.set_active_node('trip-42', 'travel') #> '{session,active_node_id}';

-- Sessions, and the cleanup of what has expired.
SELECT agent_memory.session_stats();
SELECT agent_memory.cleanup_expired();
SELECT agent_memory.end_session('trip-42');
