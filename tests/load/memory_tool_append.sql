\set m random(1, :scopes)
\set f random(1, :files)
SELECT agent_memory.memory_tool('ms' || :m, jsonb_build_object('command', 'append', 'path', '/notes/f' || :f, 'content', ' more'));
