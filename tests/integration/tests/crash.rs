//! Crashes: a backend killed with SIGKILL in the middle of every kind of
//! write, `pg_ctl stop -m immediate` under a mixed load, and the cleanup
//! worker killed in the middle of a batch. After each, every call
//! acknowledged before the crash is there, nothing half-written is visible,
//! and the invariants of the tables hold.
//!
//! Each test prints one line that `make test-reliability` reads:
//! `crash: <test>: <N> crashes survived, <M> acknowledged calls checked, 0 rows lost`.
//!
//! The tests kill processes of the cluster (we run as root, or as its owner)
//! and restart it with `pg_ctl`, so they must run alone (`--test-threads=1`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use agent_memory_integration::{
    SystemSettings, connect, drop_database, fresh_database, next_cleanup_run, pg_program,
    table_digests, wait_until, worker_database, worker_pid,
};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, Config, NoTls};

// ---------------------------------------------------------------------------
// Processes: connections that may fail, kill -9, pg_ctl.

/// A connection to `dbname` like [`connect`], but an error instead of a
/// panic while the server is down or recovering.
fn try_connect(dbname: &str) -> Result<Client, postgres::Error> {
    let port: u16 = std::env::var("PGPORT")
        .unwrap_or_else(|_| "5432".into())
        .parse()
        .expect("PGPORT is a port number");
    Config::new()
        .host("127.0.0.1")
        .port(port)
        .user(&std::env::var("PGUSER").unwrap_or_else(|_| "postgres".into()))
        .dbname(dbname)
        .application_name("agent_memory crash tests")
        .connect_timeout(Duration::from_secs(5))
        .connect(NoTls)
}

fn backend_pid(client: &mut Client) -> i32 {
    client.query_one("SELECT pg_backend_pid()", &[]).expect("pg_backend_pid").get(0)
}

