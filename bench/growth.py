#!/usr/bin/env python3
"""How each operation's cost grows with the data: growth curves and plots.

The tables behind each operation are filled in steps (10^3, 10^4, 10^5,
10^6 rows by default; BENCH_GROWTH_SIZES=1000,10000,... changes them) and
at every step the operation is measured:

- calls one client makes one after another (pgbench -c 1, -M prepared,
  BENCH_GROWTH_SECONDS per point): the average latency of the call, taken
  from pgbench's per-statement report, so a statement that only prepares
  the data (a new file before a delete) is not counted. Each call touches
  a random row of the whole data set, so index depth and caching grow with
  it. These operations must stay flat.
- graph_tree on one owner holding all the nodes, and cleanup_expired removing
  that many expired entries: timed inside the server, reported per node or
  per row. These must stay linear, i.e. flat per node or row.

Also the peak private memory (RssAnon of the backend, sampled every
millisecond) of graph_tree on 100,000 nodes and of working_memory with the
largest parts the extension allows.

Writes the table between the bench:growth markers of BENCHMARKS.md and the
plot BENCHMARKS-growth.svg next to it (matplotlib). Connection: the libpq PG*
variables of a running cluster (scripts/bench.sh starts one); PG_BINDIR.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (psql, machine, BENCHMARKS.md location)

DB = "agent_memory_growth"
PLOT = bench.ROOT / "BENCHMARKS-growth.svg"  # next to BENCHMARKS.md, which shows it
START, END = "<!-- bench:growth:start -->", "<!-- bench:growth:end -->"
SIZES = [int(s) for s in os.environ.get("BENCH_GROWTH_SIZES", "1000,10000,100000,1000000").split(",")]
SECONDS = int(os.environ.get("BENCH_GROWTH_SECONDS", 4))
# An operation stays flat when its cost at the largest size is within this
# factor of its cost at the smallest.
FLAT = 1.5


def sql(statement: str) -> str:
    return bench.psql(statement, db=DB)


# Operations measured by one pgbench client. `measure` is the text of the
# script's statement whose latency is reported; variables :n (rows at this
# step) and the derived :sessions, :dirs, :threads are defined for every run.
CALLS = {
    "append_message": dict(
        rows="thread_messages",
        script="""\\set node random(1, 100)
SELECT agent_memory.append_message('gm', 'user', 'a message of the talk', node_id => 'n' || :node, keep => 50);
""",
        measure="append_message"),
    "messages": dict(
        rows="thread_messages",
        script="""\\set node random(1, 100)
SELECT count(*) FROM agent_memory.messages('gm', 'n' || :node, 50);
""",
        measure="agent_memory.messages"),
    "kv_set": dict(
        rows="kv_entries",
        script="""\\set s random(1, :sessions)
\\set k random(1, 20)
SELECT agent_memory.kv_set('gk' || :s, 'k' || :k, '"the user prefers window seats"');
""",
        measure="kv_set"),
    "working_memory": dict(
        rows="wm_parts",
        script="""\\set s random(1, :wm_sessions)
SELECT length(agent_memory.working_memory('gw' || :s)::text);
""",
        measure="working_memory"),
    "memory_tool read": dict(
        rows="memory_files",
        script="""\\set i random(0, :n - 1)
\\set d :i / 10
SELECT agent_memory.memory_tool('gf', jsonb_build_object('command', 'read', 'path', '/d' || :d || '/f' || :i));
""",
        measure="memory_tool"),
    "memory_tool list": dict(
        rows="memory_files",
        script="""\\set d random(0, :dirs - 1)
SELECT agent_memory.memory_tool('gf', jsonb_build_object('command', 'list', 'path', '/d' || :d));
""",
        measure="memory_tool"),
    "memory_tool delete": dict(
        rows="memory_files",
        script="""SELECT agent_memory.memory_tool('gf', jsonb_build_object('command', 'append', 'path', '/tmp/new', 'content', 'x'));
