-- agent_memory.curator: a SQL function that approves each key-value write.
-- true stores, false refuses; when it raises an error or returns NULL the
-- built-in sensitive-data check decides. Errors print their SQLSTATE next.

SELECT agent_memory.create_session('u', session_id => 'cur');

CREATE TABLE public.curator_log (key text);
-- Approves short values only, whatever they hold.
CREATE FUNCTION public.approve_short(key text, value jsonb) RETURNS boolean
LANGUAGE sql AS $$ SELECT length(value::text) < 20 $$;
-- Writes a log row, then fails (a model that is down).
CREATE FUNCTION public.curator_down(key text, value jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.curator_log VALUES (key);
    RAISE EXCEPTION 'model unavailable';
END $$;
-- Has no opinion.
CREATE FUNCTION public.curator_unsure(key text, value jsonb) RETURNS boolean
LANGUAGE sql AS $$ SELECT NULL::boolean $$;

-- The curator decides when it answers.
SET agent_memory.curator = 'public.approve_short';
SELECT agent_memory.kv_set('cur', 'a', '"short"') ->> 'stored' AS stored;
SELECT agent_memory.kv_set('cur', 'b', '"a much longer value that the curator refuses"');
\echo :LAST_ERROR_SQLSTATE
-- Its approval is final: it may let through what the built-in check refuses.
SELECT agent_memory.kv_set('cur', 'pin', '"4111111111111111"') ->> 'stored' AS stored;

-- When it fails, its own writes are undone and the built-in check decides.
SET agent_memory.curator = 'public.curator_down';
SELECT agent_memory.kv_set('cur', 'c', '"a fine value"') ->> 'stored' AS stored;
SELECT agent_memory.kv_set('cur', 'd', '"card 4111 1111 1111 1111"');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS curator_log_rows FROM public.curator_log;

-- NULL: no opinion, the built-in check decides.
SET agent_memory.curator = 'public.curator_unsure';
SELECT agent_memory.kv_set('cur', 'e', '"plain words"') ->> 'stored' AS stored;
SELECT agent_memory.kv_set('cur', 'f', '"mail ana@example.com"');
\echo :LAST_ERROR_SQLSTATE

-- A cancel or timeout is the caller's limit, not the curator's failure: it
-- fails the write, and nothing is stored.
CREATE FUNCTION public.curator_slow(key text, value jsonb) RETURNS boolean
LANGUAGE sql AS $$ SELECT pg_sleep(5) IS NULL $$;
SET agent_memory.curator = 'public.curator_slow';
SET statement_timeout = '200ms';
SELECT agent_memory.kv_set('cur', 'slow', '"plain words"');
\echo :LAST_ERROR_SQLSTATE
RESET statement_timeout;
-- So is a lock the curator could not get in time (55P03, as lock_timeout
-- raises it).
CREATE FUNCTION public.curator_locking(key text, value jsonb) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'lock_not_available', MESSAGE = 'canceling statement due to lock timeout';
END $$;
SET agent_memory.curator = 'public.curator_locking';
SELECT agent_memory.kv_set('cur', 'locked', '"plain words"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_get('cur', 'slow') AS slow, agent_memory.kv_get('cur', 'locked') AS locked;

-- A setting that names no such function is an error, not a silent pass.
SET agent_memory.curator = 'approve_short';
SELECT agent_memory.kv_set('cur', 'g', '"x"');
\echo :LAST_ERROR_SQLSTATE
SET agent_memory.curator = 'public.no_such_function';
SELECT agent_memory.kv_set('cur', 'g', '"x"');
\echo :LAST_ERROR_SQLSTATE
RESET agent_memory.curator;

SELECT agent_memory.kv_get_all('cur');

-- Leave the database empty for the next suite.
DELETE FROM agent_memory.sessions;
DROP TABLE public.curator_log;
DROP FUNCTION public.approve_short(text, jsonb), public.curator_down(text, jsonb), public.curator_unsure(text, jsonb),
              public.curator_slow(text, jsonb), public.curator_locking(text, jsonb);
