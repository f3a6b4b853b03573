\set s random(1, :sessions)
SELECT agent_memory.working_memory('ls' || :s, 'n1');
