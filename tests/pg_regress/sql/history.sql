-- History: earlier versions of key-value entries and memory files, kept
-- while agent_memory.history_retention is above 0. Errors print their
-- SQLSTATE on the next line.

SELECT agent_memory.create_session('u1', session_id => 'h');

-- Off by default: a write keeps nothing.
SHOW agent_memory.history_retention;
SELECT agent_memory.kv_set('h', 'goal', '"draft"') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'goal', '"outline"') ->> 'version' AS version;
SELECT count(*) AS kept FROM agent_memory.kv_versions('h', 'goal');

-- On: each replacement keeps what it replaced.
SET agent_memory.history_retention = 3;
SELECT agent_memory.kv_set('h', 'goal', '"first chapter"') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'goal', '"second chapter"') ->> 'version' AS version;
SELECT version, value FROM agent_memory.kv_versions('h', 'goal');
SELECT agent_memory.kv_version('h', 'goal', 3) - '{createdAt,updatedAt,replacedAt,expiresAt}'::text[] AS kept;
SELECT agent_memory.kv_version('h', 'goal', 9) IS NULL AS not_kept;

-- Only the versions within the retention of the newest stay.
SELECT agent_memory.kv_set('h', 'goal', '"third chapter"') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'goal', '"fourth chapter"') ->> 'version' AS version;
SELECT array_agg(version ORDER BY version) AS kept FROM agent_memory.kv_versions('h', 'goal');

-- A restore writes the version back as the next one, which is kept in
-- turn: a restore can be undone.
SELECT agent_memory.kv_restore('h', 'goal', 4) - 'total_words' AS restored;
SELECT agent_memory.kv_get('h', 'goal');
SELECT agent_memory.kv_restore('h', 'goal', 6) ->> 'version' AS undone;
SELECT agent_memory.kv_get('h', 'goal');
-- With a precondition: only from the version read.
SELECT agent_memory.kv_restore('h', 'goal', 5, expected_version => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_restore('h', 'goal', 5, expected_version => 8) ->> 'version' AS version;
-- A version that is not kept, or no version at all.
SELECT agent_memory.kv_restore('h', 'goal', 1);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_restore('h', 'goal', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_restore('h', 'goal', NULL);
\echo :LAST_ERROR_SQLSTATE
-- A refused restore changed nothing.
SELECT agent_memory.kv_entry('h', 'goal') ->> 'version' AS version;

-- A delete keeps the entry too, and a restore brings it back; numbers go
-- on past the kept versions, so one number names one value.
SELECT agent_memory.kv_delete('h', 'goal');
SELECT agent_memory.kv_get('h', 'goal') IS NULL AS deleted;
SELECT array_agg(version ORDER BY version) AS kept FROM agent_memory.kv_versions('h', 'goal');
SELECT agent_memory.kv_restore('h', 'goal', 9, expected_version => 0) ->> 'version' AS version;
SELECT agent_memory.kv_get('h', 'goal');
SELECT agent_memory.kv_delete('h', 'goal');
SELECT agent_memory.kv_set('h', 'goal', '"a new goal"') ->> 'version' AS written_anew;
-- With history off too, so that a save after keeps every version.
SELECT agent_memory.kv_delete('h', 'goal');
SET agent_memory.history_retention = 0;
SELECT agent_memory.kv_set('h', 'goal', '"set with history off"') ->> 'version' AS written_anew;
SET agent_memory.history_retention = 3;
SELECT agent_memory.kv_set('h', 'goal', '"history on again"') ->> 'version' AS version;
SELECT version, value FROM agent_memory.kv_versions('h', 'goal');

-- kv_clear keeps what it removes too.
SELECT agent_memory.kv_set('h', 'step', '1') ->> 'version' AS version;
SELECT agent_memory.kv_clear('h');
SELECT version, value FROM agent_memory.kv_versions('h', 'step');
-- A session gone idle refuses a delete, and keeps nothing of it.
SELECT agent_memory.create_session('u1', session_id => 'h-idle', idle_timeout => '1 second') AS made;
SELECT agent_memory.kv_set('h-idle', 'step', '1') ->> 'version' AS version;
SELECT pg_sleep(1.2);
SELECT agent_memory.kv_delete('h-idle', 'step') AS deleted;
SELECT agent_memory.kv_clear('h-idle') AS cleared;
SELECT count(*) AS kept FROM agent_memory.kv_entry_versions WHERE session_id = 'h-idle';
SELECT agent_memory.end_session('h-idle') AS ended;

-- Purge: an entry's history, or the session's.
SELECT agent_memory.kv_purge_history('h', 'step');
SELECT agent_memory.kv_purge_history('h');
SELECT count(*) AS kept FROM agent_memory.kv_versions('h', 'goal');

-- Expired versions are not shown, and the cleanup removes them.
SELECT agent_memory.kv_set('h', 'brief', '"short-lived"', ttl => interval '1 second') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'brief', '"kept"') ->> 'version' AS version;
SELECT count(*) AS kept FROM agent_memory.kv_versions('h', 'brief');
SELECT pg_sleep(1.2);
SELECT count(*) AS kept FROM agent_memory.kv_versions('h', 'brief');
SELECT (agent_memory.cleanup_expired() ->> 'entries')::int >= 1 AS removed;
SELECT count(*) AS rows_left FROM agent_memory.kv_entry_versions WHERE session_id = 'h' AND key = 'brief';

-- An entry evicted by the word budget is kept as a deleted one is, and
-- the key written again goes past its version: a number names one value.
SET agent_memory.kv_word_budget = 3;
SELECT agent_memory.kv_set('h', 'old', '"one two"') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'new', '"three four"') -> 'evicted' AS evicted;
SELECT version, value FROM agent_memory.kv_versions('h', 'old');
SELECT agent_memory.kv_set('h', 'old', '"five"') ->> 'version' AS written_again_as;
RESET agent_memory.kv_word_budget;

