#!/usr/bin/env bash
# agent_memory through a real Citus cluster: a coordinator and two workers
# on loopback (scripts/citus.sh), PostgreSQL 15 with Citus 13.2.
#
# In each mode of sql/citus.sql, "delegated" (by default) and "forced"
# (force_delegation=true), on a fresh cluster:
#   1. CREATE EXTENSION agent_memory on the coordinator, then sql/citus.sql;
#   2. the pg_regress suites of tests/pg_regress, sent to the coordinator.
#      Each suite's output must equal the single server's expected output,
#      but for the differences recorded in tests/citus/differences/MODE/
#      SUITE.diff (each explained in docs/scaling.md), exactly those;
#   3. the suites of tests/citus (what only a cluster shows: calls in and
#      out of transaction blocks, where rows land), against their own
#      expected output;
#   and, on a cluster of their own: examples/quickstart.sql and the
#   psycopg example, unchanged; in delegated mode, the per-shard cleanup,
#   with a session renewed while it runs, a write delegated to a worker
#   queued behind one run on the coordinator, and a shard move while
#   messages are appended.
#
#   PG=15 scripts/test_citus.sh [--record]
#
# --record writes the differences found instead of checking them (review
# every change in git diff before committing it). Needs Citus 13.2 for
# PostgreSQL 15 (../shared/citus/install.sh, or a Citus package).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

[ "$PG" = 15 ] || die "the Citus tests run on PostgreSQL 15 (Citus is installed for it), not $PG"
record=false
[ "${1:-}" = --record ] && record=true

if [ ! -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ]; then
  die "Citus is not installed for PostgreSQL 15 ($("$PG_CONFIG" --pkglibdir)/citus.so is missing).
Install Citus 13.2 for PostgreSQL 15 first: ../shared/citus/install.sh, or a Citus package."
fi

