-- The memory tool: the seven documented examples verbatim, each
-- error code, bad paths and malformed requests answered with EINVAL and
-- no row changed, scopes.
SET search_path = agent_memory, public;
SELECT memory_scope('M') AS global_scope, memory_scope('M', 'perThread', 't1') AS thread_scope;
SELECT memory_scope('M', 'perThread');
\echo :LAST_ERROR_SQLSTATE
SELECT memory_scope('M', 'everywhere');
\echo :LAST_ERROR_SQLSTATE

-- The documented examples, in the order that makes them true.
SELECT memory_tool('demo', '{"path": "/notes/today", "command": "append", "content": "hello"}');
SELECT memory_tool('demo', '{"path": "/notes/today", "command": "read"}');
SELECT memory_tool('demo', '{"path": "/missing", "command": "read"}');
SELECT memory_tool('demo', '{"path": "", "command": "list"}');
SELECT memory_tool('demo', '{"path": "/notes/today", "command": "update", "oldContent": "hello", "content": "hi"}');
SELECT memory_tool('demo', '{"path": "/notes", "command": "delete"}');
SELECT memory_tool('demo', '{"path": "/notes/x", "command": "append"}');

-- The envelope is json text, keys in the documented order.
SELECT pg_typeof(memory_tool('demo', '{"path": "/", "command": "list"}'));

-- Appends accumulate; update replaces every occurrence; two spellings of
-- one path reach one file.
SELECT memory_tool('t', '{"path": "/a/b/file", "command": "append", "content": "one two one"}');
SELECT memory_tool('t', '{"path": "a//b/file/", "command": "append", "content": " one"}');
SELECT memory_tool('t', '{"path": "/a/b/file", "command": "update", "oldContent": "one", "content": "1"}');
SELECT memory_tool('t', '{"path": "/a/b/file", "command": "update", "oldContent": "zzz", "content": "1"}');
SELECT memory_tool('t', '{"path": "/a/b/file", "command": "read"}');
SELECT memory_tool('t', '{"path": "/a/caf\u0065\u0301", "command": "append", "content": "nfc"}');
SELECT memory_tool('t', '{"path": "/a/caf\u00e9", "command": "read"}');
SELECT memory_tool('t', '{"path": "/a/b-c", "command": "append", "content": "x"}');
SELECT memory_tool('t', '{"path": "/a/b0", "command": "append", "content": "x"}');
SELECT memory_tool('t', '{"path": "/a", "command": "list"}');
SELECT memory_tool('t', '{"path": "/a/b", "command": "delete"}');
SELECT memory_tool('t', '{"path": "/a", "command": "list"}');
-- A delete counts every directory it removes, at any depth, and a file
-- as no directory; siblings whose names extend the path stay.
SELECT memory_tool('t', jsonb_build_object('path', p, 'command', 'append', 'content', 'x')) ->> 'ok'
FROM unnest(ARRAY['/n/a/x', '/n/a/b/y', '/n/a/b/c/z', '/n/d/e/w', '/n/v', '/n.md', '/n-2/u']) p;
SELECT memory_tool('t', '{"path": "/n/v", "command": "delete"}');
SELECT memory_tool('t', '{"path": "/n", "command": "delete"}');
SELECT memory_tool('t', '{"path": "/n.md", "command": "delete"}');
SELECT memory_tool('t', '{"path": "/", "command": "list"}');
SELECT memory_tool('t', '{"path": "/n-2", "command": "delete"}');

