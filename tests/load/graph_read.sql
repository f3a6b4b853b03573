\set o random(1, :owners)
\set n random(1, :nodes)
SELECT agent_memory.graph_read('g' || :o, 'n' || :n);
