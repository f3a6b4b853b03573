-- Recall: every kind found by its words in other inflections, the scope
-- required and kept, the query's syntax, ranking signals, and recall in
-- step with every write, rollback, overwrite, expiry and delete.
SET search_path = agent_memory, public;
SET timezone = 'UTC';

SELECT create_session('ann', session_id => 'r1') IS NOT NULL AS made;
SELECT create_session('ann', session_id => 'r2') IS NOT NULL AS made;
SELECT create_session('ben', session_id => 'r3') IS NOT NULL AS made;
SELECT kv_set('r1', 'diet', '"vegetarian, no mushrooms"');
SELECT kv_set('r1', 'home_airport', '{"code": "LIS", "city": "Lisbon"}');
SELECT append_message('r1', 'user', 'I am flying to Porto on Friday') > 0 AS appended;
SELECT append_message('r1', 'assistant', 'Booked the train to Porto instead') > 0 AS appended;
SELECT append_message('r2', 'user', 'Remind me about the dentist appointment') > 0 AS appended;
SELECT append_message('r3', 'user', 'The dentist is on Monday') > 0 AS appended;
SELECT wm_set('r1', 'fetched_context', '{"weather": "rain expected in Porto"}');
SELECT graph_create('ann-notes', 'Dentist', 'Appointments and reminders', 'Checkup every six months.', ARRAY['__root__'], node_id => 'dentist') IS NOT NULL AS made;
SELECT graph_create('ann-notes', 'Travel', 'Trips', 'Prefers trains over flights.', ARRAY['__root__'], node_id => 'travel') IS NOT NULL AS made;
SELECT memory_tool('ann-files', '{"path": "/food/restaurants", "command": "append", "content": "Loved the seafood place in Alfama"}') ->> 'ok' AS ok;

-- Each kind, found by words in other inflections than those stored.
SELECT kind, key, ref, snippet FROM recall('flights to porto', session_id => 'r1');
SELECT kind, key, ref, snippet FROM recall('mushroom', session_id => 'r1');
SELECT kind, key, ref, snippet FROM recall('airports', session_id => 'r1');
SELECT kind, key, ref, snippet FROM recall('raining', session_id => 'r1');
SELECT kind, key, ref, snippet FROM recall('reminder', owner => 'ann-notes');
SELECT kind, key, ref, snippet FROM recall('restaurant seafood', scope => 'ann-files');

-- A user's sessions, and only theirs; a session and a user together.
SELECT kind, key, ref FROM recall('dentist', user_id => 'ann');
SELECT kind, key, ref FROM recall('dentist', user_id => 'ben');
SELECT kind, key, ref FROM recall('dentist', session_id => 'r2', user_id => 'ben');
-- Every scope at once: the title weighs more than the body.
SELECT kind, key, ref FROM recall('dentist', user_id => 'ann', owner => 'ann-notes', scope => 'ann-files');
SELECT kind, ref FROM recall('trains', session_id => 'r1', owner => 'ann-notes');

-- kinds narrows; a kind with no scope to search is skipped.
SELECT kind, ref FROM recall('porto', session_id => 'r1', kinds => '{working_memory}');
SELECT kind, ref FROM recall('porto', session_id => 'r1', kinds => '{node,file}');
SELECT count(*) FROM recall('porto', session_id => 'r1', k => 1);

