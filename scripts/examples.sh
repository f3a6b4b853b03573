#!/usr/bin/env bash
# The runnable examples of examples/: the client agent loops (psycopg,
# SQLAlchemy, Node.js pg; see examples/SCENARIO.md) and the LLM wiring
# (Anthropic's and OpenAI's SDKs with recorded responses), each in a fresh
# database of a throwaway cluster with the extension installed; the
# comparison of claude_memory with Anthropic's SDK memory tool, answer by
# answer (tests/claude_dialect); and the check of sql/citus.sql against
# stand-ins of Citus's functions (scripts/citus_check.sh, which makes its
# own databases); and the MCP server (mcp/) driven by the official Python
# and TypeScript MCP SDKs (tests/mcp). Installs what they need first:
# virtualenvs with examples/python/requirements.txt,
# tests/claude_dialect/requirements.txt and tests/mcp/requirements.txt,
# Node.js and npm (Debian), the locked packages of examples/node and
# tests/mcp/node, and a build of the server.
#
#   PG=15 scripts/examples.sh [name ...]     (all examples by default)
#
# Prints one line per example and "examples: N passed, M failed"; exits
# non-zero when one failed. scripts/test.sh runs it as its layer "examples".
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

PYTHON="$EXAMPLES_VENV/bin/python"
DIALECT_VENV="${AGENT_MEMORY_DIALECT_VENV:-/opt/agent_memory/dialect-venv}"
MCP_VENV="${AGENT_MEMORY_MCP_VENV:-/opt/agent_memory/mcp-venv}"

# name | directory | command (run with PGDATABASE set to a fresh database)
EXAMPLES=(
  "psycopg|examples/python|$PYTHON psycopg_agent.py"
  "sqlalchemy|examples/python|$PYTHON sqlalchemy_agent.py"
  "node|examples/node|node agent.mjs"
  "anthropic|examples/llm|$PYTHON anthropic_wiring.py"
  "openai|examples/llm|$PYTHON openai_wiring.py"
  "dialect|tests/claude_dialect|$DIALECT_VENV/bin/python differential.py --steps 1000 --seed 1"
  "citus|.|scripts/citus_check.sh"
  "mcp_python|tests/mcp|$MCP_VENV/bin/python python_client.py"
  "mcp_node|tests/mcp/node|node client.mjs"
)

setup_python() {
  setup_venv "$EXAMPLES_VENV" examples/python/requirements.txt
  setup_venv "$DIALECT_VENV" tests/claude_dialect/requirements.txt
  setup_venv "$MCP_VENV" tests/mcp/requirements.txt
}

setup_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    say "installing Node.js and npm (Debian)"
    [ "$(id -u)" = 0 ] || die "installing nodejs and npm needs root"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  # npm ci only when the lock file changed since the last install.
  local dir
  for dir in examples/node tests/mcp/node; do
    if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
      say "npm ci in $dir"
      (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
}

# The MCP server the tests in tests/mcp start (MCP_SERVER names it).
build_mcp_server() {
  say "building the MCP server (cargo build -p agent_memory_mcp)"
  cargo build -q -p agent_memory_mcp
  export MCP_SERVER="$REPO_ROOT/target/debug/agent-memory-mcp"
}

selected=("$@")
wanted() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local name; for name in "${selected[@]}"; do [ "$name" = "$1" ] && return 0; done
  return 1
}

setup_python
setup_node
if wanted mcp_python || wanted mcp_node; then build_mcp_server; fi

"$REPO_ROOT/scripts/cluster.sh" start clients --fresh
trap '"$REPO_ROOT/scripts/cluster.sh" stop clients' EXIT
eval "$("$REPO_ROOT/scripts/cluster.sh" env clients)"
export PG_BINDIR
psql=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
log_dir="$(scratch_dir "logs-pg$PG")"

passed=0; failed=0
declare -a report=()
for entry in "${EXAMPLES[@]}"; do
  IFS='|' read -r name dir command <<<"$entry"
  wanted "$name" || continue
  db="example_$name"
  "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  "${psql[@]}" -d "$db" -c "CREATE EXTENSION agent_memory"
  say "example $name: (cd $dir && PGDATABASE=$db $command)"
  log="$log_dir/example-$name.log"
  status=0
  (cd "$dir" && PGDATABASE="$db" $command) 2>&1 | tee "$log" || status=$?
  checks=$(grep -cE '^ok\b' "$log" || true)
  if [ "$status" -eq 0 ] && [ "$checks" -gt 0 ]; then
    passed=$((passed + 1)); report+=("$(printf 'ok      %-11s %3d checks' "$name" "$checks")")
  else
    failed=$((failed + 1)); report+=("$(printf 'FAILED  %-11s exit %s, %d checks passed (log: %s)' "$name" "$status" "$checks" "$log")")
  fi
  "${psql[@]}" -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
done

printf '\n'
for line in "${report[@]}"; do echo "  $line"; done
echo "examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
