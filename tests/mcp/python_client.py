"""agent-memory-mcp driven by the official Python MCP SDK (`mcp` on PyPI).

Starts the server binary over stdio and over streamable HTTP, lists its
tools and resources, runs the travel assistant of examples/SCENARIO.md
through its tools, and checks what the database holds afterwards. Then the
failures an operator meets: a tool argument that names another scope, a
write over the size limit, malformed JSON-RPC, a database restart while the
server runs, a database that is down, and a server confined to a tenant.

Run it against a fresh database where `CREATE EXTENSION agent_memory` was
done, named by PGHOST, PGPORT, PGUSER (a superuser: the test restarts the
server) and PGDATABASE; MCP_SERVER names the binary (default: the debug
build), PG_BINDIR the directory of pg_ctl:

    PGDATABASE=mydb python tests/mcp/python_client.py

It prints `ok - <check>` per check and exits with 1 at the first failure.
"""

import asyncio
import json
import os
import select
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import psycopg
from mcp import Client, StdioServerParameters

REPO = Path(__file__).resolve().parents[2]
SERVER = os.environ.get("MCP_SERVER", str(REPO / "target/debug/agent-memory-mcp"))
USER = "alice"
SESSION_ID = "trip-mcp"
NODE = "travel-agent"
DSN = "host={PGHOST} port={PGPORT} user={PGUSER} dbname={PGDATABASE}".format(**os.environ)

TOOLS = ["memory", "recall", "remember", "forget", "graph_read", "graph_create", "graph_write", "graph_append",
         "graph_delete", "graph_tree"]


def check(condition, what, got=None):
    if not condition:
        print(f"FAILED - {what}" + ("" if got is None else f": got {got!r}"))
        sys.exit(1)
    print(f"ok - {what}")


def sql(query, *args):
    with psycopg.connect(DSN, autocommit=True) as conn:
        return conn.execute(query, args).fetchone()[0]


def run(statement):
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(statement)


SCOPE = sql("SELECT agent_memory.memory_scope(%s)", NODE)


def server_args(dsn=DSN, scope=SCOPE):
    return ["--dsn", dsn, "--scope", scope, "--session", SESSION_ID, "--user", USER, "--owner", USER]


def envelope(result):
    """The extension's envelope of a tool result, as its text content."""
    return json.loads(result.content[0].text)


async def call(client, tool, arguments):
    result = await client.call_tool(tool, arguments)
    return result, envelope(result)


