-- A session of this client's own pool (no other client touches it, so
-- end_session of the same pool never races it), with one message.
\set n random(1, :private)
BEGIN;
SELECT agent_memory.create_session('ender', '{}', 'e' || :client_id || '_' || :n);
SELECT agent_memory.append_message('e' || :client_id || '_' || :n, 'user', 'hello', keep => 50);
END;
