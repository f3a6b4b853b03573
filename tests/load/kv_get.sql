\set s random(1, :sessions)
\set k random(1, 20)
SELECT agent_memory.kv_get('ls' || :s, 'k' || :k);
