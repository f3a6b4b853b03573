//! One valid call of every SQL function of the extension, and the data
//! they run on: shared by the tests that call every function (hostile
//! input, tenant isolation, planted objects). A new function needs an entry in [`BASES`] (or
//! a reason in [`SKIPPED`]); those tests fail until it has one.

/// Functions of the schema that are not user API, with the reason.
pub const SKIPPED: &[(&str, &str)] = &[(
    "note_session_deletions()",
    "trigger function of agent_memory.sessions (returns trigger; not callable from SQL)",
)];

/// Functions that refuse a call without their defaulted arguments, with the
/// reason: one of those arguments is required, whichever it is.
pub const NEED_A_DEFAULTED_ARGUMENT: &[(&str, &str)] = &[
    (
        "export(text, text, text, text)",
        "an export needs a key: session_id, user_id, owner or scope",
    ),
    (
        "recall(text, text, text, text, text, text[], integer, real[], jsonb)",
        "a recall needs a scope: session_id, user_id, owner or scope",
    ),
    (
        "recall_tool(jsonb, text, text, text, text)",
        "a recall needs a scope: session_id, user_id, owner or scope",
    ),
    (
        "recall_outbox(text, text, text, text, text[], integer)",
        "an outbox needs a scope: session_id, user_id, owner or scope",
    ),
];

/// Run as the tables' owner before the fixture: recall takes embeddings of
/// three dimensions.
pub const EMBEDDINGS: &str = "SELECT agent_memory.recall_enable_embeddings(3);";

/// The scope key of memory node 'M' (what `memory_scope('M')` returns).
pub const SCOPE: &str = r#"["M"]"#;

/// The data every group of calls starts from: a live session with memory,
/// messages and working memory, a second session to end, an owner with a few
/// graph nodes (one with a saved version), a memory-tool scope with files.
pub const FIXTURE: &str = r#"
SELECT agent_memory.create_session('hostile-user', '{"channel": "test"}', session_id => 'live');
SELECT agent_memory.create_session('hostile-user', '{}', session_id => 'ender');
SELECT agent_memory.create_session('leaver', '{}', session_id => 'leaving');
SELECT agent_memory.kv_set('leaving', 'note', '"bye"');
SELECT agent_memory.graph_create('leaver', 'Leaver', 'who erases it all', 'x', ARRAY['__root__'], node_id => 'leaver');
SELECT agent_memory.memory_tool('leaver', '{"path": "/x", "command": "append", "content": "x"}');
SELECT agent_memory.kv_set('live', 'goal', '"find a flight to Lisbon"');
SELECT agent_memory.kv_set('live', 'seat', '"window"');
SELECT agent_memory.append_message('live', 'user', 'hello');
SELECT agent_memory.append_message('live', 'assistant', 'calling a tool', 'atlas', '{"tool_calls": [{"id": "call-1"}]}');
SELECT agent_memory.append_message('live', 'tool', 'result', 'atlas', '{"tool_call_id": "call-1"}');
SELECT agent_memory.append_message('live', 'user', 'about atlas', 'atlas');
SELECT agent_memory.graph_create('proj', 'Projects', 'What I work on', 'See [[atlas]].', ARRAY['__root__'], node_id => 'projects');
SELECT agent_memory.graph_create('proj', 'Atlas', 'The Atlas project', E'---\nstatus: active\n---\nStarted in May.', ARRAY['projects'], node_id => 'atlas');
SELECT agent_memory.graph_write('proj', 'atlas', 'Atlas 2', NULL, NULL, change_description => 'retitle');
SELECT agent_memory.graph_create('proj', 'Victim', 'to be deleted', 'bye', ARRAY['__root__'], node_id => 'victim');
SELECT agent_memory.wm_init('live', 'atlas', 'proj');
SELECT agent_memory.wm_set('live', 'fetched_context', '{"fares": [412, 388]}', 'atlas');
SELECT agent_memory.memory_tool('["M"]', '{"path": "/notes/today", "command": "append", "content": "hello"}');
SELECT agent_memory.claude_memory('["M"]', '{"command": "create", "path": "/memories/notes.md", "file_text": "likes tea\nmeeting on friday\n"}');
SELECT agent_memory.claude_memory('["M"]', '{"command": "create", "path": "/memories/drafts/old.md", "file_text": "gone"}');
SELECT agent_memory.claude_memory('["M"]', '{"command": "delete", "path": "/memories/drafts/old.md"}');
SET agent_memory.history_retention = 5;
SELECT agent_memory.kv_set('live', 'goal', '"find a flight to Lisbon"');
SELECT agent_memory.memory_tool('["M"]', '{"path": "/notes/today", "command": "update", "oldContent": "hello", "content": "hello"}');
RESET agent_memory.history_retention;
SELECT agent_memory.recall_embed('kv', 'live', 'goal', '{0.6,0.8,0}');
SELECT agent_memory.recall_embed('node', 'proj', 'atlas', '{0,0.8,0.6}');
SELECT agent_memory.recall_embed('file', '["M"]', '/memories/notes.md', '{0.5,0.5,0.5}');
"#;

