"""Claude and agent_memory, wired with Anthropic's Python SDK.

Two ways to give Claude memory that lives in PostgreSQL:

1. The extension's own memory tool as a custom tool. Its definition comes
   from agent_memory.memory_tool_definition() in Anthropic's shape; the
   `input` of Claude's tool_use goes to agent_memory.memory_tool(), and its
   JSON envelope goes back as the tool_result.
2. Claude's built-in memory tool (`memory_20250818`, beta
   `context-management-2025-06-27`): the whole tool_use block goes to
   agent_memory.claude_memory_tool_result(), whose answer is the tool_result
   block to send back. Both run over the same files.

Run against a database with the extension (libpq variables PGHOST, PGPORT,
PGUSER, PGDATABASE):  python anthropic_wiring.py
The API is the recorded one of recorded_api.py; see there for a real key.
"""

import json

import anthropic
import psycopg
from psycopg.types.json import Jsonb

from recorded_api import RecordedAPI, check

MODEL = "claude-sonnet-4-5-20250929"
USER_TEXT = "Remember that I prefer a window seat."


def main() -> None:
    db = psycopg.connect("", autocommit=True)
    scope = db.execute("SELECT agent_memory.memory_scope('travel-agent')").fetchone()[0]

    # 1. The extension's tool, as a custom tool.
    api = RecordedAPI("anthropic_1_tool_use.json", "anthropic_2_final.json")
    claude = anthropic.Anthropic(api_key="recorded", http_client=api.http_client())
    tool = db.execute("SELECT agent_memory.memory_tool_definition()").fetchone()[0]
    messages = [{"role": "user", "content": USER_TEXT}]

    reply = claude.messages.create(model=MODEL, max_tokens=1024, tools=[tool], messages=messages)
    while reply.stop_reason == "tool_use":
        results = []
        for block in reply.content:
            if block.type == "tool_use" and block.name == "memory":
                # The envelope as the extension wrote it (json, keys in order).
                envelope = db.execute(
                    "SELECT agent_memory.memory_tool(%s, %s)::text", (scope, Jsonb(block.input))
                ).fetchone()[0]
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": envelope})
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": results}]
        reply = claude.messages.create(model=MODEL, max_tokens=1024, tools=[tool], messages=messages)

    first, second = api.requests
    check("the request carries memory_tool_definition() as Claude's tool",
          first["tools"] == [tool] and set(tool) == {"name", "description", "input_schema"},
          json.dumps(first["tools"])[:300])
    fed_back = second["messages"][-1]["content"][0]
    check("the tool call's envelope went back as its tool_result",
          fed_back["tool_use_id"] == "toolu_01A9Q2ExampleAppend"
          and json.loads(fed_back["content"]) == {"command": "append", "path": "/preferences.md",
                                                  "ok": True, "result": {"status": "ok", "version": 1}},
          json.dumps(fed_back))
    stored = db.execute(
        "SELECT agent_memory.memory_tool(%s, '{\"command\": \"read\", \"path\": \"/preferences.md\"}')",
        (scope,),
    ).fetchone()[0]
    check("the file Claude asked for is stored", stored["result"]["content"] == "- seat: window\n",
          json.dumps(stored))
    check("Claude's final answer came back", reply.content[0].text == "Saved: you prefer a window seat.",
          reply.content[0].text)

    # 2. Claude's built-in memory tool over the same files.
    api = RecordedAPI("anthropic_3_memory_view.json", "anthropic_4_final.json")
    claude = anthropic.Anthropic(api_key="recorded", http_client=api.http_client())
    builtin = {"type": "memory_20250818", "name": "memory"}
    messages = [{"role": "user", "content": "Which seat do I like?"}]
    reply = claude.beta.messages.create(model=MODEL, max_tokens=1024, tools=[builtin], messages=messages,
                                        betas=["context-management-2025-06-27"])
    while reply.stop_reason == "tool_use":
        results = [
            db.execute("SELECT agent_memory.claude_memory_tool_result(%s, %s)",
                       (scope, Jsonb(block.model_dump(exclude_none=True)))).fetchone()[0]
            for block in reply.content if block.type == "tool_use"
        ]
        messages += [{"role": "assistant", "content": reply.content}, {"role": "user", "content": results}]
        reply = claude.beta.messages.create(model=MODEL, max_tokens=1024, tools=[builtin], messages=messages,
                                            betas=["context-management-2025-06-27"])

    first, second = api.requests
    check("the built-in tool is requested with its beta",
          first["tools"] == [builtin]
          and "context-management-2025-06-27" in api.headers[0].get("anthropic-beta", ""),
          f"{first['tools']} {api.headers[0].get('anthropic-beta')}")
    fed_back = second["messages"][-1]["content"][0]
    check("claude_memory_tool_result answered the view of the file the custom tool wrote",
          fed_back == {"type": "tool_result", "tool_use_id": "toolu_01B7ExampleView",
                       "content": "Here's the content of /memories/preferences.md with line numbers:\n"
                                  "     1\t- seat: window\n     2\t"},
          json.dumps(fed_back))
    check("Claude's second answer came back", reply.content[0].text == "You prefer a window seat.",
          reply.content[0].text)
    print("7 checks passed")


if __name__ == "__main__":
    main()