async def scenario(client):
    tools = await client.list_tools()
    names = [tool.name for tool in tools.tools]
    check(names == TOOLS, "stdio: the server lists the tools its options enable", names)
    memory = next(tool for tool in tools.tools if tool.name == "memory")
    definition = sql("SELECT agent_memory.memory_tool_definition()")
    check(memory.input_schema == definition["input_schema"] and memory.description == definition["description"],
          "the memory tool's definition is memory_tool_definition()'s")
    recall_tool = next(tool for tool in tools.tools if tool.name == "recall")
    check(recall_tool.input_schema == sql("SELECT agent_memory.recall_tool_definition()")["input_schema"],
          "the recall tool's definition is recall_tool_definition()'s")

    resources = await client.list_resources()
    uris = sorted(resource.uri for resource in resources.resources)
    check(uris == sorted([f"graph://{USER}/tree", "memory://" + quote(SCOPE, safe="-_.~") + "/tree"]),
          "the server lists the memory tree and the graph tree of its own scope and owner", uris)

    # Turn 1: alice asks for a flight and states a preference.
    result, answer = await call(client, "recall", {"query": "I'd like to fly to Lisbon next week. I prefer a window seat."})
    check(not result.is_error and answer["ok"] and answer["result"]["memories"] == [],
          "turn 1: recall finds nothing yet", answer)
    result, answer = await call(client, "memory", {"command": "list", "path": "/"})
    check(not result.is_error and answer["ok"], "turn 1: memory list / answers ok", answer)
    result, answer = await call(client, "memory", {"command": "append", "path": "/preferences.md", "content": "- seat: window\n"})
    check(not result.is_error and answer["result"]["version"] == 1, "turn 1: memory append creates /preferences.md", answer)
    for key, value in [("destination", "Lisbon"), ("seat", "window")]:
        result, answer = await call(client, "remember", {"key": key, "value": value})
        check(not result.is_error and answer["result"]["stored"] is True, f"turn 1: remember {key} (the session is made for alice)", answer)

    # Turn 2: she asks what she likes, and adds a fact.
    result, answer = await call(client, "recall", {"query": "Remind me which seat I like", "k": 3})
    found = {(memory["kind"], memory["ref"]) for memory in answer["result"]["memories"]}
    check(("kv", "seat") in found and ("file", "/preferences.md") in found,
          "turn 2: recall finds the remembered seat and the preferences file", found)
    result, answer = await call(client, "memory", {"command": "read", "path": "/preferences.md"})
    check(answer["result"]["content"] == "- seat: window\n", "turn 2: memory read gives the file back", answer)
    result, answer = await call(client, "memory", {"command": "append", "path": "/preferences.md", "content": "- meal: vegetarian\n"})
    check(not result.is_error and answer["ok"], "turn 2: memory append adds the meal", answer)
    result, answer = await call(client, "remember", {"key": "meal", "value": "vegetarian", "ttl_seconds": 3600})
    check(not result.is_error, "turn 2: remember meal with a TTL", answer)
    result, answer = await call(client, "forget", {"key": "destination"})
    check(answer == {"ok": True, "result": {"deleted": True}}, "forget deletes a key", answer)

    # The graph tools, on alice's graph.
    result, answer = await call(client, "graph_create", {"title": "Trips", "description": "Where alice goes", "body": "Lisbon"})
    node = answer["result"]["id"]
    check(not result.is_error, "graph_create makes a node under the root", answer)
    result, answer = await call(client, "graph_write", {"node_id": node, "body": "Lisbon, next week", "change_description": "dates", "expected_revision": 1})
    check(answer == {"ok": True, "result": {"version": 2}}, "graph_write with a change description makes version 2", answer)
    result, answer = await call(client, "graph_write", {"node_id": node, "body": "stale", "expected_revision": 1})
    check(result.is_error and answer["error"]["code"] == "ECONFLICT", "graph_write at a stale revision is refused with ECONFLICT", answer)
    result, answer = await call(client, "graph_append", {"node_id": node, "content": "window seat", "expected_revision": 2})
    check(answer == {"ok": True, "result": {"version": 2}}, "graph_append adds to the body in place", answer)
    result, answer = await call(client, "graph_append", {"node_id": node, "content": "stale", "expected_revision": 2})
    check(result.is_error and answer["error"]["code"] == "ECONFLICT", "graph_append at a stale revision is refused with ECONFLICT", answer)
    result, answer = await call(client, "graph_read", {"node_id": node})
    check(answer["result"]["body"] == "Lisbon, next week\nwindow seat", "graph_read reads the node", answer)
    result, answer = await call(client, "graph_create", {"title": "Scratch", "node_id": "scratch"})
    check(not result.is_error, "graph_create makes a second node", answer)
    result, answer = await call(client, "graph_delete", {"node_id": "scratch"})
    check(answer == {"ok": True, "result": {"deleted": True}}, "graph_delete deletes the node", answer)
    result, answer = await call(client, "graph_delete", {"node_id": "scratch"})
    check(answer == {"ok": True, "result": {"deleted": False}}, "graph_delete of a missing node says so", answer)
    result, answer = await call(client, "graph_tree", {})
    check([child["id"] for child in answer["result"]["children"]["__root__"]] == [node], "graph_tree has the node under the root", answer)

    # What the database holds is what the tools said.
    check(sql("SELECT agent_memory.memory_tool(%s, '{\"command\": \"read\", \"path\": \"/preferences.md\"}')::jsonb", SCOPE)["result"]["content"]
          == "- seat: window\n- meal: vegetarian\n", "the file holds both lines")
    check(sql("SELECT agent_memory.kv_get(%s, 'meal')", SESSION_ID) == "vegetarian"
          and sql("SELECT agent_memory.kv_get(%s, 'destination')", SESSION_ID) is None,
          "key-value memory holds meal and no destination")

    tree = await client.read_resource([uri for uri in uris if uri.startswith("memory://")][0])
    check("preferences.md" in tree.contents[0].text, "the memory tree resource lists preferences.md", tree.contents[0].text)
    graph = await client.read_resource(f"graph://{USER}/tree")
    check(json.loads(graph.contents[0].text)["children"]["__root__"][0]["title"] == "Trips", "the graph tree resource has the node")


def listening_connections():
    return sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agent-memory-mcp'"
               " AND query LIKE 'LISTEN %%'")