fn kill9(pid: i32) {
    let status = Command::new("kill").args(["-9", &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill -9 {pid} failed");
}

/// After a server process died of SIGKILL the postmaster ends every other
/// backend (`watch` among them), recovers from the WAL and accepts
/// connections again. Returns how long that took.
fn wait_for_crash_recovery(mut watch: Client) -> Duration {
    let start = Instant::now();
    let (ended, took) =
        wait_until(Duration::from_secs(30), || watch.simple_query("SELECT 1").is_err());
    assert!(
        ended,
        "the postmaster did not end the other backends {took:?} after the kill: no crash restart"
    );
    let (back, took) = wait_until(Duration::from_secs(60), || try_connect("postgres").is_ok());
    assert!(back, "no connection accepted {took:?} after the crash");
    start.elapsed()
}

/// The cluster's data directory and the log file `pg_ctl start` writes to
/// (`scripts/cluster.sh` keeps it next to the data directory).
struct Cluster {
    data: PathBuf,
    log: PathBuf,
}

impl Cluster {
    fn of(client: &mut Client) -> Cluster {
        let data: String =
            client.query_one("SHOW data_directory", &[]).expect("SHOW data_directory").get(0);
        let data = PathBuf::from(data);
        let beside = data.parent().map(|p| p.join("server.log"));
        let log = match beside {
            Some(log) if log.exists() => log,
            _ => data.join("server.log"),
        };
        Cluster { data, log }
    }

    /// Run pg_ctl as the owner of the data directory (initdb refuses root,
    /// so the cluster never belongs to root).
    fn pg_ctl(&self, args: &[&str]) -> std::process::Output {
        let owner = Command::new("stat")
            .args(["-c", "%U"])
            .arg(&self.data)
            .output()
            .expect("stat the data directory");
        let owner = String::from_utf8_lossy(&owner.stdout).trim().to_string();
        let me = Command::new("id").arg("-un").output().expect("id -un");
        let me = String::from_utf8_lossy(&me.stdout).trim().to_string();
        let mut command = if owner == me || owner.is_empty() {
            Command::new(pg_program("pg_ctl"))
        } else {
            let mut c = Command::new("runuser");
            c.args(["-u", &owner, "--"]).arg(pg_program("pg_ctl"));
            c
        };
        command
            .arg("-D")
            .arg(&self.data)
            .args(args)
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl")
    }

    fn running(&self) -> bool {
        self.pg_ctl(&["status"]).status.success()
    }

    /// Stop it with pg_ctl's shutdown `mode` (fast, immediate).
    fn stop(&self, mode: &str) {
        let out = self.pg_ctl(&["stop", "-m", mode, "-w", "-t", "60"]);
        assert!(
            out.status.success(),
            "pg_ctl stop -m {mode} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// How many bytes the server has logged so far.
    fn log_length(&self) -> usize {
        std::fs::read(&self.log).map_or(0, |log| log.len())
    }

    /// What the server logged after the first `length` bytes.
    fn logged_since(&self, length: usize) -> String {
        let log = std::fs::read(&self.log).expect("read the server log");
        String::from_utf8_lossy(log.get(length..).unwrap_or_default()).into_owned()
    }

    /// Start it again with its own configuration (port, socket directory and
    /// preloaded library live in the data directory).
    fn start(&self) {
        let log = self.log.to_string_lossy().to_string();
        let out = self.pg_ctl(&["start", "-l", &log, "-w", "-t", "120"]);
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{} (log: {log})",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Starts the cluster again if a test stopped it and then failed, so the
/// tests after it still have a server.
struct RestartOnDrop<'a>(&'a Cluster);

impl Drop for RestartOnDrop<'_> {
    fn drop(&mut self) {
        if !self.0.running() {
            self.0.start();
        }
    }
}

// ---------------------------------------------------------------------------
// What is stored: digests of every table, and the invariants.

type Digests = BTreeMap<String, (i64, String)>;

/// Row count and md5 of every table of schema agent_memory, as the current
/// transaction sees them.
fn digests_in_transaction(client: &mut Client) -> Digests {
    table_digests(client, None)
}

/// The digests under one snapshot.
fn digests(client: &mut Client) -> Digests {
    client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").unwrap();
    let digests = digests_in_transaction(client);
    client.batch_execute("COMMIT").unwrap();
    digests
}

fn digest_differences(before: &Digests, after: &Digests) -> Vec<String> {
    let mut tables: Vec<&String> = before.keys().chain(after.keys()).collect();
    tables.sort();
    tables.dedup();
    tables
        .into_iter()
        .filter(|t| before.get(*t) != after.get(*t))
        .map(|t| {
            format!(
                "{t}: {} rows before, {} after",
                before.get(t).map_or(-1, |d| d.0),
                after.get(t).map_or(-1, |d| d.0)
            )
        })
        .collect()
}

/// Each query returns one text row per violation.
const INVARIANTS: &[(&str, &str)] = &[
    (
        "a thread holds at most keep messages",
        "SELECT t.session_id || '/' || t.thread_key || ': ' || count(*) || ' messages, keep ' || t.keep
         FROM agent_memory.message_threads t
         JOIN agent_memory.thread_messages m USING (session_id, thread_key)
         GROUP BY t.session_id, t.thread_key, t.keep HAVING count(*) > t.keep",
    ),
    (
        "a message's slot lies in its thread's ring",
        "SELECT m.session_id || '/' || m.thread_key || ': slot ' || m.slot || ', keep ' || t.keep
         FROM agent_memory.thread_messages m
         JOIN agent_memory.message_threads t USING (session_id, thread_key)
         WHERE m.slot < 0 OR m.slot >= t.keep",
    ),
    (
        "no tool result without its call",
        "SELECT m.session_id || '/' || m.thread_key || ': result seq ' || m.seq
                || ' answers ' || (m.metadata ->> 'tool_call_id') || ', no such call before it'
         FROM agent_memory.thread_messages m
         WHERE m.role = 'tool' AND m.metadata ? 'tool_call_id'
           AND NOT EXISTS (
             SELECT FROM agent_memory.thread_messages a,
                  jsonb_array_elements(CASE WHEN jsonb_typeof(a.metadata -> 'tool_calls') = 'array'
                                            THEN a.metadata -> 'tool_calls' ELSE '[]' END) c
             WHERE a.session_id = m.session_id AND a.thread_key = m.thread_key
               AND a.role = 'assistant' AND a.seq < m.seq
               AND CASE jsonb_typeof(c) WHEN 'string' THEN c #>> '{}'
                                        WHEN 'object' THEN c ->> 'id' END
                   = m.metadata ->> 'tool_call_id')",
    ),
    (
        "every message's seq is unique within its session",
        "SELECT session_id || ': seq ' || seq || ' held by ' || count(*) || ' messages'
         FROM agent_memory.thread_messages GROUP BY session_id, seq HAVING count(*) > 1",
    ),
    (
        "no message's seq is above its thread's last_seq",
        "SELECT m.session_id || '/' || m.thread_key || ': seq ' || m.seq || ' above ' || t.last_seq
         FROM agent_memory.thread_messages m JOIN agent_memory.message_threads t USING (session_id, thread_key)
         WHERE m.seq > t.last_seq",
    ),
    (
        "no thread but the session's newest numbers past the session's last_message_seq",
        "SELECT t.session_id || '/' || t.thread_key || ': last_seq ' || t.last_seq || ' above ' || s.last_message_seq
         FROM agent_memory.message_threads t JOIN agent_memory.sessions s USING (session_id)
         WHERE t.thread_key IS DISTINCT FROM s.last_thread_key AND t.last_seq > s.last_message_seq",
    ),
    (
        // kv_words is exact while kv_next_expiry (no later than the soonest
        // expiry) is in the future; after that the cleanup may have removed
        // expired entries and the next write recounts (README, schema).
        "kv_words is the sum of the entries' words, within the budget",
        "SELECT s.session_id || ': kv_words ' || s.kv_words || ', stored words ' || coalesce(w.stored, 0)
                || ', live words ' || coalesce(w.live, 0) || ', budget ' || b.budget
                || ', next expiry ' || s.kv_next_expiry || ', soonest ' || coalesce(w.soonest::text, 'none')
         FROM agent_memory.sessions s
         LEFT JOIN (SELECT session_id, sum(words) AS stored,
                           coalesce(sum(words) FILTER (WHERE expires_at > now()), 0) AS live,
                           min(expires_at) AS soonest
                    FROM agent_memory.kv_entries GROUP BY session_id) w USING (session_id),
              (SELECT coalesce(current_setting('agent_memory.kv_word_budget', true), '600')::bigint AS budget) b
         WHERE (s.kv_next_expiry > now() AND s.kv_words <> coalesce(w.stored, 0))
            OR s.kv_next_expiry > w.soonest
            OR s.kv_words > b.budget
            OR coalesce(w.live, 0) > b.budget
            OR s.kv_words < coalesce(w.live, 0)",
    ),
    (
        "a node's versions are 1..N with N-1 snapshots",
        "SELECT n.owner || '/' || n.node_id || ': version ' || n.version || ', '
                || coalesce(v.c, 0) || ' snapshots from ' || coalesce(v.lo, 0) || ' to ' || coalesce(v.hi, 0)
         FROM agent_memory.graph_nodes n
         LEFT JOIN (SELECT owner, node_id, count(*) AS c, min(version) AS lo, max(version) AS hi
                    FROM agent_memory.graph_node_versions GROUP BY owner, node_id) v USING (owner, node_id)
         WHERE n.version < 1 OR coalesce(v.c, 0) <> n.version - 1
            OR (n.version > 1 AND (v.lo <> 1 OR v.hi <> n.version - 1))
         UNION ALL
         SELECT 'snapshots of a missing node ' || v.owner || '/' || v.node_id
         FROM (SELECT DISTINCT owner, node_id FROM agent_memory.graph_node_versions) v
         WHERE NOT EXISTS (SELECT FROM agent_memory.graph_nodes n
                           WHERE n.owner = v.owner AND n.node_id = v.node_id)",
    ),
    (
        "memory_scopes.files bounds the files of the scope",
        "SELECT 'scope ' || f.scope || ': ' || f.n || ' files, counted ' || coalesce(s.files::text, 'nowhere')
         FROM (SELECT scope, count(*) AS n FROM agent_memory.memory_files GROUP BY scope) f
         LEFT JOIN agent_memory.memory_scopes s USING (scope)
         WHERE s.files IS NULL OR s.files < f.n",
    ),
];

/// Every violation of an invariant, under one snapshot.
fn violations(client: &mut Client) -> Vec<String> {
    client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").unwrap();
    let mut found = Vec::new();
    for (what, sql) in INVARIANTS {
        for row in
            client.query(*sql, &[]).unwrap_or_else(|e| panic!("invariant query ({what}): {e}"))
        {
            found.push(format!("{what}: {}", row.get::<_, String>(0)));
        }
    }
    client.batch_execute("COMMIT").unwrap();
    found
}

fn assert_invariants(client: &mut Client, when: &str) {
    let found = violations(client);
    assert!(found.is_empty(), "invariants broken {when}:\n  {}", found.join("\n  "));
}

/// Every btree index of the extension's tables agrees with its table
/// (amcheck's `bt_index_check` with `heapallindexed`), when amcheck is
/// available: the functions read through the indexes, the digests do not.
/// Installs amcheck in the database: use it on the tests' own databases.
fn assert_indexes_intact(client: &mut Client, when: &str) {
    let available: bool = client
        .query_one(
            "SELECT EXISTS (SELECT FROM pg_available_extensions WHERE name = 'amcheck')",
            &[],
        )
        .unwrap()
        .get(0);
    if !available {
        return;
    }
    client.batch_execute("CREATE EXTENSION IF NOT EXISTS amcheck").unwrap();
    let indexes: Vec<String> = client
        .query(
            "SELECT i.indexrelid::regclass::text FROM pg_index i
             JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
             JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'agent_memory' AND a.amname = 'btree' ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let broken: Vec<String> = indexes
        .iter()
        .filter_map(|index| {
            client
                .execute("SELECT bt_index_check($1::text::regclass, true)", &[index])
                .err()
                .map(|e| format!("{index}: {e}"))
        })
        .collect();
    assert!(
        broken.is_empty(),
        "indexes inconsistent with their tables {when}:\n  {}",
        broken.join("\n  ")
    );
}

/// The cleanup worker is running again and removes an expired session of
/// its database.
fn worker_carries_on() {
    let mut client = worker_database();
    let (running, took) = wait_until(Duration::from_secs(30), || worker_pid(&mut client).is_some());
    assert!(running, "no cleanup worker {took:?} after the crash");
    client
        .batch_execute(
            "INSERT INTO agent_memory.sessions (session_id, user_id, last_activity_at)
             VALUES ('crash-carry-on', 'crash', now() - interval '1 day')",
        )
        .unwrap();
    let (removed, took) = wait_until(Duration::from_secs(30), || {
        client
            .query_one(
                "SELECT count(*) FROM agent_memory.sessions WHERE session_id = 'crash-carry-on'",
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
            == 0
    });
    assert!(removed, "the worker did not remove an expired session in {took:?} after the crash");
}

/// The extension's shared memory (listener count) was set up again with
/// the server's: a change still reaches a listener.
fn notifications_still_arrive(db: &str) {
    let mut listener = connect(db);
    listener.batch_execute("LISTEN agent_memory").unwrap();
    let mut writer = connect(db);
    writer
        .batch_execute(
            "SELECT agent_memory.create_session('crash', session_id => 'crash-notify');
             SELECT agent_memory.wm_set('crash-notify', 'fetched_context', '{\"after\": \"the crash\"}')",
        )
        .unwrap();
    let (arrived, took) = wait_until(Duration::from_secs(5), || {
        listener.batch_execute("SELECT 1").unwrap();
        listener
            .notifications()
            .iter()
            .any(|n| Ok(n.channel() == "agent_memory" && n.payload().contains("crash-notify")))
            .unwrap()
    });
    assert!(arrived, "no notification {took:?} after a change that followed the crash");
}

fn is_crash_error(error: &postgres::Error) -> bool {
    // The killed backend just vanishes (a closed connection, no SQLSTATE);
    // the others get 57P01/57P02/57P03 from the postmaster.
    match error.code() {
        None => true,
        Some(code) => code.code().starts_with("57P"),
    }
}

// ---------------------------------------------------------------------------
// 1. A backend killed in the middle of each kind of write.

const DB: &str = "am_it_crash";

/// An acknowledged (committed) call and a query that is true while its
/// effect is stored.
struct Check {
    what: String,
    sql: String,
}

fn check(what: impl Into<String>, sql: impl Into<String>) -> Check {
    Check { what: what.into(), sql: sql.into() }
}

fn holds(client: &mut Client, check: &Check) -> bool {
    client
        .query_one(check.sql.as_str(), &[])
        .unwrap_or_else(|e| panic!("check {}: {e}", check.what))
        .get::<_, Option<bool>>(0)
        == Some(true)
}

fn one_text(client: &mut Client, sql: &str) -> String {
    client.query_one(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// One kind of write: how to set it up, the acknowledged writes made before
/// each crash (which may also prepare what the crash needs), the writes a
/// transaction completes before its backend is killed, and bulk statements
/// killed while they run (one crash each), after some milliseconds.
struct Kind {
    name: &'static str,
    setup: &'static str,
    ack: fn(&mut Client, usize) -> Vec<Check>,
    in_transaction: &'static [&'static str],
    /// Each with how long it runs before the kill (well within its run).
    bulk: &'static [(u64, &'static str)],
}

fn ack_kv(client: &mut Client, n: usize) -> Vec<Check> {
    client
        .batch_execute(&format!(
            "SELECT agent_memory.kv_set('kv', 'ack-{n}', '\"acknowledged {n}\"')"
        ))
        .unwrap();
    vec![check(
        format!("kv_set ack-{n}"),
        format!("SELECT agent_memory.kv_get('kv', 'ack-{n}') = '\"acknowledged {n}\"'::jsonb"),
    )]
}

fn ack_messages(client: &mut Client, n: usize) -> Vec<Check> {
    client
        .batch_execute(&format!(
            "SELECT agent_memory.append_message('msg', 'assistant', 'ack call {n}', 'acks',
                                               '{{\"tool_calls\": [\"ack-call-{n}\"]}}');
             SELECT agent_memory.append_message('msg', 'tool', 'ack result {n}', 'acks',
                                               '{{\"tool_call_id\": \"ack-call-{n}\", \"idempotency_key\": \"ack-{n}\"}}')"
        ))
        .unwrap();
    (["call", "result"])
        .iter()
        .map(|what| {
            check(
                format!("append_message ack {what} {n}"),
                format!(
                    "SELECT EXISTS (SELECT FROM agent_memory.thread_messages
                                    WHERE session_id = 'msg' AND thread_key = 'acks' AND content = 'ack {what} {n}')"
                ),
            )
        })
        .collect()
}

fn ack_working_memory(client: &mut Client, n: usize) -> Vec<Check> {
    client
        .batch_execute(&format!(
            "SELECT agent_memory.wm_patch('wm', 'fetched_context', '{{\"ack-{n}\": {n}}}');
             SELECT agent_memory.wm_set('wm', 'last_user_message', '\"acknowledged {n}\"', 'ack-{n}')"
        ))
        .unwrap();
    vec![
        check(
            format!("wm_patch ack-{n}"),
            format!(
                "SELECT agent_memory.wm_get('wm', 'fetched_context') -> 'ack-{n}' = '{n}'::jsonb"
            ),
        ),
        check(
            format!("wm_set ack {n}"),
            format!(
                "SELECT agent_memory.wm_get('wm', 'last_user_message', 'ack-{n}') = '\"acknowledged {n}\"'::jsonb"
            ),
        ),
    ]
}

fn ack_graph(client: &mut Client, n: usize) -> Vec<Check> {
    let version: i32 = client
        .query_one(
            &format!(
                "SELECT agent_memory.graph_write('g', 'n1', NULL, NULL, 'acknowledged body {n}',
                                                 change_description => 'ack {n}')"
            ),
            &[],
        )
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            "SELECT agent_memory.graph_create('g', 'Ack {n}', '', 'ack node', ARRAY['n2'], node_id => 'ack{n}')"
        ))
        .unwrap();
    vec![
        check(
            format!("graph_write version {version}"),
            format!(
                "SELECT EXISTS (SELECT FROM agent_memory.graph_nodes
                                WHERE owner = 'g' AND node_id = 'n1' AND version = {version}
                                  AND body = 'acknowledged body {n}')
                     OR EXISTS (SELECT FROM agent_memory.graph_node_versions
                                WHERE owner = 'g' AND node_id = 'n1' AND version = {version}
                                  AND body = 'acknowledged body {n}')"
            ),
        ),
        check(
            format!("graph_create ack{n}"),
            format!(
                "SELECT EXISTS (SELECT FROM agent_memory.graph_nodes WHERE owner = 'g' AND node_id = 'ack{n}')
                    AND (SELECT 'ack{n}' = ANY (refs) FROM agent_memory.graph_nodes
                         WHERE owner = 'g' AND node_id = 'n2')"
            ),
        ),
    ]
}

