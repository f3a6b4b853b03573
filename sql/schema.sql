-- agent_memory: tables and indexes.
--
-- Every table lives in schema agent_memory, and every row belongs to one
-- tenant-like key (session_id, owner or scope) so a table can later be
-- distributed by that key. Tables are registered with
-- pg_extension_config_dump so that pg_dump keeps their rows.
-- Every memory table also has a tenant column, in every key right after
-- the session, owner or scope: ids are per tenant, so no tenant's row can
-- meet another's in a key, a foreign key or a conflict, and a scan of one
-- tenant's session, owner or scope reads none of another tenant's rows
-- under the same name (see sql/tenants.sql for its default and the
-- row-level security policies, which need the library's functions).

-- Rules on values that hot statements write are domains, not table CHECK
-- constraints: PostgreSQL re-reads and plans a table's CHECK expressions
-- for every statement that writes the table, while a domain's check is
-- planned once per connection. Internal counters and slots, which only the
-- extension's functions write, carry no check at all.
CREATE DOMAIN agent_memory.json_object AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'object');
COMMENT ON DOMAIN agent_memory.json_object IS 'A JSON object (metadata)';

CREATE DOMAIN agent_memory.message_role AS text
    CHECK (VALUE IN ('system', 'user', 'assistant', 'tool'));
COMMENT ON DOMAIN agent_memory.message_role IS 'Who wrote a message: system, user, assistant or tool';

CREATE DOMAIN agent_memory.memory_key AS text CHECK (VALUE <> '');
COMMENT ON DOMAIN agent_memory.memory_key IS 'A key of key-value memory: any non-empty text';

CREATE DOMAIN agent_memory.positive_interval AS interval
    CONSTRAINT positive_interval_check CHECK (VALUE > interval '0' AND VALUE <= interval '100 years');
COMMENT ON DOMAIN agent_memory.positive_interval IS 'An interval longer than zero and at most 100 years (a session''s idle timeout)';

-- Paths compare bytewise (see memory_files).
CREATE DOMAIN agent_memory.memory_path AS text COLLATE "C" CHECK (VALUE LIKE '/_%');
COMMENT ON DOMAIN agent_memory.memory_path IS 'A memory tool path: absolute and normalised, compared bytewise';

CREATE DOMAIN agent_memory.file_count AS integer CHECK (VALUE >= 0);
COMMENT ON DOMAIN agent_memory.file_count IS 'A number of files: zero or more';

-- Sessions: the root every session-scoped row belongs to.
-- Every session_id column is plain text: Citus colocates tables only when
-- their distribution columns have the same type, and routes a call by
-- coercing its argument to that type, which it cannot do to a domain
-- (docs/scaling.md). The foreign keys carry the sessions' check.
CREATE TABLE agent_memory.sessions (
    session_id       text        NOT NULL CHECK (session_id <> ''),
    -- NULL: created by append_message without a user; create_session claims it.
    user_id          text,
    project_id       text,
    active_node_id   text,
    metadata         agent_memory.json_object NOT NULL DEFAULT '{}',
    created_at       timestamptz NOT NULL DEFAULT pg_catalog.now(),
    last_activity_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    -- NULL: agent_memory.session_idle_timeout applies.
    idle_timeout     agent_memory.positive_interval,
    -- Words of the session's stored kv_entries, kept by every write, and a
    -- time no later than the soonest expiry among them. While that time is
    -- in the future no entry has expired, so kv_words is the live total and a
    -- write needs no recount; once it has passed, the next write recounts.
    kv_words         bigint      NOT NULL DEFAULT 0,
    kv_next_expiry   timestamptz NOT NULL DEFAULT 'infinity',
    -- Message numbers count per session, not from a sequence: nothing on the
    -- hot path is shared between sessions (see docs/scaling.md). The thread
    -- of the session's newest append (NULL: none yet) numbers its messages
    -- from its own last_seq; every other thread's last_seq is at most
    -- last_message_seq, so only an append that moves to another thread
    -- writes this row (see message_threads.last_seq).
    last_message_seq bigint      NOT NULL DEFAULT 0,
    last_thread_key  text,
    tenant           text COLLATE "C" NOT NULL,
    PRIMARY KEY (session_id, tenant)
);
CREATE INDEX sessions_user_idx ON agent_memory.sessions (user_id, tenant);

COMMENT ON TABLE agent_memory.sessions IS
    'Agent sessions: owner, activity timestamps and idle timeout; everything session-scoped belongs to one row here';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.sessions', '');

