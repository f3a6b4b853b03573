"""The scenario the Python client examples share (examples/SCENARIO.md): who
talks, what alice says, the fake model's steps, and how a check reports.
Only how each example talks to PostgreSQL differs; that stays in its file.
"""

import sys

USER = "alice"
MEMORY_NODE = "travel-agent"

# What alice says in each turn, and the working memory part the app writes
# after it.
TURNS = [
    ("I'd like to fly to Lisbon next week. I prefer a window seat.",
     "working_history", "Planning a Lisbon trip"),
    ("Remind me which seat I like, and note that I am vegetarian.",
     "fetched_context", {"fares": [412, 388]}),
]

# What recall finds before each turn's model call, (kind, ref), best first:
# the three memories of the session and the node's files that best match
# what alice says.
RECALLED_BEFORE_TURN = [
    [],
    [("kv", "seat"), ("message", "1"), ("message", "6")],
]

# The recall the app runs before each turn's model call.
RECALL_SQL = ("SELECT kind, ref FROM agent_memory.recall({text}, session_id => {session},"
              " scope => agent_memory.memory_scope({node}), k => 3)")


def fake_model(turn, tool_results):
    """The next step of turn `turn` (0 or 1) after `tool_results` answers:
    a Claude-style tool_use block, or the final text with facts to remember."""
    def tool_use(id_, input_):
        return {"type": "tool_use", "id": id_, "name": "memory", "input": input_}

    script = [
        [
            tool_use("toolu_01", {"command": "view", "path": "/memories"}),
            tool_use("toolu_02", {"command": "create", "path": "/memories/preferences.md",
                                  "file_text": "- seat: window\n"}),
            {"type": "text", "text": "Noted: Lisbon next week, window seat.",
             "facts": {"destination": "Lisbon", "seat": "window"}},
        ],
        [
            tool_use("call_03", {"command": "read", "path": "/preferences.md"}),
            tool_use("call_04", {"command": "append", "path": "/preferences.md",
                                 "content": "- meal: vegetarian\n"}),
            {"type": "text", "text": "You like a window seat. I noted that you are vegetarian.",
             "facts": {"meal": "vegetarian"}},
        ],
    ]
    return script[turn][len(tool_results)]


passed = 0


def check(name, expected, got):
    """Print `ok - name` when got equals expected, else fail the example."""
    global passed
    if got != expected:
        print(f"not ok - {name}: expected {expected!r}, got {got!r}")
        sys.exit(1)
    passed += 1
    print(f"ok - {name}")
