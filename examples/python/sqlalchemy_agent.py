"""An agent loop on agent_memory with SQLAlchemy 2.0.

A travel assistant talks with alice for two turns. A fake model (a pure
function, no LLM) asks for memory tool calls; the app answers each one with
one SQL call, keeps the conversation in the extension's message history,
stores facts in key-value memory and writes working memory. Then it checks
what the database gives back. The scenario is examples/SCENARIO.md; the
psycopg and Node.js examples run the same one.

What it shows, the SQLAlchemy way:
  * the extension's functions as `func.agent_memory.<name>(...)` (rendered
    schema-qualified, arguments always bound parameters), typed with
    `type_=JSONB` / `JSON` so that json results come back as Python objects;
  * jsonb arguments as `bindparam(..., type_=JSONB)` in a statement built once
    and run with different values, or `cast(value, JSONB)` inline;
  * the set-returning `messages()` as a table:
    `select(...).select_from(func.agent_memory.messages(...).table_valued(...))`;
  * every write of a turn in the app's own transaction, `with session.begin():`.

Run it against a database where `CREATE EXTENSION agent_memory` was done,
fresh (the example creates a memory file, which it cannot create twice).
The connection comes from the libpq variables PGHOST, PGPORT, PGUSER,
PGDATABASE:

    pip install -r examples/python/requirements.txt
    PGDATABASE=mydb python examples/python/sqlalchemy_agent.py

It prints `ok - <check>` per check and exits with 1 at the first failure.
"""

import json

from sqlalchemy import (BigInteger, Boolean, Text, bindparam, cast, column,
                        create_engine, func, null, select, text)
from sqlalchemy.dialects.postgresql import JSON, JSONB
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

import scenario
from scenario import (MEMORY_NODE, RECALL_SQL, RECALLED_BEFORE_TURN, TURNS, USER, check,
                      fake_model)

CLIENT = "sqlalchemy"
SESSION_ID = "trip-sqlalchemy"
# The memory node's scope key, as an SQL expression to put into other calls.
SCOPE = func.agent_memory.memory_scope(MEMORY_NODE)

# A statement built once and run with different parameters; node_id NULL is
# the session-wide thread.
APPEND_MESSAGE = select(func.agent_memory.append_message(
    bindparam("session_id"), bindparam("role"), bindparam("content"),
    null(), bindparam("metadata", type_=JSONB), type_=BigInteger))


def run_tool(session, block):
    """Answer one tool_use block with one SQL call; return the answer."""
    if block["id"].startswith("toolu_"):
        # Claude's memory tool (its ids start with toolu_, its paths with
        # /memories). Either function runs any command:
        # claude_memory_tool_result takes the whole block and returns the
        # tool_result block to send back, claude_memory takes the input and
        # returns the text. This example shows one of each.
        if block["input"]["command"] == "view":
            call = func.agent_memory.claude_memory_tool_result(
                SCOPE, cast(block, JSONB), type_=JSONB)
        else:
            call = func.agent_memory.claude_memory(
                SCOPE, cast(block["input"], JSONB), type_=Text)
    else:
        # The extension's own dialect: a JSON envelope {command, path, ok,
        # result}; the function returns json (not jsonb), so type_=JSON.
        call = func.agent_memory.memory_tool(SCOPE, cast(block["input"], JSONB), type_=JSON)
    return session.execute(select(call)).scalar_one()


# Recall returns rows: a text() statement with named parameters reads them.
RECALL = text(RECALL_SQL.format(text=":text", session=":session", node=":node"))


def append_message(session, role, content, metadata):
    session.execute(APPEND_MESSAGE, {"session_id": SESSION_ID, "role": role,
                                     "content": content, "metadata": metadata})


