-- append_messages: many messages to one thread in one call, with the same
-- result as appending them one by one.
CREATE EXTENSION IF NOT EXISTS agent_memory;
\set VERBOSITY terse

SELECT agent_memory.create_session('ana', session_id => 'batch');

-- The seqs come back in the order of the messages. A thread that does not
-- exist yet is made by the first message; the rest go in one statement.
SELECT agent_memory.append_messages('batch', '[
  {"role": "system", "content": "You plan trips."},
  {"role": "user", "content": "Lisbon in May?"},
  {"role": "assistant", "content": "Gladly.", "metadata": {"model": "m1"}}
]') AS seqs;
-- More messages than keep: the oldest are trimmed as they would be one by
-- one, and counted as trimmed.
SELECT agent_memory.append_messages('batch', '[
  {"role": "user", "content": "m1"}, {"role": "user", "content": "m2"},
  {"role": "user", "content": "m3"}, {"role": "user", "content": "m4"},
  {"role": "user", "content": "m5"}
]', keep => 3) AS seqs;
SELECT seq, role, content, metadata FROM agent_memory.messages('batch');
SELECT messages, appends, trimmed FROM agent_memory.message_thread_stats WHERE session_id = 'batch';

-- A node's thread; messages_json's output appends as it is (its seq and
-- created_at are ignored: the copies get new ones).
SELECT agent_memory.append_messages('batch', agent_memory.messages_json('batch'), node_id => 'copy') AS seqs;
SELECT seq, node_id, role, content FROM agent_memory.messages('batch', 'copy');
-- An empty array appends nothing.
SELECT agent_memory.append_messages('batch', '[]') AS seqs;

-- Tool calls and idempotency keys follow append_message's rules: with
-- keep 3, the call and its two results go together when the call is
-- trimmed, and a repeated key returns the first seq, within the batch too.
SELECT agent_memory.append_messages('batch', '[
  {"role": "assistant", "content": "calling", "metadata": {"tool_calls": ["c1", "c2"]}},
  {"role": "tool", "content": "r1", "metadata": {"tool_call_id": "c1"}},
  {"role": "tool", "content": "r2", "metadata": {"tool_call_id": "c2"}},
  {"role": "user", "content": "pay", "metadata": {"idempotency_key": "k1"}},
  {"role": "user", "content": "pay", "metadata": {"idempotency_key": "k1"}}
]', node_id => 'tools', keep => 3) AS seqs;
SELECT role, content FROM agent_memory.messages('batch', 'tools');
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "pay", "metadata": {"idempotency_key": "k1"}}]',
                                    node_id => 'tools', keep => 3) AS repeated;

-- A plain batch that would overwrite a tool call goes one by one, and the
-- call's results go with it.
SELECT agent_memory.append_messages('batch', '[
  {"role": "assistant", "content": "calling", "metadata": {"tool_calls": ["c3"]}},
  {"role": "tool", "content": "r3", "metadata": {"tool_call_id": "c3"}},
  {"role": "user", "content": "thanks"}
]', node_id => 'ring', keep => 3) AS seqs;
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "u1"}, {"role": "user", "content": "u2"}]',
                                    node_id => 'ring', keep => 3) AS seqs;
SELECT role, content FROM agent_memory.messages('batch', 'ring');

-- Bad input: every message is checked first, the error names the one at
-- fault, and nothing is stored.
SELECT count(*) AS before FROM agent_memory.thread_messages WHERE session_id = 'batch' \gset
SELECT agent_memory.append_messages('batch', '{"role": "user", "content": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "ok"}, "x"]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "x", "node_id": "n"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "x", "metadata": [1]}]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "x", "metadata": {"idempotency_key": 7}}]');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_message_bytes = 4;
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "ok"}, {"role": "user", "content": "too long"}]');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_message_bytes;
-- Nested deeper than 100 levels (the array and the message count too).
SELECT agent_memory.append_messages('batch', ('[{"role": "user", "content": "x", "metadata": '
       || repeat('{"a": ', 99) || '1' || repeat('}', 99) || '}]')::jsonb);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('', '[]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch', '[{"role": "user", "content": "x"}]', keep => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) = :before AS nothing_stored FROM agent_memory.thread_messages WHERE session_id = 'batch';
-- An expired session: P0002, as for append_message.
SELECT agent_memory.create_session('ana', session_id => 'batch-old', idle_timeout => '1 minute');
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '2 minutes' WHERE session_id = 'batch-old';
SELECT agent_memory.append_messages('batch-old', '[{"role": "user", "content": "late"}]');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_messages('batch-old', '[]');
\echo :LAST_ERROR_SQLSTATE
-- A missing session: an empty array creates nothing.
SELECT agent_memory.append_messages('batch-none', '[]') AS seqs,
       agent_memory.is_active('batch-none') AS created;

-- The same as one by one: a seeded random history of 400 steps goes to
-- session 'one' through append_message and to session 'many' through
-- append_messages. A step is a batch of 1 to 25 messages (user and
-- assistant messages, tool calls and their results, idempotency keys) to
-- one of four threads with a keep of 2 to 8 or the default, or now and
-- then a pop_message or clear_messages done to both. Every step must
-- return the same on both sides, and leave both sessions in the same
-- state: every stored message with its slot and key, every thread's
-- counters, the session's record of its last thread.
SELECT agent_memory.create_session('ana', session_id => 'one'), agent_memory.create_session('ana', session_id => 'many');
CREATE FUNCTION pg_temp.message_state(s text) RETURNS text LANGUAGE sql AS $$
  SELECT concat_ws(' # ',
    (SELECT string_agg(concat_ws('|', thread_key, slot, seq, node_id, role, content, metadata, idempotency_key),
                       ', ' ORDER BY thread_key, slot)
     FROM agent_memory.thread_messages WHERE session_id = s),
    (SELECT string_agg(concat_ws('|', thread_key, keep, appended, appends, last_seq), ', ' ORDER BY thread_key)
     FROM agent_memory.message_threads WHERE session_id = s),
    (SELECT concat_ws('|', last_thread_key, last_message_seq) FROM agent_memory.sessions WHERE session_id = s))
