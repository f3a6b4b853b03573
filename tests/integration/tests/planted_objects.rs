//! Objects planted on the caller's search_path change no function: two
//! databases get the same memory (the shared fixture); in one, functions
//! and operators named like those the extension uses are planted in
//! `public`, each raising when called, and the caller puts `public` before
//! `pg_catalog`. Every valid call of every function of the schema then runs
//! in both, in the same order: each must end the same way in both (success,
//! or the same SQLSTATE), and none may reach a planted object.
//!
//! Prints `planted: N calls of F functions with planted objects on the
//! search_path, 0 that behaved differently`.

use agent_memory_integration::calls::{
    Base, EMBEDDINGS, FIXTURE, HISTORY, SqlFunction, every_function,
};
use agent_memory_integration::{connect, drop_database, fresh_database};
use postgres::Client;
use postgres::types::ToSql;

const CLEAN: &str = "am_it_unplanted";
const PLANTED: &str = "am_it_planted";

/// Functions and operators of pg_catalog that the extension's SQL uses,
/// planted in public; every one raises "a planted object was called".
const PLANT: &str = r#"
CREATE FUNCTION public.planted() RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'a planted object was called'; END $$;
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.planted()';
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.planted()';
CREATE FUNCTION public.hashtext(text) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.planted()';
CREATE FUNCTION public.pg_try_advisory_xact_lock(bigint) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE FUNCTION public.pg_advisory_xact_lock(bigint) RETURNS void LANGUAGE sql AS 'SELECT WHERE public.planted()';
CREATE FUNCTION public.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE FUNCTION public.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE FUNCTION public.jsonb_agg(jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE FUNCTION public.to_jsonb(text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE FUNCTION public.length(text) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.planted()';
CREATE FUNCTION public.octet_length(text) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.planted()';
CREATE FUNCTION public.lower(text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE FUNCTION public.split_part(text, text, integer) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE FUNCTION public.left(text, integer) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE FUNCTION public.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint WHERE public.planted()';
CREATE FUNCTION public.current_setting(text, boolean) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE FUNCTION public.gen_random_uuid() RETURNS uuid LANGUAGE sql AS 'SELECT NULL::uuid WHERE public.planted()';
CREATE FUNCTION public.make_interval(mins integer) RETURNS interval LANGUAGE sql AS 'SELECT NULL::interval WHERE public.planted()';
CREATE FUNCTION public.cardinality(anyarray) RETURNS integer LANGUAGE sql AS 'SELECT 0 WHERE public.planted()';
CREATE FUNCTION public.text_eq_planted(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_eq_planted);
CREATE FUNCTION public.text_lt_planted(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.< (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_lt_planted);
CREATE OPERATOR public.>= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_lt_planted);
CREATE FUNCTION public.text_cat_planted(text, text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = text, FUNCTION = public.text_cat_planted);
CREATE FUNCTION public.jsonb_get_planted(jsonb, text) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE OPERATOR public.-> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.jsonb_get_planted);
CREATE FUNCTION public.jsonb_text_planted(jsonb, text) RETURNS text LANGUAGE sql AS 'SELECT NULL::text WHERE public.planted()';
CREATE OPERATOR public.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.jsonb_text_planted);
CREATE FUNCTION public.jsonb_cat_planted(jsonb, jsonb) RETURNS jsonb LANGUAGE sql AS 'SELECT NULL::jsonb WHERE public.planted()';
CREATE OPERATOR public.|| (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = public.jsonb_cat_planted);
CREATE FUNCTION public.ts_gt_planted(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_gt_planted);
CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.ts_gt_planted);
CREATE FUNCTION public.ts_plus_planted(timestamptz, interval) RETURNS timestamptz LANGUAGE sql AS 'SELECT NULL::timestamptz WHERE public.planted()';
CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.ts_plus_planted);
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.ts_plus_planted);
CREATE FUNCTION public.int_eq_planted(integer, integer) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.int_eq_planted);
CREATE FUNCTION public.oid_eq_planted(oid, regclass) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.oid_eq_planted);
CREATE FUNCTION public.bigint_le_planted(bigint, bigint) RETURNS boolean LANGUAGE sql AS 'SELECT public.planted()';
CREATE OPERATOR public.<= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = public.bigint_le_planted);
"#;

