-- agent_memory: comments on every function (shown by \df+ and \dd), and the
-- settings some functions run with (at the end).

COMMENT ON FUNCTION agent_memory.version() IS
    'Version of the loaded agent_memory library (compare with pg_extension.extversion after an upgrade)';

-- Tenants
COMMENT ON FUNCTION agent_memory.caller_tenant() IS
    'The tenant the caller reads and writes as: '''' (one memory for every role) while agent_memory.tenant_isolation is off, else the current role, or role/tenant after SET agent_memory.tenant';
COMMENT ON FUNCTION agent_memory.visible_tenant() IS
    'The tenant whose rows the caller sees and changes: '''' (the memory every role shares) while agent_memory.tenant_isolation is off for it, else caller_tenant()';
COMMENT ON FUNCTION agent_memory.notify_channel() IS
    'The channel to LISTEN on for the caller''s changes: agent_memory while agent_memory.tenant_isolation is off, else one per tenant that no other tenant can name';
COMMENT ON FUNCTION agent_memory.value_bytes(jsonb) IS
    'The bytes a jsonb value takes uncompressed, read from its header without fetching the value';

-- Sessions
COMMENT ON FUNCTION agent_memory.create_session(text, jsonb, text, interval) IS
    'Create a session for user_id (id generated when session_id is NULL) and return its id; an active id of the same user is returned and renewed, of another user fails with 23505; an expired id is replaced';
COMMENT ON FUNCTION agent_memory.renew_activity(text) IS
    'Mark an active session as used now; false when it does not exist or has expired';
COMMENT ON FUNCTION agent_memory.is_active(text) IS
    'Whether the session exists and is within its idle timeout';
COMMENT ON FUNCTION agent_memory.end_session(text) IS
    'Remove the session and everything it owns, in this transaction; false when it was not active';
COMMENT ON FUNCTION agent_memory.session_stats() IS
    'Sessions stored: {total, active, expired (not yet cleaned up), avg_duration_seconds (last activity - creation)}';
COMMENT ON FUNCTION agent_memory.user_sessions(text) IS
    'Sessions of a user still stored, oldest first, with whether each is active';

-- Key-value working memory
COMMENT ON FUNCTION agent_memory.kv_set(text, text, jsonb, interval, integer) IS
    'Store value under key in an active session (renewing it), only if the entry is at expected_version when given (0: none); evicts the oldest entries past the word budget; returns {stored, key, words, total_words, evicted, version}';
COMMENT ON FUNCTION agent_memory.kv_get(text, text) IS
    'Value stored under key, or NULL when missing, expired, or the session is gone';
COMMENT ON FUNCTION agent_memory.kv_get_all(text) IS
    'All live entries of a session as one object; NULL when the session is gone';
COMMENT ON FUNCTION agent_memory.kv_has(text, text) IS
    'Whether a live value is stored under key';
COMMENT ON FUNCTION agent_memory.kv_entry(text, text) IS
    'The live entry under key as {key, value, version, createdAt, updatedAt, expiresAt}, or NULL; version is what a precondition names';
COMMENT ON FUNCTION agent_memory.kv_delete(text, text, integer) IS
    'Delete one key of an active session (renewing it), only if it is at expected_version when given; whether a live entry was deleted';
COMMENT ON FUNCTION agent_memory.kv_clear(text) IS
    'Delete every entry of an active session (renewing it); how many live entries were deleted';
COMMENT ON FUNCTION agent_memory.kv_versions(text, text) IS
    'The earlier versions an entry''s history keeps (agent_memory.history_retention), newest first, with when each was written, replaced and expires';
COMMENT ON FUNCTION agent_memory.kv_version(text, text, integer) IS
    'One kept version of an entry as {key, value, version, createdAt, updatedAt, replacedAt, expiresAt}, or NULL';
COMMENT ON FUNCTION agent_memory.kv_restore(text, text, integer, integer, interval) IS
    'Write a kept version''s value back as the entry''s next version, as kv_set does (only if the entry is at expected_version when given); returns what kv_set returns';
COMMENT ON FUNCTION agent_memory.kv_purge_history(text, text) IS
    'Remove the kept versions of one entry (key NULL: of every entry of the session); how many were removed';

-- Context builder
COMMENT ON FUNCTION agent_memory.build_context(text, text[], boolean) IS
    'Context for an agent cycle: {sessionId, timestamp, userId, sessionCreatedAt, sessionDuration, [sessionMetadata], memory}, memory limited to keys when given; {sessionId, timestamp, error} when the session is gone';
