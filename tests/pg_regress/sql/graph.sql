-- Graph memory: nodes, refs, versions, the root, deletes, the
-- tree projection, markdown files. Errors print their SQLSTATE on the next
-- line. Timestamps and generated ids vary, so they are checked, not shown.
SET search_path = agent_memory, public;

-- A JSON node without its timestamps, for stable output.
CREATE FUNCTION pg_temp.shown(node jsonb) RETURNS jsonb LANGUAGE sql
AS $$ SELECT node - 'createdAt' - 'updatedAt' - 'savedAt' $$;

-- The root is virtual: readable, always there, its content bundled.
SELECT pg_temp.shown(graph_read('alice', '__root__')) - 'body' AS root,
       graph_read('alice', '__root__') ->> 'body' LIKE '# Memory Graph%' AS has_prompt,
       graph_read('alice', '__root__') -> 'createdAt' AS root_created;
SELECT count(*) AS stored_nodes FROM graph_nodes;

-- Creating: at least one parent; '__root__' changes nothing stored.
SELECT graph_create('alice', 'Projects', 'What I work on', 'My projects: [[atlas]].',
                    ARRAY['__root__'], node_id => 'projects');
SELECT pg_temp.shown(graph_read('alice', 'projects'));
-- A generated id is cuid2-shaped: a letter, then 23 letters or digits.
CREATE TEMP TABLE made AS
SELECT graph_create('alice', 'Travel', 'Trips', 'Likes trains.', ARRAY['projects']) AS id;
SELECT id ~ '^[a-z][a-z0-9]{23}$' AS cuid2_shaped FROM made;
-- The parent lists the new node among its refs, explicit refs first.
SELECT graph_read('alice', 'projects') -> 'refs' = jsonb_build_array((SELECT id FROM made), 'atlas') AS parent_links_child;
-- A later node with a dangling ref's id resolves it.
SELECT graph_create('alice', 'Atlas', 'The Atlas project', 'Started in May.', ARRAY['projects'], node_id => 'atlas');
SELECT graph_read('alice', 'projects') -> 'unresolvedRefs' AS unresolved,
       graph_read('alice', 'projects') -> 'version' AS version;
-- Times: created and updated are set; the parent's updated_at moved.
SELECT (graph_read('alice', 'atlas') ->> 'createdAt') ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$' AS iso_time;

-- Refs: the explicit list, then the body's [[id]] links, each once; a
-- [[link]] that is not an id is plain text.
SELECT graph_create('alice', 'Links', '', 'See [[b]], [[a]], [[b]] and [[not an id]].',
                    ARRAY['__root__'], node_id => 'links');
SELECT graph_write('alice', 'links', NULL, NULL, NULL, refs => ARRAY['c', 'a']);
SELECT graph_read('alice', 'links') -> 'refs' AS refs;

-- Writes. Without a change description: in place, version unchanged.
SELECT graph_write('alice', 'atlas', 'Atlas', 'The Atlas project', 'Started in May. Ships in June.');
SELECT version, body FROM graph_nodes WHERE owner = 'alice' AND node_id = 'atlas';
SELECT count(*) AS versions FROM graph_versions('alice', 'atlas');
-- With one: the previous state is saved and the version goes up.
SELECT graph_write('alice', 'atlas', 'Atlas (shipped)', NULL, NULL, change_description => 'shipped');
SELECT graph_write('alice', 'atlas', NULL, NULL, 'Shipped in June. [[projects]]', change_description => 'rewrite');
SELECT version, change_description FROM graph_versions('alice', 'atlas');
SELECT pg_temp.shown(graph_version('alice', 'atlas', 1));
SELECT pg_temp.shown(graph_version('alice', 'atlas', 2));
SELECT graph_read('alice', 'atlas') ->> 'version' AS version, graph_read('alice', 'atlas') -> 'refs' AS refs;
-- Versions never appear among the active nodes.
SELECT CASE WHEN node_id = (SELECT id FROM made) THEN '<generated>' ELSE node_id END AS node_id, title, version
FROM graph_nodes('alice') ORDER BY title;
-- A write that changes nothing changes nothing, updated_at included.
CREATE TEMP TABLE before AS SELECT updated_at, version FROM graph_nodes WHERE owner = 'alice' AND node_id = 'atlas';
SELECT graph_write('alice', 'atlas', 'Atlas (shipped)', 'The Atlas project', 'Shipped in June. [[projects]]',
                   change_description => 'nothing really');
