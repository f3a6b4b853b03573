-- Export and import: a user's memory as JSON lines, taken back whole, once,
-- and under other keys; lines that are refused, each alone. Errors print
-- their SQLSTATE on the next line.

SELECT set_config('agent_memory.history_retention', '3', false) IS NOT NULL AS history_set;
SELECT agent_memory.create_session('mover', session_id => 'mover-1', metadata => '{"tz": "Europe/Lisbon"}');
SELECT agent_memory.create_session('mover', session_id => 'mover-2', idle_timeout => '3 hours');
SELECT agent_memory.kv_set('mover-1', 'goal', '"Lisbon ✓"') ->> 'version' AS version;
SELECT agent_memory.kv_set('mover-1', 'goal', '{"city": "Porto", "budget": 1.50, "tags": ["ü", "日本"]}') ->> 'version' AS version;
SELECT agent_memory.kv_set('mover-2', 'plan', '["train", "hotel"]') ->> 'version' AS version;
-- An entry may hold JSON null, and so may a version it keeps.
SELECT agent_memory.kv_set('mover-2', 'nothing', 'null') ->> 'version' AS version;
SELECT agent_memory.kv_set('mover-2', 'maybe', 'null') ->> 'version' AS version;
SELECT agent_memory.kv_set('mover-2', 'maybe', '1') ->> 'version' AS version;
SELECT agent_memory.append_message('mover-1', 'user', 'Book me a hotel 🏨');
SELECT agent_memory.append_message('mover-1', 'assistant', '', metadata => '{"tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "book", "arguments": "{}"}}]}');
SELECT agent_memory.append_message('mover-1', 'tool', 'booked', metadata => '{"tool_call_id": "call_1"}');
SELECT agent_memory.append_message('mover-1', 'user', 'On the trip node', node_id => 'trip', keep => 5);
SELECT agent_memory.wm_set('mover-1', 'working_history', '"booked the hotel"');
SELECT agent_memory.wm_set('mover-1', 'node_context', '{"stage": "planning"}', node_id => 'trip');
SELECT agent_memory.graph_create('mover', 'Trip', 'the Porto trip', 'see [[hotel]]', ARRAY['__root__'], node_id => 'trip');
SELECT agent_memory.graph_write('mover', 'trip', NULL, NULL, 'see [[hotel]] and [[train]]', change_description => 'add the train');
SELECT agent_memory.memory_tool('mover', '{"command": "append", "path": "/trips/porto.md", "content": "hotel: ✓"}') ->> 'ok' AS ok;
SELECT agent_memory.memory_tool('mover', '{"command": "append", "path": "/trips/porto.md", "content": "\ntrain: 9:05"}') ->> 'ok' AS ok;
SELECT agent_memory.claude_memory('mover', '{"command": "create", "path": "/memories/old/x.md", "file_text": "x"}');
SELECT agent_memory.claude_memory('mover', '{"command": "delete", "path": "/memories/old/x.md"}');

-- One line per item, sessions first, a session's messages by seq.
CREATE TEMP TABLE exported AS
SELECT row_number() OVER () AS n, line
FROM agent_memory.export(user_id => 'mover', owner => 'mover', scope => 'mover') AS line;
SELECT n, line ->> 'kind' AS kind,
       coalesce(line ->> 'session_id', line ->> 'owner', line ->> 'scope') AS key,
       coalesce(line ->> 'key', line ->> 'part', line ->> 'seq', line ->> 'node_id', line ->> 'path') AS item,
       jsonb_array_length(line -> 'versions') AS versions
FROM exported ORDER BY n;
SELECT line - 'created_at' - 'updated_at' - 'expires_at' - 'versions' AS line
FROM exported WHERE line ->> 'kind' IN ('kv', 'message') ORDER BY n LIMIT 2;

-- The round trip: everything erased, the lines imported, the export again
-- the same (activity is renewed by the writes).
-- A directory is not kept under a file; a file past a limit is refused
-- with the limit's code, as the write would.
SELECT agent_memory.memory_tool('limits', '{"command": "append", "path": "/a", "content": "file a"}') ->> 'ok' AS ok;
SELECT r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM agent_memory.import('{"kind": "directory", "scope": "limits", "path": "/a/b"}') AS r;
SELECT count(*) AS kept FROM agent_memory.memory_directories WHERE scope = 'limits';
SET agent_memory.max_file_bytes = 5;
SELECT r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "file", "scope": "limits", "path": "/big", "content": "0123456789", "version": 1,
                           "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "versions": []}') AS r;
