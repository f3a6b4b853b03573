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

use agent_memory_integration::calls::{FIXTURE, every_function};
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
            "SET agent_memory.tenant_isolation = on; SET statement_timeout = '30s'; SET ROLE {role}"
        ))
        .expect("become the tenant");
    client
}

#[test]
fn no_function_lets_one_tenant_read_or_change_another_tenants_memory() {
    let mut admin = fresh_database(DB);
    admin
        .batch_execute(&format!(
            "DROP ROLE IF EXISTS {OWNER}; DROP ROLE IF EXISTS {OTHER};
             CREATE ROLE {OWNER}; CREATE ROLE {OTHER};
             GRANT agent_memory_writer TO {OWNER}, {OTHER};"
        ))
        .expect("create the two roles");

    as_tenant(OWNER)
        .batch_execute(FIXTURE)
        .expect("the owner stores its memory");
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
    let goal: Option<String> = owner
        .query_one("SELECT agent_memory.kv_get('live', 'goal')::text", &[])
        .unwrap()
        .get(0);

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
