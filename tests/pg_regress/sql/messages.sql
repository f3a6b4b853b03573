-- Bounded message history: append, read, pop, clear; keep, the tool-pair
-- rule, idempotency, bad input. Errors print their SQLSTATE on the next line.

SELECT agent_memory.create_session('u1', session_id => 'chat');

-- Appends return strictly increasing sequence numbers; keep their
-- differences, not their values (the sequence is shared by all sessions).
CREATE TEMP TABLE seqs (name text, seq bigint);
INSERT INTO seqs SELECT 'first', agent_memory.append_message('chat', 'system', 'You are a travel agent.');
INSERT INTO seqs SELECT 'second', agent_memory.append_message('chat', 'user', 'Find me a flight to Lisbon.');
INSERT INTO seqs SELECT 'third', agent_memory.append_message('chat', 'assistant', 'For which dates?', metadata => '{"model": "m1"}');
SELECT (SELECT seq FROM seqs WHERE name = 'second') > (SELECT seq FROM seqs WHERE name = 'first') AS increasing,
       (SELECT seq FROM seqs WHERE name = 'third') > (SELECT seq FROM seqs WHERE name = 'second') AS still_increasing;

-- Reads, oldest first.
SELECT role, content, metadata, node_id FROM agent_memory.messages('chat');
SELECT role, content FROM agent_memory.messages('chat', lim => 2);
SELECT jsonb_path_query_array(agent_memory.messages_json('chat'), '$[*].role') AS roles,
       (agent_memory.messages_json('chat') -> 2) - 'seq' - 'created_at' AS third;
SELECT agent_memory.last_user_message('chat');

-- Per node: a node's messages are its own; without a node, the whole session.
SELECT agent_memory.append_message('chat', 'user', 'Node question', node_id => 'n1') > 0 AS appended;
SELECT agent_memory.append_message('chat', 'assistant', 'Node answer', node_id => 'n1') > 0 AS appended;
SELECT role, content, node_id FROM agent_memory.messages('chat', 'n1');
SELECT count(*) AS whole_session FROM agent_memory.messages('chat');
SELECT agent_memory.last_user_message('chat', 'n1'), agent_memory.last_user_message('chat');
SELECT agent_memory.messages_json('chat', 'no-such-node');

-- keep: at most keep messages remain for the (session, node), the oldest go.
SELECT count(agent_memory.append_message('chat', 'user', 'note ' || i, node_id => 'ring', keep => 3))
FROM generate_series(1, 7) i;
SELECT content FROM agent_memory.messages('chat', 'ring');
SELECT node_id, keep, messages, appends, trimmed FROM agent_memory.message_thread_stats
WHERE session_id = 'chat' AND node_id = 'ring';
-- A smaller keep trims at once, a larger one lets the thread grow again.
SELECT agent_memory.append_message('chat', 'user', 'note 8', node_id => 'ring', keep => 2) > 0 AS appended;
SELECT content FROM agent_memory.messages('chat', 'ring');
SELECT count(agent_memory.append_message('chat', 'user', 'note ' || i, node_id => 'ring', keep => 4))
FROM generate_series(9, 11) i;
SELECT content FROM agent_memory.messages('chat', 'ring');
SELECT messages, appends, trimmed FROM agent_memory.message_thread_stats
WHERE session_id = 'chat' AND node_id = 'ring';
-- The default keep is agent_memory.max_messages.
SET agent_memory.max_messages = 2;
SELECT count(agent_memory.append_message('chat', 'user', 'default ' || i, node_id => 'dflt'))
FROM generate_series(1, 5) i;
SELECT content FROM agent_memory.messages('chat', 'dflt');
RESET agent_memory.max_messages;

-- The tool-pair rule: a call and its results go together. With keep 4, the
-- call (with two results) is the oldest when the fifth message arrives: the
-- call goes, and so do both of its results.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('chat', 'assistant', 'calling', node_id => 'tools', keep => 4,
     metadata => '{"tool_calls": [{"id": "c1", "type": "function"}, {"id": "c2", "type": "function"}]}')),
  (agent_memory.append_message('chat', 'tool', 'result 1', node_id => 'tools', keep => 4, metadata => '{"tool_call_id": "c1"}')),
  (agent_memory.append_message('chat', 'tool', 'result 2', node_id => 'tools', keep => 4, metadata => '{"tool_call_id": "c2"}')),
  (agent_memory.append_message('chat', 'assistant', 'done', node_id => 'tools', keep => 4))) AS appends(seq);
