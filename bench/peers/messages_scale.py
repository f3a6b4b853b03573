#!/usr/bin/env python3
"""Does an append cost the same whether the history table is small or huge?

100,000 appends (keep 50, over 1,000 threads at steady state) are timed with
the message table holding only what those threads keep (50,000 rows), then
again after 5,000,000 rows of another session are added. The two sizes are
not alternated (the filler takes a minute to build): small rounds first, then
huge rounds; medians. Ratio = time small / time huge (1.0: no difference).

Prints one JSON object per line, the rows bench/run.py puts in BENCHMARKS.md.
Connection: the libpq PG* variables; database in BENCH_DB. Leaves the filler
session behind (the bench cluster is created fresh for every run).
"""

import json
import os
import statistics
import sys
import time

import psycopg

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
FILLER_ROWS = int(os.environ.get("BENCH_FILLER_ROWS", 5_000_000))
APPENDS = 100_000

APPEND = f"""SELECT count(agent_memory.append_message('sc' || (i % 1000 + 1), 'user', 'message ' || i, keep => 50))
             FROM generate_series(1, {APPENDS}) i"""


def timed(conn, sql) -> float:
    # Each round starts from the same state: the previous round's dead
    # versions vacuumed away.
    conn.execute("VACUUM agent_memory.thread_messages, agent_memory.message_threads")
    start = time.perf_counter()
    conn.execute(sql)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    conn = psycopg.connect(f"dbname={DB}", autocommit=True)
    conn.execute("SELECT count(agent_memory.create_session('bench', session_id => 'sc' || i)) FROM generate_series(1, 1000) i")
    conn.execute(APPEND)  # fills every thread to steady state (50 each)
    conn.execute("VACUUM ANALYZE agent_memory.thread_messages")
    small = [timed(conn, APPEND) for _ in range(ROUNDS)]
    rows_small = conn.execute("SELECT count(*) FROM agent_memory.thread_messages").fetchone()[0]

    threads = FILLER_ROWS // 50
    conn.execute("SELECT agent_memory.create_session('bench', session_id => 'filler')")
    conn.execute(f"""INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended, last_seq)
                     SELECT 'filler', 't' || t, 50, 50, t::bigint * 50 + 49 FROM generate_series(1, {threads}) t""")
    conn.execute(f"""INSERT INTO agent_memory.thread_messages
                       (session_id, thread_key, slot, seq, role, content, metadata)
                     SELECT 'filler', 't' || t, s, t::bigint * 50 + s, 'user',
                            'filler message ' || t || '/' || s, '{{}}'
                     FROM generate_series(1, {threads}) t, generate_series(0, 49) s""")
    conn.execute(f"UPDATE agent_memory.sessions SET last_message_seq = {threads * 50 + 49} WHERE session_id = 'filler'")
    conn.execute("VACUUM ANALYZE agent_memory.thread_messages")
    conn.execute("CHECKPOINT")
    huge = [timed(conn, APPEND) for _ in range(ROUNDS)]
    rows_huge = conn.execute("SELECT count(*) FROM agent_memory.thread_messages").fetchone()[0]

    ext, base = statistics.median(huge), statistics.median(small)
    print(json.dumps(dict(case="messages_scale",
                          kind=f"100k appends, table of {rows_huge:,} rows vs {rows_small:,}",
                          unit="ms", ext=ext, base=base, ratio=base / ext,
                          baseline=f"same appends, table of {rows_small:,} rows")))
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
