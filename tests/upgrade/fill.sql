-- Memory of every kind, written through the functions of the OLD version
-- before ALTER EXTENSION agent_memory UPDATE (and before pg_dump).
\set ON_ERROR_STOP on
SET search_path = agent_memory;
SELECT create_session('ana', '{"plan": "pro"}', 'up-1', interval '30 days');
SELECT create_session('ana', session_id => 'up-2');
SELECT kv_set('up-1', 'seat', '"window"');
SELECT kv_set('up-1', 'budget', '{"amount": 12345678901234567890123, "currency": "EUR"}');
SELECT kv_set('up-2', 'short', '"gone soon"', interval '1 hour');
-- Messages as 0.1.0's append_message left them, laid down directly: 0.1.0
-- numbered them from the global sequence agent_memory.message_seq, and
-- today's library (the only one installed) numbers them per session, in a
-- column 0.1.0's tables lack. Three appends to the session's thread, then
-- twelve to node-a's with keep 5: the ring holds appends 8 to 12.
INSERT INTO message_threads (session_id, thread_key, keep, appended, appends)
VALUES ('up-1', '', 200, 3, 3), ('up-1', 'node-a', 5, 12, 12);
INSERT INTO thread_messages (session_id, thread_key, slot, seq, node_id, role, content, metadata)
VALUES ('up-1', '', 0, nextval('message_seq'), NULL, 'user', 'hello', '{}'),
       ('up-1', '', 1, nextval('message_seq'), NULL, 'assistant', 'calling', '{"tool_calls": ["c1"]}'),
       ('up-1', '', 2, nextval('message_seq'), NULL, 'tool', 'result', '{"tool_call_id": "c1"}');
SELECT setval('message_seq', 10);
INSERT INTO thread_messages (session_id, thread_key, slot, seq, node_id, role, content, metadata)
SELECT 'up-1', 'node-a', (i - 1) % 5, nextval('message_seq'), 'node-a', 'user', 'n' || i, '{}'
FROM generate_series(8, 12) i;
SELECT graph_create('ana', 'Atlas', 'The Atlas project', 'Started in May.', ARRAY['__root__'], 'atlas');
SELECT graph_write('ana', 'atlas', 'Atlas (shipped)', NULL, 'Shipped in June. See [[notes]].', change_description => 'shipped');
SELECT graph_create('ana', 'Notes', 'Loose notes', 'tea', ARRAY['atlas'], 'notes');
SELECT wm_set('up-1', 'node_context', '{"id": "atlas", "title": "Atlas"}');
SELECT wm_set('up-1', 'node_context', '{"id": "notes"}', 'notes');
SELECT memory_tool('ana', '{"command": "create", "path": "/notes/today", "content": "buy tea\n"}');
SELECT memory_tool('ana', '{"command": "append", "path": "/notes/today", "content": "call Bo\n"}');
SELECT claude_memory('ana', '{"command": "create", "path": "/memories/prefs.md", "file_text": "likes window seats\n"}');
