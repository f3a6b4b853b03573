-- Mostly answers "already exists" (a text answer, not an SQL error).
\set m random(1, :scopes)
\set f random(1, 10)
SELECT agent_memory.claude_memory('ms' || :m, jsonb_build_object('command', 'create',
  'path', '/memories/new' || :f || '.md', 'file_text', E'# Note\nseat: window\n'));