COMMENT ON FUNCTION agent_memory.update_context(text, jsonb) IS
    'Store several keys at once (an object of key → value) in one change, renewing the session; returns {stored, keys, words, total_words, evicted}';
COMMENT ON FUNCTION agent_memory.clear_context_keys(text, text[]) IS
    'Delete the given keys of an active session; how many live entries were deleted';
COMMENT ON FUNCTION agent_memory.clear_context(text) IS
    'Delete every entry of an active session; how many live entries were deleted';

-- Sensitive data and cleanup
COMMENT ON FUNCTION agent_memory.sensitive_findings(text) IS
    'Kinds of sensitive data in a text (payment_card, cpf, password, bearer_token, api_key, aws_access_key, jwt, private_key, email, phone), never the data itself';
COMMENT ON FUNCTION agent_memory.cleanup_expired(integer) IS
    'Remove expired sessions (with all they own) and expired entries in batches; records the run in cleanup_runs; returns {sessions, entries, batches, run_id}';

-- Message history
COMMENT ON FUNCTION agent_memory.append_message(text, text, text, text, jsonb, integer) IS
    'Append a message to the (session, node) thread, keeping at most keep (default agent_memory.max_messages) and never a tool result without its call; returns its seq (the first one''s for a repeated metadata.idempotency_key); creates a missing session, fails with P0002 on an expired one';
COMMENT ON FUNCTION agent_memory.append_messages(text, jsonb, text, integer) IS
    'Append a JSON array of {role, content, metadata} messages, oldest first, to the (session, node) thread, as append_message would one by one (plain messages in one statement); returns their seqs in order';
COMMENT ON FUNCTION agent_memory.messages(text, text, integer) IS
    'The newest lim messages of a node, or of the whole session when node_id is NULL, oldest first';
COMMENT ON FUNCTION agent_memory.messages_json(text, text, integer) IS
    'messages() as a JSON array of {role, content, metadata, seq, created_at}, oldest first; [] when there are none';
COMMENT ON FUNCTION agent_memory.recall(text, text, text, text, text, text[], integer, real[], jsonb) IS
    'The k memories of a scope (session, user, graph owner or file scope) that best match a query by their words and, given an embedding, their meaning, across key-value entries, messages, working memory, graph nodes and files, newer ones weighing more; each with a snippet that marks the query''s words';
COMMENT ON FUNCTION agent_memory.recall_tool(jsonb, text, text, text, text) IS
    'Recall as a tool a model calls: the request {query, kinds?, k?} is the model''s, the scope the application''s; answers {ok, result: {memories}} or, for a bad request, {ok: false, error: {message, code}}';
COMMENT ON FUNCTION agent_memory.recall_tool_definition(text, text, text, text) IS
    'A definition of recall as a tool with the JSON Schema of its request, in Anthropic''s (name, description, input_schema) or OpenAI''s function format';
COMMENT ON FUNCTION agent_memory.recall_embed(text, text, text, real[], text) IS
    'Store an application''s embedding of an item''s text (kind, key and ref as recall names the item); with source_md5, only if the item still holds that text; true when stored';
COMMENT ON FUNCTION agent_memory.recall_outbox(text, text, text, text, text[], integer) IS
    'The items of a scope that need an embedding (none yet, or one of another text or dimension), each with the text to embed and its md5, at most max_items';
COMMENT ON FUNCTION agent_memory.recall_enable_embeddings(integer) IS
    'Take embeddings of this dimension for recall by meaning; stored embeddings of another dimension become stale';
COMMENT ON FUNCTION agent_memory.recall_rebuild() IS
    'Rewrite recall''s search columns in agent_memory.text_search_config, kept for the kinds of agent_memory.recall_kinds only; returns them as JSON';
COMMENT ON FUNCTION agent_memory.pop_message(text, text) IS
    'Remove and return the newest message (of a node, or of the session) as JSON; NULL when there is none';
COMMENT ON FUNCTION agent_memory.last_user_message(text, text) IS
    'Content of the newest user message (of a node, or of the session); NULL when there is none';
COMMENT ON FUNCTION agent_memory.clear_messages(text, text) IS
    'Remove the messages of a node, or all of the session''s when node_id is NULL; returns how many';

-- Graph memory
COMMENT ON FUNCTION agent_memory.graph_create(text, text, text, text, text[], text) IS
    'Create a node under at least one parent (''__root__'' or node ids, each added the new id to its refs); returns its id (a generated cuid2-shaped id when node_id is NULL)';