fn ack_memory_tool(client: &mut Client, n: usize) -> Vec<Check> {
    let answer = one_text(
        client,
        &format!(
            "SELECT agent_memory.memory_tool('mt',
                 '{{\"path\": \"/acks/ack-{n}\", \"command\": \"append\", \"content\": \"acknowledged {n}\"}}')::text"
        ),
    );
    assert!(answer.contains("\"ok\":true"), "{answer}");
    vec![check(
        format!("memory_tool append /acks/ack-{n}"),
        format!(
            "SELECT EXISTS (SELECT FROM agent_memory.memory_files
                            WHERE scope = 'mt' AND path = '/acks/ack-{n}' AND content = 'acknowledged {n}')"
        ),
    )]
}

fn ack_claude_memory(client: &mut Client, n: usize) -> Vec<Check> {
    let created = one_text(
        client,
        &format!(
            "SELECT agent_memory.claude_memory('cm',
                 '{{\"command\": \"create\", \"path\": \"/memories/ack-{n}.md\", \"file_text\": \"acknowledged {n}\"}}')"
        ),
    );
    assert!(created.starts_with("File created successfully"), "{created}");
    let marker = n + 1;
    let replaced = one_text(
        client,
        &format!(
            "SELECT agent_memory.claude_memory('cm',
                 '{{\"command\": \"str_replace\", \"path\": \"/memories/notes.md\",
                   \"old_str\": \"<{marker}>\", \"new_str\": \"[ack {n}]\"}}')"
        ),
    );
    assert!(replaced.contains("has been edited"), "{replaced}");
    vec![
        check(
            format!("claude_memory create /memories/ack-{n}.md"),
            format!(
                "SELECT EXISTS (SELECT FROM agent_memory.memory_files
                                WHERE scope = 'cm' AND path = '/ack-{n}.md' AND content = 'acknowledged {n}')"
            ),
        ),
        check(
            format!("claude_memory str_replace <{marker}>"),
            format!(
                "SELECT strpos(content, '[ack {n}]') > 0 AND strpos(content, '<{marker}>') = 0
                 FROM agent_memory.memory_files WHERE scope = 'cm' AND path = '/notes.md'"
            ),
        ),
    ]
}

fn ack_end_session(client: &mut Client, n: usize) -> Vec<Check> {
    let ended: bool = client
        .query_one(&format!("SELECT agent_memory.end_session('end-ack-{n}')"), &[])
        .unwrap()
        .get(0);
    assert!(ended);
    vec![check(
        format!("end_session end-ack-{n}"),
        format!(
            "SELECT NOT EXISTS (SELECT FROM agent_memory.sessions WHERE session_id = 'end-ack-{n}')
                AND NOT EXISTS (SELECT FROM agent_memory.kv_entries WHERE session_id = 'end-ack-{n}')
                AND NOT EXISTS (SELECT FROM agent_memory.message_threads WHERE session_id = 'end-ack-{n}')"
        ),
    )]
}

/// A small expired set removed by an acknowledged cleanup_expired(), then a
/// large one (plain INSERTs: expired rows are not made any other way
/// quickly) for the crash.
fn ack_cleanup(client: &mut Client, n: usize) -> Vec<Check> {
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.sessions (session_id, user_id, last_activity_at, kv_next_expiry)
             VALUES ('exp-ack-{n}', 'crash', now() - interval '1 day', now() + interval '1 day');
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             VALUES ('exp-ack-{n}', 'k', 'null', 0, now() + interval '1 day'),
                    ('exp-live', 'gone-{n}', 'null', 0, now() - interval '1 minute');
             UPDATE agent_memory.sessions SET kv_next_expiry = least(kv_next_expiry, now() - interval '1 minute')
             WHERE session_id = 'exp-live'"
        ))
        .unwrap();
    let run: serde_json::Value =
        serde_json::from_str(&one_text(client, "SELECT agent_memory.cleanup_expired()::text"))
            .unwrap();
    assert!(run["sessions"].as_i64() >= Some(1) && run["entries"].as_i64() >= Some(1), "{run}");
    let run_id = run["run_id"].as_i64().unwrap();
    client
        .batch_execute(&format!(
            "INSERT INTO agent_memory.sessions (session_id, user_id, last_activity_at, kv_next_expiry)
             SELECT 'dead-{n}-' || i, 'crash', now() - interval '1 day', now() + interval '1 day'
             FROM generate_series(1, 2000) i;
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'dead-{n}-' || (i % 2000 + 1), 'k' || i, 'null', 0, now() + interval '1 day'
             FROM generate_series(1, 20000) i;
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'exp-live', 'old-{n}-' || i, 'null', 0, now() - interval '1 minute'
             FROM generate_series(1, 50000) i"
        ))
        .unwrap();
    vec![check(
        format!("cleanup_expired run {run_id}"),
        format!(
            "SELECT NOT EXISTS (SELECT FROM agent_memory.sessions WHERE session_id = 'exp-ack-{n}')
                AND NOT EXISTS (SELECT FROM agent_memory.kv_entries WHERE session_id = 'exp-live' AND key = 'gone-{n}')
                AND EXISTS (SELECT FROM agent_memory.cleanup_runs WHERE run_id = {run_id})"
        ),
    )]
}

fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            name: "kv_set",
            setup: "SELECT agent_memory.create_session('crash', session_id => 'kv');
                    SELECT agent_memory.kv_set('kv', 'k' || i, to_jsonb('word ' || i)) FROM generate_series(1, 100) i",
            ack: ack_kv,
            in_transaction: &[
                "SELECT agent_memory.kv_set('kv', 'k1', '\"changed value\"')",
                "SELECT agent_memory.kv_set('kv', 'fresh', '\"a new key\"')",
                // Over the budget: evicts the oldest entries.
                "SELECT agent_memory.kv_set('kv', 'large', to_jsonb(repeat('w ', 450)))",
                "SELECT agent_memory.kv_delete('kv', 'k99')",
                "SELECT agent_memory.update_context('kv', '{\"a\": \"one\", \"b\": \"two three\"}')",
            ],
            bulk: &[
                (
                    200,
                    "SELECT count(agent_memory.kv_set('kv', 'bulk' || i, to_jsonb('two words ' || i)))
                     FROM generate_series(1, 200000) i",
                ),
            ],
        },
        Kind {
            name: "append_message",
            setup: "SELECT agent_memory.create_session('crash', session_id => 'msg');
                    SELECT agent_memory.append_message('msg', 'user', 'what is the weather?', 'n1', keep => 5);
                    SELECT agent_memory.append_message('msg', 'assistant', 'calling the tool', 'n1',
                        '{\"tool_calls\": [{\"id\": \"call-1\", \"type\": \"function\"}]}', keep => 5);
                    SELECT agent_memory.append_message('msg', 'tool', 'sunny', 'n1', '{\"tool_call_id\": \"call-1\"}', keep => 5);
                    SELECT agent_memory.append_message('msg', 'assistant', 'it is sunny', 'n1', keep => 5);
                    SELECT agent_memory.append_message('msg', 'user', 'session-wide ' || i) FROM generate_series(1, 10) i",
            ack: ack_messages,
            in_transaction: &[
                "SELECT agent_memory.append_message('msg', 'assistant', 'calling again', 'n1',
                     '{\"tool_calls\": [\"call-2\"]}', keep => 5)",
                "SELECT agent_memory.append_message('msg', 'tool', 'rainy', 'n1', '{\"tool_call_id\": \"call-2\"}', keep => 5)",
                // Trims the first call, and its result with it.
                "SELECT agent_memory.append_message('msg', 'user', 'thanks ' || i, 'n1', keep => 5) FROM generate_series(1, 4) i",
                "SELECT agent_memory.append_message('msg', 'user', 'retried', 'n1', '{\"idempotency_key\": \"k-1\"}', keep => 5)",
                // Another keep: the ring is repacked.
                "SELECT agent_memory.append_message('msg', 'user', 'smaller ring', 'n1', keep => 3)",
                "SELECT agent_memory.pop_message('msg', 'n1')",
                "SELECT agent_memory.clear_messages('msg')",
            ],
            bulk: &[
                // 50,000 appends in one statement: calls, their results and
                // user messages in a ring of 5, repacked to 4 and back now and then.
                (
                    150,
                    "SELECT count(agent_memory.append_message('msg',
                            CASE i % 3 WHEN 0 THEN 'assistant' WHEN 1 THEN 'tool' ELSE 'user' END,
                            'bulk ' || i, 'n1',
                            CASE i % 3 WHEN 0 THEN jsonb_build_object('tool_calls', jsonb_build_array('bulk-' || i))
                                       WHEN 1 THEN jsonb_build_object('tool_call_id', 'bulk-' || (i - 1))
                                       ELSE '{}' END,
                            keep => CASE WHEN i % 1000 = 500 THEN 4 ELSE 5 END))
                     FROM generate_series(3, 50002) i",
                ),
            ],
        },
        Kind {
            name: "wm_set/wm_patch",
            setup: "SELECT agent_memory.create_session('crash', session_id => 'wm');
                    SELECT agent_memory.wm_set('wm', 'fetched_context', '{\"fares\": [412, 388]}');
                    SELECT agent_memory.wm_set('wm', 'working_history', '\"booked nothing yet\"');
                    SELECT agent_memory.wm_set('wm', 'config', '{\"history_length\": 10}', 'n1')",
            ack: ack_working_memory,
            in_transaction: &[
                "SELECT agent_memory.wm_set('wm', 'working_history', '\"booked a flight\"')",
                "SELECT agent_memory.wm_patch('wm', 'fetched_context', '{\"fares\": null, \"seat\": \"window\"}')",
                "SELECT agent_memory.wm_set_many('wm', '{\"last_user_message\": \"book it\", \"fetched_context\": {\"x\": 1}}', 'n2')",
                "SELECT agent_memory.wm_clear('wm', 'n1')",
            ],
            bulk: &[
                (
                    100,
                    "SELECT count(agent_memory.wm_patch('wm', 'fetched_context', jsonb_build_object('k' || (i % 50), i)))
                     FROM generate_series(1, 100000) i",
                ),
                (
                    250,
                    "SELECT count(agent_memory.wm_set('wm', 'working_history', to_jsonb('step ' || i)))
                     FROM generate_series(1, 100000) i",
                ),
            ],
        },
        Kind {
            name: "graph_write/graph_create",
            setup: "SELECT agent_memory.graph_create('g', 'Plan', 'the plan', 'first body', ARRAY['__root__'], node_id => 'n1');
                    SELECT agent_memory.graph_create('g', 'Step', '', 'a step', ARRAY['n1'], node_id => 'n2');
                    SELECT agent_memory.graph_write('g', 'n1', NULL, NULL, 'body ' || i, change_description => 'edit ' || i)
                    FROM generate_series(1, 3) i",
            ack: ack_graph,
            in_transaction: &[
                "SELECT agent_memory.graph_write('g', 'n1', 'Plan B', NULL, 'second thoughts [[n2]]', change_description => 'rethink')",
                "SELECT agent_memory.graph_write('g', 'n2', NULL, 'in place', NULL)",
                "SELECT agent_memory.graph_create('g', 'New', '', 'new node', ARRAY['n1', 'n2'], node_id => 'n3')",
                "SELECT agent_memory.graph_append('g', 'n2', 'more text')",
                "SELECT agent_memory.graph_delete('g', 'ack0')",
            ],
            bulk: &[
                (
                    300,
                    "SELECT count(agent_memory.graph_write('g', 'n1', NULL, NULL, 'bulk body ' || i, change_description => 'bulk ' || i))
                     FROM generate_series(1, 100000) i",
                ),
                (
                    120,
                    "SELECT count(agent_memory.graph_create('g', 'T' || i, '', '', ARRAY['n2'], node_id => 'b' || i))
                     FROM generate_series(1, 20000) i",
                ),
            ],
        },
        Kind {
            name: "memory_tool",
            // A directory of 300,000 files (plain INSERTs, counted in the
            // scope's bound), so that deleting it takes a while.
            setup: "SELECT agent_memory.memory_tool('mt', jsonb_build_object('path', '/dir/f' || i, 'command', 'append', 'content', 'start;'))
                    FROM generate_series(1, 20) i;
                    INSERT INTO agent_memory.memory_files (scope, path, content)
                    SELECT 'mt', '/big/d' || (i % 100) || '/f' || i, 'content ' || i FROM generate_series(1, 300000) i;
                    UPDATE agent_memory.memory_scopes SET files = files + 300000 WHERE scope = 'mt'",
            ack: ack_memory_tool,
            in_transaction: &[
                "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/dir/f1\", \"command\": \"append\", \"content\": \"more;\"}')",
                "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/dir/new\", \"command\": \"append\", \"content\": \"new;\"}')",
                "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/dir/f2\", \"command\": \"update\", \"oldContent\": \"start\", \"content\": \"changed\"}')",
                "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/dir\", \"command\": \"delete\"}')",
                "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/big/d1\", \"command\": \"delete\"}')",
            ],
            bulk: &[
                (
                    50,
                    "SELECT agent_memory.memory_tool('mt', '{\"path\": \"/big\", \"command\": \"delete\"}')",
                ),
                (
                    200,
                    "SELECT count(agent_memory.memory_tool('mt', jsonb_build_object('path', '/new/f' || i, 'command', 'append', 'content', 'c' || i)))
                     FROM generate_series(1, 100000) i",
                ),
                (
                    100,
                    "SELECT count(agent_memory.memory_tool('mt', jsonb_build_object('path', '/dir/f' || (i % 20 + 1), 'command', 'append', 'content', 'x;')))
                     FROM generate_series(1, 100000) i",
                ),
            ],
        },
        Kind {
            name: "claude_memory",
            setup: "SELECT agent_memory.claude_memory('cm', jsonb_build_object('command', 'create', 'path', '/memories/notes.md',
                        'file_text', (SELECT string_agg('<' || i || '>', E'\\n') FROM generate_series(1, 5000) i)))",
            ack: ack_claude_memory,
            in_transaction: &[
                "SELECT agent_memory.claude_memory('cm', '{\"command\": \"create\", \"path\": \"/memories/new.md\", \"file_text\": \"new file\"}')",
                "SELECT agent_memory.claude_memory('cm', '{\"command\": \"str_replace\", \"path\": \"/memories/notes.md\", \"old_str\": \"<100>\", \"new_str\": \"[one hundred]\"}')",
                "SELECT agent_memory.claude_memory('cm', '{\"command\": \"insert\", \"path\": \"/memories/notes.md\", \"insert_line\": 0, \"insert_text\": \"top\"}')",
                "SELECT agent_memory.claude_memory('cm', '{\"command\": \"rename\", \"old_path\": \"/memories/ack-0.md\", \"new_path\": \"/memories/renamed.md\"}')",
                "SELECT agent_memory.claude_memory('cm', '{\"command\": \"delete\", \"path\": \"/memories/new.md\"}')",
            ],
            bulk: &[
                (
                    250,
                    "SELECT count(agent_memory.claude_memory('cm', jsonb_build_object('command', 'create',
                            'path', '/memories/bulk/' || i || '.md', 'file_text', 'file ' || i)))
                     FROM generate_series(1, 100000) i",
                ),
                (
                    150,
                    "SELECT count(agent_memory.claude_memory('cm', jsonb_build_object('command', 'str_replace',
                            'path', '/memories/notes.md', 'old_str', '<' || i || '>', 'new_str', '[' || i || ']')))
                     FROM generate_series(1000, 5000) i",
                ),
            ],
        },
        Kind {
            name: "end_session",
            setup: "SELECT agent_memory.create_session('crash', session_id => 'end-' || i) FROM generate_series(1, 2000) i;
                    SELECT agent_memory.kv_set('end-' || i, 'k', '\"v\"') FROM generate_series(1, 2000) i;
                    SELECT agent_memory.append_message('end-' || i, 'user', 'hello') FROM generate_series(1, 2000) i;
                    SELECT agent_memory.wm_set('end-' || i, 'working_history', '\"h\"') FROM generate_series(1, 2000) i;
                    SELECT agent_memory.create_session('crash', session_id => 'end-big');
                    SELECT agent_memory.append_message('end-big', 'user', 'message ' || i, keep => 10000) FROM generate_series(1, 10000) i;
                    SELECT agent_memory.kv_set('end-big', 'k' || i, to_jsonb(i)) FROM generate_series(1, 500) i;
                    SELECT agent_memory.create_session('crash', session_id => 'end-ack-' || i) FROM generate_series(0, 9) i;
                    SELECT agent_memory.kv_set('end-ack-' || i, 'k', '\"v\"') FROM generate_series(0, 9) i;
                    SELECT agent_memory.append_message('end-ack-' || i, 'user', 'hello') FROM generate_series(0, 9) i;
                    -- 20,000 more with the same rows, by plain INSERTs (quicker), so that
                    -- ending them all takes a while.
                    INSERT INTO agent_memory.sessions (session_id, user_id, kv_words, kv_next_expiry, last_message_seq)
                    SELECT 'end-x' || i, 'crash', 1, now() + interval '1 day', 1 FROM generate_series(1, 20000) i;
                    INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
                    SELECT 'end-x' || i, 'k', '\"v\"', 1, now() + interval '2 days' FROM generate_series(1, 20000) i;
                    INSERT INTO agent_memory.message_threads (session_id, thread_key, keep, appended, appends, last_seq)
                    SELECT 'end-x' || i, '', 200, 1, 1, 1 FROM generate_series(1, 20000) i;
                    INSERT INTO agent_memory.thread_messages (session_id, thread_key, slot, seq, role, content)
                    SELECT 'end-x' || i, '', 0, 1, 'user', 'hello'
                    FROM generate_series(1, 20000) i;
                    INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value)
                    SELECT 'end-x' || i, '', 'working_history', '\"h\"' FROM generate_series(1, 20000) i",
            ack: ack_end_session,
            in_transaction: &[
                "SELECT agent_memory.end_session('end-big')",
                "SELECT agent_memory.end_session('end-1')",
            ],
            bulk: &[
                (
                    200,
                    "SELECT count(agent_memory.end_session(s.session_id)) FROM agent_memory.sessions s
                     WHERE s.session_id LIKE 'end-%' AND s.session_id NOT LIKE 'end-ack-%'",
                ),
            ],
        },
        Kind {
            name: "cleanup_expired",
            setup: "SELECT agent_memory.create_session('crash', session_id => 'exp-live');
                    SELECT agent_memory.kv_set('exp-live', 'k' || i, to_jsonb(i)) FROM generate_series(1, 100) i",
            ack: ack_cleanup,
            in_transaction: &["SELECT agent_memory.cleanup_expired()"],
            bulk: &[(300, "SELECT agent_memory.cleanup_expired(batch_size => 10)")],
        },
    ]
}

