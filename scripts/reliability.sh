#!/usr/bin/env bash
# The promises that tests try to break, against PostgreSQL $PG, each part
# printing its figures, then one summary:
#   upgrade  every earlier release updated to this one, pg_dump/pg_restore
#            (scripts/upgrade_test.sh)
#   hostile  a corpus of hostile arguments through every SQL function
#            (tests/integration/tests/hostile_input.rs)
#   tenants  every function and direct SQL on every table run by one tenant
#            at another's memory, and each tenant's notifications on its
#            own channel (tests/integration/tests/tenant_{isolation,notifications}.rs)
#   planted  every function called with objects planted on the search_path
#            (tests/integration/tests/planted_objects.rs)
#   crash    backends killed mid-write, an immediate stop under load, the
#            worker killed mid-batch, the worker's exit on SIGTERM
#            (tests/integration/tests/{crash,worker}.rs)
#   memory   each call's peak memory over hundreds of megabytes stored,
#            against its documented bound (tests/integration/tests/memory_peaks.rs)
#   isolation  interleavings of concurrent calls, as specs for PostgreSQL's
#            isolation tester (tests/isolation/{specs,expected})
#   load     a mixed pgbench load of every capability with the worker busy
#            (scripts/load_test.sh; LOAD_SECONDS, default 60)
#   fuzz     the pure core under cargo fuzz for a fixed budget
#            (scripts/fuzz.sh; FUZZ_SECONDS per target, default 20)
#
#   PG=15 scripts/reliability.sh [part ...]     (all parts by default)
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(upgrade isolation hostile tenants planted crash memory load fuzz)

"$REPO_ROOT/scripts/setup.sh"
log_dir="$(scratch_dir "reliability-pg$PG")"
declare -a summary=()

part_upgrade() {
  "$REPO_ROOT/scripts/install.sh"
  "$REPO_ROOT/scripts/upgrade_test.sh" 2>&1 | tee "$log_dir/upgrade.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "reliability: upgrade failed"
  summary+=("$(grep -E '^upgrade: [0-9.]+ -> ' "$log_dir/upgrade.log")")
  summary+=("$(grep -E '^upgrade: suites' "$log_dir/upgrade.log")")
}

# One integration test file (or its tests matching $3) against a fresh
# preloaded cluster of its own; its summary line (starting with $2) goes
# into the report.
run_integration_test() { # test-file summary-prefix [test-name-filter]
  "$REPO_ROOT/scripts/install.sh"
  CLUSTER_CONF="agent_memory.cleanup_interval = 1" "$REPO_ROOT/scripts/cluster.sh" start reliability --fresh >/dev/null
  trap '"$REPO_ROOT/scripts/cluster.sh" stop reliability' EXIT
  eval "$("$REPO_ROOT/scripts/cluster.sh" env reliability)"
  export AGENT_MEMORY_PG_BINDIR="$PG_BINDIR"
  local status=0
  cargo test -p agent_memory_integration --test "$1" -- ${3:-} --test-threads=1 --nocapture >"$log_dir/$1.log" 2>&1 || status=$?
  grep -E "($2|^test result|^test .* \.\.\. |^  [0-9A-Z]{5} )" "$log_dir/$1.log" || true
  "$REPO_ROOT/scripts/cluster.sh" stop reliability
  trap - EXIT
  [ "$status" -eq 0 ] || { tail -n 60 "$log_dir/$1.log"; die "reliability: $1 failed (log: $log_dir/$1.log)"; }
  # libtest prints "test NAME ... " before a test's own output, on its line.
  while IFS= read -r line; do summary+=("$line"); done < <(grep -oE "$2.*" "$log_dir/$1.log")
}