async def notifications(client):
    """A subscriber hears of each change of its resources, whoever writes;
    the server listens only while someone is subscribed."""
    memory_uri = "memory://" + quote(SCOPE, safe="-_.~") + "/tree"
    graph_uri = f"graph://{USER}/tree"
    check(listening_connections() == 0, "with no subscriber the server does not LISTEN")
    async with client.listen(resource_subscriptions=[memory_uri, graph_uri, "memory://other/tree"]) as subscription:
        check(sorted(subscription.honored.resource_subscriptions) == sorted([memory_uri, graph_uri]),
              "a subscription holds the server's own resources only", subscription.honored)
        events = aiter(subscription)
        # Once LISTEN takes effect, each resource may have changed meanwhile.
        first = {(await asyncio.wait_for(anext(events), 10)).uri for _ in range(2)}
        check(first == {memory_uri, graph_uri}, "once listening, the server announces both resources", first)
        check(listening_connections() == 1, "with a subscriber it LISTENs on one connection")
        await call(client, "memory", {"command": "append", "path": "/trips.md", "content": "- Lisbon\n"})
        event = await asyncio.wait_for(anext(events), 10)
        check(event.uri == memory_uri, "a file written through the server announces the memory tree", event)
        # Another agent's write, straight to SQL.
        sql("SELECT agent_memory.graph_create(%s, 'Hotels', '', '', ARRAY['__root__'])", USER)
        event = await asyncio.wait_for(anext(events), 10)
        check(event.uri == graph_uri, "a graph write by another connection announces the graph tree", event)
    check(await eventually(lambda: listening_connections() == 0, 5),
          "when the last subscriber leaves, the server stops listening")


async def refusals(client):
    # Bob's node, by the same id alice's tools could name.
    sql("SELECT agent_memory.graph_create('bob', 'Secret', '', 'bob only', ARRAY['__root__'], 'bob-secret')")
    result, answer = await call(client, "graph_read", {"node_id": "bob-secret", "owner": "bob"})
    check(result.is_error and answer["error"]["code"] == "ENOENT",
          "an owner among a tool's arguments reaches nothing: alice's graph has no bob-secret", answer)
    sql("SELECT agent_memory.memory_tool('other', '{\"command\": \"append\", \"path\": \"/secret.md\", \"content\": \"x\"}')")
    result, answer = await call(client, "memory", {"command": "read", "path": "/secret.md", "scope": "other"})
    check(result.is_error and answer["error"]["code"] == "ENOENT",
          "a scope among the memory tool's arguments reaches nothing: the own scope has no /secret.md", answer)
    limit = int(sql("SELECT setting FROM pg_settings WHERE name = 'agent_memory.max_file_bytes'"))
    result, answer = await call(client, "memory", {"command": "append", "path": "/big.md", "content": "x" * (limit + 1)})
    check(result.is_error and answer["error"]["code"] == "EFBIG", "a file over max_file_bytes is refused with EFBIG", answer)
    result, answer = await call(client, "remember", {"key": "k"})
    check(result.is_error and answer["error"]["code"] == "EINVAL", "remember without a value is refused with EINVAL", answer)
    result, answer = await call(client, "memory", {"command": "read", "path": "/missing.md"})
    check(result.is_error and answer["error"]["code"] == "ENOENT", "a read of a missing file is a tool error, not a protocol error", answer)


def pg_ctl(*args):
    data = sql("SHOW data_directory") if args[0] != "start" else pg_ctl.data
    pg_ctl.data = data
    command = [os.path.join(os.environ["PG_BINDIR"], "pg_ctl"), *args, "-D", data, "-w", "-l", os.path.join(os.path.dirname(data), "server.log")]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


async def outages(client):
    pg_ctl("restart", "-m", "fast")
    result, answer = await call(client, "memory", {"command": "read", "path": "/preferences.md"})
    check(not result.is_error and answer["ok"], "after a database restart the next call reconnects and succeeds", answer)
    pg_ctl("stop", "-m", "fast")
    try:
        result, answer = await call(client, "memory", {"command": "read", "path": "/preferences.md"})
        check(result.is_error and answer["error"]["code"] == "EUNAVAILABLE" and "unavailable" in answer["error"]["message"],
              "with the database down a call is a clear tool error", answer)
        result, answer = await call(client, "remember", {"key": "k", "value": 1})
        check(result.is_error and answer["error"]["code"] == "EUNAVAILABLE", "and so is the next one: the server keeps serving", answer)
    finally:
        pg_ctl("start")
    result, answer = await call(client, "memory", {"command": "read", "path": "/preferences.md"})
    check(not result.is_error, "once the database is back, calls succeed again", answer)