SELECT g.updated_at = b.updated_at AS same_updated_at, g.version = b.version AS same_version,
       (SELECT count(*) FROM graph_node_versions WHERE owner = 'alice' AND node_id = 'atlas') AS versions
FROM graph_nodes g, before b WHERE g.owner = 'alice' AND g.node_id = 'atlas';
-- A blank change description is no description: in place.
SELECT graph_write('alice', 'atlas', NULL, 'Atlas, done', NULL, change_description => '  ');

-- Appends: on a new line, in place, links become refs.
SELECT graph_append('alice', 'links', 'Also [[atlas]].');
SELECT graph_read('alice', 'links') ->> 'body' AS body, graph_read('alice', 'links') -> 'refs' AS refs;
SELECT graph_append('alice', 'links', '');

-- Deleting removes the node and its versions; refs to it stay, unresolved.
SELECT graph_create('alice', 'Temp', '', '', ARRAY['atlas'], node_id => 'temp');
SELECT graph_write('alice', 'temp', 'Temp 2', NULL, NULL, change_description => 'v2');
SELECT graph_delete('alice', 'temp'), graph_delete('alice', 'temp') AS again;
SELECT count(*) AS temp_versions FROM graph_node_versions WHERE node_id = 'temp';
SELECT graph_read('alice', 'atlas') -> 'unresolvedRefs' AS unresolved;
-- Created again, the ref resolves.
SELECT graph_create('alice', 'Temp again', '', '', ARRAY['__root__'], node_id => 'temp');
SELECT graph_read('alice', 'atlas') -> 'unresolvedRefs' AS unresolved;

-- The explicit ref list counts as a change even when the merged refs stay
-- the same: it decides what a later body edit keeps.
SELECT graph_write('alice', 'links', NULL, NULL, NULL, refs => ARRAY['c', 'a', 'b']);
SELECT graph_write('alice', 'links', NULL, NULL, 'No links any more.');
SELECT graph_read('alice', 'links') -> 'refs' AS refs;

-- The root has no saved versions.
SELECT count(*) AS root_versions FROM graph_versions('alice', '__root__');

-- Owners are separate graphs.
SELECT graph_create('bob', 'Bob', '', '', ARRAY['__root__'], node_id => 'projects');
SELECT count(*) FROM graph_nodes('bob');

-- Tree projection: refs are children; unreferenced nodes hang under the
-- root (oldest first); a node with two parents appears under both; a ref
-- back to an ancestor is not followed; a cycle nothing else reaches is
-- attached to the root once; dangling refs are skipped.
SELECT graph_create('tree', 'A', '', 'Dangling: [[gone]]', ARRAY['__root__'], node_id => 'a');
SELECT graph_create('tree', 'B', '', '', ARRAY['__root__'], node_id => 'b');
SELECT graph_create('tree', 'Shared', '', '', ARRAY['a', 'b'], node_id => 's');
SELECT graph_create('tree', 'Leaf', '', '', ARRAY['s'], node_id => 'leaf');
SELECT graph_create('tree', 'Back to s', '', 'Up: [[s]]', ARRAY['s'], node_id => 'loop');
-- A node that links to itself lists itself among its children; its rows
-- do not follow the link.
SELECT graph_create('tree', 'Me', '', 'Myself: [[me]]', ARRAY['b'], node_id => 'me');
-- q and r reference each other below a: each appears below the other,
-- but a path never comes back to a node already on it.
SELECT graph_create('tree', 'Q', '', '[[r]]', ARRAY['a'], node_id => 'q');
SELECT graph_create('tree', 'R', '', '[[q]]', ARRAY['a'], node_id => 'r');
SELECT graph_import('tree', '{"c1.md": "---\ntitle: C1\n---\n[[c2]]", "c2.md": "---\ntitle: C2\n---\n[[c1]]"}');
SELECT node_id, parent_id, depth, path, title FROM graph_tree_rows('tree');
SELECT pg_temp.shown(graph_tree('tree') -> 'root') - 'body' AS root,
       (SELECT jsonb_object_agg(parent, (SELECT jsonb_agg(c ->> 'id') FROM jsonb_array_elements(kids) c))
        FROM jsonb_each(graph_tree('tree') -> 'children') AS e(parent, kids)) AS children;