/// Every valid call of every function, in a fixed order: how each ended
/// (`ok` or its SQLSTATE), and the error messages and the answers that
/// speak of a planted object.
fn run_all(
    client: &mut Client, functions: &[(SqlFunction, &Base)],
) -> (Vec<(String, String)>, Vec<String>, usize) {
    let mut outcomes = Vec::new();
    let mut messages = Vec::new();
    let mut tried = 0;
    for (function, base) in functions {
        let key = &function.key;
        tried += 1;
        for (n, args) in base.calls.iter().enumerate() {
            let sql = function.call_sql(args.len());
            let params: Vec<&(dyn ToSql + Sync)> =
                args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
            let outcome = match client.query_one(sql.as_str(), &params) {
                Ok(row) => {
                    // An envelope carries a caught error as its answer.
                    let answer: String = row.get(0);
                    if answer.contains("planted") {
                        messages.push(format!("{key}: answered {answer}"));
                    }
                    "ok".to_string()
                }
                Err(e) => match e.as_db_error() {
                    Some(db) => {
                        messages.push(format!("{key}: {}", db.message()));
                        db.code().code().to_string()
                    }
                    None => panic!("{key}: lost the connection: {e}"),
                },
            };
            outcomes.push((format!("{key} call {}", n + 1), outcome));
        }
    }
    (outcomes, messages, tried)
}

#[test]
fn objects_planted_on_the_search_path_change_no_function() {
    compare_with_planted_objects("");
}

/// With tenant isolation on, the writes also name the tenant's change
/// channel, which the extension reads as the tables' owner: a planted
/// operator reached there would run as that role.
#[test]
fn objects_planted_on_the_search_path_change_no_function_of_a_tenant() {
    compare_with_planted_objects("SET agent_memory.tenant_isolation = on;");
}

/// Run every valid call in a clean database and in one with objects
/// planted on the caller's path, both set up by `setting` first.
fn compare_with_planted_objects(setting: &str) {
    let mut clean = fresh_database(CLEAN);
    clean.batch_execute(&format!("{setting}{EMBEDDINGS}{FIXTURE}")).expect("fixture");
    let mut functions = every_function(&mut clean);
    // The functions that keep the caller's search_path go first: what a
    // backend caches from its first call (a plan, a tenant's channel) is
    // then made under the planted path.
    let unpinned: Vec<String> = clean
        .query(
            "SELECT p.proname || '(' || pg_catalog.oidvectortypes(p.proargtypes) || ')'
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'agent_memory'::regnamespace AND p.proconfig IS NULL",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    functions.sort_by_key(|(function, _)| !unpinned.contains(&function.key));
    let mut planted = fresh_database(PLANTED);
    planted.batch_execute(&format!("{setting}{EMBEDDINGS}{FIXTURE}")).expect("fixture");
    planted.batch_execute(PLANT).expect("plant the objects");
    // The calls run in new backends: nothing the fixture's calls left in
    // a backend (a plan, a tenant's channel) is taken over.
    drop(clean);
    drop(planted);
    let mut clean = connect(CLEAN);
    clean.batch_execute(&format!("{setting}{HISTORY}")).unwrap();
    let mut planted = connect(PLANTED);
    planted.batch_execute(&format!("{setting}{HISTORY}")).unwrap();
    // The planted objects work: the caller's own SQL finds them first.
    planted.batch_execute("SET search_path = public, pg_catalog").unwrap();
    let caught = planted.batch_execute("SELECT 'a'::text = 'a'::text");
    assert!(
        caught
            .as_ref()
            .err()
            .and_then(|e| e.as_db_error())
            .is_some_and(|e| e.message() == "a planted object was called"),
        "the planted = should be called by unqualified SQL: {caught:?}"
    );

    let (expected, _, tried) = run_all(&mut clean, &functions);
    let (got, messages, _) = run_all(&mut planted, &functions);
    drop(clean);
    drop(planted);
    drop_database(CLEAN);
    drop_database(PLANTED);

    let differing: Vec<String> = expected
        .iter()
        .zip(&got)
        .filter(|(e, g)| e != g)
        .map(|(e, g)| format!("{}: {} without planted objects, {} with them", e.0, e.1, g.1))
        .collect();
    let reached: Vec<&String> = messages.iter().filter(|m| m.contains("planted")).collect();
    println!(
        "planted: {} calls of {tried} functions with planted objects on the search_path, {} that behaved differently, {} that reached a planted object",
        got.len(),
        differing.len(),
        reached.len()
    );
    assert_eq!(expected.len(), got.len());
    assert!(reached.is_empty(), "planted objects reached:\n{reached:#?}");
    assert!(differing.is_empty(), "calls that behaved differently:\n{}", differing.join("\n"));
}
