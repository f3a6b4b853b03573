#!/usr/bin/env python3
"""Export and import of one user's memory, from a client, as people run them.

The case's setup (bench/cases/portability.toml) made the user: 88,000
items of every kind. Export streams `export(...)` to the client with
`COPY ... TO STDOUT`, against `COPY` of the same rows, each as JSON, out of
their tables. Import takes the lines as the reference shows: `COPY` into a
staging table, then `import_lines(...)` of 1,000 lines at a time, a
transaction each, after the user was erased; against `COPY` of the same
lines into a jsonb column, which reads them and writes no item, and
against `import(line)` called for each line. The floor of an import that
checks each item as its write does: the same items made by the write
functions, one transaction per session, after the same erasure. The floor
of any import: the items' rows written as they are into copies of the
tables, one INSERT ... SELECT per table.

Prints one JSON object per line for bench/run.py. Database in BENCH_DB.
"""

import json
import os
import statistics
import time

import psycopg

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
KEYS = "user_id => 'porter', owner => 'porter', scope => 'porter'"
BATCH = 1000

AS_JSON = """
  SELECT to_jsonb(s) FROM agent_memory.sessions s WHERE s.user_id = 'porter'
  UNION ALL SELECT to_jsonb(k) FROM agent_memory.sessions s JOIN agent_memory.kv_entries k USING (session_id, tenant) WHERE s.user_id = 'porter'
  UNION ALL SELECT to_jsonb(v) FROM agent_memory.sessions s JOIN agent_memory.kv_entry_versions v USING (session_id, tenant) WHERE s.user_id = 'porter'
  UNION ALL SELECT to_jsonb(m) FROM agent_memory.sessions s JOIN agent_memory.thread_messages m USING (session_id, tenant) WHERE s.user_id = 'porter'
  UNION ALL SELECT to_jsonb(p) FROM agent_memory.sessions s JOIN agent_memory.wm_parts p USING (session_id, tenant) WHERE s.user_id = 'porter'
  UNION ALL SELECT to_jsonb(n) FROM agent_memory.graph_nodes n WHERE n.owner = 'porter'
  UNION ALL SELECT to_jsonb(f) FROM agent_memory.memory_files f WHERE f.scope = 'porter'"""

# The lines go through COPY with quote and delimiter bytes JSON never holds.
LINES_FORMAT = "(FORMAT csv, QUOTE E'\\x01', DELIMITER E'\\x02')"


def copied_out(conn, query: str) -> tuple[float, bytes]:
    """Seconds to stream `query` to the client with COPY, and what came."""
    chunks = []
    start = time.perf_counter()
    with conn.cursor() as cur, cur.copy(f"COPY ({query}) TO STDOUT {LINES_FORMAT}") as copy:
        for chunk in copy:
            chunks.append(bytes(chunk))
    return time.perf_counter() - start, b"".join(chunks)


def erase(conn) -> None:
    conn.execute("SELECT agent_memory.erase_user('porter', owners => ARRAY['porter'], scopes => ARRAY['porter'])")


IMPORT_BATCH = """
  SELECT count(*) FILTER (WHERE (r ->> 'ok')::bool)
  FROM agent_memory.import_lines(ARRAY(SELECT line FROM staged WHERE n > %s AND n <= %s ORDER BY n)) AS r"""
IMPORT_EACH = """
  SELECT count(*) FILTER (WHERE (agent_memory.import(line) ->> 'ok')::bool)
  FROM (SELECT line FROM staged WHERE n > %s AND n <= %s ORDER BY n) AS batch"""


def import_lines(conn, lines: bytes, count: int, query: str = IMPORT_BATCH) -> float:
    """Seconds to take the lines in: COPY into staging, then import in
    order, a transaction per batch; every line must be taken."""
    start = time.perf_counter()
    conn.execute("CREATE TEMP TABLE staged (n serial PRIMARY KEY, line text)")
    with conn.cursor() as cur, cur.copy(f"COPY staged (line) FROM STDIN {LINES_FORMAT}") as copy:
        copy.write(lines)
    taken = 0
    for first in range(0, count, BATCH):
        with conn.transaction():
            taken += conn.execute(query, (first, first + BATCH)).fetchone()[0]
    elapsed = time.perf_counter() - start
    conn.execute("DROP TABLE staged")
    assert taken == count, f"{count - taken} lines refused"
    return elapsed


def copy_lines(conn, lines: bytes) -> float:
    conn.execute("TRUNCATE bench_copied_lines")
    start = time.perf_counter()
    with conn.cursor() as cur, cur.copy(f"COPY bench_copied_lines FROM STDIN {LINES_FORMAT}") as copy:
        copy.write(lines)
    return time.perf_counter() - start


WRITES = [
    "SELECT agent_memory.create_session('porter', session_id => 'p' || %(i)s)",
    """SELECT count(agent_memory.kv_set('p' || %(i)s, 'key' || k, to_jsonb('value ' || ((%(i)s - 1) + 2000 * k))))
       FROM generate_series(0, 19) k""",
    """SELECT count(agent_memory.append_message('p' || %(i)s, CASE WHEN m %% 2 = 0 THEN 'user' ELSE 'assistant' END,
                                              'message number ' || m || ' about the trip to Porto'))
       FROM generate_series(0, 19) m""",
    "SELECT agent_memory.wm_set('p' || %(i)s, 'working_history', to_jsonb('step ' || %(i)s))",
    """SELECT agent_memory.graph_create('porter', 'Node ' || %(i)s, 'about ' || %(i)s, 'body of node ' || %(i)s,
                                      ARRAY['__root__'], node_id => 'n' || %(i)s)""",
    """SELECT agent_memory.memory_tool('porter', jsonb_build_object('command', 'append',
                                     'path', '/notes/' || %(i)s || '.md', 'content', 'note ' || %(i)s))""",
]


