//! The memory tool: `memory_scope` names a scope, `memory_tool`
//! runs one request `{path, command, content?, oldContent?}` on the scope's
//! files and answers with its JSON envelope.
//!
//! A bad request is an envelope with `ok:false`, never an SQL error, and
//! changes nothing. Each command is one call in the caller's transaction:
//! a read, a delete and an append to an existing file are one statement;
//! an update reads the file, then writes at the row version it read; an
//! append to a file that does not exist yet counts it in the scope (which
//! locks the scope's row), inserts it, then checks its path (no file above
//! it, no directory at it), removing it again when refused.

use pgrx::prelude::*;

use agent_memory_core::memory_files::{self as files, Code, Command, Echo, ToolError, ToolResult};
use agent_memory_core::{Error, jsonb};

use crate::pg::args::{INT4, TEXT, TEXT_ARRAY, TID, XID};
use crate::pg::datums::{JsonText, TooDeep, ToolRequest};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, FirstRow, Statement, prepared_plan};

use crate::pg::settings;
use crate::pg::stream::{StreamStatement, for_each_row};

// A write that returns nothing is judged by how many rows it changed
// (`is_empty` of its result reads SPI_processed): a `RETURNING` would cost
// each one a result to build.
//
// memory_tool runs with the caller's search_path (no SET clause: it cost a
// read an eighth of its time), so every statement it runs names each
// function, operator and type with its schema. OPERATOR(...) binds like any
// user operator, so operands are parenthesised.
//
// Scopes are a tenant's own: every statement reads and writes only rows
// whose tenant is agent_memory.caller_tenant(), also for a superuser, whom
// row-level security lets through, and a file's key is (scope, path,
// tenant), a scope's (scope, tenant).

/// A setting-like argument that must be one of `choices`.
pub(crate) fn max_file_bytes() -> i32 {
    settings::MAX_FILE_BYTES.get()
}

fn too_big(bytes: i64) -> ToolError {
    ToolError::new(
        Code::Efbig,
        format!(
            "EFBIG: file would have {bytes} bytes; at most {} are allowed (agent_memory.max_file_bytes)",
            max_file_bytes()
        ),
    )
}

fn a_directory() -> ToolError {
    ToolError::new(Code::Eisdir, "EISDIR: path is a directory")
}

fn not_found() -> ToolError {
    ToolError::new(Code::Enoent, "ENOENT: file not found")
}

pub(crate) type Client<'a, 'b> = &'a mut pgrx::spi::SpiClient<'b>;

/// Whether directory `dir` has files under it.
pub(crate) fn is_directory(client: Client, scope: &str, dir: &str) -> SqlResult<bool> {
    let table = ANY_UNDER.run(
        client,
        &[
            scope.into(),
            files::under(dir).into(),
            files::under_end(dir).into(),
        ],
    )?;
    Ok(table.first().value::<bool>(1)? == Some(true))
}

/// Read file `path` of `scope` and hand its content to `use_content`
/// (borrowed from the result, not copied); None when there is no file.
pub(crate) fn with_file<T>(
    client: Client,
    scope: &str,
    path: &str,
    use_content: impl FnOnce(&str) -> T,
) -> SqlResult<Option<T>> {
    let table = READ.read(client, &[scope.into(), path.into()])?;
    if table.is_empty() {
        return Ok(None);
    }
    let row = table.first();
    let content = crate::pg::datums::text_at(&row, 1)?;
    Ok(Some(use_content(content.unwrap_or_default())))
}

fn read(client: Client, scope: &str, path: &str) -> SqlResult<ToolResult<String>> {
    if let Some(result) = with_file(client, scope, path, files::read_result)? {
        return Ok(Ok(result));
    }
    if path == "/" || is_directory(client, scope, path)? {
        return Ok(Err(a_directory()));
    }
    Ok(Err(not_found()))
}

