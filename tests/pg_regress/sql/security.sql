-- Who may call what, and why objects planted on the caller's search_path
-- change nothing. Errors print their SQLSTATE on the next line.

-- Every function that runs SQL pins search_path, and every function runs
-- as its caller. Not pinned: the four that run no SQL, the two tenant
-- functions (the default of every tenant column, called per inserted row,
-- where the SET would cost most of their time), version(),
-- sensitive_findings() and value_bytes() (PostgreSQL's own code, which
-- reads a value's header); and the two key-value reads, kv_get() and
-- kv_has(), and memory_tool(), where the SET cost a tenth of a call, whose
-- statements name every table, function, operator and type with its schema
-- (the planted objects below show them unaffected).
SELECT p.oid::regprocedure AS function_with_unpinned_search_path
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace
  AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)
ORDER BY p.oid::regprocedure::text;
SELECT p.oid::regprocedure AS security_definer_function
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.prosecdef;

-- Nobody may call a function without a grant; the writer may call all of
-- them; the reader every function that changes nothing, and the tools.
SELECT p.oid::regprocedure AS callable_by_public
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace
  AND has_function_privilege('public', p.oid, 'EXECUTE');
SELECT p.oid::regprocedure AS not_callable_by_writer
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace
  AND NOT has_function_privilege('agent_memory_writer', p.oid, 'EXECUTE');
SELECT p.oid::regprocedure AS read_only_but_not_callable_by_reader
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.provolatile <> 'v'
  AND NOT has_function_privilege('agent_memory_reader', p.oid, 'EXECUTE');
SELECT p.proname AS writing_function_callable_by_reader
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.provolatile = 'v'
  AND has_function_privilege('agent_memory_reader', p.oid, 'EXECUTE')
ORDER BY 1;

-- Table privileges: the reader selects, the writer also inserts, updates
-- and deletes; neither truncates or owns anything.
SELECT c.relname,
       has_table_privilege('agent_memory_reader', c.oid, 'SELECT') AS reader_selects,
       has_table_privilege('agent_memory_reader', c.oid, 'INSERT,UPDATE,DELETE') AS reader_writes,
       has_table_privilege('agent_memory_writer', c.oid, 'INSERT') AND has_table_privilege('agent_memory_writer', c.oid, 'UPDATE')
         AND has_table_privilege('agent_memory_writer', c.oid, 'DELETE') AS writer_writes,
       has_table_privilege('agent_memory_writer', c.oid, 'TRUNCATE') AS writer_truncates
FROM pg_class c
WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r'
ORDER BY c.relname;
SELECT rolname, rolcanlogin, rolsuper, rolinherit FROM pg_roles
WHERE rolname LIKE 'agent\_memory\_%' ORDER BY rolname;

-- Three login roles of an application.
CREATE ROLE sec_app LOGIN;
GRANT agent_memory_writer TO sec_app;
CREATE ROLE sec_dashboard LOGIN;
GRANT agent_memory_reader TO sec_dashboard;
CREATE ROLE sec_stranger LOGIN;

