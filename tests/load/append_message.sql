\set s random(1, :sessions)
\set r random(0, 1)
SELECT agent_memory.append_message('ls' || :s, CASE WHEN :r = 0 THEN 'user' ELSE 'assistant' END,
  'The user asked to compare three flights to Lisbon and to keep the window seat preference.', keep => 50);