COMMENT ON FUNCTION agent_memory.graph_read(text, text) IS
    'A node as JSON: id, title, description, version, revision, createdAt, updatedAt, refs, unresolvedRefs, body; also the virtual root ''__root__''';
COMMENT ON FUNCTION agent_memory.graph_write(text, text, text, text, text, text[], text, integer) IS
    'Write a node (NULL keeps a field), only if it is at expected_revision when given; a change with a change_description first saves the previous state as a version; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_append(text, text, text, integer) IS
    'Append content to a node''s body on a new line, in place, only if it is at expected_revision when given; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_delete(text, text, integer) IS
    'Delete a node and its versions, only if it is at expected_revision when given (0: none); refs that named it stay, unresolved; false when there was no such node';
COMMENT ON FUNCTION agent_memory.graph_nodes(text) IS
    'The owner''s nodes (never versions): id, title, description, version, updated_at';
COMMENT ON FUNCTION agent_memory.graph_versions(text, text) IS
    'The saved versions of a node with their change descriptions and when they were saved';
COMMENT ON FUNCTION agent_memory.graph_version(text, text, integer) IS
    'A saved version of a node as JSON (graph_read''s fields plus changeDescription)';
COMMENT ON FUNCTION agent_memory.graph_tree(text) IS
    'The tree projection as JSON: {"root": the root node, "children": {"<parent id>": [child nodes]}}; unreferenced nodes hang under __root__';
COMMENT ON FUNCTION agent_memory.graph_tree_rows(text) IS
    'The tree projection as rows in depth-first order: node_id, parent_id (''__root__'' at the top), depth (1 at the top), path of ids, title';
COMMENT ON FUNCTION agent_memory.graph_to_markdown(text, text) IS
    'A node as its markdown file <id>.md: frontmatter (title, description, version, createdAt, updatedAt, refs) then the body';
COMMENT ON FUNCTION agent_memory.graph_from_markdown(text, text, text, text) IS
    'Rewrite an existing node from its markdown file; returns the version now current';
COMMENT ON FUNCTION agent_memory.graph_export(text) IS
    'Every node and version of an owner as {"<id>.md": markdown, "<id>.v<N>.md": markdown}; graph_import of it into an empty owner is exact';
COMMENT ON FUNCTION agent_memory.graph_import(text, jsonb) IS
    'Import a folder of node markdown files given as {"<file name>": "<content>"} (<id>.v<N>.md files become versions) into an owner that has none of its nodes; returns the files imported';

-- Working memory
COMMENT ON FUNCTION agent_memory.wm_set(text, text, jsonb, text, integer) IS
    'Store one part of a working-memory entry (node NULL: the session''s global entry), sanitised, only if the entry''s own part is at expected_version when given (0: none); false when it equals what is stored (nothing written, no notification)';
COMMENT ON FUNCTION agent_memory.wm_set_many(text, jsonb, text) IS
    'Store several parts {"<part>": value} of an entry in one transaction, all or nothing; returns how many changed';
COMMENT ON FUNCTION agent_memory.wm_patch(text, text, jsonb, text, integer) IS
    'Apply an RFC 7396 merge patch to one part of an entry (starting from what the entry shows), only if the entry''s own part is at expected_version when given, and return the new value';
COMMENT ON FUNCTION agent_memory.wm_get(text, text, text) IS
    'One part of an entry: the node''s own, else the global one, else the contract''s empty value; config with its defaults';
COMMENT ON FUNCTION agent_memory.wm_part(text, text, text) IS
    'One part of an entry as wm_get shows it, with the version of the entry''s own part (0: none) that a precondition names: {part, value, version}';
COMMENT ON FUNCTION agent_memory.note_session_deletions() IS
    'Trigger of agent_memory.sessions: once a transaction that deleted sessions, or moved a session''s activity back or changed its timeout, commits, backends stop trusting what they remember of any session''s activity';
COMMENT ON FUNCTION agent_memory.working_memory(text, text) IS
    'The composed snapshot of an entry as JSON, read under one snapshot: parts with fallback to the global entry, the last config.history_length messages of the history, config toggles applied';
COMMENT ON FUNCTION agent_memory.working_memory_entry(text, text) IS
    'An entry as one flat object: project_id, current_node, structure_index, recent_messages (newest 50), work_history_summary, context_data, last_user_input, created_at, updated_at';
COMMENT ON FUNCTION agent_memory.wm_context(text, text, text) IS
    'The context bundle of an entry: messages, message_metadata, working_history, last_user_message; a project_id that is not the session''s is refused';