fn list(client: Client, scope: &str, dir: &str) -> SqlResult<ToolResult<String>> {
    let end = files::under_end(dir);
    let mut from = files::under(dir);
    let mut entries: Vec<(String, bool)> = Vec::new();
    loop {
        let table = FIRST_FROM.read(
            client,
            &[scope.into(), from.as_str().into(), end.as_str().into()],
        )?;
        if table.is_empty() {
            break;
        }
        let Some(path) = table.first().value::<String>(1)? else {
            break;
        };
        let (name, is_dir) = files::entry_of(dir, &path);
        // Past this entry: a directory's whole subtree, or just the file.
        from = if is_dir {
            files::under_end(&format!("{}{name}", files::under(dir)))
        } else {
            format!("{path}\u{1}")
        };
        entries.push((name.to_owned(), is_dir));
    }
    if entries.is_empty() && dir != "/" {
        let table = READ.read(client, &[scope.into(), dir.into()])?;
        return Ok(Err(if table.is_empty() {
            ToolError::new(Code::Enoent, "ENOENT: directory not found")
        } else {
            ToolError::new(Code::Enotdir, "ENOTDIR: path is a file")
        }));
    }
    Ok(Ok(files::list_result(&mut entries)))
}

/// The result of an append.
const OK: &str = "{\"status\":\"ok\"}";

fn append(client: Client, scope: &str, path: &str, content: &str) -> SqlResult<ToolResult<String>> {
    if path == "/" {
        return Ok(Err(a_directory()));
    }
    let limit = max_file_bytes();
    // Append to the file when it exists and has room; else create it.
    // The loop comes back only when a file turned up at the path between
    // the two (created concurrently), or went away after it was found too
    // big.
    for _ in 0..MAX_TRIES {
        let appended = !APPEND_EXISTING
            .run(
                client,
                &[scope.into(), path.into(), content.into(), limit.into()],
            )?
            .is_empty();
        if appended {
            return Ok(Ok(OK.to_owned()));
        }
        match place_new_file(client, scope, path, content)? {
            Placed::Created => return Ok(Ok(OK.to_owned())),
            Placed::Refused(refused) => return Ok(Err(refused)),
            Placed::Exists => {}
        }
        if let Some(bytes) = file_bytes(client, scope, path)? {
            let total = bytes + content.len() as i64;
            if total > i64::from(limit) {
                return Ok(Err(too_big(total)));
            }
        }
    }
    // Each try met a file at the path that this role cannot read.
    Err(Error::not_allowed(format!(
        "a file at {} of this scope is not visible to this role",
        agent_memory_core::error::quoted(path)
    )))
    .or_report()
}

/// How often an append tries again when the file changes under it; only a
/// file the caller may not see makes it try that often.
const MAX_TRIES: usize = 16;

/// The size of a file as of now, when it is there.
fn file_bytes(client: Client, scope: &str, path: &str) -> SqlResult<Option<i64>> {
    let bytes = FILE_BYTES
        .run(client, &[scope.into(), path.into()])?
        .first_value::<i32>(1)
        .or_report()?;
    Ok(bytes.map(i64::from))
}

/// What became of a new file.
pub(crate) enum Placed {
    Created,
    /// A file is at the path (created concurrently, or there all along):
    /// nothing was written.
    Exists,
    /// The path is not free (a directory at it, a file above it), the
    /// content is too big, or the scope is full: nothing was written.
    Refused(ToolError),
}

/// Create a file at `path` (not the root) within the size limit: no file
/// or directory may be at the path and no file above it, and the scope
/// must have room. The scope's count is raised first (which locks its
/// row), then the file written, then its path checked; a refused file is
/// removed again and its count given back, within the caller's
/// transaction, so a refusal leaves nothing behind.
pub(crate) fn place_new_file(
    client: Client,
    scope: &str,
    path: &str,
    content: &str,
) -> SqlResult<Placed> {
    if content.len() > max_file_bytes() as usize {
        return Ok(Placed::Refused(too_big(content.len() as i64)));
    }
    if !count_new_file(client, scope)? {
        // A full scope refuses only a file that would be new.
        if file_bytes(client, scope, path)?.is_some() {
            return Ok(Placed::Exists);
        }
        let full = ToolError::new(
            Code::Enospc,
            format!(
                "ENOSPC: the scope holds {} files, the most allowed (agent_memory.max_files_per_scope)",
                settings::MAX_FILES_PER_SCOPE.get()
            ),
        );
        return Ok(Placed::Refused(
            path_free(client, scope, path)?.unwrap_or(full),
        ));
    }
    let created = !CREATE_FILE
        .run(client, &[scope.into(), path.into(), content.into()])?
        .is_empty();
    let refused = if created {
        match path_free(client, scope, path)? {
            None => return Ok(Placed::Created),
            Some(refused) => {
                REMOVE_FILE.run(client, &[scope.into(), path.into()])?;
                Some(refused)
            }
        }
    } else {
        None
    };
    // Give back the room counted for a file not created after all.
    UNCOUNT_FILE.run(client, &[scope.into(), 1i32.into()])?;
    Ok(refused.map_or(Placed::Exists, Placed::Refused))
}