part_hostile() { run_integration_test hostile_input "hostile_input: "; }
part_tenants() {
  run_integration_test tenant_isolation "tenants: "
  run_integration_test tenant_notifications "notify: "
}
part_planted() { run_integration_test planted_objects "planted: "; }
part_crash() {
  run_integration_test crash "crash: "
  run_integration_test worker "worker: exit on SIGTERM" sigterm_ends_the_worker_inside_a_long_batch
}
part_memory() { run_integration_test memory_peaks "memory: "; }

part_isolation() {
  "$REPO_ROOT/scripts/install.sh"
  local work; work="$(scratch_dir "isolation-pg$PG")"
  local specs; specs=$(cd tests/isolation/specs && ls *.spec | sed 's/\.spec$//' | sort)
  local status=0
  run_suites "$PG_ISOLATION_REGRESS" tests/isolation "$work" agent_memory_isolation $specs || status=$?
  grep -E '^(ok|not ok|test |# )' "$work/run.log" || cat "$work/run.log"
  if [ "$status" -ne 0 ]; then
    [ -f "$work/output/regression.diffs" ] && head -n 150 "$work/output/regression.diffs"
    die "reliability: isolation specs failed"
  fi
  local n_specs n_perms
  n_specs=$(echo "$specs" | grep -c .)
  # Every permutation the tester ran prints one "starting permutation" line.
  n_perms=$(cat "$work/output/results/"*.out | grep -c '^starting permutation')
  summary+=("isolation: $n_perms interleavings in $n_specs specs, each with its expected outcome")
}

part_load() {
  "$REPO_ROOT/scripts/install.sh"
  "$REPO_ROOT/scripts/load_test.sh" "${LOAD_SECONDS:-60}" 2>&1 | tee "$log_dir/load.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "reliability: the load test failed"
  summary+=("$(grep -E '^load: ' "$log_dir/load.log" | tail -n1)")
}

part_fuzz() {
  "$REPO_ROOT/scripts/fuzz.sh" "${FUZZ_SECONDS:-20}" 2>&1 | tee "$log_dir/fuzz.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "reliability: fuzzing found a crash"
  summary+=("$(grep -E '^fuzz: ' "$log_dir/fuzz.log" | tail -n1)")
}

for part in "${parts[@]}"; do
  case "$part" in
    upgrade|isolation|hostile|tenants|planted|crash|memory|load|fuzz) say "reliability: $part"; "part_$part" ;;
    *) die "unknown part '$part' (upgrade, isolation, hostile, tenants, planted, crash, memory, load, fuzz)" ;;
  esac
done

printf '\n'
for line in "${summary[@]}"; do echo "  $line"; done
# The figures the issue asks for, from the parts' lines ("-": part not run).
all="$(printf '%s\n' "${summary[@]}")"
figure() { # regex-with-one-number: sums the number over every matching line
  local n; n=$(grep -oE "$1" <<<"$all" | grep -oE '[0-9]+' | awk '{ s += $1 } END { if (NR) print s }')
  echo "${n:--}"
}
echo "reliability pg$PG (${parts[*]}): interleavings tried $(figure '[0-9]+ interleavings')," \
  "crashes survived $(figure '[0-9]+ crashes survived')," \
  "hostile inputs tried $(figure 'hostile_input: [0-9]+ calls')," \
  "tenant writes at another's keys $(figure "[0-9]+ direct writes at another tenant's keys") ($(figure ', [0-9]+ refused') refused, $(figure '[0-9]+ reached its rows') reached its rows)," \
  "notify payloads checked $(figure 'notify: [0-9]+ payloads checked')," \
  "worker exit on SIGTERM $(figure 'exit on SIGTERM inside a batch took [0-9]+ ms') ms and on postmaster death $(figure 'exit after postmaster death took [0-9]+ ms') ms," \
  "calls within their memory bound $(figure '[0-9]+ within their bounds')/$(figure 'memory: [0-9]+ calls')," \
  "internal errors $(figure '[0-9]+ internal errors')," \
  "rows lost $(figure '[0-9]+ rows lost'): all held"