def malformed_json_rpc():
    """Raw lines on the server's stdin: each gets one answer, and stdout
    carries only JSON-RPC."""
    def message(**fields):
        return json.dumps({"jsonrpc": "2.0", **fields}).encode()

    deep = "".join(['{"a": '] * 130) + "1" + "}" * 130
    lines = [
        b"this is not json",
        message(id=1, method="initialize", params={
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}),
        message(method="notifications/initialized"),
        json.dumps({"id": 2, "method": "tools/list"}).encode(),
        message(id=3, method="tools/call", params={
            "name": "memory", "arguments": {"command": "append", "path": "/huge.md", "content": "x" * (64 << 20)}}),
        message(id=4, method="tools/list"),
        b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "memory", "arguments": ' + deep.encode() + b"}}",
        b'{"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"text": "\xff\xfe"}}',
        b"[" * 200 + b"]" * 200,
        b"\xef\xbb\xbf" + message(id=7, method="ping"),
    ]
    process = subprocess.run([SERVER, *server_args()], input=b"\n".join(lines) + b"\n", capture_output=True, timeout=120)
    answers = [json.loads(line) for line in process.stdout.decode().splitlines()]
    check(process.returncode == 0, "the server ends cleanly when its stdin ends", process.stderr.decode())
    check(len(answers) == len(lines) - 1, "every line but the notification gets one answer", answers)
    # Refusals made before rmcp reads a line may overtake rmcp's answers:
    # those with an id are matched by it, the others by their order.
    by_id = {answer["id"]: answer for answer in answers if answer.get("id") is not None}
    without_id = [answer["error"]["code"] for answer in answers if answer.get("id") is None]
    check(without_id[0] == -32700, "a line that is not JSON gets a parse error", answers)
    check("result" in by_id[1], "the server keeps serving after it", by_id[1])
    check(by_id[2]["error"]["code"] == -32600,
          "a message that is not JSON-RPC gets an invalid request error with its id", by_id[2])
    check(by_id[3]["error"]["code"] == -32600,
          "a message longer than the server reads (64 MiB) gets an invalid request error with its id", by_id[3])
    check(len(by_id[4]["result"]["tools"]) == len(TOOLS), "and the next request is answered", by_id[4])
    check(by_id[5]["error"]["code"] == -32600,
          "a message nested deeper than the server reads gets an invalid request error with its id", by_id[5])
    check(by_id[6]["error"]["code"] == -32600,
          "a message with invalid UTF-8 in a string gets an invalid request error with its id", by_id[6])
    check(without_id[1:] == [-32600], "arrays nested 200 levels get an invalid request error", answers)
    check("result" in by_id[7], "a message after a byte order mark is answered", by_id[7])


class RawServer:
    """The server over stdio, one JSON-RPC line at a time."""

    def __init__(self, *extra):
        self.process = subprocess.Popen([SERVER, *server_args(), *extra], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
        self.receive(10)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def call(self, id, tool, arguments):
        self.send({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})

    def receive(self, timeout):
        """The next line of stdout as JSON, or None after `timeout` seconds."""
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def lock_waiting_backend():
    """The server's backend that waits on a lock, once one does."""
    for _ in range(200):
        pid = sql("SELECT max(pid) FROM pg_stat_activity WHERE application_name = 'agent-memory-mcp' "
                  "AND wait_event_type = 'Lock'")
        if pid is not None:
            return pid
        time.sleep(0.05)
    return None


def kv_count(key):
    return sql("SELECT count(*) FROM agent_memory.kv_entries WHERE session_id = %s AND key = %s", SESSION_ID, key)


def lost_connections():
    """The connection is lost while a write waits on a lock: the write is
    not sent again on another connection, where it would run twice."""
    with psycopg.connect(DSN) as holder:
        holder.execute("LOCK TABLE agent_memory.kv_entries IN EXCLUSIVE MODE")
        server = RawServer()
        server.call(10, "remember", {"key": "lost-connection", "value": 1})
        pid = lock_waiting_backend()
        check(pid is not None, "a write waits on a lock the test holds")
        run(f"SELECT pg_terminate_backend({pid})")
        answer = server.receive(2)
        holder.rollback()
    answer = answer or server.receive(10)
    envelope_text = answer["result"]["content"][0]["text"] if answer and "result" in answer else None
    check(envelope_text and json.loads(envelope_text)["error"]["code"] == "EUNAVAILABLE"
          and "may or may not" in json.loads(envelope_text)["error"]["message"],
          "a write whose connection is lost as it runs is answered EUNAVAILABLE: it may or may not be applied", answer)
    time.sleep(0.5)
    check(kv_count("lost-connection") == 0, "and it is not sent again on another connection")
    server.close()


def cancelled_calls():
    """A call the client cancels: its statement is cancelled in PostgreSQL,
    and the pool's only connection serves the next call."""
    with psycopg.connect(DSN) as holder:
        holder.execute("LOCK TABLE agent_memory.kv_entries IN EXCLUSIVE MODE")
        server = RawServer("--pool-size", "1")
        server.call(20, "remember", {"key": "cancelled", "value": 1})
        check(lock_waiting_backend() is not None, "a write waits on a lock the test holds")
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 20, "reason": "test"}})
        stopped = False
        for _ in range(100):
            if sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agent-memory-mcp' "
                   "AND wait_event_type = 'Lock'") == 0:
                stopped = True
                break
            time.sleep(0.05)
        check(stopped, "a cancelled call's statement stops in PostgreSQL")
        holder.rollback()
    server.call(21, "memory", {"command": "read", "path": "/preferences.md"})
    answer = server.receive(5)
    check(answer is not None and answer["id"] == 21 and not answer["result"].get("isError"),
          "the next call is served on the pool's one connection", answer)
    time.sleep(0.5)
    check(kv_count("cancelled") == 0, "and the cancelled write did not happen")
    server.close()


