-- Claude's memory tool (memory_20250818) over the memory tool's files:
-- each command, each refusal with the tool's text, bad paths and malformed
-- calls changing nothing, the tool_result block, and one tree shared with
-- memory_tool ('/memories/x' is the file '/x').
SET search_path = agent_memory, public;
\pset format unaligned
\pset tuples_only on

-- A scope's files, to show that a refused call changed nothing.
CREATE FUNCTION pg_temp.files(s text) RETURNS text LANGUAGE sql AS $$
  SELECT count(*) || ' files: ' || coalesce(string_agg(path || '=' || pg_catalog.quote_literal(content), ', ' ORDER BY path), '')
  FROM agent_memory.memory_files WHERE scope = s $$;

-- An empty memory directory can be viewed.
SELECT claude_memory('c', '{"command": "view", "path": "/memories"}');

-- create never overwrites.
SELECT claude_memory('c', '{"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\nuser likes tea\nmeeting on friday\n"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/notes.md", "file_text": "overwritten?"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/projects/agent/progress.xml", "file_text": "<progress>\n  <step>1</step>\n</progress>"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/projects/agent/deep/er/log.txt", "file_text": "deep"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/.secret", "file_text": "hidden"}');

-- view: a directory two levels deep (sizes as du writes them, hidden
-- entries left out), a file with line numbers, a range of lines.
SELECT claude_memory('c', '{"command": "view", "path": "/memories"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/projects/"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/notes.md"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/notes.md", "view_range": [2, 3]}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/notes.md", "view_range": [3, -1]}');

-- str_replace: exactly one occurrence; a snippet around the change.
SELECT claude_memory('c', '{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"}');
SELECT claude_memory('c', '{"command": "str_replace", "path": "/memories/notes.md", "old_str": "coffee", "new_str": "x"}');
SELECT claude_memory('c', '{"command": "str_replace", "path": "/memories/notes.md", "old_str": "e", "new_str": "x"}');

-- insert: after a line (0 is the top), within [0, lines].
SELECT claude_memory('c', '{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "## Preferences\n"}');
SELECT claude_memory('c', '{"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "x"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/notes.md"}');

-- rename: a file, a whole directory; never over something that exists.
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/people/user.md"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/archive/2026"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/people/user.md", "new_path": "/memories/archive/2026/agent/progress.xml"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/people/user.md", "new_path": "/memories/archive"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/archive", "new_path": "/memories/archive/inside"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/people/user.md", "new_path": "/memories/people/user.md/x"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/archive/2026/agent/progress.xml", "new_path": "/memories/people/user.md/progress.xml"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/nothing", "new_path": "/memories/something"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories", "new_path": "/memories/x"}');
SELECT claude_memory('c', '{"command": "rename", "old_path": "/memories/people", "new_path": "/memories"}');

-- delete: a file, a directory with everything under it, never the root.
SELECT claude_memory('c', '{"command": "delete", "path": "/memories/archive/2026/agent/deep"}');
SELECT claude_memory('c', '{"command": "delete", "path": "/memories/archive/2026/agent/deep"}');
SELECT claude_memory('c', '{"command": "delete", "path": "/memories"}');
SELECT pg_temp.files('c');

-- Missing paths, and directories where a file is needed.
SELECT claude_memory('c', '{"command": "view", "path": "/memories/nope.md"}');
SELECT claude_memory('c', '{"command": "str_replace", "path": "/memories/archive", "old_str": "a", "new_str": "b"}');
SELECT claude_memory('c', '{"command": "insert", "path": "/memories/nope.md", "insert_line": 0, "insert_text": "x"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/archive", "view_range": [1, 2]}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/archive", "file_text": "a directory is there"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories", "file_text": "x"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/people/user.md/child", "file_text": "x"}');

-- View ranges are sliced as the SDK slices them: the start is 1 at least,
-- an end past the file stops at its last line, a range of one element is
-- ignored; . and .. resolve inside /memories.
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [0, 1]}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [1, 99]}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [3, 2]}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [4]}') = claude_memory('c', '{"command": "view", "path": "/memories/people/user.md"}') AS one_element_ignored;
-- As the SDK reads a range: a string of another length than two is
-- ignored, booleans are numbers, and a directory ignores any range.
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": "1-2"}') = claude_memory('c', '{"command": "view", "path": "/memories/people/user.md"}') AS string_ignored;
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [true, 1]}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people", "view_range": ["a", "b"]}') = claude_memory('c', '{"command": "view", "path": "/memories/people"}') AS directory_ignores_it;
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/../people/./user.md", "view_range": [3, 3]}');

