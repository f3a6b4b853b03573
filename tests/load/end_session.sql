\set n random(1, :private)
SELECT agent_memory.end_session('e' || :client_id || '_' || :n);
