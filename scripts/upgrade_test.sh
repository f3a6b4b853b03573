#!/usr/bin/env bash
# Upgrades and backups, against the installed extension (scripts/install.sh):
#   1. every earlier release (sql/released/) installed; the library refuses
#      its catalog with a clear error; filled with the rows this version's
#      functions wrote into a fresh database (tests/upgrade/fill.sql), over
#      the columns the release's tables have; then ALTER EXTENSION
#      agent_memory UPDATE: the catalog equals a fresh install's, fact by
#      fact (tests/upgrade/catalog.sql), the rows are kept, and the memory
#      reads as it did where it was written (tests/upgrade/read.sql);
#   2. pg_dump / pg_restore of the updated database: same rows, same reads,
#      same catalog, and message numbers carry on where they were;
#   3. the pg_regress suites run against a database that was updated from
#      the first release instead of created fresh.
# Prints one summary line per release and exits non-zero on any difference.
#
#   PG=15 scripts/upgrade_test.sh
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

current="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
work="$(scratch_dir "upgrade-pg$PG")"
rm -rf "${work:?}"/*
chown "$PG_OS_USER": "$work"

"$REPO_ROOT/scripts/cluster.sh" start upgrade --fresh >/dev/null
trap '"$REPO_ROOT/scripts/cluster.sh" stop upgrade' EXIT
eval "$("$REPO_ROOT/scripts/cluster.sh" env upgrade)"

q()   { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$1" "${@:2}"; }
run() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -At -d "$@"; }
fresh_db() { run postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1"; }

# Row count and digest of every table of the extension (but the
# notification secret, which each database makes for itself), over
# the columns listed in file $2 (written from the catalog at the first call,
# so that columns an update adds do not change the digest of the old ones).
data_digest() {
  local db="$1" columns="$2" rel name
  if [ ! -f "$columns" ]; then
    run "$db" -c "SELECT c.relname || ':' || c.relkind::text || ':' ||
                         coalesce(string_agg(pg_catalog.quote_ident(a.attname), ',' ORDER BY a.attnum), '')
                  FROM pg_class c LEFT JOIN pg_attribute a
                    ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind = 'r'
                  WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind = 'r'
                    AND c.relname <> 'notify_secret'
                  GROUP BY c.relname, c.relkind ORDER BY 1" > "$columns"
  fi
  while IFS=: read -r name kind cols; do
    run "$db" -c "SELECT '$name', count(*), md5(coalesce(string_agg(r::text, E'\n' ORDER BY r::text), ''))
                  FROM (SELECT $cols FROM agent_memory.$name) r"
  done < "$columns"
}

same() { # what file-a file-b
  if ! diff -u "$2" "$3" > "$work/diff.txt"; then
    head -n 60 "$work/diff.txt"
    die "upgrade: $1 differ ($2 vs $3)"
  fi
}

fresh_db up_fresh
run up_fresh -c "CREATE EXTENSION agent_memory"
q up_fresh -f tests/upgrade/catalog.sql > "$work/catalog.fresh"
facts=$(grep -c '' "$work/catalog.fresh")
q up_fresh -f tests/upgrade/fill.sql > /dev/null
q up_fresh -f tests/upgrade/read.sql > "$work/read.written"

# Copy the rows of up_fresh into database $1's tables, over the columns both
# have, parents before children.
copy_rows() {
  local db="$1" table cols
  for table in sessions kv_entries message_threads thread_messages wm_parts \
               graph_nodes graph_node_versions memory_files memory_scopes; do
    cols=$(run up_fresh -c "SELECT array_agg(attname::text) FROM pg_attribute
                            WHERE attrelid = 'agent_memory.$table'::regclass AND attnum > 0 AND NOT attisdropped")
    cols=$(run "$db" -c "SELECT string_agg(quote_ident(attname), ',' ORDER BY attnum) FROM pg_attribute
                          WHERE attrelid = 'agent_memory.$table'::regclass AND attnum > 0 AND NOT attisdropped
                            AND attname::text = ANY ('$cols')")
    run up_fresh -c "\\copy (SELECT $cols FROM agent_memory.$table) TO '$work/rows.copy'"
    run "$db" -c "\\copy agent_memory.$table ($cols) FROM '$work/rows.copy'"
  done
  # A release that numbered messages from a global sequence carries on from them.
  run "$db" -c "SELECT setval(c.oid::regclass, (SELECT coalesce(max(seq), 0) + 1 FROM agent_memory.thread_messages))
                FROM pg_class c WHERE c.relname = 'message_seq' AND c.relnamespace = 'agent_memory'::regnamespace" > /dev/null
}

shopt -s nullglob
releases=(sql/released/agent_memory--*.sql)
[ ${#releases[@]} -gt 0 ] || die "upgrade: no earlier release in sql/released/"
for script in "${releases[@]}"; do
  old="$(basename "$script" .sql)"; old="${old#agent_memory--}"
  [ "$old" != "$current" ] || continue
  say "upgrade: $old -> $current"

  fresh_db up_filled
  run up_filled -c "CREATE EXTENSION agent_memory VERSION '$old'"
  # The library refuses the old catalog, saying what to do: a call through
  # a prepared statement, and lists that stream their rows.
  for call in "SELECT agent_memory.kv_get('up-1', 'seat')" \
              "SELECT * FROM agent_memory.messages('up-1')" \
              "SELECT * FROM agent_memory.graph_nodes('up-owner')" \
              "SELECT * FROM agent_memory.graph_tree_rows('up-owner')"; do
    if refused=$(run up_filled -c "$call" 2>&1); then
      die "upgrade: the $current library ran $call against the $old catalog"
    fi
    case "$refused" in
      *"ALTER EXTENSION agent_memory UPDATE"*) ;;
      *) die "upgrade: the $old catalog was refused without saying how to update: $refused" ;;
    esac
  done
  copy_rows up_filled
  rm -f "$work/columns"
  data_digest up_filled "$work/columns" > "$work/data.before"

  run up_filled -c "ALTER EXTENSION agent_memory UPDATE"
  [ "$(run up_filled -c "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'")" = "$current" ] \
    || die "upgrade: ALTER EXTENSION UPDATE did not reach $current"
  q up_filled -f tests/upgrade/catalog.sql > "$work/catalog.updated"
  same "catalog after update and fresh install" "$work/catalog.fresh" "$work/catalog.updated"
  data_digest up_filled "$work/columns" > "$work/data.after"
  same "rows before and after the update" "$work/data.before" "$work/data.after"
  # 0.1.0 numbered messages from a global sequence; each session's and each
  # thread's counter must carry on from its newest message (a session's is
  # the larger of its last_message_seq and its newest append's thread's).
  behind=$(run up_filled -c "SELECT (SELECT count(*) FROM agent_memory.sessions s
                                     WHERE greatest(s.last_message_seq,
                                                    (SELECT t.last_seq FROM agent_memory.message_threads t
                                                     WHERE t.session_id = s.session_id AND t.thread_key = s.last_thread_key))
                                           < (SELECT coalesce(max(m.seq), 0) FROM agent_memory.thread_messages m
                                              WHERE m.session_id = s.session_id))
                                   + (SELECT count(*) FROM agent_memory.message_threads t
                                      WHERE t.last_seq < (SELECT coalesce(max(m.seq), 0) FROM agent_memory.thread_messages m
                                                          WHERE m.session_id = t.session_id AND m.thread_key = t.thread_key))")
  [ "$behind" = 0 ] || die "upgrade: $behind sessions or threads number new messages below their stored ones"
  q up_filled -f tests/upgrade/read.sql > "$work/read.after"
  same "reads where written and after the update" "$work/read.written" "$work/read.after"

  # A dump of the updated database, restored into an empty one.
  as_pg_user "$PG_BINDIR/pg_dump" -Fc -h "$PGHOST" -p "$PGPORT" -U postgres -f "$work/up.dump" up_filled
  fresh_db up_restored
  as_pg_user "$PG_BINDIR/pg_restore" --exit-on-error -h "$PGHOST" -p "$PGPORT" -U postgres -d up_restored "$work/up.dump"
  q up_restored -f tests/upgrade/catalog.sql > "$work/catalog.restored"
  same "catalog of the restored dump and a fresh install" "$work/catalog.fresh" "$work/catalog.restored"
  data_digest up_restored "$work/columns" > "$work/data.restored"
  same "rows of the dump and its restore" "$work/data.after" "$work/data.restored"
  q up_restored -f tests/upgrade/read.sql > "$work/read.restored"
  same "reads of the dump and its restore" "$work/read.after" "$work/read.restored"
  # New messages after a restore still sort after the old ones.
  last=$(run up_restored -c "SELECT max(seq) FROM agent_memory.messages('up-1')")
  next=$(run up_restored -c "SELECT agent_memory.append_message('up-1', 'user', 'after restore')")
  [ "$next" -gt "$last" ] || die "upgrade: message sequence restarted after restore ($next <= $last)"

  rows=$(awk '{split($0, f, "|"); n += f[2]} END {print n}' "$work/data.after")
  tables=$(grep -c '' "$work/data.after")
  echo "upgrade: $old -> $current: catalog equal to a fresh install ($facts facts), $rows rows in $tables tables kept by the update and by pg_dump/pg_restore, reads unchanged"
done

# The suites, on a database updated from the first release.
first="${releases[0]}"; first="$(basename "$first" .sql)"; first="${first#agent_memory--}"
say "upgrade: pg_regress suites on a database updated from $first"
fresh_db agent_memory_regress
run agent_memory_regress -c "CREATE EXTENSION agent_memory VERSION '$first'" -c "ALTER EXTENSION agent_memory UPDATE"
rm -rf "$work/input" "$work/output"
cp -r tests/pg_regress "$work/input"
chown -R "$PG_OS_USER": "$work"
tests=$(cd tests/pg_regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
status=0
as_pg_user "$PG_REGRESS" --bindir="$PG_BINDIR" --use-existing --host="$PGHOST" --port="$PGPORT" \
  --inputdir="$work/input" --outputdir="$work/output" --dbname=agent_memory_regress \
  $tests > "$work/pg_regress.log" 2>&1 || status=$?
passed=$(grep -cE '^(ok |test .* \.\.\. ok)' "$work/pg_regress.log" || true)
failed=$(grep -cE '^(not ok |test .* \.\.\. FAILED)' "$work/pg_regress.log" || true)
if [ "$status" -ne 0 ]; then
  [ -f "$work/output/regression.diffs" ] && head -n 100 "$work/output/regression.diffs"
  cat "$work/pg_regress.log" | tail -n 20
  die "upgrade: suites on the updated database: $passed passed, $failed failed"
fi
echo "upgrade: suites on a database updated from $first: $passed passed, 0 failed"