RESET agent_memory.max_file_bytes;
SET agent_memory.max_files_per_scope = 1;
SELECT r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "file", "scope": "limits", "path": "/two", "content": "2", "version": 1,
                           "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "versions": []}') AS r;
RESET agent_memory.max_files_per_scope;
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['limits']) ->> 'files' AS files;

-- A session's activity in the future is taken as now: it expires as any
-- other, and reads of it work.
SELECT r ->> 'status' AS status
FROM agent_memory.import('{"kind": "session", "user_id": "u", "metadata": {}, "session_id": "ahead",
                           "created_at": "2099-01-01T00:00:00Z", "last_activity_at": "294270-01-01T00:00:00Z",
                           "project_id": null, "active_node_id": null, "idle_timeout": "100 years"}') AS r;
SELECT last_activity_at <= now() AS not_ahead, created_at <= last_activity_at AS made_before
FROM agent_memory.sessions WHERE session_id = 'ahead';
SELECT agent_memory.kv_set('ahead', 'k', '1') ->> 'stored' AS stored, agent_memory.kv_get('ahead', 'k');
SELECT agent_memory.end_session('ahead');
-- A session's idle timeout over 100 years, or with a negative part, is
-- refused, as create_session refuses it.
SELECT r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM agent_memory.import('{"kind": "session", "user_id": "u", "metadata": {}, "session_id": "short",
                           "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z",
                           "project_id": null, "active_node_id": null, "idle_timeout": "-1 mon 30 days 1 hour"}') AS r;
SELECT r -> 'error' ->> 'code' AS code
FROM agent_memory.import('{"kind": "session", "user_id": "u", "metadata": {}, "session_id": "forever",
                           "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z",
                           "project_id": null, "active_node_id": null, "idle_timeout": "300000 years"}') AS r;
-- A session idle past its timeout since the export is not written, and
-- its items are refused as those of a missing session.
SELECT r ->> 'status' AS status
FROM agent_memory.import('{"kind": "session", "user_id": "u", "metadata": {}, "session_id": "idle",
                           "created_at": "2026-01-01T00:00:00Z", "last_activity_at": "2026-01-01T00:00:00Z",
                           "project_id": null, "active_node_id": null, "idle_timeout": "1 hour"}') AS r;
SELECT count(*) AS written FROM agent_memory.sessions WHERE session_id = 'idle';
SELECT agent_memory.import('{"kind": "kv", "session_id": "idle", "key": "n", "value": 1, "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}') -> 'error' ->> 'code' AS code;

SELECT agent_memory.erase_user('mover', owners => ARRAY['mover'], scopes => ARRAY['mover']) ->> 'sessions' AS sessions;
SELECT n, agent_memory.import(line::text) FROM exported ORDER BY n;
CREATE TEMP TABLE reexported AS
SELECT line FROM agent_memory.export(user_id => 'mover', owner => 'mover', scope => 'mover') AS line;
SELECT count(*) AS differing
FROM (SELECT line - 'last_activity_at' AS line FROM exported) a
FULL JOIN (SELECT line - 'last_activity_at' AS line FROM reexported) b ON a.line = b.line
WHERE a.line IS NULL OR b.line IS NULL;
SELECT agent_memory.kv_get('mover-1', 'goal');
SELECT role, content FROM agent_memory.messages('mover-1');
SELECT agent_memory.kv_versions('mover-1', 'goal') IS NOT NULL AS has_versions;

-- Twice: nothing new.
SELECT agent_memory.import(line::text) ->> 'status' AS status, count(*)
FROM exported GROUP BY 1 ORDER BY 1;
SELECT count(*) AS messages FROM agent_memory.messages('mover-1');

-- Under other keys: one session's lines into a new session of another
-- user, the graph under another owner, the files under another scope.
SELECT agent_memory.import(line::text, session_id => 'copy-1', user_id => 'heir', owner => 'heir', scope => 'heir') ->> 'status' AS status,
       count(*)
FROM exported
WHERE line ->> 'session_id' = 'mover-1' OR line ->> 'kind' IN ('node', 'file', 'directory')
GROUP BY 1;
SELECT session_id FROM agent_memory.user_sessions('heir');
SELECT agent_memory.kv_get('copy-1', 'goal') ->> 'city' AS city;
SELECT agent_memory.graph_read('heir', 'trip') ->> 'title' AS title;
SELECT agent_memory.memory_tool('heir', '{"command": "read", "path": "/trips/porto.md"}') -> 'result' ->> 'content' AS content;