/// Count one more file in the scope; false when it is full.
fn count_new_file(client: Client, scope: &str) -> SqlResult<bool> {
    let max_files = settings::MAX_FILES_PER_SCOPE.get();
    if !COUNT_NEW_FILE
        .run(client, &[scope.into(), max_files.into()])?
        .is_empty()
    {
        return Ok(true);
    }
    // The bound reached the limit: count the files and try once more.
    if RECOUNT
        .run(client, &[scope.into(), max_files.into()])?
        .is_empty()
    {
        return Ok(false);
    }
    Ok(!COUNT_NEW_FILE
        .run(client, &[scope.into(), max_files.into()])?
        .is_empty())
}

/// Why a new file's path is not free, if it is not.
fn path_free(client: Client, scope: &str, path: &str) -> SqlResult<Option<ToolError>> {
    let table = PATH_FREE.run(
        client,
        &[
            scope.into(),
            files::under(path).into(),
            files::under_end(path).into(),
            files::ancestors(path).into(),
        ],
    )?;
    let row = table.first();
    if row.value::<bool>(1)? != Some(true) {
        return Ok(Some(a_directory()));
    }
    if row.value::<bool>(2)? != Some(true) {
        return Ok(Some(ToolError::new(
            Code::Enotdir,
            "ENOTDIR: a directory of the path is a file",
        )));
    }
    Ok(None)
}

fn update(
    client: Client,
    scope: &str,
    path: &str,
    old: &str,
    new: &str,
) -> SqlResult<ToolResult<String>> {
    let limit = max_file_bytes();
    let write = prepared_plan(client, &WRITE_VERSION).or_report()?;
    // The file is read, its new content made here, and written at the
    // version read: the count of replacements is then that of the content
    // the write replaced (PostgreSQL 15's RETURNING sees only the new row).
    // The loop comes back only when a concurrent change came in between.
    loop {
        let table = READ_VERSION.run(client, &[scope.into(), path.into()])?;
        if table.is_empty() {
            if path == "/" || is_directory(client, scope, path)? {
                return Ok(Err(a_directory()));
            }
            return Ok(Err(not_found()));
        }
        let row = table.first();
        let content = crate::pg::datums::text_at(&row, 1)?.unwrap_or_default();
        let Some((replacement, replaced)) = files::replace_counted(content, old, new) else {
            return Ok(Ok("{\"replaced\":0}".to_owned()));
        };
        if replacement.len() > limit as usize {
            return Ok(Err(ToolError::new(
                Code::Efbig,
                format!("EFBIG: the file would exceed {limit} bytes (agent_memory.max_file_bytes)"),
            )));
        }
        let version = RowVersion::of(&row, 2, 3)?;
        let written = !client
            .update(
                &*write,
                None,
                &[
                    version.ctid(),
                    version.xmin.into(),
                    scope.into(),
                    path.into(),
                    replacement.as_str().into(),
                ],
            )
            .or_report()?
            .is_empty();
        if written {
            return Ok(Ok(format!("{{\"replaced\":{replaced}}}")));
        }
    }
}

/// Where a row version lies (ctid) and who wrote it (xmin), copied out of
/// a result.
struct RowVersion {
    ctid: pg_sys::ItemPointerData,
    xmin: pg_sys::TransactionId,
}

