//! Tenant isolation through every function: with
//! `agent_memory.tenant_isolation` on, one role stores memory of every kind
//! (the shared fixture), then another role runs every valid call of every
//! function of the schema (found in `pg_proc`; the calls are those of the
//! hostile-input test, which name the first role's sessions, nodes and
//! scopes). After each call the first role's rows must be exactly what they
//! were, and no answer may contain anything the first role stored.
//!
//! Prints `tenants: N calls of F functions as another tenant (outcomes), 0
//! answers with the other tenant's memory, 0 calls changed its rows`.

use std::collections::BTreeMap;

use agent_memory_integration::calls::{EMBEDDINGS, FIXTURE, HISTORY, every_function};
use agent_memory_integration::{connect, drop_database, fresh_database, table_digests};
use postgres::Client;
use postgres::types::ToSql;

const DB: &str = "am_it_tenants";
const OWNER: &str = "it_tenant_owner";
const OTHER: &str = "it_tenant_other";

/// Text that only the fixture stores (none of it is in any call's
/// arguments): an answer holding one of these read the owner's memory.
const MARKERS: &[&str] = &[
    "Lisbon",
    "likes tea",
    "meeting on friday",
    "Started in May",
    "What I work on",
    "calling a tool",
    "about atlas",
    "\"channel\"",
    "hostile-user",
];

/// Row count and digest of each table's rows of `tenant`.
fn rows_of(admin: &mut Client, tenant: &str) -> BTreeMap<String, (i64, String)> {
    table_digests(admin, Some(tenant))
}

fn as_tenant(role: &str) -> Client {
    let mut client = connect(DB);
    client
        .batch_execute(&format!(
            "SET agent_memory.tenant_isolation = on; SET statement_timeout = '30s'; {HISTORY} SET ROLE {role}"
        ))
        .expect("become the tenant");
    client
}

/// A fresh database and the two tenants' roles.
fn database_with_two_tenants() -> Client {
    let mut admin = fresh_database(DB);
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {OWNER}; DROP ROLE IF EXISTS {OTHER};
             CREATE ROLE {OWNER}; CREATE ROLE {OTHER};
             GRANT agent_memory_writer TO {OWNER}, {OTHER};
             {EMBEDDINGS}"
        ))
        .expect("create the two roles");
    admin
}

#[test]
fn no_function_lets_one_tenant_read_or_change_another_tenants_memory() {
    let mut admin = database_with_two_tenants();

    as_tenant(OWNER).batch_execute(FIXTURE).expect("the owner stores its memory");
    let before = rows_of(&mut admin, OWNER);
    let stored: i64 = before.values().map(|(n, _)| n).sum();
    assert!(
        before.values().filter(|(n, _)| *n > 0).count() >= 7,
        "the fixture should fill most tables: {before:?}"
    );

    let functions = every_function(&mut admin);

    let mut other = as_tenant(OTHER);
    let (mut calls, mut tried) = (0, 0);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let mut leaks = Vec::new();
    let mut changes = Vec::new();
    for (function, base) in &functions {
        let key = &function.key;
        tried += 1;
        for args in base.calls {
            let sql = function.call_sql(args.len());
            let params: Vec<&(dyn ToSql + Sync)> =
                args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
            calls += 1;
            let outcome = match other.query_one(sql.as_str(), &params) {
                Ok(row) => {
                    let answer: String = row.get(0);
                    if let Some(marker) = MARKERS.iter().find(|m| answer.contains(*m)) {
                        leaks.push(format!("{key} {args:?} answered with {marker:?}: {answer}"));
                    }
                    "ok".to_string()
                }
                Err(e) => match e.as_db_error() {
                    Some(db) => db.code().code().to_string(),
                    None => panic!("{key} {args:?}: lost the connection: {e}"),
                },
            };
            *outcomes.entry(outcome).or_default() += 1;
            let now = rows_of(&mut admin, OWNER);
            if now != before {
                changes.push(format!("{key} {args:?} changed the owner's rows"));
                break;
            }
        }
    }

    // The owner still reads all of it.
    let mut owner = as_tenant(OWNER);
    let goal: Option<String> =
        owner.query_one("SELECT agent_memory.kv_get('live', 'goal')::text", &[]).unwrap().get(0);

    admin
        .batch_execute(&format!(
            "RESET ROLE; DROP OWNED BY {OWNER}, {OTHER}; DROP ROLE {OWNER}; DROP ROLE {OTHER};"
        ))
        .ok();
    drop(other);
    drop(owner);
    drop(admin);
    drop_database(DB);

    println!(
        "tenants: {calls} calls of {tried} functions as another tenant ({outcomes:?}), {} answers with the other tenant's memory, {} calls changed its rows ({stored} rows stored)",
        leaks.len(),
        changes.len()
    );
    assert!(leaks.is_empty(), "answers leaked:\n{}", leaks.join("\n"));
    assert!(changes.is_empty(), "rows changed:\n{}", changes.join("\n"));
    assert_eq!(goal.as_deref(), Some("\"find a flight to Lisbon\""));
}