-- Into a session of another user: the session line is refused, and
-- import_lines refuses that session's other lines with it.
SELECT agent_memory.create_session('bob', session_id => 'bobs');
SELECT r ->> 'kind' AS kind, r ->> 'status' AS status, r -> 'error' ->> 'code' AS code, count(*)
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM exported
                                WHERE line ->> 'session_id' = 'mover-1'), session_id => 'bobs') AS r
GROUP BY 1, 2, 3 ORDER BY 1;
SELECT agent_memory.kv_get_all('bobs') AS bobs_memory, (SELECT count(*) FROM agent_memory.messages('bobs')) AS bobs_messages;
SELECT agent_memory.end_session('bobs');
-- A session there with other content than the line's is refused too;
-- with the line's content (its times aside), it is unchanged.
SELECT r ->> 'status' AS status, r -> 'error' ->> 'message' AS message
FROM exported, agent_memory.import(jsonb_set(line, '{metadata}', '{"plan": "other"}')::text) AS r
WHERE line ->> 'kind' = 'session' AND line ->> 'session_id' = 'mover-1';
SELECT r ->> 'status' AS status
FROM exported, agent_memory.import(jsonb_set(line, '{created_at}', '"2020-01-01T00:00:00Z"')::text) AS r
WHERE line ->> 'kind' = 'session' AND line ->> 'session_id' = 'mover-1';
-- So is a message there with other metadata; its time aside, it is
-- unchanged.
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM exported, agent_memory.import(jsonb_set(line, '{metadata}', '{"lang": "en"}')::text) AS r
WHERE line ->> 'kind' = 'message' AND line ->> 'session_id' = 'mover-1' AND line ->> 'seq' = '1';
SELECT r ->> 'status' AS status
FROM exported, agent_memory.import(jsonb_set(line, '{created_at}', '"2020-01-01T00:00:00Z"')::text) AS r
WHERE line ->> 'kind' = 'message' AND line ->> 'session_id' = 'mover-1' AND line ->> 'seq' = '1';
-- An entry goes where a deleted entry's versions are kept only when they
-- agree with it (one number names one content), and the kept copy of its
-- own version goes: the entry holds it.
SET agent_memory.history_retention = 5;
SELECT agent_memory.create_session('u5', session_id => 'kept-kv');
SELECT agent_memory.kv_set('kept-kv', 'plan', '"A1"') ->> 'version' AS version;
SELECT agent_memory.kv_set('kept-kv', 'plan', '"A2"') ->> 'version' AS version;
CREATE TEMP TABLE kept_lines AS
SELECT line FROM agent_memory.export(session_id => 'kept-kv') AS line WHERE line ->> 'kind' = 'kv';
SELECT agent_memory.kv_delete('kept-kv', 'plan');
SELECT r ->> 'status' AS status FROM kept_lines, agent_memory.import(line::text) AS r;
SELECT version, value FROM agent_memory.kv_versions('kept-kv', 'plan');
SELECT agent_memory.kv_delete('kept-kv', 'plan');
SELECT agent_memory.kv_set('kept-kv', 'plan', '"B3"') ->> 'version' AS version;
SELECT agent_memory.kv_delete('kept-kv', 'plan');
SELECT r ->> 'status' AS status, r -> 'error' ->> 'message' AS message
FROM kept_lines, agent_memory.import(line::text) AS r;
SELECT version, value FROM agent_memory.kv_versions('kept-kv', 'plan');
-- The versions of the deleted entry go in a line of their own, and come
-- back with it: kv_restore can bring one back in the copy too.
SELECT line ->> 'kind' AS kind, jsonb_array_length(line -> 'versions') AS versions
FROM agent_memory.export(session_id => 'kept-kv') AS line;
SELECT r ->> 'kind' AS kind, r ->> 'status' AS status
FROM agent_memory.import_lines((SELECT array_agg(line::text) FROM agent_memory.export(session_id => 'kept-kv') AS line),
                               session_id => 'kept-copy') AS r;
SELECT version, value FROM agent_memory.kv_versions('kept-copy', 'plan');
SELECT agent_memory.kv_restore('kept-copy', 'plan', 2) ->> 'version' AS restored_as;
SELECT agent_memory.kv_get('kept-copy', 'plan');
-- A history line's versions pass the checks a kv line's kept versions do.
SELECT r -> 'error' ->> 'code' AS code
FROM agent_memory.import(jsonb_build_object('kind', 'kv_history', 'session_id', 'kept-copy', 'key', 'card',
       'versions', jsonb_build_array(jsonb_build_object('version', 1, 'value', 'card 4111 1111 1111 1111',
         'created_at', '2026-01-01', 'updated_at', '2026-01-01', 'expires_at', '2100-01-01',
         'replaced_at', '2026-01-02')))::text) AS r;
