#!/usr/bin/env bash
# Every test layer of agent_memory against PostgreSQL $PG, stopping at the
# first red one, ending with one summary line:
#   1. unit        plain Rust tests of the pure core and the MCP server (no database)
#   2. pg_test     #[pg_test] functions inside a server (cargo pgrx test)
#   3. regress     pg_regress suites: SQL in, exact output out
#   4. integration real client connections to a running, preloaded cluster
#   5. examples    the client examples (psycopg, SQLAlchemy, Node.js pg), the
#                  MCP server through the Python and TypeScript MCP SDKs, and
#                  the LLM wiring examples, each against a fresh database
#
#   PG=15 scripts/test.sh [layer ...]     (all layers by default)
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

layers=("$@")
[ ${#layers[@]} -gt 0 ] || layers=(unit pg_test regress integration examples)

"$REPO_ROOT/scripts/setup.sh"

passed=0; failed=0
declare -a report=()
log_dir="$(scratch_dir "logs-pg$PG")"

finish() {
  printf '\n'
  for line in "${report[@]}"; do echo "  $line"; done
  echo "pg$PG: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# Count cargo's "test result: ok. N passed; M failed" lines in a log.
cargo_counts() {
  awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i) ~ /^passed/) p += $(i-1); if ($(i) ~ /^failed/) f += $(i-1) } }
       END { printf "%d %d\n", p, f }' "$1"
}

record() { # layer passed failed
  passed=$((passed + $2)); failed=$((failed + $3))
  report+=("$(printf '%-12s %4d passed, %d failed' "$1" "$2" "$3")")
}

run_cargo_layer() { # layer log-name command...
  local layer="$1" log="$log_dir/$2.log"; shift 2
  say "layer $layer: $*"
  local status=0
  "$@" 2>&1 | tee "$log" | grep -E '^(test |test result:|error|warning: unused|thread )' || true
  status=${PIPESTATUS[0]}
  read -r p f < <(cargo_counts "$log")
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; tail -n 40 "$log"; fi
  # What each failed test said (the filter above keeps only its first line).
  [ "$f" -eq 0 ] || grep -A 15 'panicked at' "$log" | head -n 120
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; warn "layer $layer ran no test"; fi
  record "$layer" "$p" "$f"
  [ "$f" -eq 0 ] || { finish; exit 1; }
}

layer_unit() {
  run_cargo_layer unit unit cargo test -p agent_memory_core -p agent_memory_mcp
}

layer_pg_test() {
  local pgdata; pgdata="$(scratch_dir "pgrx-test-pg$PG")"
  detach_installed_library
  run_cargo_layer pg_test pg_test cargo pgrx test "pg$PG" --runas "$PG_OS_USER" --pgdata "$pgdata"
}

layer_regress() {
  "$REPO_ROOT/scripts/install.sh"
  say "layer regress: pg_regress tests/pg_regress"
  local work; work="$(scratch_dir "regress-pg$PG")"
  local tests; tests=$(cd tests/pg_regress/sql && ls *.sql | sed 's/\.sql$//' | sort)
  local status=0
  run_suites "$PG_REGRESS" tests/pg_regress "$work" agent_memory_regress $tests || status=$?
  grep -E '^(ok|not ok|test |     |# |\+\+\+)' "$work/run.log" || cat "$work/run.log"
  local p f
  p=$(grep -cE '^(ok |test .* \.\.\. ok)' "$work/run.log" || true)
  f=$(grep -cE '^(not ok |test .* \.\.\. FAILED)' "$work/run.log" || true)
  if [ "$status" -ne 0 ]; then
    [ "$f" -gt 0 ] || f=1
    [ -f "$work/output/regression.diffs" ] && head -n 200 "$work/output/regression.diffs"
  fi
  record regress "$p" "$f"
  [ "$f" -eq 0 ] || { finish; exit 1; }
}

layer_integration() {
  "$REPO_ROOT/scripts/install.sh"
  # A 1-second cleanup interval, so the worker tests see it act quickly.
  CLUSTER_CONF="agent_memory.cleanup_interval = 1" "$REPO_ROOT/scripts/cluster.sh" start test --fresh
  trap '"$REPO_ROOT/scripts/cluster.sh" stop test' EXIT
  eval "$("$REPO_ROOT/scripts/cluster.sh" env test)"
  export AGENT_MEMORY_PG_BINDIR="$PG_BINDIR"
  # One at a time: some tests restart or reconfigure the shared cluster.
  run_cargo_layer integration integration cargo test -p agent_memory_integration -- --test-threads=1
}

layer_examples() {
  "$REPO_ROOT/scripts/install.sh"
  say "layer examples: scripts/examples.sh"
  local log="$log_dir/examples.log" status=0
  "$REPO_ROOT/scripts/examples.sh" 2>&1 | tee "$log" || status=$?
  local p f
  read -r p f < <(sed -nE 's/^examples: ([0-9]+) passed, ([0-9]+) failed$/\1 \2/p' "$log" | tail -n 1) || true
  p="${p:-0}"; f="${f:-0}"
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; warn "layer examples ran no example"; fi
  record examples "$p" "$f"
  [ "$f" -eq 0 ] || { finish; exit 1; }
}

for layer in "${layers[@]}"; do
  case "$layer" in
    unit|pg_test|regress|integration|examples) "layer_$layer" ;;
    *) die "unknown layer '$layer' (unit, pg_test, regress, integration, examples)" ;;
  esac
done
finish
