-- Every fact about the installed agent_memory that an upgrade must get
-- right, one sorted line each, with no OIDs: run in two databases and diff.
-- scripts/upgrade_test.sh compares a fresh install with an updated one and
-- with a restored dump.
\pset tuples_only on
\pset format unaligned
WITH ext AS (
    SELECT oid, extversion, extconfig, extcondition FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'
), members AS (
    SELECT d.classid, d.objid FROM pg_catalog.pg_depend d, ext
    WHERE d.refclassid = 'pg_catalog.pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
), rels AS (
    SELECT c.oid, c.relname, c.relkind FROM pg_catalog.pg_class c
    WHERE c.relnamespace = 'agent_memory'::regnamespace
)
SELECT line FROM (
    SELECT 'extension ' || extversion AS line FROM ext
    UNION ALL
    SELECT 'member ' || pg_catalog.pg_describe_object(classid, objid, 0) FROM members
    UNION ALL
    SELECT 'config ' || c::regclass::text || ' where ' || coalesce(w, '') FROM ext,
           unnest(extconfig, extcondition) AS u(c, w)
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure::text || ' acl ' || coalesce(p.proacl::text, 'default')
           || ' comment ' || coalesce(pg_catalog.obj_description(p.oid, 'pg_proc'), '-') || E'\n'
           || pg_catalog.pg_get_functiondef(p.oid)
    FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'agent_memory'::regnamespace
    UNION ALL
    SELECT 'relation ' || r.relname || ' kind ' || c.relkind::text || ' acl ' || coalesce(c.relacl::text, 'default')
           || ' rls ' || c.relrowsecurity || '/' || c.relforcerowsecurity
           || ' owner-is-superuser ' || (SELECT a.rolsuper FROM pg_catalog.pg_roles a WHERE a.oid = c.relowner)
           || ' options ' || coalesce(c.reloptions::text, '-')
           || ' comment ' || coalesce(pg_catalog.obj_description(c.oid, 'pg_class'), '-')
    FROM rels r JOIN pg_catalog.pg_class c ON c.oid = r.oid
    UNION ALL
    SELECT 'column ' || r.relname || ' ' || lpad(row_number() OVER (PARTITION BY r.oid ORDER BY a.attnum)::text, 3)
           || ' ' || a.attname || ' ' || pg_catalog.format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
           || coalesce(' default ' || pg_catalog.pg_get_expr(d.adbin, d.adrelid), '')
           || coalesce(' acl ' || a.attacl::text, '')
           || coalesce(' comment ' || pg_catalog.col_description(r.oid, a.attnum), '')
    FROM rels r JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
    WHERE r.relkind IN ('r', 'v', 'p')
    UNION ALL
    SELECT 'constraint ' || coalesce(r.relname, t.typname) || ' ' || k.conname || ' ' || pg_catalog.pg_get_constraintdef(k.oid)
    FROM pg_catalog.pg_constraint k
    LEFT JOIN rels r ON r.oid = k.conrelid
    LEFT JOIN pg_catalog.pg_type t ON t.oid = k.contypid
    WHERE k.connamespace = 'agent_memory'::regnamespace
    UNION ALL
    SELECT 'index ' || pg_catalog.pg_get_indexdef(i.indexrelid)
    FROM pg_catalog.pg_index i JOIN rels r ON r.oid = i.indrelid
    UNION ALL
    SELECT 'trigger ' || pg_catalog.pg_get_triggerdef(g.oid)
    FROM pg_catalog.pg_trigger g JOIN rels r ON r.oid = g.tgrelid WHERE NOT g.tgisinternal
    UNION ALL
    SELECT 'policy ' || r.relname || ' ' || p.polname || ' ' || p.polcmd::text || ' permissive ' || p.polpermissive
           || ' roles ' || p.polroles::regrole[]::text
           || ' using ' || coalesce(pg_catalog.pg_get_expr(p.polqual, p.polrelid), '-')
           || ' check ' || coalesce(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), '-')
    FROM pg_catalog.pg_policy p JOIN rels r ON r.oid = p.polrelid
    UNION ALL
    SELECT 'type ' || t.typname || ' ' || pg_catalog.format_type(t.typbasetype, t.typtypmod)
           || ' comment ' || coalesce(pg_catalog.obj_description(t.oid, 'pg_type'), '-')
    FROM pg_catalog.pg_type t WHERE t.typnamespace = 'agent_memory'::regnamespace AND t.typtype = 'd'
    UNION ALL
    SELECT 'sequence ' || r.relname || ' ' || pg_catalog.format_type(s.seqtypid, NULL) || ' start ' || s.seqstart
           || ' increment ' || s.seqincrement || ' cache ' || s.seqcache || ' cycle ' || s.seqcycle
    FROM pg_catalog.pg_sequence s JOIN rels r ON r.oid = s.seqrelid
    UNION ALL
    -- Privileges the extension's scripts set: pg_dump leaves these to CREATE EXTENSION.
    SELECT 'initial privileges ' || pg_catalog.pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' ' || i.privtype::text || ' ' || i.initprivs::text
    FROM pg_catalog.pg_init_privs i JOIN members m ON m.classid = i.classoid AND m.objid = i.objoid
    UNION ALL
    SELECT 'schema agent_memory acl ' || coalesce(n.nspacl::text, 'default')
    FROM pg_catalog.pg_namespace n WHERE n.nspname = 'agent_memory'
) facts
ORDER BY line;