def abandoned_calls():
    """stdin ends while a write waits: the server cancels it as it exits,
    rather than leave it to commit after."""
    with psycopg.connect(DSN) as holder:
        holder.execute("LOCK TABLE agent_memory.kv_entries IN EXCLUSIVE MODE")
        server = RawServer()
        server.call(30, "remember", {"key": "abandoned", "value": 1})
        check(lock_waiting_backend() is not None, "a write waits on a lock the test holds")
        server.close()
        check(server.process.returncode == 0, "the server exits once its stdin ends, the write still waiting")
        holder.rollback()
    time.sleep(0.5)
    check(kv_count("abandoned") == 0, "and the write it abandoned is not applied after it")


async def eventually(condition, seconds=10):
    """Whether `condition()` holds within `seconds`, looking every 0.1 s."""
    for _ in range(int(seconds * 10)):
        if condition():
            return True
        await asyncio.sleep(0.1)
    return condition()


def free_port():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return listener.getsockname()[1]


async def over_http():
    port = free_port()
    server = subprocess.Popen([SERVER, *server_args(), "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            tools = await client.list_tools()
            check([tool.name for tool in tools.tools] == TOOLS, "HTTP: the server lists the same tools")
            result, answer = await call(client, "memory", {"command": "read", "path": "/preferences.md"})
            check(answer["result"]["content"] == "- seat: window\n- meal: vegetarian\n", "HTTP: memory read gives the file", answer)
            resources = await client.list_resources()
            check(len(resources.resources) == 2, "HTTP: the server lists its two resources")
        # A client of an earlier protocol has a session, and subscribes in it.
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            await client.subscribe_resource("memory://" + quote(SCOPE, safe="-_.~") + "/tree")
            check(await eventually(lambda: listening_connections() == 1),
                  "HTTP: a resources/subscribe subscription LISTENs")
        # Leaving the client deletes its HTTP session, which ends the
        # session's subscriptions.
        check(await eventually(lambda: listening_connections() == 0),
              "HTTP: once a subscriber's session ends, the server stops listening")
    finally:
        server.terminate()
        server.wait(timeout=30)


async def tenants():
    """--tenant: the server's writes land in its tenant, which others cannot read."""
    run(f"ALTER DATABASE {os.environ['PGDATABASE']} SET agent_memory.tenant_isolation = on")
    try:
        params = StdioServerParameters(command=SERVER, args=["--dsn", DSN, "--scope", "shared", "--tenant", "acme corp"])
        async with Client(params) as client:
            result, answer = await call(client, "memory", {"command": "append", "path": "/plan.md", "content": "acme's plan"})
            check(not result.is_error, "a server with --tenant writes a file", answer)

        def read_as(tenant):
            with psycopg.connect(DSN, autocommit=True) as conn:
                conn.execute("SELECT set_config('agent_memory.tenant', %s, false)", (tenant,))
                return conn.execute(
                    """SELECT agent_memory.memory_tool('shared', '{"command": "read", "path": "/plan.md"}')::jsonb""").fetchone()[0]

        check(read_as("acme corp")["result"]["content"] == "acme's plan", "the file is the tenant's")
        check(read_as("globex")["error"]["code"] == "ENOENT", "and another tenant of the same role cannot read it")
    finally:
        run(f"ALTER DATABASE {os.environ['PGDATABASE']} RESET agent_memory.tenant_isolation")


async def main():
    params = StdioServerParameters(command=SERVER, args=server_args())
    async with Client(params) as client:
        await scenario(client)
        await notifications(client)
        await refusals(client)
        await outages(client)
    malformed_json_rpc()
    lost_connections()
    cancelled_calls()
    abandoned_calls()
    await over_http()
    await tenants()


if __name__ == "__main__":
    asyncio.run(main())
