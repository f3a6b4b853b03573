-- A short-lived session (2 s idle timeout) and an entry with a 1 s ttl, in
-- one transaction: the session is active when kv_set runs. An id drawn again
-- later is usually expired by then: create_session replaces it, or the
-- worker has removed it first.
\set c random(1, :churn)
BEGIN;
SELECT agent_memory.create_session('churn', '{"kind": "short"}', 'ch' || :c, interval '2 seconds');
SELECT agent_memory.kv_set('ch' || :c, 'draft', '"a short lived note"', interval '1 second');
END;
