//! Hostile input: every SQL function of schema `agent_memory`, found in
//! `pg_proc` (so a new function is covered, or fails this test until it gets
//! a base call below), is called with hostile values in every argument
//! position, the other arguments taken from one valid call of the function:
//! NULLs, empty strings, 10 MB values, odd Unicode, SQL-looking strings,
//! path traversal in every spelling, control characters, deeply nested JSON,
//! wrong JSON types in every key of a valid request, NUL escapes, boundary
//! numbers and intervals, huge arrays.
//!
//! Then hostile data is stored through the functions (JSON nested around the
//! depth limit, deep YAML frontmatter) and every function's valid call runs
//! on top of it.
//!
//! Every call runs as its own autocommit statement and must either succeed
//! or fail with a specific SQLSTATE: never an internal error (XX***, 58***),
//! never a lost connection. After every failed call the rows of every table
//! of the schema must be what they were before it.
//!
//! Run it alone with the output shown:
//!   cargo test -p agent_memory_integration --test hostile_input -- --nocapture
//! It prints `hostile_input: N calls, S succeeded, F failed with a specific
//! SQLSTATE, I internal errors, C crashes, T tables changed after failure`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use agent_memory_integration::calls::{
    BASES, EMBEDDINGS, FIXTURE, HISTORY, NEED_A_DEFAULTED_ARGUMENT, SKIPPED,
};

/// The row of recall_settings the wipe removes, with embeddings taken.
const RECALL_SETTINGS: &str = "INSERT INTO agent_memory.recall_settings DEFAULT VALUES;";
use agent_memory_integration::{drop_database, fresh_database};
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls};
use serde_json::Value;

const DB: &str = "am_it_hostile";

/// How long one call may run before PostgreSQL cancels it (57014).
const STATEMENT_TIMEOUT: &str = "30s";
/// A call slower than this is listed (it may be a quadratic path).
const SLOW_CALL: Duration = Duration::from_secs(3);
/// Size of the 10 MB values.
const HUGE: usize = 10 * 1024 * 1024;

// ---------------------------------------------------------------- values --

/// One hostile value: a label for reports, the text handed to the server
/// (cast there to the argument's type), or None for SQL NULL.
#[derive(Clone)]
struct Hostile {
    label: String,
    value: Option<String>,
}

fn hv(label: impl Into<String>, value: impl Into<String>) -> Hostile {
    Hostile { label: label.into(), value: Some(value.into()) }
}

fn null() -> Hostile {
    Hostile { label: "NULL".into(), value: None }
}

/// Hostile text, small ones (they also go into JSON string fields) and the
/// two 10 MB ones.
fn text_values() -> (Vec<Hostile>, Vec<Hostile>) {
    let mut v = vec![
        hv("empty", ""),
        hv("space", " "),
        hv("padded", "  live  "),
        hv(
            "combining marks",
            "Z\u{0337}\u{0322}\u{031b}a\u{0336}l\u{0338}g\u{0335}o\u{0301}\u{0302}\u{0303}",
        ),
        hv("RTL override", "abc\u{202E}fdp.exe"),
        hv("zero-width joiner", "a\u{200D}b\u{200B}c\u{2060}"),
        hv("U+FFFF", "x\u{FFFF}\u{FFFE}"),
        hv("U+10FFFF", "\u{10FFFF}"),
        hv("BOM", "\u{FEFF}live"),
        hv("emoji ZWJ", "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}\u{200D}\u{1F466}"),
        hv("literal \\ud800", "\\ud800"),
        hv("non-NFC e+U+0301", "caf\u{0065}\u{0301}"),
        hv("fullwidth solidus", "\u{FF0F}..\u{FF0F}etc"),
        hv("one-dot leaders", "/\u{2024}\u{2024}/x"),
        hv("SQL injection", "'); DROP TABLE agent_memory.sessions; --"),
        hv("SQL tautology", "' OR '1'='1"),
        hv("percent", "%"),
        hv("underscore", "_"),
        hv("backslash", "\\"),
        hv("dollar quote", "$$; SELECT 1; $$"),
        hv("double quote", "\""),
        hv("dot-dot", ".."),
        hv("/../etc/passwd", "/../etc/passwd"),
        hv("/a/../../b", "/a/../../b"),
        hv("/a/./b", "/a/./b"),
        hv("//a", "//a"),
        hv("/a//b", "/a//b"),
        hv("%2e%2e/", "%2e%2e/"),
        hv("%2E%2E%2F", "%2E%2E%2Fx"),
        hv("..%2f", "..%2f"),
        hv("%252e%252e", "/%252e%252e/x"),
        hv("\\..\\", "\\..\\"),
        hv("/a\\b", "/a\\b"),
        hv("..\\..\\windows", "..\\..\\windows\\win.ini"),
        hv("/memories/../x", "/memories/../x"),
        hv("/memories/..", "/memories/.."),
        hv("/memories", "/memories"),
        hv("/memories/", "/memories/"),
        hv("/memoriesx", "/memoriesx/a"),
        hv("trailing slash", "/notes/today/"),
        hv("root slash", "/"),
        hv("5000-byte path", format!("/{}", "a/".repeat(2500))),
        hv("300-byte segment", format!("/{}", "s".repeat(300))),
        hv("100 segments", "/a".repeat(100)),
        hv("tab", "a\tb"),
        hv("newline", "a\nb"),
        hv("CRLF", "a\r\nb"),
        hv("U+0001", "a\u{0001}b"),
        hv("U+007F", "a\u{007F}b"),
        hv("U+0085 NEL", "a\u{0085}b"),
        hv("U+2028", "a\u{2028}b"),
        hv("65-char id", "a".repeat(65)),
        hv("257-char key", "k".repeat(257)),
        hv("__root__", "__root__"),
        hv("__global__", "__global__"),
        hv("numberish", "-1"),
        hv("NaN", "NaN"),
        hv("JSON object text", "{\"a\": 1}"),
        hv("frontmatter only", "---\n---\n"),
        hv("frontmatter unclosed", "---\ntitle: x\n"),
        hv("frontmatter bad YAML", "---\ntitle: [unclosed\nrefs: {a: b\n---\nbody"),
        hv(
            "frontmatter wrong types",
            "---\ntitle: [a, b]\ndescription: {x: 1}\nrefs: 5\nversion: -1\ncreatedAt: yesterday\n---\nbody",
        ),
        hv("frontmatter YAML alias", "---\ntitle: &a [*a, *a]\nrefs: [../x, '[[y]]']\n---\n"),
        hv(
            "frontmatter nested 10,000 deep",
            format!("---\ntitle: x\nrefs: {}\n---\nbody", nested_arrays(10_000)),
        ),
        hv("link flood", "[[a]] ".repeat(20_000)),
        hv("unterminated links", "[[".repeat(50_000)),
        hv("many lines", "\n".repeat(100_000)),
    ];
    v.insert(0, null());
    let huge = vec![
        hv("10 MB of 'x'", "x".repeat(HUGE)),
        hv("10 MB of multi-byte chars", "é€😀".repeat(HUGE / 9)),
    ];
    (v, huge)
}

