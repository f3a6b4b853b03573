#!/usr/bin/env bash
# The runnable examples of examples/: the client agent loops (psycopg,
# SQLAlchemy, Node.js pg; see examples/SCENARIO.md) and the LLM wiring
# (Anthropic's and OpenAI's SDKs with recorded responses), each in a fresh
# database of a throwaway cluster with the extension installed; the
# comparison of claude_memory with Anthropic's SDK memory tool, answer by
# answer (tests/claude_dialect); and the check of sql/citus.sql against
# stand-ins of Citus's functions (scripts/citus_check.sh, which makes its
# own databases). Installs what they need first: virtualenvs with
# examples/python/requirements.txt and tests/claude_dialect/requirements.txt,
# Node.js and npm (Debian), and examples/node's locked packages.
#
#   PG=15 scripts/examples.sh [name ...]     (all examples by default)
#
# Prints one line per example and "examples: N passed, M failed"; exits
# non-zero when one failed. scripts/test.sh runs it as its layer "examples".
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

PYTHON="$EXAMPLES_VENV/bin/python"
DIALECT_VENV="${AGENT_MEMORY_DIALECT_VENV:-/opt/agent_memory/dialect-venv}"

# name | directory | command (run with PGDATABASE set to a fresh database)
EXAMPLES=(
  "psycopg|examples/python|$PYTHON psycopg_agent.py"
  "sqlalchemy|examples/python|$PYTHON sqlalchemy_agent.py"
  "node|examples/node|node agent.mjs"
  "anthropic|examples/llm|$PYTHON anthropic_wiring.py"
  "openai|examples/llm|$PYTHON openai_wiring.py"
  "dialect|tests/claude_dialect|$DIALECT_VENV/bin/python differential.py --steps 1000 --seed 1"
  "citus|.|scripts/citus_check.sh"
)

setup_python() {
  setup_venv "$EXAMPLES_VENV" examples/python/requirements.txt
  setup_venv "$DIALECT_VENV" tests/claude_dialect/requirements.txt
}

setup_node() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    say "installing Node.js and npm (Debian)"
    [ "$(id -u)" = 0 ] || die "installing nodejs and npm needs root"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  fi
  # npm ci only when the lock file changed since the last install.
  local stamp=examples/node/node_modules/.package-lock.json
  if [ ! -f "$stamp" ] || [ examples/node/package-lock.json -nt "$stamp" ]; then
    say "npm ci in examples/node"
    (cd examples/node && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

selected=("$@")
wanted() {
  [ ${#selected[@]} -eq 0 ] && return 0
  local name; for name in "${selected[@]}"; do [ "$name" = "$1" ] && return 0; done
  return 1
}

setup_python
setup_node

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
