-- The extension's frame: catalog entries, comments, settings, dump registration.

-- The extension is installed, in its own schema.
SELECT extname, extversion = agent_memory.version() AS version_matches_library,
       extnamespace::regnamespace AS schema, extrelocatable
FROM pg_extension WHERE extname = 'agent_memory';

-- Every function in the schema has a comment (\df+ shows it).
SELECT p.oid::regprocedure AS function_without_comment
FROM pg_proc p
WHERE p.pronamespace = 'agent_memory'::regnamespace
  AND obj_description(p.oid, 'pg_proc') IS NULL;

-- Every table has a comment and is registered for pg_dump.
SELECT c.relname,
       obj_description(c.oid, 'pg_class') IS NOT NULL AS has_comment,
       c.oid = ANY (e.extconfig) AS dumped_by_pg_dump
FROM pg_class c, pg_extension e
WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r'
  AND e.extname = 'agent_memory'
ORDER BY c.relname;

-- Every setting, with its default and who may change it.
SELECT name, setting, unit, context, vartype, min_val, max_val, enumvals
FROM pg_settings WHERE name LIKE 'agent_memory.%' ORDER BY name;

-- Values outside a setting's range are refused.
SET agent_memory.max_messages = 201;
SET agent_memory.sensitive_data = 'maybe';
SET agent_memory.kv_word_budget = 0;
-- Values inside it are taken.
SET agent_memory.max_messages = 50;
SHOW agent_memory.max_messages;
RESET agent_memory.max_messages;

-- The prefix is reserved: a misspelt setting is an error, not a silent no-op.
SET agent_memory.max_mesages = 10;

-- The schema is owned by the extension: dropping the extension drops it all.
SELECT count(*) > 0 AS has_members
FROM pg_depend d
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'agent_memory')
  AND d.deptype = 'e';