def write_items(conn) -> float:
    """Seconds to make the same items through the write functions, one
    transaction per session (with its node and its file)."""
    start = time.perf_counter()
    for i in range(1, 2001):
        with conn.transaction():
            for sql in WRITES:
                conn.execute(sql, {"i": i})
    return time.perf_counter() - start


# The user's rows of every table an import writes, for the floor below.
USER_ROWS = [
    ("sessions", "SELECT s.* FROM agent_memory.sessions s WHERE s.user_id = 'porter'"),
    ("kv_entries", "SELECT k.* FROM agent_memory.sessions s JOIN agent_memory.kv_entries k USING (session_id, tenant) WHERE s.user_id = 'porter'"),
    ("kv_entry_versions", "SELECT v.* FROM agent_memory.sessions s JOIN agent_memory.kv_entry_versions v USING (session_id, tenant) WHERE s.user_id = 'porter'"),
    ("message_threads", "SELECT t.* FROM agent_memory.sessions s JOIN agent_memory.message_threads t USING (session_id, tenant) WHERE s.user_id = 'porter'"),
    ("thread_messages", "SELECT m.* FROM agent_memory.sessions s JOIN agent_memory.thread_messages m USING (session_id, tenant) WHERE s.user_id = 'porter'"),
    ("wm_parts", "SELECT p.* FROM agent_memory.sessions s JOIN agent_memory.wm_parts p USING (session_id, tenant) WHERE s.user_id = 'porter'"),
    ("graph_nodes", "SELECT n.* FROM agent_memory.graph_nodes n WHERE n.owner = 'porter'"),
    ("memory_scopes", "SELECT c.* FROM agent_memory.memory_scopes c WHERE c.scope = 'porter'"),
    ("memory_directories", "SELECT d.* FROM agent_memory.memory_directories d WHERE d.scope = 'porter'"),
    ("memory_files", "SELECT f.* FROM agent_memory.memory_files f WHERE f.scope = 'porter'"),
]


def insert_rows(conn) -> float:
    """Seconds to write the user's rows, as they are, into empty copies of
    the tables (their indexes, search columns and checks, not their
    foreign keys), one INSERT ... SELECT per table in one transaction: the
    least any import must do, with no line read and no item checked."""
    columns = {}
    for table, _ in USER_ROWS:
        conn.execute(f"DROP TABLE IF EXISTS bench_floor_{table}")
        conn.execute(f"CREATE TABLE bench_floor_{table} (LIKE agent_memory.{table} INCLUDING ALL)")
        columns[table] = conn.execute(
            """SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
               WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = ''""",
            (f"agent_memory.{table}",)).fetchone()[0]
    start = time.perf_counter()
    with conn.transaction():
        for table, rows in USER_ROWS:
            conn.execute(f"INSERT INTO bench_floor_{table} ({columns[table]}) SELECT {columns[table]} FROM ({rows}) r")
    elapsed = time.perf_counter() - start
    for table, _ in USER_ROWS:
        conn.execute(f"DROP TABLE bench_floor_{table}")
    return elapsed


def main() -> None:
    results = {k: [] for k in ("export", "copy_out", "import", "import_each", "copy_in", "floor_import", "writes",
                               "rows")}
    with psycopg.connect(f"dbname={DB}", autocommit=True) as conn:
        count = conn.execute("SELECT count(*) FROM bench_lines").fetchone()[0]
        for r in range(ROUNDS):
            order = [("export", f"SELECT agent_memory.export({KEYS})"), ("copy_out", AS_JSON)]
            for name, query in (order if r % 2 == 0 else order[::-1]):
                seconds, data = copied_out(conn, query)
                results[name].append(count / seconds)
                if name == "export":
                    lines = data
                    got = data.count(b"\n")
                    assert got == count, f"export gave {got} lines, not {count}"
            # Each import starts from the user erased; the last leaves it whole.
            erase(conn)
            results["copy_in"].append(count / copy_lines(conn, lines))
            results["import"].append(count / import_lines(conn, lines, count))
            erase(conn)
            results["import_each"].append(count / import_lines(conn, lines, count, IMPORT_EACH))
            erase(conn)
            results["writes"].append(count / write_items(conn))
            erase(conn)
            results["floor_import"].append(count / import_lines(conn, lines, count))
            results["rows"].append(count / insert_rows(conn))
    med = {k: statistics.median(v) for k, v in results.items()}

    def row(kind, ext, base, baseline):
        print(json.dumps(dict(case="portability", kind=kind, unit="items/s", ext=med[ext], base=med[base],
                              ratio=med[ext] / med[base], baseline=baseline)))

    row(f"export of {count:,} items to the client", "export", "copy_out", "COPY of the rows as JSON")
    row(f"import of {count:,} items, {BATCH:,} lines per transaction", "import", "copy_in", "COPY of the lines")
    row(f"import of {count:,} items, {BATCH:,} lines per transaction", "import", "import_each",
        "import(line) for each line")
    row("floor: import against the write functions making the same items", "floor_import", "writes",
        "the write functions, a transaction per session")
    row("floor: the items' rows inserted as they are into copies of the tables, one statement per table, "
        "against COPY of the lines", "rows", "copy_in", "COPY of the lines")


if __name__ == "__main__":
    main()
