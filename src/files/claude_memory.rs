//! Claude's memory tool (`memory_20250818`) in SQL: `claude_memory` runs
//! the command of one tool call on a scope's files and answers with the
//! tool's text; `claude_memory_tool_result` turns a whole `tool_use` block
//! into the `tool_result` block to send back. The paths, requests and
//! texts are the core's (`agent_memory_core::files::claude_memory`); the files are
//! the memory tool's, `/memories/x` being the file `/x`.
//!
//! A refused call is an answer too (what Claude reads with `is_error`),
//! never an SQL error, and changes nothing. An application may add a
//! precondition on the file a call changes (Claude's calls have no field
//! for one); a failed one is an SQL error, 40001. Each call is one transaction:
//! an edit locks its file before reading it, so concurrent edits apply one
//! after the other.

use pgrx::prelude::*;

use agent_memory_core::files::claude_memory::{self as claude, Answer, Request, Target};
use agent_memory_core::files::memory_tool::{self as files, Code, Precondition};
use agent_memory_core::{Error, jsonb};

use crate::files::store::{self, Client, Placed};
use crate::files::versions;
use crate::pg::args::{INT4, TEXT, TEXT_ARRAY};
use crate::pg::datums::{JsonB, TooDeep, ToolRequest};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement};
use crate::pg::settings;

// Every statement reads and writes only the files of the caller's tenant
// (tenant = agent_memory.caller_tenant()), also for a superuser, whom
// row-level security lets through: a file's key is (scope, tenant, path).
//
// A file and the directory at the same path are the range [$2, $4) with
// a filter: the range is the index condition, so a statement reads the
// file, the directory's files and the few paths between them (`/a/b.md`
// for `/a/b`), never the whole scope. Lists of paths are probed one by
// one (a fenced `unnest` joined on every key column).

fn view(
    client: Client, scope: &str, path: &Target, range: &claude::ViewRange,
) -> SqlResult<Answer<String>> {
    if !path.is_root() {
        let shown = store::with_file(client, scope, &path.stored, |content, _| {
            claude::file_view(path, content, range.clone()?)
        })?;
        if let Some(answer) = shown {
            return Ok(answer);
        }
    }
    let table = LISTED.read(
        client,
        &[
            scope.into(),
            files::under(&path.stored).into(),
            files::under_end(&path.stored).into(),
            path.stored.as_str().into(),
        ],
    )?;
    let mut sizes = Vec::with_capacity(table.len());
    let mut kept = Vec::new();
    for row in table {
        let entry = row.value::<String>(1)?.unwrap_or_default();
        match row.value::<i64>(2)? {
            Some(bytes) => sizes.push((entry, bytes.max(0) as u64)),
            None => kept.push(entry),
        }
    }
    if sizes.is_empty() && kept.is_empty() && !path.is_root() {
        return Ok(Err(claude::not_found(path)));
    }
    // The range of a directory is ignored, as the SDK ignores it.
    Ok(Ok(claude::directory_listing(path, &sizes, &kept)))
}

fn create(client: Client, scope: &str, path: &Target, text: &str) -> SqlResult<Answer<String>> {
    if path.is_root() {
        return Ok(Err(claude::already_exists(path)));
    }
    let refused = match store::place_new_file(client, scope, &path.stored, text)? {
        Placed::Created(_) => return Ok(Ok(claude::created(path))),
        Placed::Exists => return Ok(Err(claude::already_exists(path))),
        Placed::Refused(refused) => refused,
    };
    Ok(Err(match refused.code {
        Code::Efbig => claude::too_big(path, text.len(), i64::from(store::max_file_bytes())),
        Code::Enotdir => claude::file_above(path),
        Code::Enospc => claude::memory_full(i64::from(settings::MAX_FILES_PER_SCOPE.get())),
        // A directory is there.
        _ => claude::already_exists(path),
    }))
}

/// Lock a file, compute its edit, write it: `edit` gives the new content
/// and the answer, or the refusal.
fn edit(
    client: Client, scope: &str, path: &Target, edit: impl FnOnce(&str) -> Answer<(String, String)>,
) -> SqlResult<Answer<String>> {
    let table = LOCK_FILE.run(client, &[scope.into(), path.stored.as_str().into()])?;
    if table.is_empty() {
        return Ok(Err(if path.is_root() || store::is_directory(client, scope, &path.stored)? {
            claude::not_a_file(path)
        } else {
            claude::not_found(path)
        }));
    }
    let content = table.first().value::<String>(1)?.unwrap_or_default();
    let (edited, answer) = match edit(&content) {
        Ok(done) => done,
        Err(refused) => return Ok(Err(refused)),
    };
    let limit = store::max_file_bytes();
    if edited.len() > limit as usize {
        return Ok(Err(claude::too_big(path, edited.len(), i64::from(limit))));
    }
    versions::save_at_or_under(client, scope, &path.stored)?;
    store::write_file(client, scope, &path.stored, &edited)?;
    Ok(Ok(answer))
}