-- Key-value working memory: one row per (session, key). Words are counted
-- once, at write time (see docs/guide.md: the word budget).
CREATE TABLE agent_memory.kv_entries (
    session_id text        NOT NULL,
    key        agent_memory.memory_key NOT NULL,
    value      jsonb       NOT NULL,
    words      integer     NOT NULL,
    -- Words this key held before its last write: the write's exact effect
    -- on sessions.kv_words is words - prev_words.
    prev_words integer     NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    expires_at timestamptz NOT NULL,
    tenant     text COLLATE "C" NOT NULL,
    -- The words recall matches, in every memory table after its own
    -- columns: here the key's words, weighted first, then the value's strings, numbers
    -- and object keys. A tsvector holds at most 1 MB: past 800,000 bytes of
    -- JSON, the words of its first 200,000 characters stand in.
    search     tsvector GENERATED ALWAYS AS (
                   pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(key, 1000)), 'A')
                   || CASE WHEN pg_catalog.octet_length(value::text) <= 800000
                           THEN pg_catalog.jsonb_to_tsvector('english', value, '["string", "numeric", "key"]')
                           ELSE pg_catalog.to_tsvector('english', pg_catalog.left(value::text, 200000)) END) STORED,
    -- The meaning recall compares, in every memory table after search: an
    -- embedding the application made of the item's text (see
    -- recall_embed), and the md5 of that text. An embedding whose md5 is
    -- not the current text's is stale and never used.
    embedding     real[],
    embedding_md5 text,
    -- 1 when written anew, one more at each write: what a write's
    -- precondition names (see agent_memory_core::versions). An expired
    -- entry counts as none, so a write over it starts again at 1.
    version       integer     NOT NULL DEFAULT 1,
    PRIMARY KEY (session_id, tenant, key),
    FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE
);
-- The cleanup removes the oldest expiries first.
CREATE INDEX kv_entries_expires_idx ON agent_memory.kv_entries (expires_at);
-- Recall's words, as in every memory table: the index finds the rows of a
-- word across scopes too large to read whole. A kind recall_kinds leaves
-- out has no search column values, and the index costs its writes nothing.
CREATE INDEX kv_entries_search_idx ON agent_memory.kv_entries USING gin (search) WHERE search IS NOT NULL;

COMMENT ON TABLE agent_memory.kv_entries IS
    'Key-value working memory of a session, with word counts and expiry; expired rows are invisible before they are removed';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.kv_entries', '');

-- Earlier versions of key-value entries, kept while
-- agent_memory.history_retention is above 0: a write or a delete of a live
-- entry saves what it replaces, and keeps only the versions numbered
-- within the retention of the newest. A version expires when the value it
-- held would have, and goes with its session.
CREATE TABLE agent_memory.kv_entry_versions (
    session_id  text        NOT NULL,
    key         agent_memory.memory_key NOT NULL,
    version     integer     NOT NULL,
    value       jsonb       NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    -- When a write or a delete replaced it.
    replaced_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant      text COLLATE "C" NOT NULL,
    PRIMARY KEY (session_id, tenant, key, version),
    FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE
);
CREATE INDEX kv_entry_versions_expires_idx ON agent_memory.kv_entry_versions (expires_at);

COMMENT ON TABLE agent_memory.kv_entry_versions IS
    'Key-value memory: earlier versions of entries, kept per agent_memory.history_retention until they expire';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.kv_entry_versions', '');

-- Message history, bounded at write time: each (session, node) is a thread
-- whose messages live in a ring of `keep` slots. An append writes the slot of
-- the oldest message (position mod keep), so the table holds at most `keep`
-- rows per thread, updated in place: its cost does not depend on how many
-- rows the table, or dead versions of the thread, hold. Only the words of
-- the content are indexed (for recall): the primary key gets an entry for
-- the slot's new version, and the old one goes by the index's bottom-up
-- deletion; with messages out of recall_kinds, the update is HOT.
-- node_id NULL is the session-wide thread; its thread_key is '' (node ids
-- are never empty).
CREATE TABLE agent_memory.message_threads (
    session_id   text    NOT NULL,
    thread_key   text    NOT NULL,
    -- Ring size: the keep in force. An append with another keep repacks.
    keep         integer NOT NULL,
    -- Position of the next append in the ring: it goes to slot
    -- appended % keep. A pop steps it back; a repack sets it to the number
    -- of messages kept.
    appended     bigint  NOT NULL DEFAULT 0,
    -- Messages ever appended to the thread, minus those popped: what
    -- trimming removed is appends minus the messages the thread holds.
    appends      bigint  NOT NULL DEFAULT 0,
    -- The seq of the thread's newest append. An append takes one more than
    -- the largest of this, the session's last_message_seq and, when it moves
    -- from another thread, that thread's last_seq: under the session's write
    -- lock, so seq increases within a session in commit order.
    last_seq     bigint  NOT NULL DEFAULT 0,
    tenant       text COLLATE "C" NOT NULL,
    PRIMARY KEY (session_id, tenant, thread_key),
    FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE
) WITH (fillfactor = 80);

