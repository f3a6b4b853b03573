-- kv_set on a long-lived session; keys k16..k20 get a 1 s ttl (the worker removes them).
\set s random(1, :sessions)
\set k random(1, 20)
SELECT agent_memory.kv_set('ls' || :s, 'k' || :k, jsonb_build_object('note', 'the user prefers window seats', 'k', :k::int),
                           CASE WHEN :k > 15 THEN interval '1 second' END);
