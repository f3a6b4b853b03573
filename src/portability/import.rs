//! Import: one line of an export per call, each in its own subtransaction,
//! so that a line is taken whole or refused whole and the caller's
//! transaction goes on either way. A line passes the checks of the write
//! functions of its kind (ids, sizes, paths, sensitive data, budgets and
//! limits) before anything is written. An item already there as the line
//! has it is unchanged, so an import run twice leaves one copy; an item
//! there with other content is refused, never overwritten. Kept versions
//! go in beside the item, each once, and only as many as writes keep: a
//! line that would leave an entry or a file with versions beyond
//! agent_memory.history_retention is refused. A part, a graph node, a file or a
//! directory imported is announced at commit, as its write function's
//! change would be.
//!
//! Every statement reads and writes only rows whose tenant is
//! agent_memory.caller_tenant(): a tenant imports into its own rows only.

use pgrx::prelude::*;
use serde_json::{Value, json};

use agent_memory_core::Error;
use agent_memory_core::error::{ErrorKind, quoted};
use agent_memory_core::files::memory_tool as files;
use agent_memory_core::graph::{self, Content};
use agent_memory_core::portability::{self as lines, Item, Outcome, Renames, RunKind};
use agent_memory_core::sessions::{budget, kv, words};
use agent_memory_core::working_memory as wm;

use crate::files::store::{self, Placed};
use crate::files::versions;
use crate::graph::nodes::{checked_node, checked_owner, checked_size, content_args};
use crate::pg::args::{INT4, JSONB, TEXT, TEXT_ARRAY, checked_keys};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::notify;
use crate::pg::plans::{Columns, Rows, Statement, first_value_of, on_citus};
use crate::pg::settings;
use crate::pg::subtransaction::{Failure, in_subtransaction};
use crate::sessions::{idle_timeout_minutes, lock_session, sensitive};
use crate::working_memory::parts::{node_key, strip_keys};

/// Take one line of an export into the caller's tenant, its keys renamed
/// as the arguments say. Returns `{"ok": true, "kind": …, "status":
/// "imported" | "unchanged" | "expired"}`, or `{"ok": false, "kind": …,
/// "status": "refused", "error": {"code": SQLSTATE, "message": …, "detail":
/// …, "hint": …}}` (detail and hint when the error has them) when the line
/// was refused and nothing of it written.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn import(
    line: Option<&str>, session_id: default!(Option<&str>, "NULL"),
    user_id: default!(Option<&str>, "NULL"), owner: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let renames = checked_keys(session_id, user_id, owner, scope)?;
    Ok(JsonbBytes::from_value(import_line(parsed(line, &renames))?))
}

/// Take the lines of an export, in order, as `import` takes each one, and
/// return `import`'s result for each, in the same order. A run of
/// entries of one session, of plain messages of one thread or of new files
/// of one scope goes in a few statements, and the other lines one by one,
/// all in one subtransaction. When a line would be refused, that is rolled
/// back and each run goes in a subtransaction of its own; a run with the
/// refused line is taken line by line.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn import_lines(
    lines: Option<Vec<Option<String>>>, session_id: default!(Option<&str>, "NULL"),
    user_id: default!(Option<&str>, "NULL"), owner: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "NULL"),
) -> Result<SetOfIterator<'static, pgrx::JsonB>, pgrx::pg_sys::panic::ErrorReport> {
    let renames = checked_keys(session_id, user_id, owner, scope)?;
    let lines = lines.ok_or_else(|| Error::null("lines")).or_report()?;
    let mut parsed: Vec<Parsed> =
        lines.iter().map(|line| parsed(line.as_deref(), &renames)).collect();
    refuse_lines_of_other_users_sessions(&mut parsed)?;
    // Citus routes a statement to one key's shard: there the lines go one
    // by one, each statement naming its line's key, as import's do.
    if on_citus()? {
        return Ok(SetOfIterator::new(
            import_by_runs(&parsed, Vec::new())?.into_iter().map(pgrx::JsonB),
        ));
    }
    let runs = lines::runs(&parsed);
    // All lines in one subtransaction first; when one would be refused,
    // that is rolled back and each run goes in a subtransaction of its own.
    let results = match in_subtransaction(|| import_together(&parsed, &runs)) {
        Ok(results) => results,
        Err(_) => import_by_runs(&parsed, runs)?,
    };
    Ok(SetOfIterator::new(results.into_iter().map(pgrx::JsonB)))
}

/// When a session line names a session there of another user, it is
/// refused, and so are its session's other lines: they would land in
/// another user's session. The session's write lock is held from here,
/// so the session stays as it was read.
fn refuse_lines_of_other_users_sessions(parsed: &mut [Parsed]) -> SqlResult<()> {
    let mut refused: Vec<String> = Vec::new();
    for item in parsed.iter() {
        if let Ok(Item::Session(s)) = item
            && !refused.contains(&s.session_id)
        {
            lock_session(&s.session_id)?;
            let args = [s.session_id.as_str().into(), s.user_id.as_deref().into()];
            if first_value_of::<bool>(&OF_ANOTHER_USER, &args)? == Some(true) {
                refused.push(s.session_id.clone());
            }
        }
    }
    for line in parsed.iter_mut() {
        let (kind, session_id) = match line {
            Ok(Item::Entry(e)) => ("kv", &e.session_id),
            Ok(Item::Part(p)) => ("part", &p.session_id),
            Ok(Item::Message(m)) => ("message", &m.session_id),
            Ok(Item::MessageSeq(n)) => ("message_seq", &n.session_id),
            Ok(Item::EntryHistory(h)) => ("kv_history", &h.session_id),
            _ => continue,
        };
        if refused.contains(session_id) {
            let message = format!(
                "session {} exists with another user: its lines are not imported",
                quoted(session_id)
            );
            *line = Err((Some(kind), Error::conflict(message).into()));
        }
    }
    Ok(())
}

/// The lines' results, `runs` written together and every other line alone,
/// all or none: an error is raised when a line would be refused, so that
/// the caller's subtransaction rolls back what the others wrote.
fn import_together(parsed: &[Parsed], runs: &[(RunKind, std::ops::Range<usize>)]) -> Vec<Value> {
    let mut results = Vec::with_capacity(parsed.len());
    let mut runs = runs.iter().peekable();
    let mut at = 0;
    while at < parsed.len() {
        if let Some((kind, range)) = runs.next_if(|(_, range)| range.start == at) {
            let items: Vec<&Item> = parsed[range.clone()].iter().flatten().collect();
            for (item, outcome) in items.iter().zip(write_run(*kind, &items)) {
                results.push(taken(item.kind(), outcome));
            }
            at = range.end;
            continue;
        }
        results.push(match &parsed[at] {
            Ok(item) => taken(item.kind(), import_item(item)),
            Err((kind, failure)) => refused(*kind, failure),
        });
        at += 1;
    }
    results
}

/// The lines' results, each run in a subtransaction, taken line by line
/// when a line of it would be refused.
fn import_by_runs(
    parsed: &[Parsed], runs: Vec<(RunKind, std::ops::Range<usize>)>,
) -> SqlResult<Vec<Value>> {
    let mut runs = runs.into_iter().peekable();
    let mut results = Vec::with_capacity(parsed.len());
    let mut at = 0;
    while at < parsed.len() {
        if let Some((kind, range)) = runs.next_if(|(_, range)| range.start == at) {
            let items: Vec<&Item> = parsed[range.clone()].iter().flatten().collect();
            if let Ok(outcomes) = in_subtransaction(|| write_run(kind, &items)) {
                for (item, outcome) in items.iter().zip(outcomes) {
                    results.push(taken(item.kind(), outcome));
                }
                at = range.end;
                continue;
            }
        }
        results.push(import_line(parsed[at].clone())?);
        at += 1;
    }
    Ok(results)
}

