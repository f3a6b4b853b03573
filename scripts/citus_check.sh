#!/usr/bin/env bash
# Check sql/citus.sql without Citus.
#
#   scripts/citus_check.sh            (the cluster of the libpq variables:
#                                      PGHOST, PGPORT, PGUSER; a superuser)
#   eval "$(scripts/cluster.sh env examples)"; scripts/citus_check.sh
#
# Citus cannot be installed here, so this stands in for it. In a fresh
# database of a plain PostgreSQL with agent_memory installed (and
# preloaded, for its settings), it creates stub functions in schema
# citus_stub, which goes first on search_path. They have the argument names,
# types and defaults of Citus's own:
#   create_distributed_table(table_name regclass, distribution_column text,
#       distribution_type citus.distribution_type DEFAULT 'hash',
#       colocate_with text DEFAULT 'default', shard_count int DEFAULT NULL)
#       citus: src/backend/distributed/sql/udfs/create_distributed_table/10.2-1.sql
#   create_reference_table(table_name regclass)
#   create_distributed_function(function_name regprocedure,
#       distribution_arg_name text DEFAULT NULL,
#       colocate_with text DEFAULT 'default', force_delegation bool DEFAULT NULL)
#       citus: src/backend/distributed/sql/udfs/create_distributed_function/11.0-1.sql
#   run_command_on_shards(table_name regclass, command text,
#       parallel bool DEFAULT true, OUT shardid bigint, OUT success bool,
#       OUT result text)   (citus_tools.sql; command goes through format()
#       with the shard's name)
#   column_to_column_name(table_name regclass, column_var_text text), and a
#       pg_dist_partition view with the columns the script reads.
# The stubs record each call and reproduce some of Citus's refusals: a
# unique index or primary key without the distribution column, a foreign
# key to a table outside the group, or one that does not pair the
# distribution columns, colocation across column types or collations, a
# table with triggers while citus.enable_unsafe_triggers is off, and an
# extension function without a distribution argument
# (commands/function.c, EnsureExtensionFunctionCanBeDistributed). They add
# one rule of this project: no column takes values from a sequence.
#
# Then it runs sql/citus.sql with ON_ERROR_STOP, once with the default
# force_delegation and once with force_delegation=true, each in its own
# database. It checks from the catalogs and the recorded calls:
#   * every table of schema agent_memory is distributed or declared local;
#   * each colocation group has one distribution column, and every foreign
#     key stays inside a group and pairs its distribution columns;
#   * each delegated function's distribution argument has the name and type
#     of its group's distribution column;
#   * every function of the schema is delegated or declared not delegated;
#   * no sequence is left outside the identity column of a local table.
# It then runs the per-shard cleanup of sql/citus.sql, with each table
# standing in for one shard, on sessions and entries made through the
# extension's own functions.
#
# Prints one line per fact ("ok" or "FAIL") and exits non-zero when one
# failed. Nothing here exercises Citus itself; see docs/scaling.md.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CITUS_SQL="${CITUS_SQL:-$REPO_ROOT/sql/citus.sql}"
# The psql of the PostgreSQL under test when scripts/examples.sh runs it.
PSQL=("${PG_BINDIR:+$PG_BINDIR/}psql" -X -q -v ON_ERROR_STOP=1)
WORK="$(mktemp -d)"
DATABASES=()
FAILURES=0

