//! Helpers for the integration tests: they talk to a running cluster started
//! by `scripts/cluster.sh` (`make test` does it), found through the usual
//! libpq variables PGHOST / PGPORT / PGUSER, as any client would.

pub mod calls;

use std::env;
use std::path::PathBuf;

use postgres::{Client, Config, NoTls};

fn setting(name: &str, default: &str) -> String {
    env::var(name).unwrap_or_else(|_| default.to_string())
}

/// A connection to `dbname` on the test cluster, over TCP like an app.
pub fn connect(dbname: &str) -> Client {
    let port: u16 = setting("PGPORT", "5432").parse().expect("PGPORT is a port number");
    Config::new()
        .host("127.0.0.1")
        .port(port)
        .user(&setting("PGUSER", "postgres"))
        .dbname(dbname)
        .application_name("agent_memory integration tests")
        .connect(NoTls)
        .unwrap_or_else(|e| {
            panic!("cannot connect to the test cluster (run `make test`, which starts it): {e}")
        })
}

/// A fresh database with the extension installed, dropped first if a previous
/// run left it behind.
pub fn fresh_database(name: &str) -> Client {
    let mut admin = connect("postgres");
    recreate_database(&mut admin, name);
    let mut client = connect(name);
    client.batch_execute("CREATE EXTENSION agent_memory").expect("create extension");
    client
}

/// Drop `name` if it exists and create it empty (two statements: neither may
/// run inside a transaction block).
pub fn recreate_database(admin: &mut Client, name: &str) {
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .expect("drop database");
    admin.batch_execute(&format!("CREATE DATABASE {name}")).expect("create database");
}

/// Drop a database made by [`fresh_database`].
pub fn drop_database(name: &str) {
    connect("postgres")
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .expect("drop test database");
}

/// A client program (pg_dump, pg_restore, psql) of the PostgreSQL under test.
pub fn pg_program(name: &str) -> PathBuf {
    let bindir =
        env::var("AGENT_MEMORY_PG_BINDIR").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".into());
    PathBuf::from(bindir).join(name)
}

/// Connection arguments for a client program.
pub fn program_args(dbname: &str) -> Vec<String> {
    vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        setting("PGPORT", "5432"),
        "-U".into(),
        setting("PGUSER", "postgres"),
        "-d".into(),
        dbname.into(),
    ]
}

