#!/usr/bin/env python3
"""Growth per key: a write or read of one owner (or scope) as that owner
grows, under statistics that do not know it.

Three huge owners and a thousand tiny ones are analysed first (the same
for memory-tool scopes); autovacuum is then off for the tables, so the
statistics never learn of the new owner, which grows from 10^3 nodes (or
files) to 10^5 (graph reads to 10^6). At each size one pgbench client
(-M prepared, BENCH_GROWTH_SECONDS per point) calls the operation on a
random node or directory of the growing owner; writes run inside
BEGIN ... ROLLBACK so that the owner keeps its size, and only the call's
own statement is timed. Each operation must stay flat: within 1.5× from
the smallest size to the largest.

Writes the table between the bench:growth-per-key markers of BENCHMARKS.md
and the plot BENCHMARKS-growth-per-key.svg next to it. Connection: the
libpq PG* variables of a running cluster (scripts/bench.sh starts one);
PG_BINDIR.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import growth  # noqa: E402  (pgbench latency of one statement, FLAT)
import run as bench  # noqa: E402  (psql, machine, BENCHMARKS.md location)

DB = "agent_memory_growth_per_key"
PLOT = bench.ROOT / "BENCHMARKS-growth-per-key.svg"
START, END = "<!-- bench:growth-per-key:start -->", "<!-- bench:growth-per-key:end -->"
SIZES = [int(s) for s in os.environ.get("BENCH_KEY_SIZES", "1000,10000,100000").split(",")]
# Graph reads go one step further.
READ_SIZES = SIZES + [SIZES[-1] * 10]
# The owners and scopes the statistics know: a few huge, many tiny.
BIG_KEYS, BIG_ROWS, TINY_KEYS = 3, 100_000, 1_000


def sql(statement: str) -> str:
    return bench.psql(statement, db=DB)


# Node g<k> of owner 'kg' sits under g<(k-1)/8>; file i of scope 'kf' is
# /d<i/100>/f<i>. :n is the owner's size at this step, :dirs its directories.
OPERATIONS = {
    "graph_create": dict(
        sizes=SIZES,
        script="""\\set p random(0, :n / 8 - 1)
BEGIN;
SELECT agent_memory.graph_create('kg', 'a new node', '', 'notes', ARRAY['g' || :p]);
ROLLBACK;
""",
        measure="graph_create"),
    "graph_write": dict(
        sizes=SIZES,
        script="""\\set i random(1, :n - 1)
BEGIN;
SELECT agent_memory.graph_write('kg', 'g' || :i, NULL, NULL, 'changed notes', change_description => 'why');
ROLLBACK;
""",
        measure="graph_write"),
    "graph_read": dict(
        sizes=READ_SIZES,
        script="""\\set i random(0, :n - 1)
SELECT length(agent_memory.graph_read('kg', 'g' || :i)::text);
""",
        measure="graph_read"),
    "memory_tool create": dict(
        sizes=SIZES,
        script="""\\set d random(0, :dirs - 1)
BEGIN;
SELECT agent_memory.memory_tool('kf', jsonb_build_object('command', 'append', 'path', '/d' || :d || '/new', 'content', 'x'));
ROLLBACK;
""",
        measure="memory_tool"),
    "memory_tool update": dict(
        sizes=SIZES,
        script="""\\set i random(0, :n - 1)
BEGIN;
SELECT agent_memory.memory_tool('kf', jsonb_build_object('command', 'update', 'path', '/d' || (:i / 100) || '/f' || :i, 'oldContent', 'notes', 'content', 'facts'));
ROLLBACK;
""",
        measure="memory_tool"),
    "claude_memory create": dict(
        sizes=SIZES,
        script="""\\set d random(0, :dirs - 1)