/// A line read, or its refusal: the kind it names, and why.
type Parsed = Result<Item, (Option<&'static str>, Failure)>;

fn parsed(line: Option<&str>, renames: &Renames<'_>) -> Parsed {
    let Some(line) = line else {
        let null = Error::new(ErrorKind::NullValue, "line is NULL");
        return Err((None, null.into()));
    };
    lines::parse_line(line, renames).map_err(|e| (lines::kind_of(line), e.into()))
}

/// Import one line in its own subtransaction: its result.
fn import_line(parsed: Parsed) -> SqlResult<Value> {
    let item = match parsed {
        Ok(item) => item,
        Err((kind, failure)) => return Ok(refused(kind, &failure)),
    };
    let kind = item.kind();
    Ok(match in_subtransaction(move || import_item(&item)) {
        Ok(outcome) => taken(kind, outcome),
        // A bug is not the line's fault: it is raised, as anywhere else.
        Err(failure) if failure.sqlstate == "XX000" => {
            return Err(crate::pg::error::report(Error::internal(failure.message)));
        }
        Err(failure) => refused(Some(kind), &failure),
    })
}

fn taken(kind: &str, outcome: Outcome) -> Value {
    json!({"ok": true, "kind": kind, "status": outcome.name()})
}

/// Write a run of lines: the outcome of each. An error is raised when a
/// line of the run would be refused or would not go as the others do,
/// so that the caller's subtransaction rolls back what the run wrote.
fn write_run(kind: RunKind, items: &[&Item]) -> Vec<Outcome> {
    let written = match kind {
        // Each line as alone, none in a subtransaction of its own: a row
        // the run writes twice (a session's, a scope's) is then written by
        // one subtransaction, not locked across many.
        RunKind::Lines => {
            items.iter().map(|item| write_item(item)).collect::<SqlResult<Vec<Outcome>>>().map(Some)
        }
        RunKind::Entries => import_entries(items),
        RunKind::Files => import_files(items),
        RunKind::Messages => {
            let run: Vec<&lines::Message> = items
                .iter()
                .filter_map(|item| match item {
                    Item::Message(m) => Some(m),
                    _ => None,
                })
                .collect();
            crate::messages::import_message_run(&run)
                .map(|done| done.then(|| vec![Outcome::Imported; run.len()]))
        }
    };
    match written {
        Ok(Some(outcomes)) if outcomes.len() == items.len() => outcomes,
        Ok(_) => raise(Error::conflict("the run goes line by line")),
        Err(report) => raise_report(report),
    }
}

fn raise(error: Error) -> ! {
    raise_report(crate::pg::error::report(error))
}

fn raise_report(report: pgrx::pg_sys::panic::ErrorReport) -> ! {
    report.report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}

/// A refused line's result; its error has a detail and a hint when the
/// refusal does.
fn refused(kind: Option<&str>, failure: &Failure) -> Value {
    let mut error = json!({"code": failure.sqlstate, "message": failure.message});
    for (field, text) in [("detail", &failure.detail), ("hint", &failure.hint)] {
        if let Some(text) = text {
            error[field] = json!(text);
        }
    }
    json!({"ok": false, "kind": kind, "status": "refused", "error": error})
}

/// Write an item; an error is raised, so that the subtransaction rolls
/// back whatever the item wrote.
fn import_item(item: &Item) -> Outcome {
    match write_item(item) {
        Ok(outcome) => outcome,
        Err(report) => raise_report(report),
    }
}

/// Write an item, or say why not (having written part of it, perhaps).
fn write_item(item: &Item) -> SqlResult<Outcome> {
    match item {
        Item::Session(s) => import_session(s),
        Item::Entry(e) => import_entry(e),
        Item::Part(p) => import_part(p),
        Item::Message(m) => crate::messages::import_message(
            &m.session_id,
            m.node_id.as_deref(),
            m.seq,
            m.keep,
            &m.role,
            &m.content,
            m.metadata.clone(),
            &m.created_at,
        ),
        Item::MessageSeq(n) => crate::messages::import_message_seq(&n.session_id, n.last_seq),
        Item::Node(n) => import_node(n),
        Item::File(f) => import_file(f),
        Item::Directory(d) => import_directory(d),
        Item::EntryHistory(h) => import_entry_history(h),
        Item::FileHistory(h) => import_file_history(h),
        Item::NodeHistory(h) => import_node_history(h),
    }
}

/// The latest an imported entry or kept version may expire, in minutes
/// from now: the longest agent_memory.memory_ttl takes, which is longer
/// than any ttl (at most 100 years), so no write keeps a value longer.
const LATEST_EXPIRY_MINUTES: i32 = i32::MAX;

fn expires_too_late(session_id: &str, key: &str) -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(Error::invalid(format!(
        "{} would expire later than any write keeps a value: at most {LATEST_EXPIRY_MINUTES} minutes (the longest agent_memory.memory_ttl) from now",
        crate::sessions::kv::entry_name(session_id, key)
    )))
}

/// Write the kept versions `versions` (each with its entry's key) of
/// entries of session `session_id`, refusing them all when one would
/// expire later than any write keeps a value.
fn write_entry_versions(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, versions: Value,
) -> SqlResult<()> {
    let too_late = IMPORT_ENTRY_VERSIONS
        .run(client, &[session_id.into(), JsonB(versions).into(), LATEST_EXPIRY_MINUTES.into()])?
        .first()
        .value::<String>(1)?;
    match too_late {
        Some(key) => Err(expires_too_late(session_id, &key)),
        None => Ok(()),
    }
}

fn exists_otherwise(what: String) -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(Error::conflict(format!("{what} exists with other content")))
}

fn missing_session(session_id: &str) -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(Error::not_found(format!(
        "session {} does not exist or has expired: import its session line first",
        quoted(session_id)
    )))
}

fn import_session(s: &lines::Session) -> SqlResult<Outcome> {
    lock_session(&s.session_id)?;
    Spi::connect_mut(|client| {
        // The idle timeout obeys create_session's rule (PostgreSQL reads
        // the text; the domain then bounds it again).
        if let Some(idle_timeout) = s.idle_timeout.as_deref() {
            let read =
                AS_INTERVAL.read(client, &[idle_timeout.into()])?.first().value::<Interval>(1)?;
            crate::pg::args::checked_positive("idle_timeout", read)?;
        }
        // A session idle past its timeout since the export is not written
        // (its items are then refused, as those of a missing session),
        // unless it is there already.
        let idle_since_export = SESSION_LINE_EXPIRED
            .read(
                client,
                &[
                    s.last_activity_at.as_str().into(),
                    s.idle_timeout.as_deref().into(),
                    idle_timeout_minutes().into(),
                    s.created_at.as_str().into(),
                ],
            )?
            .first()
            .required::<bool>(1, "expired")?;
        if idle_since_export
            && SESSION_THERE.read(client, &[s.session_id.as_str().into()])?.is_empty()
        {
            return Ok(Outcome::Expired);
        }
        let table = IMPORT_SESSION.run(
            client,
            &[
                s.session_id.as_str().into(),
                s.user_id.as_deref().into(),
                s.project_id.as_deref().into(),
                s.active_node_id.as_deref().into(),
                JsonB(s.metadata.clone()).into(),
                s.idle_timeout.as_deref().into(),
                s.created_at.as_str().into(),
                s.last_activity_at.as_str().into(),
            ],
        )?;
        let row = table.first();
        if row.required::<bool>(1, "written")? {
            return Ok(Outcome::Imported);
        }
        if row.value::<bool>(2)? != Some(true) {
            return Err(crate::pg::error::report(Error::conflict(format!(
                "session {} exists with another user",
                quoted(&s.session_id)
            ))));
        }
        if row.value::<bool>(3)? != Some(true) {
            return Err(exists_otherwise(format!("session {}", quoted(&s.session_id))));
        }
        Ok(Outcome::Unchanged)
    })
}

fn import_entry(e: &lines::Entry) -> SqlResult<Outcome> {
    let words = checked_entry(e)?;
    let outcomes = write_entries(&e.session_id, &[(e, words)])?;
    outcomes.first().copied().ok_or_else(|| Error::internal("no outcome for the entry")).or_report()
}