scripts/install.sh
setup_venv "$EXAMPLES_VENV" examples/python/requirements.txt
work="$(scratch_dir "citus-pg$PG")"
suites=$(cd tests/pg_regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
citus_suites=$(cd tests/citus/sql && ls *.sql | sed 's/\.sql$//' | sort)
failed=0 passed=0
pass() { passed=$((passed + 1)); echo "ok      $1"; }
fail() { failed=$((failed + 1)); echo "FAILED  $1"; }

# pg_regress against the coordinator's database memory (--use-existing:
# no database is made or dropped).
regress_on_coordinator() {
  local input="$1" output="$2"; shift 2
  rm -rf "$output" && mkdir -p "$output" && chown "$PG_OS_USER": "$output"
  ( eval "$(scripts/citus.sh env)"
    as_pg_user "$PG_REGRESS" --bindir="$PG_BINDIR" --use-existing \
      --host="$PGHOST" --port="$PGPORT" --dbname=memory \
      --inputdir="$input" --outputdir="$output" "$@" >"$output/run.log" 2>&1 ) || true
}

# A suite's output as the single server's expected output would read it:
# Citus names the node an error came from on a line of its own, and the
# nodes' ports, temporary schemas and shard ids vary from run to run.
normalized() {
  sed -E -e '/^CONTEXT:  while executing command on /d' \
         -e 's/@127\.0\.0\.1:[0-9]+/@127.0.0.1:PORT/g' \
         -e 's/pg_temp_[0-9]+/pg_temp_N/g' \
         -e 's/"([a-z_]+)_1[0-9]{5}"/"\1_SHARD"/g' "$1"
}

# A fresh cluster with agent_memory set up by sql/citus.sql in mode $1.
fresh_cluster() {
  local mode="$1" force=false
  [ "$mode" = forced ] && force=true
  CITUS_CONF="lc_messages = 'C'" scripts/citus.sh start --fresh
  ( eval "$(scripts/citus.sh env)"
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION agent_memory"
    "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -v force_delegation=$force -f sql/citus.sql ) \
    >"$work/setup-$mode.log" 2>&1 || { cat "$work/setup-$mode.log"; die "sql/citus.sql failed ($mode)"; }
}

# psql on the coordinator, tuples only, stopping at the first error.
on_coordinator() {
  ( eval "$(scripts/citus.sh env)"; "$PG_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 "$@" )
}

# Run $4 in a transaction block on the coordinator, in the background,
# holding the block open $3 seconds after it; return once it has run. The
# block's output goes to $1, its pid to $held_pid; $2 is the file that
# marks it has run.
hold_in_block() {
  local log="$1" marker="$2" seconds="$3" statement="$4"
  rm -f "$marker"
  on_coordinator >"$log" 2>&1 <<SQL &
BEGIN;
$statement
\! touch $marker
SELECT pg_sleep($seconds);
COMMIT;
SQL
  held_pid=$!
  for _ in $(seq 1 100); do [ -f "$marker" ] && break; sleep 0.1; done
}

# The per-shard cleanup removes what expired on the workers and nothing
# else, and skips a session renewed by a transaction still open while it
# runs (its row is locked; the batches skip locked rows).
check_cleanup() {
  on_coordinator <<'SQL' >"$work/cleanup-setup.log" 2>&1 || { fail "cleanup: set-up"; cat "$work/cleanup-setup.log"; return; }
SELECT agent_memory.create_session('u', session_id => id) FROM unnest(ARRAY['cl-live', 'cl-old1', 'cl-old2', 'cl-held']) id;
SELECT agent_memory.kv_set('cl-live', 'keep', '1');
SELECT agent_memory.kv_set('cl-live', 'gone', '2', ttl => interval '1 millisecond');
SELECT agent_memory.append_message(id, 'user', 'hello') FROM unnest(ARRAY['cl-old1', 'cl-held']) id;
SELECT agent_memory.kv_set(id, 'k', '3') FROM unnest(ARRAY['cl-old2', 'cl-held']) id;
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '2 days'
WHERE session_id IN ('cl-old1', 'cl-old2', 'cl-held');
SQL
  # The renewal holds the session's row from before the cleanup starts to
  # after it ends.
  hold_in_block "$work/cleanup-renew.log" "$work/cleanup-held" 3 \
    "UPDATE agent_memory.sessions SET last_activity_at = now() WHERE session_id = 'cl-held';"
  local renewer=$held_pid
  local answer
  answer="$(on_coordinator -c "SELECT agent_memory.cleanup_expired() - 'run_id' - 'batches'" 2>&1)"
  wait "$renewer"
  local after
  after="$(on_coordinator <<'SQL' 2>&1
SELECT string_agg(session_id, ',' ORDER BY session_id) FROM agent_memory.sessions WHERE session_id LIKE 'cl-%';
SELECT string_agg(session_id || '/' || key, ',' ORDER BY session_id, key) FROM agent_memory.kv_entries WHERE session_id LIKE 'cl-%';
SELECT string_agg(session_id || '/' || content, ',' ORDER BY session_id) FROM agent_memory.thread_messages WHERE session_id LIKE 'cl-%';
SELECT agent_memory.is_active('cl-held');
SQL
)"
  local expected='{"error": null, "entries": 1, "sessions": 2}
cl-held,cl-live
cl-held/k,cl-live/keep
cl-held/hello
t'
  if [ "$answer
$after" = "$expected" ]; then
    pass "cleanup: expired rows removed on the workers, a renewed session kept"
  else
    fail "cleanup"; printf 'expected:\n%s\nfound:\n%s\n%s\n' "$expected" "$answer" "$after"
  fi
}

# A write run on the coordinator (in a transaction block) and a delegated
# one (run on the session's worker) queue behind each other, although each
# takes the session's advisory lock on its own node: the delegated write
# waits for the block to commit, then finds the entry past the version it
# expected and writes nothing.
check_writers_across_nodes() {
  on_coordinator >"$work/across-setup.log" 2>&1 <<'SQL' || { fail "writers across nodes: set-up"; cat "$work/across-setup.log"; return; }
SELECT agent_memory.create_session('u', session_id => 'xn-1');
SELECT agent_memory.kv_set('xn-1', 'plan', '"first"');
SQL
  hold_in_block "$work/across-block.log" "$work/across-held" 2 \
    "SELECT agent_memory.kv_set('xn-1', 'plan', '\"from the block\"', expected_version => 1) ->> 'version';"
  local block=$held_pid
  local started delegated waited after
  started=$(date +%s%N)
  # A bare call, so that Citus delegates it (debug1 says so).
  delegated="$(on_coordinator -c '\set VERBOSITY verbose' -c 'SET client_min_messages = debug1' \
    -c "SELECT agent_memory.kv_set('xn-1', 'plan', '\"delegated\"', expected_version => 1)" 2>&1 || true)"
  waited=$(( ($(date +%s%N) - started) / 1000000 ))
  wait "$block"
  after="$(on_coordinator -c "SELECT agent_memory.kv_entry('xn-1', 'plan') ->> 'version', agent_memory.kv_get('xn-1', 'plan')")"
  if grep -q 'pushing down the function call' <<<"$delegated" && grep -q '^ERROR:  40001:' <<<"$delegated" \
     && [ "$after" = '2|"from the block"' ] && [ "$waited" -ge 1000 ] \
     && [ "$(cat "$work/across-block.log")" = 2 ]; then
    pass "writers across nodes: a delegated write waited ${waited} ms for one on the coordinator, then found its version gone (40001)"
  else
    fail "writers across nodes"
    printf 'delegated (after %s ms):\n%s\nblock: %s\nafter: %s\n' "$waited" "$delegated" "$(cat "$work/across-block.log")" "$after"
  fi
}

# The same first append, with one idempotency key, to a session nobody
# created, run on the coordinator (in a transaction block) and delegated:
# the delegated one waits for the block, whose append made the session's
# row, and finds the message there (one message, seq 1 for both).
check_first_appends_across_nodes() {
  local append="SELECT agent_memory.append_message('xn-new', 'user', 'hello', metadata => '{\"idempotency_key\": \"k1\"}')"
  hold_in_block "$work/first-block.log" "$work/first-held" 2 "$append;"
  local block=$held_pid
  local started delegated waited after
  started=$(date +%s%N)
  delegated="$(on_coordinator -c '\set VERBOSITY verbose' -c 'SET client_min_messages = debug1' -c "$append" 2>&1 || true)"
  waited=$(( ($(date +%s%N) - started) / 1000000 ))
  wait "$block"
  after="$(on_coordinator -c "SELECT string_agg(seq || ':' || content, ',' ORDER BY seq) FROM agent_memory.messages('xn-new')" 2>&1)"
  if grep -q 'pushing down the function call' <<<"$delegated" && [ "$(tail -n 1 <<<"$delegated")" = 1 ] \
     && [ "$after" = '1:hello' ] && [ "$waited" -ge 1000 ] \
     && [ "$(cat "$work/first-block.log")" = 1 ]; then
    pass "first appends across nodes: a delegated append waited ${waited} ms for the one that created the session, then found its message (seq 1)"
  else
    fail "first appends across nodes"
    printf 'delegated (after %s ms):\n%s\nblock: %s\nafter: %s\n' "$waited" "$delegated" "$(cat "$work/first-block.log")" "$after"
  fi
}

# A shard move while appends run loses no message, and seq goes on
# increasing within the session (block_writes: the appends wait during
# the copy). The move goes through sql/citus.sql's procedure, which lets
# the tables' owner log in for the move alone.
check_shard_move() {
  local count=1500 appends="$work/move-appends.sql" seqs="$work/move-seqs.txt"
  on_coordinator -c "SELECT agent_memory.create_session('u', session_id => 'mv-1')" >/dev/null
  for i in $(seq 1 "$count"); do
    echo "SELECT agent_memory.append_message('mv-1', 'user', 'm$i', keep => 10000);"
  done >"$appends"
  ( eval "$(scripts/citus.sh env)"; "$PG_BINDIR/psql" -X -q -At -f "$appends" ) >"$seqs" 2>&1 &
  local writer=$!
  sleep 1
  local moved
  moved="$(on_coordinator <<'SQL' 2>&1 || true
SELECT p.nodeport FROM pg_dist_shard_placement p
WHERE p.shardid = get_shard_id_for_distribution_column('agent_memory.sessions', 'mv-1');
SELECT format('CALL agent_memory_citus.move_shard_placement(%s, %L, %s, %L, %s, %L)',
              p.shardid, p.nodename, p.nodeport, n.nodename, n.nodeport, 'block_writes')
FROM pg_dist_shard_placement p JOIN pg_dist_node n ON n.groupid <> 0 AND n.nodeport <> p.nodeport
WHERE p.shardid = get_shard_id_for_distribution_column('agent_memory.sessions', 'mv-1')
LIMIT 1 \gexec
SELECT rolcanlogin FROM pg_roles WHERE rolname = 'agent_memory_owner';
SELECT count(*) FROM agent_memory.thread_messages WHERE session_id = 'mv-1';
SELECT p.nodeport FROM pg_dist_shard_placement p
WHERE p.shardid = get_shard_id_for_distribution_column('agent_memory.sessions', 'mv-1');
SQL
)"
  wait "$writer"
  local before_port after_port
  before_port="$(echo "$moved" | sed -n 1p)"
  after_port="$(echo "$moved" | sed -n 4p)"
  # How many appends were stored when the move ended: the move must have
  # run while the writer was appending.
  local at_move owner_login appended stored
  at_move="$(echo "$moved" | sed -n 3p)"
  owner_login="$(echo "$moved" | sed -n 2p)"
  appended="$(grep -c '^[0-9][0-9]*$' "$seqs")"
  stored="$(on_coordinator -c "SELECT count(*) || ' ' || min(seq) || ' ' || max(seq) FROM agent_memory.thread_messages WHERE session_id = 'mv-1'")"
  if [ "$before_port" != "$after_port" ] && [ "$appended" = "$count" ] \
     && [ "$at_move" -gt 0 ] && [ "$at_move" -lt "$count" ] && [ "$owner_login" = f ] \
     && [ "$(seq 1 "$count" | tr '\n' ' ')" = "$(tr '\n' ' ' <"$seqs")" ] \
     && [ "$stored" = "$count 1 $count" ]; then
    pass "shard move after $at_move of $count appends: none lost, seq 1..$count in order, owner back to NOLOGIN"
  else
    fail "shard move"
    printf 'move: %s\nacknowledged: %s of %s\nstored (count min max): %s\n' "$moved" "$appended" "$count" "$stored"
    { grep -v '^[0-9][0-9]*$' "$seqs" || true; } | head -n 5
  fi
}


for mode in delegated forced; do
  say "Citus, functions $mode: the quick start, unchanged, on a fresh cluster"
  fresh_cluster "$mode"
  if ( eval "$(scripts/citus.sh env)"
       "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -f examples/quickstart.sql ) >"$work/quickstart-$mode.log" 2>&1; then
    pass "$mode/quickstart.sql"
  else
    fail "$mode/quickstart.sql"; tail -n 20 "$work/quickstart-$mode.log"
  fi
  if ( eval "$(scripts/citus.sh env)"
       cd examples/python && "$EXAMPLES_VENV/bin/python" psycopg_agent.py ) >"$work/psycopg-$mode.log" 2>&1; then
    pass "$mode/psycopg_agent.py ($(grep -c '^ok' "$work/psycopg-$mode.log") checks)"
  else
    fail "$mode/psycopg_agent.py"; tail -n 20 "$work/psycopg-$mode.log"
  fi
  # The cleanup and the shard move do not depend on how the functions are
  # delegated; the writers across nodes need a call run on the coordinator
  # in a transaction block, which forcing would delegate.
  if [ "$mode" = delegated ]; then
    check_cleanup
    check_writers_across_nodes
    check_first_appends_across_nodes
    check_shard_move
  fi

  say "Citus, functions $mode: the suites, on a fresh cluster"
  fresh_cluster "$mode"
  # The single server's suites, in one database as pg_regress runs them.
  input="$work/input-$mode"
  rm -rf "$input" && cp -r tests/pg_regress "$input" && chown -R "$PG_OS_USER": "$input"
  regress_on_coordinator "$input" "$work/regress-$mode" $suites
  recorded="tests/citus/differences/$mode"
  mkdir -p "$recorded"
  for suite in $suites; do
    result="$work/regress-$mode/results/$suite.out"
    if [ ! -f "$result" ]; then fail "$mode/$suite (no output)"; continue; fi
    found="$work/regress-$mode/$suite.diff"
    normalized "$result" | diff -U1 "tests/pg_regress/expected/$suite.out" - | tail -n +3 >"$found" || true
    if $record; then
      if [ -s "$found" ]; then cp "$found" "$recorded/$suite.diff"; else rm -f "$recorded/$suite.diff"; fi
    fi
    expected_diff="$recorded/$suite.diff"
    if [ -s "$found" ] || [ -f "$expected_diff" ]; then
      if [ -f "$expected_diff" ] && cmp -s "$found" "$expected_diff"; then
        pass "$mode/$suite (the recorded differences)"
      else
        fail "$mode/$suite"
        if [ -f "$expected_diff" ]; then
          { diff -u "$expected_diff" "$found" || true; } | head -n 60
        else
          echo "  differences not recorded:"; head -n 60 "$found"
        fi
      fi
    else
      pass "$mode/$suite (same as one server)"
    fi
  done

  # What only a cluster shows, with its own expected output.
  input="$work/citus-input-$mode"
  rm -rf "$input" && cp -r tests/citus "$input" && chown -R "$PG_OS_USER": "$input"
  regress_on_coordinator "$input" "$work/citus-$mode" $citus_suites
  for suite in $citus_suites; do
    result="$work/citus-$mode/results/$suite.out"
    expected="tests/citus/expected/$suite.out"
    [ -f "tests/citus/expected/${suite}_$mode.out" ] && expected="tests/citus/expected/${suite}_$mode.out"
    if [ -f "$result" ] && normalized "$result" | diff -U3 "$expected" - >"$work/citus-$mode/$suite.diff"; then
      pass "$mode/citus/$suite"
    else
      fail "$mode/citus/$suite"
      $record && [ -f "$result" ] && normalized "$result" >"$expected"
      head -n 80 "$work/citus-$mode/$suite.diff"
    fi
  done

  scripts/citus.sh stop >/dev/null
done

echo "citus: $passed passed, $failed failed"
[ "$failed" = 0 ]
