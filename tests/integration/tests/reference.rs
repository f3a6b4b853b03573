//! The SQL reference (`docs/reference.md`) against the extension itself.
//!
//! - Every function of schema `agent_memory` in `pg_proc` has an entry, and
//!   nothing else does; each entry's signature lines are what the catalog
//!   says (`pg_get_function_arguments` / `pg_get_function_result`) and its
//!   quoted comment is the function's `COMMENT ON FUNCTION` (what `\df+`
//!   shows); each entry has an `Errors:` paragraph and an example that calls
//!   it and shows its output.
//! - Every ```sql block of the file runs, in order, in one connection to a
//!   fresh database, and each statement gives the output written under it.
//!
//! The format is checked strictly: a line the parser does not understand is
//! an error, never skipped. `docs/reference.md` describes it ("How the
//! examples are tested"). Set `AGENT_MEMORY_REFERENCE_SHOW=1` (and pass
//! `--nocapture`) to print every statement with the output it gave, written
//! as the reference writes it, and to see every mismatch, not just the first.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use agent_memory_integration::{drop_database, fresh_database};
use postgres::SimpleQueryMessage;

// ---------------------------------------------------------------------------
// The document

/// The reference as it is in the repository.
fn reference_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/reference.md")
}

fn read_reference() -> String {
    let path = reference_path();
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read the SQL reference {}: {e}", path.display()))
}

/// One function entry: `### name`, its signature lines, its comment.
#[derive(Debug)]
struct Entry {
    name: String,
    line: usize,
    signatures: Vec<String>,
    comments: Vec<String>,
    /// Whether it has an `Errors:` paragraph.
    has_errors: bool,
    /// Indices into `Doc::blocks` of the ```sql blocks inside the entry.
    blocks: Vec<usize>,
}

/// What a statement's comment lines say it gives.
#[derive(Debug, PartialEq)]
enum Expect {
    /// No comment lines: it must succeed, its output is not checked.
    Success,
    /// These rows (none for `-- (0 rows)`).
    Rows(Vec<String>),
    /// This error.
    Error(Failure),
}

#[derive(Debug, PartialEq)]
struct Failure {
    code: String,
    message: String,
    detail: Option<String>,
    hint: Option<String>,
}

#[derive(Debug)]
struct Statement {
    line: usize,
    sql: String,
    expect: Expect,
    /// Where the expected output starts (for messages).
    expect_line: usize,
}

#[derive(Debug)]
struct Block {
    statements: Vec<Statement>,
}

/// Lines of the file with their numbers.
type Lines = Vec<(usize, String)>;

#[derive(Debug, Default)]
struct Doc {
    entries: Vec<Entry>,
    blocks: Vec<Block>,
}

/// Where the parser is inside an entry's header.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Header {
    /// Right after `### name`: a blank line, then signature lines.
    AfterHeading,
    /// Reading signature lines.
    Signatures,
    /// After the signature lines: a blank line, then `> ` lines.
    AfterSignatures,
    /// Reading the comment lines.
    Comments,
    /// The entry's text.
    Body,
}