SELECT jsonb_object_keys(graph_tree('tree') -> 'children' -> 'a' -> 0) AS child_fields ORDER BY 1;
SELECT graph_tree('nobody') -> 'children' AS empty_owner_children;
SELECT count(*) FROM graph_tree_rows('nobody');
-- A ladder of 31 levels of two nodes, each linking both of the next: 2^32 - 2
-- rows, refused before any is made.
SELECT count(graph_create('ladder', 'L' || i, '', '', ARRAY['__root__'], 'l' || i))
     + count(graph_create('ladder', 'R' || i, '', '', ARRAY['__root__'], 'r' || i))
FROM generate_series(0, 30) i;
SELECT count(graph_write('ladder', side || i, NULL, NULL, NULL, ARRAY['l' || (i + 1), 'r' || (i + 1)]))
FROM generate_series(0, 29) i, unnest(ARRAY['l', 'r']) side;
SELECT count(*) FROM graph_tree_rows('ladder');
\echo :LAST_ERROR_SQLSTATE
-- A node linking to itself adds no row: the size is still counted first.
SELECT graph_write('ladder', 'l30', NULL, NULL, NULL, ARRAY['l30']);
SELECT count(*) FROM graph_tree_rows('ladder');
SET agent_memory.max_tree_rows = 5;
SELECT count(*) FROM graph_tree_rows('tree');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_tree_rows;
SELECT count(*) FROM graph_tree_rows('tree');

-- Markdown: a node's <id>.md file.
SELECT regexp_replace(graph_to_markdown('alice', 'links'), '"\d{4}-[^"]*Z"', '<time>', 'g') AS file;
SELECT graph_to_markdown('alice', '__root__') LIKE E'---\ntitle: Memory Graph\n%' AS root_file;
-- From markdown: the document is the node (absent refs: none; absent title: kept).
SELECT graph_from_markdown('alice', 'links', E'---\ndescription: rewritten\n---\nOnly [[atlas]] now.', 'from a file');
SELECT pg_temp.shown(graph_read('alice', 'links'));
-- A node that does not exist is not made from a file (it would have no
-- parent); text without frontmatter is all body, and the title stays.
SELECT graph_from_markdown('alice', 'plain', 'Just text.');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Plain', '', '', ARRAY['__root__'], node_id => 'plain');
SELECT graph_from_markdown('alice', 'plain', 'Just text.');
SELECT graph_read('alice', 'plain') ->> 'title' AS title, graph_read('alice', 'plain') ->> 'body' AS body;
-- daycare's own files: timestamps in milliseconds, folded strings, parents.
SELECT graph_import('carol', jsonb_build_object(
  'trip.md', E'---\ntitle: Trip\ndescription: >-\n  A long folded\n  description\nversion: 2\ncreatedAt: 1718000000000\nupdatedAt: 1718000005000\nparents:\n  - __root__\n---\nTrain to Porto.',
  'trip.v1.md', E'---\ntitle: Trip\ndescription: old\nversion: 1\nchangeDescription: planned\ncreatedAt: 1718000000000\nupdatedAt: 1718000000000\n---\nMaybe Porto.'));
SELECT pg_temp.shown(graph_read('carol', 'trip')),
       graph_read('carol', 'trip') ->> 'createdAt' AS created;
SELECT version, change_description, created_at AT TIME ZONE 'UTC' AS saved_utc FROM graph_versions('carol', 'trip');
-- Export then import is exact.
SELECT graph_import('alice-copy', graph_export('alice')) AS files;
-- The same nodes, but for their revisions: an imported node starts at 1.
SELECT graph_export('alice') = graph_export('alice-copy') AS same_files,
       (SELECT array_agg(graph_read('alice', node_id) - 'revision' ORDER BY node_id) FROM graph_nodes('alice'))
     = (SELECT array_agg(graph_read('alice-copy', node_id) - 'revision' ORDER BY node_id) FROM graph_nodes('alice-copy')) AS same_nodes;
SELECT regexp_replace(f, '^[a-z][a-z0-9]{23}[.]', '<generated>.') AS file
FROM jsonb_object_keys(graph_export('alice')) f ORDER BY 1;