fn nested_arrays(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn nested_objects(depth: usize) -> String {
    format!("{}1{}", "{\"a\": ".repeat(depth), "}".repeat(depth))
}

/// Hostile jsonb documents (as JSON text) and the heavy one.
fn jsonb_values() -> (Vec<Hostile>, Vec<Hostile>) {
    let mut v = vec![null()];
    for (label, json) in [
        ("null", "null"),
        ("[]", "[]"),
        ("{}", "{}"),
        ("string", "\"str\""),
        ("empty string", "\"\""),
        ("1e400", "1e400"),
        ("-1e400", "-1e400"),
        ("1e-400", "1e-400"),
        ("30-digit integer", "123456789012345678901234567890"),
        ("true", "true"),
        ("-0", "-0"),
        ("NUL escape", "\"\\u0000\""),
        ("NUL escape in key and value", "{\"a\\u0000\": \"x\\u0000y\"}"),
        ("lone surrogate escape", "\"\\ud800\""),
        ("duplicate keys", "{\"a\": 1, \"a\": {\"b\": 2}, \"a\": [3]}"),
        (
            "odd Unicode keys",
            "{\"\u{202E}\": 1, \"e\u{0301}\": 2, \"\u{1F469}\u{200D}\u{1F467}\": 3, \"\": 4, \"\u{FFFF}\": 5, \"\\u0001\": 6}",
        ),
        ("array of 100,000 numbers", &format!("[{}]", vec!["1"; 100_000].join(","))),
    ] {
        v.push(hv(label, json));
    }
    let wide: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\": {i}")).collect();
    v.push(hv("object of 100,000 keys", format!("{{{}}}", wide.join(","))));
    for depth in [129, 1_000, 10_000, 100_000] {
        v.push(hv(format!("arrays nested {depth} deep"), nested_arrays(depth)));
        v.push(hv(format!("objects nested {depth} deep"), nested_objects(depth)));
    }
    let huge = vec![hv("10 MB string", format!("\"{}\"", "x".repeat(HUGE)))];
    (v, huge)
}

/// Values that replace one key or element of a valid jsonb argument: every
/// JSON type, extreme numbers, NUL and surrogate escapes, deep nesting.
fn json_member_values() -> Vec<(&'static str, String)> {
    vec![
        ("5", "5".into()),
        ("-1", "-1".into()),
        ("0", "0".into()),
        ("1.5", "1.5".into()),
        ("1e400", "1e400".into()),
        ("-1e400", "-1e400".into()),
        ("30 digits", "123456789012345678901234567890".into()),
        ("-2^63-1", "-9223372036854775809".into()),
        ("2^31", "2147483648".into()),
        ("\"str\"", "\"str\"".into()),
        ("\"\"", "\"\"".into()),
        ("[]", "[]".into()),
        ("{}", "{}".into()),
        ("null", "null".into()),
        ("true", "true".into()),
        ("\"\\u0000\"", "\"\\u0000\"".into()),
        ("\"\\ud800\"", "\"\\ud800\"".into()),
        ("[[\"x\"]]", "[[\"x\"]]".into()),
        ("arrays nested 200 deep", nested_arrays(200)),
        ("objects nested 1,000 deep", nested_objects(1_000)),
    ]
}

fn int_values(bits: u32) -> Vec<Hostile> {
    let mut v = vec![null()];
    for s in ["0", "-1", "1", "-2147483648", "2147483647"] {
        v.push(hv(s, s));
    }
    if bits == 64 {
        v.push(hv("-9223372036854775808", "-9223372036854775808"));
        v.push(hv("9223372036854775807", "9223372036854775807"));
    } else {
        v.push(hv("2147483648 (out of range)", "2147483648"));
    }
    v
}

fn interval_values() -> Vec<Hostile> {
    let mut v = vec![null()];
    for s in [
        "0",
        "-1 day",
        "-1 microsecond",
        "1 microsecond",
        "1 month",
        "1000000 years",
        "-1000000 years",
        "178000000 years",
        "2147483647 days",
        "-2147483648 days 2147483647 hours",
        "infinity",
        "-infinity",
    ] {
        v.push(hv(s, s));
    }
    v
}

