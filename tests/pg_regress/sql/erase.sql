-- Erasing a user: every session it owns with all they hold, and the graph
-- owners and file scopes the application keys by the user. Errors print
-- their SQLSTATE on the next line.

-- History is kept, so versions go too.
SELECT set_config('agent_memory.history_retention', '2', false) IS NOT NULL AS history_set;
SELECT agent_memory.create_session('leaver', session_id => 'leaver-1');
SELECT agent_memory.create_session('leaver', session_id => 'leaver-2');
SELECT agent_memory.create_session('stayer', session_id => 'stayer-1');
SELECT agent_memory.kv_set(s, 'goal', '"Lisbon"') ->> 'version' AS version FROM unnest(ARRAY['leaver-1', 'leaver-2', 'stayer-1']) s;
SELECT agent_memory.kv_set('leaver-1', 'goal', '"Porto"') ->> 'version' AS version;
SELECT agent_memory.append_message(s, 'user', 'hello') > 0 AS appended FROM unnest(ARRAY['leaver-1', 'stayer-1']) s;
SELECT agent_memory.wm_set('leaver-2', 'working_history', '"booked"');
SELECT agent_memory.graph_create(o, 'Home', '', 'notes', ARRAY['__root__'], node_id => 'home') FROM unnest(ARRAY['leaver', 'stayer']) o;
SELECT agent_memory.graph_write('leaver', 'home', NULL, NULL, 'more notes', change_description => 'more');
SELECT agent_memory.memory_tool(s, '{"path": "/a/todo.md", "command": "append", "content": "call"}') ->> 'ok' AS ok FROM unnest(ARRAY['leaver', 'stayer']) s;
SELECT agent_memory.memory_tool('leaver', '{"path": "/a/todo.md", "command": "append", "content": " mum"}') ->> 'ok' AS ok;
SELECT agent_memory.claude_memory('leaver', '{"command": "delete", "path": "/memories/a/todo.md"}');
SELECT agent_memory.claude_memory('leaver', '{"command": "create", "path": "/memories/b.md", "file_text": "mum: 5 pm"}');

-- Sessions alone, then with the graph owner and the file scope named by
-- the user.
SELECT agent_memory.erase_user('leaver');
SELECT agent_memory.user_sessions('leaver');
SELECT agent_memory.erase_user('leaver', owners => ARRAY['leaver'], scopes => ARRAY['leaver']);
-- Another user's memory is untouched.
SELECT session_id FROM agent_memory.user_sessions('stayer');
SELECT agent_memory.kv_get('stayer-1', 'goal');
SELECT count(*) AS nodes FROM agent_memory.graph_nodes('stayer');
SELECT agent_memory.memory_tool('stayer', '{"path": "/a/todo.md", "command": "read"}') -> 'result' ->> 'content' AS content;
-- Nothing is left of the user in any table.
SELECT (SELECT count(*) FROM agent_memory.sessions WHERE user_id = 'leaver')
     + (SELECT count(*) FROM agent_memory.kv_entry_versions WHERE session_id LIKE 'leaver%')
     + (SELECT count(*) FROM agent_memory.graph_nodes WHERE owner = 'leaver')
     + (SELECT count(*) FROM agent_memory.graph_node_versions WHERE owner = 'leaver')
     + (SELECT count(*) FROM agent_memory.memory_files WHERE scope = 'leaver')
     + (SELECT count(*) FROM agent_memory.memory_file_versions WHERE scope = 'leaver')
     + (SELECT count(*) FROM agent_memory.memory_directories WHERE scope = 'leaver')
     + (SELECT count(*) FROM agent_memory.memory_scopes WHERE scope = 'leaver') AS rows_left;
-- A second erasure finds nothing.
SELECT agent_memory.erase_user('leaver', owners => ARRAY['leaver'], scopes => ARRAY['leaver']);

-- Bad arguments change nothing.
SELECT agent_memory.erase_user(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.erase_user('');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.erase_user('stayer', owners => ARRAY[NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.erase_user('stayer', scopes => ARRAY['']);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS stayer_sessions FROM agent_memory.user_sessions('stayer');

SELECT agent_memory.erase_user('stayer', owners => ARRAY['stayer'], scopes => ARRAY['stayer']) ->> 'sessions' AS sessions;
RESET agent_memory.history_retention;