/// Delete a file or a directory; the directory it was in stays, empty or
/// not, as on the SDK's file system. A scope left with nothing loses its
/// row in memory_scopes.
fn delete(client: Client, scope: &str, path: &Target) -> SqlResult<Answer<String>> {
    if path.is_root() {
        return Ok(Err(claude::root_not_deleted()));
    }
    let deleted = store::delete_path(client, scope, &path.stored)?;
    if deleted.files == 0 && deleted.dirs == 0 {
        return Ok(Err(claude::nothing_there(path)));
    }
    let parent = files::parent(&path.stored);
    if parent == "/" {
        // The scope may be empty now: its row goes with its last file.
        store::forget_scope_if_empty(client, scope)?;
    } else {
        store::keep_directory(client, scope, parent)?;
    }
    Ok(Ok(claude::deleted(path)))
}

/// Rename a file or a directory. The refusals come in the SDK's order:
/// the root, then a destination that exists, then a source that does not.
/// The SDK makes the destination's directory before it moves anything, so
/// a rename refused after that leaves the directory; the source's
/// directory stays after a move, empty or not.
fn rename(client: Client, scope: &str, from: &Target, to: &Target) -> SqlResult<Answer<String>> {
    if from.is_root() {
        return Ok(Err(claude::root_not_renamed()));
    }
    store::lock_scope(client, scope)?;
    let answer = rename_in_locked_scope(client, scope, from, to)?;
    if answer.is_err() {
        // The lock may have made the row of a scope that holds nothing.
        store::forget_scope_if_empty(client, scope)?;
    }
    Ok(answer)
}

fn rename_in_locked_scope(
    client: Client, scope: &str, from: &Target, to: &Target,
) -> SqlResult<Answer<String>> {
    let range = |t: &Target| [files::under(&t.stored), files::under_end(&t.stored)];
    let [to_under, to_end] = range(to);
    let above = files::ancestors(&to.stored);
    let table = DESTINATION.run(
        client,
        &[
            scope.into(),
            to.stored.as_str().into(),
            to_under.as_str().into(),
            to_end.as_str().into(),
            above.into(),
        ],
    )?;
    let row = table.first();
    if to.is_root() || row.value::<bool>(1)? == Some(true) {
        return Ok(Err(claude::destination_exists(to)));
    }
    if row.value::<bool>(2)? == Some(true) {
        // The SDK fails making the destination's directory, unless that
        // directory is the file: then it goes on to the source, and fails
        // moving it (or finds it missing).
        let parent = files::parent(&to.stored);
        let source_missing = store::file_bytes(client, scope, &from.stored)?.is_none()
            && !store::is_directory(client, scope, &from.stored)?;
        if source_missing && store::file_bytes(client, scope, parent)?.is_some() {
            return Ok(Err(claude::nothing_there(from)));
        }
        return Ok(Err(claude::file_above(to)));
    }
    let answer = move_tree(client, scope, from, to)?;
    let stays = if answer.is_ok() { &from.stored } else { &to.stored };
    store::keep_directory(client, scope, files::parent(stays))?;
    Ok(answer)
}

/// Move the file or directory `from` to `to`, a free path with no file
/// above it: its files and the directories kept in it.
fn move_tree(client: Client, scope: &str, from: &Target, to: &Target) -> SqlResult<Answer<String>> {
    let from_under = files::under(&from.stored);
    let from_end = files::under_end(&from.stored);
    let moving_args = || -> [pgrx::datum::DatumWithOid<'_>; 4] {
        [
            scope.into(),
            from.stored.as_str().into(),
            from_under.as_str().into(),
            from_end.as_str().into(),
        ]
    };
    let table = MOVING.run(client, &moving_args())?;
    let mut moving = Vec::with_capacity(table.len());
    for row in table {
        moving.push(row.value::<String>(1)?.unwrap_or_default());
    }
    if moving.is_empty() {
        return Ok(Err(claude::nothing_there(from)));
    }
    if to.stored.starts_with(&from_under) {
        return Ok(Err(claude::into_itself(from, to)));
    }
    // Every moved path must be a valid path at its new place.
    for path in &moving {
        let moved = format!("{}{}", to.stored, &path[from.stored.len()..]);
        if let Err(refused) = files::normalise_path(&moved) {
            return Ok(Err(claude::bad_destination(from, to, &refused.message)));
        }
    }
    // So must the paths of the versions kept there, which move with them.
    for path in versions::kept_paths(client, scope, &from.stored)? {
        let moved = format!("{}{}", to.stored, &path[from.stored.len()..]);
        if let Err(refused) = files::normalise_path(&moved) {
            let why = format!("a kept version would not fit: {}", refused.message);
            return Ok(Err(claude::bad_destination(from, to, &why)));
        }
    }
    // A move is a change of each file moved: what it was is kept first,
    // and its kept versions then move with it.
    versions::save_at_or_under(client, scope, &from.stored)?;
    let prefix_chars = from.stored.chars().count() as i32;
    let [scope_arg, from_arg, under_arg, end_arg] = moving_args();
    MOVE.run(
        client,
        &[scope_arg, from_arg, under_arg, end_arg, to.stored.as_str().into(), prefix_chars.into()],
    )?;
    versions::move_versions(client, scope, &from.stored, &to.stored)?;
    Ok(Ok(claude::renamed(from, to)))
}