/// What a statement did: the rows it touched, or its SQLSTATE.
fn outcome_of(client: &mut Client, sql: &str, params: &[&(dyn ToSql + Sync)]) -> String {
    match client.execute(sql, params) {
        Ok(n) => format!("{n} rows"),
        Err(e) => match e.as_db_error() {
            Some(db) => db.code().code().to_string(),
            None => panic!("{sql}: lost the connection: {e}"),
        },
    }
}

/// Direct SQL as another tenant, on every table with a tenant column: each
/// of the owner's rows copied with the owner's tenant (planting in its
/// memory), with the caller's own tenant (squatting its key), as an
/// `INSERT … ON CONFLICT DO NOTHING` probe whose answer must not depend on
/// whether the owner has the key, and updates and deletes of everything
/// visible. None may change the owner's rows.
///
/// Prints `tenants: N direct writes at another tenant's keys on T tables, R
/// refused, L landed in the caller's own memory, 0 reached its rows; P
/// probes, 0 told its keys apart`.
#[test]
fn no_direct_statement_plants_changes_or_probes_another_tenants_rows() {
    let mut admin = database_with_two_tenants();
    let mut owner = as_tenant(OWNER);
    owner.batch_execute(FIXTURE).expect("the owner stores its memory");
    let owner_tenant: String =
        owner.query_one("SELECT agent_memory.caller_tenant()", &[]).unwrap().get(0);
    drop(owner);
    let before = rows_of(&mut admin, OWNER);

    // Tables with a tenant column, and the other columns of their keys.
    let tables: Vec<(String, Vec<String>)> = admin
        .query(
            "SELECT c.relname::text,
                    coalesce(array_agg(a.attname::text) FILTER (WHERE a.attname <> 'tenant'), '{}')
             FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'agent_memory'
             JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY (i.indkey)
             WHERE c.relkind = 'r'
               AND EXISTS (SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid AND t.attname = 'tenant')
             GROUP BY c.relname ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert!(tables.len() >= 8, "tables with a tenant: {tables:?}");

    let mut other = as_tenant(OTHER);
    let other_tenant: String =
        other.query_one("SELECT agent_memory.caller_tenant()", &[]).unwrap().get(0);
    let (mut attempts, mut refused, mut probes) = (0, 0, 0);
    let mut reached = Vec::new();
    let mut told_apart = Vec::new();
    for (table, key) in &tables {
        let rows: Vec<String> = admin
            .query(
                &format!(
                    "SELECT row_to_json(t)::text FROM agent_memory.{table} t WHERE tenant = $1 LIMIT 3"
                ),
                &[&owner_tenant],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let insert = format!(
            "INSERT INTO agent_memory.{table}
             SELECT * FROM jsonb_populate_record(NULL::agent_memory.{table},
                             jsonb_set($1::text::jsonb, '{{tenant}}', to_jsonb($2::text)))"
        );
        // The same row under a key nobody has: every key column changed.
        let fresh = key.iter().fold("$1::text::jsonb".to_string(), |row, column| {
            format!(
                "(SELECT CASE jsonb_typeof(r -> '{column}')
                           WHEN 'string' THEN jsonb_set(r, '{{{column}}}', to_jsonb((r ->> '{column}') || '-fresh'))
                           WHEN 'number' THEN jsonb_set(r, '{{{column}}}', to_jsonb((r ->> '{column}')::bigint + 100000))
                           ELSE r END FROM (SELECT {row} AS r) k)"
            )
        });
        let probe = |row: &str| {
            format!(
                "INSERT INTO agent_memory.{table}
                 SELECT * FROM jsonb_populate_record(NULL::agent_memory.{table},
                                 jsonb_set({row}, '{{tenant}}', to_jsonb($2::text)))
                 ON CONFLICT DO NOTHING"
            )
        };
        let mut attempt = |other: &mut Client, what: &str, sql: &str, row: &str, tenant: &str| {
            attempts += 1;
            let outcome = outcome_of(other, sql, &[&row, &tenant]);
            if outcome.len() == 5 || outcome == "0 rows" {
                refused += 1;
            }
            if rows_of(&mut admin, OWNER) != before {
                reached.push(format!("{table}: {what} ({outcome})"));
            }
        };
        for row in &rows {
            // Probes first, each undone, so nothing the caller planted
            // answers them.
            let mut answers = Vec::new();
            for sql in [probe("$1::text::jsonb"), probe(&fresh)] {
                other.batch_execute("BEGIN").unwrap();
                answers.push(outcome_of(&mut other, &sql, &[row, &other_tenant]));
                other.batch_execute("ROLLBACK").unwrap();
                probes += 1;
            }
            if answers[0] != answers[1] {
                told_apart.push(format!("{table}: {answers:?}"));
            }
            attempt(&mut other, "plant in its tenant", &insert, row, &owner_tenant);
            attempt(&mut other, "squat its key", &insert, row, &other_tenant);
        }
        for (what, sql) in [
            (
                "move rows into its tenant",
                format!("UPDATE agent_memory.{table} SET tenant = $2 WHERE $1 <> ''"),
            ),
            (
                "update everything",
                format!(
                    "UPDATE agent_memory.{table} SET tenant = tenant WHERE $1 <> '' AND $2 <> ''"
                ),
            ),
            (
                "delete everything",
                format!("DELETE FROM agent_memory.{table} WHERE $1 <> '' AND $2 <> ''"),
            ),
        ] {
            attempt(&mut other, what, &sql, "x", &owner_tenant);
        }
    }

    let after = rows_of(&mut admin, OWNER);
    admin
        .batch_execute(&format!(
            "RESET ROLE; DROP OWNED BY {OWNER}, {OTHER}; DROP ROLE {OWNER}; DROP ROLE {OTHER};"
        ))
        .ok();
    drop(other);
    drop(admin);
    drop_database(DB);
    println!(
        "tenants: {attempts} direct writes at another tenant's keys on {} tables, {refused} refused, {} landed in the caller's own memory, {} reached its rows; {probes} probes, {} told its keys apart",
        tables.len(),
        attempts - refused - reached.len(),
        reached.len(),
        told_apart.len()
    );
    assert!(reached.is_empty(), "writes reached the owner's rows:\n{}", reached.join("\n"));
    assert!(told_apart.is_empty(), "probes told keys apart:\n{}", told_apart.join("\n"));
    assert_eq!(after, before);
}

/// Two tenants' sessions of one id have write locks of their own: one
/// tenant's open write never holds up the other's, while a second writer
/// of the same tenant still queues behind the first.
#[test]
fn a_tenants_open_write_holds_up_no_other_tenant() {
    const LOCK_DB: &str = "am_it_tenant_locks";
    let mut admin = fresh_database(LOCK_DB);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS it_lock_a; DROP ROLE IF EXISTS it_lock_b;
             CREATE ROLE it_lock_a; CREATE ROLE it_lock_b;
             GRANT agent_memory_writer TO it_lock_a, it_lock_b;",
        )
        .expect("create the two roles");
    let tenant = |role: &str| {
        let mut client = connect(LOCK_DB);
        client
            .batch_execute(&format!(
                "SET agent_memory.tenant_isolation = on; SET lock_timeout = '5s'; SET ROLE {role}"
            ))
            .expect("become the tenant");
        client
    };
    let mut first = tenant("it_lock_a");
    let mut other = tenant("it_lock_b");
    // Each tenant's session 'main', made before any write is open (making
    // one takes its write lock).
    for client in [&mut first, &mut other] {
        client
            .batch_execute("SELECT agent_memory.create_session('u', session_id => 'main')")
            .expect("the tenant's session");
    }
    first.batch_execute("BEGIN; SELECT agent_memory.kv_set('main', 'k', '1')").unwrap();
    other.batch_execute("SET lock_timeout = '2s'").unwrap();
    let written = other.query_one("SELECT agent_memory.kv_set('main', 'k', '2')::text", &[]);
    assert!(written.is_ok(), "another tenant's open write held this one up: {written:?}");
    let mut second = tenant("it_lock_a");
    second.batch_execute("SET lock_timeout = '200ms'").unwrap();
    let queued = second
        .query_one("SELECT agent_memory.kv_set('main', 'k', '3')::text", &[])
        .expect_err("a second writer of the same session went ahead");
    assert_eq!(queued.code(), Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE), "{queued}");
    first.batch_execute("ROLLBACK").unwrap();
    drop((first, second, other));
    admin
        .batch_execute(
            "DROP OWNED BY it_lock_a, it_lock_b; DROP ROLE it_lock_a; DROP ROLE it_lock_b;",
        )
        .ok();
    drop(admin);
    drop_database(LOCK_DB);
}