cleanup() {
  local db
  for db in "${DATABASES[@]}"; do
    dropdb --if-exists "$db" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

report() {
  # Lines "t|what" or "f|what" on stdin.
  local ok what
  while IFS='|' read -r ok what; do
    [ -n "$ok$what" ] || continue
    if [ "$ok" = t ]; then
      printf 'ok    %s\n' "$what"
    else
      printf 'FAIL  %s\n' "$what"
      FAILURES=$((FAILURES + 1))
    fi
  done
}

fail() { printf 'FAIL  %s\n' "$*"; FAILURES=$((FAILURES + 1)); }

[ -f "$CITUS_SQL" ] || { echo "citus_check: no $CITUS_SQL" >&2; exit 2; }

cat >"$WORK/stubs.sql" <<'SQL'
CREATE SCHEMA citus_stub;

-- citus: CREATE TYPE citus.distribution_type AS ENUM ('hash', 'range', 'append')
CREATE TYPE citus_stub.distribution_type AS ENUM ('hash', 'range', 'append');

CREATE TABLE citus_stub.colocation_groups (
    colocationid     serial PRIMARY KEY,
    column_type      regtype NOT NULL,
    column_collation oid NOT NULL,
    replication      integer NOT NULL
);
CREATE TABLE citus_stub.dist_tables (
    logicalrelid regclass PRIMARY KEY,
    column_name  text,                 -- NULL: reference table
    colocationid integer REFERENCES citus_stub.colocation_groups
);
CREATE TABLE citus_stub.dist_functions (
    funcid           regprocedure PRIMARY KEY,
    arg_position     integer NOT NULL, -- 1-based, among all arguments
    arg_name         text,
    arg_type         regtype NOT NULL,
    arg_mode         "char" NOT NULL,
    colocationid     integer NOT NULL REFERENCES citus_stub.colocation_groups,
    force_delegation boolean
);
CREATE TABLE citus_stub.declared (kind text NOT NULL, name text NOT NULL);
CREATE TABLE citus_stub.shard_commands (
    table_name regclass, command text, success boolean, result text);

-- What sql/citus.sql reads of Citus's catalog.
CREATE VIEW citus_stub.pg_dist_partition AS
SELECT d.logicalrelid,
       CASE WHEN d.column_name IS NULL THEN 'n' ELSE 'h' END::"char" AS partmethod,
       d.column_name AS partkey,
       d.colocationid,
       's'::"char" AS repmodel
FROM citus_stub.dist_tables d;

CREATE FUNCTION citus_stub.column_to_column_name(table_name regclass, column_var_text text)
RETURNS text LANGUAGE sql AS 'SELECT column_var_text';

CREATE FUNCTION citus_stub.create_distributed_table(
    table_name regclass,
    distribution_column text,
    distribution_type citus_stub.distribution_type DEFAULT 'hash',
    colocate_with text DEFAULT 'default',
    shard_count integer DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    att record;
    anchor record;
    idx record;
    fk record;
    grp integer;
    ref_attnum smallint;
    paired boolean;
    rf integer := coalesce(nullif(current_setting('citus.shard_replication_factor', true), '')::integer, 1);
BEGIN
    IF EXISTS (SELECT FROM citus_stub.dist_tables d WHERE d.logicalrelid = table_name) THEN
        RAISE EXCEPTION 'table "%" is already distributed', table_name;
    END IF;
    IF distribution_type <> 'hash' THEN
        RAISE EXCEPTION 'citus_stub: only hash distribution is emulated';
    END IF;
    SELECT a.attnum, a.atttypid::regtype AS typ, a.attcollation AS coll INTO att
      FROM pg_attribute a
     WHERE a.attrelid = table_name AND a.attname = distribution_column
       AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of relation "%" does not exist', distribution_column, table_name;
    END IF;
    IF shard_count IS NOT NULL AND colocate_with <> 'none' THEN
        RAISE EXCEPTION 'Cannot use colocate_with with a table and shard_count at the same time';
    END IF;

    IF colocate_with = 'none' THEN
        INSERT INTO citus_stub.colocation_groups (column_type, column_collation, replication)
        VALUES (att.typ, att.coll, rf) RETURNING colocationid INTO grp;
    ELSIF colocate_with = 'default' THEN
        SELECT g.colocationid INTO grp FROM citus_stub.colocation_groups g
         WHERE g.column_type = att.typ AND g.column_collation = att.coll AND g.replication = rf
         ORDER BY g.colocationid LIMIT 1;
        IF grp IS NULL THEN
            INSERT INTO citus_stub.colocation_groups (column_type, column_collation, replication)
            VALUES (att.typ, att.coll, rf) RETURNING colocationid INTO grp;
        END IF;
    ELSE
        SELECT d.colocationid, g.column_type, g.column_collation INTO anchor
          FROM citus_stub.dist_tables d JOIN citus_stub.colocation_groups g USING (colocationid)
         WHERE d.logicalrelid = colocate_with::regclass AND d.column_name IS NOT NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'cannot colocate tables % and %', colocate_with, table_name
                USING DETAIL = format('%s is not a hash distributed table', colocate_with);
        END IF;
        IF anchor.column_type <> att.typ THEN
            RAISE EXCEPTION 'cannot colocate tables % and %', colocate_with, table_name
                USING DETAIL = 'Distribution column types don''t match';
        END IF;
        IF anchor.column_collation <> att.coll THEN
            RAISE EXCEPTION 'cannot colocate tables % and %', colocate_with, table_name
                USING DETAIL = 'Distribution column collations don''t match';
        END IF;
        grp := anchor.colocationid;
    END IF;

    -- Primary keys, unique constraints and unique indexes include the key.
    FOR idx IN SELECT i.indexrelid::regclass AS name, i.indkey::int2[] AS cols
                 FROM pg_index i WHERE i.indrelid = table_name AND i.indisunique LOOP
        IF NOT (att.attnum = ANY (idx.cols)) THEN
            RAISE EXCEPTION 'cannot create constraint on "%"', table_name
                USING DETAIL = format('Distributed relations cannot have UNIQUE, EXCLUDE, or PRIMARY KEY constraints that do not include the partition column (%s).', idx.name);
        END IF;
    END LOOP;

    -- Foreign keys from this table: to a colocated distributed table,
    -- pairing the two distribution columns.
    FOR fk IN SELECT c.conname, c.confrelid::regclass AS ref, c.conkey, c.confkey
                FROM pg_constraint c WHERE c.conrelid = table_name AND c.contype = 'f' LOOP
        SELECT d.colocationid AS grp, a.attnum INTO anchor
          FROM citus_stub.dist_tables d
          JOIN pg_attribute a ON a.attrelid = d.logicalrelid AND a.attname = d.column_name
         WHERE d.logicalrelid = fk.ref;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'referenced table "%" must be a distributed table or a reference table', fk.ref
                USING DETAIL = format('foreign key %s of %s', fk.conname, table_name);
        END IF;
        IF anchor.grp <> grp THEN
            RAISE EXCEPTION 'cannot create foreign key constraint since relations are not colocated or not referencing a reference table'
                USING DETAIL = format('foreign key %s of %s', fk.conname, table_name);
        END IF;
        SELECT bool_or(k.c = att.attnum AND r.c = anchor.attnum) INTO paired
          FROM unnest(fk.conkey) WITH ORDINALITY k(c, n)
          JOIN unnest(fk.confkey) WITH ORDINALITY r(c, n) USING (n);
        IF NOT coalesce(paired, false) THEN
            RAISE EXCEPTION 'cannot create foreign key constraint'
                USING DETAIL = format('Foreign keys are supported in two cases, either in between two colocated tables including partition column in the same ordinal in the both tables or from distributed to reference tables (%s of %s)', fk.conname, table_name);
        END IF;
    END LOOP;

    IF EXISTS (SELECT FROM pg_trigger t WHERE t.tgrelid = table_name AND NOT t.tgisinternal)
       AND coalesce(current_setting('citus.enable_unsafe_triggers', true), 'off') NOT IN ('on', 'true', '1') THEN
        RAISE EXCEPTION 'cannot distribute relation "%" because it has triggers', table_name
            USING HINT = 'Consider setting citus.enable_unsafe_triggers to on';
    END IF;

    -- This project's rule, not Citus's: nothing on a distributed table
    -- draws from a sequence (one that Citus would make per-node on workers).
    IF EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = table_name AND a.attidentity <> '')
       OR EXISTS (SELECT FROM pg_attrdef d WHERE d.adrelid = table_name
                   AND pg_get_expr(d.adbin, d.adrelid) LIKE '%nextval(%') THEN
        RAISE EXCEPTION 'citus_stub: % takes values from a sequence; keep sequences off distributed tables', table_name;
    END IF;

    INSERT INTO citus_stub.dist_tables VALUES (table_name, distribution_column, grp);
END
$$;

CREATE FUNCTION citus_stub.create_reference_table(table_name regclass)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT FROM citus_stub.dist_tables d WHERE d.logicalrelid = table_name) THEN
        RAISE EXCEPTION 'table "%" is already distributed', table_name;
    END IF;
    INSERT INTO citus_stub.dist_tables VALUES (table_name, NULL, NULL);
