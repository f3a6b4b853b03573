-- Key-value working memory: set/get/has/delete/clear, the word budget,
-- sensitive data, expiry. Errors print their SQLSTATE on the next line.

SELECT agent_memory.create_session('u1', session_id => 'kv');

-- Writes report words, the session total and evictions.
SELECT agent_memory.kv_set('kv', 'goal', '"find a flight to Lisbon next week"');
SELECT agent_memory.kv_set('kv', 'step', '{"n": 2, "note": "compare prices"}');
SELECT agent_memory.kv_set('kv', 'flags', '[true, false, null]');
-- Rewriting a key replaces its words.
SELECT agent_memory.kv_set('kv', 'flags', '[true]');

-- Reads.
SELECT agent_memory.kv_get('kv', 'goal'), agent_memory.kv_get('kv', 'missing') IS NULL AS missing_is_null;
SELECT agent_memory.kv_has('kv', 'step'), agent_memory.kv_has('kv', 'missing');
SELECT agent_memory.kv_get_all('kv');
SELECT agent_memory.kv_get_all('no-such-session') IS NULL AS unknown_session_is_null;

-- jsonb numbers survive exactly.
SELECT agent_memory.kv_set('kv', 'big', '12345678901234567890.123456789012345678901') ->> 'words' AS words;
SELECT agent_memory.kv_get('kv', 'big');

-- The word budget: a write past it evicts the oldest entries, never the key
-- being written.
SET agent_memory.kv_word_budget = 20;
SELECT agent_memory.kv_set('kv', 'plan', '"one two three four five six seven eight"');
SELECT agent_memory.kv_get_all('kv');
-- A value that alone exceeds the budget is refused, and nothing changes.
SELECT agent_memory.kv_set('kv', 'essay', to_jsonb(repeat('word ', 21)));
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_get_all('kv');
RESET agent_memory.kv_word_budget;

-- Per-entry TTL; an expired entry is invisible at once and does not count.
SELECT agent_memory.kv_set('kv', 'short', '"soon gone"', '1 millisecond') - 'total_words' AS written;
SELECT pg_sleep(0.1);
SELECT agent_memory.kv_get('kv', 'short') IS NULL AS expired_is_null, agent_memory.kv_has('kv', 'short');
SELECT agent_memory.kv_get_all('kv') ? 'short' AS listed;
SELECT agent_memory.kv_set('kv', 'other', '"x"') ->> 'total_words' AS total_without_expired;
-- Writing an expired key starts it afresh.
SELECT agent_memory.kv_set('kv', 'short', '"back again"') ->> 'words' AS words;
SELECT agent_memory.kv_get('kv', 'short');
-- The default TTL is agent_memory.memory_ttl (500 hours).
SELECT round(extract(epoch FROM expires_at - updated_at) / 3600) AS ttl_hours
FROM agent_memory.kv_entries WHERE session_id = 'kv' AND key = 'plan';

-- Deleting.
SELECT agent_memory.kv_delete('kv', 'other'), agent_memory.kv_delete('kv', 'other') AS again;
SELECT agent_memory.kv_clear('kv');
SELECT agent_memory.kv_get_all('kv');
SELECT agent_memory.kv_delete('no-such-session', 'k'), agent_memory.kv_clear('no-such-session');

-- Bad input is refused and changes nothing.
SELECT agent_memory.kv_set('kv', 'k', NULL);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set(NULL, 'k', '1');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', '', '1');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'k', '1', '0 seconds');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('no-such-session', 'k', '1');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'blob', to_jsonb(repeat('x', 1048577)));
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS entries FROM agent_memory.kv_entries WHERE session_id = 'kv';