COMMENT ON TABLE agent_memory.message_threads IS
    'One row per (session, node) message thread: its ring size (keep), ring position and appends so far';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.message_threads', '');

CREATE TABLE agent_memory.thread_messages (
    session_id      text        NOT NULL,
    thread_key      text        NOT NULL,
    slot            integer     NOT NULL,
    -- Strictly increasing within the session (message_threads.last_seq).
    seq             bigint      NOT NULL,
    node_id         text,
    role            agent_memory.message_role NOT NULL,
    content         text        NOT NULL,
    metadata        agent_memory.json_object NOT NULL DEFAULT '{}',
    -- metadata.idempotency_key, kept apart so a retried append finds it.
    idempotency_key text,
    created_at      timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant          text COLLATE "C" NOT NULL,
    search          tsvector GENERATED ALWAYS AS (
                        pg_catalog.to_tsvector('english', pg_catalog.left(content, 200000))) STORED,
    embedding     real[],
    embedding_md5 text,
    PRIMARY KEY (session_id, tenant, thread_key, slot),
    FOREIGN KEY (session_id, tenant, thread_key)
        REFERENCES agent_memory.message_threads ON DELETE CASCADE
) WITH (fillfactor = 80);
CREATE UNIQUE INDEX thread_messages_idempotency_idx ON agent_memory.thread_messages (session_id, tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX thread_messages_search_idx ON agent_memory.thread_messages USING gin (search) WHERE search IS NOT NULL;

COMMENT ON TABLE agent_memory.thread_messages IS
    'Messages of a session, at most keep per (session, node): a ring of slots per thread, ordered by seq';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.thread_messages', '');

-- What trimming did, per thread: appends that are no longer kept.
CREATE VIEW agent_memory.message_thread_stats AS
SELECT t.session_id,
       nullif(t.thread_key, '') AS node_id,
       t.keep,
       count(m.slot) AS messages,
       t.appends,
       t.appends - count(m.slot) AS trimmed
FROM agent_memory.message_threads t
LEFT JOIN agent_memory.thread_messages m USING (session_id, thread_key, tenant)
GROUP BY t.session_id, t.thread_key, t.tenant, t.keep, t.appends;

COMMENT ON VIEW agent_memory.message_thread_stats IS
    'Per (session, node) thread: keep, messages held, appends so far (minus pops), and how many trimming removed';

-- Working memory: one row per part of an entry. An
-- entry is (session, node); node_key '' is the session's global entry,
-- which a node's unset parts fall back to. Each part is written on its own
-- and carries its own version; the extension sanitises every value before
-- it is stored.
CREATE TABLE agent_memory.wm_parts (
    session_id text        NOT NULL,
    node_key   text        NOT NULL,
    part       text        NOT NULL,
    value      jsonb       NOT NULL,
    version    integer     NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant     text COLLATE "C" NOT NULL,
    -- The value's strings and numbers (as in kv_entries).
    search     tsvector GENERATED ALWAYS AS (
                   CASE WHEN pg_catalog.octet_length(value::text) <= 800000
                        THEN pg_catalog.jsonb_to_tsvector('english', value, '["string", "numeric"]')
                        ELSE pg_catalog.to_tsvector('english', pg_catalog.left(value::text, 200000)) END) STORED,
    embedding     real[],
    embedding_md5 text,
    PRIMARY KEY (session_id, tenant, node_key, part),
    FOREIGN KEY (session_id, tenant) REFERENCES agent_memory.sessions ON DELETE CASCADE
);
CREATE INDEX wm_parts_search_idx ON agent_memory.wm_parts USING gin (search) WHERE search IS NOT NULL;

COMMENT ON TABLE agent_memory.wm_parts IS
    'Working memory: each part (session, project_structure, node_context, fetched_context, working_history, messages, last_user_message, config) of each (session, node) entry, with its version';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.wm_parts', '');

-- Graph memory: markdown nodes per owner (a user or project id).
-- A node's children are its refs: its explicit ref list ("links") followed
-- by the [[id]] links of its body, each id once. refs is derived at write
-- time so the tree projection reads one column; refs to ids that do not
-- exist stay stored and are reported as unresolved. Ids compare bytewise
-- (COLLATE "C"): they are ASCII, and the primary key stays cheap.
CREATE TABLE agent_memory.graph_nodes (
    owner       text COLLATE "C" NOT NULL,
    node_id     text COLLATE "C" NOT NULL,
    title       text        NOT NULL,
    description text        NOT NULL DEFAULT '',
    body        text        NOT NULL DEFAULT '',
    links       text[]      NOT NULL DEFAULT '{}',
    refs        text[]      NOT NULL DEFAULT '{}',
    version     integer     NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant      text COLLATE "C" NOT NULL,
    -- Title words weigh most, then the description's, then the body's.
    search      tsvector GENERATED ALWAYS AS (
                    pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(title, 10000)), 'A')
                    || pg_catalog.setweight(pg_catalog.to_tsvector('english', pg_catalog.left(description, 40000)), 'B')
                    || pg_catalog.to_tsvector('english', pg_catalog.left(body, 150000))) STORED,
    embedding     real[],
    embedding_md5 text,
    -- 1 when created, one more at each change, in place or versioned (a
    -- parent's new child included): what a write's precondition names.
    -- version counts only the versions saved with a change description.
    revision      integer     NOT NULL DEFAULT 1,
    PRIMARY KEY (owner, tenant, node_id)
);
CREATE INDEX graph_nodes_search_idx ON agent_memory.graph_nodes USING gin (search) WHERE search IS NOT NULL;

