"""An OpenAI model and agent_memory, wired with OpenAI's Python SDK.

The extension's memory tool as a function tool of the Chat Completions API:
its definition comes from agent_memory.memory_tool_definition(format =>
'openai'); each tool call's `arguments` (a JSON string) go to
agent_memory.memory_tool(), and its JSON envelope goes back as the `tool`
message that answers the call.

Run against a database with the extension (libpq variables PGHOST, PGPORT,
PGUSER, PGDATABASE):  python openai_wiring.py
The API is the recorded one of recorded_api.py; see there for a real key.
"""

import json

import openai
import psycopg
from psycopg.types.json import Jsonb

from recorded_api import RecordedAPI, check

MODEL = "gpt-4.1"


def main() -> None:
    db = psycopg.connect("", autocommit=True)
    scope = db.execute("SELECT agent_memory.memory_scope('travel-agent')").fetchone()[0]
    # What an earlier conversation left in memory.
    db.execute("SELECT agent_memory.memory_tool(%s, %s)",
               (scope, Jsonb({"command": "append", "path": "/preferences.md", "content": "- seat: window\n"})))

    api = RecordedAPI("openai_1_tool_call.json", "openai_2_final.json")
    client = openai.OpenAI(api_key="recorded", http_client=api.http_client())
    tool = db.execute("SELECT agent_memory.memory_tool_definition(format => 'openai')").fetchone()[0]
    messages = [{"role": "user", "content": "Which seat do I like?"}]

    reply = client.chat.completions.create(model=MODEL, tools=[tool], messages=messages).choices[0]
    while reply.finish_reason == "tool_calls":
        messages.append(reply.message.model_dump(exclude_none=True))
        for call in reply.message.tool_calls:
            envelope = db.execute("SELECT agent_memory.memory_tool(%s, %s)::text",
                                  (scope, Jsonb(json.loads(call.function.arguments)))).fetchone()[0]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": envelope})
        reply = client.chat.completions.create(model=MODEL, tools=[tool], messages=messages).choices[0]

    first, second = api.requests
    check("the request carries memory_tool_definition(format => 'openai') as a function tool",
          first["tools"] == [tool] and tool["type"] == "function" and tool["function"]["name"] == "memory",
          json.dumps(first["tools"])[:300])
    answer = second["messages"][-1]
    check("the tool call's envelope went back as its tool message",
          answer["role"] == "tool" and answer["tool_call_id"] == "call_Example7Read"
          and json.loads(answer["content"]) == {"command": "read", "path": "/preferences.md", "ok": True,
                                                "result": {"content": "- seat: window\n", "version": 1,
                                                           "sha256": "69c9fba93d669ce9fe0958c8b1a53729471b949626fd570caf0071da45323e1d"}},
          json.dumps(answer))
    check("the assistant's tool call is in the history before its answer",
          second["messages"][-2]["tool_calls"][0]["id"] == "call_Example7Read",
          json.dumps(second["messages"][-2]))
    check("the model's final answer came back", reply.message.content == "You prefer a window seat.",
          str(reply.message.content))
    print("4 checks passed")


if __name__ == "__main__":
    main()
