#!/usr/bin/env bash
# A throwaway Citus cluster on loopback: one coordinator and two workers,
# each a cluster of scripts/cluster.sh (citus-coordinator, citus-worker-1,
# citus-worker-2) preloading citus and agent_memory. Database "memory" is
# made on every node with Citus's extension in it, and the workers are
# added to the coordinator; agent_memory is not created (the caller runs
# CREATE EXTENSION and sql/citus.sql). The cleanup worker of each node
# stays in database postgres, without the extension (see docs/scaling.md).
#
#   scripts/citus.sh start [--fresh]   start (and set up) the three nodes
#   scripts/citus.sh stop              stop them
#   scripts/citus.sh env [NODE]        PGHOST/PGPORT/... lines of database
#                                      memory on the coordinator (or on
#                                      worker-1, worker-2)
#
# Needs Citus 13.2 installed for PostgreSQL 15 (../shared/citus/install.sh
# installs the build this project was tested with). PostgreSQL 15 only.
source "$(dirname "$0")/lib.sh"

[ "$PG" = 15 ] || die "the Citus cluster runs on PostgreSQL 15 (Citus is installed for it), not $PG"

NODES=(coordinator worker-1 worker-2)

citus_installed() {
  [ -f "$("$PG_CONFIG" --pkglibdir)/citus.so" ] \
    && [ -f "$("$PG_CONFIG" --sharedir)/extension/citus.control" ]
}

require_citus() {
  citus_installed && return
  die "Citus is not installed for PostgreSQL $PG ($("$PG_CONFIG" --pkglibdir)/citus.so is missing).
Install Citus 13.2 for PostgreSQL 15 first: ../shared/citus/install.sh, or a Citus package."
}

node_env() { PG=15 "$REPO_ROOT/scripts/cluster.sh" env "citus-$1" | sed 's/PGDATABASE=postgres/PGDATABASE=memory/'; }

# psql on node $1 as the superuser, in database memory.
on_node() {
  local node="$1"; shift
  ( eval "$(node_env "$node")"; "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@" )
}

port_of() { ( eval "$(node_env "$1")"; echo "$PGPORT" ); }

case "${1:-}" in
  start)
    require_citus
    # Citus must load first (it refuses to come after a library that set a
    # hook); agent_memory's settings are the same on every node.
    for node in "${NODES[@]}"; do
      CLUSTER_CONF="shared_preload_libraries = 'citus,agent_memory'
citus.enable_unsafe_triggers = on
max_prepared_transactions = 20
wal_level = logical
${CITUS_CONF:-}" PG=15 "$REPO_ROOT/scripts/cluster.sh" start "citus-$node" ${2:-} >/dev/null
    done
    for node in "${NODES[@]}"; do
      on_node "$node" -d postgres -tA -c "SELECT 1 FROM pg_database WHERE datname = 'memory'" | grep -q 1 \
        || on_node "$node" -d postgres -c "CREATE DATABASE memory"
      on_node "$node" -c "CREATE EXTENSION IF NOT EXISTS citus"
    done
    coordinator_port="$(port_of coordinator)"
    on_node coordinator -c "SELECT citus_set_coordinator_host('127.0.0.1', $coordinator_port)" >/dev/null
    for worker in worker-1 worker-2; do
      on_node coordinator -c "SELECT citus_add_node('127.0.0.1', $(port_of "$worker"))
                              WHERE NOT EXISTS (SELECT FROM pg_dist_node WHERE nodeport = $(port_of "$worker"))" >/dev/null
    done
    ;;
  stop)
    for node in "${NODES[@]}"; do PG=15 "$REPO_ROOT/scripts/cluster.sh" stop "citus-$node"; done
    ;;
  env)
    node_env "${2:-coordinator}"
    ;;
  *) die "usage: citus.sh start [--fresh] | stop | env [coordinator|worker-1|worker-2]" ;;
esac