-- Each code.
SELECT memory_tool('t', '{"path": "/nothing/here", "command": "list"}');
SELECT memory_tool('t', '{"path": "/nothing", "command": "delete"}');
SELECT memory_tool('t', '{"path": "/nothing", "command": "update", "oldContent": "a", "content": "b"}');
SELECT memory_tool('t', '{"path": "/a", "command": "read"}');
SELECT memory_tool('t', '{"path": "/a", "command": "update", "oldContent": "a", "content": "b"}');
SELECT memory_tool('t', '{"path": "/a", "command": "append", "content": "a directory"}');
SELECT memory_tool('t', '{"path": "/a/b-c", "command": "list"}');
SELECT memory_tool('t', '{"path": "/a/b-c/deeper", "command": "append", "content": "under a file"}');
SET agent_memory.max_file_bytes = 10;
SELECT memory_tool('t', '{"path": "/big", "command": "append", "content": "more than ten bytes"}');
SELECT memory_tool('t', '{"path": "/a/b-c", "command": "append", "content": "0123456789"}');
SELECT memory_tool('t', '{"path": "/a/b-c", "command": "update", "oldContent": "x", "content": "0123456789ab"}');
RESET agent_memory.max_file_bytes;
-- A scope longer than a path may be is refused, as no scope is.
SELECT memory_tool(repeat('s', 1025), '{"path": "/a", "command": "read"}');
SELECT claude_memory(repeat('s', 1025), '{"command": "view", "path": "/memories"}');
SELECT memory_scope(repeat('n', 1020), 'perThread', 'thread');
\echo :LAST_ERROR_SQLSTATE
-- A short text replaced by a long one in every place is refused by the
-- size it would reach (5 GB here) before anything is built.
BEGIN;
SELECT memory_tool('many', jsonb_build_object('path', '/a', 'command', 'append',
                                              'content', repeat('a ', 51200)))::jsonb -> 'ok' AS stored;
SELECT memory_tool('many', jsonb_build_object('path', '/a', 'command', 'update', 'oldContent', 'a',
                                              'content', repeat('b', 100000)))::jsonb -> 'error' AS refused;
SELECT length(content) AS unchanged FROM agent_memory.memory_files WHERE scope = 'many';
ROLLBACK;
-- The scope's count is an upper bound (deletions leave it); at the limit a
-- creation counts the files exactly before it refuses.
SELECT files AS bound_now, (SELECT count(*) FROM memory_files WHERE scope = 't') AS files_now
FROM memory_scopes WHERE scope = 't';
SET agent_memory.max_files_per_scope = 4;
SELECT memory_tool('t', '{"path": "/one", "command": "append", "content": "1"}');
SELECT memory_tool('t', '{"path": "/two", "command": "append", "content": "2"}');
SELECT memory_tool('t', '{"path": "/one", "command": "append", "content": " more"}');
RESET agent_memory.max_files_per_scope;
-- A scope whose last file was deleted ('demo') has no row left.
SELECT s.scope, s.files AS bound, (SELECT count(*) FROM memory_files f WHERE f.scope = s.scope) AS files
FROM memory_scopes s ORDER BY s.scope;

