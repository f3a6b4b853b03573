#!/usr/bin/env bash
# The main job: install what is missing, build agent_memory in release mode,
# install it, start a throwaway cluster that preloads it, and run the quick
# start (examples/quickstart.sql) against it. Run it again at will: the demo
# cluster is recreated each time.
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"

"$REPO_ROOT/scripts/setup.sh"
"$REPO_ROOT/scripts/install.sh"
say "starting the demo cluster (PostgreSQL $PG, agent_memory preloaded)"
"$REPO_ROOT/scripts/cluster.sh" start demo --fresh
eval "$("$REPO_ROOT/scripts/cluster.sh" env demo)"

say "examples/quickstart.sql"
"$PG_BINDIR/psql" -X -v ON_ERROR_STOP=1 --echo-all -f examples/quickstart.sql

cat <<MSG

The demo cluster is running (PostgreSQL $PG, data in $SCRATCH/demo-pg$PG/data).
  connect:  $PG_BINDIR/psql -h $PGHOST -p $PGPORT -U postgres
  stop:     make stop$( [ "$PG" = 15 ] || echo " PG=$PG")

The MCP server against it, for any MCP client (docs/mcp.md):
  cargo build --release -p agent_memory_mcp
  target/release/agent-memory-mcp --dsn "host=$PGHOST port=$PGPORT user=postgres dbname=postgres" \\
      --scope demo --session demo --user demo --owner demo
MSG
