"""An agent loop on agent_memory with psycopg 3.

A travel assistant talks with alice for two turns. A fake model (a pure
function, no LLM) asks for memory tool calls; the app answers each one with
one SQL call, keeps the conversation in the extension's message history,
stores facts in key-value memory and writes working memory. Then it checks
what the database gives back. The scenario is examples/SCENARIO.md; the
SQLAlchemy and Node.js examples run the same one.

What it shows:
  * a tool_use block routed straight to SQL: Claude's memory tool
    (claude_memory_tool_result, claude_memory) and the extension's own
    dialect (memory_tool), all on one tree of files;
  * every write of a turn in one transaction (conn.transaction()), the
    turn's messages appended together by one append_messages call;
  * parameterised, schema-qualified calls; jsonb arguments wrapped in Jsonb,
    jsonb and json results arriving as Python objects.

Run it against a database where `CREATE EXTENSION agent_memory` was done,
fresh (the example creates a memory file, which it cannot create twice).
The connection comes from the libpq variables PGHOST, PGPORT, PGUSER,
PGDATABASE:

    pip install -r examples/python/requirements.txt
    PGDATABASE=mydb python examples/python/psycopg_agent.py

It prints `ok - <check>` per check and exits with 1 at the first failure.
"""

import json

import psycopg
from psycopg.types.json import Jsonb

import scenario
from scenario import (MEMORY_NODE, RECALL_SQL, RECALLED_BEFORE_TURN, TURNS, USER, check,
                      fake_model)

CLIENT = "psycopg"
SESSION_ID = "trip-psycopg"
def run_tool(cur, block):
    """Answer one tool_use block with one SQL call; return the answer."""
    scope_sql = "agent_memory.memory_scope(%s)"
    if block["id"].startswith("toolu_"):
        # Claude's memory tool (its ids start with toolu_, its paths with
        # /memories). Either function runs any command:
        # claude_memory_tool_result takes the whole block and returns the
        # tool_result block to send back, claude_memory takes the input and
        # returns the text. This example shows one of each.
        if block["input"]["command"] == "view":
            sql = f"SELECT agent_memory.claude_memory_tool_result({scope_sql}, %s)"
            return cur.execute(sql, (MEMORY_NODE, Jsonb(block))).fetchone()[0]
        sql = f"SELECT agent_memory.claude_memory({scope_sql}, %s)"
        return cur.execute(sql, (MEMORY_NODE, Jsonb(block["input"]))).fetchone()[0]
    # The extension's own dialect: a JSON envelope {command, path, ok, result}.
    sql = f"SELECT agent_memory.memory_tool({scope_sql}, %s)"
    return cur.execute(sql, (MEMORY_NODE, Jsonb(block["input"]))).fetchone()[0]


def run_turn(conn, turn):
    """One turn of the conversation; every write of it commits together.
    Returns the tool answers by call id and what recall found first."""
    user_text, wm_part, wm_value = TURNS[turn]
    answers = {}
    with conn.transaction(), conn.cursor() as cur:
        # What the agent already knows that bears on alice's words, for the
        # prompt (the fake model does without it).
        recalled = cur.execute(RECALL_SQL.format(text="%s", session="%s", node="%s"),
                               (user_text, SESSION_ID, MEMORY_NODE)).fetchall()
        # The turn's messages, oldest first, appended in one call at the end
        # of the turn (the same as appending each in turn).
        messages = [{"role": "user", "content": user_text}]
        tool_results = []
        while True:
            step = fake_model(turn, tool_results)
            if step["type"] == "text":
                break
            call = {k: step[k] for k in ("id", "name", "input")}
            messages.append({"role": "assistant", "content": "", "metadata": {"tool_calls": [call]}})
            answer = run_tool(cur, step)
            answers[step["id"]] = answer
            tool_results.append(answer)
            content = answer if isinstance(answer, str) else json.dumps(answer)
            messages.append({"role": "tool", "content": content,
                             "metadata": {"tool_call_id": step["id"]}})

        messages.append({"role": "assistant", "content": step["text"]})
        cur.execute("SELECT agent_memory.append_messages(%s, %s)", (SESSION_ID, Jsonb(messages)))
        if len(step["facts"]) == 1:   # one fact: kv_set; several at once: update_context
            [(key, value)] = step["facts"].items()
            cur.execute("SELECT agent_memory.kv_set(%s, %s, %s)", (SESSION_ID, key, Jsonb(value)))
        else:
            cur.execute("SELECT agent_memory.update_context(%s, %s)",
                        (SESSION_ID, Jsonb(step["facts"])))
        cur.execute("SELECT agent_memory.wm_set(%s, %s, %s)",
                    (SESSION_ID, wm_part, Jsonb(wm_value)))
    return answers, [tuple(row) for row in recalled]


