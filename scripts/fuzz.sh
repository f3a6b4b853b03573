#!/usr/bin/env bash
# Fuzz the pure core (agent_memory_core) with cargo-fuzz (libFuzzer) for a
# fixed time per target, and fail on any panic. Installs what is missing
# (a C++ compiler for libFuzzer, cargo-fuzz), builds every target in fuzz/
# once, then runs them one after the other (one process, one core), each on
# a copy of its checked-in corpus fuzz/corpus/<target>/, so the tree stays
# clean.
#
#   scripts/fuzz.sh              30 seconds per target
#   scripts/fuzz.sh 300          5 minutes per target
#   FUZZ_TARGETS="paths refs" scripts/fuzz.sh 60
#
# Environment:
#   FUZZ_TARGETS              targets to run (default: every fuzz/fuzz_targets/*.rs)
#   FUZZ_SANITIZER            cargo fuzz --sanitizer (default none: the core has
#                             no unsafe code, so a sanitizer only slows it; panics,
#                             overflow checks and debug assertions are on anyway)
#   AGENT_MEMORY_FUZZ_OUT     where the corpus copies, logs and crashing inputs go
#                             (default $SCRATCH/fuzz, emptied at each run)
#
# The toolchain: nightly when rustup has it; otherwise the default toolchain
# with RUSTC_BOOTSTRAP=1 (cargo-fuzz passes nightly-only flags to rustc).
#
# Prints one line per target and `fuzz: N targets, N executions, N crashes`;
# exits 1 on a crash, a timeout or an out-of-memory, naming the input that
# caused it.
source "$(dirname "$0")/lib.sh"

CARGO_FUZZ_VERSION="0.13.2"
MAX_LEN=65536        # bytes of one input
RSS_LIMIT_MB=2048    # memory of the fuzzing process
UNIT_TIMEOUT=10      # seconds one input may take before it counts as a hang

seconds="${1:-30}"
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/fuzz.sh [seconds-per-target], not '$seconds'"
FUZZ_DIR="$REPO_ROOT/fuzz"
OUT="${AGENT_MEMORY_FUZZ_OUT:-$SCRATCH/fuzz}"
SANITIZER="${FUZZ_SANITIZER:-none}"

if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<< "$FUZZ_TARGETS"
else
  targets=()
  for src in "$FUZZ_DIR"/fuzz_targets/*.rs; do targets+=("$(basename "$src" .rs)"); done
fi
for t in "${targets[@]}"; do
  [ -f "$FUZZ_DIR/fuzz_targets/$t.rs" ] || die "no fuzz target '$t' in fuzz/fuzz_targets/"
done

# libFuzzer itself is C++, compiled by the libfuzzer-sys build script.
if ! command -v c++ >/dev/null; then
  say "installing Debian package: g++ (libFuzzer is C++)"
  [ "$(id -u)" = 0 ] || die "installing g++ needs root"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
fi
command -v cargo >/dev/null || die "cargo is missing: install the Rust toolchain (rustup) first"
if ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

toolchain=()
bootstrap=()
if command -v rustup >/dev/null && rustup toolchain list | grep -q '^nightly'; then
  toolchain=(+nightly)
else
  bootstrap=(env RUSTC_BOOTSTRAP=1)
  warn "no nightly toolchain: building with $(rustc --version) and RUSTC_BOOTSTRAP=1"
fi
triple="$(rustc "${toolchain[@]}" -vV | sed -n 's/^host: //p')"

say "building ${#targets[@]} fuzz targets ($(rustc "${toolchain[@]}" --version), sanitizer $SANITIZER)"
build() {
  nice -n 10 "${bootstrap[@]}" cargo "${toolchain[@]}" fuzz build --fuzz-dir "$FUZZ_DIR" \
    --target "$triple" --sanitizer "$SANITIZER" --debug-assertions "$@"
}
if [ -n "${FUZZ_TARGETS:-}" ]; then
  for t in "${targets[@]}"; do build "$t"; done
else
  build
fi
BIN_DIR="$FUZZ_DIR/target/$triple/release"

rm -rf "$OUT"
mkdir -p "$OUT"
say "fuzzing ${#targets[@]} targets for ${seconds}s each (corpus copies, logs and crashes in $OUT)"
total_runs=0
failures=0
for t in "${targets[@]}"; do
  corpus="$OUT/corpus/$t"
  artifacts="$OUT/artifacts/$t"
  log="$OUT/$t.log"
  mkdir -p "$corpus" "$artifacts"
  [ -d "$FUZZ_DIR/corpus/$t" ] && cp -R "$FUZZ_DIR/corpus/$t/." "$corpus/"
  seeds="$(find "$corpus" -type f | wc -l)"
  rc=0
  nice -n 10 "$BIN_DIR/$t" "$corpus" \
    -max_total_time="$seconds" -max_len="$MAX_LEN" -rss_limit_mb="$RSS_LIMIT_MB" \
    -timeout="$UNIT_TIMEOUT" -print_final_stats=1 -artifact_prefix="$artifacts/" \
    > "$log" 2>&1 || rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  # Without final stats (a crash before them), the last status line: "#1234 ...".
  [ -n "$runs" ] || runs="$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)"
  runs="${runs:-0}"
  total_runs=$((total_runs + runs))
  units="$(find "$corpus" -type f | wc -l)"
  if [ "$rc" = 0 ]; then
    line="$(printf 'fuzz %-10s ok     %10s executions, corpus %s -> %s inputs' "$t" "$runs" "$seeds" "$units")"
  else
    failures=$((failures + 1))
    input="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
    line="$(printf 'fuzz %-10s FAILED %10s executions, exit %s, input %s' "$t" "$runs" "$rc" "${input:-(none written; see $log)}")"
    warn "$t failed (exit $rc); from $log:"
    grep -m 1 -A 3 -E "panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer|==ERROR" "$log" >&2 || tail -n 20 "$log" >&2
    [ -n "$input" ] && warn "reproduce: $BIN_DIR/$t $input"
  fi
  echo "$line"
done
echo "fuzz: ${#targets[@]} targets, $total_runs executions, $failures crashes"
[ "$failures" = 0 ] || exit 1
