#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for the demo, the tests and the benchmarks.
# Each is owned by the postgres OS user, listens on 127.0.0.1 and a private
# socket directory, and preloads agent_memory.
#
#   scripts/cluster.sh start NAME [--fresh]   start (restart if running; --fresh wipes it first)
#   scripts/cluster.sh stop NAME              stop it (no error if it is not running)
#   scripts/cluster.sh env NAME               print PGHOST/PGPORT/... lines to eval
#   scripts/cluster.sh status NAME
#
# PG=15|18 picks the PostgreSQL; CLUSTER_CONF may hold extra postgresql.conf lines.
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; name="${2:-}"
[ -n "$cmd" ] && [ -n "$name" ] || die "usage: cluster.sh start|stop|env|status NAME [--fresh]"
dir="$SCRATCH/$name-pg$PG"
data="$dir/data"

# A port is taken when something listens on it, or when any socket holds
# it: these ports lie in the range the kernel hands out to outgoing
# connections, and one of those makes the server's bind fail too.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
  ! python3 -c "import socket, sys; socket.socket().bind(('127.0.0.1', int(sys.argv[1])))" "$1" 2>/dev/null
}

running() { [ -f "$data/postmaster.pid" ] && as_pg_user "$PG_BINDIR/pg_ctl" -D "$data" status >/dev/null 2>&1; }

pick_port() {
  # A stable port per (name, version), or the next free one after it (and
  # after $1, a port that failed).
  local base=$(( 54000 + PG * 10 + $(printf '%s' "$name" | cksum | cut -d' ' -f1) % 10 * 100 ))
  local port
  for port in $(seq "$base" $((base + 50))); do
    [ "$port" -gt "${1:-0}" ] || continue
    if ! port_in_use "$port"; then echo "$port"; return; fi
    warn "port $port is taken, trying the next one"
  done
  die "no free port in $base..$((base + 50))"
}

print_env() {
  echo "export PGHOST=$dir PGPORT=$(cat "$dir/port") PGUSER=postgres PGDATABASE=postgres"
}

case "$cmd" in
  start)
    if running; then
      as_pg_user "$PG_BINDIR/pg_ctl" -D "$data" stop -m fast -w >/dev/null
    fi
    [ "${3:-}" = "--fresh" ] && rm -rf "$dir"
    scratch_dir "$name-pg$PG" >/dev/null
    if [ ! -f "$data/PG_VERSION" ]; then
      as_pg_user "$PG_BINDIR/initdb" -D "$data" -U postgres -A trust --no-sync \
        --locale=C.UTF-8 -E UTF8 >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    fi
    # A port can be taken between the check and the server's bind (by a
    # connection's local port): then the next one is tried.
    failed_port=0
    for attempt in 1 2 3 4 5; do
      port="$(pick_port "$failed_port")"
      echo "$port" > "$dir/port"
      # Our settings live in their own file, not in postgresql.auto.conf, so a
      # test's ALTER SYSTEM RESET cannot remove them.
      grep -q "^include 'cluster.conf'" "$data/postgresql.conf" \
        || echo "include 'cluster.conf'" | as_pg_user tee -a "$data/postgresql.conf" >/dev/null
      as_pg_user tee "$data/cluster.conf" >/dev/null <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
shared_preload_libraries = 'agent_memory'
lc_messages = 'C'
${CLUSTER_CONF:-}
CONF
      logged=0
      [ -f "$dir/server.log" ] && logged=$(wc -l < "$dir/server.log")
      if as_pg_user "$PG_BINDIR/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null; then
        break
      fi
      if [ "$attempt" -lt 5 ] && tail -n +"$((logged + 1))" "$dir/server.log" | grep -q "Address already in use"; then
        warn "port $port was taken before the server could bind it, trying the next one"
        failed_port=$port
        continue
      fi
      tail -n 20 "$dir/server.log" >&2
      die "the $name cluster did not start (log: $dir/server.log)"
    done
    ;;
  stop)
    if running; then as_pg_user "$PG_BINDIR/pg_ctl" -D "$data" stop -m fast -w >/dev/null; fi
    ;;
  env)
    [ -f "$dir/port" ] || die "the $name cluster was never started"
    print_env
    ;;
  status)
    if running; then echo "running: $(print_env)"; else echo "stopped"; exit 3; fi
    ;;
  *) die "unknown command '$cmd'" ;;
esac