-- Web search syntax: quoted phrases, -word, or; syntax characters in
-- words are words; common words alone find nothing.
SELECT kind, ref FROM recall('"train to porto"', session_id => 'r1');
SELECT kind, ref FROM recall('"porto train"', session_id => 'r1');
SELECT kind, ref FROM recall('porto -train', session_id => 'r1');
SELECT kind, ref FROM recall('mushrooms or dentist', user_id => 'ann', kinds => '{kv,message}');
SELECT count(*) FROM recall('the and of is', session_id => 'r1');
SELECT count(*) FROM recall('the -lisbon', session_id => 'r1');
SELECT count(*) FROM recall('', session_id => 'r1');
SELECT count(*) FROM recall('!(&|:*<->)''\', session_id => 'r1');
SELECT count(*) FROM recall('porto & ! | : * ( ) <->', session_id => 'r1');
SELECT count(*) FROM recall('-porto', session_id => 'r1');
SELECT count(*) FROM recall(repeat('porto train ', 833), session_id => 'r1');
SELECT count(*) FROM recall(repeat('porto train ', 100000), session_id => 'r1');
\echo :LAST_ERROR_SQLSTATE
-- A term given again counts once; past 32 words, a query is refused.
SELECT count(*) FROM recall((SELECT string_agg('w' || i, ' ') FROM generate_series(1, 32) i), session_id => 'r1');
SELECT count(*) FROM recall((SELECT string_agg('w' || i, ' ') FROM generate_series(1, 33) i), session_id => 'r1');
\echo :LAST_ERROR_SQLSTATE

-- Signals: the keyword rank and score, the recency factor.
SELECT ref, signals -> 'keyword' ->> 'rank' AS rank, (signals ->> 'recency')::float8 > 0.99 AS fresh,
       score > 0 AS scored
FROM recall('porto', session_id => 'r1');
SET agent_memory.recall_half_life = 0;
SELECT DISTINCT signals ->> 'recency' FROM recall('porto', session_id => 'r1');
RESET agent_memory.recall_half_life;

-- In step: a write is found in its own transaction; a rollback leaves
-- nothing; an overwritten message, an expired entry, a deleted node or
-- file and an ended session are gone at once.
BEGIN;
SELECT kv_set('r1', 'allergy', '"peanuts"');
SELECT kind, ref FROM recall('peanut', session_id => 'r1');
ROLLBACK;
SELECT count(*) FROM recall('peanut', session_id => 'r1');
SELECT append_message('r2', 'user', 'The parrot needs food', keep => 1) > 0 AS appended;
SELECT append_message('r2', 'user', 'Water the plants', keep => 1) > 0 AS appended;
SELECT kind, snippet FROM recall('parrot or plants', session_id => 'r2');
SELECT kv_set('r1', 'gate', '"gate 12"', ttl => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT count(*) FROM recall('gate', session_id => 'r1');
SELECT graph_delete('ann-notes', 'dentist');
SELECT kind, ref FROM recall('dentist', owner => 'ann-notes');
SELECT memory_tool('ann-files', '{"path": "/food", "command": "delete"}') ->> 'ok' AS ok;
SELECT count(*) FROM recall('seafood', scope => 'ann-files');
SELECT end_session('r1');
SELECT count(*) FROM recall('porto', session_id => 'r1');
SELECT count(*) FROM recall('porto', user_id => 'ann');

-- A reader may recall.
SET ROLE agent_memory_reader;
SELECT kind, ref FROM recall('plants', session_id => 'r2');
RESET ROLE;

-- Arguments.
SELECT * FROM recall('porto');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall(NULL, session_id => 'r2');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => '');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', user_id => repeat('u', 300));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', kinds => '{}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', kinds => '{messages}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', kinds => ARRAY[NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', k => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', k => NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('porto', session_id => 'r2', k => 101);
\echo :LAST_ERROR_SQLSTATE

-- A scope too large to read whole (over 10,000 rows of a kind) is
-- searched through the search column's index instead: the same items, in
-- the same order, as the rows of a smaller scope that holds them, and the
-- other kinds of the call read through their keys as before.
INSERT INTO agent_memory.graph_nodes (owner, node_id, title, body)
SELECT 'wide', 'w' || i, 'filler ' || i, 'nothing to see' FROM generate_series(1, 10050) i;
INSERT INTO agent_memory.graph_nodes (owner, node_id, title, body)
SELECT o, 'lighthouse-' || i, 'the lighthouse keeper ' || i, repeat('lamp ', i)
FROM (VALUES ('wide'), ('narrow')) AS owners (o), generate_series(1, 12) i;
SELECT memory_tool('wide', '{"command": "append", "path": "/lighthouse.md", "content": "the lamp of the lighthouse"}') ->> 'ok' AS created;
SELECT (SELECT array_agg(ref || ' ' || round(score::numeric, 6)) FROM recall('lighthouse lamp', owner => 'wide', kinds => '{node}'))
     = (SELECT array_agg(ref || ' ' || round(score::numeric, 6)) FROM recall('lighthouse lamp', owner => 'narrow', kinds => '{node}'))
       AS same_as_the_narrow_scope;
SELECT kind, count(*) FROM recall('lighthouse lamp', owner => 'wide', scope => 'wide', k => 20) GROUP BY kind ORDER BY kind;
DELETE FROM agent_memory.graph_nodes WHERE owner IN ('wide', 'narrow');
SELECT memory_tool('wide', '{"command": "delete", "path": "/lighthouse.md"}') ->> 'ok' AS deleted;

-- As a tool: the same memories as recall, in the same order; a request
-- the model got wrong is an answer for it, a missing scope an SQL error.
SELECT wm_set('r3', 'fetched_context', '{"plan": "museums on Sunday"}');
SELECT (SELECT jsonb_agg(m -> 'ref') FROM jsonb_array_elements(
          recall_tool('{"query": "dentist trains", "k": 4}', user_id => 'ben', owner => 'ann-notes')
            #> '{result,memories}') m)
     = (SELECT jsonb_agg(to_jsonb(ref)) FROM recall('dentist trains', user_id => 'ben', owner => 'ann-notes', k => 4))
       AS same_as_recall;
SELECT m ->> 'kind' AS kind, m ->> 'ref' AS ref, m ->> 'snippet' AS snippet,
       (m ->> 'updated_at')::timestamptz = (SELECT date_trunc('milliseconds', updated_at) FROM wm_parts WHERE session_id = 'r3' AND part = 'fetched_context') AS updated_at_is_the_part_s,
       (SELECT array_agg(f ORDER BY f) FROM jsonb_object_keys(m) f) AS fields
FROM jsonb_array_elements(recall_tool('{"query": "museum", "kinds": ["working_memory"]}', session_id => 'r3') #> '{result,memories}') m;
SELECT recall_tool(r::jsonb, session_id => 'r3')
FROM (VALUES ('{}'), ('[]'), ('null'), ('{"query": 7}'), ('{"query": "porto", "kinds": "kv"}'),
             ('{"query": "porto", "kinds": [null]}'), ('{"query": "porto", "k": 0}'),
             ('{"query": "porto", "k": 1e10}'), ('{"query": "porto", "k": 101}'),
             ('{"query": "the of"}')) AS bad (r);
SELECT (SELECT jsonb_agg(m -> 'ref') FROM jsonb_array_elements(
          recall_tool('{"query": "dentist trains", "k": 4}', user_id => 'ben', owner => 'ann-notes')
            #> '{result,memories}') m) AS refs;
SELECT recall_tool(NULL, session_id => 'r3');
SELECT recall_tool('{"query": "porto"}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_tool_definition() -> 'input_schema' -> 'properties' -> 'kinds';
SELECT recall_tool_definition('bad name');
\echo :LAST_ERROR_SQLSTATE

-- The search columns and their indexes: a rebuild from the default
-- settings makes those of a fresh install; another configuration and fewer
-- kinds take effect at the rebuild, and back again.
CREATE TEMP VIEW search_columns AS
SELECT c.relname, pg_get_expr(d.adbin, d.adrelid) AS expression,
       (SELECT string_agg(pg_get_indexdef(i.indexrelid), '; ')
        FROM pg_index i WHERE i.indrelid = c.oid AND a.attnum = ANY (i.indkey)) AS indexed
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = 'agent_memory'::regnamespace AND a.attname = 'search' AND NOT a.attisdropped;
CREATE TEMP TABLE installed AS SELECT * FROM search_columns;
SELECT count(*) AS columns FROM installed;
SELECT relname, indexed FROM installed ORDER BY relname;
SELECT recall_rebuild();
SELECT count(*) AS changed FROM ((TABLE installed EXCEPT TABLE search_columns) UNION ALL (TABLE search_columns EXCEPT TABLE installed)) d;
SELECT kv_set('r2', 'garden', '"three plants on the balcony"') ->> 'stored' AS stored;
SET agent_memory.text_search_config = 'simple';
SET agent_memory.recall_kinds = 'message, node';
SELECT kind, ref FROM recall('plant', session_id => 'r2');
SELECT recall_rebuild();
SELECT relname, expression FROM search_columns ORDER BY relname;
SELECT kind, ref FROM recall('plant', session_id => 'r2');
SELECT kind, ref FROM recall('plants', session_id => 'r2');
SET agent_memory.text_search_config = 'klingon';
SELECT recall_rebuild();
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.text_search_config;
SET agent_memory.recall_kinds = 'kv, nodes';
SELECT recall_rebuild();
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.recall_kinds;
SET ROLE agent_memory_reader;
SELECT recall_rebuild();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT recall_rebuild();
SELECT count(*) AS changed FROM ((TABLE installed EXCEPT TABLE search_columns) UNION ALL (TABLE search_columns EXCEPT TABLE installed)) d;
SELECT kind, ref FROM recall('plant', session_id => 'r2') ORDER BY kind;

-- Meaning: the application embeds each item's text (the outbox lists
-- what needs it), recall compares a query's embedding with every embedded
-- item of the scope, and fuses the signals. An embedding of text an item
-- no longer holds is never used.
SELECT create_session('cy', session_id => 'm1') IS NOT NULL AS made;
SELECT kv_set('m1', 'pet', '"a grey cat called Miso"') ->> 'stored' AS stored;
SELECT append_message('m1', 'user', 'Book a table for two on Saturday') > 0 AS appended;
SELECT graph_create('cy-notes', 'Kitchen', 'Cooking', 'Likes spicy ramen.', ARRAY['__root__'], node_id => 'kitchen') IS NOT NULL AS made;
SELECT * FROM recall('cat', session_id => 'm1', embedding => '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
-- Also where no search by meaning would run (no kind the scope reaches).
SELECT * FROM recall('cat', session_id => 'm1', kinds => '{node}', embedding => '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
SET ROLE agent_memory_writer;
SELECT recall_enable_embeddings(3);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT recall_enable_embeddings(0);
\echo :LAST_ERROR_SQLSTATE
SELECT recall_enable_embeddings(NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT recall_enable_embeddings(3);
-- The outbox: what to embed, and the md5 that recall_embed checks.
SELECT kind, key, ref, to_json(content) AS content, source_md5 = md5(content) AS md5_of_content
FROM recall_outbox(session_id => 'm1', owner => 'cy-notes') ORDER BY kind;
SELECT recall_embed(kind, key, ref, e, source_md5) AS stored
FROM recall_outbox(session_id => 'm1', owner => 'cy-notes')
JOIN (VALUES ('kv', '{0.9,0.1,0}'::real[]), ('message', '{0,1,0}'), ('node', '{0.1,0,0.9}')) v (k, e) ON v.k = kind
ORDER BY kind;
SELECT count(*) AS to_embed FROM recall_outbox(session_id => 'm1', owner => 'cy-notes');
-- By meaning alone, by both (the kv entry is found by both and comes
-- first), and with weights.
SELECT kind, ref, snippet, signals -> 'meaning' AS meaning, signals -> 'keyword' AS keyword
FROM recall(NULL, session_id => 'm1', owner => 'cy-notes', embedding => '{1,0.2,0}');
SELECT kind, ref, signals -> 'meaning' ->> 'rank' AS meaning, signals -> 'keyword' ->> 'rank' AS keyword
FROM recall('saturday cat', session_id => 'm1', owner => 'cy-notes', embedding => '{1,0.2,0}');
SELECT kind, ref FROM recall('saturday cat', session_id => 'm1', owner => 'cy-notes', embedding => '{1,0.2,0}',
                             weights => '{"keyword": 1, "meaning": 0}');
-- An embedding of another dimension is refused even when it weighs 0.
SELECT count(*) FROM recall('saturday cat', session_id => 'm1', embedding => '{1,0}',
                            weights => '{"keyword": 1, "meaning": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT kind, ref FROM recall('saturday cat', session_id => 'm1', owner => 'cy-notes', embedding => '{0,0.3,1}',
                             weights => '{"keyword": 0.1, "meaning": 5}');
-- An embedding pointing away from the query's finds nothing.
SELECT count(*) FROM recall(NULL, session_id => 'm1', embedding => '{-1,-1,-1}');
-- Stale at once: a new value keeps its old embedding out of recall and
-- puts the item back in the outbox; embedding it with the outbox's md5
-- of the old text stores nothing.
SELECT kv_set('m1', 'pet', '"a small dog called Rex"') ->> 'stored' AS stored;
SELECT kind, ref FROM recall(NULL, session_id => 'm1', embedding => '{1,0,0}');
SELECT kind, ref, to_json(content) AS content FROM recall_outbox(session_id => 'm1');
SELECT recall_embed('kv', 'm1', 'pet', '{1,0,0}', md5('pet: a grey cat called Miso')) AS stored;
SELECT recall_embed('kv', 'm1', 'pet', '{0.7,0.7,0}', md5('pet: a small dog called Rex')) AS stored;
SELECT kind, ref, signals -> 'meaning' ->> 'rank' AS meaning FROM recall(NULL, session_id => 'm1', embedding => '{1,0,0}');
-- At write time, in the write's transaction; a rollback keeps nothing.
BEGIN;
SELECT kv_set('m1', 'car', '"a red bicycle"') ->> 'stored' AS stored;
SELECT recall_embed('kv', 'm1', 'car', '{0,0,1}') AS stored;
SELECT kind, ref FROM recall(NULL, session_id => 'm1', embedding => '{0,0,1}', kinds => '{kv}');
ROLLBACK;
SELECT count(*) FROM recall(NULL, session_id => 'm1', embedding => '{0,0,1}', kinds => '{kv}');
-- A file's key is its scope and a node's its owner, which may be longer
-- than a session's id.
BEGIN;
SELECT memory_tool(repeat('m', 300), '{"command": "append", "path": "/note", "content": "a long scope"}') ->> 'ok' AS ok;
SELECT recall_embed('file', repeat('m', 300), '/note', '{1,0,0}') AS stored;
SELECT graph_create(repeat('o', 300), 'Long owner', 'a narwhal', '', ARRAY['__root__'], node_id => 'n') AS created;
SELECT kind, ref FROM recall('narwhal', owner => repeat('o', 300));
SELECT recall_embed('node', repeat('o', 300), 'n', '{1,0,0}') AS stored;
ROLLBACK;
-- A kind left out of recall is not found by meaning either: the outbox
-- lists none of its items, and recall_embed stores nothing on them.
SET agent_memory.recall_kinds = 'message, node, file';
SELECT recall_rebuild() -> 'kinds' AS kinds;
SELECT kv_set('m1', 'meal', '"vegetarian meal"') ->> 'stored' AS stored;
SELECT kind, ref FROM recall_outbox(session_id => 'm1');
SELECT recall_embed('kv', 'm1', 'meal', '{0,1,0}') AS stored;
SELECT count(*) FROM recall(NULL, session_id => 'm1', kinds => '{kv}', embedding => '{0.7,0.7,0}');
SELECT kind, ref FROM recall('meal', session_id => 'm1', embedding => '{0.7,0.7,0}');
SELECT kv_delete('m1', 'meal') AS deleted;
RESET agent_memory.recall_kinds;
SELECT recall_rebuild() -> 'kinds' AS kinds;
-- Items that are gone, refs that are not the kind's, bad embeddings.
-- A session that is no longer active takes no embedding, though its rows
-- wait for the cleanup.
SELECT create_session('idler', session_id => 'idle-1') IS NOT NULL AS created,
       kv_set('idle-1', 'pet', '"a tabby"') ->> 'stored' AS stored,
       append_message('idle-1', 'user', 'my tabby') AS seq,
       wm_set('idle-1', 'fetched_context', '{"pet": "tabby"}') AS set;
BEGIN;
SELECT recall_embed('kv', 'idle-1', 'pet', '{1,0,0}') AS kv,
       recall_embed('message', 'idle-1', '1', '{1,0,0}') AS message,
       recall_embed('working_memory', 'idle-1', 'fetched_context', '{1,0,0}') AS part;
ROLLBACK;
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'idle-1';
SELECT recall_embed('kv', 'idle-1', 'pet', '{1,0,0}') AS kv,
       recall_embed('message', 'idle-1', '1', '{1,0,0}') AS message,
       recall_embed('working_memory', 'idle-1', 'fetched_context', '{1,0,0}') AS part;
DELETE FROM agent_memory.sessions WHERE session_id = 'idle-1';
SELECT recall_embed('kv', 'm1', 'nothing', '{1,0,0}') AS stored;
SELECT recall_embed('node', 'someone-else', 'kitchen', '{1,0,0}') AS stored;
SELECT recall_embed('message', 'm1', 'first', '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kvs', 'm1', 'pet', '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{1,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{1,NaN,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{1,Infinity,0}');
\echo :LAST_ERROR_SQLSTATE
-- A length whose square single precision cannot hold: pgvector's
-- distance to it would be NaN.
SELECT recall_embed('kv', 'm1', 'pet', '{1e-30,2e-30,1e-30}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{2e19,1,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{0,0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', '{1,NULL,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT recall_embed('kv', 'm1', 'pet', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall(NULL, session_id => 'm1', embedding => '{1,0,0,0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall(NULL, session_id => 'm1');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('cat', session_id => 'm1', weights => '{"recency": 1}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall('cat', session_id => 'm1', weights => '{"keyword": 0, "meaning": 0}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall_outbox();
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM recall_outbox(session_id => 'm1', max_items => 0);
\echo :LAST_ERROR_SQLSTATE
-- The exact comparison is bounded.
SET agent_memory.max_exact_recall = 1;
SELECT * FROM recall(NULL, session_id => 'm1', owner => 'cy-notes', embedding => '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_exact_recall;
-- A reader may read the outbox and recall by meaning, not embed.
SET ROLE agent_memory_reader;
SELECT count(*) AS to_embed FROM recall_outbox(session_id => 'm1', owner => 'cy-notes');
SELECT count(*) FROM recall(NULL, session_id => 'm1', owner => 'cy-notes', embedding => '{1,0,0}');
SELECT recall_embed('kv', 'm1', 'pet', '{1,0,0}');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- Another dimension: every stored embedding is stale until made again.
SELECT recall_enable_embeddings(2);
SELECT count(*) AS to_embed FROM recall_outbox(session_id => 'm1', owner => 'cy-notes');
SELECT count(*) FROM recall(NULL, session_id => 'm1', owner => 'cy-notes', embedding => '{1,0}');
-- The texts one outbox call lists stop at agent_memory.max_result_bytes
-- (the first is always listed): three of about 600 bytes, two listed.
SELECT create_session('cy', session_id => 'm-long') IS NOT NULL AS made;
SELECT kv_set('m-long', 'a', to_jsonb(repeat('alpha ', 100))) ->> 'stored' AS a,
       kv_set('m-long', 'b', to_jsonb(repeat('beta ', 120))) ->> 'stored' AS b,
       kv_set('m-long', 'c', to_jsonb(repeat('gamma ', 100))) ->> 'stored' AS c;
SET agent_memory.max_result_bytes = 1024;
SELECT count(*) AS listed FROM recall_outbox(session_id => 'm-long');
RESET agent_memory.max_result_bytes;
SELECT count(*) AS listed FROM recall_outbox(session_id => 'm-long');
SELECT end_session('m-long');
SELECT end_session('m1'), graph_delete('cy-notes', 'kitchen');
-- A key-value entry of JSON null has a text too: `null`, listed by the
-- outbox with its md5, and shown as the snippet.
SELECT create_session('cy', session_id => 'm-null') IS NOT NULL AS made;
SELECT kv_set('m-null', 'nothing', 'null') ->> 'stored' AS stored;
SELECT kind, ref, content, source_md5 = md5(content) AS md5_of_content
FROM recall_outbox(session_id => 'm-null');
SELECT kind, ref, snippet FROM recall('nothing', session_id => 'm-null');
-- An expired entry is gone: no embedding is stored on it.
SELECT kv_set('m-null', 'brief', '"gone soon"', ttl => '1 millisecond') ->> 'stored' AS stored;
SELECT pg_sleep(0.01);
SELECT recall_embed('kv', 'm-null', 'brief', '{1,0}') AS stored_on_expired;
SELECT end_session('m-null');

-- Leave no sessions for the suites after this one.
SELECT end_session('r2'), end_session('r3'), graph_delete('ann-notes', 'travel');
