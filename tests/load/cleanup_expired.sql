-- A manual run next to the worker's (both lock with SKIP LOCKED).
SELECT agent_memory.cleanup_expired();