END
$$;

CREATE FUNCTION citus_stub.create_distributed_function(
    function_name regprocedure,
    distribution_arg_name text DEFAULT NULL,
    colocate_with text DEFAULT 'default',
    force_delegation boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql CALLED ON NULL INPUT AS $$
DECLARE
    ext name;
    arg record;
    anchor record;
    position integer;
BEGIN
    IF function_name IS NULL THEN
        RAISE EXCEPTION 'the first parameter for create_distributed_function() should be a single a valid function or procedure name followed by a list of parameters in parantheses';
    END IF;
    IF colocate_with IS NULL THEN
        RAISE EXCEPTION 'colocate_with parameter should not be NULL';
    END IF;
    SELECT e.extname INTO ext
      FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
     WHERE d.classid = 'pg_proc'::regclass AND d.objid = function_name
       AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e';
    IF ext IS NOT NULL AND distribution_arg_name IS NULL THEN
        RAISE EXCEPTION 'Extension functions(%) without distribution argument are not supported.', function_name;
    END IF;
    IF distribution_arg_name IS NULL THEN
        RAISE EXCEPTION 'citus_stub: only functions with a distribution argument are emulated';
    END IF;

    -- All arguments, as Citus's get_func_arg_info() lists them.
    IF distribution_arg_name LIKE '$%' THEN
        position := substr(distribution_arg_name, 2)::integer;
    END IF;
    SELECT t.n, n.name, t.typ::regtype AS typ, coalesce(m.mode, 'i') AS mode INTO arg
      FROM pg_proc p
      CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) WITH ORDINALITY t(typ, n)
      LEFT JOIN LATERAL unnest(p.proargnames) WITH ORDINALITY n(name, n) ON n.n = t.n
      LEFT JOIN LATERAL unnest(p.proargmodes) WITH ORDINALITY m(mode, n) ON m.n = t.n
     WHERE p.oid = function_name
       AND (t.n = position OR (position IS NULL AND lower(n.name) = lower(distribution_arg_name)))
     ORDER BY t.n LIMIT 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cannot distribute the function "%" since the distribution argument is not valid ', function_name
            USING HINT = 'Either provide a valid function argument name or a valid "$paramIndex" to create_distributed_function()';
    END IF;

    IF colocate_with = 'default' THEN
        SELECT g.colocationid, g.replication INTO anchor FROM citus_stub.colocation_groups g
         WHERE g.column_type = arg.typ ORDER BY g.colocationid LIMIT 1;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'cannot distribute the function "%" since there is no table to colocate with', function_name;
        END IF;
    ELSE
        SELECT d.colocationid, g.column_type, g.replication INTO anchor
          FROM citus_stub.dist_tables d JOIN citus_stub.colocation_groups g USING (colocationid)
         WHERE d.logicalrelid = colocate_with::regclass AND d.column_name IS NOT NULL;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'cannot colocate function "%" and table "%" because colocate_with option is only supported for hash distributed tables and reference tables.', function_name, colocate_with;
        END IF;
        -- Citus (EnsureFunctionCanBeColocatedWithTable) accepts different
        -- types when find_coercion_pathway(arg, column, COERCION_EXPLICIT)
        -- finds a path: here, the same type once domains are reduced to
        -- their base types (text to a domain over text, for one). A call
        -- of such a function still fails: see the delegation check below.
        IF anchor.column_type <> arg.typ
           AND (SELECT coalesce(nullif(typbasetype, 0), oid) FROM pg_type WHERE oid = anchor.column_type)
               <> (SELECT coalesce(nullif(typbasetype, 0), oid) FROM pg_type WHERE oid = arg.typ) THEN
            RAISE EXCEPTION 'cannot colocate function "%" and table "%" because distribution column types don''t match and there is no coercion path', function_name, colocate_with;
        END IF;
    END IF;
    IF anchor.replication <> 1 THEN
        RAISE EXCEPTION 'cannot colocate function "%" and table "%"', function_name, colocate_with
            USING DETAIL = 'Citus currently only supports colocating function with distributed tables that are created using streaming replication model.';
    END IF;

    INSERT INTO citus_stub.dist_functions
    VALUES (function_name, arg.n, arg.name, arg.typ, arg.mode, anchor.colocationid, force_delegation)
    ON CONFLICT (funcid) DO UPDATE
       SET arg_position = excluded.arg_position, arg_name = excluded.arg_name, arg_type = excluded.arg_type,
           arg_mode = excluded.arg_mode, colocationid = excluded.colocationid,
           force_delegation = excluded.force_delegation;
