-- Deletes a file that memory_tool_append creates again (ENOENT envelopes are answers, not errors).
\set m random(1, :scopes)
\set f random(1, :files)
SELECT agent_memory.memory_tool('ms' || :m, jsonb_build_object('command', 'delete', 'path', '/notes/f' || :f));