-- So does its expiry: no later than any write keeps a value.
SELECT r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM agent_memory.import(jsonb_build_object('kind', 'kv_history', 'session_id', 'kept-copy', 'key', 'far',
       'versions', jsonb_build_array(jsonb_build_object('version', 1, 'value', 'far off',
         'created_at', '2026-01-01', 'updated_at', '2026-01-01', 'expires_at', '9999-01-01',
         'replaced_at', '2026-01-02')))::text) AS r;
SELECT count(*) AS kept FROM agent_memory.kv_entry_versions WHERE session_id = 'kept-copy' AND key = 'far';
SELECT agent_memory.end_session('kept-copy');
SELECT agent_memory.end_session('kept-kv');
-- Import keeps no more history than writes do: a line that would leave an
-- entry or a file with versions beyond agent_memory.history_retention of
-- its newest kept one is refused (22023), nothing of it written; with the
-- retention raised for the import, it goes in. Versions 1 to 3 kept:
SELECT agent_memory.create_session('u5', session_id => 'bounded') IS NOT NULL AS created;
CREATE TEMP TABLE deep AS
WITH kv_kept AS (
  SELECT jsonb_agg(jsonb_build_object('version', i, 'value', 'plan ' || i, 'created_at', '2026-01-01',
           'updated_at', '2026-01-01', 'expires_at', '2100-01-01', 'replaced_at', '2026-01-02') ORDER BY i) AS v
  FROM generate_series(1, 3) i),
file_kept AS (
  SELECT jsonb_agg(jsonb_build_object('version', i, 'content', 'notes ' || i, 'created_at', '2026-01-01',
           'updated_at', '2026-01-01', 'replaced_at', '2026-01-02') ORDER BY i) AS v
  FROM generate_series(1, 3) i)
SELECT l.n, l.line FROM kv_kept k, file_kept f, LATERAL (VALUES
  (1, jsonb_build_object('kind', 'kv', 'session_id', 'bounded', 'key', 'plan', 'value', 'plan 4', 'version', 4,
        'created_at', '2026-01-01', 'updated_at', '2026-01-02', 'expires_at', '2100-01-01', 'versions', k.v)),
  (2, jsonb_build_object('kind', 'kv_history', 'session_id', 'bounded', 'key', 'gone', 'versions', k.v)),
  (3, jsonb_build_object('kind', 'file', 'scope', 'bounded', 'path', '/plan.md', 'content', 'notes 4',
        'version', 4, 'created_at', '2026-01-01', 'updated_at', '2026-01-02', 'versions', f.v)),
  (4, jsonb_build_object('kind', 'file_history', 'scope', 'bounded', 'path', '/gone.md', 'versions', f.v))
) AS l(n, line);
SET agent_memory.history_retention = 2;
SELECT r.n, r.result ->> 'kind' AS kind, r.result ->> 'status' AS status,
       r.result -> 'error' ->> 'code' AS code, r.result -> 'error' ->> 'message' AS message
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM deep)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT n, r ->> 'status' AS status, r -> 'error' ->> 'code' AS code
FROM deep, agent_memory.import(line::text) AS r ORDER BY n;
SELECT line ->> 'kind' AS kind FROM agent_memory.export(session_id => 'bounded', scope => 'bounded') AS line;
SET agent_memory.history_retention = 3;
SELECT r.n, r.result ->> 'kind' AS kind, r.result ->> 'status' AS status
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM deep)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT line ->> 'kind' AS kind, line ->> 'key' AS key, line ->> 'path' AS path,
       (SELECT array_agg((v ->> 'version')::int ORDER BY (v ->> 'version')::int)
        FROM jsonb_array_elements(line -> 'versions') v) AS versions