/// A run of entries of one session, no key twice (see `import_entry`).
/// None, with nothing written, when a check of the write functions fails
/// for one of them; an error when the statement finds one that import
/// would refuse (the caller rolls back).
fn import_entries(items: &[&Item]) -> SqlResult<Option<Vec<Outcome>>> {
    let mut entries = Vec::with_capacity(items.len());
    for item in items {
        let Item::Entry(e) = item else {
            return Ok(None);
        };
        match checked_entry(e) {
            Ok(words) => entries.push((e, words)),
            Err(_) => return Ok(None),
        }
    }
    let Some((first, _)) = entries.first() else {
        return Ok(None);
    };
    let session_id = first.session_id.as_str();
    if entries.iter().any(|(e, _)| e.session_id != session_id) {
        return Ok(None);
    }
    write_entries(session_id, &entries).map(Some)
}

/// Check an entry as kv_set checks a write (its size, sensitive data, its
/// words against the budget) and its kept versions (their sizes, and as
/// many as the retention keeps): its words.
fn checked_entry(e: &lines::Entry) -> SqlResult<u64> {
    for value in std::iter::once(&e.value).chain(e.versions.iter().map(|v| &v.value)) {
        kv::check_value_size(&e.key, value).or_report()?;
        sensitive::guard_write(&e.key, value)?;
    }
    check_retention(
        e.versions.iter().map(|v| v.version),
        &crate::sessions::kv::entry_name(&e.session_id, &e.key),
    )?;
    let words = words::words_in_value(&e.value);
    budget::check_fits(&[(e.key.as_str(), words)], word_budget()).or_report()?;
    Ok(words)
}

/// Refuse what would leave `item` with kept versions numbered `kept` that
/// a write under agent_memory.history_retention would not keep.
fn check_retention(kept: impl IntoIterator<Item = i32>, item: &str) -> SqlResult<()> {
    lines::check_retention(settings::history_retention(), kept, item).or_report()
}

fn word_budget() -> u64 {
    settings::KV_WORD_BUDGET.get().max(0) as u64
}

/// Write checked entries of a session (with their words) in one statement
/// and their kept versions in another, as import takes each line in turn:
/// the outcome of each.
fn write_entries(session_id: &str, entries: &[(&lines::Entry, u64)]) -> SqlResult<Vec<Outcome>> {
    let rows: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(at, (e, words))| {
            json!({
                "at": at,
                "key": e.key,
                "value": e.value,
                "words": words,
                "version": e.version,
                "created_at": e.created_at,
                "updated_at": e.updated_at,
                "expires_at": e.expires_at,
                "versions": e.versions.iter()
                    .map(|v| json!({"version": v.version, "value": v.value}))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    lock_session(session_id)?;
    Spi::connect_mut(|client| {
        let table = IMPORT_ENTRIES.run(
            client,
            &[
                session_id.into(),
                JsonB(Value::Array(rows)).into(),
                idle_timeout_minutes().into(),
                LATEST_EXPIRY_MINUTES.into(),
            ],
        )?;
        let row = table.first();
        if !row.required::<bool>(1, "session found")? {
            return Err(missing_session(session_id));
        }
        // Each line checks the session's words after it, when it wrote:
        // the highest of those is the words before the lines plus the
        // highest running sum of the changes.
        if let Some(total) = row.value::<i64>(2)? {
            let change = row.required::<i64>(3, "change")?;
            let highest = total - change + row.required::<i64>(4, "highest running change")?;
            let budget = word_budget();
            if highest.max(0) as u64 > budget {
                // Lines of a run that break the budget are taken one by
                // one, so only a line alone reports this, with its name.
                let (e, _) = entries[0];
                return Err(crate::pg::error::report(Error::limit(format!(
                    "{} would bring its session to {highest} words; at most {budget} are allowed (agent_memory.kv_word_budget), and an import evicts nothing",
                    crate::sessions::kv::entry_name(session_id, &e.key)
                ))));
            }
        }
        let statuses = row.required::<Vec<String>>(5, "statuses")?;
        let mut outcomes = Vec::with_capacity(statuses.len());
        let mut versions = Vec::new();
        let mut versioned = Vec::new();
        for ((e, _), status) in entries.iter().zip(&statuses) {
            outcomes.push(match status.as_str() {
                "imported" => Outcome::Imported,
                "unchanged" => Outcome::Unchanged,
                "expired" => Outcome::Expired,
                "too late" => return Err(expires_too_late(session_id, &e.key)),
                "kept" => {
                    return Err(crate::pg::error::report(Error::conflict(format!(
                        "the versions kept of {} are another entry's (kv_purge_history removes them)",
                        crate::sessions::kv::entry_name(session_id, &e.key)
                    ))));
                }
                _ => {
                    return Err(exists_otherwise(crate::sessions::kv::entry_name(
                        session_id, &e.key,
                    )));
                }
            });
            if status != "expired" && !e.versions.is_empty() {
                versions.extend(keyed("key", &e.key, &e.versions));
                versioned.push(e.key.as_str());
            }
        }
        if !versions.is_empty() {
            write_entry_versions(client, session_id, Value::Array(versions))?;
            check_entries_retention(client, session_id, &versioned)?;
        }
        Ok(outcomes)
    })
}

/// Refuse when entries `keys` of a session, their kept versions just
/// imported, are left with versions beyond the retention: those of the
/// lines with those kept before (a deleted entry's, or the entry's there).
fn check_entries_retention(
    client: &mut pgrx::spi::SpiClient<'_>, session_id: &str, keys: &[&str],
) -> SqlResult<()> {
    let kept: Vec<(String, Vec<i32>)> = KEPT_ENTRY_VERSIONS
        .run(client, &[session_id.into(), keys.to_vec().into()])?
        .rows(&["key", "versions"])?;
    for (key, versions) in kept {
        check_retention(versions, &crate::sessions::kv::entry_name(session_id, &key))?;
    }
    Ok(())
}

/// Kept versions as IMPORT_ENTRY_VERSIONS and IMPORT_FILE_VERSIONS take
/// them: each with its item's key under `field` (an entry's "key", a
/// file's "path").
fn keyed<V: serde::Serialize>(field: &str, key: &str, versions: &[V]) -> Vec<Value> {
    versions
        .iter()
        .map(|v| {
            let mut version = serde_json::to_value(v).unwrap_or_default();
            version[field] = json!(key);
            version
        })
        .collect()
}

fn import_part(p: &lines::Part) -> SqlResult<Outcome> {
    let part = wm::Part::parse(&p.part).or_report()?;
    let node = node_key(p.node_id.as_deref())?;
    let value = wm::sanitise(part, p.value.clone(), &strip_keys()).or_report()?;
    lock_session(&p.session_id)?;
    Spi::connect_mut(|client| {
        let table = IMPORT_PART.run(
            client,
            &[
                p.session_id.as_str().into(),
                node.into(),
                part.name().into(),
                JsonB(value).into(),
                p.version.into(),
                p.created_at.as_str().into(),
                p.updated_at.as_str().into(),
                idle_timeout_minutes().into(),
            ],
        )?;
        let row = table.first();
        if !row.required::<bool>(1, "session found")? {
            return Err(missing_session(&p.session_id));
        }
        if row.required::<bool>(2, "written")? {
            notify::queue_change(&p.session_id, node, Some(part.name()), Some(p.version))?;
            return Ok(Outcome::Imported);
        }
        if row.value::<bool>(3)? == Some(true) {
            return Ok(Outcome::Unchanged);
        }
        Err(exists_otherwise(format!(
            "working-memory part {} of session {}",
            quoted(part.name()),
            quoted(&p.session_id)
        )))
    })
}

fn import_node(n: &lines::Node) -> SqlResult<Outcome> {
    let owner = checked_owner(Some(&n.owner))?;
    let node_id = checked_node(Some(&n.node_id))?;
    graph::check_title(&n.title).or_report()?;
    let links = graph::check_refs(&n.links).or_report()?;
    let content = Content {
        title: n.title.clone(),
        description: n.description.clone(),
        body: n.body.clone(),
        links,
    };
    checked_size(&content, None)?;
    let item = format!("graph node {} of owner {}", quoted(node_id), quoted(owner));
    Spi::connect_mut(|client| {
        let table = IMPORT_NODE.run(client, &node_args(owner, node_id, &content, n))?;
        let row = table.first();
        if let Some(field) = row.value::<String>(3)? {
            return Err(time_out_of_range(&format!("{field} of {item}")));
        }
        let written = row.required::<bool>(1, "written")?;
        let mut as_line = row.value::<bool>(2)?;
        if !written && as_line.is_none() {
            // The insert waited for a node that a concurrent transaction
            // wrote and committed after this statement's snapshot, which
            // does not show it: read it again with a new one.
            as_line = NODE_AS_LINE
                .run(client, &node_args(owner, node_id, &content, n))?
                .first()
                .value::<bool>(1)?;
        }
        let outcome = match (written, as_line) {
            (true, _) => {
                notify::queue_graph_change(owner)?;
                Outcome::Imported
            }
            (false, Some(true)) => Outcome::Unchanged,
            (false, Some(false)) => return Err(exists_otherwise(item)),
            // Still hidden: a snapshot of the whole transaction.
            (false, None) => {
                return Err(Error::new(
                    ErrorKind::VersionConflict,
                    format!("{item} was written by a concurrent transaction"),
                ))
                .or_report();
            }
        };
        import_node_versions(client, owner, node_id, &n.versions, &item)?;
        Ok(outcome)
    })
}

/// Versions of a graph node too many for its line: the node must be there
/// (its line comes first) and newer than each of them, and a version there
/// already of one of their numbers must hold the same (else the line is
/// refused as an entry's or a file's is).
fn import_node_history(h: &lines::NodeHistory) -> SqlResult<Outcome> {
    let owner = checked_owner(Some(&h.owner))?;
    let node_id = checked_node(Some(&h.node_id))?;
    let item = format!("graph node {} of owner {}", quoted(node_id), quoted(owner));
    let numbers = h.versions.len();
    let versions = node_versions_json(&h.versions)?;
    Spi::connect_mut(|client| {
        let current = NODE_FOR_HISTORY
            .run(client, &[owner.into(), node_id.into()])?
            .first()
            .value::<i32>(1)?;
        let Some(current) = current else {
            return Err(Error::new(ErrorKind::NotFound, format!("{item} does not exist")))
                .or_report();
        };
        if h.versions.iter().any(|v| v.version >= current) {
            return Err(Error::invalid(format!(
                "a kept version of {item} must be older than its version ({current})"
            )))
            .or_report();
        }
        let row = NODE_VERSIONS_THERE
            .read(client, &[owner.into(), node_id.into(), JsonB(versions.clone()).into()])?
            .first();
        let there = row.required::<i64>(1, "versions there")?.max(0) as usize;
        let disagree = row.required::<i64>(2, "versions disagreeing")? > 0;
        if disagree {
            return Err(Error::conflict(format!(
                "the versions kept of {item} disagree with those there"
            )))
            .or_report();
        }
        write_node_versions(client, owner, node_id, versions, &item)?;
        history_outcome(false, numbers.saturating_sub(there), numbers, item)
    })
}

/// Write kept versions of a node, each checked as a write checks a node;
/// those there already are left as they are.
fn import_node_versions(
    client: &mut pgrx::spi::SpiClient<'_>, owner: &str, node_id: &str, kept: &[lines::NodeVersion],
    item: &str,
) -> SqlResult<()> {
    if kept.is_empty() {
        return Ok(());
    }
    let versions = node_versions_json(kept)?;
    write_node_versions(client, owner, node_id, versions, item)
}

/// Kept versions of a node as IMPORT_NODE_VERSIONS takes them, each
/// checked as a write checks a node, with its links as stored and its refs.
fn node_versions_json(kept: &[lines::NodeVersion]) -> SqlResult<Value> {
    let mut versions = Vec::with_capacity(kept.len());
    for v in kept {
        let old = Content {
            title: v.title.clone(),
            description: v.description.clone(),
            body: v.body.clone(),
            links: graph::check_refs(&v.links).or_report()?,
        };
        checked_size(&old, Some(&v.change_description))?;
        let refs = old.refs();
        let mut version = serde_json::to_value(v).unwrap_or_default();
        version["links"] = json!(old.links);
        version["refs"] = json!(refs);
        versions.push(version);
    }
    Ok(Value::Array(versions))
}

/// Write kept versions `versions` (see `node_versions_json`) of a node,
/// once their times are checked; those there already are left as they are.
fn write_node_versions(
    client: &mut pgrx::spi::SpiClient<'_>, owner: &str, node_id: &str, versions: Value, item: &str,
) -> SqlResult<()> {
    let out_of_range = VERSION_OUT_OF_RANGE
        .read(client, &[JsonB(versions.clone()).into()])?
        .first()
        .value::<i32>(1)?;
    if let Some(version) = out_of_range {
        return Err(time_out_of_range(&format!("a time of kept version {version} of {item}")));
    }
    IMPORT_NODE_VERSIONS.run(client, &[owner.into(), node_id.into(), JsonB(versions).into()])?;
    Ok(())
}

/// A node's times are those graph_export can write as ISO 8601, as
/// graph_import takes them: the error of one that is not.
fn time_out_of_range(what: &str) -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(
        Error::invalid(format!("{what} is out of range")).with_detail(graph::TIME_RANGE),
    )
}

/// The arguments of IMPORT_NODE and NODE_AS_LINE.
fn node_args<'a>(
    owner: &'a str, node_id: &'a str, content: &'a Content, n: &'a lines::Node,
) -> Vec<pgrx::datum::DatumWithOid<'a>> {
    let mut args = content_args(owner, node_id, content);
    args.extend([
        n.version.into(),
        n.revision.into(),
        n.created_at.as_str().into(),
        n.updated_at.as_str().into(),
    ]);
    args
}

