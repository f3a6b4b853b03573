#!/usr/bin/env python3
"""agent_memory against the OpenAI Agents SDK's SQLAlchemySession, from Python.

One operation = append one message, then read the last 50, as an agent loop
does every turn. The SDK: `add_items` then `get_items(limit=50)` through
SQLAlchemy and asyncpg, its own tables on the same server and database. Ours:
`append_message(..., keep => 50)` then `messages_json(..., lim => 50)` through
psycopg (one autocommit connection), as two calls, and also as one: both
statements in one message (psycopg's ClientCursor binds the parameters
client-side and sends them as one query, which runs as one transaction),
so the pair costs one round trip. Plain SQL (an INSERT into a table with
the same columns, then the last 50 by seq) is measured in the same run, both
ways, for context. Alternating rounds; medians.

Also one turn of an agent with a tool: four items (the user's message, the
model's tool call, the tool's output, the model's answer) added at once,
then the last 50 read: the SDK's `add_items` of the four items against one
`append_messages` call.

Prints one JSON object per line (the rows bench/run.py puts in
BENCHMARKS.md). Connection: the libpq PG* variables; database in BENCH_DB.
"""

import asyncio
import json
import os
import statistics
import sys
import time

import psycopg
from psycopg.types.json import Jsonb
from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
OPS = int(os.environ.get("BENCH_PEER_OPS", 300))
TEXT = "The user asked to compare three flights to Lisbon and to keep the window seat preference."


def sqlalchemy_url() -> str:
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    user = os.environ.get("PGUSER", "postgres")
    if host.startswith("/"):
        # asyncpg takes a socket directory as the host query parameter.
        return f"postgresql+asyncpg://{user}@/{DB}?host={host}&port={port}"
    return f"postgresql+asyncpg://{user}@{host}:{port}/{DB}"


async def sdk_rate(session: SQLAlchemySession, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await session.add_items([{"role": "user", "content": f"{TEXT} {i}"}])
        await session.get_items(limit=50)
    return n / (time.perf_counter() - start)


def turn_items(i: int) -> list[dict]:
    """One turn with a tool call, as the SDK's items (Responses API shapes)."""
    call = f"call_{i}"
    return [{"role": "user", "content": f"{TEXT} {i}"},
            {"type": "function_call", "call_id": call, "name": "search_flights", "arguments": '{"to": "LIS"}'},
            {"type": "function_call_output", "call_id": call, "output": "3 flights found"},
            {"role": "assistant", "content": "TAP at 9:00 is the cheapest."}]


def turn_messages(i: int) -> list[dict]:
    """The same turn as append_messages takes it."""
    call = f"call_{i}"
    return [{"role": "user", "content": f"{TEXT} {i}"},
            {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"id": call, "name": "search_flights"}]}},
            {"role": "tool", "content": "3 flights found", "metadata": {"tool_call_id": call}},
            {"role": "assistant", "content": "TAP at 9:00 is the cheapest."}]


