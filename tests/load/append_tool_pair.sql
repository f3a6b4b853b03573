-- An assistant tool call and its result, appended together (keep 50): when
-- trimming removes the call, its result must go too.
\set s random(1, :sessions)
\set r random(1, 1000000000)
BEGIN;
SELECT agent_memory.append_message('ls' || :s, 'assistant', 'looking up fares',
  metadata => jsonb_build_object('tool_calls', jsonb_build_array(jsonb_build_object('id', 'call_' || :client_id || '_' || :r))),
  keep => 50);
SELECT agent_memory.append_message('ls' || :s, 'tool', '{"fares": [412, 388]}',
  metadata => jsonb_build_object('tool_call_id', 'call_' || :client_id || '_' || :r), keep => 50);
END;
