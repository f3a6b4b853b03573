// agent-memory-mcp driven over stdio by the official TypeScript MCP SDK
// (@modelcontextprotocol/sdk): the tools it lists, the memory scenario of
// examples/SCENARIO.md through them, a refusal as a tool error, the
// resources, and a subscription to one. Against a fresh database with the extension, named by PGHOST,
// PGPORT, PGUSER and PGDATABASE; MCP_SERVER names the binary (default: the
// debug build).
//
//   npm ci && PGDATABASE=mydb node client.mjs
//
// Prints `ok - <check>` per check and exits with 1 at the first failure.

import { fileURLToPath } from "node:url";
import path from "node:path";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import pg from "pg";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const server = process.env.MCP_SERVER ?? path.join(repo, "target/debug/agent-memory-mcp");
const { PGHOST, PGPORT, PGUSER, PGDATABASE } = process.env;
const dsn = `host=${PGHOST} port=${PGPORT} user=${PGUSER} dbname=${PGDATABASE}`;

function check(condition, what, got) {
  if (!condition) {
    console.log(`FAILED - ${what}${got === undefined ? "" : `: got ${JSON.stringify(got)}`}`);
    process.exit(1);
  }
  console.log(`ok - ${what}`);
}

// JSON with every object's keys sorted, to compare values, not key order.
const canonical = (value) => JSON.stringify(value, (key, v) =>
  v && typeof v === "object" && !Array.isArray(v)
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, v[k]]))
    : v);

const db = new pg.Client();
await db.connect();
const sql = async (text, values = []) => Object.values((await db.query(text, values)).rows[0])[0];
const scope = await sql("SELECT agent_memory.memory_scope($1)", ["travel-agent"]);

const transport = new StdioClientTransport({
  command: server,
  args: ["--dsn", dsn, "--scope", scope, "--session", "trip-mcp-node", "--user", "alice"],
  stderr: "inherit",
});
const client = new Client({ name: "agent-memory-node-test", version: "1.0.0" });
await client.connect(transport);

const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  return { result, answer: JSON.parse(result.content[0].text) };
};

const { tools } = await client.listTools();
const names = tools.map((tool) => tool.name);
check(JSON.stringify(names) === JSON.stringify(["memory", "recall", "remember", "forget"]),
  "the server lists the tools of a scope and a session, and no graph tools without an owner", names);
const definition = await sql("SELECT agent_memory.memory_tool_definition()");
check(canonical(tools[0].inputSchema) === canonical(definition.input_schema),
  "the memory tool's schema is memory_tool_definition()'s");

let { result, answer } = await call("memory", { command: "append", path: "/preferences.md", content: "- seat: window\n" });
check(!result.isError && answer.ok && answer.result.version === 1, "memory append creates /preferences.md", answer);
({ result, answer } = await call("remember", { key: "seat", value: "window" }));
check(!result.isError && answer.result.stored === true, "remember stores the seat in a session made for alice", answer);
({ result, answer } = await call("recall", { query: "which seat do I like" }));
const refs = answer.result.memories.map((memory) => `${memory.kind}:${memory.ref}`);
check(refs.includes("kv:seat") && refs.includes("file:/preferences.md"), "recall finds the seat and the file", refs);
({ result, answer } = await call("memory", { command: "read", path: "/preferences.md" }));
check(answer.result.content === "- seat: window\n", "memory read gives the file back", answer);
({ result, answer } = await call("memory", { command: "read", path: "/missing.md" }));
check(result.isError === true && answer.ok === false && answer.error.code === "ENOENT",
  "a missing file is a tool result with isError and the envelope", answer);

check(await sql("SELECT agent_memory.kv_get('trip-mcp-node', 'seat') #>> '{}'") === "window",
  "the database holds what the tools stored");

const { resources } = await client.listResources();
check(resources.length === 1 && resources[0].uri.startsWith("memory://"), "the memory tree is the one resource", resources);
const tree = await client.readResource({ uri: resources[0].uri });
check(tree.contents[0].text.includes("preferences.md"), "the memory tree lists preferences.md", tree.contents[0].text);

// resources/subscribe: a write by another connection is announced.
const updated = [];
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
  updated.push(notification.params.uri);
});
const announced = async () => {
  for (let waited = 0; !updated.includes(resources[0].uri) && waited < 10000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const heard = updated.includes(resources[0].uri);
  updated.length = 0;
  return heard;
};
await client.subscribeResource({ uri: resources[0].uri });
check(await announced(), "once listening, the server announces the subscribed resource");
await sql(`SELECT agent_memory.memory_tool($1, '{"command": "append", "path": "/trips.md", "content": "- Lisbon\\n"}')::text`, [scope]);
check(await announced(), "a subscriber hears that the memory tree changed");
await client.unsubscribeResource({ uri: resources[0].uri });

await client.close();
await db.end();
