-- One write in five comes with a change description (a saved version).
\set o random(1, :owners)
\set n random(1, :nodes)
\set v random(1, 5)
\set r random(1, 1000000000)
SELECT agent_memory.graph_write('g' || :o, 'n' || :n, NULL, NULL,
  'Notes of node ' || :n || ', revision ' || :r || ': the user prefers window seats on long flights.',
  NULL, CASE WHEN :v = 1 THEN 'revised the notes' END);