def run_turn(session, turn):
    """One turn of the conversation; every write of it commits together.
    Returns the tool answers by call id and what recall found first."""
    user_text, wm_part, wm_value = TURNS[turn]
    answers = {}
    with session.begin():
        # What the agent already knows that bears on alice's words, for the
        # prompt (the fake model does without it).
        recalled = session.execute(RECALL, {"text": user_text, "session": SESSION_ID,
                                            "node": MEMORY_NODE}).all()
        append_message(session, "user", user_text, {})
        tool_results = []
        while True:
            step = fake_model(turn, tool_results)
            if step["type"] == "text":
                break
            call = {k: step[k] for k in ("id", "name", "input")}
            append_message(session, "assistant", "", {"tool_calls": [call]})
            answer = run_tool(session, step)
            answers[step["id"]] = answer
            tool_results.append(answer)
            content = answer if isinstance(answer, str) else json.dumps(answer)
            append_message(session, "tool", content, {"tool_call_id": step["id"]})

        append_message(session, "assistant", step["text"], {})
        if len(step["facts"]) == 1:   # one fact: kv_set; several at once: update_context
            [(key, value)] = step["facts"].items()
            store = func.agent_memory.kv_set(SESSION_ID, key, cast(value, JSONB), type_=JSONB)
        else:
            store = func.agent_memory.update_context(
                SESSION_ID, cast(step["facts"], JSONB), type_=JSONB)
        session.execute(select(store))
        session.execute(select(func.agent_memory.wm_set(
            SESSION_ID, wm_part, cast(wm_value, JSONB), type_=Boolean)))
    return answers, [tuple(row) for row in recalled]


def main():
    # An empty URL passes no host, port, user or database, so psycopg (libpq)
    # takes them from PGHOST, PGPORT, PGUSER, PGDATABASE.
    engine = create_engine("postgresql+psycopg://")

    with Session(engine) as session:
        with session.begin():
            session.execute(select(func.agent_memory.create_session(
                USER, cast({"channel": "example", "client": CLIENT}, JSONB), SESSION_ID)))

        answers, recalled_first = run_turn(session, 0)
        more, recalled_second = run_turn(session, 1)
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

        with session.begin():   # the reads, under one transaction
            # 1. The context an app hands to the model.
            ctx = session.execute(select(
                func.agent_memory.build_context(SESSION_ID, type_=JSONB))).scalar_one()
            check("build_context: userId alice, memory holds the three facts",
                  {"userId": USER,
                   "memory": {"destination": "Lisbon", "seat": "window", "meal": "vegetarian"}},
                  {"userId": ctx.get("userId"), "memory": ctx.get("memory")})

            # 2. The history, oldest first: the set-returning function as a table.
            history = func.agent_memory.messages(SESSION_ID).table_valued(
                column("seq", BigInteger), column("role", Text), column("metadata", JSONB))
            rows = session.execute(
                select(history.c.seq, history.c.role, history.c.metadata).select_from(history)
            ).all()
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
            view = session.execute(select(func.agent_memory.claude_memory(
                SCOPE, cast({"command": "view", "path": "/memories/preferences.md"}, JSONB),
                type_=Text))).scalar_one()
            check("claude_memory view shows the line memory_tool appended",
                  ["     1\t- seat: window", "     2\t- meal: vegetarian"],
                  view.splitlines()[1:3])   # line 0: "Here's the content of ..."

            # 4. Working memory of the session's global entry.
            wm = session.execute(select(
                func.agent_memory.working_memory(SESSION_ID, type_=JSONB))).scalar_one()
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
            rendered = session.execute(select(
                func.agent_memory.memory_render(SCOPE, "full", type_=Text))).scalar_one()
            check("memory_render full names /preferences.md", True, "/preferences.md" in rendered)

        # 6. Ending the session takes everything it owns with it.
        with session.begin():
            ended = session.execute(select(
                func.agent_memory.end_session(SESSION_ID, type_=Boolean))).scalar_one()
        with session.begin():
            ctx = session.execute(select(
                func.agent_memory.build_context(SESSION_ID, type_=JSONB))).scalar_one()
        try:
            with session.begin():   # rolled back when the statement fails
                session.execute(select(func.agent_memory.kv_set(
                    SESSION_ID, "meal", cast("vegan", JSONB), type_=JSONB)))
            sqlstate = None
        except DBAPIError as e:
            sqlstate = e.orig.sqlstate   # P0002 no_data_found: the session is gone
        check("end_session: session gone, kv_set fails with P0002",
              {"ended": True, "error": "session not found or expired", "kv_set": "P0002"},
              {"ended": ended, "error": ctx.get("error"), "kv_set": sqlstate})

    engine.dispose()
    print(f"{scenario.passed} checks passed")


if __name__ == "__main__":
    main()