/// A path as the memory tool stores it: normalised already.
fn stored_path(path: &str) -> SqlResult<String> {
    let normal = files::normalise_path(path).map_err(|e| Error::invalid(e.message)).or_report()?;
    if normal != path || normal == "/" {
        return Err(Error::invalid(format!(
            "path {} is not a normalised file path (the memory tool stores {})",
            quoted(path),
            quoted(&normal)
        )))
        .or_report();
    }
    Ok(normal)
}

/// The path of a file's versions, as stored, once no version is larger
/// than a file may be.
fn checked_file_versions(path: &str, versions: &[lines::FileVersion]) -> SqlResult<String> {
    let path = stored_path(path)?;
    let max_bytes = store::max_file_bytes().max(0) as usize;
    if let Some(v) = versions.iter().find(|v| v.content.len() > max_bytes) {
        return Err(Error::limit(store::too_big(v.content.len() as i64).message)).or_report();
    }
    Ok(path)
}

fn import_file(f: &lines::File) -> SqlResult<Outcome> {
    let path = checked_file_versions(&f.path, &f.versions)?;
    let scope = f.scope.as_str();
    let item = format!("file {} of scope {}", quoted(&path), quoted(scope));
    check_retention(f.versions.iter().map(|v| v.version), &item)?;
    Spi::connect_mut(|client| {
        store::lock_scope(client, scope)?;
        let outcome = match store::lock_file(client, scope, &path)? {
            Some((version, content)) if version == f.version && content == f.content => {
                Outcome::Unchanged
            }
            Some(_) => {
                return Err(exists_otherwise(format!(
                    "file {} of scope {}",
                    quoted(&path),
                    quoted(scope)
                )));
            }
            None if !lines::kept_versions_agree(
                &versions::kept_at(client, scope, &path)?
                    .iter()
                    .map(|(version, content)| (*version, content.as_str()))
                    .collect::<Vec<_>>(),
                f,
            ) =>
            {
                return Err(crate::pg::error::report(Error::conflict(format!(
                    "the versions kept at {} of scope {} are another file's (memory_purge_history removes them)",
                    quoted(&path),
                    quoted(scope)
                ))));
            }
            None => match store::place_new_file(client, scope, &path, &f.content)? {
                Placed::Created(_) => {
                    IMPORT_FILE_STATE.run(
                        client,
                        &[
                            scope.into(),
                            path.as_str().into(),
                            f.version.into(),
                            f.created_at.as_str().into(),
                            f.updated_at.as_str().into(),
                        ],
                    )?;
                    notify::queue_files_change(scope)?;
                    Outcome::Imported
                }
                Placed::Exists => {
                    return Err(exists_otherwise(format!(
                        "file {} of scope {}",
                        quoted(&path),
                        quoted(scope)
                    )));
                }
                Placed::Refused(refusal) => {
                    return Err(crate::pg::error::report(refusal.into_sql_error()));
                }
            },
        };
        import_file_versions(client, scope, &[(&path, &f.versions)])?;
        if !f.versions.is_empty() {
            check_file_retention(client, scope, &path, &item)?;
        }
        Ok(outcome)
    })
}