SELECT agent_memory.append_message('chat', 'user', 'next', node_id => 'tools', keep => 4) > 0 AS appended;
SELECT role, content, metadata FROM agent_memory.messages('chat', 'tools');
SELECT messages, appends, trimmed FROM agent_memory.message_thread_stats
WHERE session_id = 'chat' AND node_id = 'tools';
-- Ids may also be plain strings. A repack (a smaller keep) follows the same
-- rule: keep 3 leaves room for the result of call 2 and 'thanks', but the
-- call itself goes, so its result goes too.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('chat', 'assistant', 'call 2', node_id => 'tools', keep => 4, metadata => '{"tool_calls": ["c3"]}')),
  (agent_memory.append_message('chat', 'tool', 'result 3', node_id => 'tools', keep => 4, metadata => '{"tool_call_id": "c3"}')),
  (agent_memory.append_message('chat', 'user', 'thanks', node_id => 'tools', keep => 4))) AS appends(seq);
SELECT role, content FROM agent_memory.messages('chat', 'tools');
SELECT agent_memory.append_message('chat', 'assistant', 'bye', node_id => 'tools', keep => 3) > 0 AS appended;
SELECT role, content FROM agent_memory.messages('chat', 'tools');

-- Only an assistant message makes calls: a user message whose metadata
-- happens to hold tool_calls takes nothing with it when it is trimmed, and
-- holds no call that a tool result could answer (that result is trimmed at
-- once).
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('chat', 'user', 'quoting calls', node_id => 'quote', keep => 2,
     metadata => '{"tool_calls": ["q1"]}')),
  (agent_memory.append_message('chat', 'tool', 'answer q1', node_id => 'quote', keep => 2,
     metadata => '{"tool_call_id": "q1"}')),
  (agent_memory.append_message('chat', 'user', 'next', node_id => 'quote', keep => 2))) AS appends(seq);
SELECT role, content FROM agent_memory.messages('chat', 'quote');

-- A thread never holds a tool result without its call. With keep 2, a
-- result that arrives after its call was trimmed is trimmed at once: its
-- seq is taken (a gap), nothing is stored.
SELECT agent_memory.append_message('chat', 'assistant', '', node_id => 'late', keep => 2,
         metadata => '{"tool_calls": [{"id": "f1"}]}') IS NOT NULL AS called,
       agent_memory.append_message('chat', 'user', 'meanwhile', node_id => 'late', keep => 2) IS NOT NULL AS asked;
SELECT agent_memory.append_message('chat', 'tool', 'f1 says 42', node_id => 'late', keep => 2,
         metadata => '{"tool_call_id": "f1"}') IS NOT NULL AS answered;
SELECT role, content FROM agent_memory.messages('chat', 'late');
-- So is a result whose call the thread never held, in a batch too.
SELECT array_length(agent_memory.append_messages('chat',
         '[{"role": "tool", "content": "stray", "metadata": {"tool_call_id": "nobody"}},
           {"role": "assistant", "content": "", "metadata": {"tool_calls": ["g1", {"id": "g2"}]}},
           {"role": "tool", "content": "g1 done", "metadata": {"tool_call_id": "g1"}},
           {"role": "tool", "content": "g2 done", "metadata": {"tool_call_id": "g2"}}]', 'batch', keep => 3), 1) AS seqs;
SELECT role, content FROM agent_memory.messages('chat', 'batch');
-- A result that is not stored takes no room: three late results trim
-- none of the two messages held.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('chat', 'user', 'A', node_id => 'room', keep => 3)),
  (agent_memory.append_message('chat', 'user', 'B', node_id => 'room', keep => 3)),
  (agent_memory.append_message('chat', 'tool', 'late 1', node_id => 'room', keep => 3, metadata => '{"tool_call_id": "gone"}')),
  (agent_memory.append_message('chat', 'tool', 'late 2', node_id => 'room', keep => 3, metadata => '{"tool_call_id": "gone"}')),
  (agent_memory.append_message('chat', 'tool', 'late 3', node_id => 'room', keep => 3, metadata => '{"tool_call_id": "gone"}')),
  (agent_memory.append_message('chat', 'user', 'C', node_id => 'room', keep => 3))) AS appends(seq);