END
$$;

-- One "shard" per table: the table itself, named as Citus names a shard
-- (schema-qualified), put into the command by format() as Citus does.
CREATE FUNCTION citus_stub.run_command_on_shards(
    table_name regclass,
    command text,
    parallel boolean DEFAULT true,
    OUT shardid bigint,
    OUT success boolean,
    OUT result text)
RETURNS SETOF record LANGUAGE plpgsql AS $$
DECLARE
    sql text := format(command, table_name::text);
BEGIN
    shardid := 0;
    BEGIN
        EXECUTE sql INTO result;
        success := true;
    EXCEPTION WHEN OTHERS THEN
        success := false;
        result := SQLERRM;
    END;
    INSERT INTO citus_stub.shard_commands VALUES (table_name, sql, success, result);
    RETURN NEXT;
END
$$;

-- The facts, one row each.
CREATE FUNCTION citus_stub.verify(force_expected boolean)
RETURNS TABLE (ok boolean, what text) LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    -- Tables.
    FOR r IN
        SELECT c.oid::regclass AS rel, d.column_name, d.colocationid,
               d.logicalrelid IS NOT NULL AS distributed,
               EXISTS (SELECT FROM citus_stub.declared x WHERE CASE WHEN x.kind = 'local' THEN to_regclass(x.name) END = c.oid) AS local
          FROM pg_class c
          LEFT JOIN citus_stub.dist_tables d ON d.logicalrelid = c.oid
         WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind IN ('r', 'p')
         ORDER BY c.relname
    LOOP
        ok := r.distributed <> r.local;
        what := CASE
            WHEN r.distributed AND r.local THEN format('table %s is distributed but declared local', r.rel)
            WHEN r.distributed AND r.column_name IS NULL THEN format('table %s is a reference table (a copy on every node)', r.rel)
            WHEN r.distributed THEN format('table %s distributed by %s (colocation group %s)', r.rel, r.column_name, r.colocationid)
            WHEN r.local THEN format('table %s stays local (declared)', r.rel)
            ELSE format('table %s is neither distributed nor declared local', r.rel) END;
        RETURN NEXT;
    END LOOP;
    FOR r IN SELECT x.name FROM citus_stub.declared x WHERE x.kind = 'local'
                AND CASE WHEN x.kind = 'local' THEN to_regclass(x.name) END IS NULL LOOP
        ok := false; what := format('declared local table %s does not exist', r.name); RETURN NEXT;
    END LOOP;

    -- One distribution column name per group.
    FOR r IN
        SELECT d.colocationid, array_agg(DISTINCT d.column_name) AS columns,
               string_agg(d.logicalrelid::text, ', ' ORDER BY d.logicalrelid::text) AS tables
          FROM citus_stub.dist_tables d WHERE d.column_name IS NOT NULL
         GROUP BY d.colocationid ORDER BY d.colocationid
    LOOP
        ok := cardinality(r.columns) = 1;
        what := format('colocation group %s: %s, by %s', r.colocationid, r.tables, array_to_string(r.columns, ' and '));
        RETURN NEXT;
    END LOOP;

    -- Every foreign key of the schema stays inside a group and pairs the keys.
    FOR r IN
        SELECT c.conname, c.conrelid::regclass AS rel, c.confrelid::regclass AS ref,
               a.colocationid = b.colocationid AS same_group,
               EXISTS (SELECT FROM unnest(c.conkey) WITH ORDINALITY k(col, n)
                         JOIN unnest(c.confkey) WITH ORDINALITY f(col, n) USING (n)
                        WHERE k.col = (SELECT attnum FROM pg_attribute WHERE attrelid = c.conrelid AND attname = a.column_name)
                          AND f.col = (SELECT attnum FROM pg_attribute WHERE attrelid = c.confrelid AND attname = b.column_name)) AS paired
          FROM pg_constraint c
          LEFT JOIN citus_stub.dist_tables a ON a.logicalrelid = c.conrelid
          LEFT JOIN citus_stub.dist_tables b ON b.logicalrelid = c.confrelid
         WHERE c.contype = 'f' AND c.connamespace = 'agent_memory'::regnamespace
         ORDER BY c.conrelid::regclass::text, c.conname
    LOOP
        ok := coalesce(r.same_group AND r.paired, false);
        what := format('foreign key %s: %s -> %s %s', r.conname, r.rel, r.ref,
                       CASE WHEN ok THEN 'inside one group, on the distribution column'
                            ELSE 'crosses groups or misses the distribution column' END);
        RETURN NEXT;
    END LOOP;

    -- Functions.
    FOR r IN
        SELECT p.oid::regprocedure AS fn, f.arg_name, f.arg_type, f.arg_mode, f.force_delegation,
               d.logicalrelid AS anchor, d.column_name, a.atttypid::regtype AS column_type,
               f.funcid IS NOT NULL AS delegated,
               EXISTS (SELECT FROM citus_stub.declared x
                        WHERE CASE WHEN x.kind = 'not_delegated' THEN to_regprocedure(x.name) END = p.oid) AS kept
          FROM pg_proc p
          LEFT JOIN citus_stub.dist_functions f ON f.funcid = p.oid
          LEFT JOIN LATERAL (SELECT * FROM citus_stub.dist_tables t
                              WHERE t.colocationid = f.colocationid ORDER BY t.logicalrelid LIMIT 1) d ON true
          LEFT JOIN pg_attribute a ON a.attrelid = d.logicalrelid AND a.attname = d.column_name
         WHERE p.pronamespace = 'agent_memory'::regnamespace
         ORDER BY p.oid::regprocedure::text
    LOOP
        IF r.delegated AND r.kept THEN
            ok := false; what := format('function %s is delegated but declared not delegated', r.fn);
        ELSIF r.delegated THEN
            -- The argument's type is the column's: a delegated call coerces
            -- the argument to the column's type, which Citus cannot do to a
            -- domain ("Cannot coerce text to ...", seen on Citus 13.2).
            ok := r.arg_name = r.column_name AND r.arg_mode = 'i'
                  AND r.arg_type = r.column_type;
            what := format('function %s: argument %s %s -> %s.%s %s%s', r.fn, r.arg_name, r.arg_type,
                           r.anchor, r.column_name, r.column_type,
                           CASE WHEN r.force_delegation THEN ', forced' ELSE '' END);
        ELSIF r.kept THEN
            ok := true; what := format('function %s not delegated (declared)', r.fn);
        ELSE
            ok := false; what := format('function %s is neither delegated nor declared not delegated', r.fn);
        END IF;
        RETURN NEXT;
    END LOOP;
    FOR r IN SELECT x.name FROM citus_stub.declared x
              WHERE x.kind = 'not_delegated'
                AND CASE WHEN x.kind = 'not_delegated' THEN to_regprocedure(x.name) END IS NULL LOOP
        ok := false; what := format('declared function %s does not exist', r.name); RETURN NEXT;
    END LOOP;
    ok := ((SELECT count(*) FILTER (WHERE f.force_delegation) FROM citus_stub.dist_functions f) > 0) = force_expected;
    what := format('force_delegation=%s: %s of %s delegated functions forced', force_expected,
                   (SELECT count(*) FILTER (WHERE f.force_delegation) FROM citus_stub.dist_functions f),
                   (SELECT count(*) FROM citus_stub.dist_functions f));
    RETURN NEXT;

    -- Sequences: only the identity of a local table.
    FOR r IN
        SELECT s.oid::regclass AS seq, dep.refobjid::regclass AS owner_table, a.attname, a.attidentity,
               EXISTS (SELECT FROM citus_stub.dist_tables t WHERE t.logicalrelid = dep.refobjid) AS on_distributed
          FROM pg_class s
          LEFT JOIN pg_depend dep ON dep.classid = 'pg_class'::regclass AND dep.objid = s.oid
                                 AND dep.refclassid = 'pg_class'::regclass AND dep.deptype IN ('a', 'i')
          LEFT JOIN pg_attribute a ON a.attrelid = dep.refobjid AND a.attnum = dep.refobjsubid
         WHERE s.relkind = 'S' AND s.relnamespace = 'agent_memory'::regnamespace
         ORDER BY s.relname
    LOOP
        ok := r.attidentity IN ('a', 'd') AND NOT r.on_distributed;
        what := CASE WHEN ok
            THEN format('sequence %s: identity of %s.%s, a local table', r.seq, r.owner_table, r.attname)
            ELSE format('sequence %s is a global sequence (%s)', r.seq,
                        coalesce('used by ' || r.owner_table::text || '.' || r.attname, 'standalone')) END;
        RETURN NEXT;
    END LOOP;