-- Bad paths and malformed requests: EINVAL, and nothing changes.
CREATE TEMP TABLE before AS SELECT * FROM memory_files;
SELECT r ->> 'code' AS code, r ->> 'message' AS message, request
FROM (VALUES
  ('{"path": "/a/../b", "command": "read"}'),
  ('{"path": "..", "command": "list"}'),
  ('{"path": "/./a", "command": "append", "content": "x"}'),
  ('{"path": "/a/.", "command": "delete"}'),
  ('{"path": "/a/%2e%2e/b", "command": "read"}'),
  ('{"path": "/a%2Fb", "command": "append", "content": "x"}'),
  ('{"path": "/a%5Cb", "command": "append", "content": "x"}'),
  ('{"path": "/a\\b", "command": "append", "content": "x"}'),
  ('{"path": "/a\nb", "command": "append", "content": "x"}'),
  ('{"path": "/a\tb", "command": "read"}'),
  ('{"path": "/a\u007f", "command": "read"}'),
  ('{"path": "/a\u0085", "command": "read"}'),
  ('{"path": "/' || repeat('x', 256) || '", "command": "append", "content": "x"}'),
  ('{"path": "' || repeat('/a', 33) || '", "command": "append", "content": "x"}'),
  ('{"path": "/' || repeat(repeat('y', 200) || '/', 6) || 'z", "command": "append", "content": "x"}'),
  ('{"path": 7, "command": "read"}'),
  ('{"path": null, "command": "read"}'),
  ('{"command": "read"}'),
  ('{"path": "/a"}'),
  ('{"path": "/a", "command": 1}'),
  ('{"path": "/a", "command": "move"}'),
  ('{"path": "/a", "command": "READ"}'),
  ('{"path": "/x", "command": "append", "content": 5}'),
  ('{"path": "/x", "command": "append", "content": null}'),
  ('{"path": "/x", "command": "update", "content": "b"}'),
  ('{"path": "/x", "command": "update", "oldContent": "", "content": "b"}'),
  ('{"path": "/x", "command": "update", "oldContent": "a"}'),
  ('{"path": "/x", "command": "update", "oldContent": ["a"], "content": "b"}'),
  ('{"path": "/", "command": "delete"}'),
  ('[]'),
  ('"read /a"'),
  ('null'),
  ('{"path": "/a", "command": "read", "deep": ' || repeat('[', 101) || repeat(']', 101) || '}')
) AS bad (request), LATERAL (SELECT memory_tool('t', bad.request::jsonb)::jsonb #> '{error}' AS r) e;
SELECT memory_tool('t', NULL);
SELECT memory_tool(NULL, '{"path": "/a", "command": "read"}');
SELECT (SELECT count(*) FROM memory_files) = (SELECT count(*) FROM before)
   AND NOT EXISTS (SELECT * FROM memory_files EXCEPT SELECT * FROM before) AS nothing_changed;

-- Search: the files at or under a path that have any of the words, best
-- first, with the words marked; phrases and -word as in recall. Nothing
-- at the path is ENOENT; a query of only common words finds nothing.
SELECT memory_tool('s', jsonb_build_object('path', p, 'command', 'append', 'content', c)) ->> 'ok'
FROM (VALUES ('/notes/deploy', 'Deploys run on Fridays after the release review.'),
             ('/notes/db', 'The database migrations are deployed before the release.'),
             ('/notes/team', 'Ana leads the release review meeting.'),
             ('/other/deploy', 'Deploying on a Friday is forbidden here.')) f (p, c);
SELECT memory_tool('s', '{"path": "/notes", "command": "search", "query": "deploying"}');
SELECT jsonb_path_query_array(memory_tool('s', '{"path": "/", "command": "search", "query": "friday deploy"}')::jsonb,
                              '$.result.matches[*].path') AS best_first;
SELECT jsonb_path_query_array(memory_tool('s', '{"path": "/notes", "command": "search", "query": "release -meeting"}')::jsonb,
                              '$.result.matches[*].path') AS without_meeting;
SELECT jsonb_path_query_array(memory_tool('s', '{"path": "/notes", "command": "search", "query": "\"release review\""}')::jsonb,
                              '$.result.matches[*].path') AS phrase;
SELECT memory_tool('s', '{"path": "/notes/team", "command": "search", "query": "deploy"}');
SELECT memory_tool('s', '{"path": "/notes", "command": "search", "query": "the of and"}');
-- Nor do they with a word to leave out: no file is found for lacking it.
SELECT memory_tool('s', '{"path": "/notes", "command": "search", "query": "the -meeting"}');
SELECT memory_tool('s', '{"path": "/nowhere", "command": "search", "query": "deploy"}');
SELECT memory_tool('s', '{"path": "/notes", "command": "search"}');
SELECT memory_tool('other scope', '{"path": "/", "command": "search", "query": "deploy"}');
SELECT memory_tool('s', jsonb_build_object('path', '/', 'command', 'search', 'query', repeat('w ', 6000))) -> 'error';

-- Rendering for a prompt: the tree, the full text,
-- and a cut that says what it left out.
SELECT count(memory_tool('r', jsonb_build_object('path', p, 'command', 'append', 'content', c)))
FROM (VALUES ('/notes/today', E'Booked the flight.\nHotel next.'), ('/notes/work/plan', 'Ship the memory tool.'),
             ('/readme', 'What this memory holds.'), ('/a-b', 'sorted by name')) AS f (p, c);
SELECT memory_render('r');
SELECT memory_render('r', 'full');
SELECT memory_render('r', 'full', 80);
SELECT length(memory_render('r', 'full', 80)) <= 80 AS within_the_limit;
SELECT memory_render('nothing stored') = '' AS empty_scope;
SELECT memory_render('r', 'everything');
\echo :LAST_ERROR_SQLSTATE
SELECT memory_render('r', 'tree', 0);
\echo :LAST_ERROR_SQLSTATE
-- What a rendering holds in memory is bounded: a cut keeps only what fits,
-- and a rendering larger than agent_memory.max_result_bytes is refused.
SET agent_memory.max_result_bytes = 1024;
SELECT memory_tool('r', jsonb_build_object('path', '/big', 'command', 'append', 'content', repeat(E'0123456789\n', 200)))::jsonb ->> 'ok' AS stored;
SELECT length(memory_render('r', 'full', 200)) <= 200 AS cut_within_the_limit;
SELECT memory_render('r', 'full', 100000);
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_result_bytes;
SELECT length(memory_render('r', 'full', 100000)) AS whole_length;
SELECT memory_tool('r', '{"path": "/big", "command": "delete"}')::jsonb ->> 'ok' AS deleted;

-- Preconditions: append, update and delete act only on the file as the
-- agent last read it (its version, or the SHA-256 of its content; version
-- 0: no file). Otherwise ECONFLICT, with what the file is now, and nothing
-- changes.
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "day 1", "expectedVersion": 0}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "day 1", "expectedVersion": 0}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "read"}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "update", "oldContent": "1", "content": "one", "expectedVersion": 1}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "update", "oldContent": "one", "content": "two", "expectedVersion": 1}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "!", "expectedSha256": "0000000000000000000000000000000000000000000000000000000000000000"}');
SELECT memory_tool('pre', jsonb_build_object('path', '/plan', 'command', 'append', 'content', '!',
                                             'expectedSha256', upper(encode(sha256('day one'), 'hex'))));
