\set s random(1, :sessions)
\set k random(1, 10)
\set v random(1, 1000)
SELECT agent_memory.wm_patch('ls' || :s, 'node_context', jsonb_build_object('k' || :k, :v::int));