def main():
    # "" = everything from the libpq environment (PGHOST, PGPORT, ...).
    # Autocommit: each statement commits on its own unless it runs inside
    # `with conn.transaction():`.
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute("SELECT agent_memory.create_session(%s, %s, session_id => %s)",
                     (USER, Jsonb({"channel": "example", "client": CLIENT}), SESSION_ID))

        answers, recalled_first = run_turn(conn, 0)
        more, recalled_second = run_turn(conn, 1)
        answers.update(more)

        check("recall before each turn: nothing yet, then what bears on the seat",
              RECALLED_BEFORE_TURN, [recalled_first, recalled_second])

        # The tool answers the scenario names.
        block = answers["toolu_01"]
        check("toolu_01 view /memories: a tool_result block without is_error",
              {"type": "tool_result", "tool_use_id": "toolu_01", "has is_error": False},
              {"type": block.get("type"), "tool_use_id": block.get("tool_use_id"),
               "has is_error": "is_error" in block})
        check("toolu_02 create /memories/preferences.md",
              "File created successfully at: /memories/preferences.md", answers["toolu_02"])
        check("call_03 read /preferences.md",
              {"ok": True, "result": {"content": "- seat: window\n", "version": 1,
                                      "sha256": "69c9fba93d669ce9fe0958c8b1a53729471b949626fd570caf0071da45323e1d"}},
              {k: answers["call_03"].get(k) for k in ("ok", "result")})
        check("call_04 append /preferences.md",
              {"ok": True, "result": {"status": "ok", "version": 2}},
              {k: answers["call_04"].get(k) for k in ("ok", "result")})

        # 1. The context an app hands to the model.
        ctx = conn.execute("SELECT agent_memory.build_context(%s)", (SESSION_ID,)).fetchone()[0]
        check("build_context: userId alice, memory holds the three facts",
              {"userId": USER,
               "memory": {"destination": "Lisbon", "seat": "window", "meal": "vegetarian"}},
              {"userId": ctx.get("userId"), "memory": ctx.get("memory")})

        # 2. The history, oldest first.
        rows = conn.execute(
            "SELECT seq, role, metadata FROM agent_memory.messages(%s)", (SESSION_ID,)).fetchall()
        seqs = [seq for seq, _, _ in rows]
        answered = []   # per tool message: (the call before it, the call it answers)
        for before, (_, role, metadata) in zip(rows, rows[1:]):
            if role == "tool":
                calls = before[2].get("tool_calls") or [{}]
                answered.append((calls[0].get("id"), metadata.get("tool_call_id")))
        check("messages: 12 in order, each tool result answering the call before it",
              {"count": 12,
               "roles": ["user", "assistant", "tool", "assistant", "tool", "assistant"] * 2,
               "answered": [("toolu_01", "toolu_01"), ("toolu_02", "toolu_02"),
                            ("call_03", "call_03"), ("call_04", "call_04")],
               "seq increasing": True},
              {"count": len(rows),
               "roles": [role for _, role, _ in rows],
               "answered": answered,
               "seq increasing": all(a < b for a, b in zip(seqs, seqs[1:]))})

        # 3. Both dialects work on one tree of files.
        view = conn.execute(
            "SELECT agent_memory.claude_memory(agent_memory.memory_scope(%s), %s)",
            (MEMORY_NODE, Jsonb({"command": "view", "path": "/memories/preferences.md"}))
        ).fetchone()[0]
        check("claude_memory view shows the line memory_tool appended",
              ["     1\t- seat: window", "     2\t- meal: vegetarian"],
              view.splitlines()[1:3])   # line 0: "Here's the content of ..."

        # 4. Working memory of the session's global entry.
        wm = conn.execute("SELECT agent_memory.working_memory(%s)", (SESSION_ID,)).fetchone()[0]
        check("working_memory: history, fetched context, last user message, 12 messages",
              {"working_history": "Planning a Lisbon trip",
               "fetched_context": {"fares": [412, 388]},
               "last_user_message": TURNS[1][0],
               "messages": 12, "last role": "assistant"},
              {"working_history": wm.get("working_history"),
               "fetched_context": wm.get("fetched_context"),
               "last_user_message": wm.get("last_user_message"),
               "messages": len(wm.get("messages") or []),
               "last role": (wm.get("messages") or [{}])[-1].get("role")})

        # 5. The memory files rendered for a prompt.
        rendered = conn.execute(
            "SELECT agent_memory.memory_render(agent_memory.memory_scope(%s), 'full')",
            (MEMORY_NODE,)).fetchone()[0]
        check("memory_render full names /preferences.md", True, "/preferences.md" in rendered)

        # 5b. The next turn's first step in one round trip: append the user's
        # message and read the history for the prompt in one query (one
        # transaction). ClientCursor binds the parameters client-side, which
        # lets one execute() carry two statements; nextset() moves to the
        # second one's result.
        together = psycopg.ClientCursor(conn)
        together.execute("SELECT agent_memory.append_message(%s, 'user', %s);"
                         "SELECT agent_memory.messages_json(%s, lim => 50)",
                         (SESSION_ID, "And a hotel near the river?", SESSION_ID))
        appended_seq = together.fetchone()[0]
        together.nextset()
        history = together.fetchone()[0]
        check("append + read in one round trip: the read sees the append",
              {"messages": 13, "last": ("user", "And a hotel near the river?"), "last seq": appended_seq},
              {"messages": len(history), "last": (history[-1]["role"], history[-1]["content"]),
               "last seq": history[-1]["seq"]})

        # 6. Ending the session takes everything it owns with it.
        ended = conn.execute("SELECT agent_memory.end_session(%s)", (SESSION_ID,)).fetchone()[0]
        ctx = conn.execute("SELECT agent_memory.build_context(%s)", (SESSION_ID,)).fetchone()[0]
        try:
            conn.execute("SELECT agent_memory.kv_set(%s, %s, %s)",
                         (SESSION_ID, "meal", Jsonb("vegan")))
            sqlstate = None
        except psycopg.Error as e:
            sqlstate = e.sqlstate   # P0002 no_data_found: the session is gone
        check("end_session: session gone, kv_set fails with P0002",
              {"ended": True, "error": "session not found or expired", "kv_set": "P0002"},
              {"ended": ended, "error": ctx.get("error"), "kv_set": sqlstate})

    print(f"{scenario.passed} checks passed")


if __name__ == "__main__":
    main()