END
$$;

-- The per-shard cleanup of sql/citus.sql, on one "shard" per table.
CREATE FUNCTION citus_stub.test_cleanup()
RETURNS TABLE (ok boolean, what text) LANGUAGE plpgsql AS $$
DECLARE
    first jsonb;
    second jsonb;
    runs bigint;
    survivors text;
BEGIN
    PERFORM agent_memory.create_session('alice', '{}', 'live-1');
    PERFORM agent_memory.create_session('bob', '{}', 'old-1');
    PERFORM agent_memory.kv_set('live-1', 'keep', '"kept"');
    PERFORM agent_memory.kv_set('live-1', 'stale', '"gone"');
    PERFORM agent_memory.kv_set('old-1', 'k', '"v"');
    -- Messages are written directly, so that this test does not depend on
    -- the append path (and on the library's build matching the schema).
    INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended, appends)
    VALUES ('live-1', '', 200, 1, 1), ('old-1', 'n1', 200, 1, 1);
    INSERT INTO agent_memory.thread_messages (session_id, thread_key, slot, seq, node_id, role, content)
    VALUES ('live-1', '', 0, 1, NULL, 'user', 'hello'), ('old-1', 'n1', 0, 1, 'n1', 'user', 'bye');
    PERFORM agent_memory.wm_set('old-1', 'fetched_context', '{"a": 1}');
    PERFORM agent_memory.wm_set('live-1', 'fetched_context', '{"b": 2}');
    -- bob's session went idle a day ago; alice's 'stale' entry expired an hour ago.
    UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'old-1';
    UPDATE agent_memory.kv_entries SET expires_at = now() - interval '1 hour'
     WHERE session_id = 'live-1' AND key = 'stale';
    -- A kept version of 'keep' that expired an hour ago.
    INSERT INTO agent_memory.kv_entry_versions
        (session_id, key, version, value, created_at, updated_at, expires_at, tenant)
    VALUES ('live-1', 'keep', 1, '"older"', now() - interval '2 hours', now() - interval '2 hours',
            now() - interval '1 hour', agent_memory.caller_tenant());

    first := agent_memory_citus.cleanup_expired_shards(1);
    ok := (first->>'sessions')::int = 1 AND (first->>'entries')::int = 2 AND first->>'error' IS NULL
          AND (first->>'batches')::int = 6;
    what := format('per-shard cleanup, batch size 1: %s (expected 1 session, 2 entries (one a kept version), 6 shard batches)', first);
    RETURN NEXT;

    SELECT string_agg(format('%s:%s', t, n), ' ' ORDER BY t) INTO survivors FROM (
        SELECT 'sessions' AS t, string_agg(session_id, ',' ORDER BY session_id) AS n FROM agent_memory.sessions
        UNION ALL SELECT 'kv_entries', string_agg(session_id || '/' || key, ',' ORDER BY session_id, key) FROM agent_memory.kv_entries
        UNION ALL SELECT 'message_threads', string_agg(session_id || '/' || thread_key, ',' ORDER BY session_id, thread_key) FROM agent_memory.message_threads
        UNION ALL SELECT 'thread_messages', string_agg(session_id || '/' || content, ',' ORDER BY session_id, content) FROM agent_memory.thread_messages
        UNION ALL SELECT 'wm_parts', string_agg(session_id || '/' || part, ',' ORDER BY session_id, part) FROM agent_memory.wm_parts) s;
    ok := survivors = 'kv_entries:live-1/keep message_threads:live-1/ sessions:live-1 thread_messages:live-1/hello wm_parts:live-1/fetched_context';
    what := format('after it, only the live session and its live entry remain, the expired session''s rows went by cascade: %s', survivors);
    RETURN NEXT;

    SELECT count(*) INTO runs FROM agent_memory.cleanup_runs
     WHERE triggered_by = 'manual' AND sessions_deleted = 1 AND entries_deleted = 2 AND batches = 6 AND error IS NULL;
    ok := runs = 1;
    what := format('the run is recorded in the local cleanup_runs (%s matching row)', runs);
    RETURN NEXT;

    second := agent_memory_citus.cleanup_expired_shards(1);
    ok := (second->>'sessions')::int = 0 AND (second->>'entries')::int = 0 AND second->>'run_id' IS NULL
          AND (SELECT count(*) FROM agent_memory.cleanup_runs) = 1;
    what := format('a run with nothing to remove removes nothing and is not recorded: %s', second);
    RETURN NEXT;

    ok := NOT EXISTS (SELECT FROM citus_stub.shard_commands c WHERE NOT c.success OR c.command LIKE '%\%%')
          AND (SELECT count(DISTINCT c.table_name) FROM citus_stub.shard_commands c) = 3;
    what := format('%s shard commands on sessions, kv_entries and kv_entry_versions, every one succeeded, shard name filled in',
                   (SELECT count(*) FROM citus_stub.shard_commands));
    RETURN NEXT;