SELECT seq, role, content FROM agent_memory.messages('chat', 'room');
SELECT messages, appends, trimmed FROM agent_memory.message_thread_stats
WHERE session_id = 'chat' AND node_id = 'room';
-- keep 2 has no room for a call and two results: the second result trims
-- the call, the first result goes with it, and the second is trimmed at once.
SELECT array_length(agent_memory.append_messages('chat',
         '[{"role": "assistant", "content": "", "metadata": {"tool_calls": ["k1", "k2"]}},
           {"role": "tool", "content": "k1 done", "metadata": {"tool_call_id": "k1"}},
           {"role": "tool", "content": "k2 done", "metadata": {"tool_call_id": "k2"}}]', 'small', keep => 2), 1) AS seqs;
SELECT count(*) AS held FROM agent_memory.messages('chat', 'small');

-- A read window holds no result whose call falls outside it: the newest
-- two of [call, result, result] are two results, and both are left out.
SELECT agent_memory.append_messages('chat',
         '[{"role": "assistant", "content": "", "metadata": {"tool_calls": ["h1", "h2"]}},
           {"role": "tool", "content": "h1 done", "metadata": {"tool_call_id": "h1"}},
           {"role": "tool", "content": "h2 done", "metadata": {"tool_call_id": "h2"}}]', 'window') IS NOT NULL AS appended;
SELECT role, content FROM agent_memory.messages('chat', 'window', 2);
SELECT role, content FROM agent_memory.messages('chat', 'window', 3);
SELECT jsonb_array_length(agent_memory.messages_json('chat', 'window', 2)) AS json_window_2,
       jsonb_array_length(agent_memory.messages_json('chat', 'window', 3)) AS json_window_3;

-- One JSON value is bounded by agent_memory.max_result_bytes; the rows are
-- not (they stream).
SET agent_memory.max_result_bytes = 1024;
SELECT agent_memory.messages_json('chat', NULL, 200);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS rows_streamed FROM agent_memory.messages('chat', NULL, 200);
RESET agent_memory.max_result_bytes;
SELECT jsonb_array_length(agent_memory.messages_json('chat', NULL, 200)) AS json_messages;

-- Idempotency: the same key returns the first seq and stores nothing new.
INSERT INTO seqs SELECT 'idem', agent_memory.append_message('chat', 'user', 'pay the invoice', metadata => '{"idempotency_key": "req-1"}');
SELECT agent_memory.append_message('chat', 'user', 'pay the invoice', metadata => '{"idempotency_key": "req-1"}')
       = (SELECT seq FROM seqs WHERE name = 'idem') AS same_seq;
SELECT count(*) AS stored_once FROM agent_memory.messages('chat') WHERE content = 'pay the invoice';
-- A retry renews the session, as an append does.
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'chat';
SELECT agent_memory.append_message('chat', 'user', 'pay the invoice', metadata => '{"idempotency_key": "req-1"}')
       = (SELECT seq FROM seqs WHERE name = 'idem') AS same_seq;
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM agent_memory.sessions WHERE session_id = 'chat';

-- pop_message removes and returns the newest; its slot is reused.
SELECT agent_memory.pop_message('chat', 'n1') - 'seq' - 'created_at' AS popped;
SELECT role, content FROM agent_memory.messages('chat', 'n1');
SELECT agent_memory.append_message('chat', 'assistant', 'Node answer, again', node_id => 'n1') > 0 AS appended;
SELECT role, content FROM agent_memory.messages('chat', 'n1');
SELECT agent_memory.pop_message('chat', 'empty-node') IS NULL AS nothing_to_pop;

-- clear_messages: one node, then the whole session.
SELECT agent_memory.clear_messages('chat', 'ring');
SELECT count(*) FROM agent_memory.messages('chat', 'ring');
SELECT agent_memory.clear_messages('chat') > 0 AS cleared;
SELECT count(*) FROM agent_memory.messages('chat');
SELECT agent_memory.messages_json('chat');
SELECT agent_memory.last_user_message('chat') IS NULL AS no_user_message;

-- Appending to a session that does not exist creates it, with no user; the
-- first create_session claims it.
SELECT agent_memory.append_message('implicit', 'user', 'hello') > 0 AS appended;
SELECT user_id IS NULL AS no_user FROM agent_memory.sessions WHERE session_id = 'implicit';
SELECT agent_memory.create_session('u2', session_id => 'implicit');
SELECT user_id FROM agent_memory.sessions WHERE session_id = 'implicit';

-- An expired session: appends fail with P0002, reads see nothing.
SELECT agent_memory.create_session('u1', session_id => 'old', idle_timeout => '1 millisecond');
SELECT pg_sleep(0.05);
SELECT agent_memory.append_message('old', 'user', 'too late');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) FROM agent_memory.messages('old');
SELECT agent_memory.messages_json('old'), agent_memory.pop_message('old') IS NULL AS nothing_popped,
       agent_memory.clear_messages('old');