/// Refuse when the file or history at `path`, its kept versions just
/// imported, is left with versions beyond the retention: those of the
/// line with those kept before (a deleted file's, or the file's there).
fn check_file_retention(
    client: &mut pgrx::spi::SpiClient<'_>, scope: &str, path: &str, item: &str,
) -> SqlResult<()> {
    let kept = KEPT_FILE_VERSIONS
        .run(client, &[scope.into(), path.into()])?
        .first()
        .value::<Vec<i32>>(1)?;
    check_retention(kept.unwrap_or_default(), item)
}

/// A run of new files of one scope, no path twice or under another (see
/// `import_file`): counted in the scope at once, then written in one
/// statement that finds their paths free. None, with nothing written, when
/// a file is too big or the scope has no room for them all; an error when
/// a path is not free or a file is there (the caller rolls back).
fn import_files(items: &[&Item]) -> SqlResult<Option<Vec<Outcome>>> {
    let max_bytes = store::max_file_bytes().max(0) as usize;
    let mut files = Vec::with_capacity(items.len());
    let mut rows = Vec::with_capacity(items.len());
    for item in items {
        let Item::File(f) = item else {
            return Ok(None);
        };
        let too_big = std::iter::once(&f.content)
            .chain(f.versions.iter().map(|v| &v.content))
            .any(|content| content.len() > max_bytes);
        let Ok(path) = stored_path(&f.path) else {
            return Ok(None);
        };
        // A new path has no kept versions (IMPORT_FILES finds it free):
        // the line's own are all there will be.
        let within = lines::within_retention(
            settings::history_retention(),
            f.versions.iter().map(|v| v.version),
        );
        if too_big || !within {
            return Ok(None);
        }
        rows.push(json!({
            "path": path,
            "content": f.content,
            "version": f.version,
            "created_at": f.created_at,
            "updated_at": f.updated_at,
            "under": files::under(&path),
            "under_end": files::under_end(&path),
            "above": files::ancestors(&path),
        }));
        files.push(f);
    }
    let Some(first) = files.first() else {
        return Ok(None);
    };
    let scope = first.scope.as_str();
    let Ok(count) = i32::try_from(files.len()) else {
        return Ok(None);
    };
    if files.iter().any(|f| f.scope != scope) {
        return Ok(None);
    }
    Spi::connect_mut(|client| {
        if !store::count_new_files(client, scope, count)? {
            return Ok(None);
        }
        let table = IMPORT_FILES.run(client, &[scope.into(), JsonB(Value::Array(rows)).into()])?;
        let row = table.first();
        if !row.required::<bool>(1, "paths free")? || row.required::<i32>(2, "written")? != count {
            return Err(exists_otherwise(format!("a file of scope {}", quoted(scope))));
        }
        let versions: Vec<(&str, &[lines::FileVersion])> =
            files.iter().map(|f| (f.path.as_str(), f.versions.as_slice())).collect();
        import_file_versions(client, scope, &versions)?;
        notify::queue_files_change(scope)?;
        Ok(Some(vec![Outcome::Imported; files.len()]))
    })
}

/// Kept versions of files of a scope (each with its file's path), each
/// once.
fn import_file_versions(
    client: &mut pgrx::spi::SpiClient<'_>, scope: &str, files: &[(&str, &[lines::FileVersion])],
) -> SqlResult<()> {
    let versions: Vec<Value> =
        files.iter().flat_map(|(path, versions)| keyed("path", path, versions)).collect();
    if !versions.is_empty() {
        IMPORT_FILE_VERSIONS.run(client, &[scope.into(), JsonB(Value::Array(versions)).into()])?;
    }
    Ok(())
}

fn import_directory(d: &lines::Directory) -> SqlResult<Outcome> {
    let path = stored_path(&d.path)?;
    let scope = d.scope.as_str();
    Spi::connect_mut(|client| {
        store::lock_scope(client, scope)?;
        if store::is_directory(client, scope, &path)? {
            return Ok(Outcome::Unchanged);
        }
        if store::file_bytes(client, scope, &path)?.is_some() {
            return Err(exists_otherwise(format!(
                "path {} of scope {}",
                quoted(&path),
                quoted(scope)
            )));
        }
        if let Some(refusal) = store::path_free(client, scope, &path)? {
            return Err(crate::pg::error::report(Error::invalid(format!(
                "directory {} of scope {}: {}",
                quoted(&path),
                quoted(scope),
                refusal.message
            ))));
        }
        store::keep_directory(client, scope, &path)?;
        if !store::is_directory(client, scope, &path)? {
            return Err(crate::pg::error::report(Error::limit(format!(
                "directory {} of scope {} was not kept: the scope is full (agent_memory.max_files_per_scope)",
                quoted(&path),
                quoted(scope)
            ))));
        }
        notify::queue_files_change(scope)?;
        Ok(Outcome::Imported)
    })
}

/// The outcome of a history line: refused when its versions disagree with
/// what is there; else imported when it wrote any, expired when none is
/// live, unchanged otherwise.
fn history_outcome(
    disagree: bool, written: usize, live: usize, item: String,
) -> SqlResult<Outcome> {
    if disagree {
        return Err(crate::pg::error::report(Error::conflict(format!(
            "the versions kept of {item} disagree with those there, or with its version (kv_purge_history and memory_purge_history remove kept versions)"
        ))));
    }
    Ok(if written > 0 {
        Outcome::Imported
    } else if live == 0 {
        Outcome::Expired
    } else {
        Outcome::Unchanged
    })
}

fn import_entry_history(h: &lines::EntryHistory) -> SqlResult<Outcome> {
    // The checks a kept version of a kv line passes.
    for v in &h.versions {
        kv::check_value_size(&h.key, &v.value).or_report()?;
        sensitive::guard_write(&h.key, &v.value)?;
    }
    let item = crate::sessions::kv::entry_name(&h.session_id, &h.key);
    check_retention(h.versions.iter().map(|v| v.version), &item)?;
    let versions = JsonB(serde_json::to_value(&h.versions).unwrap_or_default());
    let live = h.versions.len();
    lock_session(&h.session_id)?;
    Spi::connect_mut(|client| {
        let row = ENTRY_HISTORY_DISAGREES
            .read(
                client,
                &[
                    h.session_id.as_str().into(),
                    h.key.as_str().into(),
                    versions.clone().into(),
                    idle_timeout_minutes().into(),
                ],
            )?
            .first();
        let Some(disagree) = row.value::<bool>(1)? else {
            return Err(missing_session(&h.session_id));
        };
        if disagree {
            return history_outcome(true, 0, live, item);
        }
        let live = row.required::<i64>(2, "live versions")?;
        let there = row.required::<i64>(3, "versions there")?;
        write_entry_versions(
            client,
            &h.session_id,
            Value::Array(keyed("key", &h.key, &h.versions)),
        )?;
        check_entries_retention(client, &h.session_id, &[h.key.as_str()])?;
        history_outcome(false, (live - there).max(0) as usize, live as usize, item)
    })
}

fn import_file_history(h: &lines::FileHistory) -> SqlResult<Outcome> {
    let path = checked_file_versions(&h.path, &h.versions)?;
    let scope = h.scope.as_str();
    let versions = JsonB(serde_json::to_value(&h.versions).unwrap_or_default());
    let item = format!("path {} of scope {}", quoted(&path), quoted(scope));
    check_retention(h.versions.iter().map(|v| v.version), &item)?;
    Spi::connect_mut(|client| {
        store::lock_scope(client, scope)?;
        let row = FILE_HISTORY_DISAGREES
            .read(client, &[scope.into(), path.as_str().into(), versions.clone().into()])?
            .first();
        let disagree = row.required::<bool>(1, "disagreeing")?;
        let there = row.required::<i64>(2, "versions there")?.max(0) as usize;
        if disagree {
            return history_outcome(true, 0, h.versions.len(), item);
        }
        import_file_versions(client, scope, &[(&path, &h.versions)])?;
        check_file_retention(client, scope, &path, &item)?;
        let written = h.versions.len().saturating_sub(there);
        history_outcome(false, written, h.versions.len(), item)
    })
}

