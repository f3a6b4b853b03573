#!/usr/bin/env python3
"""Recall by meaning against LangGraph's PostgresStore.search, from Python.

Both stores hold the same 1,000 memories of one user, with the same
all-MiniLM-L6-v2 embeddings (bench/embed.py), made once before the clock
starts: LangGraph's `embed` function looks them up, so neither side pays
for a model. LangGraph keeps them in pgvector with its HNSW index; recall
compares the user's memories exactly. Same server and database, psycopg 3,
one autocommit connection each, one search at a time, alternating rounds,
medians. A round trip that does nothing is measured as the floor of any
call from Python.

Prints one JSON object per line for bench/run.py. Database in BENCH_DB.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from langgraph.store.postgres import PostgresStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from embed import embed  # noqa: E402

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
SEARCHES = int(os.environ.get("BENCH_PEER_SEARCHES", 500))
CONNINFO = f"dbname={DB}"
MEMORIES = 1000
TOPICS = ["flight", "hotel", "dinner", "dentist", "project", "garden", "concert", "invoice", "gym", "birthday"]
PLACES = ["Lisbon", "Porto", "the office", "home", "the clinic", "the station", "the market", "the park"]


def memory_text(i: int) -> str:
    return (f"Note {i}: the {TOPICS[i % len(TOPICS)]} near {PLACES[i % len(PLACES)]} "
            f"is on day {i % 28 + 1}, remember item {i * 7919 % 1000}")


QUERIES = [f"when is the {t} at {p}?" for t in TOPICS for p in PLACES[:5]]


def rate(n, fn):
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


def main():
    texts = [memory_text(i) for i in range(MEMORIES)]
    vectors = {t: v.tolist() for t, v in zip(texts + QUERIES, embed(texts + QUERIES))}

    def lookup(batch):
        return [vectors[t] for t in batch]

    index = {"dims": 384, "embed": lookup, "fields": ["text"]}
    store_cm = PostgresStore.from_conn_string(CONNINFO, index=index)
    store = store_cm.__enter__()
    store.setup()
    namespace = ("users", "peer-search", "memories")
    for i, text in enumerate(texts):
        store.put(namespace, f"m{i}", {"text": text})

    ours = psycopg.connect(CONNINFO, autocommit=True)
    ours.execute("DELETE FROM agent_memory.graph_nodes WHERE owner = 'peer-search'")
    ours.execute("SELECT agent_memory.recall_enable_embeddings(384)")
    for i, text in enumerate(texts):
        ours.execute("SELECT agent_memory.graph_create('peer-search', %s, '', '', ARRAY['__root__'], node_id => %s)",
                     (text, f"m{i}"))
        ours.execute("SELECT agent_memory.recall_embed('node', 'peer-search', %s, %s::real[])",
                     (f"m{i}", vectors[text]))
    ours.execute("ANALYZE agent_memory.graph_nodes")

    def lg_search(i):
        store.search(("users", "peer-search"), query=QUERIES[i % len(QUERIES)], limit=10)

    def am_search(i):
        ours.execute(
            "SELECT kind, ref, snippet, score FROM agent_memory.recall(NULL, owner => 'peer-search',"
            " kinds => '{node}', embedding => %s::real[])",
            (vectors[QUERIES[i % len(QUERIES)]],)).fetchall()

    def round_trip(i):
        ours.execute("SELECT %s::text", (QUERIES[i % len(QUERIES)],)).fetchone()

    # Both find the same best memory for every query.
    agree = sum(
        1 for q in QUERIES
        if store.search(("users", "peer-search"), query=q, limit=1)[0].key
        == ours.execute("SELECT ref FROM agent_memory.recall(NULL, owner => 'peer-search', kinds => '{node}',"
                        " embedding => %s::real[], k => 1)", (vectors[q],)).fetchone()[0])

    for fn in (lg_search, am_search, round_trip):
        for i in range(len(QUERIES)):
            fn(i)
    results = {name: [] for name in ("lg", "am", "round_trip")}
    for r in range(ROUNDS):
        order = [("lg", lg_search), ("am", am_search), ("round_trip", round_trip)]
        if r % 2:
            order.reverse()
        for name, fn in order:
            results[name].append(rate(SEARCHES, fn))
    med = {k: statistics.median(v) for k, v in results.items()}
    note = f"{MEMORIES} memories, top 10, same best memory for {agree} of {len(QUERIES)} queries"
    print(json.dumps(dict(case="langgraph_search", kind=f"search: recall vs PostgresStore.search ({note})",
                          unit="ops/s", ext=med["am"], base=med["lg"], ratio=med["am"] / med["lg"],
                          baseline="LangGraph PostgresStore")))
    print(json.dumps(dict(case="langgraph_search",
                          kind="search: a round trip doing nothing (SELECT $1) vs PostgresStore.search",
                          unit="ops/s", ext=med["round_trip"], base=med["lg"], ratio=med["round_trip"] / med["lg"],
                          baseline="LangGraph PostgresStore")))
    ours.execute("DELETE FROM agent_memory.graph_nodes WHERE owner = 'peer-search'")
    store_cm.__exit__(None, None, None)
    ours.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