/// How one crash of test 1 goes: the writes complete in an open
/// transaction, or one statement is killed while it runs.
enum Victim<'a> {
    Completed(&'a [&'a str]),
    Running(&'a str, Duration),
}

/// Kill a backend doing `victim`'s writes in `DB`; returns how long the
/// server took to recover.
fn crash_during(victim: Victim<'_>, committed: &Digests) -> Duration {
    let mut client = connect(DB);
    client.batch_execute("SET statement_timeout = '120s'; BEGIN").unwrap();
    let pid = backend_pid(&mut client);
    let mut monitor = connect("postgres");
    match victim {
        Victim::Completed(statements) => {
            for sql in statements {
                client.batch_execute(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            // The open transaction did change something.
            let uncommitted = digests_in_transaction(&mut client);
            assert!(
                !digest_differences(committed, &uncommitted).is_empty(),
                "the writes changed nothing: {statements:?}"
            );
            kill9(pid);
            drop(client);
        }
        Victim::Running(sql, after) => {
            let statement = sql.to_string();
            let running = thread::spawn(move || client.batch_execute(&statement));
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                assert!(
                    !running.is_finished(),
                    "the statement ended before the kill: {:?}\n{sql}",
                    running.join().unwrap().err()
                );
                let active: bool = monitor
                    .query_one(
                        "SELECT coalesce(bool_or(state = 'active'
                                    AND clock_timestamp() - query_start > make_interval(secs => $2)), false)
                         FROM pg_stat_activity WHERE pid = $1",
                        &[&pid, &after.as_secs_f64()],
                    )
                    .unwrap()
                    .get(0);
                if active {
                    break;
                }
                assert!(Instant::now() < deadline, "the statement never ran for {after:?}: {sql}");
                thread::sleep(Duration::from_millis(2));
            }
            kill9(pid);
            let outcome = running.join().unwrap();
            match outcome {
                Err(e) => {
                    assert!(is_crash_error(&e), "the statement failed on its own: {e}\n{sql}")
                }
                Ok(()) => panic!("the statement completed before the kill reached it: {sql}"),
            }
        }
    }
    wait_for_crash_recovery(monitor)
}

#[test]
fn sigkill_mid_write_leaves_only_whole_writes() {
    let started = Instant::now();
    {
        let mut admin = fresh_database(DB);
        admin
            .batch_execute(&format!(
                "ALTER DATABASE {DB} SET agent_memory.max_files_per_scope = 1000000"
            ))
            .unwrap();
    }
    let mut crashes = 0;
    let mut recovery = Duration::ZERO;
    let mut acked: Vec<Check> = Vec::new();
    let mut lost: Vec<String> = Vec::new();
    for kind in kinds() {
        let mut client = connect(DB);
        client.batch_execute(kind.setup).unwrap_or_else(|e| panic!("setup of {}: {e}", kind.name));
        let mut victims = vec![Victim::Completed(kind.in_transaction)];
        for (after, sql) in kind.bulk {
            victims.push(Victim::Running(sql, Duration::from_millis(*after)));
        }
        for (n, victim) in victims.into_iter().enumerate() {
            let mut client = connect(DB);
            acked.extend((kind.ack)(&mut client, n));
            let committed = digests(&mut client);
            assert_invariants(&mut client, &format!("before crash {n} of {}", kind.name));
            drop(client);
            recovery += crash_during(victim, &committed);
            crashes += 1;
            let mut client = connect(DB);
            let after = digests(&mut client);
            let differences = digest_differences(&committed, &after);
            assert!(
                differences.is_empty(),
                "crash {n} of {}: the committed state changed:\n  {}",
                kind.name,
                differences.join("\n  ")
            );
            assert_invariants(&mut client, &format!("after crash {n} of {}", kind.name));
            assert_indexes_intact(&mut client, &format!("after crash {n} of {}", kind.name));
            for check in &acked {
                if !holds(&mut client, check) {
                    lost.push(format!("{} (after crash {n} of {})", check.what, kind.name));
                }
            }
            assert!(lost.is_empty(), "acknowledged writes lost:\n  {}", lost.join("\n  "));
        }
    }
    // Every kind of write works after the crashes, and new messages are
    // numbered after every one their session stored.
    let mut client = connect(DB);
    let newest_seq: std::collections::HashMap<String, i64> = client
        .query(
            "SELECT session_id, max(seq) FROM agent_memory.thread_messages GROUP BY session_id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    for kind in kinds() {
        acked.extend((kind.ack)(&mut client, 9));
    }
    let appended_after = client
        .query(
            "SELECT session_id, min(seq) FROM agent_memory.thread_messages
             WHERE content LIKE 'ack % 9' GROUP BY session_id",
            &[],
        )
        .unwrap();
    assert!(!appended_after.is_empty(), "no message appended after the crashes");
    for row in appended_after {
        let (session, next_seq): (String, i64) = (row.get(0), row.get(1));
        let newest = newest_seq.get(&session).copied().unwrap_or(0);
        assert!(
            next_seq > newest,
            "{session}: a message appended after the crashes got seq {next_seq}, not after {newest}"
        );
    }
    assert_invariants(&mut client, "after the writes that followed the crashes");
    for check in &acked {
        if !holds(&mut client, check) {
            lost.push(format!("{} (after the crashes)", check.what));
        }
    }
    drop(client);
    notifications_still_arrive(DB);
    worker_carries_on();
    drop_database(DB);
    println!(
        "crash: sigkill_mid_write_leaves_only_whole_writes: {crashes} crashes survived, {} acknowledged calls checked, {} rows lost",
        acked.len(),
        lost.len()
    );
    println!(
        "  ({:.1} s, {:.1} s of it waiting for crash recovery)",
        started.elapsed().as_secs_f64(),
        recovery.as_secs_f64()
    );
    assert_eq!(lost.len(), 0);
}

// ---------------------------------------------------------------------------
// 2. pg_ctl stop -m immediate under a mixed load.

const LOAD_DB: &str = "am_it_crash_load";
const LOAD_THREADS: usize = 6;