/// Whether the versions $3 (a jsonb array) of key $2 of an active session
/// $1 (idle minutes $4) disagree with what is there: a kept version of one
/// of their numbers with another value, or a live entry at the key no
/// newer than one of them; how many of them have not expired, and how many
/// of those are there already (they agree, so the same). No row
/// when the session is not found. The versions are read with
/// jsonb_array_elements, which Citus routes.
static ENTRY_HISTORY_DISAGREES: Statement = Statement::read_only(
    concat!(
        "SELECT EXISTS (
                  SELECT FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.kv_entry_versions o
                  WHERE o.session_id = $1 AND o.key = $2 AND o.tenant = s.tenant
                    AND o.version = (v.e ->> 'version')::int4 AND o.value <> v.e -> 'value')
                OR EXISTS (
                  SELECT FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.kv_entries k
                  WHERE k.session_id = $1 AND k.key = $2 AND k.tenant = s.tenant
                    AND k.expires_at > pg_catalog.now() AND (v.e ->> 'version')::int4 >= k.version),
                (SELECT pg_catalog.count(*) FROM pg_catalog.jsonb_array_elements($3) AS v(e)
                 WHERE (v.e ->> 'expires_at')::timestamptz > pg_catalog.now()),
                (SELECT pg_catalog.count(*)
                 FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.kv_entry_versions o
                 WHERE o.session_id = $1 AND o.key = $2 AND o.tenant = s.tenant
                   AND o.version = (v.e ->> 'version')::int4
                   AND (v.e ->> 'expires_at')::timestamptz > pg_catalog.now())
         FROM agent_memory.sessions s
         WHERE ",
        crate::sessions::callers_active_session!("$4")
    ),
    &[TEXT, TEXT, JSONB, INT4],
);

/// Whether the versions $3 of path $2 of scope $1 disagree with what is
/// there (as for entries), and how many of them are there already.
static FILE_HISTORY_DISAGREES: Statement = Statement::read_only(
    "SELECT EXISTS (
              SELECT FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.memory_file_versions o
              WHERE o.scope = $1 AND o.path = $2 AND o.tenant = agent_memory.caller_tenant()
                AND o.version = (v.e ->> 'version')::int4 AND o.content <> v.e ->> 'content')
            OR EXISTS (
              SELECT FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.memory_files f
              WHERE f.scope = $1 AND f.path = $2 AND f.tenant = agent_memory.caller_tenant()
                AND (v.e ->> 'version')::int4 >= f.version),
            (SELECT pg_catalog.count(*)
             FROM pg_catalog.jsonb_array_elements($3) AS v(e), agent_memory.memory_file_versions o
             WHERE o.scope = $1 AND o.path = $2 AND o.tenant = agent_memory.caller_tenant()
               AND o.version = (v.e ->> 'version')::int4)",
    &[TEXT, TEXT, JSONB],
);

/// Whether a session last active at $1 (at most now), with idle timeout
/// $2 (NULL: $3 minutes), has expired, as `active!` has it. It reads the
/// line's creation time $4 too, so that one PostgreSQL cannot read is
/// refused as the write would refuse it.
static SESSION_LINE_EXPIRED: Statement = Statement::read_only(
    "SELECT LEAST($1::timestamptz, pg_catalog.now())
              <= pg_catalog.now() - coalesce($2::interval, pg_catalog.make_interval(mins => $3)),
            $4::timestamptz",
    &[TEXT, TEXT, INT4, TEXT],
);

/// Session $1 of the caller's tenant, if it is there (expired or not).
static SESSION_THERE: Statement = Statement::read_only(
    "SELECT FROM agent_memory.sessions s
     WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()",
    &[TEXT],
);

/// Text $1 read as an interval.
static AS_INTERVAL: Statement = Statement::read_only("SELECT $1::pg_catalog.interval", &[TEXT]);

/// Whether the session `s` there is as the line ($2 to $6 of
/// IMPORT_SESSION) has it: its user, project, active node, metadata and
/// idle timeout (its times move on as it is used).
macro_rules! session_as_line {
    () => {
        "(s.user_id IS NOT DISTINCT FROM $2 AND s.project_id IS NOT DISTINCT FROM $3
          AND s.active_node_id IS NOT DISTINCT FROM $4 AND s.metadata = $5
          AND s.idle_timeout IS NOT DISTINCT FROM $6::interval)"
    };
}

/// Whether session $1 is there with a user other than $2.
static OF_ANOTHER_USER: Statement = Statement::read_only(
    "SELECT s.user_id IS NOT NULL AND s.user_id IS DISTINCT FROM $2
     FROM agent_memory.sessions s
     WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT],
);

/// A session as exported: inserted, or claimed when an append made it
/// without a user. Returns whether it was written, and else whether the
/// session there is as the line has it. Its times are at most now (and it
/// is made at most when last active): activity in the future would keep
/// the session from ever expiring, and its end (activity plus idle
/// timeout) could be past the last timestamp.
static IMPORT_SESSION: Statement = Statement::read_write(
    concat!(
        "WITH written AS (
       INSERT INTO agent_memory.sessions AS s
         (session_id, user_id, project_id, active_node_id, metadata, idle_timeout,
          created_at, last_activity_at, tenant)
       VALUES ($1, $2, $3, $4, $5, $6::interval,
               LEAST($7::timestamptz, $8::timestamptz, pg_catalog.now()),
               LEAST($8::timestamptz, pg_catalog.now()),
               agent_memory.caller_tenant())
       ON CONFLICT (session_id, tenant) DO UPDATE
       SET user_id = excluded.user_id, project_id = excluded.project_id,
           active_node_id = excluded.active_node_id, metadata = excluded.metadata,
           idle_timeout = excluded.idle_timeout, created_at = excluded.created_at
       WHERE s.user_id IS NULL AND excluded.user_id IS NOT NULL
       RETURNING 1)
     SELECT EXISTS (SELECT FROM written),
            (SELECT s.user_id IS NOT DISTINCT FROM $2 FROM agent_memory.sessions s
             WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant()),
            (SELECT ",
        session_as_line!(),
        " FROM agent_memory.sessions s
             WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant())"
    ),
    &[TEXT, TEXT, TEXT, TEXT, JSONB, TEXT, TEXT, TEXT],
);

// The CTE `s`: the tenant of the caller's active session $1, given the
// parameter that holds the default idle timeout in minutes. Empty when
// there is no such session, so that nothing is imported.
macro_rules! active_session_tenant {
    ($minutes:literal) => {
        concat!(
            "s AS (SELECT s.tenant FROM agent_memory.sessions s WHERE ",
            crate::sessions::callers_active_session!($minutes),
            ")"
        )
    };
}