-- Bad paths and malformed calls: each answered, nothing changed.
SELECT pg_temp.files('c') AS before \gset
SELECT claude_memory('c', request::jsonb) FROM (VALUES
  ('{"command": "view", "path": "/etc/passwd"}'),
  ('{"command": "view", "path": "memories/notes.md"}'),
  ('{"command": "view", "path": "/memoriesx"}'),
  ('{"command": "create", "path": "/memories/../etc/passwd", "file_text": "x"}'),
  ('{"command": "create", "path": "/memories/a/../../x", "file_text": "x"}'),
  ('{"command": "create", "path": "/memories/%2e%2e/x", "file_text": "x"}'),
  ('{"command": "create", "path": "/memories/a\\b", "file_text": "x"}'),
  ('{"command": "create", "path": "/memories/a\u0001b", "file_text": "x"}'),
  ('{"command": "create", "path": "/memories/a\nb", "file_text": "x"}'),
  ('{"command": "delete", "path": "/memories/a%2Fb"}'),
  ('{"command": "rename", "old_path": "/memories/people/user.md", "new_path": "/tmp/user.md"}'),
  ('{"command": "rename", "old_path": "/memories/people/user.md", "new_path": "/memories/../user.md"}'),
  ('[]'),
  ('"view"'),
  ('{}'),
  ('{"command": 1, "path": "/memories"}'),
  ('{"command": "cat", "path": "/memories"}'),
  ('{"command": "view"}'),
  ('{"command": "view", "path": 7}'),
  ('{"command": "view", "path": "/memories", "deep": ' || repeat('[', 101) || repeat(']', 101) || '}'),
  ('{"command": "view", "path": "/memories/people/user.md", "view_range": ["a", "b"]}'),
  ('{"command": "create", "path": "/memories/x"}'),
  ('{"command": "create", "path": "/memories/x", "file_text": ["x"]}'),
  ('{"command": "str_replace", "path": "/memories/people/user.md", "old_str": "", "new_str": "x"}'),
  ('{"command": "str_replace", "path": "/memories/people/user.md", "old_str": "tea"}'),
  ('{"command": "insert", "path": "/memories/people/user.md", "insert_text": "x"}'),
  ('{"command": "insert", "path": "/memories/people/user.md", "insert_line": "1", "insert_text": "x"}'),
  ('{"command": "insert", "path": "/memories/people/user.md", "insert_line": -1, "insert_text": "x"}'),
  ('{"command": "rename", "old_path": "/memories/people/user.md"}'),
  ('{"command": "delete"}')
) AS bad(request);
SELECT claude_memory('c', NULL);
SELECT claude_memory(NULL, '{"command": "view", "path": "/memories"}');
SELECT pg_temp.files('c') = :'before' AS nothing_changed;

-- Limits: the file size and the number of files, with nothing half-done.
SET agent_memory.max_file_bytes = 20;
SELECT claude_memory('c', '{"command": "create", "path": "/memories/big", "file_text": "123456789012345678901"}');
SELECT claude_memory('c', '{"command": "insert", "path": "/memories/people/user.md", "insert_line": 0, "insert_text": "too much"}');
RESET agent_memory.max_file_bytes;
SET agent_memory.max_files_per_scope = 3;
SELECT claude_memory('c', '{"command": "create", "path": "/memories/one-too-many", "file_text": "x"}');
SELECT claude_memory('c', '{"command": "create", "path": "/memories/people/user.md", "file_text": "x"}');
RESET agent_memory.max_files_per_scope;
SELECT pg_temp.files('c') = :'before' AS nothing_changed;

-- One tree with the JSON memory tool.
SELECT memory_tool('c', '{"path": "/", "command": "list"}');
SELECT memory_tool('c', '{"path": "/people/user.md", "command": "append", "content": "added by memory_tool\n"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people/user.md", "view_range": [5, -1]}');
SELECT memory_tool('c', '{"path": "/people", "command": "delete"}');
SELECT claude_memory('c', '{"command": "view", "path": "/memories/people"}');

-- A tool_use block in, a tool_result block out.
\pset tuples_only off
\pset format aligned
SELECT claude_memory_tool_result('c', '{"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "create", "path": "/memories/todo.md", "file_text": "ship it\n"}}');
SELECT claude_memory_tool_result('c', '{"type": "tool_use", "id": "toolu_02", "name": "memory", "input": {"command": "view", "path": "/memories/nope"}}');
SELECT claude_memory_tool_result('c', '{"type": "tool_use", "name": "memory", "input": {"command": "view", "path": "/memories"}}');
\echo :LAST_ERROR_SQLSTATE

