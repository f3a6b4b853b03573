\set s random(1, :sessions)
SELECT agent_memory.build_context('ls' || :s);