impl RowVersion {
    fn of(row: &pgrx::spi::SpiTupleTable<'_>, ctid: usize, xmin: usize) -> SqlResult<RowVersion> {
        let at = row
            .get_datum_by_ordinal(ctid)
            .or_report()?
            .ok_or_else(|| Error::internal("a row without ctid"))
            .or_report()?;
        // SAFETY: a tid datum points at an ItemPointerData, copied here
        // before the result goes away.
        let ctid = unsafe { *at.cast_mut_ptr::<pg_sys::ItemPointerData>() };
        let xmin = row
            .get_datum_by_ordinal(xmin)
            .or_report()?
            .ok_or_else(|| Error::internal("a row without xmin"))
            .or_report()?;
        // An xid datum holds the 32-bit id itself.
        let xmin = pg_sys::TransactionId::from_inner(xmin.value() as u32);
        Ok(RowVersion { ctid, xmin })
    }

    /// The ctid as a statement's argument, borrowing this copy.
    fn ctid(&self) -> pgrx::datum::DatumWithOid<'_> {
        // SAFETY: tid is passed by reference; the datum points at this
        // copy, which outlives the statement it is passed to.
        unsafe {
            pgrx::datum::DatumWithOid::new(
                pg_sys::Datum::from(&self.ctid as *const pg_sys::ItemPointerData),
                pg_sys::TIDOID,
            )
        }
    }
}

fn delete(client: Client, scope: &str, path: &str) -> SqlResult<ToolResult<String>> {
    if path == "/" {
        return Ok(Err(ToolError::new(
            Code::Einval,
            "the root cannot be deleted; delete its entries",
        )));
    }
    let deleted = delete_path(client, scope, path)?;
    if deleted.files == 0 {
        return Ok(Err(ToolError::new(
            Code::Enoent,
            "ENOENT: file or directory not found",
        )));
    }
    Ok(Ok(format!(
        "{{\"files\":{},\"dirs\":{}}}",
        deleted.files, deleted.dirs
    )))
}

/// What a deletion removed.
pub(crate) struct Deleted {
    pub files: usize,
    /// Directories: 0 for a file.
    pub dirs: usize,
}

/// Delete the file or directory `path` (not the root).
pub(crate) fn delete_path(client: Client, scope: &str, path: &str) -> SqlResult<Deleted> {
    let table = DELETE_FILES.run(
        client,
        &[
            scope.into(),
            path.into(),
            files::under(path).into(),
            files::under_end(path).into(),
        ],
    )?;
    // SAFETY: `table` is the last result, and it lives to the end of this
    // function.
    let paths = unsafe { crate::pg::datums::last_result_texts(table.len()) }
        .ok_or_else(|| Error::internal("a deleted path is not UTF-8 text"))
        .or_report()?;
    let dirs = if paths.is_empty() || paths.contains(&path) {
        0
    } else {
        files::directories_removed(path, paths.iter().map(|p| files::parent(p)))
    };
    Ok(Deleted {
        files: paths.len(),
        dirs,
    })
}

fn run(scope: &str, command: &Command, path: &str) -> SqlResult<ToolResult<String>> {
    let _generic = GenericPlans::force();
    Spi::connect_mut(|client| match command {
        Command::Read => read(client, scope, path),
        Command::List => list(client, scope, path),
        Command::Append { content } => append(client, scope, path, content),
        Command::Update { old, new } => update(client, scope, path, old, new),
        Command::Delete => delete(client, scope, path),
    })
}

/// `plan_cache_mode = force_generic_plan` for as long as it lives, restored
/// when dropped (also when an error unwinds through it).
///
/// The tool's statements are prepared once per backend, and PostgreSQL would
/// plan the range and CTE ones anew on every call (a generic plan looks
/// costlier than one planned for the values, although the index plan is the
/// same for any values). A `SET plan_cache_mode` clause on the function cost
/// a read a sixteenth of its time; setting the variable the clause would set,
/// for the length of the command, costs nothing.
struct GenericPlans(i32);

impl GenericPlans {
    fn force() -> GenericPlans {
        // SAFETY: a plain read and write of a backend-local setting; the
        // old value comes back in drop.
        unsafe {
            let old = pg_sys::plan_cache_mode;
            pg_sys::plan_cache_mode =
                pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as i32;
            GenericPlans(old)
        }
    }
}

impl Drop for GenericPlans {
    fn drop(&mut self) {
        // SAFETY: as in force.
        unsafe { pg_sys::plan_cache_mode = self.0 }
    }
}