/// What the calls run under besides the fixture: history on, so that a
/// write keeps what it replaces and import takes a line's kept versions
/// (at the default retention, 0, it refuses them).
pub const HISTORY: &str = "SET agent_memory.history_retention = 5;";

/// Lines of an export, for import's calls.
const IMPORT_ENTRY: &str = r#"{"kind": "kv", "session_id": "live", "key": "imported", "value": {"from": "export"}, "version": 2, "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-02 00:00:00+00", "expires_at": "2100-01-01 00:00:00+00", "versions": [{"version": 1, "value": "first", "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-01 00:00:00+00", "expires_at": "2100-01-01 00:00:00+00", "replaced_at": "2026-01-02 00:00:00+00"}]}"#;
const IMPORT_SESSION: &str = r#"{"kind": "session", "session_id": "elsewhere", "user_id": "someone", "project_id": null, "active_node_id": null, "metadata": {}, "idle_timeout": "1 day", "created_at": "2026-01-01 00:00:00+00", "last_activity_at": "2999-01-01 00:00:00+00"}"#;
const IMPORT_MESSAGE: &str = r#"{"kind": "message", "session_id": "live", "node_id": "imported", "seq": 100000, "keep": 10, "role": "user", "content": "imported", "metadata": {}, "created_at": "2026-01-01 00:00:00+00"}"#;
const IMPORT_MESSAGE_SEQ: &str =
    r#"{"kind": "message_seq", "session_id": "live", "last_seq": 300000}"#;
const IMPORT_NODE: &str = r#"{"kind": "node", "owner": "elsewhere", "node_id": "imported", "title": "Imported", "description": "", "body": "see [[atlas]]", "links": [], "version": 2, "revision": 2, "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-01 00:00:00+00", "versions": [{"version": 1, "title": "Old", "description": "", "body": "", "links": [], "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-01 00:00:00+00", "change_description": "retitle", "saved_at": "2026-01-01 00:00:00+00"}]}"#;
const IMPORT_FILE: &str = r#"{"kind": "file", "scope": "elsewhere", "path": "/imported.md", "content": "imported", "version": 1, "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-01 00:00:00+00", "versions": []}"#;
/// Lines for import_lines, as a text[] literal: a run of two entries and
/// a run of two messages.
const IMPORT_LINES: &str = r#"{"{\"kind\": \"kv\", \"session_id\": \"live\", \"key\": \"bulk-a\", \"value\": {\"from\": \"lines\"}, \"version\": 1, \"created_at\": \"2026-01-01 00:00:00+00\", \"updated_at\": \"2026-01-01 00:00:00+00\", \"expires_at\": \"2100-01-01 00:00:00+00\", \"versions\": []}","{\"kind\": \"kv\", \"session_id\": \"live\", \"key\": \"bulk-b\", \"value\": \"second\", \"version\": 1, \"created_at\": \"2026-01-01 00:00:00+00\", \"updated_at\": \"2026-01-01 00:00:00+00\", \"expires_at\": \"2100-01-01 00:00:00+00\", \"versions\": []}","{\"kind\": \"message\", \"session_id\": \"live\", \"node_id\": \"bulk\", \"seq\": 200000, \"keep\": 10, \"role\": \"user\", \"content\": \"first of a run\", \"metadata\": {}, \"created_at\": \"2026-01-01 00:00:00+00\"}","{\"kind\": \"message\", \"session_id\": \"live\", \"node_id\": \"bulk\", \"seq\": 200001, \"keep\": 10, \"role\": \"assistant\", \"content\": \"second of a run\", \"metadata\": {}, \"created_at\": \"2026-01-01 00:00:00+00\"}"}"#;

