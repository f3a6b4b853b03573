#!/usr/bin/env bash
# Load: a bounded mixed pgbench load over every capability while the cleanup
# worker runs every second, on a throwaway cluster "load".
#
#   PG=15 scripts/load_test.sh [seconds]        (default 60; PG=15|18)
#
# 8 clients (2 threads) run the scripts of tests/load/*.sql, one call (or
# one small transaction) each, weighted below, for <seconds> seconds with
# pgbench -M prepared --max-tries=1 --failures-detailed, logging every
# transaction. Short-lived sessions (2 s idle timeout) and 1 s entries made
# during the run keep the worker busy. It prints per call its count and its
# p50/p99/max latency (from the per-transaction logs), the overall tps, the
# errors (failed transactions, aborted clients, ERROR/FATAL/PANIC lines in the
# server log), what the worker removed in the runs it started during the
# load, the invariants of tests/load/check.sql, and one final line:
#
#   load: <S> s, 8 clients, <N> calls of <K> kinds, <E> errors, worker removed <R> rows in <W> runs
#
# It exits non-zero on any error, a worker run that recorded an error, a
# worker that did nothing, or a broken invariant. Expects the extension to be
# installed (scripts/install.sh). The cluster is stopped on every exit; its
# logs stay in $SCRATCH/load-pg$PG (server.log, pgbench/).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

duration="${1:-60}"
[[ "$duration" =~ ^[0-9]+$ ]] && [ "$duration" -ge 1 ] || die "usage: load_test.sh [seconds]"
CLIENTS=8
THREADS=2
# Data sizes, passed to tests/load/setup.sql (psql -v) and the scripts (pgbench -D).
declare -A SIZE=(
  [sessions]=4000   # long-lived sessions ls1..: kv, messages, working memory
  [churn]=2000      # short-lived sessions ch1..: 2 s idle timeout, created during the run
  [owners]=100      # graph owners g1..
  [nodes]=20        # nodes per owner (a binary tree n1..)
  [scopes]=200      # memory-tool scopes ms1..
  [files]=10        # files per scope under /notes
  [private]=50      # sessions per client that create_session/end_session cycle
)
# script@weight, in the order pgbench numbers them (script_no 0, 1, ...); a
# manual cleanup_expired() about once in 3,900 calls.
SCRIPTS=(
  kv_set@1000 kv_get@1000 session_churn@600 build_context@300
  append_message@800 append_tool_pair@300 messages@600
  wm_set@500 wm_patch@500 working_memory@400
  graph_write@400 graph_read@500 graph_tree_rows@300
  memory_tool_append@300 memory_tool_read@300 memory_tool_list@200 memory_tool_update@200 memory_tool_delete@100
  claude_view@300 claude_create@200 claude_str_replace@300
  create_session@200 end_session@200 cleanup_expired@3
)

began=$(date +%s)
cluster_dir="$SCRATCH/load-pg$PG"
stop_cluster() { "$REPO_ROOT/scripts/cluster.sh" stop load >/dev/null 2>&1 || warn "could not stop the load cluster"; }
trap stop_cluster EXIT
trap 'exit 130' INT TERM

say "load: starting cluster 'load' (PostgreSQL $PG) with the cleanup worker every second"
CLUSTER_CONF=$'agent_memory.cleanup_interval = 1\nagent_memory.database = load\nlog_lock_waits = on' \
  "$REPO_ROOT/scripts/cluster.sh" start load --fresh
eval "$("$REPO_ROOT/scripts/cluster.sh" env load)"
server_log="$cluster_dir/server.log"
log_dir="$cluster_dir/pgbench"
mkdir -p "$log_dir"

q() { timeout 600 "$PG_BINDIR/psql" -X -q -A -t -v ON_ERROR_STOP=1 "$@"; }
q -d postgres -c "CREATE DATABASE load"
export PGDATABASE=load
q -c "CREATE EXTENSION agent_memory"
say "load: extension $(q -c "SELECT extversion FROM pg_extension WHERE extname = 'agent_memory'") (library $(q -c 'SELECT agent_memory.version()'))"

# The worker connects once the database and the extension exist.
worker_pid=""
for _ in $(seq 60); do
  worker_pid="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup' AND datname = 'load'")"
  [ -n "$worker_pid" ] && break
  sleep 0.5
done
[ -n "$worker_pid" ] || die "load: the cleanup worker never connected to database load (log: $server_log)"

say "load: setting up data"
setup_vars=()
define_vars=()
for key in "${!SIZE[@]}"; do
  setup_vars+=(-v "$key=${SIZE[$key]}")
  define_vars+=(-D "$key=${SIZE[$key]}")
done
timeout 900 "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "${setup_vars[@]}" -f tests/load/setup.sql \
  || die "load: setup failed"

files=()
names=()
for entry in "${SCRIPTS[@]}"; do
  name="${entry%@*}"
  [ -f "tests/load/$name.sql" ] || die "load: no script tests/load/$name.sql"
  files+=(-f "tests/load/$name.sql@${entry#*@}")
  names+=("$name")
done

say "load: ${#names[@]} scripts, $CLIENTS clients, $duration s"
log_offset=$(stat -c %s "$server_log")
load_start="$(q -c 'SELECT clock_timestamp()')"
status=0
timeout --kill-after=10 $((duration + 120)) \
  "$PG_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$THREADS" -T "$duration" -P 10 \
  --log --log-prefix="$log_dir/tx" --failures-detailed --max-tries=1 \
  "${define_vars[@]}" "${files[@]}" load >"$log_dir/pgbench.out" 2>"$log_dir/pgbench.err" || status=$?
load_end="$(q -c 'SELECT clock_timestamp()')"
grep -E '^progress:' "$log_dir/pgbench.err" || true