FROM agent_memory.export(session_id => 'bounded', scope => 'bounded') AS line
ORDER BY 1, 2, 3;
-- With the versions already kept: an entry at "gone" that keeps version
-- 4 as well would leave it with 1 to 4.
SELECT r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM deep, agent_memory.import(jsonb_set(jsonb_set(jsonb_set(line, '{key}', '"gone"'), '{version}', '5'),
                                         '{versions}', jsonb_build_array(jsonb_set(line #> '{versions,2}', '{version}', '4')))::text) AS r
WHERE n = 1;
SELECT version FROM agent_memory.kv_versions('bounded', 'gone');
SELECT agent_memory.kv_has('bounded', 'gone') AS has_gone;
-- With history off (retention 0), a line with any kept version is refused.
SET agent_memory.history_retention = 0;
SELECT r ->> 'status' AS status, r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM deep, agent_memory.import(jsonb_set(jsonb_set(line, '{key}', '"other"'), '{versions}',
                                         jsonb_build_array(line #> '{versions,0}'))::text) AS r
WHERE n = 2;
SELECT count(*) AS other_versions FROM agent_memory.kv_versions('bounded', 'other');
SELECT agent_memory.end_session('bounded');
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['bounded']) ->> 'files' AS files;
-- Back to the retention the rest of this file runs with.
SET agent_memory.history_retention = 3;
-- An infinite time is refused: no write stores one.
SELECT r -> 'error' ->> 'code' AS code, r -> 'error' ->> 'message' AS message
FROM exported, agent_memory.import(jsonb_set(line, '{created_at}', '"-infinity UTC"')::text, session_id => 'endless') AS r
WHERE line ->> 'kind' = 'session' AND line ->> 'session_id' = 'mover-1';

-- A session whose newest message was popped numbers its next one past
-- it; its export says so in a message_seq line, and a copy numbers alike.
SELECT agent_memory.create_session('counter', session_id => 'numbered');
SELECT agent_memory.append_message('numbered', 'user', 'one') AS one,
       agent_memory.append_message('numbered', 'assistant', 'two') AS two;
SELECT agent_memory.pop_message('numbered') ->> 'content' AS popped;
SELECT line - 'created_at' - 'last_activity_at' AS line
FROM agent_memory.export(session_id => 'numbered') AS line;
SELECT agent_memory.import(line::text, session_id => 'numbered-copy') ->> 'status' AS status
FROM agent_memory.export(session_id => 'numbered') AS line;
SELECT agent_memory.append_message('numbered', 'user', 'three') AS original,
       agent_memory.append_message('numbered-copy', 'user', 'three') AS copy;
-- A session that numbers past the line is unchanged; one not there, refused.
SELECT agent_memory.import('{"kind": "message_seq", "session_id": "numbered-copy", "last_seq": 2}') ->> 'status' AS status;
SELECT agent_memory.import('{"kind": "message_seq", "session_id": "nowhere", "last_seq": 2}') -> 'error' ->> 'code' AS code;
SELECT agent_memory.erase_user('counter') ->> 'sessions' AS sessions;

-- Lines refused, each alone, with what was wrong: none, truncated, not an
-- object, of no kind, with a field of another kind, of the wrong type, an
-- empty key, no session, a bad date; an entry that has expired since,
-- one that would outlive what any write keeps;
-- sensitive data, over the budget, another value at the key; a message
-- at a seq taken, one before the newest, a tool result without its call,
-- an unknown role; an unknown part, a path not normalised, a session of
-- another user, a node with no title.
SELECT agent_memory.import(NULL);
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "goal", "val');
SELECT agent_memory.import('[1, 2]');
SELECT agent_memory.import('{"kind": "memory", "path": "/x"}');
SELECT agent_memory.import('{"kind": "directory", "scope": "mover", "path": "/x", "owner": "mover"}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "n", "value": 1, "version": "one", "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "", "key": "n", "value": 1, "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "nobody", "key": "n", "value": 1, "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "n", "value": 1, "version": 1, "created_at": "yesterday-ish", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "gone", "value": 1, "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2026-01-02", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "n", "value": 1, "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "9999-01-01", "versions": []}');
SELECT agent_memory.import('{"kind": "kv", "session_id": "mover-1", "key": "card", "value": "4111 1111 1111 1111", "version": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2100-01-01", "versions": []}');
SELECT agent_memory.import(jsonb_build_object('kind', 'kv', 'session_id', 'mover-1', 'key', 'long', 'value', repeat('word ', 700), 'version', 1, 'created_at', '2026-01-01', 'updated_at', '2026-01-01', 'expires_at', '2100-01-01', 'versions', '[]'::jsonb)::text);
SELECT agent_memory.import(jsonb_set(line, '{value}', '"Faro"')::text) FROM exported WHERE line ->> 'key' = 'goal';
SELECT agent_memory.import(jsonb_set(line, '{seq}', '1')::text) FROM exported WHERE line ->> 'seq' = '2';
SELECT agent_memory.import(jsonb_set(jsonb_set(line, '{seq}', '5'), '{session_id}', '"mover-2"')::text) FROM exported WHERE line ->> 'seq' = '1';
SELECT agent_memory.import(line::text, session_id => 'mover-2') FROM exported WHERE line ->> 'seq' = '4';
SELECT agent_memory.import(jsonb_set(line, '{seq}', '9')::text, session_id => 'mover-2') FROM exported WHERE line ->> 'seq' = '3';
SELECT agent_memory.import(jsonb_set(line, '{role}', '"robot"')::text) FROM exported WHERE line ->> 'seq' = '4';
SELECT agent_memory.import(jsonb_set(line, '{part}', '"mood"')::text) FROM exported WHERE line ->> 'part' = 'working_history';
SELECT agent_memory.import(jsonb_set(line, '{path}', '"/trips/../porto.md"')::text) FROM exported WHERE line ->> 'kind' = 'file';
SELECT agent_memory.import(jsonb_set(line, '{user_id}', '"thief"')::text) FROM exported WHERE line ->> 'session_id' = 'mover-2' AND line ->> 'kind' = 'session';
SELECT agent_memory.import(jsonb_set(line, '{title}', '""')::text, owner => 'other') FROM exported WHERE line ->> 'kind' = 'node';
-- A node's times, and its kept versions', are those graph files hold:
-- years 1 to 9999 in UTC.
SELECT agent_memory.import(jsonb_set(line, '{created_at}', '"10000-01-01T00:00:00Z"')::text, owner => 'other') FROM exported WHERE line ->> 'kind' = 'node';
SELECT agent_memory.import(jsonb_set(line, '{updated_at}', '"0001-01-01 00:00:00+01"')::text, owner => 'other') FROM exported WHERE line ->> 'kind' = 'node';
SELECT agent_memory.import(jsonb_set(jsonb_set(line, '{version}', '2'), '{versions}', jsonb_build_array(jsonb_build_object(
         'version', 1, 'title', 'Trip', 'description', '', 'body', '', 'links', '[]'::jsonb,
         'created_at', '2026-01-01T00:00:00Z', 'updated_at', '2026-01-01T00:00:00Z',
         'change_description', 'made', 'saved_at', '10000-01-01T00:00:00Z')))::text, owner => 'other')
FROM exported WHERE line ->> 'kind' = 'node';
-- Nothing of a refused line was written.
SELECT agent_memory.kv_has('mover-1', 'n') AS has_n, agent_memory.kv_has('mover-1', 'card') AS has_card,
       agent_memory.kv_get('mover-1', 'goal') ->> 'city' AS city;
SELECT seq, content FROM agent_memory.messages('mover-2');
SELECT count(*) AS other_nodes FROM agent_memory.graph_nodes('other');
-- The range's ends are taken, and written back as they were.
SELECT agent_memory.import(jsonb_set(jsonb_set(line, '{created_at}', '"0001-01-01T00:00:00Z"'),
         '{updated_at}', '"9999-12-31T23:59:59.999999Z"')::text, owner => 'edge') FROM exported WHERE line ->> 'kind' = 'node';
SELECT agent_memory.graph_import('edge-copy', agent_memory.graph_export('edge'));
SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS created,
       to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS updated
FROM agent_memory.graph_nodes WHERE owner = 'edge-copy';
-- A rename that is not a key is the call's error, not the line's.
SELECT agent_memory.import(line::text, session_id => '') FROM exported WHERE n = 1;
\echo :LAST_ERROR_SQLSTATE

-- An export of what does not exist is empty; one of nothing is an error.
SELECT count(*) FROM agent_memory.export(session_id => 'nobody', owner => 'nobody', scope => 'nobody');
SELECT count(*) FROM agent_memory.export();
\echo :LAST_ERROR_SQLSTATE

-- import_lines: the lines in one call, each line's result in order. Runs
-- of entries of a session and of plain messages of a thread go together;
-- the others (the tool call and its result here) one by one.
SELECT agent_memory.erase_user('mover', owners => ARRAY['mover'], scopes => ARRAY['mover']) ->> 'sessions' AS sessions;
SELECT r.n, r.result
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM exported)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT count(*) AS differing
FROM (SELECT line - 'last_activity_at' AS line FROM exported) a
FULL JOIN (SELECT line - 'last_activity_at' AS line
           FROM agent_memory.export(user_id => 'mover', owner => 'mover', scope => 'mover') AS line) b ON a.line = b.line
WHERE a.line IS NULL OR b.line IS NULL;

-- A session of runs: five entries, six messages on a ring of four, three
-- on a node. Round trip, then twice: nothing new.
SELECT agent_memory.create_session('bulk', session_id => 'bulk-1') IS NOT NULL AS created;
SELECT count(agent_memory.kv_set('bulk-1', 'k' || i, to_jsonb('value ' || i))) FROM generate_series(1, 5) i;
SELECT count(agent_memory.append_message('bulk-1', CASE WHEN i % 2 = 1 THEN 'user' ELSE 'assistant' END,
                                         'message ' || i, keep => 4)) FROM generate_series(1, 6) i;
SELECT count(agent_memory.append_message('bulk-1', 'user', 'on the node ' || i, node_id => 'n1')) FROM generate_series(1, 3) i;
CREATE TEMP TABLE bulk AS
SELECT row_number() OVER () AS n, line FROM agent_memory.export(user_id => 'bulk') AS line;
SELECT agent_memory.erase_user('bulk') ->> 'sessions' AS sessions;
SELECT r.n, r.result ->> 'kind' AS kind, r.result ->> 'status' AS status
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM bulk)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT count(*) AS differing
FROM (SELECT line - 'last_activity_at' AS line FROM bulk) a
FULL JOIN (SELECT line - 'last_activity_at' AS line FROM agent_memory.export(user_id => 'bulk') AS line) b ON a.line = b.line
WHERE a.line IS NULL OR b.line IS NULL;
SELECT seq, node_id, content FROM agent_memory.messages('bulk-1', lim => 20);
SELECT r ->> 'status' AS status, count(*)
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM bulk)) AS r
GROUP BY 1 ORDER BY 1;

-- A refused line in a run: the run is taken line by line, and the rest
-- of it goes in as import takes each line.
SELECT agent_memory.erase_user('bulk') ->> 'sessions' AS sessions;
SELECT r.n, r.result ->> 'status' AS status, r.result -> 'error' ->> 'code' AS code
FROM agent_memory.import_lines((
       SELECT array_agg(CASE WHEN line ->> 'key' = 'k3' THEN jsonb_set(line, '{value}', '"4111 1111 1111 1111"')
                             WHEN line ->> 'seq' = '5' THEN jsonb_set(line, '{role}', '"robot"')
                             ELSE line END::text ORDER BY n)
       FROM bulk)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT agent_memory.kv_get_all('bulk-1');
SELECT seq, content FROM agent_memory.messages('bulk-1');

-- A scope's files go together too. A path taken sends the run line by
-- line; so does a scope without room for them all.
SELECT count(agent_memory.memory_tool('bulk', jsonb_build_object('command', 'append', 'path', '/notes/' || i || '.md', 'content', 'note ' || i)))
FROM generate_series(1, 4) i;
CREATE TEMP TABLE bulk_files AS
SELECT row_number() OVER () AS n, line FROM agent_memory.export(scope => 'bulk') AS line;
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['bulk']) ->> 'files' AS files;
SELECT r ->> 'status' AS status, count(*)
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM bulk_files)) AS r
GROUP BY 1;
SELECT count(*) AS differing
FROM (SELECT line - 'last_activity_at' AS line FROM bulk_files) a
FULL JOIN (SELECT line FROM agent_memory.export(scope => 'bulk') AS line) b ON a.line = b.line
WHERE a.line IS NULL OR b.line IS NULL;
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['bulk']) ->> 'files' AS files;
SELECT agent_memory.memory_tool('bulk', '{"command": "append", "path": "/notes/3.md/in-the-way.md", "content": "x"}') ->> 'ok' AS ok;
SELECT r.n, r.result ->> 'status' AS status, r.result -> 'error' ->> 'code' AS code
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM bulk_files)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['bulk']) ->> 'files' AS files;
SET agent_memory.max_files_per_scope = 3;
SELECT r.n, r.result ->> 'status' AS status, r.result -> 'error' ->> 'message' AS message
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM bulk_files)) WITH ORDINALITY AS r (result, n)
ORDER BY r.n;
RESET agent_memory.max_files_per_scope;
SELECT agent_memory.erase_user('nobody', scopes => ARRAY['bulk']) ->> 'files' AS files;