SELECT memory_tool('pre', '{"path": "/plan", "command": "delete", "expectedVersion": 2}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "read"}')::jsonb #>> '{result,content}' AS unchanged;
SELECT memory_tool('pre', '{"path": "/plan", "command": "delete", "expectedVersion": 3}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "update", "oldContent": "a", "content": "b", "expectedVersion": 3}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "update", "oldContent": "a", "content": "b", "expectedVersion": 0}');
-- A bad precondition is EINVAL, as is one on a command that changes nothing.
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "x", "expectedVersion": -1}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "x", "expectedVersion": "1"}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "x", "expectedVersion": 1.5}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "append", "content": "x", "expectedSha256": "abc"}');
SELECT memory_tool('pre', '{"path": "/plan", "command": "read", "expectedVersion": 1}');
SELECT count(*) AS files_left FROM agent_memory.memory_files WHERE scope = 'pre';
-- A rename by Claude's dialect is a change too.
SELECT memory_tool('pre', '{"path": "/a", "command": "append", "content": "x"}')::jsonb -> 'result' AS created;
SELECT claude_memory('pre', '{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}');
SELECT memory_tool('pre', '{"path": "/b", "command": "read"}')::jsonb #> '{result,version}' AS renamed_version;

-- Tool definitions in both formats; the documented named instances.
SELECT memory_tool_definition();
SELECT memory_tool_definition('memory_write', 'Write memory tool', 'Mem Write', format => 'openai');
SELECT d ->> 'name' AS name, d ->> 'description' AS description, d #>> '{input_schema,title}' AS title
FROM memory_tool_definition('memory_readonly', 'Read-only memory tool', 'Mem Read') d;
SELECT memory_tool_definition('bad name!');
\echo :LAST_ERROR_SQLSTATE
SELECT memory_tool_definition(format => 'mcp');
\echo :LAST_ERROR_SQLSTATE