/// A call that returned successfully (autocommit: it was committed).
#[derive(Debug)]
enum Acked {
    Session(String),
    Kv { session: String, key: String, value: i64 },
    Message { session: String, content: String },
    WorkingMemory { session: String, i: i64 },
    Graph { owner: String, version: i32, body: String },
    File { scope: &'static str, path: String, content: String },
}

/// An append whose answer the crash cut off: it may or may not have been
/// committed. A client retries it with the same idempotency key.
#[derive(Debug)]
struct Unanswered {
    session: String,
    role: &'static str,
    content: String,
    metadata: String,
}

const APPEND: &str =
    "SELECT agent_memory.append_message($1, $2, $3, 'n', $4::text::jsonb, keep => 10000)";

/// What one thread of the load ends with: the calls that returned, the
/// error that stopped it, and the append in flight when it came.
struct LoadOutcome {
    acked: Vec<Acked>,
    error: Option<(Instant, postgres::Error)>,
    unanswered: Option<Unanswered>,
}

/// One thread of the load: a mix of calls until the connection breaks or
/// `deadline`.
fn load(t: usize, deadline: Instant) -> LoadOutcome {
    let mut client = connect(LOAD_DB);
    let mut acked = Vec::new();
    let mut counts = [0i64; 6];
    let mut in_flight: Option<Unanswered> = None;
    while Instant::now() < deadline {
        let kind = (counts.iter().sum::<i64>() % 6) as usize;
        let i = counts[kind];
        counts[kind] += 1;
        let result: Result<Acked, postgres::Error> = match kind {
            0 => {
                // 1 word each: a new session every 500 keys stays within the budget.
                let session = format!("kv-{t}-{}", i / 500);
                let created = if i % 500 == 0 {
                    client
                        .execute(
                            "SELECT agent_memory.create_session('load', session_id => $1)",
                            &[&session],
                        )
                        .map(|_| acked.push(Acked::Session(session.clone())))
                } else {
                    Ok(())
                };
                let key = format!("k-{t}-{i}");
                created.and_then(|()| {
                    client
                        .execute(
                            "SELECT agent_memory.kv_set($1, $2, to_jsonb($3::int8))",
                            &[&session, &key, &i],
                        )
                        .map(|_| Acked::Kv { session, key, value: i })
                })
            }
            1 => {
                // A tool call, its result, a user message, and again; each
                // with an idempotency key, as a client that retries sends it.
                let session = format!("msg-{t}");
                let content = format!("m-{t}-{i}");
                let (role, metadata) = match i % 3 {
                    0 => (
                        "assistant",
                        format!(
                            r#"{{"tool_calls": ["call-{t}-{i}"], "idempotency_key": "{content}"}}"#
                        ),
                    ),
                    1 => (
                        "tool",
                        format!(
                            r#"{{"tool_call_id": "call-{t}-{}", "idempotency_key": "{content}"}}"#,
                            i - 1
                        ),
                    ),
                    _ => ("user", format!(r#"{{"idempotency_key": "{content}"}}"#)),
                };
                in_flight = Some(Unanswered {
                    session: session.clone(),
                    role,
                    content: content.clone(),
                    metadata: metadata.clone(),
                });
                client
                    .execute(APPEND, &[&session, &role, &content, &metadata])
                    .map(|_| Acked::Message { session, content })
            }
            2 => {
                let session = format!("wm-{t}");
                client
                    .execute(
                        "SELECT agent_memory.wm_set($1, 'fetched_context', jsonb_build_object('i', $2::int8))",
                        &[&session, &i],
                    )
                    .map(|_| Acked::WorkingMemory { session, i })
            }
            3 => {
                let owner = format!("g-{t}");
                let body = format!("body {i}");
                client
                    .query_one(
                        "SELECT agent_memory.graph_write($1, 'n', NULL, NULL, $2, change_description => $3)",
                        &[&owner, &body, &format!("change {i}")],
                    )
                    .map(|row| Acked::Graph {
                        owner,
                        version: row.get(0),
                        body,
                    })
            }
            4 => {
                let path = format!("/t{t}/f{i}");
                let content = format!("c-{t}-{i}");
                client
                    .query_one(
                        "SELECT agent_memory.memory_tool('shared',
                             jsonb_build_object('path', $1::text, 'command', 'append', 'content', $2::text))::text",
                        &[&path, &content],
                    )
                    .map(|row| {
                        let answer: String = row.get(0);
                        assert!(answer.contains("\"ok\":true"), "{answer}");
                        Acked::File {
                            scope: "shared",
                            path,
                            content,
                        }
                    })
            }
            _ => {
                let content = format!("x-{t}-{i}");
                client
                    .query_one(
                        "SELECT agent_memory.claude_memory('shared',
                             jsonb_build_object('command', 'create', 'path', $1::text, 'file_text', $2::text))",
                        &[&format!("/memories/t{t}-{i}.md"), &content],
                    )
                    .map(|row| {
                        let answer: String = row.get(0);
                        assert!(answer.starts_with("File created successfully"), "{answer}");
                        Acked::File {
                            scope: "shared",
                            path: format!("/t{t}-{i}.md"),
                            content,
                        }
                    })
            }
        };
        match result {
            Ok(call) => acked.push(call),
            Err(e) => {
                return LoadOutcome {
                    acked,
                    error: Some((Instant::now(), e)),
                    unanswered: in_flight,
                };
            }
        }
        in_flight = None;
    }
    LoadOutcome { acked, error: None, unanswered: None }
}

/// Whether the effect of an acknowledged call is stored.
fn present(client: &mut Client, call: &Acked) -> bool {
    let row = match call {
        Acked::Session(session) => client.query_one(
            "SELECT EXISTS (SELECT FROM agent_memory.sessions WHERE session_id = $1)",
            &[session],
        ),
        Acked::Kv {
            session,
            key,
            value,
        } => client.query_one(
            "SELECT EXISTS (SELECT FROM agent_memory.kv_entries
                            WHERE session_id = $1 AND key = $2 AND value = to_jsonb($3::int8))",
            &[session, key, value],
        ),
        Acked::Message { session, content } => client.query_one(
            "SELECT EXISTS (SELECT FROM agent_memory.thread_messages WHERE session_id = $1 AND content = $2)",
            &[session, content],
        ),
        // Later acknowledged values replace earlier ones: the stored one is
        // this call's or a later one's.
        Acked::WorkingMemory { session, i } => client.query_one(
            "SELECT coalesce((SELECT (value ->> 'i')::int8 FROM agent_memory.wm_parts
                              WHERE session_id = $1 AND node_key = '' AND part = 'fetched_context'), -1) >= $2",
            &[session, i],
        ),
        // The node at this version had this body: it is current or a snapshot.
        Acked::Graph {
            owner,
            version,
            body,
        } => client.query_one(
            "SELECT EXISTS (SELECT FROM agent_memory.graph_nodes
                            WHERE owner = $1 AND node_id = 'n' AND version = $2 AND body = $3)
                 OR EXISTS (SELECT FROM agent_memory.graph_node_versions
                            WHERE owner = $1 AND node_id = 'n' AND version = $2 AND body = $3)",
            &[owner, version, body],
        ),
        Acked::File {
            scope,
            path,
            content,
        } => client.query_one(
            "SELECT EXISTS (SELECT FROM agent_memory.memory_files WHERE scope = $1 AND path = $2 AND content = $3)",
            &[scope, path, content],
        ),
    };
    row.expect("check an acknowledged call").get(0)
}