BEGIN;
SELECT agent_memory.claude_memory('kf', jsonb_build_object('command', 'create', 'path', '/memories/d' || :d || '/new.md', 'file_text', 'x'));
ROLLBACK;
""",
        measure="claude_memory"),
}


def skew() -> None:
    """The owners and scopes the statistics know, analysed; then no more
    statistics for these tables."""
    keys = f"""(SELECT 'big' || b AS key, {BIG_ROWS} AS n FROM generate_series(1, {BIG_KEYS}) b
                UNION ALL SELECT 'tiny' || t, 1 FROM generate_series(1, {TINY_KEYS}) t) keys,
               generate_series(1, keys.n) i"""
    sql(f"""INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, links, refs)
            SELECT keys.key, 'n' || i, 'node ' || i, '', 'notes of node ' || i, '{{}}', '{{}}' FROM {keys}""")
    sql(f"""INSERT INTO agent_memory.memory_files (scope, path, content)
            SELECT keys.key, '/d' || (i / 100) || '/f' || i, 'notes of file ' || i FROM {keys}""")
    for table in ("graph_nodes", "graph_node_versions", "memory_files", "memory_scopes"):
        sql(f"VACUUM ANALYZE agent_memory.{table}")
        sql(f"ALTER TABLE agent_memory.{table} SET (autovacuum_enabled = false)")
    sql("INSERT INTO agent_memory.memory_scopes (scope, files) VALUES ('kf', 0)")


def fill(n: int, had: int) -> None:
    """Grow owner 'kg' and scope 'kf' from `had` rows to `n`, without
    ANALYZE. A parent's refs list its children, as graph_create leaves them."""
    sql(f"""WITH kids AS (
              SELECT (k - 1) / 8 AS parent, array_agg('g' || k ORDER BY k) AS refs
              FROM generate_series(greatest({had}, 1), {n - 1}) k GROUP BY 1)
            UPDATE agent_memory.graph_nodes p SET links = p.links || k.refs, refs = p.refs || k.refs
            FROM kids k WHERE p.owner = 'kg' AND p.node_id = 'g' || k.parent""")
    sql(f"""WITH kids AS (
              SELECT (k - 1) / 8 AS parent, array_agg('g' || k ORDER BY k) AS refs
              FROM generate_series(greatest({had}, 1), {n - 1}) k GROUP BY 1)
            INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, links, refs)
            SELECT 'kg', 'g' || i, 'node ' || i, 'what node ' || i || ' is about',
                   'Some notes kept in node ' || i || '.', coalesce(k.refs, '{{}}'), coalesce(k.refs, '{{}}')
            FROM generate_series({had}, {n - 1}) i LEFT JOIN kids k ON k.parent = i""")
    if n <= SIZES[-1]:  # graph reads only beyond
        sql(f"""INSERT INTO agent_memory.memory_files (scope, path, content)
                SELECT 'kf', '/d' || (i / 100) || '/f' || i, 'notes of file ' || i
                FROM generate_series({had}, {n - 1}) i""")
        sql(f"UPDATE agent_memory.memory_scopes SET files = {n} WHERE scope = 'kf'")
    sql("CHECKPOINT")


def plot(results: dict[str, dict[int, float]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "agent_memory"  # stable ids: diffs show real changes
    fig, ax = plt.subplots(figsize=(7, 4.8))
    for name, by_size in results.items():
        xs = sorted(by_size)
        ax.plot(xs, [by_size[x] for x in xs], marker="o", label=name)
    ax.set(xscale="log", xlabel="nodes or files of the one owner or scope", ylabel="µs per call (one client)",
           title="One owner growing, statistics that do not know it: should stay flat")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOT, format="svg", metadata={"Date": None})


def write_markdown(results: dict[str, dict[int, float]]) -> None:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"Measured {when} on {bench.machine()}, `make bench` (growth per key), {growth.SECONDS} s per point. "
             f"{BIG_KEYS} owners of {BIG_ROWS:,} rows and {TINY_KEYS:,} of one row analysed, then one owner "
             f"grown without ANALYZE. Flat means within {growth.FLAT}× from the smallest size to the largest.", "",
             "| operation | " + " | ".join(f"{s:,}" for s in READ_SIZES) + " | largest / smallest |",
             "|---|" + "---:|" * (len(READ_SIZES) + 1)]
    for name, by_size in results.items():
        sizes = sorted(by_size)
        growth_ratio = by_size[sizes[-1]] / by_size[sizes[0]]
        cells = [f"{by_size[s]:,.1f}" if s in by_size else "" for s in READ_SIZES]
        lines.append(f"| {name} (µs per call) | " + " | ".join(cells)
                     + f" | {growth_ratio:.2f}{'' if growth_ratio <= growth.FLAT else ' (grows)'} |")
    lines += ["", f"![growth per key]({PLOT.name})"]
    bench.write_section(START, END, "Growth per key", lines)
    print(f"wrote the growth-per-key table into {bench.BENCHMARKS_MD.relative_to(bench.ROOT)} "
          f"and {PLOT.relative_to(bench.ROOT)}")


def main() -> int:
    bench.psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", db="postgres")
    bench.psql(f"CREATE DATABASE {DB}", db="postgres")
    sql("CREATE EXTENSION agent_memory")
    sql(f"ALTER DATABASE {DB} SET agent_memory.max_files_per_scope = {2**31 - 1}")
    skew()
    results: dict[str, dict[int, float]] = {name: {} for name in OPERATIONS}
    had = 0
    for n in READ_SIZES:
        print(f"\n== one owner of {n:,} rows", flush=True)
        fill(n, had)
        had = n
        for name, spec in OPERATIONS.items():
            if n not in spec["sizes"]:
                continue
            defines = dict(n=n, dirs=max(1, n // 100))
            latency = growth.statement_latency_ms(spec["script"], spec["measure"], defines, db=DB)
            results[name][n] = latency * 1000
            print(f"   {name:<22} {results[name][n]:>10,.1f} µs per call", flush=True)
    print("\ngrowth per key, largest size / smallest (flat: within %.1f×)" % growth.FLAT)
    for name, by_size in results.items():
        sizes = sorted(by_size)
        ratio = by_size[sizes[-1]] / by_size[sizes[0]]
        print(f"  {name:<22} {ratio:.2f}{'' if ratio <= growth.FLAT else '  grows'}")
    plot(results)
    write_markdown(results)
    bench.psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", db="postgres")
    return 0


if __name__ == "__main__":
    sys.exit(main())