/// Poll `condition` every 50 ms until it holds or `timeout` passes; returns
/// whether it held and how long it took.
pub fn wait_until(
    timeout: std::time::Duration, mut condition: impl FnMut() -> bool,
) -> (bool, std::time::Duration) {
    let start = std::time::Instant::now();
    loop {
        if condition() {
            return (true, start.elapsed());
        }
        if start.elapsed() >= timeout {
            return (false, start.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The database the cleanup worker serves (agent_memory.database, default
/// postgres), with the extension installed and no sessions left over.
pub fn worker_database() -> Client {
    let mut client = connect("postgres");
    client
        .batch_execute(
            "CREATE EXTENSION IF NOT EXISTS agent_memory; DELETE FROM agent_memory.sessions",
        )
        .expect("prepare the worker's database");
    client
}

/// Sets server settings with ALTER SYSTEM for the life of the value, then
/// resets them, even when the test fails.
pub struct SystemSettings {
    names: Vec<String>,
}

impl SystemSettings {
    pub fn set(settings: &[(&str, &str)]) -> Self {
        let mut client = connect("postgres");
        for (name, value) in settings {
            client
                .batch_execute(&format!("ALTER SYSTEM SET {name} = '{value}'"))
                .expect("alter system");
        }
        client.batch_execute("SELECT pg_reload_conf()").expect("reload");
        SystemSettings { names: settings.iter().map(|(n, _)| n.to_string()).collect() }
    }
}

impl Drop for SystemSettings {
    fn drop(&mut self) {
        let mut client = connect("postgres");
        for name in &self.names {
            client.batch_execute(&format!("ALTER SYSTEM RESET {name}")).ok();
        }
        client.batch_execute("SELECT pg_reload_conf()").ok();
    }
}

/// The pid of the running cleanup worker, if any.
pub fn worker_pid(client: &mut Client) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup'",
            &[],
        )
        .expect("query pg_stat_activity")
        .map(|row| row.get(0))
}

/// Wait until the cleanup worker shows in pg_stat_activity that it waits
/// `seconds` between runs, that is, it has loaded that interval; panics
/// after 15 s.
pub fn wait_for_worker_interval(client: &mut Client, seconds: u32) {
    let expected = format!("agent_memory cleanup: runs every {seconds} s");
    let (loaded, took) = wait_until(std::time::Duration::from_secs(15), || {
        client
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE backend_type = 'agent_memory cleanup' AND query = $1",
                &[&expected],
            )
            .expect("query pg_stat_activity")
            .is_some()
    });
    assert!(loaded, "the worker did not show \"{expected}\" within {took:?}");
}

/// A one-hour cleanup interval, loaded by the worker, for the life of the
/// value: no run starts until the setting is reset, which runs it at once.
pub fn worker_held_off(client: &mut Client) -> SystemSettings {
    let settings = SystemSettings::set(&[("agent_memory.cleanup_interval", "1h")]);
    wait_for_worker_interval(client, 3600);
    settings
}

/// The id the next cleanup run will get: runs from this one on are those
/// a test started.
pub fn next_cleanup_run(client: &mut Client) -> i64 {
    client
        .query_one("SELECT coalesce(max(run_id), 0) + 1 FROM agent_memory.cleanup_runs", &[])
        .expect("read cleanup_runs")
        .get(0)
}

/// Wait until one backend of database `db` running a query that contains
/// `query_part` is waiting on a lock; panics with `what` after 10 s.
pub fn wait_for_lock_waiter(client: &mut Client, db: &str, query_part: &str, what: &str) {
    let pattern = format!("%{query_part}%");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let waiting: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE $2",
                &[&db, &pattern],
            )
            .expect("read pg_stat_activity")
            .get(0);
        if waiting == 1 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Row count and md5 of the rows of every table of schema agent_memory, by
/// table, as the current transaction sees them; with a tenant, only the
/// tables that have a `tenant` column and only that tenant's rows.
pub fn table_digests(
    client: &mut Client, tenant: Option<&str>,
) -> std::collections::BTreeMap<String, (i64, String)> {
    let tables: Vec<String> = client
        .query(
            "SELECT c.relname::text FROM pg_catalog.pg_class c
             WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind IN ('r', 'p')
               AND ($1::text IS NULL OR EXISTS (SELECT FROM pg_catalog.pg_attribute a
                                                WHERE a.attrelid = c.oid AND a.attname = 'tenant'))
             ORDER BY 1",
            &[&tenant],
        )
        .expect("list the tables")
        .iter()
        .map(|r| r.get(0))
        .collect();
    tables
        .into_iter()
        .map(|table| {
            let sql = format!(
                "SELECT count(*), coalesce(md5(string_agg(t::text, '' ORDER BY t::text)), '')
                 FROM agent_memory.\"{table}\" t"
            );
            let row = match tenant {
                // Tables without a tenant column are listed only without one.
                None => client.query_one(&sql, &[]),
                Some(tenant) => client.query_one(&format!("{sql} WHERE t.tenant = $1"), &[&tenant]),
            }
            .expect("digest a table");
            (table, (row.get(0), row.get(1)))
        })
        .collect()
}

/// (channel, payload) of every notification that reaches `client` within
/// half a second; a payload that is not JSON is null.
pub fn received_notifications(client: &mut Client) -> Vec<(String, serde_json::Value)> {
    use postgres::fallible_iterator::FallibleIterator;
    let mut received = Vec::new();
    let mut notifications = client.notifications();
    let mut waiting = notifications.timeout_iter(std::time::Duration::from_millis(500));
    while let Some(note) = waiting.next().expect("notifications") {
        let payload = serde_json::from_str(note.payload()).unwrap_or(serde_json::Value::Null);
        received.push((note.channel().to_string(), payload));
    }
    received
}

/// The payloads of every notification that reaches `client` within half a
/// second, each of which must be on `channel`.
pub fn received_payloads(client: &mut Client, channel: &str) -> Vec<serde_json::Value> {
    received_notifications(client)
        .into_iter()
        .map(|(on, payload)| {
            assert_eq!(on, channel, "a notification on another channel");
            payload
        })
        .collect()
}