/// Entries as exported ($2, a jsonb array in the lines' order), into an
/// active session (idle minutes $3): each written where the session holds
/// no live entry at its key and the versions kept at the key agree with
/// the line (each holds the line's value of its number, or is older and
/// of a number the line does not keep: one number names one content, and
/// no kept version is newer than the entry), their words counted on the
/// session once. The kept copy of the version written is dropped: the
/// entry holds it. Returns whether the session was found, the session's
/// words when any entry was written, the sum of the words' changes and
/// their highest running sum in the lines' order, and each line's status
/// in order: expired, too late (it would expire more than $4 minutes from
/// now, later than any write keeps a value), imported, unchanged (the live entry
/// there has the line's value and version), kept (the kept versions
/// disagree) or conflict.
static IMPORT_ENTRIES: Statement = Statement::read_write(
    concat!(
        "WITH ",
        active_session_tenant!("$3"),
        ",
         line AS (
           -- jsonb_to_recordset reads a JSON null as SQL NULL: an entry
           -- holding null has it as its value.
           SELECT l.at, l.key, coalesce(l.value, 'null'::jsonb) AS value, l.words, l.version,
                  l.created_at, l.updated_at, l.expires_at, l.versions
           FROM pg_catalog.jsonb_to_recordset($2) AS l(at int4, key text, value jsonb,
                    words int4, version int4, created_at timestamptz, updated_at timestamptz,
                    expires_at timestamptz, versions jsonb)),
         old AS (
           SELECT k.key, k.value, k.version, k.words, k.expires_at > pg_catalog.now() AS live
           FROM line l, s, agent_memory.kv_entries k
           WHERE k.session_id = $1 AND k.key = l.key AND k.tenant = s.tenant),
         disagreeing AS (
           SELECT DISTINCT l.key
           FROM line l, s, agent_memory.kv_entry_versions v
           WHERE v.session_id = $1 AND v.key = l.key AND v.tenant = s.tenant
             AND NOT CASE WHEN v.version = l.version THEN v.value = l.value
                          ELSE v.version < l.version AND NOT EXISTS (
                                 -- Not jsonb_to_recordset: Citus refuses a
                                 -- record-returning function of an outer row.
                                 SELECT FROM pg_catalog.jsonb_array_elements(l.versions) AS lv(e)
                                 WHERE (lv.e ->> 'version')::int4 = v.version
                                   AND lv.e -> 'value' <> v.value) END),
         written AS (
           INSERT INTO agent_memory.kv_entries AS k
             (session_id, key, value, words, prev_words, created_at, updated_at, expires_at, version, tenant)
           SELECT $1, l.key, l.value, l.words, coalesce(o.words, 0),
                  l.created_at, l.updated_at, l.expires_at, l.version, s.tenant
           FROM line l CROSS JOIN s LEFT JOIN old o ON o.key = l.key
           WHERE l.expires_at > pg_catalog.now() AND o.live IS NOT TRUE
             AND l.expires_at <= pg_catalog.now() + pg_catalog.make_interval(mins => $4)
             AND l.key NOT IN (SELECT d.key FROM disagreeing d)
           ON CONFLICT (session_id, key, tenant) DO UPDATE
           SET value = excluded.value, words = excluded.words, prev_words = excluded.prev_words,
               created_at = excluded.created_at, updated_at = excluded.updated_at,
               expires_at = excluded.expires_at, version = excluded.version
           RETURNING k.key, k.words - k.prev_words AS change, k.expires_at, k.version),
         unkept AS (
           DELETE FROM agent_memory.kv_entry_versions v USING written w, s
           WHERE v.session_id = $1 AND v.key = w.key AND v.version = w.version
             AND v.tenant = s.tenant),
         counted AS (
           UPDATE agent_memory.sessions x
           SET kv_words = x.kv_words + w.change,
               kv_next_expiry = least(x.kv_next_expiry, w.expiry)
           FROM (SELECT sum(change) AS change, min(expires_at) AS expiry FROM written
                 HAVING count(*) > 0) w
           WHERE x.session_id = $1 AND x.tenant = agent_memory.caller_tenant()
           RETURNING x.kv_words)
         SELECT EXISTS (SELECT FROM s), (SELECT kv_words FROM counted),
                (SELECT coalesce(sum(change), 0) FROM written),
                (SELECT coalesce(max(r.running), 0)
                 FROM (SELECT sum(w.change) OVER (ORDER BY l.at) AS running
                       FROM written w JOIN line l ON l.key = w.key) r),
                (SELECT pg_catalog.array_agg(
                          CASE WHEN l.expires_at <= pg_catalog.now() THEN 'expired'
                               WHEN l.expires_at > pg_catalog.now() + pg_catalog.make_interval(mins => $4)
                               THEN 'too late'
                               WHEN w.key IS NOT NULL THEN 'imported'
                               WHEN o.live AND o.value = l.value AND o.version = l.version THEN 'unchanged'
                               WHEN o.live IS NOT TRUE AND l.key IN (SELECT d.key FROM disagreeing d)
                               THEN 'kept'
                               ELSE 'conflict' END ORDER BY l.at)
                 FROM line l LEFT JOIN old o ON o.key = l.key LEFT JOIN written w ON w.key = l.key)"
    ),
    &[TEXT, JSONB, INT4, INT4],
);

/// Kept versions $2 (a jsonb array, each with its entry's key) of entries
/// of session $1, each once; expired ones are left out, and so are those
/// that would expire more than $3 minutes from now, whose first key is
/// returned (NULL: none; the caller then refuses the line, which undoes
/// the others). A JSON null value comes out of jsonb_to_recordset as SQL
/// NULL.
static IMPORT_ENTRY_VERSIONS: Statement = Statement::read_write(
    "WITH line AS (
       SELECT v.key, v.version, coalesce(v.value, 'null'::jsonb) AS value, v.created_at,
              v.updated_at, v.expires_at, v.replaced_at,
              v.expires_at > pg_catalog.now() + pg_catalog.make_interval(mins => $3) AS too_late
       FROM pg_catalog.jsonb_to_recordset($2) AS v(key text, version int4, value jsonb,
              created_at timestamptz, updated_at timestamptz, expires_at timestamptz,
              replaced_at timestamptz)),
     written AS (
       INSERT INTO agent_memory.kv_entry_versions
         (session_id, key, version, value, created_at, updated_at, expires_at, replaced_at, tenant)
       SELECT $1, l.key, l.version, l.value, l.created_at, l.updated_at, l.expires_at,
              l.replaced_at, agent_memory.caller_tenant()
       FROM line l
       WHERE l.expires_at > pg_catalog.now() AND NOT l.too_late
       ON CONFLICT DO NOTHING)
     SELECT min(l.key) FROM line l WHERE l.too_late",
    &[TEXT, JSONB, INT4],
);

/// The numbers of the live kept versions of entries $2 (keys) of session
/// $1, per key. Read-write: it must see the versions just imported.
static KEPT_ENTRY_VERSIONS: Statement = Statement::read_write(
    "SELECT v.key, pg_catalog.array_agg(v.version)
     FROM agent_memory.kv_entry_versions v
     WHERE v.session_id = $1 AND v.key = ANY ($2) AND v.tenant = agent_memory.caller_tenant()
       AND v.expires_at > pg_catalog.now()
     GROUP BY v.key",
    &[TEXT, TEXT_ARRAY],
);

/// A working-memory part as exported, into an active session (idle minutes
/// $8). Returns whether the session was found, whether the part was
/// written, and else whether the part there has the line's value and
/// version.
static IMPORT_PART: Statement = Statement::read_write(
    concat!(
        "WITH ",
        active_session_tenant!("$8"),
        ",
         written AS (
           INSERT INTO agent_memory.wm_parts (session_id, node_key, part, value, version, created_at, updated_at, tenant)
           SELECT $1, $2, $3, $4, $5, $6::timestamptz, $7::timestamptz, s.tenant FROM s
           ON CONFLICT DO NOTHING
           RETURNING 1)
         SELECT EXISTS (SELECT FROM s), EXISTS (SELECT FROM written),
                (SELECT p.value = $4 AND p.version = $5 FROM agent_memory.wm_parts p
                 WHERE p.session_id = $1 AND p.node_key = $2 AND p.part = $3
                   AND p.tenant = agent_memory.caller_tenant())"
    ),
    &[TEXT, TEXT, TEXT, JSONB, INT4, TEXT, TEXT, INT4],
);

/// Whether time `$time` is an instant graph files hold (see
/// agent_memory_core::graph::TIME_RANGE), as seconds since 1970: a
/// timestamptz literal would reach Citus's workers in the coordinator's
/// DateStyle, which they may not read back.
macro_rules! in_graph_time_range {
    ($time:literal) => {
        concat!("EXTRACT(epoch FROM ", $time, ") BETWEEN -62135596800 AND 253402300799.999999")
    };
}

/// A graph node as exported. Returns whether it was written, and else
/// whether the node there has the line's content, version and revision.
/// Whether node $2 of owner $1 is there as the line has it (NULL: not
/// there, as the statement's snapshot sees it).
macro_rules! node_as_line {
    () => {
        "(SELECT n.title = $3 AND n.description = $4 AND n.body = $5 AND n.links = $6
                 AND n.version = $8 AND n.revision = $9
          FROM agent_memory.graph_nodes n
          WHERE n.owner = $1 AND n.node_id = $2 AND n.tenant = agent_memory.caller_tenant())"
    };
}