END
$$;
SQL

run_variant() {
  local force="$1" db="agent_memory_citus_check_$$_$1"
  DATABASES+=("$db")
  echo "== sql/citus.sql with force_delegation=$force (database $db)"
  createdb "$db"
  "${PSQL[@]}" -d "$db" -c 'CREATE EXTENSION agent_memory' >/dev/null
  "${PSQL[@]}" -d "$db" -f "$WORK/stubs.sql" >/dev/null

  # The script's declarations: "-- citus_check: local <table>" and
  # "-- citus_check: not_delegated <function>".
  local kind name
  while read -r kind name; do
    "${PSQL[@]}" -d "$db" -v kind="$kind" -v name="$name" >/dev/null <<'SQL'
INSERT INTO citus_stub.declared VALUES (:'kind', :'name');
SQL
  done < <(sed -n 's/^-- citus_check: \(local\|not_delegated\) \(.*[^ ]\) *$/\1 \2/p' "$CITUS_SQL")

  if PGOPTIONS="-c search_path=citus_stub,public" \
       "${PSQL[@]}" -d "$db" -v force_delegation="$force" -f "$CITUS_SQL" >"$WORK/run-$force.log" 2>&1; then
    printf 'ok    sql/citus.sql ran to the end with ON_ERROR_STOP (%s statements recorded: %s tables, %s functions)\n' \
      "$(("$("${PSQL[@]}" -d "$db" -Atc 'SELECT count(*) FROM citus_stub.dist_tables')" + \
          "$("${PSQL[@]}" -d "$db" -Atc 'SELECT count(*) FROM citus_stub.dist_functions')"))" \
      "$("${PSQL[@]}" -d "$db" -Atc 'SELECT count(*) FROM citus_stub.dist_tables')" \
      "$("${PSQL[@]}" -d "$db" -Atc 'SELECT count(*) FROM citus_stub.dist_functions')"
    grep -h '^psql:.*NOTICE' "$WORK/run-$force.log" | sed 's/^psql:[^ ]* NOTICE:  /ok    script says: /' || true
  else
    fail "sql/citus.sql stopped:"
    sed 's/^/        /' "$WORK/run-$force.log" | tail -n 15
    return
  fi

  "${PSQL[@]}" -d "$db" -At -F'|' \
    -c "SELECT coalesce(ok, false), what FROM citus_stub.verify($force)" >"$WORK/verify-$force.out" 2>&1 \
    || { fail "verification query failed:"; sed 's/^/        /' "$WORK/verify-$force.out"; return; }
  report <"$WORK/verify-$force.out"

  if [ "$force" = false ]; then
    # Citus keeps run_command_on_shards in pg_catalog; here the stub is in
    # citus_stub, which the function's pinned search_path must then include.
    "${PSQL[@]}" -d "$db" -At -F'|' >"$WORK/cleanup.out" 2>&1 <<'SQL' \
      || { fail "per-shard cleanup test failed:"; sed 's/^/        /' "$WORK/cleanup.out"; return; }
ALTER FUNCTION agent_memory_citus.cleanup_expired_shards(integer, integer)
    SET search_path = pg_catalog, citus_stub, pg_temp;
SELECT coalesce(ok, false), what FROM citus_stub.test_cleanup();
SQL
    report <"$WORK/cleanup.out"
  fi
}

run_variant false
run_variant true

echo
if [ "$FAILURES" -eq 0 ]; then
  echo "citus_check: all passed (against stubs on plain PostgreSQL, not Citus)"
else
  echo "citus_check: $FAILURES failed"
  exit 1
fi