#[test]
fn immediate_stop_under_mixed_load_loses_no_acknowledged_call() {
    let started = Instant::now();
    let mut admin = fresh_database(LOAD_DB);
    admin
        .batch_execute(&format!(
            "ALTER DATABASE {LOAD_DB} SET agent_memory.max_files_per_scope = 1000000"
        ))
        .unwrap();
    drop(admin);
    let mut setup = connect(LOAD_DB);
    for t in 0..LOAD_THREADS {
        setup
            .batch_execute(&format!(
                "SELECT agent_memory.create_session('load', session_id => 'msg-{t}');
                 SELECT agent_memory.create_session('load', session_id => 'wm-{t}');
                 SELECT agent_memory.graph_create('g-{t}', 'Node', '', 'body', ARRAY['__root__'], node_id => 'n')"
            ))
            .unwrap();
    }
    let cluster = Cluster::of(&mut setup);
    drop(setup);
    let _restart = RestartOnDrop(&cluster);

    let deadline = Instant::now() + Duration::from_secs(30);
    let threads: Vec<_> =
        (0..LOAD_THREADS).map(|t| thread::spawn(move || load(t, deadline))).collect();
    thread::sleep(Duration::from_secs(4));
    let stop_began = Instant::now();
    cluster.stop("immediate");
    let mut acked = Vec::new();
    let mut unanswered = Vec::new();
    for (t, thread) in threads.into_iter().enumerate() {
        let outcome = thread.join().expect("a load thread panicked");
        match outcome.error {
            Some((at, e)) => assert!(
                at >= stop_began && is_crash_error(&e),
                "load thread {t} failed before the stop or not because of it: {e}"
            ),
            None => panic!("load thread {t} ran to its deadline: the stop never reached it"),
        }
        acked.extend(outcome.acked);
        unanswered.extend(outcome.unanswered);
    }
    let restart_began = Instant::now();
    cluster.start();
    let (up, took) = wait_until(Duration::from_secs(60), || try_connect(LOAD_DB).is_ok());
    assert!(up, "no connection {took:?} after the restart");
    let restart = restart_began.elapsed();

    let mut client = connect(LOAD_DB);
    let missing: Vec<&Acked> = acked.iter().filter(|call| !present(&mut client, call)).collect();
    assert_invariants(&mut client, "after the immediate stop");
    assert_indexes_intact(&mut client, "after the immediate stop");
    // The appends the crash left unanswered, retried with their idempotency
    // keys: each is stored once, whether or not it had been committed.
    for call in &unanswered {
        let seq: i64 = client
            .query_one(APPEND, &[&call.session, &call.role, &call.content, &call.metadata])
            .unwrap_or_else(|e| panic!("retry of {call:?}: {e}"))
            .get(0);
        let stored: Vec<i64> = client
            .query(
                "SELECT seq FROM agent_memory.thread_messages WHERE session_id = $1 AND content = $2",
                &[&call.session, &call.content],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(stored, vec![seq], "retry of {call:?}: stored once");
    }
    let messages: i64 = client
        .query_one("SELECT max(appends) FROM agent_memory.message_threads", &[])
        .unwrap()
        .get::<_, Option<i64>>(0)
        .unwrap_or(0);
    assert!(messages < 10000, "a thread outgrew its ring: the check of messages would not hold");
    // Writing carries on where the acknowledged calls left off: a new
    // message is numbered after the stored ones, a new version follows the
    // current one.
    for t in 0..LOAD_THREADS {
        let (newest, current): (i64, i32) = {
            let row = client
                .query_one(
                    "SELECT (SELECT max(seq) FROM agent_memory.thread_messages WHERE session_id = $1),
                            (SELECT version FROM agent_memory.graph_nodes WHERE owner = $2 AND node_id = 'n')",
                    &[&format!("msg-{t}"), &format!("g-{t}")],
                )
                .unwrap();
            (row.get::<_, Option<i64>>(0).unwrap_or(0), row.get(1))
        };
        let seq: i64 = client
            .query_one(
                "SELECT agent_memory.append_message($1, 'user', 'after the crash', 'n', keep => 10000)",
                &[&format!("msg-{t}")],
            )
            .unwrap()
            .get(0);
        assert!(seq > newest, "msg-{t}: seq {seq} after the restart, not after {newest}");
        let version: i32 = client
            .query_one(
                "SELECT agent_memory.graph_write($1, 'n', NULL, NULL, 'after the crash', change_description => 'restart')",
                &[&format!("g-{t}")],
            )
            .unwrap()
            .get(0);
        assert_eq!(version, current + 1, "g-{t}: version after the restart");
    }
    assert_invariants(&mut client, "after writes that followed the restart");
    drop(client);
    notifications_still_arrive(LOAD_DB);
    worker_carries_on();
    drop_database(LOAD_DB);
    println!(
        "crash: immediate_stop_under_mixed_load_loses_no_acknowledged_call: 1 crashes survived, {} acknowledged calls checked, {} rows lost",
        acked.len(),
        missing.len()
    );
    println!(
        "  ({:.1} s, restart with recovery {:.1} s, {} unanswered appends retried once)",
        started.elapsed().as_secs_f64(),
        restart.as_secs_f64(),
        unanswered.len()
    );
    assert!(
        missing.is_empty(),
        "acknowledged calls lost: {} of {}, first: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(10)]
    );
}

// ---------------------------------------------------------------------------
// 3. The cleanup worker killed in the middle of a batch.

/// Expired rows of test 3 still stored: expired sessions, the entries they
/// hold, and expired entries of live sessions.
fn expired_left(client: &mut Client) -> i64 {
    client
        .query_one(
            "SELECT (SELECT count(*) FROM agent_memory.sessions WHERE session_id LIKE 'crash-dead-%')
                  + (SELECT count(*) FROM agent_memory.kv_entries WHERE session_id LIKE 'crash-dead-%')
                  + (SELECT count(*) FROM agent_memory.kv_entries
                     WHERE session_id LIKE 'crash-live-%' AND expires_at <= now())",
            &[],
        )
        .unwrap()
        .get(0)
}

/// Live rows of test 3 (sessions, live entries, message threads and
/// messages): count and md5 under one snapshot.
fn live_rows(client: &mut Client) -> (i64, String) {
    let row = client
        .query_one(
            "SELECT count(*), md5(string_agg(r, '' ORDER BY r)) FROM (
               SELECT s::text AS r FROM agent_memory.sessions s WHERE session_id LIKE 'crash-live-%'
               UNION ALL SELECT k::text FROM agent_memory.kv_entries k
                         WHERE session_id LIKE 'crash-live-%' AND expires_at > now()
               UNION ALL SELECT t::text FROM agent_memory.message_threads t WHERE session_id LIKE 'crash-live-%'
               UNION ALL SELECT m::text FROM agent_memory.thread_messages m WHERE session_id LIKE 'crash-live-%'
               UNION ALL SELECT w::text FROM agent_memory.wm_parts w WHERE session_id LIKE 'crash-live-%') rows",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn worker_killed_mid_batch_comes_back_and_loses_nothing() {
    const LIVE_SESSIONS: i32 = 200;
    const KILLS: usize = 2;
    let started = Instant::now();
    let mut client = worker_database();
    client
        .batch_execute("DELETE FROM agent_memory.sessions WHERE session_id LIKE 'crash-%'")
        .unwrap();
    let first_run = next_cleanup_run(&mut client);
    // Small batches: a run takes thousands of them.
    let settings = SystemSettings::set(&[("agent_memory.cleanup_batch_size", "200")]);
    // Live sessions written through the functions, with entries, messages
    // and working memory that must all stay.
    client
        .batch_execute(&format!(
            "SELECT agent_memory.create_session('crash', session_id => 'crash-live-' || s) FROM generate_series(1, {LIVE_SESSIONS}) s;
             SELECT agent_memory.kv_set('crash-live-' || s, 'k' || i, to_jsonb(i))
             FROM generate_series(1, {LIVE_SESSIONS}) s, generate_series(1, 50) i;
             SELECT agent_memory.append_message('crash-live-' || s, 'user', 'hello ' || i)
             FROM generate_series(1, {LIVE_SESSIONS}) s, generate_series(1, 3) i;
             SELECT agent_memory.wm_set('crash-live-' || s, 'working_history', to_jsonb('history ' || s))
             FROM generate_series(1, {LIVE_SESSIONS}) s"
        ))
        .unwrap();
    // 300,000 expired rows in one transaction (plain INSERTs: quick):
    // 200,000 expired entries of live sessions (0 words: the sessions' word
    // counters stay exact), and 500 expired sessions holding 100,000 entries.
    client
        .batch_execute(&format!(
            "BEGIN;
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'crash-live-' || (i % {LIVE_SESSIONS} + 1), 'old-' || i, 'null', 0,
                    now() - interval '1 hour' + i * interval '1 millisecond'
             FROM generate_series(1, 200000) i;
             UPDATE agent_memory.sessions SET kv_next_expiry = now() - interval '1 hour'
             WHERE session_id LIKE 'crash-live-%';
             INSERT INTO agent_memory.sessions (session_id, user_id, last_activity_at, kv_next_expiry)
             SELECT 'crash-dead-' || i, 'crash', now() - interval '1 day', now() + interval '1 day'
             FROM generate_series(1, 500) i;
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'crash-dead-' || (i % 500 + 1), 'k' || i, 'null', 0, now() + interval '1 day'
             FROM generate_series(1, 100000) i;
             COMMIT"
        ))
        .unwrap();
    let live_before = live_rows(&mut client);
    let expired_at_start = expired_left(&mut client);
    let mut kills = 0;
    let mut recovery = Duration::ZERO;
    let mut comeback = Duration::ZERO;
    let mut last_left = expired_at_start;
    while kills < KILLS {
        // Kill the worker in a batch that deletes (it holds a transaction
        // id), once at least one batch has committed since the last kill.
        let mut monitor = connect("postgres");
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut progressed = false;
        let pid = loop {
            // Counting is slow: once a batch has committed, only watch.
            progressed = progressed || expired_left(&mut monitor) < last_left;
            let in_batch: Option<i32> = monitor
                .query_opt(
                    "SELECT pid FROM pg_stat_activity
                     WHERE backend_type = 'agent_memory cleanup' AND backend_xid IS NOT NULL",
                    &[],
                )
                .unwrap()
                .map(|r| r.get(0));
            if let (true, Some(pid)) = (progressed, in_batch) {
                break pid;
            }
            assert!(
                Instant::now() < deadline,
                "the worker was never seen in a batch (expired rows left: {})",
                expired_left(&mut monitor)
            );
            thread::sleep(Duration::from_millis(if progressed { 1 } else { 20 }));
        };
        kill9(pid);
        let killed_at = Instant::now();
        kills += 1;
        recovery += wait_for_crash_recovery(monitor);
        let mut client = connect("postgres");
        last_left = expired_left(&mut client);
        assert_eq!(
            live_rows(&mut client),
            live_before,
            "live rows changed by the kill of the worker"
        );
        assert_invariants(&mut client, "after the kill of the worker");
        let (back, took) = wait_until(Duration::from_secs(60), || {
            worker_pid(&mut client).is_some_and(|new| new != pid)
        });
        assert!(back, "no cleanup worker {took:?} after the crash");
        comeback += killed_at.elapsed();
        if last_left == 0 {
            // Killed while it recorded a finished run: nothing left to cut.
            break;
        }
    }
    // The worker carries on and removes every expired row.
    let mut client = connect("postgres");
    let (done, took) = wait_until(Duration::from_secs(120), || expired_left(&mut client) == 0);
    assert!(
        done,
        "expired rows still there {took:?} after the last restart: {}",
        expired_left(&mut client)
    );
    let live_after = live_rows(&mut client);
    let lost = live_before.0 - live_after.0;
    assert_invariants(&mut client, "after the worker's runs");
    let failed: i64 = client
        .query_one(
            "SELECT count(*) FROM agent_memory.cleanup_runs
             WHERE run_id >= $1 AND triggered_by = 'worker' AND error IS NOT NULL",
            &[&first_run],
        )
        .unwrap()
        .get(0);
    let completed: i64 = client
        .query_one(
            "SELECT count(*) FROM agent_memory.cleanup_runs
             WHERE run_id >= $1 AND triggered_by = 'worker' AND error IS NULL",
            &[&first_run],
        )
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            "DELETE FROM agent_memory.sessions WHERE session_id LIKE 'crash-%';
             DELETE FROM agent_memory.cleanup_runs WHERE run_id >= {first_run}"
        ))
        .unwrap();
    drop(settings);
    println!(
        "crash: worker_killed_mid_batch_comes_back_and_loses_nothing: {kills} crashes survived, {} acknowledged calls checked, {lost} rows lost",
        live_before.0
    );
    println!(
        "  ({:.1} s; {expired_at_start} expired rows; recovery {:.1} s and worker back {:.1} s after the kills in all; {completed} worker runs recorded)",
        started.elapsed().as_secs_f64(),
        recovery.as_secs_f64(),
        comeback.as_secs_f64()
    );
    assert_eq!(live_after, live_before, "live rows lost or changed: {lost} fewer");
    assert_eq!(failed, 0, "a worker run failed");
    assert!(completed >= 1, "no worker run recorded after the restarts");
}

/// Whether process `pid` still runs (a zombie waiting to be reaped does not).
fn process_runs(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state != 'Z' && state != 'X'),
        Err(_) => false,
    }
}