/// The comment as the catalog has it, from a `> ` line: CommonMark's
/// backslash escapes undone (the reference writes `<` as `\<` so that
/// Markdown shows it instead of taking it for HTML).
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match chars.peek() {
            Some(&next) if c == '\\' && next.is_ascii_punctuation() => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parse the reference; every line it does not understand is an error
/// (returned with its line number, all of them).
fn parse(text: &str) -> Result<Doc, Vec<String>> {
    let mut doc = Doc::default();
    let mut errors = Vec::new();
    // The entry being read (an index into doc.entries) and where in it.
    let mut current: Option<usize> = None;
    let mut state = Header::Body;
    // An open code block: its first line, language and lines.
    let mut fence: Option<(usize, String, Lines)> = None;
    let mut names = BTreeMap::new();

    for (index, raw) in text.lines().enumerate() {
        let no = index + 1;
        let line = raw.trim_end();
        if let Some((_, lang, lines)) = fence.as_mut() {
            if !line.trim_start().starts_with("```") {
                lines.push((no, line.to_string()));
                continue;
            }
            if line != "```" {
                errors.push(format!("line {no}: a code block closes with a line of just ```"));
            }
            if lang == "sql" {
                match parse_block(lines) {
                    Ok(statements) => {
                        doc.blocks.push(Block { statements });
                        if let Some(i) = current {
                            doc.entries[i].blocks.push(doc.blocks.len() - 1);
                        }
                    }
                    Err(mut block_errors) => errors.append(&mut block_errors),
                }
            }
            fence = None;
            continue;
        }
        if let Some(info) = line.trim_start().strip_prefix("```") {
            if line.starts_with(' ') {
                errors.push(format!("line {no}: a code fence must not be indented"));
            }
            if info != "sql" && info != "text" {
                errors.push(format!(
                    "line {no}: code block {info:?}: use ```sql for examples (they run) or ```text"
                ));
            }
            header_done(&doc, current, &mut state, no, &mut errors);
            fence = Some((no, info.to_string(), Vec::new()));
            continue;
        }

        if line.starts_with('#') {
            header_done(&doc, current, &mut state, no, &mut errors);
            let level = line.chars().take_while(|&c| c == '#').count();
            let title = line[level..].strip_prefix(' ').unwrap_or("");
            match level {
                1 | 2 => current = None,
                3 => {
                    if !is_identifier(title) {
                        errors.push(format!(
                            "line {no}: \"### {title}\": a ### heading is a function entry, named by the function alone"
                        ));
                    }
                    if let Some(first) = names.insert(title.to_string(), no) {
                        errors.push(format!(
                            "line {no}: a second entry for {title} (the first is on line {first}); overloads share one entry"
                        ));
                    }
                    doc.entries.push(Entry {
                        name: title.to_string(),
                        line: no,
                        signatures: Vec::new(),
                        comments: Vec::new(),
                        has_errors: false,
                        blocks: Vec::new(),
                    });
                    current = Some(doc.entries.len() - 1);
                    state = Header::AfterHeading;
                }
                _ => errors.push(format!(
                    "line {no}: only #, ## and ### headings (a ### heading is a function entry)"
                )),
            }
            continue;
        }

        let signature = line.strip_prefix("    ").filter(|s| s.starts_with("agent_memory."));
        let comment = line.strip_prefix("> ").or_else(|| (line == ">").then_some(""));
        let Some(i) = current else {
            if signature.is_some() {
                errors
                    .push(format!("line {no}: a signature line outside a function entry's header"));
            }
            continue;
        };
        let name = doc.entries[i].name.clone();
        match (state, signature, comment) {
            (Header::AfterHeading | Header::AfterSignatures, _, _) if line.is_empty() => {}
            (Header::AfterHeading | Header::Signatures, Some(signature), _) => {
                doc.entries[i].signatures.push(signature.to_string());
                state = Header::Signatures;
            }
            (Header::Signatures, _, _) if line.is_empty() => state = Header::AfterSignatures,
            (Header::AfterSignatures | Header::Comments, _, Some(comment)) => {
                doc.entries[i].comments.push(unescape(comment));
                state = Header::Comments;
            }
            (Header::Comments, _, _) if line.is_empty() => state = Header::Body,
            (Header::Body, signature, comment) => {
                if signature.is_some() {
                    errors.push(format!(
                        "line {no}: entry {name}: a signature line after the entry's header"
                    ));
                }
                if comment.is_some() {
                    errors.push(format!(
                        "line {no}: entry {name}: a \"> \" line after the comment (the one quoted line is the function's comment)"
                    ));
                }
                if line.starts_with("Errors:") {
                    doc.entries[i].has_errors = true;
                }
            }
            (expected, _, _) => {
                errors.push(format!(
                    "line {no}: entry {name}: expected {}",
                    match expected {
                        Header::AfterHeading => format!(
                            "a blank line, then its signature lines (4 spaces, agent_memory.{name}(...) → ...)"
                        ),
                        Header::Signatures => "another signature line or a blank line".into(),
                        Header::AfterSignatures =>
                            "a blank line, then its comment as a \"> \" line".into(),
                        _ => "a blank line after the comment".into(),
                    }
                ));
                state = Header::Body;
            }
        }
    }
    if let Some((start, _, _)) = fence {
        errors.push(format!("line {start}: a code block that never closes"));
    }
    header_done(&doc, current, &mut state, text.lines().count(), &mut errors);
    if errors.is_empty() { Ok(doc) } else { Err(errors) }
}

/// The entry's header ends here (at a heading or a code block): it must be
/// complete.
fn header_done(
    doc: &Doc, current: Option<usize>, state: &mut Header, no: usize, errors: &mut Vec<String>,
) {
    let Some(i) = current else { return };
    if !matches!(*state, Header::Body | Header::Comments) {
        errors.push(format!(
            "line {no}: entry {} ends its header without {}",
            doc.entries[i].name,
            if doc.entries[i].signatures.is_empty() {
                "a signature line"
            } else {
                "a \"> \" comment line"
            }
        ));
    }
    *state = Header::Body;
}

/// The statements of a ```sql block with the output written under each.
fn parse_block(lines: &[(usize, String)]) -> Result<Vec<Statement>, Vec<String>> {
    let mut statements: Vec<Statement> = Vec::new();
    let mut errors = Vec::new();
    // The statement being read: its first line and its lines.
    let mut pending: Option<(usize, Vec<String>)> = None;
    // The last complete statement and its expected-output lines, while they
    // may still grow.
    let mut open: Option<(usize, String, Lines)> = None;

    let close = |open: &mut Option<(usize, String, Lines)>,
                 statements: &mut Vec<Statement>,
                 errors: &mut Vec<String>| {
        if let Some((line, sql, outputs)) = open.take() {
            let expect_line = outputs.first().map_or(line, |(n, _)| *n);
            match parse_expected(&outputs) {
                Ok(expect) => statements.push(Statement { line, sql, expect, expect_line }),
                Err(mut e) => errors.append(&mut e),
            }
        }
    };

    for (no, raw) in lines {
        let no = *no;
        let line = raw.trim_end();
        if line.is_empty() {
            if pending.is_some() {
                errors.push(format!("line {no}: a blank line inside a statement"));
            }
            close(&mut open, &mut statements, &mut errors);
            continue;
        }
        if line.starts_with("--") {
            if pending.is_some() {
                errors.push(format!(
                    "line {no}: a comment inside a statement (a statement ends with a line ending in \";\")"
                ));
                continue;
            }
            let Some((_, _, outputs)) = open.as_mut() else {
                errors.push(format!(
                    "line {no}: an output line with no statement right above it (examples have no free comments)"
                ));
                continue;
            };
            if line != "--" && !line.starts_with("-- ") {
                errors.push(format!(
                    "line {no}: an output line starts with \"-- \" (dash, dash, space)"
                ));
                continue;
            }
            outputs.push((no, line.get(3..).unwrap_or("").to_string()));
            continue;
        }
        close(&mut open, &mut statements, &mut errors);
        if pending.is_none() && !line.starts_with(|c: char| c.is_ascii_alphabetic()) {
            errors.push(format!(
                "line {no}: a statement starts with an SQL keyword, not {:?}",
                line.chars().next().unwrap_or(' ')
            ));
        }
        let (_, sql_lines) = pending.get_or_insert_with(|| (no, Vec::new()));
        sql_lines.push(line.to_string());
        if line.ends_with(';') {
            let (first, sql_lines) = pending.take().unwrap_or_default();
            open = Some((first, sql_lines.join("\n"), Vec::new()));
        }
    }
    if let Some((first, _)) = pending {
        errors.push(format!(
            "line {first}: a statement that does not end with \";\" before the block ends"
        ));
    }
    close(&mut open, &mut statements, &mut errors);
    if errors.is_empty() { Ok(statements) } else { Err(errors) }
}

/// The expected output from a statement's comment lines (the text after
/// "-- ", with its line number).
fn parse_expected(outputs: &[(usize, String)]) -> Result<Expect, Vec<String>> {
    if outputs.is_empty() {
        return Ok(Expect::Success);
    }
    let mut errors = Vec::new();
    // Logical lines: a line starting with two or more spaces continues the
    // previous one.
    let mut logical: Vec<(usize, String)> = Vec::new();
    for (no, text) in outputs {
        if text.starts_with("  ") {
            match logical.last_mut() {
                Some((_, previous)) => {
                    previous.push(' ');
                    previous.push_str(text.trim_start());
                }
                None => errors.push(format!(
                    "line {no}: a continuation line (two or more spaces) with nothing to continue"
                )),
            }
        } else if text.starts_with(' ') {
            errors.push(format!(
                "line {no}: an output line starts with \"--  \" (one extra space): continue a row with two or more, or write none"
            ));
        } else {
            logical.push((*no, text.clone()));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let (first_no, first) = &logical[0];
    if first.starts_with("ERROR") {
        let parsed = first.strip_prefix("ERROR ").and_then(|rest| {
            let (code, message) = rest.split_once(": ")?;
            let valid = code.len() == 5
                && code.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase());
            valid.then(|| (code.to_string(), message.to_string()))
        });
        let Some((code, message)) = parsed else {
            return Err(vec![format!(
                "line {first_no}: an error is written \"-- ERROR <SQLSTATE>: <message>\""
            )]);
        };
        let mut failure = Failure { code, message, detail: None, hint: None };
        for (no, text) in &logical[1..] {
            if let Some(detail) = text.strip_prefix("DETAIL: ") {
                if failure.detail.is_some() || failure.hint.is_some() {
                    errors.push(format!("line {no}: DETAIL comes once, before HINT"));
                }
                failure.detail = Some(detail.to_string());
            } else if let Some(hint) = text.strip_prefix("HINT: ") {
                if failure.hint.is_some() {
                    errors.push(format!("line {no}: HINT comes once"));
                }
                failure.hint = Some(hint.to_string());
            } else {
                errors.push(format!(
                    "line {no}: after \"-- ERROR ...\" only \"-- DETAIL: ...\" and \"-- HINT: ...\" lines"
                ));
            }
        }
        return if errors.is_empty() { Ok(Expect::Error(failure)) } else { Err(errors) };
    }
    let mut rows = Vec::new();
    for (no, text) in &logical {
        if text.starts_with("ERROR") || text.starts_with("DETAIL") || text.starts_with("HINT") {
            errors.push(format!(
                "line {no}: ERROR, DETAIL and HINT lines belong to an error, which comes first"
            ));
        } else if text.starts_with("(0 row") && (text != "(0 rows)" || logical.len() > 1) {
            errors.push(format!("line {no}: \"-- (0 rows)\" stands alone"));
        }
        rows.push(text.clone());
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    if rows == ["(0 rows)"] {
        rows.clear();
    }
    Ok(Expect::Rows(rows))
}

/// Whether `text` is `pattern`, where `…` in the pattern stands for any
/// characters (none included).
fn matches(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('…').collect();
    let [first, middle @ .., last] = parts.as_slice() else {
        return pattern == text;
    };
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

// ---------------------------------------------------------------------------
// The catalog

/// A function name's overloads as the catalog has them.
#[derive(Debug, Default)]
struct Function {
    /// Signature lines as the reference writes them, in a stable order.
    signatures: Vec<String>,
    /// The comment of each (None: no COMMENT ON FUNCTION).
    comments: Vec<Option<String>>,
    /// Whether it returns trigger.
    trigger: bool,
}

#[test]
fn reference_documents_every_function_as_the_catalog_has_it() {
    let doc = parse(&read_reference()).unwrap_or_else(|errors| {
        panic!("docs/reference.md is not in the reference's format:\n  {}", errors.join("\n  "))
    });

    let db = "agent_memory_reference_catalog";
    let mut client = fresh_database(db);
    let mut catalog: BTreeMap<String, Function> = BTreeMap::new();
    for row in client
        .query(
            "SELECT p.proname::text,
                    'agent_memory.' || p.proname || '(' || pg_catalog.pg_get_function_arguments(p.oid)
                      || ') → ' || pg_catalog.pg_get_function_result(p.oid),
                    pg_catalog.obj_description(p.oid, 'pg_proc'),
                    p.prorettype = 'pg_catalog.trigger'::pg_catalog.regtype
             FROM pg_catalog.pg_proc p
             WHERE p.pronamespace = 'agent_memory'::pg_catalog.regnamespace
             ORDER BY 1, 2",
            &[],
        )
        .expect("list the functions")
    {
        let function = catalog.entry(row.get(0)).or_default();
        function.signatures.push(row.get(1));
        function.comments.push(row.get(2));
        function.trigger |= row.get::<_, bool>(3);
    }
    drop(client);
    drop_database(db);
    assert!(!catalog.is_empty(), "no functions in schema agent_memory");

    let mut problems = Vec::new();
    let documented: BTreeSet<&str> = doc.entries.iter().map(|e| e.name.as_str()).collect();
    for (name, Function { signatures, .. }) in &catalog {
        if !documented.contains(name.as_str()) {
            problems.push(format!(
                "{name}: not documented (add \"### {name}\" with {})",
                signatures.join(" and ")
            ));
        }
    }
    for entry in &doc.entries {
        let name = &entry.name;
        let Some(Function { signatures, comments, trigger }) = catalog.get(name) else {
            problems.push(format!(
                "{name} (line {}): documented, but schema agent_memory has no such function",
                entry.line
            ));
            continue;
        };
        let mut documented_signatures = entry.signatures.clone();
        documented_signatures.sort();
        if &documented_signatures != signatures {
            problems.push(format!(
                "{name} (line {}): signature lines differ from the catalog's\n    reference: {}\n    catalog:   {}",
                entry.line,
                entry.signatures.join("\n               "),
                signatures.join("\n               ")
            ));
        }
        // One comment for all overloads when they share it, else one per
        // signature line, in the order of the signature lines.
        let wanted: Vec<Option<String>> = entry
            .signatures
            .iter()
            .map(|s| signatures.iter().position(|c| c == s).and_then(|i| comments[i].clone()))
            .collect();
        for (signature, comment) in entry.signatures.iter().zip(&wanted) {
            if comment.is_none() && signatures.contains(signature) {
                problems.push(format!(
                    "{name}: {signature} has no COMMENT ON FUNCTION (\\df+ shows none)"
                ));
            }
        }
        let shared = wanted.iter().all(|c| c == &wanted[0]);
        let documented_comments: Vec<Option<String>> =
            entry.comments.iter().cloned().map(Some).collect();
        let comments_match = if shared && documented_comments.len() == 1 {
            documented_comments[0] == wanted[0]
        } else {
            documented_comments == wanted
        };
        if !comments_match && wanted.iter().all(Option::is_some) {
            problems.push(format!(
                "{name} (line {}): the quoted comment differs from COMMENT ON FUNCTION (\\df+)\n    reference: {}\n    catalog:   {}",
                entry.line,
                entry.comments.join("\n               "),
                wanted
                    .iter()
                    .map(|c| c.clone().unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n               ")
            ));
        }
        if !entry.has_errors {
            problems.push(format!(
                "{name} (line {}): no \"Errors:\" paragraph (write \"Errors: none.\" when it raises none)",
                entry.line
            ));
        }
        let statements = || entry.blocks.iter().flat_map(|&b| doc.blocks[b].statements.iter());
        if *trigger {
            if statements().next().is_none() {
                problems.push(format!(
                    "{name} (line {}): no example (show a statement that fires the trigger)",
                    entry.line
                ));
            }
        } else {
            let call = format!("agent_memory.{name}(");
            if !statements().any(|s| s.sql.contains(&call) && s.expect != Expect::Success) {
                problems.push(format!(
                    "{name} (line {}): no example calls {call}...) and shows its output",
                    entry.line
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/reference.md and the catalog disagree ({} problems):\n  {}",
        problems.len(),
        problems.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// The examples

/// What a statement gave.
#[derive(Debug)]
enum Got {
    Rows(Vec<String>),
    Error(Failure),
}

impl Got {
    /// As the reference writes it.
    fn written(&self) -> String {
        let mut out = String::new();
        match self {
            Got::Rows(rows) if rows.is_empty() => out.push_str("-- (0 rows)\n"),
            Got::Rows(rows) => {
                for row in rows {
                    let _ = writeln!(out, "-- {row}");
                }
            }
            Got::Error(f) => {
                let _ = writeln!(out, "-- ERROR {}: {}", f.code, f.message);
                if let Some(detail) = &f.detail {
                    let _ = writeln!(out, "-- DETAIL: {detail}");
                }
                if let Some(hint) = &f.hint {
                    let _ = writeln!(out, "-- HINT: {hint}");
                }
            }
        }
        out
    }
}

fn written(expect: &Expect) -> String {
    match expect {
        Expect::Success => "(success, output not checked)\n".into(),
        Expect::Rows(rows) => Got::Rows(rows.clone()).written(),
        Expect::Error(f) => Got::Error(Failure {
            code: f.code.clone(),
            message: f.message.clone(),
            detail: f.detail.clone(),
            hint: f.hint.clone(),
        })
        .written(),
    }
}

fn run(client: &mut postgres::Client, sql: &str) -> Got {
    match client.simple_query(sql) {
        Ok(messages) => Got::Rows(
            messages
                .iter()
                .filter_map(|m| match m {
                    SimpleQueryMessage::Row(row) => Some(
                        (0..row.len())
                            .map(|i| row.get(i).unwrap_or("NULL"))
                            .collect::<Vec<_>>()
                            .join(" | "),
                    ),
                    _ => None,
                })
                .collect(),
        ),
        Err(e) => match e.as_db_error() {
            Some(db) => Got::Error(Failure {
                code: db.code().code().to_string(),
                message: db.message().to_string(),
                detail: db.detail().map(str::to_string),
                hint: db.hint().map(str::to_string),
            }),
            None => panic!("the connection failed running {sql:?}: {e}"),
        },
    }
}

/// Why `got` is not what `expect` says; None when it is.
fn mismatch(expect: &Expect, got: &Got) -> Option<String> {
    let same = |pattern: &Option<String>, text: &Option<String>| match (pattern, text) {
        (None, None) => true,
        (Some(p), Some(t)) => matches(p.trim_end(), t.trim_end()),
        _ => false,
    };
    match (expect, got) {
        (Expect::Success, Got::Rows(_)) => None,
        (Expect::Success, Got::Error(_)) => Some("an unexpected error".into()),
        (Expect::Rows(_), Got::Error(_)) => Some("an error instead of rows".into()),
        (Expect::Error(_), Got::Rows(_)) => Some("rows instead of the error".into()),
        (Expect::Rows(want), Got::Rows(have)) => {
            if want.len() != have.len() {
                return Some(format!("{} rows instead of {}", have.len(), want.len()));
            }
            want.iter()
                .zip(have)
                .position(|(w, h)| !matches(w.trim_end(), h.trim_end()))
                .map(|i| format!("row {} differs", i + 1))
        }
        (Expect::Error(want), Got::Error(have)) => {
            if want.code != have.code {
                Some(format!("SQLSTATE {} instead of {}", have.code, want.code))
            } else if !matches(&want.message, &have.message) {
                Some("the error message differs".into())
            } else if !same(&want.detail, &have.detail) {
                Some("the DETAIL differs".into())
            } else if !same(&want.hint, &have.hint) {
                Some("the HINT differs".into())
            } else {
                None
            }
        }
    }
}

#[test]
fn reference_examples_give_the_documented_output() {
    let doc = parse(&read_reference()).unwrap_or_else(|errors| {
        panic!("docs/reference.md is not in the reference's format:\n  {}", errors.join("\n  "))
    });
    let show = std::env::var_os("AGENT_MEMORY_REFERENCE_SHOW").is_some();
    let db = "agent_memory_reference";
    let mut client = fresh_database(db);
    let mut failures = Vec::new();
    let mut count = 0;
    'blocks: for block in &doc.blocks {
        for statement in &block.statements {
            count += 1;
            let got = run(&mut client, &statement.sql);
            if show {
                println!("{}\n{}", statement.sql, got.written());
            }
            if let Some(why) = mismatch(&statement.expect, &got) {
                failures.push(format!(
                    "docs/reference.md line {}: {why}\nstatement (line {}):\n{}\nexpected (line {}):\n{}got:\n{}",
                    statement.line,
                    statement.line,
                    statement.sql,
                    statement.expect_line,
                    written(&statement.expect),
                    got.written()
                ));
                if !show {
                    break 'blocks;
                }
            }
        }
    }
    drop(client);
    drop_database(db);
    assert!(count > 0, "docs/reference.md has no ```sql examples");
    assert!(
        failures.is_empty(),
        "an example of the SQL reference does not give its documented output \
         (the first mismatch; AGENT_MEMORY_REFERENCE_SHOW=1 shows them all):\n\n{}",
        failures.join("\n\n")
    );
    println!("{count} example statements of docs/reference.md give their documented output");
}

// ---------------------------------------------------------------------------
// The checker itself

/// A small well-formed entry, to break in the tests below.
const SAMPLE: &str = "# Title

## Meta

### version

    agent_memory.version() → text

> Version of the loaded library

What it does.

Errors: none.

```sql
SELECT agent_memory.version();
-- 0.2.0
SELECT 1 AS a, NULL AS b;
-- 1 | NULL
SELECT '{\"a\": 1, \"b\": 2}'::jsonb;
-- {\"a\": 1,
--   \"b\": 2}
SELECT 1 WHERE false;
-- (0 rows)
SET timezone = 'UTC';
SELECT 1/0;
-- ERROR 22012: division by zero
```
";

#[test]
fn reference_format_is_parsed_strictly() {
    let doc = parse(SAMPLE).expect("the sample parses");
    assert_eq!(doc.entries.len(), 1);
    assert_eq!(doc.entries[0].signatures, ["agent_memory.version() → text"]);
    assert_eq!(doc.entries[0].comments, ["Version of the loaded library"]);
    let statements = &doc.blocks[0].statements;
    assert_eq!(statements.len(), 6);
    assert_eq!(statements[2].expect, Expect::Rows(vec![r#"{"a": 1, "b": 2}"#.into()]));
    assert_eq!(statements[3].expect, Expect::Rows(vec![]));
    assert_eq!(statements[4].expect, Expect::Success);
    assert_eq!(
        statements[5].expect,
        Expect::Error(Failure {
            code: "22012".into(),
            message: "division by zero".into(),
            detail: None,
            hint: None
        })
    );

    // Each of these typos must be an error, never silently skipped.
    let broken = [
        ("-- 0.2.0", "--0.2.0", "starts with \"-- \""),
        ("-- 0.2.0", "--  0.2.0", "one extra space"),
        ("-- 0.2.0", "# 0.2.0", "starts with an SQL keyword"),
        ("-- 0.2.0", "- 0.2.0", "starts with an SQL keyword"),
        ("## Meta", "#### Meta", "only #, ## and ###"),
        (
            "-- ERROR 22012: division by zero",
            "-- ERROR: 22012: division by zero",
            "an error is written",
        ),
        (
            "-- ERROR 22012: division by zero",
            "-- ERROR 22012: division by zero\n-- CONTEXT: x",
            "only \"-- DETAIL",
        ),
        ("-- (0 rows)", "-- (0 row)", "stands alone"),
        (
            "```sql\nSELECT agent_memory.version();",
            "```SQL\nSELECT agent_memory.version();",
            "use ```sql",
        ),
        (
            "```sql\nSELECT agent_memory.version();",
            "```\nSELECT agent_memory.version();",
            "use ```sql",
        ),
        ("SELECT 1 WHERE false;", "SELECT 1 WHERE false", "a comment inside a statement"),
        ("SELECT 1/0;\n-- ERROR 22012: division by zero", "SELECT 1/0", "does not end with"),
        ("    agent_memory.version() → text", "   agent_memory.version() → text", "expected"),
        ("> Version of the loaded library", ">Version of the loaded library", "expected"),
        ("### version", "### version()", "named by the function alone"),
        ("SET timezone = 'UTC';", "\n-- a free comment\nSET timezone = 'UTC';", "no free comments"),
        ("What it does.", "> another quote", "after the comment"),
        ("-- 1 | NULL", "-- 1 | NULL\n-- ERROR 22012: x", "belong to an error"),
        ("division by zero\n```", "division by zero\n```sql", "closes with a line of just"),
    ];
    for (from, to, why) in broken {
        assert!(SAMPLE.contains(from), "{from:?} is in the sample");
        let text = SAMPLE.replacen(from, to, 1);
        match parse(&text) {
            Ok(_) => panic!("{to:?} in place of {from:?} parses, but should not"),
            Err(errors) => assert!(
                errors.iter().any(|e| e.contains(why)),
                "{to:?} in place of {from:?}: expected an error saying {why:?}, got {errors:?}"
            ),
        }
    }

    assert!(matches("a…c", "abbbc"));
    assert!(matches("a…c", "ac"));
    assert!(matches("…", ""));
    assert!(matches("{\"at\": \"…Z\", \"n\": …}", "{\"at\": \"2026-01-01T00:00:00Z\", \"n\": 3}"));
    assert!(!matches("a…c", "abd"));
    assert!(!matches("ab…bc", "abc"));
    assert!(!matches("abc", "abcd"));
    assert_eq!(unescape(r"a node's \<id>.md"), "a node's <id>.md");
}