errors=0
if [ "$status" -ne 0 ]; then
  warn "load: pgbench exited with status $status$([ "$status" -eq 124 ] && echo ' (timed out)')"
  errors=$((errors + 1))
fi
aborted=$(grep -cE 'client [0-9]+ (script [0-9]+ )?aborted' "$log_dir/pgbench.err" || true)
if [ "$aborted" -gt 0 ]; then
  warn "load: $aborted clients aborted:"
  grep -E 'aborted|ERROR|DETAIL|HINT|CONTEXT' "$log_dir/pgbench.err" | head -n 40 >&2
  errors=$((errors + aborted))
fi
failed_tx=$(sed -nE 's/^number of failed transactions: ([0-9]+).*/\1/p' "$log_dir/pgbench.out")
if [ -n "$failed_tx" ] && [ "$failed_tx" -gt 0 ]; then
  warn "load: pgbench counted $failed_tx failed transactions"
  grep -E '^ *(number of|[a-z ]+failures)' "$log_dir/pgbench.out" >&2 || true
  errors=$((errors + failed_tx))
fi
tps=$(sed -nE 's/^tps = ([0-9.]+) \(without initial connection time\).*/\1/p' "$log_dir/pgbench.out")
[ -n "$tps" ] || { cat "$log_dir/pgbench.out" "$log_dir/pgbench.err" >&2; errors=$((errors + 1)); tps="?"; }

echo
report="$(python3 tests/load/report.py "$log_dir/tx" "${names[@]}")" || die "load: no per-transaction log"
echo "$report" | grep -v '^report: '
summary_line="$(echo "$report" | grep '^report: ')"
calls=$(echo "$summary_line" | sed -nE 's/^report: ([0-9]+) calls.*/\1/p')
kinds=$(echo "$summary_line" | sed -nE 's/.* ([0-9]+) kinds.*/\1/p')
echo
echo "tps: $tps (without connection time), pgbench exit status $status"

# Every SQL error of a client or of the worker is also in the server log.
server_errors="$(tail -c +"$((log_offset + 1))" "$server_log" | grep -E ' (ERROR|FATAL|PANIC):  |terminated by signal' || true)"
n_server_errors=$(printf '%s' "$server_errors" | grep -c . || true)
if [ "$n_server_errors" -gt 0 ]; then
  warn "load: $n_server_errors ERROR/FATAL/PANIC lines in the server log during the load:"
  echo "$server_errors" | head -n 20 >&2
  errors=$((errors + n_server_errors))
fi
lock_waits=$(tail -c +"$((log_offset + 1))" "$server_log" | grep -c 'still waiting for' || true)
echo "server log during the load: $n_server_errors ERROR/FATAL/PANIC lines, $lock_waits lock waits over deadlock_timeout"

# What the cleanup worker did in the runs it started during the load.
IFS='|' read -r w_runs w_rows w_sessions w_entries w_errors <<<"$(q -c "
  SELECT count(*), coalesce(sum(sessions_deleted + entries_deleted), 0), coalesce(sum(sessions_deleted), 0),
         coalesce(sum(entries_deleted), 0), count(error)
  FROM agent_memory.cleanup_runs
  WHERE triggered_by = 'worker' AND started_at BETWEEN '$load_start' AND '$load_end'")"
IFS='|' read -r m_runs m_rows <<<"$(q -c "
  SELECT count(*), coalesce(sum(sessions_deleted + entries_deleted), 0)
  FROM agent_memory.cleanup_runs
  WHERE triggered_by = 'manual' AND started_at BETWEEN '$load_start' AND '$load_end'")"
echo "worker: $w_runs runs removed $w_rows rows ($w_sessions sessions, $w_entries entries), $w_errors runs with an error;" \
     "manual cleanup_expired(): $m_runs runs removed $m_rows rows"
run_errors="$(q -c "SELECT run_id || ' ' || triggered_by || ' ' || started_at || ': ' || error
                    FROM agent_memory.cleanup_runs WHERE error IS NOT NULL ORDER BY run_id")"
if [ -n "$run_errors" ]; then
  warn "load: cleanup runs recorded errors:"
  echo "$run_errors" | head -n 20 >&2
  errors=$((errors + $(echo "$run_errors" | grep -c .)))
fi
worker_after="$(q -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup' AND datname = 'load'")"
if [ "$worker_after" != "$worker_pid" ]; then
  warn "load: the cleanup worker (pid $worker_pid) is gone or was restarted (now: '${worker_after:-none}')"
  errors=$((errors + 1))
fi
problems=0
if [ "$duration" -ge 5 ] && [ "$w_runs" -eq 0 ]; then
  warn "load: the worker removed nothing during the load: it was not exercised"
  problems=$((problems + 1))
fi

# Invariants of what the load left.
checks="$(q -F ': ' -v sessions="${SIZE[sessions]}" -f tests/load/check.sql)" || die "load: the checks failed to run"
echo "checks:"
echo "$checks" | sed 's/^/  /'
broken=$(echo "$checks" | awk -F': ' '$2 != 0' | grep -c . || true)
[ "$broken" -eq 0 ] || { warn "load: $broken invariants broken"; problems=$((problems + broken)); }

echo "runtime: $(( $(date +%s) - began )) s (logs: $log_dir, $server_log)"
echo "load: $duration s, $CLIENTS clients, $calls calls of $kinds kinds, $errors errors, worker removed $w_rows rows in $w_runs runs"
[ "$errors" -eq 0 ] && [ "$problems" -eq 0 ] && [ "$kinds" -eq "${#names[@]}" ] \
  || die "load: failed ($errors errors, $problems other problems, $kinds of ${#names[@]} kinds ran)"
