\set m random(1, :scopes)
\set d random(0, 2)
SELECT agent_memory.memory_tool('ms' || :m, jsonb_build_object('command', 'list',
  'path', CASE :d::int WHEN 0 THEN '/' WHEN 1 THEN '/notes' ELSE '/todo' END));
