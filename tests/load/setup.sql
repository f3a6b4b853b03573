-- Data of the mixed load (scripts/load_test.sh): run by psql with
--   -v sessions=N -v churn=N -v owners=N -v nodes=N -v scopes=N -v files=N
-- Long-lived sessions ls1..lsN (default idle timeout: they stay alive for
-- the whole run), each with key-value entries, a message history (with a
-- tool-call pair), working memory initialised from graph owner g<i>, whose
-- nodes n1..n<nodes> form a binary tree; memory-tool scopes ms1..msN with
-- files under /notes and /todo, and Claude memory files /memories/c<k>.md.
\set ON_ERROR_STOP 1
\o /dev/null
SELECT set_config('load.sessions', :'sessions', false),
       set_config('load.owners', :'owners', false),
       set_config('load.nodes', :'nodes', false),
       set_config('load.scopes', :'scopes', false),
       set_config('load.files', :'files', false);

-- Graph: one tree per owner, created through graph_create (a parent before
-- its children).
DO $$
DECLARE
  owners int := current_setting('load.owners')::int;
  nodes int := current_setting('load.nodes')::int;
BEGIN
  FOR o IN 1..owners LOOP
    FOR i IN 1..nodes LOOP
      PERFORM agent_memory.graph_create('g' || o, 'Node ' || i, 'what node ' || i || ' of project ' || o || ' holds',
        'Notes of node ' || i || ': the user prefers window seats on long flights.',
        ARRAY[CASE WHEN i = 1 THEN '__root__' ELSE 'n' || (i / 2) END], 'n' || i);
    END LOOP;
  END LOOP;
END $$;

-- Sessions with their memory.
SELECT count(agent_memory.create_session('u' || (i % 100), jsonb_build_object('channel', 'load'), 'ls' || i))
FROM generate_series(1, :sessions) i;

SELECT count(agent_memory.kv_set('ls' || i, 'k' || k, jsonb_build_object('note', 'the user prefers window seats', 'k', k)))
FROM generate_series(1, :sessions) i, generate_series(1, 5) k;

SELECT count(agent_memory.append_message('ls' || i, CASE WHEN m % 2 = 1 THEN 'user' ELSE 'assistant' END,
                                         'message ' || m || ': compare three flights to Lisbon', keep => 50))
FROM generate_series(1, :sessions) i, generate_series(1, 10) m;

SELECT count(agent_memory.append_message('ls' || i, 'assistant', 'looking it up',
               metadata => jsonb_build_object('tool_calls', jsonb_build_array(jsonb_build_object('id', 'setup_' || i))),
               keep => 50)),
       count(agent_memory.append_message('ls' || i, 'tool', '{"fares": [412, 388]}',
               metadata => jsonb_build_object('tool_call_id', 'setup_' || i), keep => 50))
FROM generate_series(1, :sessions) i;

SELECT count(agent_memory.wm_init('ls' || i, 'n1', 'g' || (i % :owners + 1)))
FROM generate_series(1, :sessions) i;

SELECT count(agent_memory.wm_set('ls' || i, 'node_context', jsonb_build_object('id', 'n1', 'title', 'Trip plan', 'step', 0)))
FROM generate_series(1, :sessions) i;

-- Memory-tool scopes and Claude memory files (the same tree).
SELECT count(agent_memory.memory_tool('ms' || s, jsonb_build_object('command', 'append',
               'path', '/notes/f' || f, 'content', 'the user prefers window seats')))
FROM generate_series(1, :scopes) s, generate_series(1, :files) f;

SELECT count(agent_memory.memory_tool('ms' || s, jsonb_build_object('command', 'append',
               'path', '/todo/t' || f, 'content', 'book the hotel')))
FROM generate_series(1, :scopes) s, generate_series(1, 5) f;

SELECT count(agent_memory.claude_memory('ms' || s, jsonb_build_object('command', 'create',
               'path', '/memories/c' || f || '.md', 'file_text', E'# Trip\nstatus: todo\nseat: window\n')))
FROM generate_series(1, :scopes) s, generate_series(1, 5) f;

VACUUM ANALYZE;
\o

SELECT (SELECT count(*) FROM agent_memory.sessions) AS sessions,
       (SELECT count(*) FROM agent_memory.kv_entries) AS kv_entries,
       (SELECT count(*) FROM agent_memory.thread_messages) AS messages,
       (SELECT count(*) FROM agent_memory.wm_parts) AS wm_parts,
       (SELECT count(*) FROM agent_memory.graph_nodes) AS graph_nodes,
       (SELECT count(*) FROM agent_memory.memory_files) AS memory_files;
