-- Memory of every kind, written through the functions of this version into
-- a fresh database; scripts/upgrade_test.sh copies its rows into each
-- earlier release's tables (the columns they have) before updating them.
\set ON_ERROR_STOP on
SET search_path = agent_memory;
SELECT create_session('ana', '{"plan": "pro"}', 'up-1', interval '30 days');
SELECT create_session('ana', session_id => 'up-2');
SELECT kv_set('up-1', 'seat', '"window"');
SELECT kv_set('up-1', 'budget', '{"amount": 12345678901234567890123, "currency": "EUR"}');
SELECT kv_set('up-2', 'short', '"gone soon"', interval '1 hour');
-- Three appends to the session's thread, then twelve to node-a's with keep
-- 5: the ring holds appends 8 to 12.
SELECT append_message('up-1', 'user', 'hello');
SELECT append_message('up-1', 'assistant', 'calling', metadata => '{"tool_calls": ["c1"]}');
SELECT append_message('up-1', 'tool', 'result', metadata => '{"tool_call_id": "c1"}');
SELECT count(append_message('up-1', 'user', 'n' || i, 'node-a', keep => 5)) FROM generate_series(1, 12) i;
SELECT graph_create('ana', 'Atlas', 'The Atlas project', 'Started in May.', ARRAY['__root__'], 'atlas');
SELECT graph_write('ana', 'atlas', 'Atlas (shipped)', NULL, 'Shipped in June. See [[notes]].', change_description => 'shipped');
SELECT graph_create('ana', 'Notes', 'Loose notes', 'tea', ARRAY['atlas'], 'notes');
SELECT wm_set('up-1', 'node_context', '{"id": "atlas", "title": "Atlas"}');
SELECT wm_set('up-1', 'node_context', '{"id": "notes"}', 'notes');
SELECT memory_tool('ana', '{"command": "create", "path": "/notes/today", "content": "buy tea\n"}');
SELECT memory_tool('ana', '{"command": "append", "path": "/notes/today", "content": "call Bo\n"}');
SELECT claude_memory('ana', '{"command": "create", "path": "/memories/prefs.md", "file_text": "likes window seats\n"}');