// Not pinned to a search_path: see the statements above.
#[pg_extern(volatile, parallel_unsafe)]
fn memory_tool(scope: Option<&str>, request: Option<ToolRequest>) -> SqlResult<JsonText> {
    // The request's fields are read where they lie in the jsonb value.
    let fields = match request.as_ref().map(ToolRequest::fields) {
        None => None,
        Some(Ok(fields)) => fields,
        Some(Err(TooDeep)) => {
            let error = ToolError::new(
                Code::Einval,
                format!("request nests more than {} levels", jsonb::MAX_DEPTH),
            );
            return Ok(JsonText(files::envelope_error(&Echo::default(), &error)));
        }
    };
    let (echo, parsed) = files::parse_fields(fields.as_deref());
    let answer = match (scope, parsed) {
        (_, Err(error)) => Err(error),
        (None, Ok(_)) | (Some(""), Ok(_)) => Err(ToolError::new(Code::Einval, "scope is required")),
        (Some(scope), Ok((command, path))) => run(scope, &command, &path)?,
    };
    Ok(JsonText(envelope(&echo, answer)))
}

fn envelope(echo: &Echo, answer: ToolResult<String>) -> String {
    match answer {
        Ok(result) => files::envelope_ok(echo, &result),
        Err(error) => files::envelope_error(echo, &error),
    }
}

#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_scope(
    memory_node_id: Option<&str>,
    scope: default!(Option<&str>, "'global'"),
    thread_id: default!(Option<&str>, "NULL"),
) -> SqlResult<String> {
    files::scope_key(memory_node_id, scope, thread_id).or_report()
}

/// A scope's files (the caller's tenant's) in path order: paths only, or
/// paths and contents.
static SCOPE_PATHS: StreamStatement = StreamStatement {
    sql: "SELECT f.path::text FROM agent_memory.memory_files f
          WHERE f.scope = $1 AND f.tenant = agent_memory.caller_tenant() ORDER BY f.path",
    params: 1,
    columns: &[pg_sys::TEXTOID],
};

static SCOPE_FILES: StreamStatement = StreamStatement {
    sql: "SELECT f.path::text, f.content FROM agent_memory.memory_files f
          WHERE f.scope = $1 AND f.tenant = agent_memory.caller_tenant() ORDER BY f.path",
    params: 1,
    columns: &[pg_sys::TEXTOID, pg_sys::TEXTOID],
};

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_render(
    scope: Option<&str>,
    content: default!(Option<&str>, "'tree'"),
    max_chars: default!(Option<i32>, "4000"),
) -> SqlResult<String> {
    let scope = scope.ok_or_else(|| Error::null("scope")).or_report()?;
    let max_chars = match max_chars {
        Some(n) if n >= 1 => n as usize,
        Some(n) => {
            return Err(Error::invalid(format!(
                "max_chars must be at least 1, not {n}"
            )))
            .or_report();
        }
        None => return Err(Error::null("max_chars")).or_report(),
    };
    let full = files::one_of("content", content, &["tree", "full"]).or_report()? == "full";
    let mut rendering = files::Rendering::new(max_chars, settings::max_result_bytes());
    if full {
        // Files are read one at a time; only what can still fit is kept.
        for_each_row(&SCOPE_FILES, &[Some(scope)], &mut |row| {
            rendering
                .push_file(row.text(1, "path")?, row.text(2, "content")?)
                .or_report()
        })?;
    } else {
        // The tree needs every path (a scope holds at most
        // agent_memory.max_files_per_scope files).
        let mut paths = Vec::new();
        for_each_row(&SCOPE_PATHS, &[Some(scope)], &mut |row| {
            paths.push(row.text(1, "path")?.to_owned());
            Ok(())
        })?;
        for line in files::tree_lines(&paths) {
            rendering.push(&line).or_report()?;
        }
    }
    Ok(rendering.finish())
}

#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_tool_definition(
    name: default!(Option<&str>, "'memory'"),
    description: default!(Option<&str>, "NULL"),
    title: default!(Option<&str>, "NULL"),
    format: default!(Option<&str>, "'anthropic'"),
) -> SqlResult<pgrx::JsonB> {
    files::tool_definition(name, description, title, format)
        .map(pgrx::JsonB)
        .or_report()
}

// The statements.

static READ: Statement = Statement {
    sql: "SELECT f.content FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1 AND f.path OPERATOR(pg_catalog.=) $2
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TEXT, TEXT],
    writes: false,
};

