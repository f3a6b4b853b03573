-- Flips "status: todo" and "status: done": half the calls find their old_str.
\set m random(1, :scopes)
\set f random(1, 5)
\set a random(0, 1)
SELECT agent_memory.claude_memory('ms' || :m, jsonb_build_object('command', 'str_replace',
  'path', '/memories/c' || :f || '.md',
  'old_str', CASE WHEN :a = 0 THEN 'status: todo' ELSE 'status: done' END,
  'new_str', CASE WHEN :a = 0 THEN 'status: done' ELSE 'status: todo' END));