-- Directories behave as on a file system: one stays when its last file
-- goes, and a rename makes its destination's directories first (also when
-- its source is missing, as the SDK does).
SELECT claude_memory('k', '{"command": "create", "path": "/memories/a/b/c.md", "file_text": "c"}');
SELECT claude_memory('k', '{"command": "delete", "path": "/memories/a/b/c.md"}');
SELECT claude_memory('k', '{"command": "view", "path": "/memories"}');
SELECT claude_memory('k', '{"command": "view", "path": "/memories/a/b"}');
SELECT claude_memory('k', '{"command": "create", "path": "/memories/a/b", "file_text": "over a directory"}');
SELECT claude_memory('k', '{"command": "insert", "path": "/memories/a/b", "insert_line": 0, "insert_text": "x"}');
SELECT claude_memory('k', '{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/z"}');
SELECT claude_memory('k', '{"command": "rename", "old_path": "/memories/missing", "new_path": "/memories/n/m/x"}');
SELECT claude_memory('k', '{"command": "rename", "old_path": "/memories/z/b", "new_path": "/memories/n/m/b"}');
SELECT claude_memory('k', '{"command": "view", "path": "/memories"}');
SELECT path FROM memory_directories WHERE scope = 'k' ORDER BY path;
-- The JSON memory tool takes them for directories, lists only those that
-- hold files, and deletes them with the directory above.
SELECT memory_tool('k', '{"path": "/n/m/b", "command": "read"}');
SELECT memory_tool('k', '{"path": "/n/m/b", "command": "append", "content": "x"}');
SELECT memory_tool('k', '{"path": "/n/m/b", "command": "list"}');
SELECT memory_tool('k', '{"path": "/", "command": "list"}');
SELECT memory_tool('k', '{"path": "/n", "command": "delete"}');
SELECT claude_memory('k', '{"command": "delete", "path": "/memories/z"}');
SELECT claude_memory('k', '{"command": "view", "path": "/memories"}');
SELECT count(*) AS directories_left FROM memory_directories WHERE scope = 'k';
-- A scope left with nothing has no row either.
SELECT count(*) AS scope_rows FROM memory_scopes WHERE scope = 'k';
-- An empty directory counts as a file towards the limit.
SET agent_memory.max_files_per_scope = 2;
SELECT claude_memory('k', '{"command": "create", "path": "/memories/p/one", "file_text": "1"}');
SELECT claude_memory('k', '{"command": "create", "path": "/memories/q/two", "file_text": "2"}');
SELECT claude_memory('k', '{"command": "delete", "path": "/memories/p/one"}');
SELECT claude_memory('k', '{"command": "create", "path": "/memories/r", "file_text": "3"}');
SELECT claude_memory('k', '{"command": "delete", "path": "/memories/q/two"}');
SELECT claude_memory('k', '{"command": "view", "path": "/memories"}');
RESET agent_memory.max_files_per_scope;
DELETE FROM memory_directories WHERE scope = 'k';
DELETE FROM memory_scopes WHERE scope = 'k';

-- The scope's file count is an upper bound: creations added to it, renames
-- and deletions left it, the count at the limit made it exact.
SELECT s.files AS bound, (SELECT count(*) FROM memory_files f WHERE f.scope = 'c') AS files
FROM memory_scopes s WHERE s.scope = 'c';
DELETE FROM memory_files WHERE scope = 'c';
DELETE FROM memory_directories WHERE scope = 'c';
DELETE FROM memory_scopes WHERE scope = 'c';

-- A precondition the application passes beside a call: on the file the
-- call changes (a rename's source), by version or by the content's hash.
-- A failed one is an SQL error and changes nothing.
SELECT claude_memory('pre', '{"command": "create", "path": "/memories/a.md", "file_text": "one"}', expected_version => 0);
SELECT claude_memory('pre', '{"command": "create", "path": "/memories/b.md", "file_text": "two"}', expected_version => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT claude_memory('pre', '{"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "uno"}',
                     expected_sha256 => encode(sha256('one'), 'hex'));
SELECT claude_memory('pre', '{"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "dos"}',
                     expected_sha256 => encode(sha256('one'), 'hex'));
\echo :LAST_ERROR_SQLSTATE
SELECT claude_memory('pre', '{"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}', expected_version => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT claude_memory_tool_result('pre', '{"type": "tool_use", "id": "t1", "name": "memory", "input": {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}}', expected_version => 2);
SELECT claude_memory('pre', '{"command": "view", "path": "/memories/c.md"}', expected_version => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT claude_memory('pre', '{"command": "delete", "path": "/memories/c.md"}', expected_sha256 => 'abc');
\echo :LAST_ERROR_SQLSTATE
SELECT claude_memory('pre', '{"command": "delete", "path": "/memories/c.md"}', expected_version => -1);
\echo :LAST_ERROR_SQLSTATE
SELECT path, content, version FROM memory_files WHERE scope = 'pre';
SELECT claude_memory('pre', '{"command": "delete", "path": "/memories/c.md"}', expected_version => 3);
DELETE FROM memory_scopes WHERE scope = 'pre';

-- A kept directory counts as a file only while it is empty: once a file
-- is created under it, the limit counts that file alone.
SET agent_memory.max_files_per_scope = 2;
SELECT claude_memory('kept', '{"command": "create", "path": "/memories/d/x.md", "file_text": "x"}');
SELECT claude_memory('kept', '{"command": "delete", "path": "/memories/d/x.md"}');
SELECT claude_memory('kept', '{"command": "create", "path": "/memories/d/y.md", "file_text": "y"}');
SELECT claude_memory('kept', '{"command": "create", "path": "/memories/z.md", "file_text": "z"}');
SELECT claude_memory('kept', '{"command": "create", "path": "/memories/w.md", "file_text": "w"}');
RESET agent_memory.max_files_per_scope;
DELETE FROM memory_files WHERE scope = 'kept';
DELETE FROM memory_directories WHERE scope = 'kept';
DELETE FROM memory_scopes WHERE scope = 'kept';