/// kill -9 of the postmaster while the worker and a backend both remove
/// many expired entries, on statistics that expect none (ANALYZE ran before
/// they expired). Each leaves between two batches; a process left running
/// would keep the shared memory attached and stop the server from starting
/// again.
#[test]
fn postmaster_killed_mid_cleanup_leaves_no_process_behind() {
    let mut client = worker_database();
    let cluster = Cluster::of(&mut client);
    // Small batches, for the worker here and the backend below, so both
    // are still at work when the postmaster dies: in batches of 1,000 a run
    // removes 300,000 entries in about half a second. Reset after the
    // restart (declared before it, dropped after it).
    let _settings = SystemSettings::set(&[("agent_memory.cleanup_batch_size", "10")]);
    let _restart = RestartOnDrop(&cluster);
    // 300,000 expired entries for the worker, in its database, and as many
    // for the backend in a database of its own, where no worker runs: the
    // worker cannot remove the backend's first and leave it nothing to do.
    const EXPIRED_ENTRIES: &str =
        "ALTER TABLE agent_memory.kv_entries SET (autovacuum_enabled = false);
             SELECT count(agent_memory.create_session('crash', session_id => 'crash-pm' || s))
             FROM generate_series(0, 99) s;
             INSERT INTO agent_memory.kv_entries (session_id, key, value, words, expires_at)
             SELECT 'crash-pm' || (i % 100), 'k' || i, 'null', 0,
                    now() + interval '1 day' + i * interval '1 millisecond'
             FROM generate_series(1, 300000) i;
             ANALYZE agent_memory.kv_entries;
             UPDATE agent_memory.kv_entries
             SET expires_at = now() - interval '1 hour'
                              + substr(session_id, 9)::int * interval '1 second'
                              + substr(key, 2)::int * interval '1 microsecond'
             WHERE session_id LIKE 'crash-pm%'";
    client.batch_execute(EXPIRED_ENTRIES).unwrap();
    let backend_db = "am_crash_pm";
    fresh_database(backend_db).batch_execute(EXPIRED_ENTRIES).unwrap();
    let mut monitor = connect("postgres");
    let (in_batch, took) = wait_until(Duration::from_secs(30), || {
        monitor
            .query_opt(
                "SELECT 1 FROM pg_stat_activity
                 WHERE backend_type = 'agent_memory cleanup' AND backend_xid IS NOT NULL",
                &[],
            )
            .unwrap()
            .is_some()
    });
    assert!(in_batch, "the worker was not seen in a batch after {took:?}");
    // The backend starts once the worker is in a batch.
    let mut backend = connect(backend_db);
    let backend_pid = backend_pid(&mut backend);
    let manual = thread::spawn(move || {
        // Ends with an error when the server goes away.
        backend
            .query_one("SELECT agent_memory.cleanup_expired(batch_size => 1)::text", &[])
            .map(|row| row.get::<_, String>(0))
            .map_err(|e| e.to_string())
    });
    let (started, took) = wait_until(Duration::from_secs(10), || {
        monitor
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND state = 'active'",
                &[&backend_pid],
            )
            .unwrap()
            .is_some()
    });
    if !started {
        let state: Option<String> = monitor
            .query_opt(
                "SELECT state || ' ' || coalesce(wait_event, '') || ': ' || query
                 FROM pg_stat_activity WHERE pid = $1",
                &[&backend_pid],
            )
            .unwrap()
            .map(|row| row.get(0));
        let finished = manual.is_finished();
        let result =
            if finished { format!("{:?}", manual.join()) } else { "still running".to_string() };
        panic!("the cleanup backend not running after {took:?}: {result}, now {state:?}");
    }
    let worker = worker_pid(&mut monitor).expect("the worker runs");
    let launcher = launcher_pid(&mut monitor).expect("the launcher runs");
    let postmaster: i32 = std::fs::read_to_string(cluster.data.join("postmaster.pid"))
        .expect("read postmaster.pid")
        .lines()
        .next()
        .and_then(|line| line.trim().parse().ok())
        .expect("a pid on the first line of postmaster.pid");
    kill9(postmaster);
    let (gone, took) = wait_until(Duration::from_secs(60), || {
        !process_runs(worker) && !process_runs(launcher) && !process_runs(backend_pid)
    });
    println!(
        "crash: worker, launcher and cleanup backend exit after postmaster death took {} ms",
        took.as_millis()
    );
    assert!(
        gone && took <= Duration::from_secs(2),
        "after the postmaster's death, worker running: {}, launcher running: {}, backend running: {} ({took:?})",
        process_runs(worker),
        process_runs(launcher),
        process_runs(backend_pid)
    );
    let _ = manual.join().unwrap();
    // A new postmaster refuses to start while the old one's pid exists.
    let (reaped, took) = wait_until(Duration::from_secs(10), || {
        !std::path::Path::new(&format!("/proc/{postmaster}")).exists()
    });
    assert!(reaped, "the killed postmaster not reaped after {took:?}");
    cluster.start();
    let mut client = connect("postgres");
    client
        .batch_execute(
            "ALTER TABLE agent_memory.kv_entries RESET (autovacuum_enabled);
             DELETE FROM agent_memory.sessions WHERE session_id LIKE 'crash-pm%'",
        )
        .unwrap();
    drop(client);
    drop_database(backend_db);
}

/// The pid of the cleanup launcher, if any.
fn launcher_pid(client: &mut Client) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup launcher'",
            &[],
        )
        .expect("query pg_stat_activity")
        .map(|row| row.get(0))
}

/// Points `agent_memory.database` at another database, with a restart,
/// for the life of the value; then resets it, restarts again and drops
/// that database.
struct WorkerDatabaseMoved<'a> {
    cluster: &'a Cluster,
    database: &'a str,
}

impl<'a> WorkerDatabaseMoved<'a> {
    fn to(cluster: &'a Cluster, database: &'a str) -> Self {
        // Made first, so that a failed restart is undone too.
        let moved = WorkerDatabaseMoved { cluster, database };
        connect("postgres")
            .batch_execute(&format!("ALTER SYSTEM SET agent_memory.database = '{database}'"))
            .unwrap();
        cluster.stop("fast");
        cluster.start();
        moved
    }
}

impl Drop for WorkerDatabaseMoved<'_> {
    fn drop(&mut self) {
        if !self.cluster.running() {
            self.cluster.start();
        }
        // A panic here, while a failed test unwinds, would abort the whole
        // run: a failure to reset is reported, and the next test's restart
        // shows it.
        let reset = try_connect("postgres").and_then(|mut client| {
            client.batch_execute("ALTER SYSTEM RESET agent_memory.database")
        });
        if let Err(error) = reset {
            eprintln!("could not reset agent_memory.database: {error}");
        }
        self.cluster.stop("fast");
        self.cluster.start();
        drop_database(self.database);
    }
}

/// Wait until a backend of pg_stat_activity meets `condition`, in which
/// `$1` is `value`; panics after 10 s, saying that no `what`.
fn wait_for_backend(client: &mut Client, condition: &str, value: &str, what: &str) {
    let sql = format!("SELECT 1 FROM pg_stat_activity WHERE {condition}");
    let (seen, took) = wait_until(Duration::from_secs(10), || {
        client.query_opt(&sql, &[&value]).unwrap().is_some()
    });
    assert!(seen, "no {what} within {took:?}");
}

/// Wait until the launcher shows `text` in pg_stat_activity.
fn wait_for_launcher_text(client: &mut Client, text: &str) {
    let condition = "backend_type = 'agent_memory cleanup launcher' AND query = $1";
    wait_for_backend(client, condition, text, &format!("launcher showing \"{text}\""));
}

/// The FATAL lines logged since `logged_from`, except those of a stop,
/// which ends every backend "due to administrator command".
fn fatal_lines(cluster: &Cluster, logged_from: usize) -> Vec<String> {
    cluster
        .logged_since(logged_from)
        .lines()
        .filter(|line| line.contains("FATAL") && !line.contains("due to administrator command"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_launcher_waits_for_its_database_then_starts_one_worker() {
    let mut client = worker_database();
    let cluster = Cluster::of(&mut client);
    drop(client);
    let database = "am_worker_later";
    drop_database(database);
    let _restart = RestartOnDrop(&cluster);
    let logged_from = cluster.log_length();
    let _moved = WorkerDatabaseMoved::to(&cluster, database);
    let mut client = connect("postgres");
    let waiting = |what: &str| {
        format!(
            "agent_memory cleanup launcher: waiting for database \"{database}\" (agent_memory.database) to {what}"
        )
    };
    wait_for_launcher_text(&mut client, &waiting("exist"));
    let launcher = launcher_pid(&mut client).expect("the launcher runs");
    // Two restart delays: a worker that fails to connect would have been
    // started, and logged a FATAL, at least twice.
    thread::sleep(Duration::from_secs(11));
    assert_eq!(worker_pid(&mut client), None, "a worker runs without its database");
    assert_eq!(launcher_pid(&mut client), Some(launcher), "the launcher was restarted");
    let logged = cluster.logged_since(logged_from);
    let warned = logged.lines().filter(|line| line.contains(&waiting("exist"))).count();
    assert_eq!(warned, 1, "the launcher's warning logged {warned} times:\n{logged}");

    // A database that takes no connections is waited for the same way.
    client.batch_execute(&format!("CREATE DATABASE {database} ALLOW_CONNECTIONS false")).unwrap();
    wait_for_launcher_text(&mut client, &waiting("accept connections"));
    thread::sleep(Duration::from_secs(6));
    assert_eq!(worker_pid(&mut client), None, "a worker runs without connections");

    // Once it takes connections, the worker starts there within a delay.
    client.batch_execute(&format!("ALTER DATABASE {database} ALLOW_CONNECTIONS true")).unwrap();
    wait_for_backend(
        &mut client,
        "backend_type = 'agent_memory cleanup' AND datname = $1",
        database,
        &format!("worker in {database} after it took connections"),
    );
    let fatal = fatal_lines(&cluster, logged_from);
    assert!(fatal.is_empty(), "the server logged: {fatal:?}");
    let worker = worker_pid(&mut client).expect("the worker runs");

    // A launcher that exits stops its worker, so the next one never runs
    // a second worker beside it.
    client.execute("SELECT pg_terminate_backend($1)", &[&launcher]).unwrap();
    let (stopped, took) = wait_until(Duration::from_secs(3), || !process_runs(worker));
    assert!(stopped, "the worker still runs {took:?} after its launcher exited");
    let (back, took) = wait_until(Duration::from_secs(20), || {
        worker_pid(&mut client).is_some()
            && launcher_pid(&mut client).is_some_and(|pid| pid != launcher)
    });
    assert!(back, "no new launcher and worker {took:?} after the launcher exited");
}