-- The writer uses every kind of memory.
SET ROLE sec_app;
SELECT agent_memory.create_session('ana', session_id => 'sec');
SELECT agent_memory.kv_set('sec', 'seat', '"window"') ->> 'stored' AS stored;
SELECT agent_memory.append_message('sec', 'user', 'hello') > 0 AS appended;
SELECT agent_memory.wm_set('sec', 'node_context', '{"id": "n1"}') IS NOT NULL AS wm_set;
SELECT agent_memory.graph_create('sec-owner', 'Atlas', 'A project', 'Started in May.', ARRAY['__root__'], node_id => 'atlas');
SELECT agent_memory.memory_tool('sec', '{"command": "append", "path": "/notes", "content": "tea"}');
SELECT agent_memory.claude_memory('sec', '{"command": "view", "path": "/memories"}');
-- It may run the cleanup, which records the run, and read the runs; it
-- may not write them.
SELECT agent_memory.cleanup_expired() ? 'run_id' AS recorded;
SELECT count(*) > 0 AS runs_readable FROM agent_memory.cleanup_runs;
INSERT INTO agent_memory.cleanup_runs (started_at, finished_at, triggered_by) VALUES (now(), now(), 'manual');
\echo :LAST_ERROR_SQLSTATE
UPDATE agent_memory.cleanup_runs SET error = 'forged';
\echo :LAST_ERROR_SQLSTATE
DELETE FROM agent_memory.cleanup_runs;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- The reader reads all of it...
SET ROLE sec_dashboard;
SELECT agent_memory.kv_get('sec', 'seat'), agent_memory.is_active('sec');
SELECT role, content FROM agent_memory.messages('sec');
SELECT agent_memory.wm_get('sec', 'node_context');
SELECT agent_memory.graph_read('sec-owner', 'atlas') ->> 'title' AS title;
SELECT agent_memory.memory_tool('sec', '{"command": "read", "path": "/notes"}');
SELECT agent_memory.claude_memory('sec', '{"command": "view", "path": "/memories/notes"}');
-- ...and changes none of it.
SELECT agent_memory.kv_set('sec', 'seat', '"aisle"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.append_message('sec', 'user', 'sneaky');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.memory_tool('sec', '{"command": "append", "path": "/notes", "content": " and cake"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.claude_memory('sec', '{"command": "delete", "path": "/memories/notes"}');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.graph_delete('sec-owner', 'atlas');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.end_session('sec');
\echo :LAST_ERROR_SQLSTATE
DELETE FROM agent_memory.sessions;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- A role with no grant can do nothing.
SET ROLE sec_stranger;
SELECT agent_memory.kv_get('sec', 'seat');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM agent_memory.kv_entries;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- Nothing changed.
SELECT agent_memory.kv_get('sec', 'seat'), (SELECT count(*) FROM agent_memory.messages('sec')) AS messages,
       agent_memory.memory_tool('sec', '{"command": "read", "path": "/notes"}') ->> 'result' AS notes;

-- Hostile objects in public, named like what the functions call: every one
-- raises if it is ever used. With public searched before pg_catalog, an
-- unpinned function would pick them up.
CREATE FUNCTION public.hijacked() RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'a planted object was called'; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.hijacked()';
CREATE FUNCTION public.hashtext(text) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.hijacked()';
CREATE FUNCTION public.pg_try_advisory_xact_lock(bigint) RETURNS boolean LANGUAGE sql AS 'SELECT public.hijacked()';
CREATE FUNCTION public.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE sql AS 'SELECT WHERE public.hijacked()';
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.hijacked()';
CREATE FUNCTION public.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.hijacked()';
CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.hijacked()';
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.hijacked()';
CREATE FUNCTION public.split_part(text, text, integer) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.hijacked()';
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint WHERE public.hijacked()';
CREATE FUNCTION public.current_setting(text, boolean) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.hijacked()';
CREATE FUNCTION public.text_eq_planted(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.hijacked()';
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_eq_planted);
CREATE FUNCTION public.text_lt_planted(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.hijacked()';
CREATE OPERATOR public.< (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_lt_planted);
CREATE FUNCTION public.text_cat_planted(text, text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.hijacked()';
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_cat_planted);
CREATE FUNCTION public.jsonb_get_planted(jsonb, text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.hijacked()';
CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.jsonb_get_planted);
CREATE FUNCTION public.ts_gt_planted(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS 'SELECT public.hijacked()';
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_gt_planted);
CREATE FUNCTION public.ts_plus_planted(timestamptz, interval) RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.hijacked()';
CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.ts_plus_planted);
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.ts_plus_planted);
CREATE FUNCTION public.make_interval(mins integer) RETURNS interval LANGUAGE sql AS 'SELECT NULL::interval WHERE public.hijacked()';
CREATE FUNCTION public.int_planted(integer, integer) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.hijacked()';
CREATE OPERATOR public.+ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_planted);
CREATE OPERATOR public.- (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_planted);
CREATE OPERATOR public./ (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_planted);
CREATE FUNCTION public.int_cmp_planted(integer, integer) RETURNS boolean LANGUAGE sql AS 'SELECT public.hijacked()';
CREATE OPERATOR public.<= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_cmp_planted);
CREATE OPERATOR public.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_cmp_planted);
CREATE OPERATOR public.> (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_cmp_planted);
CREATE OPERATOR public.>= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_lt_planted);
-- And tables of the same names in pg_temp, which the pinned path ends with.
CREATE TEMP TABLE sessions (session_id text);
CREATE TEMP TABLE kv_entries (session_id text);
CREATE TEMP TABLE memory_files (scope text);
-- The planted objects work: an unqualified call in the caller's own SQL is
-- caught.
SET search_path = public, pg_catalog;
SELECT 'a' = 'a';
\echo :LAST_ERROR_SQLSTATE