$$;
CREATE FUNCTION pg_temp.is_plain(m jsonb) RETURNS boolean LANGUAGE sql AS $$
  SELECT m ->> 'role' <> 'tool' AND NOT coalesce(m -> 'metadata' ? 'tool_calls', false)
         AND NOT coalesce(m -> 'metadata' ? 'idempotency_key', false)
$$;
CREATE TEMP TABLE steps (step int, kind text, messages jsonb, same_result boolean, same_state boolean);
DO $$
DECLARE
    batch jsonb;
    node text;
    keep int;
    one_result text;
    many_result text;
    m jsonb;
    pick float8;
    one_seqs bigint[];
BEGIN
    PERFORM setseed(0.42);
    FOR b IN 1 .. 400 LOOP
        node := (ARRAY[NULL, 'n1', 'n2', 'n3'])[1 + floor(random() * 4)::int];
        keep := (ARRAY[NULL, 2, 3, 4, 5, 8])[1 + floor(random() * 6)::int];
        pick := random();
        IF pick < 0.06 THEN
            one_result := (agent_memory.pop_message('one', node) - 'created_at')::text;
            many_result := (agent_memory.pop_message('many', node) - 'created_at')::text;
            INSERT INTO steps VALUES (b, 'pop', NULL, one_result IS NOT DISTINCT FROM many_result);
        ELSIF pick < 0.09 THEN
            one_result := agent_memory.clear_messages('one', node)::text;
            many_result := agent_memory.clear_messages('many', node)::text;
            INSERT INTO steps VALUES (b, 'clear', NULL, one_result IS NOT DISTINCT FROM many_result);
        ELSE
            batch := '[]';
            FOR i IN 1 .. 1 + floor(random() ^ 2 * 25)::int LOOP
                pick := random();
                m := CASE
                    WHEN pick < 0.55 THEN jsonb_build_object('role', 'user', 'content', 'u' || b || '.' || i)
                    WHEN pick < 0.8 THEN jsonb_build_object('role', 'assistant', 'content', 'a' || b || '.' || i,
                                                             'metadata', CASE WHEN i % 3 = 0 THEN 'null' ELSE jsonb_build_object('n', i) END)
                    WHEN pick < 0.87 THEN jsonb_build_object('role', 'assistant', 'content', 'call' || b || '.' || i,
                                                             'metadata', jsonb_build_object('tool_calls',
                                                                 jsonb_build_array('c' || b || '.' || i, jsonb_build_object('id', 'd' || b || '.' || i))))
                    WHEN pick < 0.95 THEN jsonb_build_object('role', 'tool', 'content', 'result',
                                                            'metadata', jsonb_build_object('tool_call_id',
                                                                (ARRAY['c', 'd'])[1 + floor(random() * 2)::int]
                                                                || (b - floor(random() * 3)::int) || '.' || (1 + floor(random() * 6)::int)))
                    ELSE jsonb_build_object('role', 'user', 'content', 'keyed',
                                            'metadata', jsonb_build_object('idempotency_key', 'k' || floor(random() * 40)::int))
                END;
                batch := batch || jsonb_build_array(m);
            END LOOP;
            one_seqs := '{}';
            FOR m IN SELECT value FROM jsonb_array_elements(batch) LOOP
                one_seqs := one_seqs || agent_memory.append_message('one', m ->> 'role', m ->> 'content', node,
                                                                    CASE WHEN jsonb_typeof(m -> 'metadata') = 'object'
                                                                         THEN m -> 'metadata' ELSE '{}' END, keep);
            END LOOP;
            INSERT INTO steps VALUES (b, 'batch', batch,
                                      one_seqs = agent_memory.append_messages('many', batch, node, keep));
        END IF;
        UPDATE steps SET same_state = pg_temp.message_state('one') = pg_temp.message_state('many') WHERE step = b;
    END LOOP;
END
$$;
SELECT kind, count(*) AS steps, count(*) FILTER (WHERE same_result) AS same_result,
       count(*) FILTER (WHERE same_state) AS same_state,
       -- batches with a run of at least two plain messages (no tool call or
       -- result, no key), which goes in one statement
       count(*) FILTER (WHERE EXISTS (
           SELECT FROM jsonb_array_elements(messages) WITH ORDINALITY AS a(m, i)
           JOIN jsonb_array_elements(messages) WITH ORDINALITY AS n(m, i) ON n.i = a.i + 1
           WHERE pg_temp.is_plain(a.m) AND pg_temp.is_plain(n.m))) AS with_plain_run
FROM steps GROUP BY kind ORDER BY kind;
SELECT count(*) AS messages_held,
       (SELECT sum(trimmed) FROM agent_memory.message_thread_stats WHERE session_id = 'many') > 0 AS some_trimmed
FROM agent_memory.thread_messages WHERE session_id = 'many';

SELECT agent_memory.end_session(id) FROM unnest(ARRAY['batch', 'batch-old', 'one', 'many']) AS id;