COMMENT ON TABLE agent_memory.graph_nodes IS
    'Graph memory: the current state of each node (title, description, markdown body, refs, version)';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.graph_nodes', '');

-- Immutable snapshots: the full state a node had at a version, saved when
-- a change came with a change description. The primary key makes two
-- snapshots of one version impossible. graph_delete removes them with the
-- node (no foreign key: the snapshot insert stays a single index probe).
CREATE TABLE agent_memory.graph_node_versions (
    owner              text COLLATE "C" NOT NULL,
    node_id            text COLLATE "C" NOT NULL,
    version            integer     NOT NULL,
    title              text        NOT NULL,
    description        text        NOT NULL,
    body               text        NOT NULL,
    links              text[]      NOT NULL,
    refs               text[]      NOT NULL,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    change_description text        NOT NULL,
    saved_at           timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant             text COLLATE "C" NOT NULL,
    PRIMARY KEY (owner, tenant, node_id, version)
);

COMMENT ON TABLE agent_memory.graph_node_versions IS
    'Graph memory: immutable snapshots of earlier versions of a node, each with the description of the change that replaced it';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.graph_node_versions', '');

-- The memory tool: text files per scope, addressed by
-- normalised paths; directories exist through the files under them (and,
-- for Claude's dialect, through memory_directories). Paths
-- are C-collated so that the files under /a are exactly the range
-- ['/a/', '/a0'): '0' is the byte after '/'.
CREATE TABLE agent_memory.memory_files (
    scope      text COLLATE "C" NOT NULL,
    path       agent_memory.memory_path NOT NULL,
    content    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    updated_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant     text COLLATE "C" NOT NULL,
    -- The path's words weigh most, then the content's.
    search     tsvector GENERATED ALWAYS AS (
                   pg_catalog.setweight(pg_catalog.to_tsvector('english',
                       pg_catalog.translate(pg_catalog.left(path, 1000), '/._-', '    ')), 'A')
                   || pg_catalog.to_tsvector('english', pg_catalog.left(content, 200000))) STORED,
    embedding     real[],
    embedding_md5 text,
    -- 1 when created, one more at each change of content or path: what a
    -- request's precondition names.
    version       integer     NOT NULL DEFAULT 1,
    PRIMARY KEY (scope, tenant, path)
);
CREATE INDEX memory_files_search_idx ON agent_memory.memory_files USING gin (search) WHERE search IS NOT NULL;

COMMENT ON TABLE agent_memory.memory_files IS
    'Memory tool files: one row per file of a scope, at its normalised path';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_files', '');

-- Earlier versions of memory-tool files, kept while
-- agent_memory.history_retention is above 0: a change or a delete of a
-- file saves what it replaces, within the retention as for
-- kv_entry_versions. A rename moves a file's versions with it.
CREATE TABLE agent_memory.memory_file_versions (
    scope       text COLLATE "C" NOT NULL,
    path        agent_memory.memory_path NOT NULL,
    version     integer     NOT NULL,
    content     text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    replaced_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    tenant      text COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, tenant, path, version)
);