SELECT agent_memory.memory_tool('gf', jsonb_build_object('command', 'delete', 'path', '/tmp'));
""",
        measure="'delete'"),
    # Recall in one user's memory of a fixed size (100 graph nodes, each
    # embedded) while the number of users grows with the data.
    "recall": dict(
        rows="graph_nodes",
        script="""\\set o random(1, :owners)
SELECT count(*) FROM agent_memory.recall('window seat flight', owner => 'gr' || :o, kinds => '{node}');
""",
        measure="agent_memory.recall"),
    "recall by meaning": dict(
        rows="graph_nodes",
        script="""\\set o random(1, :owners)
SELECT count(*) FROM agent_memory.recall(NULL, owner => 'gr' || :o, kinds => '{node}', embedding => '{0.3,0.1,0.5,0.2,0.4,0.6,0.1,0.2,0.9,0.3,0.5,0.2,0.7,0.1,0.4,0.8}');
""",
        measure="agent_memory.recall"),
}
LINEAR = ["graph_tree", "cleanup_expired"]


def fill(n: int, had: int) -> None:
    """Grow every table from `had` rows to `n`."""
    if n <= had:
        return
    lo, hi = had, n
    # Key-value memory: 20 entries per session, sessions gk1..gk(n/20).
    sql(f"""INSERT INTO agent_memory.sessions (session_id, user_id, kv_words, kv_next_expiry)
            SELECT 'gk' || s, 'growth', 100, now() + interval '500 hours'
            FROM generate_series({lo // 20 + 1}, {hi // 20}) s""")
    sql(f"""INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
            SELECT 'gk' || s, 'k' || k, '"the user prefers window seats"', 5, now() + interval '500 hours'
            FROM generate_series({lo // 20 + 1}, {hi // 20}) s, generate_series(1, 20) k""")
    # Working memory: five parts per session, sessions gw1..gw(n/5).
    sql(f"""INSERT INTO agent_memory.sessions (session_id, user_id)
            SELECT 'gw' || s, 'growth' FROM generate_series({lo // 5 + 1}, {hi // 5}) s""")
    sql(f"""INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value)
            SELECT 'gw' || s, '', p.part, p.value
            FROM generate_series({lo // 5 + 1}, {hi // 5}) s,
                 (VALUES ('session', '{{"active_node_id": "n1"}}'::jsonb),
                         ('fetched_context', '{{"docs": ["itinerary.pdf"], "weather": "dry"}}'),
                         ('working_history', '"Booked flights, compared three hotels."'),
                         ('last_user_message', '"what about the hotels?"'),
                         ('config', '{{"history_length": 20}}')) p(part, value)""")
    # Message history: threads of 50 messages of another session.
    sql(f"""INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended, last_seq)
            SELECT 'gmf', 't' || t, 50, 50, t::bigint * 50 + 49 FROM generate_series({lo // 50 + 1}, {hi // 50}) t""")
    sql(f"""INSERT INTO agent_memory.thread_messages (session_id, thread_key, slot, seq, role, content, metadata)
            SELECT 'gmf', 't' || t, s, t::bigint * 50 + s, 'user', 'filler message ' || t || '/' || s, '{{}}'
            FROM generate_series({lo // 50 + 1}, {hi // 50}) t, generate_series(0, 49) s""")
    sql(f"UPDATE agent_memory.sessions SET last_message_seq = {hi // 50 * 50 + 49} WHERE session_id = 'gmf'")
    # Memory files: one scope, file i in directory i / 10 (ten per directory).
    sql(f"""INSERT INTO agent_memory.memory_files (scope, path, content)
            SELECT 'gf', '/d' || (i / 10) || '/f' || i, 'notes of file ' || i
            FROM generate_series({lo}, {hi - 1}) i""")
    sql(f"UPDATE agent_memory.memory_scopes SET files = files + {hi - lo} WHERE scope = 'gf'")
    # Recall: owners gr1..gr(n/100) of 100 nodes each, every node embedded
    # (16 numbers) and sharing words with the query now and then.
    sql(f"""INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, embedding, embedding_md5)
            SELECT 'gr' || o, 'n' || i, (ARRAY['window', 'seat', 'flight', 'hotel', 'garden'])[1 + (o + i) % 5] || ' ' || i,
                   'notes of owner ' || o, 'kept for recall',
                   (SELECT array_agg(((o * 31 + i * 17 + g * 7) % 100) / 100.0 + 0.01)::real[]
                    FROM generate_series(1, 16) g),
                   md5((ARRAY['window', 'seat', 'flight', 'hotel', 'garden'])[1 + (o + i) % 5] || ' ' || i
                       || E'\\n' || 'notes of owner ' || o || E'\\n' || 'kept for recall')
            FROM generate_series({lo // 100 + 1}, {hi // 100}) o, generate_series(1, 100) i""")
    # A graph owner of exactly n nodes, a random tree (as the graph_tree case).
    sql(f"""INSERT INTO agent_memory.graph_nodes (owner, node_id, title, description, body, links, refs)
            WITH pairs AS (
              SELECT i, CASE WHEN i = 1 OR hashint8(-i) % 200 = 0 THEN NULL
                             ELSE 1 + abs(hashint8(i)::int8) % (i - 1) END AS parent
              FROM generate_series(1::int8, {n}) i),
            kids AS (SELECT parent, array_agg('n' || i ORDER BY i) AS refs FROM pairs WHERE parent IS NOT NULL GROUP BY parent)
            SELECT 'gt{n}', 'n' || p.i, 'node ' || p.i, 'what node ' || p.i || ' is about',
                   'Some notes kept in node ' || p.i || '.', coalesce(k.refs, '{{}}'), coalesce(k.refs, '{{}}')
            FROM pairs p LEFT JOIN kids k ON k.parent = p.i""")
    for table in ("sessions", "kv_entries", "wm_parts", "message_threads", "thread_messages", "memory_files",
                  "memory_scopes", "graph_nodes"):
        sql(f"VACUUM ANALYZE agent_memory.{table}")
    sql("CHECKPOINT")


def statement_latency_ms(script: str, measure: str, defines: dict[str, int], db: str = DB) -> float:
    """Average latency (ms) of the script statement containing `measure`."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
        path = f.name
    try:
        args = [bench.BINDIR / "pgbench", "-n", "-M", "prepared", "-c", "1", "-T", str(SECONDS), "-r", "-f", path]
        for key, value in defines.items():
            args += ["-D", f"{key}={value}"]
        done = subprocess.run(args + [db], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pgbench failed on\n{script}\n{done.stderr[-2000:]}")
    finally:
        os.unlink(path)
    for line in done.stdout.splitlines():
        m = re.match(r"\s+([0-9.]+)\s+(?:[0-9]+\s+)?(?:[0-9]+\s+)?(.*)$", line)
        if m and measure in m.group(2) and not m.group(2).startswith("\\"):
            return float(m.group(1))
    raise RuntimeError(f"no latency for {measure!r} in pgbench output:\n{done.stdout}")


def server_ms(statement: str) -> float:
    return float(sql("SELECT public.bench_ms($q$" + statement + "$q$)"))


def measure_linear(n: int) -> dict[str, float]:
    """µs per node of graph_tree on n nodes; µs per row of cleanup_expired
    removing n expired entries (median of three)."""
    tree = statistics.median(server_ms(f"SELECT agent_memory.graph_tree('gt{n}')") for _ in range(3))
    cleanups = []
    for _ in range(3):
        sql(f"""INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
                SELECT 'gk' || s, 'x' || k, '"gone"', 1, now() - interval '1 hour'
                FROM generate_series(1, {n // 20}) s, generate_series(1, 20) k""")
        sql("VACUUM ANALYZE agent_memory.kv_entries")
        before = int(sql("SELECT count(*) FROM agent_memory.kv_entries WHERE expires_at < now()"))
        cleanups.append(server_ms("SELECT agent_memory.cleanup_expired(10000)"))
        left = int(sql("SELECT count(*) FROM agent_memory.kv_entries WHERE expires_at < now()"))
        if before != n or left != 0:
            raise RuntimeError(f"cleanup at {n}: {before} expired before, {left} after")
    return {"graph_tree": tree * 1000 / n, "cleanup_expired": statistics.median(cleanups) * 1000 / n}


class PeakMemory:
    """Peak RssAnon (private memory) of one backend, sampled every ms."""

    def __init__(self, pid: int):
        self.pid, self.peak, self.running = pid, 0, True
        self.base = self.sample()
        self.thread = threading.Thread(target=self.poll, daemon=True)

    def sample(self) -> int:
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:  # the backend has exited
            return 0
        for line in status.splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        return 0

    def poll(self):
        while self.running:
            self.peak = max(self.peak, self.sample())
            time.sleep(0.001)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def peak_memory(statement: str) -> tuple[float, float]:
    """(peak MB above the backend's idle size, seconds) of one statement,
    run in a fresh backend."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(f"SELECT pg_backend_pid();\n\\g {f.name}.pid\nSELECT pg_sleep(0.3);\n{statement};\nSELECT pg_sleep(0.05);\n")
        script = f.name
    try:
        proc = subprocess.Popen([bench.BINDIR / "psql", "-X", "-q", "-A", "-t", "-d", DB, "-f", script],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        pid_file = Path(script + ".pid")
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.01)
        pid = int(pid_file.read_text().strip())
        started = time.perf_counter()
        with PeakMemory(pid) as mem:
            if proc.wait() != 0:
                raise RuntimeError(f"failed: {statement}\n{proc.stderr.read()}")
        return (mem.peak - mem.base) / 2**20, time.perf_counter() - started - 0.35
    finally:
        os.unlink(script)
        Path(script + ".pid").unlink(missing_ok=True)


def memory_cases() -> list[tuple[str, float, float]]:
    out = []
    if 100_000 in SIZES:
        mb, s = peak_memory("SELECT pg_column_size(agent_memory.graph_tree('gt100000'))")
        out.append(("graph_tree, 100,000 nodes", mb, s))
    # The largest parts working memory shows: history_length at its cap
    # (200 messages), each at agent_memory.max_message_bytes (1 MB), and a
    # node_context whose body is at agent_memory.max_node_bytes (1 MB).
    max_msg = int(sql("SELECT setting FROM pg_settings WHERE name = 'agent_memory.max_message_bytes'"))
    max_node = int(sql("SELECT setting FROM pg_settings WHERE name = 'agent_memory.max_node_bytes'"))
    sql("SELECT agent_memory.create_session('growth', session_id => 'gbig')")
    sql(f"""SELECT agent_memory.graph_create('gbig_project', 'big', 'a node at the body limit',
                                             repeat('x', {max_node} - 64), ARRAY['__root__'], 'big')""")
    sql("SELECT agent_memory.wm_init('gbig', 'big', 'gbig_project') IS NOT NULL")
    sql("""SELECT agent_memory.wm_set('gbig', 'config', '{"history_length": 200}')""")
    sql(f"""SELECT count(agent_memory.append_message('gbig', 'user', repeat('m', {max_msg} - 16), node_id => 'big'))
            FROM generate_series(1, 200)""")
    mb, s = peak_memory("SELECT pg_column_size(agent_memory.working_memory('gbig', 'big'))")
    size = float(sql("SELECT pg_column_size(agent_memory.working_memory('gbig', 'big'))")) / 2**20
    out.append((f"working_memory, 200 messages of {max_msg // 1024} kB + a {max_node // 1024} kB node "
                f"({size:,.0f} MB document)", mb, s))
    return out


def plot(results: dict[str, dict[int, float]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matplotlib.rcParams["svg.hashsalt"] = "agent_memory"  # stable ids: diffs show real changes
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name in CALLS:
        xs = sorted(results[name])
        left.plot(xs, [results[name][x] for x in xs], marker="o", label=name)
    left.set(xscale="log", xlabel="rows in the operation's table", ylabel="µs per call (one client)",
             title="Per-call operations: should stay flat")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    for name in LINEAR:
        xs = sorted(results[name])
        right.plot(xs, [results[name][x] for x in xs], marker="o",
                   label=f"{name} (µs per {'node' if name == 'graph_tree' else 'row'})")
    right.set(xscale="log", xlabel="nodes / expired rows", ylabel="µs per node or row",
              title="Whole-set operations: linear = flat per unit")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOT, format="svg", metadata={"Date": None})


def write_markdown(results: dict[str, dict[int, float]], memory: list) -> None:
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = "| operation | unit | " + " | ".join(f"{s:,} rows" for s in SIZES) + f" | largest / smallest |"
    lines = [f"Measured {when} on {bench.machine()}, `make bench` (growth part), "
             f"{SECONDS} s per point. Flat means within {FLAT}× from the smallest size to the largest.", "",
             header, "|---|---|" + "---:|" * (len(SIZES) + 1)]
    for name in list(CALLS) + LINEAR:
        unit = "µs per call" if name in CALLS else ("µs per node" if name == "graph_tree" else "µs per row")
        values = [results[name][s] for s in SIZES]
        growth = values[-1] / values[0]
        lines.append(f"| {name} | {unit} | " + " | ".join(f"{v:,.1f}" for v in values)
                     + f" | {growth:.2f}{'' if growth <= FLAT else ' (grows)'} |")
    lines += ["", f"![growth curves]({PLOT.name})", "",
              "| peak backend memory | private memory at its peak | time |", "|---|---:|---:|"]
    lines += [f"| {name} | {mb:,.1f} MB | {s:,.2f} s |" for name, mb, s in memory]
    bench.write_section(START, END, "Growth", lines)
    print(f"wrote the growth table into {bench.BENCHMARKS_MD.relative_to(bench.ROOT)} and {PLOT.relative_to(bench.ROOT)}")


def main() -> int:
    bench.psql(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)", db="postgres")
    bench.psql(f"CREATE DATABASE {DB}", db="postgres")
    sql("CREATE EXTENSION agent_memory")
    sql("SELECT agent_memory.recall_enable_embeddings(16)")
    sql(f"ALTER DATABASE {DB} SET agent_memory.max_files_per_scope = {2**31 - 1}")
    sql("""CREATE FUNCTION public.bench_ms(statement text) RETURNS float8 LANGUAGE plpgsql AS $$
           DECLARE t0 timestamptz := clock_timestamp();
           BEGIN EXECUTE statement; RETURN extract(epoch FROM clock_timestamp() - t0) * 1000; END $$""")
    sql("SELECT agent_memory.create_session('growth', session_id => 'gm')")
    sql("SELECT agent_memory.create_session('growth', session_id => 'gmf')")
    sql("INSERT INTO agent_memory.memory_scopes (scope, files) VALUES ('gf', 0)")
    results: dict[str, dict[int, float]] = {name: {} for name in list(CALLS) + LINEAR}
    had = 0
    for n in SIZES:
        print(f"\n== {n:,} rows", flush=True)
        fill(n, had)
        had = n
        defines = dict(n=n, sessions=n // 20, wm_sessions=n // 5, dirs=n // 10, owners=n // 100)
        for name, spec in CALLS.items():
            results[name][n] = statement_latency_ms(spec["script"], spec["measure"], defines) * 1000
            print(f"   {name:<20} {results[name][n]:>10,.1f} µs per call", flush=True)
        for name, value in measure_linear(n).items():
            results[name][n] = value
            print(f"   {name:<20} {value:>10,.3f} µs per {'node' if name == 'graph_tree' else 'row'}", flush=True)
    memory = memory_cases()
    for name, mb, s in memory:
        print(f"   peak memory of {name}: {mb:,.1f} MB in {s:,.2f} s", flush=True)
    print("\ngrowth, largest size / smallest (flat: within %.1f×)" % FLAT)
    for name, by_size in results.items():
        growth = by_size[SIZES[-1]] / by_size[SIZES[0]]
        print(f"  {name:<22} {growth:.2f}{'' if growth <= FLAT else '  grows'}")
    plot(results)
    write_markdown(results, memory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
