#!/usr/bin/env bash
# Benchmarks: install, start a throwaway "bench" cluster, run bench/run.py.
#   make bench [PG=18] [BENCH_CASES=a,b] [BENCH_SECONDS=10] [BENCH_ROUNDS=3]
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/setup.sh"
"$REPO_ROOT/scripts/install.sh"
# Commit durability is off so the figures compare CPU work, not fsync latency
# (which would make every ratio look like 1).
CLUSTER_CONF="shared_buffers = '512MB'
synchronous_commit = off
max_wal_size = '4GB'
jit = off" "$REPO_ROOT/scripts/cluster.sh" start bench --fresh
trap '"$REPO_ROOT/scripts/cluster.sh" stop bench' EXIT
eval "$("$REPO_ROOT/scripts/cluster.sh" env bench)"
PG_BINDIR="$PG_BINDIR" python3 bench/run.py