/// One valid call of a function: a value (as text, cast server-side to the
/// argument's type) for every argument, defaults included.
pub type Args = &'static [Option<&'static str>];

/// A function's valid calls, by `name(type, ...)`: hostile values replace
/// one argument of the first; every jsonb argument of each of them also has
/// each of its keys and elements replaced by values of the wrong type.
pub struct Base {
    pub function: &'static str,
    pub calls: &'static [Args],
}

const GRAPH_FILES: &str = r#"{"imp.md": "---\ntitle: T2\ndescription: d\nversion: 2\ncreatedAt: \"2026-11-23T01:35:26.355141Z\"\nupdatedAt: \"2026-11-23T01:35:29.265947Z\"\nrefs: [x]\n---\nb [[imp]]", "imp.v1.md": "---\ntitle: T\ndescription: d\nversion: 1\ncreatedAt: \"2026-11-23T01:35:26.355141Z\"\nupdatedAt: \"2026-11-23T01:35:26.355141Z\"\nchangeDescription: retitle\nsavedAt: \"2026-11-23T01:35:29.265947Z\"\n---\nb"}"#;

const MARKDOWN: &str =
    "---\ntitle: Atlas 3\ndescription: from a file\nrefs: [projects]\n---\nNew body [[victim]]";

pub const BASES: &[Base] = &[
    Base { function: "version()", calls: &[&[]] },
    Base { function: "session_stats()", calls: &[&[]] },
    Base { function: "caller_tenant()", calls: &[&[]] },
    Base { function: "visible_tenant()", calls: &[&[]] },
    Base { function: "notify_channel()", calls: &[&[]] },
    Base { function: "value_bytes(jsonb)", calls: &[&[Some(r#"{"tier": "pro", "n": 1}"#)]] },
    Base {
        function: "create_session(text, jsonb, text, interval)",
        calls: &[&[
            Some("new-user"),
            Some(r#"{"tier": "pro", "n": 1}"#),
            Some("new-session"),
            Some("15 minutes"),
        ]],
    },
    Base { function: "renew_activity(text)", calls: &[&[Some("live")]] },
    Base { function: "is_active(text)", calls: &[&[Some("live")]] },
    Base { function: "end_session(text)", calls: &[&[Some("ender")]] },
    Base { function: "user_sessions(text)", calls: &[&[Some("hostile-user")]] },
    Base {
        function: "kv_set(text, text, jsonb, interval, integer)",
        calls: &[
            &[
                Some("live"),
                Some("budget"),
                Some(r#"{"amount": 1200, "currency": "EUR", "tags": ["a", "b"]}"#),
                Some("1 hour"),
                None,
            ],
            &[Some("live"), Some("fresh-key"), Some(r#""only if new""#), None, Some("0")],
        ],
    },
    Base { function: "kv_get(text, text)", calls: &[&[Some("live"), Some("goal")]] },
    Base { function: "kv_get_all(text)", calls: &[&[Some("live")]] },
    Base { function: "kv_has(text, text)", calls: &[&[Some("live"), Some("goal")]] },
    Base { function: "kv_entry(text, text)", calls: &[&[Some("live"), Some("goal")]] },
    Base {
        function: "kv_delete(text, text, integer)",
        calls: &[&[Some("live"), Some("goal"), None], &[Some("live"), Some("goal"), Some("2")]],
    },
    Base { function: "kv_versions(text, text)", calls: &[&[Some("live"), Some("goal")]] },
    Base {
        function: "kv_version(text, text, integer)",
        calls: &[&[Some("live"), Some("goal"), Some("1")]],
    },
    Base {
        function: "kv_restore(text, text, integer, integer, interval)",
        calls: &[
            &[Some("live"), Some("goal"), Some("1"), None, None],
            &[Some("live"), Some("goal"), Some("1"), None, Some("1 hour")],
        ],
    },
    Base {
        function: "kv_purge_history(text, text)",
        // Not of 'goal', whose kept version the restores use.
        calls: &[&[Some("live"), Some("seat")], &[Some("ender"), None]],
    },
    Base {
        function: "memory_versions(text, text)",
        calls: &[&[Some(SCOPE), Some("/notes/today")]],
    },
    Base {
        function: "memory_version(text, text, integer)",
        calls: &[&[Some(SCOPE), Some("/notes/today"), Some("1")]],
    },
    Base {
        function: "memory_restore(text, text, integer, integer)",
        calls: &[&[Some(SCOPE), Some("/notes/today"), Some("1"), None]],
    },
    Base {
        function: "memory_purge_history(text, text)",
        // Not of /notes/today, whose kept version the restore uses.
        calls: &[&[Some(SCOPE), Some("/memories")], &[Some(r#"["N"]"#), None]],
    },
    Base {
        function: "export(text, text, text, text)",
        calls: &[
            &[Some("live"), Some("hostile-user"), Some("proj"), Some(SCOPE)],
            &[None, None, None, Some(SCOPE)],
        ],
    },
    Base {
        function: "import(text, text, text, text, text)",
        // Each line is imported the first time and unchanged after (or
        // refused, when a call before took its place): never an error.
        calls: &[
            &[Some(IMPORT_ENTRY), None, None, None, None],
            &[Some(IMPORT_SESSION), Some("imported"), Some("hostile-user"), None, None],
            &[Some(IMPORT_MESSAGE), None, None, None, None],
            &[Some(IMPORT_MESSAGE_SEQ), None, None, None, None],
            &[Some(IMPORT_NODE), None, None, Some("proj"), None],
            &[Some(IMPORT_FILE), None, None, None, Some(SCOPE)],
        ],
    },
    Base {
        function: "import_lines(text[], text, text, text, text)",
        calls: &[
            &[Some(IMPORT_LINES), None, None, None, None],
            &[Some(IMPORT_LINES), Some("imported"), None, None, None],
        ],
    },
    Base {
        function: "erase_user(text, text[], text[])",
        calls: &[
            &[Some("leaver"), Some("{leaver}"), Some("{leaver}")],
            &[Some("leaver"), None, None],
        ],
    },
    Base { function: "kv_clear(text)", calls: &[&[Some("live")]] },
    Base {
        function: "build_context(text, text[], boolean)",
        calls: &[&[Some("live"), Some("{goal,seat}"), Some("true")]],
    },
    Base {
        function: "update_context(text, jsonb)",
        calls: &[&[
            Some("live"),
            Some(r#"{"budget": 1200, "seat": "aisle", "plan": {"legs": [1, 2]}}"#),
        ]],
    },
    Base {
        function: "clear_context_keys(text, text[])",
        calls: &[&[Some("live"), Some("{goal}")]],
    },
    Base { function: "clear_context(text)", calls: &[&[Some("live")]] },
    Base {
        function: "recall(text, text, text, text, text, text[], integer, real[], jsonb)",
        calls: &[
            &[
                Some("flight window hello projects status notes"),
                Some("live"),
                Some("hostile-user"),
                Some("proj"),
                Some(SCOPE),
                None,
                Some("10"),
                Some("{0.6,0.8,0}"),
                Some(r#"{"keyword": 1, "meaning": 2}"#),
            ],
            &[
                Some("fares work"),
                None,
                Some("hostile-user"),
                None,
                None,
                Some("{working_memory,message,kv}"),
                Some("3"),
                None,
                None,
            ],
        ],
    },
    Base {
        function: "recall_embed(text, text, text, real[], text)",
        calls: &[
            &[Some("node"), Some("proj"), Some("projects"), Some("{0,0,1}"), None],
            &[
                Some("message"),
                Some("live"),
                Some("1"),
                Some("{1,0,0}"),
                Some("5d41402abc4b2a76b9719d911017c592"),
            ],
        ],
    },
    Base {
        function: "recall_outbox(text, text, text, text, text[], integer)",
        calls: &[&[
            Some("live"),
            Some("hostile-user"),
            Some("proj"),
            Some(SCOPE),
            None,
            Some("100"),
        ]],
    },
    Base { function: "recall_enable_embeddings(integer)", calls: &[&[Some("3")]] },
    Base {
        function: "recall_tool(jsonb, text, text, text, text)",
        calls: &[
            &[
                Some(r#"{"query": "flight \"to Lisbon\" -train", "k": 5}"#),
                Some("live"),
                Some("hostile-user"),
                Some("proj"),
                Some(SCOPE),
            ],
            &[
                Some(r#"{"query": "atlas", "kinds": ["node", "message"]}"#),
                None,
                Some("hostile-user"),
                Some("proj"),
                None,
            ],
        ],
    },
    Base {
        function: "recall_tool_definition(text, text, text, text)",
        calls: &[&[Some("recall"), Some("my memory"), Some("Recall"), Some("openai")]],
    },
    Base { function: "recall_rebuild()", calls: &[&[]] },
    Base {
        function: "sensitive_findings(text)",
        calls: &[&[Some("card 4111 1111 1111 1111, mail a@b.example")]],
    },
    Base { function: "cleanup_expired(integer)", calls: &[&[Some("100")]] },
    Base {
        function: "append_message(text, text, text, text, jsonb, integer)",
        calls: &[
            &[
                Some("live"),
                Some("assistant"),
                Some("answer"),
                Some("atlas"),
                Some(r#"{"tool_calls": ["call-2", {"id": "call-3"}], "idempotency_key": "k1"}"#),
                Some("50"),
            ],
            &[
                Some("live"),
                Some("tool"),
                Some("result"),
                Some("atlas"),
                Some(r#"{"tool_call_id": "call-1", "idempotency_key": "k2"}"#),
                Some("3"),
            ],
        ],
    },
    Base {
        function: "append_messages(text, jsonb, text, integer)",
        calls: &[
            &[
                Some("live"),
                Some(
                    r#"[{"role": "user", "content": "one"}, {"role": "assistant", "content": "two", "metadata": {"n": 2}}]"#,
                ),
                Some("atlas"),
                Some("3"),
            ],
            &[
                Some("live"),
                Some(
                    r#"[{"role": "assistant", "content": "calling", "metadata": {"tool_calls": ["call-9"]}}, {"role": "tool", "content": "r", "metadata": {"tool_call_id": "call-9", "idempotency_key": "k9"}}]"#,
                ),
                None,
                Some("2"),
            ],
        ],
    },
    Base {
        function: "messages(text, text, integer)",
        calls: &[&[Some("live"), Some("atlas"), Some("10")]],
    },
    Base {
        function: "messages_json(text, text, integer)",
        calls: &[&[Some("live"), Some("atlas"), Some("10")]],
    },
    Base { function: "pop_message(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base { function: "last_user_message(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base { function: "clear_messages(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base {
        function: "graph_create(text, text, text, text, text[], text)",
        calls: &[&[
            Some("proj"),
            Some("Child"),
            Some("a child"),
            Some("body [[atlas]]"),
            Some("{projects}"),
            Some("child"),
        ]],
    },
    Base { function: "graph_read(text, text)", calls: &[&[Some("proj"), Some("atlas")]] },
    Base {
        function: "graph_write(text, text, text, text, text, text[], text, integer)",
        calls: &[
            &[
                Some("proj"),
                Some("atlas"),
                Some("Atlas 3"),
                Some("desc"),
                Some("body [[projects]]"),
                Some("{projects}"),
                Some("rewrite"),
                None,
            ],
            &[Some("proj"), Some("atlas"), None, None, Some("guarded body"), None, None, Some("2")],
        ],
    },
    Base {
        function: "graph_append(text, text, text, integer)",
        calls: &[&[Some("proj"), Some("atlas"), Some("more text"), None]],
    },
    Base {
        function: "graph_delete(text, text, integer)",
        calls: &[&[Some("proj"), Some("victim"), None], &[Some("proj"), Some("victim"), Some("1")]],
    },
    Base { function: "graph_nodes(text)", calls: &[&[Some("proj")]] },
    Base { function: "graph_versions(text, text)", calls: &[&[Some("proj"), Some("atlas")]] },
    Base {
        function: "graph_version(text, text, integer)",
        calls: &[&[Some("proj"), Some("atlas"), Some("1")]],
    },
    Base { function: "graph_tree(text)", calls: &[&[Some("proj")]] },
    Base { function: "graph_tree_rows(text)", calls: &[&[Some("proj")]] },
    Base { function: "graph_to_markdown(text, text)", calls: &[&[Some("proj"), Some("atlas")]] },
    Base {
        function: "graph_from_markdown(text, text, text, text)",
        calls: &[&[Some("proj"), Some("atlas"), Some(MARKDOWN), Some("from a file")]],
    },
    Base { function: "graph_export(text)", calls: &[&[Some("proj")]] },
    Base {
        function: "graph_import(text, jsonb)",
        calls: &[&[Some("imported"), Some(GRAPH_FILES)]],
    },
    Base {
        function: "wm_set(text, text, jsonb, text, integer)",
        calls: &[
            &[
                Some("live"),
                Some("config"),
                Some(
                    r#"{"history_length": 5, "include_context": false, "auto_refresh_interval": 10}"#,
                ),
                Some("atlas"),
                None,
            ],
            &[
                Some("live"),
                Some("messages"),
                Some(r#"[{"role": "user", "content": "x"}]"#),
                None,
                None,
            ],
            &[Some("live"), Some("working_history"), Some(r#""summary""#), None, None],
            &[
                Some("live"),
                Some("project_structure"),
                Some(
                    r#"{"project_graph": {"nodes": [{"id": "a", "builder": {}}], "edges": [{"from": "a", "to": "b"}]}}"#,
                ),
                None,
                None,
            ],
            &[
                Some("live"),
                Some("session"),
                Some(r#"{"project_id": "proj", "active_node_id": "atlas"}"#),
                None,
                None,
            ],
        ],
    },
    Base {
        function: "wm_set_many(text, jsonb, text)",
        calls: &[&[
            Some("live"),
            Some(
                r#"{"last_user_message": "hi", "working_history": "so far", "fetched_context": {"k": 1}, "config": {"history_length": 3}}"#,
            ),
            Some("atlas"),
        ]],
    },
    Base {
        function: "wm_patch(text, text, jsonb, text, integer)",
        calls: &[
            &[
                Some("live"),
                Some("node_context"),
                Some(r#"{"title": "patched", "id": null, "tags": ["x"]}"#),
                Some("atlas"),
                None,
            ],
            &[
                Some("live"),
                Some("fetched_context"),
                Some(r#"{"checked": true}"#),
                Some("atlas"),
                Some("1"),
            ],
        ],
    },
    Base {
        function: "wm_get(text, text, text)",
        calls: &[&[Some("live"), Some("config"), Some("atlas")]],
    },
    Base {
        function: "wm_part(text, text, text)",
        calls: &[&[Some("live"), Some("fetched_context"), Some("atlas")]],
    },
    Base {
        function: "wm_init(text, text, text)",
        calls: &[&[Some("live"), Some("projects"), Some("proj")]],
    },
    Base { function: "set_active_node(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base { function: "wm_refresh_structure(text)", calls: &[&[Some("proj")]] },
    Base { function: "wm_clear(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base {
        function: "wm_context(text, text, text)",
        calls: &[&[Some("live"), Some("atlas"), Some("proj")]],
    },
    Base { function: "working_memory(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base { function: "working_memory_entry(text, text)", calls: &[&[Some("live"), Some("atlas")]] },
    Base {
        function: "memory_scope(text, text, text)",
        calls: &[&[Some("M"), Some("perThread"), Some("t1")]],
    },
    Base {
        function: "memory_render(text, text, integer)",
        calls: &[&[Some(SCOPE), Some("full"), Some("4000")]],
    },
    Base {
        function: "memory_tool_definition(text, text, text, text)",
        calls: &[&[Some("memory"), Some("my memory"), Some("Memory"), Some("openai")]],
    },
    Base {
        function: "memory_tool(text, jsonb)",
        calls: &[
            &[
                Some(SCOPE),
                Some(
                    r#"{"path": "/notes/today", "command": "update", "oldContent": "hello", "content": "hi"}"#,
                ),
            ],
            &[Some(SCOPE), Some(r#"{"path": "/notes/today", "command": "read"}"#)],
            &[Some(SCOPE), Some(r#"{"path": "/notes/new", "command": "append", "content": "x"}"#)],
            &[Some(SCOPE), Some(r#"{"path": "/notes", "command": "list"}"#)],
            &[
                Some(SCOPE),
                Some(
                    r#"{"path": "/notes/today", "command": "append", "content": "!", "expectedVersion": 1, "expectedSha256": "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}"#,
                ),
            ],
            &[
                Some(SCOPE),
                Some(r#"{"path": "/notes/other", "command": "delete", "expectedVersion": 0}"#),
            ],
            &[
                Some(SCOPE),
                Some(
                    r#"{"path": "/notes", "command": "search", "query": "hello \"new notes\" -x | !(:*"}"#,
                ),
            ],
            &[Some(SCOPE), Some(r#"{"path": "/notes", "command": "delete"}"#)],
        ],
    },
    Base {
        function: "claude_memory(text, jsonb, integer, text)",
        calls: &[
            &[
                Some(SCOPE),
                Some(
                    r#"{"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"}"#,
                ),
                None,
                None,
            ],
            &[
                Some(SCOPE),
                Some(r#"{"command": "view", "path": "/memories/notes.md", "view_range": [1, -1]}"#),
                None,
                None,
            ],
            &[
                Some(SCOPE),
                Some(r#"{"command": "create", "path": "/memories/new.md", "file_text": "x\n"}"#),
                None,
                None,
            ],
            &[
                // A precondition that holds whatever came before: no file.
                Some(SCOPE),
                Some(r#"{"command": "delete", "path": "/memories/ghost.md"}"#),
                Some("0"),
                None,
            ],
            &[
                Some(SCOPE),
                Some(
                    r#"{"command": "insert", "path": "/memories/notes.md", "insert_line": 1, "insert_text": "y\n"}"#,
                ),
                None,
                None,
            ],
            &[
                Some(SCOPE),
                Some(r#"{"command": "delete", "path": "/memories/notes.md"}"#),
                None,
                None,
            ],
            &[
                Some(SCOPE),
                Some(
                    r#"{"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/archive/notes.md"}"#,
                ),
                None,
                None,
            ],
        ],
    },
    Base {
        function: "claude_memory_tool_result(text, jsonb, integer, text)",
        calls: &[&[
            Some(SCOPE),
            Some(
                r#"{"type": "tool_use", "id": "toolu_01", "name": "memory", "input": {"command": "view", "path": "/memories/notes.md", "view_range": [1, 2]}}"#,
            ),
            None,
            None,
        ]],
    },
];

/// A function of the schema, as `pg_proc` has it.
pub struct SqlFunction {
    pub name: String,
    /// `name(type, ...)`, as in [`BASES`].
    pub key: String,
    pub types: Vec<String>,
    pub returns_set: bool,
}

impl SqlFunction {
    /// A statement calling the function with its first `args` arguments
    /// (`$n::text::type`), answering one row with one text column: the
    /// result as text ('' for NULL), a set-returning function's rows joined.
    pub fn call_sql(&self, args: usize) -> String {
        let casts: Vec<String> = self.types[..args]
            .iter()
            .enumerate()
            .map(|(i, ty)| format!("${}::text::{ty}", i + 1))
            .collect();
        let invocation = format!("agent_memory.\"{}\"({})", self.name, casts.join(", "));
        if self.returns_set {
            format!("SELECT coalesce(string_agg(r::text, E'\\n'), '') FROM {invocation} r")
        } else {
            format!("SELECT coalesce(({invocation})::text, '')")
        }
    }
}

/// Every function of schema agent_memory but the [`SKIPPED`] ones, in name
/// order, with its valid calls; panics on a function that has none.
pub fn every_function(client: &mut postgres::Client) -> Vec<(SqlFunction, &'static Base)> {
    client
        .query(
            "SELECT p.proname::text,
                    p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')',
                    ARRAY(SELECT pg_catalog.format_type(t, NULL)
                          FROM pg_catalog.unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i) ORDER BY i),
                    p.proretset
             FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'agent_memory'::regnamespace
             ORDER BY 2",
            &[],
        )
        .expect("list the functions")
        .iter()
        .map(|r| SqlFunction {
            name: r.get(0),
            key: r.get(1),
            types: r.get(2),
            returns_set: r.get(3),
        })
        .filter(|f| !SKIPPED.iter().any(|(k, _)| *k == f.key))
        .map(|f| {
            let base = BASES
                .iter()
                .find(|b| b.function == f.key)
                .unwrap_or_else(|| panic!("{} has no base call in tests/integration/src/calls.rs", f.key));
            (f, base)
        })
        .collect()
}
