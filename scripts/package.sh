#!/usr/bin/env bash
# Build the installable package of agent_memory for PostgreSQL $PG: a
# tarball of the files `make install` would place, at their absolute paths
# (the library, the control file, the install script of this version, the
# upgrade scripts and the frozen install scripts of earlier releases).
#
#   PG=15 scripts/package.sh      -> target/package/agent_memory-VERSION-pg15-ARCH.tar.gz
#
# Install it on a machine with the same PostgreSQL major version with
#   tar -xzf agent_memory-VERSION-pg15-ARCH.tar.gz -C /
# then add agent_memory to shared_preload_libraries (see README).
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
"$REPO_ROOT/scripts/setup.sh"

version="$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -n 1)"
libdir="$("$PG_CONFIG" --pkglibdir)"
extdir="$("$PG_CONFIG" --sharedir)/extension"
tree="$REPO_ROOT/target/release/agent_memory-pg$PG"
out_dir="$REPO_ROOT/target/package"
tarball="$out_dir/agent_memory-$version-pg$PG-$(uname -m).tar.gz"

# The release metadata must agree on the version before anything ships.
meta_version="$(python3 -c 'import json, sys; m = json.load(open("META.json")); print(m["version"], m["provides"]["agent_memory"]["version"])')"
[ "$meta_version" = "$version $version" ] || die "META.json says '$meta_version', Cargo.toml says $version"

say "building the package of agent_memory $version for PostgreSQL $PG"
rm -rf "$tree"
cargo pgrx package --pg-config "$PG_CONFIG" 2>&1 | grep -Ev '^\s+(Compiling|Checking)' || die "cargo pgrx package failed"
install -m 644 sql/released/agent_memory--*.sql "$tree$extdir/"

# Everything an install needs must be in the tree.
for file in "$libdir/agent_memory.so" "$extdir/agent_memory.control" "$extdir/agent_memory--$version.sql"; do
  [ -f "$tree$file" ] || die "the package lacks $file"
done
for upgrade in sql/agent_memory--*--*.sql; do
  [ -f "$tree$extdir/$(basename "$upgrade")" ] || die "the package lacks the upgrade script $(basename "$upgrade")"
done

mkdir -p "$out_dir"
tar -czf "$tarball" --owner=0 --group=0 -C "$tree" .
say "package: $tarball"
tar -tzf "$tarball" | grep -v '/$' | sed 's/^\./  /'