/// Run one request of the tool on a scope: the answer, or the refusal.
fn answer(
    scope: Option<&str>, request: &serde_json::Value, precondition: &Precondition,
) -> SqlResult<Answer<String>> {
    let request = match claude::parse(request) {
        Ok(request) => request,
        Err(refused) => return Ok(Err(refused)),
    };
    let Some(scope) = scope.filter(|s| !s.is_empty()) else {
        return Ok(Err("No memory scope was given".to_owned()));
    };
    if files::check_scope(scope).is_err() {
        return Ok(Err(format!(
            "The memory scope is longer than {} bytes",
            files::MAX_SCOPE_BYTES
        )));
    }
    Spi::connect_mut(|client| {
        if !precondition.is_none() {
            check_precondition(client, scope, &request, precondition)?;
        }
        let answer = run(client, scope, &request)?;
        if answer.is_ok() && request.changed_file().is_some() {
            crate::pg::notify::queue_files_change(scope)?;
        }
        Ok(answer)
    })
}

/// Lock the file the request changes and check the application's
/// precondition on it: a failed one is an SQL error (40001), as the
/// answer's text has no place for it. A creation, a delete or a rename
/// locks the scope's row first, as they do.
fn check_precondition(
    client: Client, scope: &str, request: &Request, precondition: &Precondition,
) -> SqlResult<()> {
    let Some(file) = request.changed_file() else {
        return Err(Error::invalid(
            "a view changes nothing: it takes no expected_version or expected_sha256",
        ))
        .or_report();
    };
    if matches!(request, Request::Create { .. } | Request::Delete { .. } | Request::Rename { .. }) {
        store::lock_scope(client, scope)?;
    }
    let current = store::lock_file(client, scope, &file.stored)?;
    let name = format!(
        "file {} of scope {}",
        agent_memory_core::error::quoted(&file.shown),
        agent_memory_core::error::quoted(scope)
    );
    let current = current.as_ref().map(|(version, content)| (*version, content.as_str()));
    match claude::precondition_conflict(&name, precondition, current) {
        Some(conflict) => Err(conflict).or_report(),
        None => Ok(()),
    }
}