COMMENT ON FUNCTION agent_memory.wm_init(text, text, text) IS
    'Build an entry from project_id''s graph (node_context with content and meta, the structure index, the latest working history), record the project on the session, return the snapshot';
COMMENT ON FUNCTION agent_memory.set_active_node(text, text) IS
    'Focus a session on a node and initialise its entry from the session''s project; NULL clears the node entries; returns the snapshot';
COMMENT ON FUNCTION agent_memory.wm_refresh_structure(text) IS
    'Rewrite the structure index of every entry tied to a project from its graph; returns how many changed';
COMMENT ON FUNCTION agent_memory.wm_clear(text, text) IS
    'Delete one entry (node ''__global__'': the global one), all of a session''s entries (node NULL), or every entry (both NULL); returns how many';
COMMENT ON FUNCTION agent_memory.memory_scope(text, text, text) IS
    'The scope key of a memory node: global (one per node) or perThread (one per node and thread)';
COMMENT ON FUNCTION agent_memory.memory_tool(text, jsonb) IS
    'Run one memory tool request {path, command, content?, oldContent?, query?} on a scope''s files; returns the JSON envelope, never an SQL error for a bad request';
COMMENT ON FUNCTION agent_memory.memory_versions(text, text) IS
    'The earlier versions a memory file''s history keeps (agent_memory.history_retention), newest first';
COMMENT ON FUNCTION agent_memory.memory_version(text, text, integer) IS
    'One kept version of a memory file as {path, content, version, sha256, createdAt, updatedAt, replacedAt}, or NULL';
COMMENT ON FUNCTION agent_memory.memory_restore(text, text, integer, integer) IS
    'Write a kept version''s content back as the file''s next version, re-creating a deleted file (only if the file is at expected_version when given; 0: none); returns {path, version}';
COMMENT ON FUNCTION agent_memory.memory_purge_history(text, text) IS
    'Remove the kept versions of a file or directory (path NULL: of the whole scope); how many were removed';
COMMENT ON FUNCTION agent_memory.memory_render(text, text, integer) IS
    'A scope''s files for a prompt: tree (the paths, indented) or full (paths and contents), within max_chars, saying at the end what a cut left out';
COMMENT ON FUNCTION agent_memory.memory_tool_definition(text, text, text, text) IS
    'A definition of the memory tool with the JSON Schema of its request, in Anthropic''s (name, description, input_schema) or OpenAI''s function format';
COMMENT ON FUNCTION agent_memory.claude_memory(text, jsonb, integer, text) IS
    'Run one call of Claude''s memory tool (memory_20250818: view, create, str_replace, insert, delete, rename under /memories) on a scope''s files, only if the file it changes is at expected_version or has content expected_sha256 when given; returns the tool''s text, a refusal included';
COMMENT ON FUNCTION agent_memory.claude_memory_tool_result(text, jsonb, integer, text) IS
    'Run the memory call of a Claude tool_use block ({id, input, ...}), with claude_memory''s precondition, and return the tool_result block to send back (is_error true when refused)';

-- Settings the Claude memory tool's functions run with. Their statements
-- are prepared once per backend; PostgreSQL would plan the range and CTE
-- ones anew on every call (a parameter-free "generic" plan looks costlier
-- than one planned for the values), although the index plan is the same
-- for any values. The setting holds only during the call. (memory_tool
-- sets it itself for the length of a command, without a SET clause: see
-- src/memory_tool.rs.)
ALTER FUNCTION agent_memory.claude_memory(text, jsonb, integer, text) SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION agent_memory.claude_memory_tool_result(text, jsonb, integer, text) SET plan_cache_mode = force_generic_plan;

-- Export, import and erasure
COMMENT ON FUNCTION agent_memory.export(text, text, text, text) IS
    'Everything a session, a user, a graph owner or a file scope holds, as JSON lines: one item per line with its kind, key, columns and kept versions';
COMMENT ON FUNCTION agent_memory.import(text, text, text, text, text) IS
    'Take one line of an export, whole or refused, optionally under another session, user, owner or scope; returns what became of it';
COMMENT ON FUNCTION agent_memory.import_lines(text[], text, text, text, text) IS
    'Take the lines of an export in order, as import takes each, writing runs of entries, messages and files together; returns import''s result for each line, in order';
COMMENT ON FUNCTION agent_memory.erase_user(text, text[], text[]) IS
    'Remove every session of a user with all it holds, and the graph memory of owners and the memory files of scopes, with their versions; returns how many rows of each kind went';