/// Whether anything lies under the range [$2, $3) of scope $1: a
/// directory's files.
static ANY_UNDER: Statement = Statement {
    sql: "SELECT EXISTS (SELECT FROM agent_memory.memory_files f
                         WHERE f.scope OPERATOR(pg_catalog.=) $1
                           AND f.path OPERATOR(pg_catalog.>=) $2 AND f.path OPERATOR(pg_catalog.<) $3
                           AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())",
    args: &[TEXT, TEXT, TEXT],
    writes: true,
};

/// The first path of scope $1 in [$2, $3): one index probe per entry of a
/// listing, whatever the size of the subtrees it skips.
static FIRST_FROM: Statement = Statement {
    sql: "SELECT f.path::text FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1
            AND f.path OPERATOR(pg_catalog.>=) $2 AND f.path OPERATOR(pg_catalog.<) $3
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
          ORDER BY f.path LIMIT 1",
    args: &[TEXT, TEXT, TEXT],
    writes: false,
};

/// Append to an existing file within the size limit ($4 bytes).
static APPEND_EXISTING: Statement = Statement {
    sql: "UPDATE agent_memory.memory_files f
          SET content = f.content OPERATOR(pg_catalog.||) $3, updated_at = pg_catalog.now()
          WHERE f.scope OPERATOR(pg_catalog.=) $1 AND f.path OPERATOR(pg_catalog.=) $2
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
            AND (pg_catalog.octet_length(f.content) OPERATOR(pg_catalog.+) pg_catalog.octet_length($3))
                OPERATOR(pg_catalog.<=) $4",
    args: &[TEXT, TEXT, TEXT, INT4],
    writes: true,
};

/// Create the file $2 of scope $1 with content $3, unless a file is
/// already at the path in the caller's tenant (then no row is written; a
/// concurrent creation is waited for). The path's other rules are checked
/// after (PATH_FREE), and a refused file removed again in the same call:
/// a new file costs three short statements, where checking everything
/// before writing cost one statement of three probes and two writes that
/// took longer.
static CREATE_FILE: Statement = Statement {
    sql: "INSERT INTO agent_memory.memory_files AS f (scope, path, content, tenant)
          VALUES ($1, $2, $3, agent_memory.caller_tenant())
          ON CONFLICT (scope, path, tenant) DO NOTHING",
    args: &[TEXT, TEXT, TEXT],
    writes: true,
};

/// Count one more file in scope $1 when it holds fewer than $2. The
/// scope's row stays locked to the end of the transaction (also when it is
/// full), so creations in one scope follow one another from here on: the
/// checks of PATH_FREE, made after, see every file created before. The row
/// is the caller's tenant's: another tenant's scope of the same name is
/// another row.
static COUNT_NEW_FILE: Statement = Statement {
    sql: "INSERT INTO agent_memory.memory_scopes AS s (scope, files, tenant)
          VALUES ($1, 1, agent_memory.caller_tenant())
          ON CONFLICT (scope, tenant) DO UPDATE SET files = s.files OPERATOR(pg_catalog.+) 1
            WHERE s.files OPERATOR(pg_catalog.<) $2",
    args: &[TEXT, INT4],
    writes: true,
};

/// Whether a new file's path is free of anything else: no file under it
/// (the range [$2, $3): a directory at the path) and no file above it
/// (none of $4, probed one by one: a fenced list joined on every key
/// column, so no statistics can turn it into a read of the whole scope).
/// Read-write, for a snapshot taken after COUNT_NEW_FILE.
static PATH_FREE: Statement = Statement {
    sql: "SELECT NOT EXISTS (SELECT FROM agent_memory.memory_files f
                             WHERE f.scope OPERATOR(pg_catalog.=) $1
                               AND f.path OPERATOR(pg_catalog.>=) $2 AND f.path OPERATOR(pg_catalog.<) $3
                               AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()),
                 NOT EXISTS (SELECT FROM (SELECT $1::pg_catalog.text AS scope, path,
                                                 agent_memory.caller_tenant() AS tenant
                                          FROM pg_catalog.unnest($4::pg_catalog.text[]) AS path
                                          OFFSET 0) a
                             JOIN agent_memory.memory_files f
                               ON f.scope OPERATOR(pg_catalog.=) a.scope
                              AND f.path OPERATOR(pg_catalog.=) a.path
                              AND f.tenant OPERATOR(pg_catalog.=) a.tenant)",
    args: &[TEXT, TEXT, TEXT, TEXT_ARRAY],
    writes: true,
};