/// Run a checked request on a scope.
fn run(client: Client, scope: &str, request: &Request) -> SqlResult<Answer<String>> {
    match request {
        Request::View { path, range } => view(client, scope, path, range),
        Request::Create { path, text } => create(client, scope, path, text),
        Request::StrReplace { path, old, new } => {
            edit(client, scope, path, |content| claude::replace_once(path, content, old, new))
        }
        Request::Insert { path, line, text } => {
            edit(client, scope, path, |content| claude::insert_lines(path, content, *line, text))
        }
        Request::Delete { path } => delete(client, scope, path),
        Request::Rename { from, to } => rename(client, scope, from, to),
    }
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn claude_memory(
    scope: Option<&str>, request: Option<ToolRequest>,
    expected_version: default!(Option<i32>, "NULL"),
    expected_sha256: default!(Option<&str>, "NULL"),
) -> SqlResult<String> {
    let precondition =
        claude::checked_precondition(expected_version, expected_sha256).or_report()?;
    let request = match request.map(|r| r.decode()) {
        None => serde_json::Value::Null,
        Some(Ok(request)) => request,
        Some(Err(TooDeep)) => {
            return Ok(format!("The request nests more than {} levels", jsonb::MAX_DEPTH));
        }
    };
    Ok(answer(scope, &request, &precondition)?.unwrap_or_else(|refused| refused))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn claude_memory_tool_result(
    scope: Option<&str>, tool_use: Option<JsonB>, expected_version: default!(Option<i32>, "NULL"),
    expected_sha256: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonB> {
    let precondition =
        claude::checked_precondition(expected_version, expected_sha256).or_report()?;
    let tool_use = tool_use.map(|t| t.0).unwrap_or(serde_json::Value::Null);
    let id = tool_use
        .get("id")
        .and_then(|id| id.as_str())
        .filter(|id| !id.is_empty())
        .ok_or_else(|| Error::invalid("tool_use must be a tool_use block with an \"id\""))
        .or_report()?
        .to_owned();
    let input = tool_use.get("input").unwrap_or(&serde_json::Value::Null);
    let answer = answer(scope, input, &precondition)?;
    let mut result = serde_json::json!({"type": "tool_result", "tool_use_id": id});
    match answer {
        Ok(text) => result["content"] = text.into(),
        Err(text) => {
            result["content"] = text.into();
            result["is_error"] = true.into();
        }
    }
    Ok(JsonB(result))
}

// The statements.

/// A file's content, locked for an edit.
static LOCK_FILE: Statement = Statement::read_write(
    "SELECT f.content FROM agent_memory.memory_files f
     WHERE f.scope = $1 AND f.path = $2 AND f.tenant = agent_memory.caller_tenant()
     FOR NO KEY UPDATE",
    &[TEXT, TEXT],
);

/// What a view of directory $4 lists: its files (the range [$2, $3)) with
/// their sizes, which `octet_length` reads without detoasting the
/// contents, and the directories kept at it or under it, with no size.
static LISTED: Statement = Statement::read_only(
    "SELECT f.path::text, pg_catalog.octet_length(f.content)::int8 FROM agent_memory.memory_files f
     WHERE f.scope = $1 AND f.path >= $2 AND f.path < $3
       AND f.tenant = agent_memory.caller_tenant()
     UNION ALL
     SELECT d.path::text, NULL FROM agent_memory.memory_directories d
     WHERE d.scope = $1 AND d.path >= $4 AND d.path < $3 AND (d.path = $4 OR d.path >= $2)
       AND d.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT, TEXT, TEXT],
);

/// What a rename moves, locked: the file $2 or the directory's files in
/// [$3, $4), and the directories kept at $2 or in [$3, $4).
static MOVING: Statement = Statement::read_write(
    "WITH moving_files AS (
         SELECT f.path::text FROM agent_memory.memory_files f
         WHERE f.scope = $1 AND f.path >= $2 AND f.path < $4 AND (f.path = $2 OR f.path >= $3)
           AND f.tenant = agent_memory.caller_tenant()
         FOR UPDATE),
     moving_directories AS (
         SELECT d.path::text FROM agent_memory.memory_directories d
         WHERE d.scope = $1 AND d.path >= $2 AND d.path < $4 AND (d.path = $2 OR d.path >= $3)
           AND d.tenant = agent_memory.caller_tenant()
         FOR UPDATE)
     SELECT path FROM moving_files UNION ALL SELECT path FROM moving_directories",
    &[TEXT, TEXT, TEXT, TEXT],
);

/// Whether a destination is taken (a file or a kept directory at $2 or
/// under it, in [$3, $4)), and whether a directory above it ($5) is a file.
static DESTINATION: Statement = Statement::read_write(
    "SELECT EXISTS (SELECT FROM agent_memory.memory_files f
                    WHERE f.scope = $1 AND f.path >= $2 AND f.path < $4
                      AND (f.path = $2 OR f.path >= $3)
                      AND f.tenant = agent_memory.caller_tenant())
         OR EXISTS (SELECT FROM agent_memory.memory_directories d
                    WHERE d.scope = $1 AND d.path >= $2 AND d.path < $4
                      AND (d.path = $2 OR d.path >= $3)
                      AND d.tenant = agent_memory.caller_tenant()),
            EXISTS (SELECT FROM (SELECT $1::text AS scope, path, agent_memory.caller_tenant() AS tenant
                                 FROM pg_catalog.unnest($5::text[]) AS path OFFSET 0) a
                    JOIN agent_memory.memory_files f
                      ON f.scope = $1 AND f.path = a.path AND f.tenant = a.tenant)",
    &[TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY],
);

/// Move the file $2, or the directory's files in [$3, $4), and the
/// directories kept at $2 or in [$3, $4), to $5: each path's first $6
/// characters become $5.
static MOVE: Statement = Statement::read_write(
    "WITH moved_directories AS (
         UPDATE agent_memory.memory_directories d
         SET path = $5 || pg_catalog.substr(d.path, $6 + 1)
         WHERE d.scope = $1 AND d.path >= $2 AND d.path < $4 AND (d.path = $2 OR d.path >= $3)
           AND d.tenant = agent_memory.caller_tenant())
     UPDATE agent_memory.memory_files f
     SET path = $5 || pg_catalog.substr(f.path, $6 + 1), version = f.version + 1
     WHERE f.scope = $1 AND f.path >= $2 AND f.path < $4 AND (f.path = $2 OR f.path >= $3)
       AND f.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT, TEXT, TEXT, TEXT, INT4],
);
