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

-- The same as one by one: a seeded random history of 300 batches (1 to 8
-- messages: user and assistant messages, tool calls and their results,
-- idempotency keys, four threads, keeps of 2 to 5) goes to session 'one'
-- through append_message and to session 'many' through append_messages.
-- Both must return the same seqs and end with the same messages and
-- thread counters.
SELECT agent_memory.create_session('ana', session_id => 'one'), agent_memory.create_session('ana', session_id => 'many');
CREATE TEMP TABLE returned (session text, batch int, seqs bigint[], messages jsonb);
DO $$
DECLARE
    batch jsonb;
    node text;
    keep int;
    seqs bigint[];
    one_seqs bigint[];
    m jsonb;
    pick float8;
BEGIN
    PERFORM setseed(0.42);
    FOR b IN 1 .. 300 LOOP
        batch := '[]';
        node := (ARRAY[NULL, 'n1', 'n2', 'n3'])[1 + floor(random() * 4)::int];
        keep := 2 + floor(random() * 4)::int;
        FOR i IN 1 .. 1 + floor(random() * 8)::int LOOP
            pick := random();
            m := CASE
                WHEN pick < 0.55 THEN jsonb_build_object('role', 'user', 'content', 'u' || b || '.' || i)
                WHEN pick < 0.8 THEN jsonb_build_object('role', 'assistant', 'content', 'a' || b || '.' || i,
                                                         'metadata', jsonb_build_object('n', i))
                WHEN pick < 0.87 THEN jsonb_build_object('role', 'assistant', 'content', 'call' || b || '.' || i,
                                                         'metadata', jsonb_build_object('tool_calls',
                                                             jsonb_build_array('c' || b || '.' || i, 'd' || b || '.' || i)))
                WHEN pick < 0.95 THEN jsonb_build_object('role', 'tool', 'content', 'result',
                                                        'metadata', jsonb_build_object('tool_call_id',
                                                            (ARRAY['c', 'd'])[1 + floor(random() * 2)::int]
                                                            || (b - floor(random() * 3)::int) || '.' || (1 + floor(random() * 4)::int)))
                ELSE jsonb_build_object('role', 'user', 'content', 'keyed',
                                        'metadata', jsonb_build_object('idempotency_key', 'k' || floor(random() * 40)::int))
            END;
            batch := batch || jsonb_build_array(m);
        END LOOP;
        one_seqs := '{}';
        FOR m IN SELECT value FROM jsonb_array_elements(batch) LOOP
            one_seqs := one_seqs || agent_memory.append_message('one', m ->> 'role', m ->> 'content', node,
                                                                coalesce(m -> 'metadata', '{}'), keep);
        END LOOP;
        INSERT INTO returned VALUES ('one', b, one_seqs, batch);
        seqs := agent_memory.append_messages('many', batch, node, keep);
        INSERT INTO returned VALUES ('many', b, seqs, batch);
    END LOOP;
END
$$;
SELECT count(*) AS batches, count(*) FILTER (WHERE o.seqs = m.seqs) AS same_seqs,
       -- those that may go in one statement: no tool call or result, no key
       count(*) FILTER (WHERE NOT jsonb_path_exists(m.messages,
           '$[*] ? (@.role == "tool" || exists(@.metadata.tool_calls) || exists(@.metadata.idempotency_key))')) AS plain
FROM returned o JOIN returned m USING (batch) WHERE o.session = 'one' AND m.session = 'many';
SELECT (SELECT count(*) FROM agent_memory.messages('one', lim => 1000)) AS messages_held,
       (SELECT array_agg(row(seq, node_id, role, content, metadata) ORDER BY seq) FROM agent_memory.messages('one', lim => 1000))
     = (SELECT array_agg(row(seq, node_id, role, content, metadata) ORDER BY seq) FROM agent_memory.messages('many', lim => 1000))
       AS same_messages;
SELECT (SELECT array_agg(row(node_id, keep, messages, appends, trimmed) ORDER BY node_id) FROM agent_memory.message_thread_stats WHERE session_id = 'one')
     = (SELECT array_agg(row(node_id, keep, messages, appends, trimmed) ORDER BY node_id) FROM agent_memory.message_thread_stats WHERE session_id = 'many')
       AS same_threads,
       (SELECT sum(trimmed) > 0 FROM agent_memory.message_thread_stats WHERE session_id = 'many') AS some_trimmed;
-- The slots too: a later append overwrites the same oldest message.
SELECT (SELECT array_agg(row(thread_key, slot, seq) ORDER BY thread_key, slot) FROM agent_memory.thread_messages WHERE session_id = 'one')
     = (SELECT array_agg(row(thread_key, slot, seq) ORDER BY thread_key, slot) FROM agent_memory.thread_messages WHERE session_id = 'many')
       AS same_slots;

SELECT agent_memory.end_session(id) FROM unnest(ARRAY['batch', 'batch-old', 'one', 'many']) AS id;