COMMENT ON TABLE agent_memory.memory_file_versions IS
    'Memory tool: earlier versions of files, kept per agent_memory.history_retention';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_file_versions', '');

-- Files per scope, as an upper bound: every creation adds one, deletions
-- leave it (they only lock the row first), and a creation that finds the
-- bound at agent_memory.max_files_per_scope counts the scope's files
-- exactly, under this row's lock, before it refuses. The limit costs one
-- row per creation and a count only near the limit. A deletion that
-- leaves the scope empty removes its row.
CREATE TABLE agent_memory.memory_scopes (
    scope  text COLLATE "C" NOT NULL,
    files  agent_memory.file_count NOT NULL DEFAULT 0,
    tenant text COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, tenant)
);

COMMENT ON TABLE agent_memory.memory_scopes IS
    'Memory tool scopes: an upper bound of how many files each holds (exact after a count at the limit)';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_scopes', '');

-- Directories Claude's dialect keeps with no file under them, as a file
-- system keeps the directory its last file left: a row at /a/b means that
-- /a and /a/b exist. Only claude_memory makes one (a delete or a rename
-- that empties a directory, a rename's new parent), and each counts in
-- memory_scopes.files as a file does, so a scope holds at most
-- agent_memory.max_files_per_scope files and directories together.
-- Deleting the directory, or one above it, in either dialect removes it.
CREATE TABLE agent_memory.memory_directories (
    scope  text COLLATE "C" NOT NULL,
    path   agent_memory.memory_path NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    PRIMARY KEY (scope, tenant, path)
);

COMMENT ON TABLE agent_memory.memory_directories IS
    'Memory tool directories Claude''s dialect keeps with no file under them: one row per such directory of a scope';

SELECT pg_catalog.pg_extension_config_dump('agent_memory.memory_directories', '');

-- The secret that names each tenant's notification channel (see
-- notify_channel()): no role but the owner may read it, so no tenant can
-- compute, and so LISTEN to or send on, another tenant's channel. Made at
-- CREATE EXTENSION, not dumped: a restored database gets a new one, and
-- listeners ask for their channel again.
CREATE TABLE agent_memory.notify_secret (
    secret text NOT NULL
);
INSERT INTO agent_memory.notify_secret
SELECT pg_catalog.replace(pg_catalog.gen_random_uuid()::text || pg_catalog.gen_random_uuid()::text, '-', '');

COMMENT ON TABLE agent_memory.notify_secret IS
    'The secret that names each tenant''s notification channel; readable by its owner only';

-- One row per cleanup run, by cleanup_expired() or the background worker.
-- Operational history, not user data: not dumped.
CREATE TABLE agent_memory.cleanup_runs (
    run_id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at       timestamptz NOT NULL,
    finished_at      timestamptz NOT NULL,
    triggered_by     text        NOT NULL CHECK (triggered_by IN ('manual', 'worker')),
    sessions_deleted bigint      NOT NULL DEFAULT 0,
    entries_deleted  bigint      NOT NULL DEFAULT 0,
    batches          integer     NOT NULL DEFAULT 0,
    error            text,
    -- The tenant whose rows a manual run removed (caller_tenant()); NULL
    -- for the worker's runs, which remove every tenant's.
    tenant           text COLLATE "C"
);
-- Pruning keeps the newest runs of each tenant, and of the worker.
CREATE INDEX cleanup_runs_tenant_idx ON agent_memory.cleanup_runs (tenant, run_id);

COMMENT ON TABLE agent_memory.cleanup_runs IS
    'History of cleanup runs: when, who (manual or worker), rows removed per kind, and the error if one stopped it';

-- Recall's search columns: the text search configuration they are written
-- in and the kinds kept in step (the others' columns are NULL), as
-- recall_rebuild() last made them from the settings. One row. Not dumped:
-- a restored database has the columns of a fresh install, and this row's
-- defaults say so.
CREATE TABLE agent_memory.recall_settings (
    config regconfig NOT NULL DEFAULT 'english',
    kinds  text[]    NOT NULL DEFAULT '{kv,message,node,file,working_memory}',
    -- The embeddings' dimension, as recall_enable_embeddings() set it;
    -- NULL: none are taken.
    dimension integer CHECK (dimension BETWEEN 1 AND 16000),
    one_row boolean  NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);
INSERT INTO agent_memory.recall_settings DEFAULT VALUES;

COMMENT ON TABLE agent_memory.recall_settings IS
    'The text search configuration of recall''s search columns and the kinds they are kept for, as recall_rebuild() last made them, and the embeddings'' dimension';