-- No array is the call's error; a NULL or broken line is refused alone.
SELECT * FROM agent_memory.import_lines(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.import_lines(ARRAY[NULL, '[1]', '{"kind": "kv"}']);
SELECT count(*) FROM agent_memory.import_lines('{}');
SELECT agent_memory.erase_user('bulk') ->> 'sessions' AS sessions;

SELECT agent_memory.erase_user('mover', owners => ARRAY['mover'], scopes => ARRAY['mover']) ->> 'sessions' AS sessions;
SELECT agent_memory.erase_user('heir', owners => ARRAY['heir'], scopes => ARRAY['heir']) ->> 'sessions' AS sessions;
RESET agent_memory.history_retention;

-- An item's versions past about 16 MB go on lines of their own after the
-- item's line (one JSON value holds at most 256 MB); import takes them
-- back.
SET agent_memory.history_retention = 30;
SET agent_memory.max_file_bytes = 1000000;
SET agent_memory.kv_word_budget = 1000000;
SELECT length(agent_memory.create_session('big', session_id => 'big-s')) AS created;
SELECT count(agent_memory.kv_set('big-s', 'k', to_jsonb(repeat('w' || chr(97 + i % 26) || ' ', 300000))))
FROM generate_series(0, 20) i;
SELECT agent_memory.graph_create('big', 'Big', '', 'v0', ARRAY['__root__'], node_id => 'n');
SELECT count(agent_memory.graph_write('big', 'n', NULL, NULL, repeat('w' || chr(97 + i % 26) || ' ', 300000),
                                      change_description => 'edit ' || i))
FROM generate_series(1, 25) i;
SELECT agent_memory.memory_tool('big', jsonb_build_object('command', 'append', 'path', '/f.md',
                                                          'content', repeat('wa ', 300000))) ->> 'ok' AS ok;
SELECT count(*) FILTER (WHERE (agent_memory.memory_tool('big', jsonb_build_object(
           'command', 'update', 'path', '/f.md', 'oldContent', repeat('w' || chr(97 + (i - 1) % 26) || ' ', 300000),
           'content', repeat('w' || chr(97 + i % 26) || ' ', 300000))) ->> 'ok')::boolean) AS updated
FROM generate_series(1, 20) i;
CREATE TEMP TABLE big_lines AS
SELECT row_number() OVER () AS n, line
FROM agent_memory.export(session_id => 'big-s', owner => 'big', scope => 'big') AS line;
SELECT n, line ->> 'kind' AS kind, jsonb_array_length(line -> 'versions') AS versions,
       (SELECT min((v ->> 'version')::int) FROM jsonb_array_elements(line -> 'versions') v) AS oldest,
       pg_column_size(line) < 20000000 AS under_20_mb
FROM big_lines ORDER BY n;
SELECT agent_memory.erase_user('big', owners => ARRAY['big'], scopes => ARRAY['big']) - 'ok' AS erased;
SELECT r ->> 'status' AS status, count(*)
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM big_lines)) AS r
GROUP BY 1 ORDER BY 1;
SELECT count(*) AS differing
FROM (SELECT line - 'last_activity_at' AS line FROM big_lines) a
FULL JOIN (SELECT line - 'last_activity_at' AS line
           FROM agent_memory.export(session_id => 'big-s', owner => 'big', scope => 'big') AS line) b
  ON a.line = b.line