-- Sensitive data is refused by default; the error names the kinds, never
-- the data.
SELECT agent_memory.kv_set('kv', 'pay', '"card 4111 1111 1111 1111"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'password', '"hunter2"');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'contact', '{"email": "ana@example.com", "cpf": "529.982.247-25"}');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS entries FROM agent_memory.kv_entries WHERE session_id = 'kv';
-- 'allow' stores it.
SET agent_memory.sensitive_data = 'allow';
SELECT agent_memory.kv_set('kv', 'contact', '{"email": "ana@example.com"}') ->> 'stored' AS stored;
RESET agent_memory.sensitive_data;

-- The detector on its own.
SELECT agent_memory.sensitive_findings(t) FROM (VALUES
    ('nothing to see here, order 12345 on 2024-01-15'),
    ('card 4539-1488-0343-6467 and cpf 52998224725'),
    ('Authorization: Bearer abcdefghijklmnop1234'),
    ('AKIAIOSFODNN7EXAMPLE'),
    ('eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'),
    ('-----BEGIN OPENSSH PRIVATE KEY-----'),
    ('api_key: 0123456789abcdef, senha = segredo'),
    ('ligue (11) 91234-5678 ou +1 415 555 0100')) AS t(t);

-- Preconditions: every write takes the entry's next version, and a write
-- or delete naming a version happens only if the entry is still at it
-- (0: no live entry). A failed one changes nothing, with 40001.
SELECT agent_memory.kv_set('kv', 'fare', '388') ->> 'version' AS created;
SELECT agent_memory.kv_set('kv', 'fare', '372', expected_version => 1) ->> 'version' AS replaced;
SELECT agent_memory.kv_set('kv', 'fare', '350', expected_version => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'fare', '350', expected_version => 0);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_entry('kv', 'fare') - 'createdAt' - 'updatedAt' - 'expiresAt' AS entry;
SELECT agent_memory.kv_set('kv', 'seat', '"aisle"', expected_version => 0) ->> 'version' AS created_only;
SELECT agent_memory.kv_set('kv', 'meal', '"veg"', expected_version => 3);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_entry('kv', 'meal') IS NULL AS meal_absent, agent_memory.kv_entry('no-such-session', 'fare') IS NULL AS gone;
SELECT agent_memory.kv_set('kv', 'fare', '350', expected_version => -1);
\echo :LAST_ERROR_SQLSTATE
-- A ttl negative as a whole would store an entry expired at once.
SELECT agent_memory.kv_set('kv', 'fare', '350', ttl => '1 day -25 hours');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'fare', '350', ttl => '300000 years');
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_delete('kv', 'fare', expected_version => 1);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_get('kv', 'fare') AS fare_kept;
SELECT agent_memory.kv_delete('kv', 'fare', expected_version => 2) AS deleted_at_2;
SELECT agent_memory.kv_delete('kv', 'fare', expected_version => 0) AS absent_as_expected;
SELECT agent_memory.kv_delete('kv', 'fare', expected_version => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_delete('no-such-session', 'fare', expected_version => 2) AS session_gone;
SELECT agent_memory.kv_delete(NULL, 'fare');
\echo :LAST_ERROR_SQLSTATE
-- Written anew after a delete, or over an expired entry, an entry starts
-- again at version 1.
SELECT agent_memory.kv_set('kv', 'fare', '340') ->> 'version' AS anew;
SELECT agent_memory.kv_set('kv', 'fare', '330', '1 millisecond') ->> 'version' AS short_lived;
SELECT pg_sleep(0.1);
SELECT agent_memory.kv_set('kv', 'fare', '320', expected_version => 2);
\echo :LAST_ERROR_SQLSTATE
SELECT agent_memory.kv_set('kv', 'fare', '320', expected_version => 0) ->> 'version' AS over_expired;

-- Everything of a session goes with it.
SELECT agent_memory.end_session('kv');
SELECT count(*) AS entries_left FROM agent_memory.kv_entries WHERE session_id = 'kv';

-- A backend remembers until when each session it read stays active, and
-- then reads the entry alone. What it remembers never outlives the
-- session: an update that moves the activity back or shortens the
-- session's own timeout is seen at once, as is an ended session.
SELECT agent_memory.create_session('ana', session_id => 'kv-r' || i) FROM generate_series(1, 4) i;
SELECT agent_memory.kv_set('kv-r' || i, 'k', pg_catalog.to_jsonb(i)) ->> 'stored' AS stored FROM generate_series(1, 4) i;
SELECT i, agent_memory.kv_get('kv-r' || i, 'k') AS first_read FROM generate_series(1, 4) i;
SELECT i, agent_memory.kv_get('kv-r' || i, 'k') AS remembered FROM generate_series(1, 4) i;
UPDATE agent_memory.sessions SET last_activity_at = now() - interval '1 day' WHERE session_id = 'kv-r1';
UPDATE agent_memory.sessions SET idle_timeout = interval '1 microsecond' WHERE session_id = 'kv-r2';
SELECT i, agent_memory.kv_get('kv-r' || i, 'k') AS after_changes,
       agent_memory.kv_has('kv-r' || i, 'k') AS has
FROM generate_series(1, 4) i;
SELECT agent_memory.end_session('kv-r3');
SELECT i, agent_memory.kv_get('kv-r' || i, 'k') AS after_ending_3 FROM generate_series(3, 4) i;
-- Renewals never move the activity back: of a transaction that began
-- before the last renewal, they keep the later time.
UPDATE agent_memory.sessions SET last_activity_at = now() + interval '1 hour' WHERE session_id = 'kv-r4';
SELECT agent_memory.renew_activity('kv-r4');
SELECT agent_memory.kv_set('kv-r4', 'k', '5') ->> 'stored' AS stored;
SELECT last_activity_at > now() + interval '59 minutes' AS kept_the_later
FROM agent_memory.sessions WHERE session_id = 'kv-r4';
SELECT count(*) FILTER (WHERE agent_memory.end_session('kv-r' || i)) AS were_active FROM generate_series(1, 4) i;
-- The trigger function behind this is only a trigger.
SELECT agent_memory.note_session_deletions();
\echo :LAST_ERROR_SQLSTATE
