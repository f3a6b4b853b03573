\set s random(1, :sessions)
SELECT * FROM agent_memory.messages('ls' || :s, NULL, 50);
