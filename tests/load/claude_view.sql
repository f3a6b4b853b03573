\set m random(1, :scopes)
\set f random(0, 5)
SELECT agent_memory.claude_memory('ms' || :m, jsonb_build_object('command', 'view',
  'path', CASE WHEN :f = 0 THEN '/memories' ELSE '/memories/c' || :f || '.md' END));