-- Every kind of function, called with that search_path, is unaffected.
SET ROLE sec_app;
SELECT agent_memory.create_session('ana', session_id => 'sec2') AS created;
SELECT agent_memory.kv_set('sec2', 'seat', '"window"') ->> 'stored' AS stored;
SELECT agent_memory.kv_get('sec2', 'seat'), agent_memory.kv_has('sec2', 'seat'), agent_memory.is_active('sec2');
SELECT agent_memory.append_message('sec2', 'user', 'hi') > 0 AS appended;
SELECT role, content FROM agent_memory.messages('sec2');
SELECT agent_memory.wm_set('sec2', 'node_context', '{"id": "n1"}') IS NOT NULL AS wm_set;
SELECT agent_memory.working_memory('sec2') ->> 'node_context' AS node_context;
SELECT agent_memory.graph_write('sec-owner', 'atlas', 'Atlas (shipped)', NULL, NULL, change_description => 'shipped') AS version;
SELECT node_id, depth FROM agent_memory.graph_tree_rows('sec-owner') ORDER BY node_id;
SELECT agent_memory.memory_tool('sec2', '{"command": "append", "path": "/a/b", "content": "x"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "append", "path": "/a/b", "content": "x"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "update", "path": "/a/b", "oldContent": "x", "content": "xy"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "read", "path": "/a/b"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "read", "path": "/a"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "list", "path": "/"}');
SELECT agent_memory.claude_memory('sec2', '{"command": "str_replace", "path": "/memories/a/b", "old_str": "xyxy", "new_str": "y"}');
SELECT agent_memory.memory_tool('sec2', '{"command": "delete", "path": "/a"}');
SELECT agent_memory.sensitive_findings('password=hunter2');
SELECT agent_memory.end_session('sec2') AS ended;
RESET ROLE;
RESET search_path;

-- Clean up.
SELECT agent_memory.end_session('sec');
SELECT agent_memory.graph_delete('sec-owner', 'atlas');
SELECT agent_memory.memory_tool('sec', '{"command": "delete", "path": "/notes"}');
DROP TABLE pg_temp.sessions, pg_temp.kv_entries, pg_temp.memory_files;
DROP OPERATOR public.= (text, text), public.< (text, text), public.|| (text, text),
    public.-> (jsonb, text), public.> (timestamptz, timestamptz),
    public.+ (timestamptz, interval), public.- (timestamptz, interval),
    public.+ (integer, integer), public.- (integer, integer), public./ (integer, integer),
    public.<= (integer, integer), public.< (integer, integer), public.> (integer, integer),
    public.>= (text, text);
DROP FUNCTION public.now(), public.hashtext(text), public.pg_try_advisory_xact_lock(bigint),
    public.pg_advisory_xact_lock(bigint), public.jsonb_typeof(jsonb), public.jsonb_build_object(VARIADIC text[]),
    public.length(text), public.lower(text), public.split_part(text, text, integer), public.nextval(regclass),
    public.current_setting(text, boolean), public.text_eq_planted(text, text), public.text_lt_planted(text, text),
    public.text_cat_planted(text, text), public.jsonb_get_planted(jsonb, text), public.ts_gt_planted(timestamptz, timestamptz),
    public.ts_plus_planted(timestamptz, interval), public.make_interval(integer),
    public.int_planted(integer, integer), public.int_cmp_planted(integer, integer),
    public.hijacked();
DROP ROLE sec_app, sec_dashboard, sec_stranger;
