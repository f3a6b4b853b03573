\set o random(1, :owners)
SELECT * FROM agent_memory.graph_tree_rows('g' || :o);
