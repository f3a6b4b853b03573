"""Recall's quality by words, by meaning and by both, on the labelled set
the tests use (tests/integration/data/recall_set.json): over 200 memories
of one user, of every kind, and questions worded otherwise than the
memories they ask for.

The memories are stored through the extension's functions, as an agent
would; their embeddings are made by all-MiniLM-L6-v2 (bench/embed.py) from
what recall_outbox lists and stored with recall_embed, as an application's
worker would. Each question is asked three ways: its words alone, its
embedding alone, and both. Prints one JSON row per measure for
bench/run.py: recall@5 (the share of a question's expected memories among
the first five) and MRR (the mean of 1 / rank of the first expected one),
each mode against the keyword mode, and hybrid against meaning.
"""

import json
import os
import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from embed import embed  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SET = json.loads((ROOT / "tests/integration/data/recall_set.json").read_text())
DB = os.environ.get("BENCH_DB", "agent_memory_bench")
CASE = "recall_quality"
SCOPE = "user_id => 'qa', owner => 'qa', scope => 'qa'"


def literal(vector) -> str:
    return "{" + ",".join(f"{x:.7g}" for x in vector) + "}"


def store(conn) -> dict:
    """Store every memory; return the memory id at each (kind, key, ref)."""
    addresses = {}
    for session in range(1, 6):
        conn.execute("SELECT agent_memory.create_session('qa', session_id => %s)", (f"ann-{session}",))
    for m in SET["memories"]:
        kind, session = m["kind"], m.get("session", "")
        if kind == "kv":
            conn.execute("SELECT agent_memory.kv_set(%s, %s, %s::jsonb)",
                         (session, m["key"], json.dumps(m["value"])))
            address = ("kv", session, m["key"])
        elif kind == "message":
            seq = conn.execute("SELECT agent_memory.append_message(%s, %s, %s)",
                               (session, m["role"], m["content"])).fetchone()[0]
            address = ("message", session, str(seq))
        elif kind == "node":
            conn.execute("SELECT agent_memory.graph_create('qa', %s, %s, %s, ARRAY['__root__'], node_id => %s)",
                         (m["title"], m["description"], m["body"], m["node_id"]))
            address = ("node", "qa", m["node_id"])
        elif kind == "file":
            request = {"path": m["path"], "command": "append", "content": m["content"]}
            conn.execute("SELECT agent_memory.memory_tool('qa', %s::jsonb)", (json.dumps(request),))
            address = ("file", "qa", m["path"])
        else:
            conn.execute("SELECT agent_memory.wm_set(%s, 'fetched_context', %s::jsonb, %s)",
                         (session, json.dumps(m["value"]), m["node_id"]))
            address = ("working_memory", session, f"{m['node_id']}/fetched_context")
        addresses[address] = m["id"]
    return addresses


def embed_outbox(conn) -> int:
    """Embed what the outbox lists until it lists nothing."""
    stored = 0
    while True:
        rows = conn.execute(f"SELECT kind, key, ref, content, source_md5 FROM agent_memory.recall_outbox({SCOPE}, max_items => 500)").fetchall()
        if not rows:
            return stored
        vectors = embed([r[3] for r in rows])
        for (kind, key, ref, _, md5), vector in zip(rows, vectors):
            done = conn.execute("SELECT agent_memory.recall_embed(%s, %s, %s, %s::real[], %s)",
                                (kind, key, ref, literal(vector), md5)).fetchone()[0]
            stored += bool(done)


WEIGHTS = os.environ.get("BENCH_RECALL_WEIGHTS")  # jsonb, for trying others


def measure(conn, addresses, mode: str, question: dict, vector) -> tuple[float, float]:
    query = None if mode == "meaning" else question["query"]
    embedding = None if mode == "keyword" else literal(vector)
    rows = conn.execute(
        f"SELECT kind, key, ref FROM agent_memory.recall(%s, {SCOPE}, k => 5, embedding => %s::real[],"
        " weights => %s::jsonb)",
        (query, embedding, WEIGHTS if mode == "hybrid" else None)).fetchall()
    found = [addresses[tuple(r)] for r in rows]
    expected = question["expected"]
    hits = sum(1 for e in expected if e in found)
    first = next((i for i, f in enumerate(found) if f in expected), None)
    return hits / len(expected), 0.0 if first is None else 1 / (first + 1)


def main() -> int:
    questions = SET["questions"]
    with psycopg.connect(dbname=DB, autocommit=True) as conn:
        conn.execute("DELETE FROM agent_memory.sessions WHERE user_id = 'qa'")
        conn.execute("DELETE FROM agent_memory.graph_nodes WHERE owner = 'qa'")
        conn.execute("DELETE FROM agent_memory.memory_files WHERE scope = 'qa'")
        conn.execute("SELECT agent_memory.recall_enable_embeddings(384)")
        addresses = store(conn)
        stored = embed_outbox(conn)
        vectors = embed([q["query"] for q in questions])
        scores = {}
        for mode in ("keyword", "meaning", "hybrid"):
            pairs = [measure(conn, addresses, mode, q, v) for q, v in zip(questions, vectors)]
            scores[mode] = (sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs))
            print(f"   {mode:<8} recall@5 {scores[mode][0]:.3f}   MRR {scores[mode][1]:.3f}", file=sys.stderr)
        conn.execute("DELETE FROM agent_memory.sessions WHERE user_id = 'qa'")
        conn.execute("DELETE FROM agent_memory.graph_nodes WHERE owner = 'qa'")
        conn.execute("DELETE FROM agent_memory.memory_files WHERE scope = 'qa'")
    note = f"{len(SET['memories'])} memories ({stored} embedded), {len(questions)} questions"
    for measure_name, at in (("recall@5", 0), ("MRR", 1)):
        for mode, against in (("meaning", "keyword"), ("hybrid", "keyword"), ("hybrid", "meaning")):
            ext, base = scores[mode][at], scores[against][at]
            print(json.dumps(dict(case=CASE, kind=f"{measure_name}, {mode} ({note})", unit="",
                                  ext=ext, base=base, ratio=ext / base if base else float("inf"),
                                  baseline=f"{against} only")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