-- Bad input: a clear error, and nothing stored.
SELECT agent_memory.append_message('chat', 'robot', 'beep');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('', 'user', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message(NULL, 'user', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', 'x', keep => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', 'x', node_id => '');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', 'x', metadata => '[1, 2]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', 'x', metadata => '{"idempotency_key": 5}');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_message_bytes = 10;
SELECT agent_memory.append_message('chat', 'user', 'eleven byte');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('chat', 'user', 'x', metadata => '{"m": "eleven"}');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_message_bytes;
SELECT agent_memory.append_message('chat', 'user', 'x',
    metadata => pg_catalog.jsonb_build_object('idempotency_key', repeat('k', 257)));
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.messages('chat', lim => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS nothing_stored FROM agent_memory.messages('chat');

-- Ending a session removes its messages and threads.
SELECT agent_memory.end_session('chat');
SELECT count(*) FROM agent_memory.thread_messages WHERE session_id = 'chat';
SELECT count(*) FROM agent_memory.message_threads WHERE session_id = 'chat';

SELECT agent_memory.end_session(id) FROM unnest(ARRAY['implicit', 'old']) AS id;

-- Numbers count per session, across its threads, in the order of the
-- appends, and are never given twice: not after a pop, not after a clear.
SELECT agent_memory.create_session('ana', session_id => 'numbers');
SELECT agent_memory.append_message('numbers', 'user', 'a1', 'a') AS a1,
       agent_memory.append_message('numbers', 'user', 'b1', 'b') AS b1,
       agent_memory.append_message('numbers', 'user', 'a2', 'a') AS a2,
       agent_memory.append_message('numbers', 'user', 's1') AS s1,
       agent_memory.append_message('numbers', 'user', 'a3', 'a') AS a3;
SELECT agent_memory.pop_message('numbers', 'a') ->> 'seq' AS popped;
SELECT agent_memory.append_message('numbers', 'user', 'a4', 'a') AS a4;
SELECT agent_memory.clear_messages('numbers', 'a') AS cleared;
SELECT agent_memory.append_message('numbers', 'user', 'a5', 'a') AS a5,
       agent_memory.append_message('numbers', 'user', 'b2', 'b') AS b2;
SELECT agent_memory.clear_messages('numbers') AS cleared;
SELECT agent_memory.append_message('numbers', 'user', 'c1', 'c') AS c1;
SELECT seq, node_id, content FROM agent_memory.messages('numbers');
SELECT agent_memory.end_session('numbers');

-- A pop and a clear are writes: they renew the session, even when there is
-- nothing to remove.
SELECT agent_memory.create_session('ana', session_id => 'renewed');
SELECT agent_memory.append_message('renewed', 'user', 'hello') AS seq;
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'renewed';
SELECT agent_memory.pop_message('renewed') ->> 'content' AS popped;
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM agent_memory.sessions WHERE session_id = 'renewed';
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'renewed';
SELECT agent_memory.pop_message('renewed') AS nothing_to_pop;
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM agent_memory.sessions WHERE session_id = 'renewed';
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 hour' WHERE session_id = 'renewed';
SELECT agent_memory.clear_messages('renewed') AS cleared;
SELECT last_activity_at > now() - interval '1 minute' AS renewed FROM agent_memory.sessions WHERE session_id = 'renewed';
SELECT agent_memory.end_session('renewed');

-- A thread keeps its newest keep messages: the results that go with an
-- overwritten call leave room, taken by the next appends before any other
-- message is trimmed. Here u4 overwrites call a, whose result goes too: the
-- thread holds c2, u, u4 of 4, so the late result of call b finds its call
-- and takes the free slot; the next message then trims the oldest, c2, and
-- rb with it.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('gaps', 'assistant', 'c1', metadata => '{"tool_calls": [{"id": "a"}]}', keep => 4)),
  (agent_memory.append_message('gaps', 'assistant', 'c2', metadata => '{"tool_calls": [{"id": "b"}]}', keep => 4)),
  (agent_memory.append_message('gaps', 'tool', 'ra', metadata => '{"tool_call_id": "a"}', keep => 4)),
  (agent_memory.append_message('gaps', 'user', 'u', keep => 4)),
  (agent_memory.append_message('gaps', 'user', 'u4', keep => 4))) AS appends(seq);
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('gaps');
SELECT agent_memory.append_message('gaps', 'tool', 'rb', metadata => '{"tool_call_id": "b"}', keep => 4) AS rb;
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('gaps');
SELECT agent_memory.append_message('gaps', 'user', 'u5', keep => 4) AS u5;
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('gaps');
-- A result whose call is the oldest message trims the call and is not
-- stored: its slot is the next append's.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('gaps', 'assistant', 'c3', node_id => 'own', metadata => '{"tool_calls": ["d"]}', keep => 2)),
  (agent_memory.append_message('gaps', 'user', 'v1', node_id => 'own', keep => 2)),
  (agent_memory.append_message('gaps', 'tool', 'rd', node_id => 'own', metadata => '{"tool_call_id": "d"}', keep => 2)),
  (agent_memory.append_message('gaps', 'user', 'v2', node_id => 'own', keep => 2))) AS appends(seq);
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('gaps', 'own');
SELECT agent_memory.end_session('gaps');