WHERE a.line IS NULL OR b.line IS NULL;
SELECT r ->> 'status' AS status, count(*)
FROM agent_memory.import_lines((SELECT array_agg(line::text ORDER BY n) FROM big_lines)) AS r
GROUP BY 1 ORDER BY 1;
-- A node's versions come after the node: alone, they are refused.
SELECT agent_memory.erase_user('big', owners => ARRAY['big'], scopes => ARRAY['big']) ->> 'nodes' AS nodes;
SELECT agent_memory.import((SELECT line::text FROM big_lines WHERE line ->> 'kind' = 'node_history')) -> 'error' AS error;
-- With the node, a version not older than it is refused.
SELECT agent_memory.import((SELECT line::text FROM big_lines WHERE line ->> 'kind' = 'node')) ->> 'status' AS status;
SELECT agent_memory.import((SELECT jsonb_set(line, '{versions, 0, version}', '26')::text
                            FROM big_lines WHERE line ->> 'kind' = 'node_history')) -> 'error' AS error;
SELECT agent_memory.import((SELECT line::text FROM big_lines WHERE line ->> 'kind' = 'node_history')) ->> 'status' AS status;
-- A version there with other content under the same number is refused.
SELECT agent_memory.import((SELECT jsonb_set(line, '{versions, 0, body}', '"other"')::text
                            FROM big_lines WHERE line ->> 'kind' = 'node_history')) -> 'error' AS error;
SELECT agent_memory.erase_user('big', owners => ARRAY['big']) ->> 'node_versions' AS node_versions;
RESET agent_memory.max_file_bytes;
RESET agent_memory.kv_word_budget;
RESET agent_memory.history_retention;