async def sdk_turn_rate(session: SQLAlchemySession, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        await session.add_items(turn_items(i))
        await session.get_items(limit=50)
    return n / (time.perf_counter() - start)


def sync_rate(n: int, op) -> float:
    start = time.perf_counter()
    for i in range(n):
        op(i)
    return n / (time.perf_counter() - start)


async def main() -> int:
    sdk = SQLAlchemySession.from_url("sdk-bench", url=sqlalchemy_url(), create_tables=True)
    sdk_turns = SQLAlchemySession("sdk-bench-turns", engine=sdk.engine, create_tables=True)
    ours = psycopg.connect(f"dbname={DB}", autocommit=True)
    ours.execute("SELECT agent_memory.create_session('peer-bench', session_id => 'sdk-peer')")
    ours.execute("SELECT agent_memory.create_session('peer-bench', session_id => 'sdk-peer-turns')")
    ours.execute("DROP TABLE IF EXISTS bench_sdk_plain")
    ours.execute("""CREATE TABLE bench_sdk_plain (seq bigserial PRIMARY KEY, session_id text NOT NULL,
                    role text NOT NULL, content text NOT NULL, metadata jsonb NOT NULL DEFAULT '{}',
                    created_at timestamptz NOT NULL DEFAULT now())""")
    ours.execute("CREATE INDEX ON bench_sdk_plain (session_id, seq)")

    def am_op(i):
        ours.execute("SELECT agent_memory.append_message('sdk-peer', 'user', %s, keep => 50)", (f"{TEXT} {i}",))
        ours.execute("SELECT agent_memory.messages_json('sdk-peer', lim => 50)").fetchone()

    # Both statements in one message: one round trip, one transaction.
    together = psycopg.ClientCursor(ours)

    def am_one_trip_op(i):
        together.execute("SELECT agent_memory.append_message('sdk-peer', 'user', %s, keep => 50);"
                         "SELECT agent_memory.messages_json('sdk-peer', lim => 50)", (f"{TEXT} {i}",))
        together.nextset()
        return together.fetchone()

    def sql_one_trip_op(i):
        together.execute("INSERT INTO bench_sdk_plain (session_id, role, content) VALUES ('sdk-peer', 'user', %s);"
                         "SELECT role, content, metadata, seq, created_at FROM bench_sdk_plain"
                         " WHERE session_id = 'sdk-peer' ORDER BY seq DESC LIMIT 50", (f"{TEXT} {i}",))
        together.nextset()
        return together.fetchall()

    def am_turn_op(i):
        ours.execute("SELECT agent_memory.append_messages('sdk-peer-turns', %s, keep => 50)",
                     (Jsonb(turn_messages(i)),))
        ours.execute("SELECT agent_memory.messages_json('sdk-peer-turns', lim => 50)").fetchone()

    def sql_op(i):
        ours.execute("INSERT INTO bench_sdk_plain (session_id, role, content) VALUES ('sdk-peer', 'user', %s)",
                     (f"{TEXT} {i}",))
        ours.execute("""SELECT role, content, metadata, seq, created_at FROM bench_sdk_plain
                        WHERE session_id = 'sdk-peer' ORDER BY seq DESC LIMIT 50""").fetchall()

    def floor_op(i):
        # The least an append and a read of the last 50, as two calls, can
        # cost from here: a round trip that does nothing with the message,
        # and one that returns the same 50 messages already made (one
        # stored value, read and sent as it is).
        ours.execute("SELECT %s::text", (f"{TEXT} {i}",)).fetchone()
        ours.execute("SELECT doc FROM bench_sdk_floor").fetchone()

    def floor_one_trip_op(i):
        # The least the pair costs as one message: the same two statements'
        # shapes doing no work.
        together.execute("SELECT %s::text; SELECT doc FROM bench_sdk_floor", (f"{TEXT} {i}",))
        together.nextset()
        return together.fetchone()

    # Warm up every path (connections, prepared statements, 50 messages each).
    await sdk_rate(sdk, 60)
    await sdk_turn_rate(sdk_turns, 15)
    sync_rate(60, am_op)
    sync_rate(15, am_turn_op)
    sync_rate(60, sql_op)
    ours.execute("DROP TABLE IF EXISTS bench_sdk_floor")
    ours.execute("""CREATE TABLE bench_sdk_floor AS
                    SELECT agent_memory.messages_json('sdk-peer', lim => 50) AS doc""")
    sync_rate(60, floor_op)
    sync_rate(60, am_one_trip_op)
    sync_rate(60, sql_one_trip_op)
    sync_rate(60, floor_one_trip_op)

    results = {"sdk": [], "am": [], "sql": [], "floor": [], "am_one": [], "sql_one": [], "floor_one": [],
               "sdk_turn": [], "am_turn": []}
    for r in range(ROUNDS):
        order = ["sdk", "am", "sql", "floor", "am_one", "sql_one", "floor_one", "sdk_turn", "am_turn"]
        if r % 2:
            order.reverse()
        for name in order:
            if name == "sdk":
                results[name].append(await sdk_rate(sdk, OPS))
            elif name == "sdk_turn":
                results[name].append(await sdk_turn_rate(sdk_turns, OPS // 2))
            elif name == "am_turn":
                results[name].append(sync_rate(OPS // 2, am_turn_op))
            else:
                op = {"am": am_op, "sql": sql_op, "floor": floor_op, "am_one": am_one_trip_op, "sql_one": sql_one_trip_op,
                      "floor_one": floor_one_trip_op}[name]
                results[name].append(sync_rate(OPS, op))
    med = {k: statistics.median(v) for k, v in results.items()}

    def row(kind, ext, base, baseline):
        print(json.dumps(dict(case="openai_agents_session", kind=kind, unit="ops/s", ext=med[ext],
                              base=med[base], ratio=med[ext] / med[base], baseline=baseline)))

    row("append + last 50: ours vs SQLAlchemySession", "am", "sdk", "OpenAI Agents SQLAlchemySession")
    row("append + last 50: plain SQL vs SQLAlchemySession", "sql", "sdk", "OpenAI Agents SQLAlchemySession")
    row("append + last 50: ours vs plain SQL (Python)", "am", "sql", "plain SQL")
    # How far any pair of calls could get: no work at all on the server.
    row("append + last 50: two round trips doing no work vs SQLAlchemySession", "floor", "sdk",
        "OpenAI Agents SQLAlchemySession")
    row("append + last 50 in one round trip (both statements in one message): ours vs SQLAlchemySession",
        "am_one", "sdk", "OpenAI Agents SQLAlchemySession")
    row("append + last 50 in one round trip: plain SQL vs SQLAlchemySession", "sql_one", "sdk",
        "OpenAI Agents SQLAlchemySession")
    row("append + last 50: one round trip doing no work vs SQLAlchemySession", "floor_one", "sdk",
        "OpenAI Agents SQLAlchemySession")
    row("a turn of 4 items + last 50: append_messages vs add_items", "am_turn", "sdk_turn",
        "OpenAI Agents SQLAlchemySession")

    ours.execute("DROP TABLE bench_sdk_plain")
    ours.execute("DROP TABLE bench_sdk_floor")
    ours.execute("SELECT agent_memory.end_session('sdk-peer')")
    ours.execute("SELECT agent_memory.end_session('sdk-peer-turns')")
    ours.close()
    await sdk.engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