/// Embeddings: wrong sizes, values that are not finite, no direction,
/// NULL elements, other shapes.
fn real_array_values() -> (Vec<Hostile>, Vec<Hostile>) {
    let mut v = vec![null()];
    for (label, s) in [
        ("{}", "{}"),
        ("{NULL}", "{NULL}"),
        ("one element", "{1}"),
        ("four elements", "{1,2,3,4}"),
        ("NaN", "{NaN,1,1}"),
        ("Infinity", "{Infinity,0,0}"),
        ("-Infinity", "{1,-Infinity,0}"),
        ("all zeros", "{0,0,0}"),
        ("a NULL element", "{1,NULL,1}"),
        ("two-dimensional", "{{1,0,0},{0,1,0}}"),
        ("lower bound 5", "[5:7]={1,0,0}"),
        ("tiny values", "{1e-45,1e-45,1e-45}"),
        ("largest values", "{3.4e38,3.4e38,-3.4e38}"),
    ] {
        v.push(hv(label, s));
    }
    let many: Vec<String> = (0..100_000).map(|i| format!("{}", i % 7)).collect();
    v.push(hv("100,000 elements", format!("{{{}}}", many.join(","))));
    (v, vec![])
}

fn text_array_values() -> (Vec<Hostile>, Vec<Hostile>) {
    let mut v = vec![null()];
    for (label, s) in [
        ("{}", "{}"),
        ("{NULL}", "{NULL}"),
        ("{\"\"}", "{\"\"}"),
        ("{NULL,atlas}", "{NULL,atlas}"),
        ("duplicates", "{atlas,atlas,atlas}"),
        (
            "traversal elements",
            r#"{"..","/../etc/passwd","%2e%2e/","..%2f","\\..\\","/memories/../x"}"#,
        ),
        ("odd Unicode elements", "{\"\u{202E}x\",\"e\u{0301}\",\"\u{FFFF}\",\"a\u{200D}b\"}"),
        ("SQL-looking elements", r#"{"'); DROP TABLE agent_memory.sessions; --","%","_"}"#),
        ("__root__ twice", "{__root__,__root__}"),
        ("two-dimensional", "{{atlas,projects},{victim,goal}}"),
        ("lower bound 5", "[5:6]={atlas,goal}"),
        ("65-char element", &format!("{{{}}}", "a".repeat(65))),
    ] {
        v.push(hv(label, s));
    }
    let many: Vec<String> = (0..100_000).map(|i| format!("e{i}")).collect();
    v.push(hv("100,000 elements", format!("{{{}}}", many.join(","))));
    let huge = vec![hv("one 10 MB element", format!("{{{}}}", "x".repeat(HUGE)))];
    (v, huge)
}

fn bool_values() -> Vec<Hostile> {
    vec![null(), hv("true", "true"), hv("false", "false")]
}

fn timestamptz_values() -> Vec<Hostile> {
    let mut v = vec![null()];
    for s in
        ["infinity", "-infinity", "4713-01-01 00:00:00+00 BC", "294276-12-31 23:59:59+00", "epoch"]
    {
        v.push(hv(s, s));
    }
    v
}

/// Hostile values for an argument of SQL type `ty`: (light, heavy).
fn values_for(ty: &str) -> (Vec<Hostile>, Vec<Hostile>) {
    match ty {
        "text" | "character varying" | "name" => text_values(),
        "jsonb" | "json" => jsonb_values(),
        "integer" | "smallint" => (int_values(32), vec![]),
        "bigint" => (int_values(64), vec![]),
        "interval" => (interval_values(), vec![]),
        "text[]" => text_array_values(),
        "real[]" => real_array_values(),
        "boolean" => (bool_values(), vec![]),
        "timestamp with time zone" => (timestamptz_values(), vec![]),
        _ => (vec![null()], vec![]),
    }
}

// -------------------------------------------------- jsonb member mutation --

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// Every member and element of `doc` down to depth 3, with the kind of
/// value found there.
fn json_locations(doc: &Value, at: &mut Vec<Step>, out: &mut Vec<(Vec<Step>, bool)>) {
    if at.len() >= 3 {
        return;
    }
    match doc {
        Value::Object(map) => {
            for (k, v) in map {
                at.push(Step::Key(k.clone()));
                out.push((at.clone(), v.is_string()));
                json_locations(v, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(Step::Index(i));
                out.push((at.clone(), v.is_string()));
                json_locations(v, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn location_label(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => format!(".{k}"),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect()
}

fn slot<'a>(doc: &'a mut Value, path: &[Step]) -> &'a mut Value {
    path.iter().fold(doc, |v, s| match s {
        Step::Key(k) => &mut v[k.as_str()],
        Step::Index(i) => &mut v[*i],
    })
}

const PLACEHOLDER: &str = "\u{0}HOSTILE\u{0}";

/// `doc` with the value at `path` replaced by the raw JSON text `raw`.
fn replace_at(doc: &Value, path: &[Step], raw: &str) -> String {
    let mut copy = doc.clone();
    *slot(&mut copy, path) = Value::String(PLACEHOLDER.into());
    let text = serde_json::to_string(&copy).unwrap();
    let token = serde_json::to_string(PLACEHOLDER).unwrap();
    text.replacen(&token, raw, 1)
}

/// `doc` without the member at `path` (None for an array element).
fn remove_at(doc: &Value, path: &[Step]) -> Option<String> {
    let (last, parent) = path.split_last()?;
    let Step::Key(key) = last else { return None };
    let mut copy = doc.clone();
    slot(&mut copy, parent).as_object_mut()?.remove(key);
    Some(serde_json::to_string(&copy).unwrap())
}

/// The hostile variants of a valid jsonb argument: each member removed,
/// replaced by a value of every JSON type, and string members by every
/// hostile text (once by a 10 MB string); plus an unknown key.
fn json_mutations(base: &str) -> Vec<Hostile> {
    let doc: Value = serde_json::from_str(base).expect("base jsonb parses");
    let mut locations = Vec::new();
    json_locations(&doc, &mut Vec::new(), &mut locations);
    let members = json_member_values();
    let (texts, _) = text_values();
    let mut out = Vec::new();
    if let Value::Object(map) = &doc {
        let mut extra = map.clone();
        extra.insert("__proto__".into(), serde_json::json!({"polluted": true}));
        extra.insert("unknown_key".into(), serde_json::json!([1, {"x": null}]));
        out.push(hv("with unknown keys", serde_json::to_string(&extra).unwrap()));
    }
    let mut huge_done = false;
    for (path, is_string) in locations {
        let at = location_label(&path);
        if let Some(removed) = remove_at(&doc, &path) {
            out.push(hv(format!("without {at}"), removed));
        }
        for (label, raw) in &members {
            out.push(hv(format!("{at} = {label}"), replace_at(&doc, &path, raw)));
        }
        if is_string {
            for t in texts.iter().filter(|t| t.value.is_some()) {
                let raw = serde_json::to_string(t.value.as_deref().unwrap()).unwrap();
                out.push(hv(format!("{at} = text {}", t.label), replace_at(&doc, &path, &raw)));
            }
            if !huge_done {
                huge_done = true;
                let raw = format!("\"{}\"", "x".repeat(HUGE));
                out.push(hv(format!("{at} = 10 MB string"), replace_at(&doc, &path, &raw)));
            }
        }
    }
    out
}

/// Writes that store hostile data for the functions that read it back:
/// (label, function, arguments).
fn stored_writes() -> Vec<(String, &'static str, Vec<Option<String>>)> {
    let mut out = Vec::new();
    let s = |v: &str| Some(v.to_string());
    for depth in [99, 100, 101, 127, 1_000] {
        for (kind, deep) in [("arrays", nested_arrays(depth)), ("objects", nested_objects(depth))] {
            let l = |what: &str| format!("{what} with {kind} nested {depth} deep");
            let wrapped = format!("{{\"d\": {deep}}}");
            out.push((
                l("kv_set value"),
                "kv_set(text, text, jsonb, interval, integer)",
                vec![s("live"), s("deep"), s(&deep), None, None],
            ));
            out.push((
                l("update_context entry"),
                "update_context(text, jsonb)",
                vec![s("live"), s(&wrapped)],
            ));
            out.push((
                l("append_message metadata"),
                "append_message(text, text, text, text, jsonb, integer)",
                vec![s("live"), s("user"), s("deep"), s("atlas"), s(&wrapped), None],
            ));
            out.push((
                l("session metadata"),
                "create_session(text, jsonb, text, interval)",
                vec![s("hostile-user"), s(&wrapped), s("live"), None],
            ));
            for (part, value) in [
                ("fetched_context", wrapped.clone()),
                ("node_context", wrapped.clone()),
                (
                    "messages",
                    format!("[{{\"role\": \"user\", \"content\": \"x\", \"d\": {deep}}}]"),
                ),
                (
                    "project_structure",
                    format!(
                        "{{\"project_graph\": {{\"nodes\": [{{\"id\": \"a\", \"d\": {deep}}}], \"edges\": []}}}}"
                    ),
                ),
            ] {
                out.push((
                    l(&format!("wm_set {part}")),
                    "wm_set(text, text, jsonb, text, integer)",
                    vec![s("live"), s(part), s(&value), s("atlas"), None],
                ));
            }
            out.push((
                l("wm_patch fetched_context"),
                "wm_patch(text, text, jsonb, text, integer)",
                vec![s("live"), s("fetched_context"), s(&wrapped), s("atlas"), None],
            ));
        }
        // The same nesting as YAML flow lists in a node's frontmatter, which
        // wm_init and set_active_node parse into node_context.meta.
        let yaml = format!("---\nstatus: {}\n---\nbody", nested_arrays(depth));
        for (node, label) in [("atlas", ""), ("projects", " projects")] {
            out.push((
                format!("graph_write{label} body with frontmatter nested {depth} deep"),
                "graph_write(text, text, text, text, text, text[], text, integer)",
                vec![s("proj"), s(node), None, None, s(&yaml), None, None, None],
            ));
        }
    }
    out
}

// ------------------------------------------------------------- the runner --

struct Function {
    key: String,
    name: String,
    types: Vec<String>,
    arg_names: Vec<String>,
    defaults: i16,
    returns_set: bool,
    kind: String,
}

fn connect_retrying() -> Client {
    let port: u16 = std::env::var("PGPORT").unwrap_or_else(|_| "5432".into()).parse().unwrap();
    let user = std::env::var("PGUSER").unwrap_or_else(|_| "postgres".into());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        match Config::new()
            .host("127.0.0.1")
            .port(port)
            .user(&user)
            .dbname(DB)
            .application_name("agent_memory hostile_input")
            .connect(NoTls)
        {
            Ok(mut client) => {
                client
                    .batch_execute(&format!("SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
                    .expect("set statement_timeout");
                return client;
            }
            Err(e) if Instant::now() < deadline => {
                eprintln!("reconnecting after: {e}");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("the server did not come back: {e}"),
        }
    }
}

fn short(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if s.chars().nth(80).is_some() {
        out.push('…');
    }
    format!("{out:?}")
}

#[derive(Default)]
struct Report {
    calls: usize,
    succeeded: usize,
    failed: usize,
    by_sqlstate: BTreeMap<String, usize>,
    internal: Vec<String>,
    crashes: Vec<String>,
    changed: Vec<String>,
    other: Vec<String>,
    sqlstate_22000: BTreeSet<(String, String)>,
    timeouts: Vec<String>,
    slow: Vec<(Duration, String)>,
    /// (type, SQLSTATE) of a value PostgreSQL's own cast refused: how many
    /// and a few of their labels.
    input_rejected: BTreeMap<(String, String), (usize, Vec<String>)>,
    /// Distinct (function, argument or call, SQLSTATE, message) of the
    /// internal errors.
    internal_kinds: BTreeMap<(String, String, String, String), usize>,
}

struct Runner {
    client: Client,
    digest_sql: String,
    digest: Vec<(String, String)>,
    cast_ok: HashMap<(String, String), Option<String>>,
    report: Report,
    /// SQLSTATE and message of the last call, when it failed.
    last_error: Option<(String, String)>,
}

impl Runner {
    fn digest(&mut self) -> Vec<(String, String)> {
        self.client
            .query(self.digest_sql.as_str(), &[])
            .expect("digest of the tables")
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    }

    /// Wipe every table and load the fixture.
    fn reset(&mut self) {
        let tables: Vec<String> = self
            .client
            .query(
                "SELECT c.oid::regclass::text FROM pg_class c
                 WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind IN ('r', 'p')",
                &[],
            )
            .expect("tables")
            .iter()
            .map(|r| r.get(0))
            .collect();
        let wipe: String = tables.iter().map(|t| format!("DELETE FROM {t};")).collect();
        self.client.batch_execute(&wipe).expect("wipe the tables");
        self.client
            .batch_execute(&format!("{RECALL_SETTINGS}{EMBEDDINGS}"))
            .expect("recall's settings, with embeddings");
        self.client.batch_execute(&format!("{FIXTURE}{HISTORY}")).expect("load the fixture");
        self.digest = self.digest();
    }

    /// Whether PostgreSQL's own cast accepts `value` as `ty` (None: yes;
    /// Some(sqlstate): rejected before any function runs).
    fn cast_rejection(&mut self, ty: &str, value: &Option<String>) -> Option<String> {
        let Some(text) = value else { return None };
        let key = (ty.to_string(), text.clone());
        if let Some(r) = self.cast_ok.get(&key) {
            return r.clone();
        }
        let sql = format!("SELECT ($1::text::{ty}) IS NULL");
        let result = match self.client.query(sql.as_str(), &[text]) {
            Ok(_) => None,
            Err(e) => {
                if self.client.is_closed() {
                    self.client = connect_retrying();
                    Some("connection lost in the cast".to_string())
                } else {
                    Some(e.code().map(|c| c.code().to_string()).unwrap_or_else(|| e.to_string()))
                }
            }
        };
        self.cast_ok.insert(key, result.clone());
        result
    }

    /// One call of `f` with `args`; `what` names the hostile value. Returns
    /// whether it succeeded.
    fn call(
        &mut self, f: &Function, args: &[Option<String>], position: Option<usize>, what: &str,
    ) -> bool {
        // Fewer arguments than the function has: the rest are defaults.
        let casts: Vec<String> = f.types[..args.len()]
            .iter()
            .enumerate()
            .map(|(i, ty)| format!("${}::text::{ty}", i + 1))
            .collect();
        let invocation = format!("agent_memory.\"{}\"({})", f.name, casts.join(", "));
        let sql = if f.kind == "p" {
            format!("CALL {invocation}")
        } else if f.returns_set {
            format!("SELECT count(*), md5(string_agg(r::text, ',')) FROM {invocation} r")
        } else {
            format!("SELECT md5(({invocation})::text)")
        };
        let params: Vec<&(dyn ToSql + Sync)> =
            args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
        let context = || {
            let arg = match position {
                Some(p) => format!("argument {} ({})", p + 1, f.arg_names[p]),
                None => "base call".to_string(),
            };
            format!("{} {arg} = {what}", f.key)
        };
        self.report.calls += 1;
        self.last_error = None;
        let started = Instant::now();
        let result = self.client.query(sql.as_str(), &params);
        let elapsed = started.elapsed();
        if elapsed >= SLOW_CALL {
            self.report.slow.push((elapsed, context()));
        }
        match result {
            Ok(_) => {
                self.report.succeeded += 1;
                self.digest = self.digest();
                true
            }
            Err(e) => {
                if self.client.is_closed() {
                    self.report.crashes.push(format!("{}: connection lost: {e}", context()));
                    self.client = connect_retrying();
                    self.digest = self.digest();
                    return false;
                }
                let Some(db) = e.as_db_error() else {
                    self.report.other.push(format!("{}: error without SQLSTATE: {e}", context()));
                    return false;
                };
                let code = db.code().code().to_string();
                let message = match db.detail() {
                    Some(d) => format!("{} (DETAIL: {d})", db.message()),
                    None => db.message().to_string(),
                };
                self.last_error = Some((code.clone(), db.message().to_string()));
                *self.report.by_sqlstate.entry(code.clone()).or_default() += 1;
                if code.starts_with("XX") || code.starts_with("58") {
                    self.report.internal.push(format!("{}: {code} {}", context(), short(&message)));
                    *self
                        .report
                        .internal_kinds
                        .entry((
                            f.key.clone(),
                            match position {
                                Some(p) => format!("argument {}", p + 1),
                                None => what.chars().take(70).collect(),
                            },
                            code.clone(),
                            db.message().chars().take(60).collect(),
                        ))
                        .or_default() += 1;
                } else {
                    self.report.failed += 1;
                }
                if code == "22000" {
                    self.report.sqlstate_22000.insert((f.key.clone(), message.clone()));
                }
                if code == "57014" {
                    self.report.timeouts.push(context());
                }
                let now = self.digest();
                if now != self.digest {
                    let tables: Vec<&str> = now
                        .iter()
                        .zip(&self.digest)
                        .filter(|(a, b)| a != b)
                        .map(|(a, _)| a.0.as_str())
                        .collect();
                    self.report.changed.push(format!(
                        "{}: failed with {code} {} but changed {tables:?}",
                        context(),
                        short(&message)
                    ));
                    self.digest = now;
                }
                false
            }
        }
    }

    /// Call `f` once for each value, `base` with argument `position`
    /// replaced; values PostgreSQL's own cast refuses are counted apart.
    fn sweep(
        &mut self, f: &Function, base: &[Option<String>], position: usize, values: &[Hostile],
    ) {
        let ty = f.types[position].clone();
        for h in values {
            if let Some(code) = self.cast_rejection(&ty, &h.value) {
                let seen = self.report.input_rejected.entry((ty.clone(), code)).or_default();
                seen.0 += 1;
                if seen.1.len() < 4 && !seen.1.contains(&h.label) {
                    seen.1.push(h.label.clone());
                }
                continue;
            }
            let mut args = base.to_vec();
            args[position] = h.value.clone();
            let what = format!(
                "{} {}",
                h.label,
                h.value.as_deref().map(short).unwrap_or_else(|| "NULL".into())
            );
            self.call(f, &args, Some(position), &what);
        }
    }
}

#[test]
fn every_function_survives_hostile_input() {
    let started = Instant::now();
    drop(fresh_database(DB));
    let client = connect_retrying();
    let mut runner = Runner {
        client,
        digest_sql: String::new(),
        digest: Vec::new(),
        cast_ok: HashMap::new(),
        report: Report::default(),
        last_error: None,
    };

    // Every function of the schema, as pg_proc knows it.
    let functions: Vec<Function> = runner
        .client
        .query(
            "SELECT p.proname::text,
                    ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY u(t, i) ORDER BY i),
                    pg_get_function_identity_arguments(p.oid),
                    p.pronargdefaults, p.proretset, p.prokind::text
             FROM pg_proc p WHERE p.pronamespace = 'agent_memory'::regnamespace
             ORDER BY p.proname, p.oid",
            &[],
        )
        .expect("list the functions")
        .iter()
        .map(|r| {
            let name: String = r.get(0);
            let types: Vec<String> = r.get(1);
            let identity: String = r.get(2);
            let arg_names = identity
                .split(", ")
                .filter(|s| !s.is_empty())
                .map(|s| s.split(' ').next().unwrap_or(s).to_string())
                .collect();
            Function {
                key: format!("{name}({})", types.join(", ")),
                name,
                types,
                arg_names,
                defaults: r.get(3),
                returns_set: r.get(4),
                kind: r.get(5),
            }
        })
        .collect();
    assert!(functions.len() > 40, "found only {} functions", functions.len());

    // Every function has a base call or a reason to be skipped.
    let mut problems = Vec::new();
    for f in &functions {
        let skipped = SKIPPED.iter().any(|(k, _)| *k == f.key);
        let base = BASES.iter().find(|b| b.function == f.key);
        match (skipped, base) {
            (true, _) => {}
            (false, None) => problems.push(format!(
                "{} has no base call in BASES (add one valid call, or a reason in SKIPPED)",
                f.key
            )),
            (false, Some(b)) => {
                for call in b.calls {
                    if call.len() != f.types.len() {
                        problems.push(format!(
                            "{}: a base call has {} arguments, the function {}",
                            f.key,
                            call.len(),
                            f.types.len()
                        ));
                    }
                }
                if !matches!(f.kind.as_str(), "f" | "p") {
                    problems.push(format!("{}: prokind {} is not callable here", f.key, f.kind));
                }
            }
        }
    }
    for b in BASES {
        if !functions.iter().any(|f| f.key == b.function) {
            problems.push(format!("BASES names {}, which does not exist", b.function));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // One query: a digest of the rows of each table of the schema.
    let parts: Vec<String> = runner
        .client
        .query(
            "SELECT c.relname::text, c.oid::regclass::text FROM pg_class c
             WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relkind IN ('r', 'p')
             ORDER BY c.relname",
            &[],
        )
        .expect("tables")
        .iter()
        .map(|r| {
            let name: String = r.get(0);
            let rel: String = r.get(1);
            format!(
                "SELECT '{name}'::text, (SELECT md5(coalesce(string_agg(md5(x::text), '' ORDER BY md5(x::text)), '')) FROM {rel} x)"
            )
        })
        .collect();
    runner.digest_sql = parts.join(" UNION ALL ");

    let mut per_function: Vec<(String, usize, Duration)> = Vec::new();
    for f in &functions {
        let Some(base) = BASES.iter().find(|b| b.function == f.key) else {
            continue;
        };
        let calls_before = runner.report.calls;
        let f_started = Instant::now();
        let bases: Vec<Vec<Option<String>>> =
            base.calls.iter().map(|c| c.iter().map(|a| a.map(str::to_string)).collect()).collect();
        // Each base call succeeds on the fixture (or the hostile calls
        // built from it would not reach the function's real work).
        for args in &bases {
            runner.reset();
            let before = runner.report.succeeded;
            runner.call(f, args, None, "valid base call");
            if runner.report.succeeded == before {
                problems.push(format!("{}: the base call {args:?} failed", f.key));
            }
        }
        // The first base call without its defaulted arguments: it works,
        // or is refused where one of them is required.
        if f.defaults > 0 {
            runner.reset();
            let required = &bases[0][..f.types.len() - f.defaults as usize];
            let refused = NEED_A_DEFAULTED_ARGUMENT.iter().any(|(key, _)| *key == f.key);
            let before = runner.report.succeeded;
            runner.call(f, required, None, "base call without its defaulted arguments");
            match (runner.report.succeeded == before, refused) {
                (true, false) => {
                    problems.push(format!("{}: the base call {required:?} failed", f.key))
                }
                (false, true) => problems.push(format!(
                    "{}: the base call {required:?} succeeded without the argument it needs",
                    f.key
                )),
                _ => {}
            }
        }
        // Hostile values in each position of the first base call.
        for position in 0..f.types.len() {
            runner.reset();
            let (light, heavy) = values_for(&f.types[position]);
            runner.sweep(f, &bases[0], position, &light);
            runner.sweep(f, &bases[0], position, &heavy);
        }
        // Wrong types and hostile strings in every member of each valid
        // jsonb argument.
        for args in &bases {
            for position in 0..f.types.len() {
                // import's line is JSON as text: mutated as a jsonb is,
                // and cut short at every tenth character.
                let a_line = f.name == "import" && position == 0;
                if f.types[position] != "jsonb" && f.types[position] != "json" && !a_line {
                    continue;
                }
                let Some(doc) = &args[position] else { continue };
                runner.reset();
                let mut mutations = json_mutations(doc);
                if a_line {
                    mutations.extend(
                        doc.char_indices()
                            .step_by(10)
                            .map(|(at, _)| hv(format!("cut at {at}"), &doc[..at])),
                    );
                }
                runner.sweep(f, args, position, &mutations);
            }
        }
        per_function.push((f.key.clone(), runner.report.calls - calls_before, f_started.elapsed()));
    }

    // Hostile data stored through the functions (JSON nested around the
    // limits, deep YAML frontmatter in a node), then one valid call of every
    // function, which must still succeed or fail with a specific SQLSTATE.
    let mut stored = 0;
    let mut refused_reads: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut refused_writes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (label, key, args) in stored_writes() {
        let f = functions.iter().find(|f| f.key == key).expect("a write function");
        runner.reset();
        if !runner.call(f, &args, None, &format!("stored write: {label}")) {
            let code = runner.last_error.clone().map(|e| e.0).unwrap_or_default();
            refused_writes.entry(code).or_default().push(label);
            continue;
        }
        stored += 1;
        for g in &functions {
            let Some(base) = BASES.iter().find(|b| b.function == g.key) else {
                continue;
            };
            let args: Vec<Option<String>> =
                base.calls[0].iter().map(|a| a.map(str::to_string)).collect();
            if !runner.call(g, &args, None, &format!("after storing {label}"))
                && let Some((code, message)) = runner.last_error.clone()
            {
                *refused_reads.entry((g.key.clone(), code, message)).or_default() += 1;
            }
        }
    }
    println!("\nstored hostile writes that succeeded (each followed by every base call): {stored}");
    for (code, labels) in &refused_writes {
        println!("stored writes refused with {code}: {}, e.g. {}", labels.len(), labels[0]);
    }
    println!("base calls that failed after such a write:");
    if refused_reads.is_empty() {
        println!("  none");
    }
    for ((f, code, m), n) in &refused_reads {
        println!("  {n:>5}x {f}: {code} {}", short(m));
    }

    let r = &runner.report;
    println!("\ncalls per function:");
    for (key, calls, took) in &per_function {
        println!("  {key:<62} {calls:>6} calls {:>8.1}s", took.as_secs_f64());
    }
    println!("\ncalls per SQLSTATE:");
    println!("  {:<8} {:>7}", "success", r.succeeded);
    for (code, n) in &r.by_sqlstate {
        println!("  {code:<8} {n:>7}");
    }
    println!("\nvalues refused by PostgreSQL's own input cast (no function called):");
    for ((ty, code), (n, labels)) in &r.input_rejected {
        println!("  {ty:<10} {code:<6} {n:>5} values, e.g. {}", labels.join(", "));
    }
    println!("\ninternal errors by function and message:");
    if r.internal_kinds.is_empty() {
        println!("  none");
    }
    for ((f, at, code, m), n) in &r.internal_kinds {
        println!("  {n:>5}x {f} {at}: {code} {}", short(m));
    }
    println!("\ndistinct (function, message) pairs with SQLSTATE 22000 (suspicious):");
    if r.sqlstate_22000.is_empty() {
        println!("  none");
    }
    for (f, m) in &r.sqlstate_22000 {
        println!("  {f}: {}", short(m));
    }
    println!("\ncalls cancelled by statement_timeout ({STATEMENT_TIMEOUT}):");
    if r.timeouts.is_empty() {
        println!("  none");
    }
    for t in &r.timeouts {
        println!("  {t}");
    }
    let mut slow = r.slow.clone();
    slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    println!("\ncalls slower than {SLOW_CALL:?}:");
    if slow.is_empty() {
        println!("  none");
    }
    for (took, what) in slow.iter().take(30) {
        println!("  {:>6.1}s {what}", took.as_secs_f64());
    }
    println!("\nruntime: {:.1}s", started.elapsed().as_secs_f64());
    println!(
        "hostile_input: {} calls, {} succeeded, {} failed with a specific SQLSTATE, {} internal errors, {} crashes, {} tables changed after failure",
        r.calls,
        r.succeeded,
        r.failed,
        r.internal.len(),
        r.crashes.len(),
        r.changed.len()
    );

    let mut violations: Vec<String> = problems;
    violations.extend(r.internal.iter().map(|s| format!("internal error: {s}")));
    violations.extend(r.crashes.iter().map(|s| format!("crash: {s}")));
    violations.extend(r.changed.iter().map(|s| format!("table changed: {s}")));
    violations.extend(r.other.iter().map(|s| format!("client error: {s}")));
    let shown: Vec<&String> = violations.iter().take(60).collect();
    if !violations.is_empty() {
        let all = std::env::temp_dir().join("hostile_input_violations.txt");
        std::fs::write(&all, violations.join("\n")).expect("write the violations");
        println!("every violation: {}", all.display());
    }
    drop(runner);
    if violations.is_empty() {
        drop_database(DB);
    }
    assert!(
        violations.is_empty(),
        "{} violations (first {}):\n{}",
        violations.len(),
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}

/// The SQLSTATE of `sql`, or "ok".
fn outcome(client: &mut Client, sql: &str) -> String {
    match client.batch_execute(sql) {
        Ok(()) => "ok".into(),
        Err(e) => {
            e.code().map(|c| c.code().to_string()).unwrap_or_else(|| format!("no SQLSTATE: {e}"))
        }
    }
}

/// Regression checks of the bugs this sweep found (each was XX000).
#[test]
fn inputs_that_were_internal_errors_have_their_sqlstate() {
    let db = "am_it_hostile_regressions";
    let mut client = fresh_database(db);
    client
        .batch_execute(
            "SELECT agent_memory.create_session('u', '{}', session_id => 's');
             SELECT agent_memory.kv_set('s', 'k', '1')",
        )
        .unwrap();
    let arrays = |depth: usize| format!("'{}'::jsonb", nested_arrays(depth));
    let cases = [
        // JSON nested deeper than serde_json decodes (128): pgrx panicked
        // while decoding the argument.
        (format!("SELECT agent_memory.kv_set('s', 'deep', {})", arrays(200)), "54000"),
        (
            format!(
                "SELECT agent_memory.update_context('s', jsonb_build_object('d', {}))",
                arrays(200)
            ),
            "54000",
        ),
        (
            format!(
                "SELECT agent_memory.append_message('s', 'user', 'x', metadata => jsonb_build_object('d', {}))",
                arrays(200)
            ),
            "54000",
        ),
        // The tools answer a request too deep in their own format (an
        // EINVAL envelope, a refusal text), as any bad request.
        (
            format!(
                "SELECT agent_memory.memory_tool('[\"M\"]', jsonb_build_object('path', {}))",
                arrays(200)
            ),
            "ok",
        ),
        (
            format!(
                "SELECT agent_memory.claude_memory('[\"M\"]', jsonb_build_object('path', {}))",
                arrays(200)
            ),
            "ok",
        ),
        (
            format!(
                "SELECT agent_memory.wm_set_many('s', jsonb_build_object('fetched_context', jsonb_build_object('d', {})))",
                arrays(200)
            ),
            "54000",
        ),
        // Arguments are limited to 100 levels, so that what is stored stays
        // readable inside the documents built from it...
        (format!("SELECT agent_memory.kv_set('s', 'deep', {})", arrays(101)), "54000"),
        (format!("SELECT agent_memory.kv_set('s', 'deep', {})", arrays(100)), "ok"),
        ("SELECT agent_memory.kv_get_all('s')".into(), "ok"),
        ("SELECT agent_memory.build_context('s')".into(), "ok"),
        (
            format!(
                "SELECT agent_memory.append_message('s', 'user', 'x', metadata => jsonb_build_object('d', {}))",
                arrays(99)
            ),
            "ok",
        ),
        ("SELECT agent_memory.messages_json('s')".into(), "ok"),
        // ... also on the path that stores a part without decoding it
        // (wm_get and wm_patch decode it later).
        (
            format!(
                "SELECT agent_memory.wm_set('s', 'fetched_context', jsonb_build_object('d', {}))",
                arrays(200)
            ),
            "54000",
        ),
        (
            format!(
                "SELECT agent_memory.wm_set('s', 'fetched_context', jsonb_build_object('d', {}))",
                arrays(99)
            ),
            "ok",
        ),
        ("SELECT agent_memory.wm_get('s', 'fetched_context')".into(), "ok"),
        ("SELECT agent_memory.wm_patch('s', 'fetched_context', '{\"e\": 1}')".into(), "ok"),
        // NULL elements of a text[] argument: pgrx panicked ("array contains
        // NULL").
        ("SELECT agent_memory.build_context('s', ARRAY[NULL, 'k'])".into(), "22004"),
        ("SELECT agent_memory.clear_context_keys('s', ARRAY[NULL]::text[])".into(), "22004"),
        ("SELECT agent_memory.build_context('s', ARRAY['k'])".into(), "ok"),
        // A stored value deeper than the arguments may be (written without
        // the functions) is read back as stored: the reads hand the stored
        // jsonb over without decoding it, so its depth does not matter.
        (
            format!("UPDATE agent_memory.kv_entries SET value = {} WHERE key = 'k'", arrays(200)),
            "ok",
        ),
        ("SELECT agent_memory.kv_get_all('s')".into(), "ok"),
        ("SELECT agent_memory.kv_get('s', 'k')".into(), "ok"),
        ("SELECT agent_memory.build_context('s', ARRAY['k'])".into(), "ok"),
    ];
    let mut wrong = Vec::new();
    for (sql, expected) in &cases {
        let got = outcome(&mut client, sql);
        if got != *expected {
            wrong.push(format!("{}: expected {expected}, got {got}", short(sql)));
        }
    }
    drop(client);
    drop_database(db);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
