-- Invariants after the load (scripts/load_test.sh), one row per check:
-- "name|violations". Every count must be 0. Run when no client is writing
-- (the worker may still run: it only removes expired rows).

-- No thread holds more messages than its keep.
SELECT 'threads over their keep', count(*)
FROM (SELECT session_id, thread_key, count(*) AS held
      FROM agent_memory.thread_messages GROUP BY 1, 2) m
JOIN agent_memory.message_threads t USING (session_id, thread_key)
WHERE m.held > t.keep
UNION ALL
-- Every tool result kept has its call kept (trimming removes them together).
SELECT 'tool results without their call', count(*)
FROM agent_memory.thread_messages r
WHERE r.role = 'tool' AND r.metadata ? 'tool_call_id'
  AND NOT EXISTS (
    SELECT FROM agent_memory.thread_messages c
    WHERE c.session_id = r.session_id AND c.thread_key = r.thread_key AND c.role = 'assistant'
      AND c.metadata -> 'tool_calls' @> jsonb_build_array(jsonb_build_object('id', r.metadata ->> 'tool_call_id')))
UNION ALL
-- seq counts per session: no two stored messages of a session share one,
-- none is above its thread's last_seq, and no thread but the session's last
-- numbers past the session's last_message_seq.
SELECT 'duplicate message seq', count(*)
FROM (SELECT session_id, seq FROM agent_memory.thread_messages GROUP BY session_id, seq HAVING count(*) > 1) d
UNION ALL
SELECT 'message seq above its thread''s last_seq', count(*)
FROM agent_memory.thread_messages m JOIN agent_memory.message_threads t USING (session_id, thread_key)
WHERE m.seq > t.last_seq
UNION ALL
SELECT 'thread numbering past its session''s last_message_seq', count(*)
FROM agent_memory.message_threads t JOIN agent_memory.sessions s USING (session_id)
WHERE t.thread_key IS DISTINCT FROM s.last_thread_key AND t.last_seq > s.last_message_seq
UNION ALL
-- The word budget holds for every session's live entries.
SELECT 'sessions over the word budget', count(*)
FROM (SELECT session_id FROM agent_memory.kv_entries WHERE expires_at > now()
      GROUP BY session_id
      HAVING sum(words) > current_setting('agent_memory.kv_word_budget')::int) b
UNION ALL
-- While no entry of a session can have expired (kv_next_expiry ahead), its
-- word counter is exactly the words it stores.
SELECT 'sessions whose word counter is wrong', count(*)
FROM agent_memory.sessions s
WHERE s.kv_next_expiry > now()
  AND s.kv_words <> (SELECT coalesce(sum(words), 0) FROM agent_memory.kv_entries k WHERE k.session_id = s.session_id)
UNION ALL
-- No stored entry expires before the session's recorded next expiry.
SELECT 'entries expiring before kv_next_expiry', count(*)
FROM agent_memory.kv_entries k JOIN agent_memory.sessions s USING (session_id)
WHERE k.expires_at < s.kv_next_expiry
UNION ALL
-- Saved graph versions are all older than the node's current one.
SELECT 'graph versions not below the current', count(*)
FROM agent_memory.graph_node_versions v JOIN agent_memory.graph_nodes n USING (owner, node_id)
WHERE v.version >= n.version
UNION ALL
-- A scope's file count is an upper bound of its files.
SELECT 'scopes holding more files than counted', count(*)
FROM (SELECT scope, count(*) AS files FROM agent_memory.memory_files GROUP BY scope) f
LEFT JOIN agent_memory.memory_scopes s USING (scope)
WHERE s.files IS NULL OR f.files > s.files
UNION ALL
-- Every long-lived session survived the load.
SELECT 'long-lived sessions gone', :sessions - count(*)
FROM agent_memory.sessions WHERE session_id LIKE 'ls%' AND agent_memory.is_active(session_id);