/// Remove a file this call created and then refused.
static REMOVE_FILE: Statement = Statement {
    sql: "DELETE FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1 AND f.path OPERATOR(pg_catalog.=) $2
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TEXT, TEXT],
    writes: true,
};

/// Give back room counted for a file that was not created after all (one
/// was there) or was refused.
static UNCOUNT_FILE: Statement = Statement {
    sql: "UPDATE agent_memory.memory_scopes SET files = files OPERATOR(pg_catalog.-) $2
          WHERE scope OPERATOR(pg_catalog.=) $1
            AND tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TEXT, INT4],
    writes: true,
};

/// Count the files of scope $1 exactly, when its upper bound reached the
/// limit: the bound becomes the count, when below the limit $2. The scope's
/// row is already locked by the COUNT_NEW_FILE that found no room, so no other
/// creation can slip in between.
static RECOUNT: Statement = Statement {
    sql: "UPDATE agent_memory.memory_scopes s SET files = c.files
          FROM (SELECT pg_catalog.count(*)::pg_catalog.int4 AS files FROM agent_memory.memory_files f
                WHERE f.scope OPERATOR(pg_catalog.=) $1
                  AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()) c
          WHERE s.scope OPERATOR(pg_catalog.=) $1
            AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
            AND c.files OPERATOR(pg_catalog.<) $2
          RETURNING s.files",
    args: &[TEXT, INT4],
    writes: true,
};

/// The size of file $2 of scope $1 as of now.
static FILE_BYTES: Statement = Statement {
    sql: "SELECT pg_catalog.octet_length(f.content) FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1 AND f.path OPERATOR(pg_catalog.=) $2
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TEXT, TEXT],
    writes: true,
};

/// A file's content as of now (a fresh snapshot: the statement runs
/// read-write) and the row version it was read from.
static READ_VERSION: Statement = Statement {
    sql: "SELECT f.content, f.ctid, f.xmin FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1 AND f.path OPERATOR(pg_catalog.=) $2
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TEXT, TEXT],
    writes: true,
};

/// Write content $5 into file $3 of scope $4 at the row version read
/// (ctid $1, xmin $2) and nowhere else: when a concurrent change replaced
/// that version meanwhile, the recheck of READ COMMITTED finds a version
/// of another ctid and xmin and no row is written, so
/// the caller reads again and no change is lost. The xmin condition is
/// what rejects the new version on PostgreSQL minor releases before
/// November 2025, whose recheck ignored the ctid one.
static WRITE_VERSION: Statement = Statement {
    sql: "UPDATE agent_memory.memory_files f SET content = $5, updated_at = pg_catalog.now()
          WHERE f.ctid OPERATOR(pg_catalog.=) $1 AND f.xmin OPERATOR(pg_catalog.=) $2
            AND f.scope OPERATOR(pg_catalog.=) $3 AND f.path OPERATOR(pg_catalog.=) $4
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    args: &[TID, XID, TEXT, TEXT, TEXT],
    writes: true,
};

/// Delete a file, or every file of a directory (the range [$3, $4)), in one
/// pass, returning the deleted paths (what the answer counts follows from
/// them). The index condition is the range [$2, $4), which holds both:
/// an OR of the two would leave the path out of it, and a scope the
/// statistics think tiny would be read whole. The scope's file count is an upper bound, so a delete leaves it.
pub(crate) static DELETE_FILES: Statement = Statement {
    sql: "DELETE FROM agent_memory.memory_files f
          WHERE f.scope OPERATOR(pg_catalog.=) $1
            AND f.path OPERATOR(pg_catalog.>=) $2 AND f.path OPERATOR(pg_catalog.<) $4
            AND (f.path OPERATOR(pg_catalog.=) $2 OR f.path OPERATOR(pg_catalog.>=) $3)
            AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
          RETURNING f.path",
    args: &[TEXT, TEXT, TEXT, TEXT],
    writes: true,
};
