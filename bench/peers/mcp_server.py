#!/usr/bin/env python3
"""A memory read through agent-memory-mcp against the same read in SQL.

The official Python MCP SDK starts the server over stdio and calls the
`memory` tool's read; psycopg runs the statement the server runs,
memory_tool(scope, request), on its own connection. A resources/list
through the same client and server (the protocol's round trip, with no
database behind it, the client's cache bypassed) bounds what any MCP
server could do. Alternating rounds; medians.

Prints one JSON object per line (the rows bench/run.py puts in
BENCHMARKS.md). Connection: the libpq PG* variables; database in BENCH_DB;
the server binary in BENCH_MCP_SERVER.
"""

import asyncio
import json
import os
import statistics
import sys
import time

import psycopg
from mcp import Client, StdioServerParameters

DB = os.environ.get("BENCH_DB", "agent_memory_bench")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
READS = int(os.environ.get("BENCH_PEER_READS", 2000))
SERVER = os.environ["BENCH_MCP_SERVER"]
SCOPE = "bench-mcp"
REQUEST = {"command": "read", "path": "/notes.md"}
DSN = "host={} port={} user={} dbname={}".format(
    os.environ["PGHOST"], os.environ["PGPORT"], os.environ.get("PGUSER", "postgres"), DB)


async def rate(n, fn):
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return n / (time.perf_counter() - start)


async def main():
    sql = psycopg.connect(DSN, autocommit=True)
    for command in ({"command": "delete", "path": "/notes.md"},
                    {"command": "append", "path": "/notes.md", "content": "- seat: window\n- meal: vegetarian\n"}):
        sql.execute("SELECT agent_memory.memory_tool(%s, %s::jsonb)", (SCOPE, json.dumps(command)))
    request = json.dumps(REQUEST)
    params = StdioServerParameters(command=SERVER, args=["--dsn", DSN, "--scope", SCOPE])
    async with Client(params) as client:
        async def mcp_read():
            result = await client.call_tool("memory", REQUEST)
            assert not result.is_error, result

        async def mcp_list():
            await client.list_resources(cache_mode="bypass")

        async def sql_read():
            sql.execute("SELECT agent_memory.memory_tool(%s, %s::jsonb)", (SCOPE, request)).fetchone()

        runs = {"mcp_read": mcp_read, "mcp_list": mcp_list, "sql_read": sql_read}
        for fn in runs.values():
            for _ in range(100):
                await fn()
        results = {name: [] for name in runs}
        for r in range(ROUNDS):
            order = list(runs.items())
            if r % 2:
                order.reverse()
            for name, fn in order:
                results[name].append(await rate(READS, fn))
    sql.close()
    med = {name: statistics.median(rates) for name, rates in results.items()}

    def row(kind, ext, base, baseline):
        print(json.dumps(dict(case="mcp", kind=kind, unit="ops/s", ext=med[ext], base=med[base],
                              ratio=med[ext] / med[base], baseline=baseline)))

    row("memory read through the MCP server (stdio, Python SDK) vs memory_tool from psycopg",
        "mcp_read", "sql_read", "memory_tool from psycopg")
    row("floor: an MCP request with no database behind it (resources/list, stdio, Python SDK) vs memory_tool from psycopg",
        "mcp_list", "sql_read", "memory_tool from psycopg")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