const NODE_ARGS: &[pgrx::PgOid] =
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, INT4, INT4, TEXT, TEXT];

static IMPORT_NODE: Statement = Statement::read_write(
    concat!(
        "WITH written AS (
           INSERT INTO agent_memory.graph_nodes
             (owner, node_id, title, description, body, links, refs, version, revision,
              created_at, updated_at, tenant)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::timestamptz, $11::timestamptz,
                   agent_memory.caller_tenant())
           ON CONFLICT DO NOTHING
           RETURNING 1)
         SELECT EXISTS (SELECT FROM written), ",
        node_as_line!(),
        ",
         CASE WHEN NOT ",
        in_graph_time_range!("$10::timestamptz"),
        " THEN 'created_at'
              WHEN NOT ",
        in_graph_time_range!("$11::timestamptz"),
        " THEN 'updated_at' END"
    ),
    NODE_ARGS,
);

/// The comparison alone, with a snapshot of its own (read-write: under
/// READ COMMITTED a new one). $7, $10 and $11 are unused.
static NODE_AS_LINE: Statement =
    Statement::read_write(concat!("SELECT ", node_as_line!()), NODE_ARGS);

/// Kept versions $3 (a jsonb array, with refs) of a node, each once.
static IMPORT_NODE_VERSIONS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.graph_node_versions
       (owner, node_id, version, title, description, body, links, refs, created_at, updated_at,
        change_description, saved_at, tenant)
     SELECT $1, $2, v.version, v.title, v.description, v.body, v.links, v.refs, v.created_at,
            v.updated_at, v.change_description, v.saved_at, agent_memory.caller_tenant()
     FROM pg_catalog.jsonb_to_recordset($3) AS v(version int4, title text, description text,
            body text, links text[], refs text[], created_at timestamptz, updated_at timestamptz,
            change_description text, saved_at timestamptz)
     ON CONFLICT DO NOTHING",
    &[TEXT, TEXT, JSONB],
);

/// The version of node $2 of owner $1 in the caller's tenant, locked
/// against a delete until the transaction ends; no row when there is none.
static NODE_FOR_HISTORY: Statement = Statement::read_write(
    "SELECT n.version FROM agent_memory.graph_nodes n
     WHERE n.owner = $1 AND n.node_id = $2 AND n.tenant = agent_memory.caller_tenant()
     FOR SHARE",
    &[TEXT, TEXT],
);

/// How many of versions $3 (as IMPORT_NODE_VERSIONS takes them) of node
/// $2 of owner $1 are kept already, and how many of those hold something
/// else under the same number.
static NODE_VERSIONS_THERE: Statement = Statement::read_only(
    "SELECT pg_catalog.count(*),
            pg_catalog.count(*) FILTER (
              WHERE (o.title, o.description, o.body, o.links, o.change_description)
                    IS DISTINCT FROM (v.title, v.description, v.body, v.links, v.change_description))
     FROM pg_catalog.jsonb_to_recordset($3)
          AS v(version int4, title text, description text, body text, links text[],
               change_description text)
     JOIN agent_memory.graph_node_versions o
       ON o.owner = $1 AND o.node_id = $2 AND o.tenant = agent_memory.caller_tenant()
      AND o.version = v.version",
    &[TEXT, TEXT, JSONB],
);

/// The first of kept versions $1 (as IMPORT_NODE_VERSIONS takes them) with
/// a time outside those graph files hold, if any. It reads no table.
static VERSION_OUT_OF_RANGE: Statement = Statement::read_only(
    concat!(
        "SELECT pg_catalog.min(v.version)
         FROM pg_catalog.jsonb_to_recordset($1)
              AS v(version int4, created_at timestamptz, updated_at timestamptz,
                   saved_at timestamptz)
         WHERE NOT (",
        in_graph_time_range!("v.created_at"),
        " AND ",
        in_graph_time_range!("v.updated_at"),
        " AND ",
        in_graph_time_range!("v.saved_at"),
        ")"
    ),
    &[JSONB],
);

/// Give a file just placed its exported version and dates. A version kept
/// at its number (a deleted file's last, found to agree with it) goes:
/// kept versions stay older than their file.
static IMPORT_FILE_STATE: Statement = Statement::read_write(
    "WITH current AS (
       DELETE FROM agent_memory.memory_file_versions
       WHERE scope OPERATOR(pg_catalog.=) $1 AND path OPERATOR(pg_catalog.=) $2
         AND tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
         AND version OPERATOR(pg_catalog.>=) $3)
     UPDATE agent_memory.memory_files
     SET version = $3, created_at = $4::timestamptz, updated_at = $5::timestamptz
     WHERE scope OPERATOR(pg_catalog.=) $1 AND path OPERATOR(pg_catalog.=) $2
       AND tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    &[TEXT, TEXT, INT4, TEXT, TEXT],
);

/// Kept versions $2 (a jsonb array, each with its file's path) of files of
/// scope $1, each once.
static IMPORT_FILE_VERSIONS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_file_versions
       (scope, path, version, content, created_at, updated_at, replaced_at, tenant)
     SELECT $1, v.path, v.version, v.content, v.created_at, v.updated_at, v.replaced_at,
            agent_memory.caller_tenant()
     FROM pg_catalog.jsonb_to_recordset($2) AS v(path text, version int4, content text,
            created_at timestamptz, updated_at timestamptz, replaced_at timestamptz)
     ON CONFLICT DO NOTHING",
    &[TEXT, JSONB],
);

/// The numbers of the kept versions at path $2 of scope $1 (NULL: none).
/// Read-write: it must see the versions just imported.
static KEPT_FILE_VERSIONS: Statement = Statement::read_write(
    "SELECT pg_catalog.array_agg(v.version)
     FROM agent_memory.memory_file_versions v
     WHERE v.scope = $1 AND v.path = $2 AND v.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT],
);

/// New files of scope $1 as exported ($2, a jsonb array, each with the
/// range of paths under it and the directories above it), when every
/// path is free as PATH_FREE finds a new file's: no file or kept
/// directory at it or under it, no file above it. Read after the files
/// were counted in the scope, whose row lock orders creations in it.
/// Returns whether every path was free, and how many files were written.
static IMPORT_FILES: Statement = Statement::read_write(
    "WITH line AS (
       SELECT * FROM pg_catalog.jsonb_to_recordset($2) AS l(path text, content text, version int4,
                created_at timestamptz, updated_at timestamptz, under text, under_end text,
                above text[])),
     taken AS (
       SELECT FROM line l
       WHERE EXISTS (SELECT FROM agent_memory.memory_files f
                     WHERE f.scope = $1 AND f.path >= l.path AND f.path < l.under_end
                       AND (f.path = l.path OR f.path >= l.under)
                       AND f.tenant = agent_memory.caller_tenant())
          OR EXISTS (SELECT FROM agent_memory.memory_directories d
                     WHERE d.scope = $1 AND d.path >= l.path AND d.path < l.under_end
                       AND (d.path = l.path OR d.path >= l.under)
                       AND d.tenant = agent_memory.caller_tenant())
          OR EXISTS (SELECT FROM pg_catalog.unnest(l.above) AS a(path)
                     JOIN agent_memory.memory_files f
                       ON f.scope = $1 AND f.path = a.path AND f.tenant = agent_memory.caller_tenant())
          OR EXISTS (SELECT FROM agent_memory.memory_file_versions v
                     WHERE v.scope = $1 AND v.path = l.path AND v.tenant = agent_memory.caller_tenant())),
     written AS (
       INSERT INTO agent_memory.memory_files AS f
         (scope, path, content, version, created_at, updated_at, tenant)
       SELECT $1, l.path, l.content, l.version, l.created_at, l.updated_at, agent_memory.caller_tenant()
       FROM line l
       WHERE NOT EXISTS (SELECT FROM taken)
       ON CONFLICT (scope, path, tenant) DO NOTHING
       RETURNING 1)
     SELECT NOT EXISTS (SELECT FROM taken), (SELECT pg_catalog.count(*) FROM written)::int4",
    &[TEXT, JSONB],
);
