#!/usr/bin/env python3
"""agent_memory against LangGraph's PostgresStore, from Python.

Same server, same database, same client library (psycopg 3), one
autocommit connection each, operations one after another, as an agent
would call them. Alternating rounds; medians. Plain SQL on agent_memory's
table is measured in the same run for context.

Prints one JSON object per line (the rows bench/run.py puts in
BENCHMARKS.md). Connection: the libpq PG* variables; database in BENCH_DB.
"""

import json
import os
import statistics
import sys
import time
import tomllib
from pathlib import Path

import psycopg
from langgraph.store.postgres import PostgresStore

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
PUTS = int(os.environ.get("BENCH_PEER_PUTS", 2000))
GETS = int(os.environ.get("BENCH_PEER_GETS", 5000))
KEYS = 50
VALUE = {"note": "the user prefers window seats and vegetarian meals"}
CONNINFO = f"dbname={DB}"
BY_HAND = next(statement for statement in tomllib.loads(
    (Path(__file__).resolve().parent.parent / "cases" / "kv_guarantees.toml").read_text())["setup"]
    if "FUNCTION bench_kv_set_by_hand" in statement)


def rate(n, fn):
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


def main():
    store_cm = PostgresStore.from_conn_string(CONNINFO)
    store = store_cm.__enter__()
    store.setup()
    ours = psycopg.connect(CONNINFO, autocommit=True)
    ours.execute("SELECT agent_memory.create_session('peer-bench', session_id => 'peer')")
    value_json = json.dumps(VALUE)
    namespace = ("users", "peer")

    def lg_put(i):
        store.put(namespace, f"k{i % KEYS}", VALUE)

    def lg_get(i):
        store.get(namespace, f"k{i % KEYS}")

    def am_put(i):
        ours.execute("SELECT agent_memory.kv_set('peer', %s, %s::jsonb)", (f"k{i % KEYS}", value_json))

    def am_get(i):
        ours.execute("SELECT agent_memory.kv_get('peer', %s)", (f"k{i % KEYS}",)).fetchone()

    def sql_put(i):
        ours.execute(
            """INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
               VALUES ('peer', %s, %s::jsonb, 9, now() + interval '500 hours')
               ON CONFLICT (session_id, key, tenant) DO UPDATE
               SET value = excluded.value, words = excluded.words, updated_at = now(),
                   expires_at = excluded.expires_at""",
            (f"k{i % KEYS}", value_json),
        )

    # kv_set's statement with every guarantee, run by the least function
    # that keeps them: a hand-written PL/pgSQL function under the
    # session's lock (see bench/cases/kv_guarantees.toml).
    ours.execute(BY_HAND)

    def fn_put(i):
        ours.execute("SELECT bench_kv_set_by_hand('peer', %s, %s::jsonb, 9)", (f"k{i % KEYS}", value_json))

    def sql_get(i):
        ours.execute(
            "SELECT value FROM agent_memory.kv_entries WHERE session_id = 'peer' AND key = %s AND expires_at > now()",
            (f"k{i % KEYS}",),
        ).fetchone()

    def round_trip(i):
        # The least any call from Python costs: one statement that does
        # nothing but return its parameter.
        ours.execute("SELECT %s::text", (f"k{i % KEYS}",)).fetchone()

    # Warm up every path (plans, caches, the rows themselves).
    for fn in (lg_put, am_put, lg_get, am_get, sql_put, fn_put, sql_get, round_trip):
        for i in range(KEYS):
            fn(i)

    results = {name: [] for name in ("lg_put", "am_put", "sql_put", "fn_put", "lg_get", "am_get", "sql_get",
                                     "round_trip")}
    for r in range(ROUNDS):
        order = [("lg_put", PUTS, lg_put), ("am_put", PUTS, am_put), ("sql_put", PUTS, sql_put),
                 ("fn_put", PUTS, fn_put),
                 ("lg_get", GETS, lg_get), ("am_get", GETS, am_get), ("sql_get", GETS, sql_get),
                 ("round_trip", GETS, round_trip)]
        if r % 2:
            order.reverse()
        for name, n, fn in order:
            results[name].append(rate(n, fn))
    med = {k: statistics.median(v) for k, v in results.items()}

    def row(kind, ext, base, baseline):
        print(json.dumps(dict(case="langgraph_store", kind=kind, unit="ops/s", ext=med[ext], base=med[base],
                              ratio=med[ext] / med[base], baseline=baseline)))

    row("put: kv_set vs PostgresStore.put", "am_put", "lg_put", "LangGraph PostgresStore")
    row("get: kv_get vs PostgresStore.get", "am_get", "lg_get", "LangGraph PostgresStore")
    # How far any SQL function could get: plain SQL against LangGraph.
    row("put: plain upsert vs PostgresStore.put", "sql_put", "lg_put", "LangGraph PostgresStore")
    row("get: plain SELECT vs PostgresStore.get", "sql_get", "lg_get", "LangGraph PostgresStore")
    # How far anything called once per operation could get: a round trip
    # that does no work at all, against LangGraph.
    row("put: a round trip doing nothing (SELECT $1) vs PostgresStore.put", "round_trip", "lg_put",
        "LangGraph PostgresStore")
    row("get: a round trip doing nothing (SELECT $1) vs PostgresStore.get", "round_trip", "lg_get",
        "LangGraph PostgresStore")
    row("put: kv_set vs plain upsert (Python)", "am_put", "sql_put", "plain SQL")
    row("get: kv_get vs plain SELECT (Python)", "am_get", "sql_get", "plain SQL")
    # The floor of kv_set's guarantees from Python: the least function
    # keeping them against the plain upsert.
    row("put: kv_set's statement in a PL/pgSQL function vs plain upsert (Python)", "fn_put", "sql_put",
        "plain SQL")
    store_cm.__exit__(None, None, None)
    ours.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