-- A result that is not stored takes no room under a new keep either: keep
-- 2 keeps the newest two of u1, u2, u3.
SELECT count(agent_memory.append_message('rekeep', 'user', 'u' || i, keep => 3)) FROM generate_series(1, 3) i;
SELECT agent_memory.append_message('rekeep', 'tool', 'late', metadata => '{"tool_call_id": "gone"}', keep => 2) AS late;
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('rekeep');
SELECT agent_memory.append_message('rekeep', 'user', 'u4', keep => 2) AS u4;
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('rekeep');
SELECT agent_memory.end_session('rekeep');

-- Nor does a result whose call a new keep drops: keep 3 keeps u3, u4, u5.
SELECT agent_memory.append_message('rekept', 'assistant', 'calling', metadata => '{"tool_calls": [{"id": "c1"}]}', keep => 5) AS call;
SELECT count(agent_memory.append_message('rekept', 'user', 'u' || i, keep => 5)) FROM generate_series(2, 5) i;
SELECT agent_memory.append_message('rekept', 'tool', 'result', metadata => '{"tool_call_id": "c1"}', keep => 3) AS result;
SELECT string_agg(content, ', ' ORDER BY seq) AS held FROM agent_memory.messages('rekept');
SELECT agent_memory.end_session('rekept');

-- A result answers a call of its own thread: call ids repeat across
-- threads, and a session-wide window leaves out a result whose call is
-- outside it even when another thread's call of that id is inside.
SELECT count(*) FROM (VALUES
  (agent_memory.append_message('xcall', 'assistant', 'A call', 'a', '{"tool_calls": [{"id": "call_0"}]}')),
  (agent_memory.append_message('xcall', 'assistant', 'B call', 'b', '{"tool_calls": [{"id": "call_0"}]}')),
  (agent_memory.append_message('xcall', 'tool', 'A result', 'a', '{"tool_call_id": "call_0"}')),
  (agent_memory.append_message('xcall', 'tool', 'B result', 'b', '{"tool_call_id": "call_0"}'))) AS appends(seq);
SELECT seq, node_id, content FROM agent_memory.messages('xcall', NULL, 3);
SELECT jsonb_path_query_array(agent_memory.messages_json('xcall', NULL, 3), '$[*].content') AS json_window;
SELECT agent_memory.wm_set('xcall', 'config', '{"history_length": 3}') IS NOT NULL AS configured;
SELECT jsonb_path_query_array(agent_memory.working_memory('xcall') -> 'messages', '$[*].content') AS history;
SELECT seq, node_id, content FROM agent_memory.messages('xcall', NULL, 4);
-- With no message in the history, the snapshot's window is the stored
-- messages part, one thread: a result stays with its call there.
SELECT agent_memory.clear_messages('xcall') AS cleared;
SELECT agent_memory.wm_set('xcall', 'messages',
         '[{"role": "assistant", "content": "P call", "metadata": {"tool_calls": ["p1"]}},
           {"role": "tool", "content": "P result", "metadata": {"tool_call_id": "p1"}},
           {"role": "tool", "content": "Q result", "metadata": {"tool_call_id": "q1"}}]') IS NOT NULL AS stored;
SELECT jsonb_path_query_array(agent_memory.working_memory('xcall') -> 'messages', '$[*].content') AS history;
SELECT agent_memory.end_session('xcall');
