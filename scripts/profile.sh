#!/usr/bin/env bash
# Instructions per call, counted by callgrind (bench/profile.py): each call of
# bench/profile.toml against its plain-SQL baseline, in a single-user backend.
#   make profile [PG=18] [PROFILE_CALLS="kv_set,kv_get"]
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/setup.sh"
if ! command -v valgrind >/dev/null || ! command -v callgrind_annotate >/dev/null; then
  say "installing valgrind"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi
"$REPO_ROOT/scripts/install.sh"
export CLUSTER_CONF="jit = off
agent_memory.database = 'agent_memory_bench'
agent_memory.cleanup_interval = '1h'"
"$REPO_ROOT/scripts/cluster.sh" start profile --fresh
trap '"$REPO_ROOT/scripts/cluster.sh" stop profile' EXIT
eval "$("$REPO_ROOT/scripts/cluster.sh" env profile)"
PG_BINDIR="$PG_BINDIR" PG_DATA="$SCRATCH/profile-pg$PG/data" PG_OS_USER="$PG_OS_USER" \
  CLUSTER_SCRIPT="$REPO_ROOT/scripts/cluster.sh" python3 bench/profile.py
