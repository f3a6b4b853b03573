#!/usr/bin/env bash
# The promises that tests try to break, against PostgreSQL $PG, each part
# printing its figures, then one summary:
#   upgrade  every earlier release updated to this one, pg_dump/pg_restore
#            (scripts/upgrade_test.sh)
#   hostile  a corpus of hostile arguments through every SQL function
#            (tests/integration/tests/hostile_input.rs)
#   isolation  interleavings of concurrent calls, as specs for PostgreSQL's
#            isolation tester (tests/isolation/{specs,expected})
#   fuzz     the pure core under cargo fuzz for a fixed budget
#            (scripts/fuzz.sh; FUZZ_SECONDS per target, default 20)
#
#   PG=15 scripts/reliability.sh [part ...]     (all parts by default)
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(upgrade isolation)

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

part_hostile() {
  "$REPO_ROOT/scripts/install.sh"
  "$REPO_ROOT/scripts/cluster.sh" start reliability --fresh >/dev/null
  trap '"$REPO_ROOT/scripts/cluster.sh" stop reliability' EXIT
  eval "$("$REPO_ROOT/scripts/cluster.sh" env reliability)"
  export AGENT_MEMORY_PG_BINDIR="$PG_BINDIR"
  cargo test -p agent_memory_integration --test hostile_input -- --nocapture 2>&1 | tee "$log_dir/hostile.log" \
    | grep -E '^(hostile_input|test result|  [0-9A-Z]{5} )' || true
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "reliability: hostile input failed (log: $log_dir/hostile.log)"
  "$REPO_ROOT/scripts/cluster.sh" stop reliability
  trap - EXIT
  summary+=("$(grep -E '^hostile_input: ' "$log_dir/hostile.log")")
}

part_isolation() {
  "$REPO_ROOT/scripts/install.sh"
  local work; work="$(scratch_dir "isolation-pg$PG")"
  rm -rf "$work/input" "$work/output" "$work/tmp_check"
  cp -r tests/isolation "$work/input"
  cp tests/pg_regress/regress.conf "$work/input/"
  chown -R "$PG_OS_USER": "$work"
  local specs; specs=$(cd tests/isolation/specs && ls *.spec | sed 's/\.spec$//' | sort)
  local status=0
  as_pg_user "$PG_ISOLATION_REGRESS" \
    --bindir="$PG_BINDIR" \
    --temp-instance="$work/tmp_check" \
    --temp-config="$work/input/regress.conf" \
    --inputdir="$work/input" \
    --outputdir="$work/output" \
    --dbname=agent_memory_isolation \
    --load-extension=agent_memory \
    $specs > "$work/isolation.log" 2>&1 || status=$?
  grep -E '^(ok|not ok|test |# )' "$work/isolation.log" || cat "$work/isolation.log"
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

part_fuzz() {
  "$REPO_ROOT/scripts/fuzz.sh" "${FUZZ_SECONDS:-20}" 2>&1 | tee "$log_dir/fuzz.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || die "reliability: fuzzing found a crash"
  summary+=("$(grep -E '^fuzz: ' "$log_dir/fuzz.log" | tail -n1)")
}

for part in "${parts[@]}"; do
  case "$part" in
    upgrade|isolation|hostile|fuzz) say "reliability: $part"; "part_$part" ;;
    *) die "unknown part '$part' (upgrade, isolation, hostile, fuzz)" ;;
  esac
done

printf '\n'
for line in "${summary[@]}"; do echo "  $line"; done
echo "reliability pg$PG: ${parts[*]}: all held"