-- The history goes with its session.
SELECT agent_memory.kv_set('h', 'goal', '"last but one"') ->> 'version' AS version;
SELECT agent_memory.kv_set('h', 'goal', '"last"') ->> 'version' AS version;
SELECT count(*) > 0 AS kept FROM agent_memory.kv_entry_versions WHERE session_id = 'h';
SELECT agent_memory.end_session('h');
SELECT count(*) AS rows_left FROM agent_memory.kv_entry_versions WHERE session_id = 'h';

-- Memory files: every change and delete keeps what it replaced.
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/notes.md", "content": "one"}');
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/notes.md", "content": " two"}');
SELECT agent_memory.memory_tool('s', '{"command": "update", "path": "/notes.md", "oldContent": "two", "content": "2"}');
SELECT version, content FROM agent_memory.memory_versions('s', '/notes.md');
SELECT agent_memory.memory_version('s', '/notes.md', 1) - '{createdAt,updatedAt,replacedAt}'::text[] AS kept;
-- A refused request keeps nothing.
SET agent_memory.max_file_bytes = 10;
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/notes.md", "content": "far too long"}');
RESET agent_memory.max_file_bytes;
SELECT count(*) AS kept FROM agent_memory.memory_versions('s', '/notes.md');
-- Nor does an append to a directory keep what is under it.
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/dir/a.md", "content": "under"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/dir", "content": "!"}') -> 'error' ->> 'code' AS code;
SELECT count(*) AS kept_under FROM agent_memory.memory_versions('s', '/dir/a.md');
SELECT agent_memory.memory_tool('s', '{"command": "delete", "path": "/dir"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_purge_history('s', '/dir/a.md') AS purged;
-- Claude's dialect too (its /memories/notes.md is the file /notes.md).
SELECT agent_memory.claude_memory('s', '{"command": "str_replace", "path": "/memories/notes.md", "old_str": "one", "new_str": "ONE"}');
SELECT version, content FROM agent_memory.memory_versions('s', '/notes.md');

-- Restore: the next version; a deleted file comes back where it was.
SELECT agent_memory.memory_restore('s', '/notes.md', 1);
SELECT agent_memory.memory_tool('s', '{"command": "read", "path": "/notes.md"}') -> 'result' ->> 'content' AS content;
SELECT agent_memory.memory_tool('s', '{"command": "delete", "path": "/notes.md"}');
SELECT agent_memory.memory_restore('s', '/notes.md', 3, expected_version => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_restore('s', '/notes.md', 3, expected_version => 0);
SELECT agent_memory.memory_tool('s', '{"command": "read", "path": "/notes.md"}') -> 'result' AS read;
-- With history off, a file created where versions are kept goes past
-- them too, so that a save after keeps every version.
SELECT agent_memory.memory_tool('s', '{"command": "delete", "path": "/notes.md"}') ->> 'ok' AS ok;
SET agent_memory.history_retention = 0;
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/notes.md", "content": "anew"}') -> 'result' ->> 'version' AS version;
SET agent_memory.history_retention = 3;
SELECT agent_memory.memory_tool('s', '{"command": "append", "path": "/notes.md", "content": "!"}') -> 'result' ->> 'version' AS version;
SELECT version, content FROM agent_memory.memory_versions('s', '/notes.md');
SELECT agent_memory.memory_restore('s', '/notes.md', 42);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_restore('s', NULL, 1);
\echo :LAST_ERROR_SQLSTATE

-- A rename moves a file's versions with it.
SELECT agent_memory.claude_memory('s', '{"command": "create", "path": "/memories/a/todo.md", "file_text": "x"}');
SELECT agent_memory.claude_memory('s', '{"command": "str_replace", "path": "/memories/a/todo.md", "old_str": "x", "new_str": "y"}');
SELECT agent_memory.claude_memory('s', '{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/b"}');
SELECT path, version FROM agent_memory.memory_file_versions WHERE scope = 's' AND path LIKE '/_/todo.md' ORDER BY path, version;
-- A rename that would take a kept version's path past 1,024 bytes is
-- refused, as one that would take a file's there.
CREATE TEMP TABLE long_path AS
SELECT '/memories/d/' || repeat('x', 240) || '/' || repeat('x', 240) || '/' || repeat('x', 240)
       || '/' || repeat('x', 240) AS path;
SELECT left(agent_memory.claude_memory('long', jsonb_build_object('command', 'create', 'path', path, 'file_text', 'old')), 22)
FROM long_path;
SELECT left(agent_memory.claude_memory('long', jsonb_build_object('command', 'delete', 'path', path)), 22)
FROM long_path;
SELECT agent_memory.claude_memory('long', '{"command": "create", "path": "/memories/d/keep", "file_text": "k"}');
SELECT regexp_replace(agent_memory.claude_memory('long', jsonb_build_object('command', 'rename',
         'old_path', '/memories/d', 'new_path', '/memories/' || repeat('y', 100))), 'y{100}', 'y…');
-- And past 32 segments.
CREATE TEMP TABLE deep_path AS
SELECT '/memories/a/' || string_agg('d' || i, '/') || '/f.md' AS path FROM generate_series(1, 28) i;
SELECT left(agent_memory.claude_memory('long', jsonb_build_object('command', 'create', 'path', path, 'file_text', 'v1')), 22)
FROM deep_path;
SELECT left(agent_memory.claude_memory('long', jsonb_build_object('command', 'delete', 'path', path)), 22)
FROM deep_path;
SELECT agent_memory.claude_memory('long', '{"command": "create", "path": "/memories/a/keep.md", "file_text": "k"}');
SELECT agent_memory.claude_memory('long', '{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/x/y/z/a"}');
SELECT agent_memory.claude_memory('long', '{"command": "rename", "old_path": "/memories/a", "new_path": "/memories/x/a"}');
SELECT agent_memory.claude_memory('long', '{"command": "delete", "path": "/memories/x"}');
DROP TABLE deep_path;
SELECT max(octet_length(path)) AS longest FROM agent_memory.memory_file_versions WHERE scope = 'long';
SELECT agent_memory.memory_purge_history('long');
SELECT agent_memory.claude_memory('long', '{"command": "delete", "path": "/memories/d"}');
DROP TABLE long_path;

-- An import where a deleted file's versions are kept goes in only if they
-- agree with the line's: older than its file, the same content under the
-- same number. Else one number would name two contents.
SELECT agent_memory.memory_tool('hx', '{"command": "append", "path": "/x", "content": "OLD1"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('hx', '{"command": "update", "path": "/x", "oldContent": "OLD1", "content": "OLD2"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('hx', '{"command": "update", "path": "/x", "oldContent": "OLD2", "content": "OLD3"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('hx', '{"command": "delete", "path": "/x"}') ->> 'ok' AS ok;
-- So in a run of files too.
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM agent_memory.import_lines(ARRAY[
    '{"kind": "file", "scope": "hx", "path": "/w", "content": "W", "version": 1,
      "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "versions": []}',
    '{"kind": "file", "scope": "hx", "path": "/x", "content": "NEW1", "version": 1,
      "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "versions": []}']) AS r;
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "file", "scope": "hx", "path": "/x", "content": "NEW2", "version": 2,
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    "versions": [{"version": 1, "content": "NEW1", "created_at": "2026-01-01T00:00:00Z",
                  "updated_at": "2026-01-01T00:00:00Z", "replaced_at": "2026-01-01T00:00:00Z"}]}') AS r;
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "file", "scope": "hx", "path": "/x", "content": "NEW4", "version": 4,
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    "versions": [{"version": 1, "content": "OLD1", "created_at": "2026-01-01T00:00:00Z",
                  "updated_at": "2026-01-01T00:00:00Z", "replaced_at": "2026-01-01T00:00:00Z"}]}') AS r;
SELECT version, content FROM agent_memory.memory_versions('hx', '/x');
SELECT agent_memory.memory_tool('hx', '{"command": "read", "path": "/x"}') -> 'result' ->> 'version' AS version;
-- Deleted again, its last version kept, the same line goes back.
SELECT agent_memory.memory_tool('hx', '{"command": "delete", "path": "/x"}') ->> 'ok' AS ok;
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "file", "scope": "hx", "path": "/x", "content": "NEW4", "version": 4,
    "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
    "versions": [{"version": 1, "content": "OLD1", "created_at": "2026-01-01T00:00:00Z",
                  "updated_at": "2026-01-01T00:00:00Z", "replaced_at": "2026-01-01T00:00:00Z"}]}') AS r;
SELECT agent_memory.memory_tool('hx', '{"command": "read", "path": "/x"}') -> 'result' ->> 'content' AS content;
-- Its kept versions stay older than it, so its export goes in again.
SELECT array_agg(version ORDER BY version) AS kept FROM agent_memory.memory_versions('hx', '/x');
SELECT agent_memory.import(line::text) ->> 'status' AS status
FROM agent_memory.export(scope => 'hx') AS line WHERE line ->> 'path' = '/x';
SELECT agent_memory.memory_purge_history('hx');
SELECT agent_memory.memory_tool('hx', '{"command": "delete", "path": "/x"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('hx', '{"command": "delete", "path": "/w"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_purge_history('hx');

-- Purge a file's versions, then the scope's.
SELECT agent_memory.memory_purge_history('s', '/b');
SELECT agent_memory.memory_purge_history('s');
SELECT count(*) AS rows_left FROM agent_memory.memory_file_versions WHERE scope = 's';
RESET agent_memory.history_retention;
-- The scope's files go, and with them the scope.
SELECT agent_memory.memory_tool('s', '{"command": "delete", "path": "/notes.md"}') -> 'ok' AS ok;
SELECT agent_memory.memory_tool('s', '{"command": "delete", "path": "/b"}') -> 'ok' AS ok;
SELECT count(*) AS scopes FROM agent_memory.memory_scopes WHERE scope = 's';