-- Bad input: a clear error, nothing changed.
CREATE TEMP TABLE snapshot AS SELECT * FROM graph_nodes;
SELECT graph_write('alice', '__root__', 'Mine', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_append('alice', '__root__', 'x');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_delete('alice', '__root__');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Root?', '', '', ARRAY['__root__'], node_id => '__root__');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'No parent', '', '', ARRAY[]::text[]);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Lost', '', '', ARRAY['atlas', 'nowhere']);
\echo :LAST_ERROR_SQLSTATE
-- A parent of another owner does not exist for this one.
SELECT graph_create('bob', 'Cross', '', '', ARRAY['atlas']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Self', '', '', ARRAY['self'], node_id => 'self');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Twice', '', '', ARRAY['__root__'], node_id => 'atlas');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Bad id', '', '', ARRAY['__root__'], node_id => 'a b');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', '  ', '', '', ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('', 'T', '', '', ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', NULL, '', '', ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'T', '', '', ARRAY['__root__', NULL]);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_read('alice', 'nowhere');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'nowhere', 'T', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'atlas', NULL, NULL, NULL, refs => ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'atlas', NULL, NULL, NULL, refs => ARRAY['no good']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_version('alice', 'atlas', 99);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_version('alice', 'atlas', 3);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_versions('alice', 'nowhere');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_version('alice', '__root__', 1);
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_node_bytes = 10;
SELECT graph_write('alice', 'atlas', NULL, NULL, 'eleven byte');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_append('alice', 'atlas', 'more text');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_create('alice', 'Big', '', 'eleven byte', ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
-- Every field counts: title, description and body together, and a change
-- description on its own.
SELECT graph_create('alice', 'Big', 'a description', '', ARRAY['__root__']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'atlas', 'A title that is long', NULL, NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'atlas', NULL, 'eleven byte', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('erin', '{"big.md": "---\ntitle: T\ndescription: eleven bytes\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_node_bytes;
SET agent_memory.max_node_bytes = 40;
SELECT graph_write('alice', 'atlas', NULL, NULL, 'new', NULL, repeat('why ', 11));
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_node_bytes;
-- Refs: explicit ones and body links together, and a parent's refs when a
-- child joins it.
SET agent_memory.max_node_refs = 2;
SELECT graph_write('alice', 'atlas', NULL, NULL, NULL, ARRAY['a1', 'a2', 'a3']);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('alice', 'atlas', NULL, NULL, '[[b1]] [[b2]]', ARRAY['a1']);
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_node_refs;
SELECT graph_from_markdown('alice', 'atlas', E'---\ntitle: Unclosed\n');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_from_markdown('alice', 'atlas', E'---\ntitle: [a\n---\n');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_from_markdown('alice', 'atlas', E'---\nversion: two\n---\n');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\ntitle: A\n---\n", "b.txt": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.v1.md": "---\nchangeDescription: x\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\nversion: 1\n---\n", "a.v1.md": "---\nchangeDescription: x\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\nversion: 2\n---\n", "a.v1.md": "---\ntitle: old\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"__root__.md": "x"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '["a.md"]');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\ncreatedAt: some day soon\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\ncreatedAt: infinity\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\nupdatedAt: \"2026-01-01T10:00:00\"\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
-- Times that do not exist, or that graph_export could not write back
-- with a four-digit year, are refused too.
SELECT graph_import('dave', '{"a.md": "---\ncreatedAt: \"2025-02-30T00:00:00Z\"\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\ncreatedAt: \"2025-01-01T00:00:00+99:00\"\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\ncreatedAt: \"0001-01-01T00:00:00+14:00\"\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
SELECT graph_import('dave', '{"a.md": "---\nupdatedAt: 7000000000000000\n---\n"}');
\echo :LAST_ERROR_SQLSTATE
-- An import that meets an existing node imports nothing.
SELECT graph_import('alice', '{"fresh1.md": "x", "atlas.md": "y"}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS changed_rows FROM (
  (SELECT * FROM graph_nodes EXCEPT SELECT * FROM snapshot)
  UNION ALL (SELECT * FROM snapshot EXCEPT SELECT * FROM graph_nodes)) d;
SELECT count(*) AS dave_nodes FROM graph_nodes('dave');
-- The range's ends go out and back in exactly.
SELECT graph_import('dora', '{"a.md": "---\ncreatedAt: \"0001-01-01T00:00:00-14:00\"\nupdatedAt: 253402300799999\n---\n"}');
SELECT graph_import('dora-copy', graph_export('dora'));
SELECT n ->> 'createdAt' AS created, n ->> 'updatedAt' AS updated
FROM graph_read('dora-copy', 'a') n;
-- A parent takes no child past agent_memory.max_node_refs.
SET agent_memory.max_node_refs = 2;
SELECT graph_create('frank', 'Parent', '', '', ARRAY['__root__'], 'p');
SELECT graph_create('frank', 'One', '', '', ARRAY['p'], 'c1');
SELECT graph_create('frank', 'Two', '', '', ARRAY['p'], 'c2');
SELECT graph_create('frank', 'Three', '', '', ARRAY['p'], 'c3');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS frank_nodes FROM graph_nodes('frank');
RESET agent_memory.max_node_refs;

-- Preconditions: a node's revision counts every change, in place or
-- versioned, a parent's new child included (its version counts only the
-- versions saved). A write, append or delete naming the revision it read
-- happens only if the node is still at it; otherwise 40001 and nothing
-- changes.
SELECT graph_create('gina', 'Plan', 'trip plan', 'day 1', ARRAY['__root__'], 'plan');
SELECT graph_read('gina', 'plan') ->> 'revision' AS created, graph_read('gina', 'plan') ->> 'version' AS version;
SELECT graph_append('gina', 'plan', 'day 2', expected_revision => 1) AS version_after_append;
SELECT graph_read('gina', 'plan') ->> 'revision' AS after_append;
SELECT graph_write('gina', 'plan', NULL, NULL, 'day 1 and 2', expected_revision => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('gina', 'plan', NULL, NULL, 'day 1 and 2', change_description => 'merged', expected_revision => 2) AS version_now;
SELECT graph_read('gina', 'plan') ->> 'revision' AS after_versioned_write;
SELECT graph_create('gina', 'Hotel', '', '', ARRAY['plan'], 'hotel');
SELECT graph_read('gina', 'plan') ->> 'revision' AS after_a_new_child;
SELECT graph_append('gina', 'plan', 'day 3', expected_revision => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_delete('gina', 'plan', expected_revision => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_read('gina', 'plan') ->> 'body' AS body_kept;
SELECT graph_delete('gina', 'plan', expected_revision => 4) AS deleted;
SELECT graph_delete('gina', 'plan', expected_revision => 0) AS absent_as_expected;
SELECT graph_delete('gina', 'plan', expected_revision => 4);
\echo :LAST_ERROR_SQLSTATE
SELECT graph_write('gina', 'hotel', NULL, NULL, 'x', expected_revision => -1);
\echo :LAST_ERROR_SQLSTATE
-- A working-memory entry built from a node holds it without its revision.
SELECT create_session('gina', session_id => 'graph-pre');
SELECT wm_init('graph-pre', 'hotel', 'gina') IS NOT NULL AS initialised;
SELECT wm_get('graph-pre', 'node_context', 'hotel') ? 'revision' AS has_revision;
SELECT end_session('graph-pre');

-- One tree value is bounded by agent_memory.max_result_bytes: a node under
-- many parents is written under each.
SELECT graph_create('wide', 'Child', repeat('d', 500), '', ARRAY['__root__'], node_id => 'child') AS child;
SELECT count(graph_create('wide', 'P' || i, '', '[[child]]', ARRAY['__root__'], node_id => 'p' || i)) AS parents
FROM generate_series(1, 10) i;
SET agent_memory.max_result_bytes = 4096;
SELECT graph_tree('wide');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.max_result_bytes;
SELECT jsonb_array_length(graph_tree('wide') -> 'children' -> 'p1') AS under_p1;
-- So is the folder graph_export builds, before it reads the nodes.
SET agent_memory.max_result_bytes = 2048;
SELECT graph_export('wide');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_result_bytes = 8192;
SELECT count(*) AS files FROM jsonb_object_keys(graph_export('wide'));
RESET agent_memory.max_result_bytes;
-- And as the files are written: a frontmatter writes a control character
-- in six bytes.
SELECT graph_create('wide', repeat(chr(1), 1000), repeat(chr(1), 1000), '', ARRAY['__root__'], node_id => 'escaped') AS escaped;
SET agent_memory.max_result_bytes = 8192;
SELECT graph_export('wide');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.max_result_bytes = 20000;
SELECT count(*) AS files FROM jsonb_object_keys(graph_export('wide'));
RESET agent_memory.max_result_bytes;
SELECT count(graph_delete('wide', node_id)) FROM graph_nodes('wide');

