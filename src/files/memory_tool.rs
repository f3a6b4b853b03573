//! The memory tool: `memory_scope` names a scope, `memory_tool`
//! runs one request `{path, command, content?, oldContent?, query?,
//! expectedVersion?, expectedSha256?}` on the scope's files and answers
//! with its JSON envelope. A request with a precondition first locks the
//! file at its path and checks it; the command then runs on the file as
//! it was checked.
//!
//! A bad request is an envelope with `ok:false`, never an SQL error, and
//! changes nothing. Each command is one call in the caller's transaction:
//! a read, a delete and an append to an existing file are one statement;
//! an update reads the file, then writes at the row version it read; an
//! append to a file that does not exist yet counts it in the scope (which
//! locks the scope's row), inserts it, then checks its path (no file above
//! it, no directory at it), removing it again when refused.

use pgrx::prelude::*;

use agent_memory_core::files::memory_tool::{
    self as files, Code, Command, Echo, Precondition, Replacement, ToolError, ToolResult,
};
use agent_memory_core::recall::Query;
use agent_memory_core::{Error, args, jsonb};

use crate::files::store::{
    Client, Placed, READ, a_directory, delete_path, file_at, file_bytes, forget_scope_if_empty,
    is_directory, lock_file_if_there, lock_scope, locked_file_meets, max_file_bytes,
    place_new_file, too_big, with_file,
};
use crate::files::versions;
use crate::pg::args::{INT4, TEXT, TID, XID};
use crate::pg::datums::{JsonText, TooDeep, ToolRequest};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{self, Columns, Statement};
use crate::pg::search::matching;

use crate::pg::settings::{self, GenericPlans, NoNotices};
use crate::pg::stream::{StreamStatement, for_each_row};

// A write that returns nothing is judged by how many rows it changed
// (`is_empty` of its result reads SPI_processed): a `RETURNING` would cost
// each one a result to build.
//
// memory_tool runs with the caller's search_path (a SET clause would save
// and restore the setting on every call), so every statement it runs names each
// function, operator and type with its schema. OPERATOR(...) binds like any
// user operator, so operands are parenthesised.
//
// Scopes are a tenant's own: every statement reads and writes only rows
// whose tenant is agent_memory.caller_tenant(), also for a superuser, whom
// row-level security lets through, and a file's key is (scope, tenant,
// path), a scope's (scope, tenant).

fn read(client: Client, scope: &str, path: &str) -> SqlResult<ToolResult<String>> {
    if let Some(result) = with_file(client, scope, path, files::read_result)? {
        return Ok(Ok(result));
    }
    if path == "/" || is_directory(client, scope, path)? {
        return Ok(Err(a_directory()));
    }
    Ok(Err(files::not_found()))
}

fn list(client: Client, scope: &str, dir: &str) -> SqlResult<ToolResult<String>> {
    let end = files::under_end(dir);
    let mut from = files::under(dir);
    let mut entries: Vec<(String, bool)> = Vec::new();
    loop {
        let table =
            FIRST_FROM.read(client, &[scope.into(), from.as_str().into(), end.as_str().into()])?;
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
    // An empty directory is one Claude's dialect kept.
    if entries.is_empty() && dir != "/" && !is_directory(client, scope, dir)? {
        let table = READ.read(client, &[scope.into(), dir.into()])?;
        return Ok(Err(if table.is_empty() {
            ToolError::new(Code::Enoent, "ENOENT: directory not found")
        } else {
            ToolError::new(Code::Enotdir, "ENOTDIR: path is a file")
        }));
    }
    Ok(Ok(files::list_result(&mut entries)))
}

/// `append` under a precondition that found no file: create it, and only
/// it; a file created concurrently meanwhile is a conflict.
fn create_only(
    client: Client, scope: &str, path: &str, content: &str, precondition: &Precondition,
) -> SqlResult<ToolResult<String>> {
    if path == "/" {
        return Ok(Err(a_directory()));
    }
    match place_new_file(client, scope, path, content)? {
        Placed::Created(version) => Ok(Ok(files::append_result(version))),
        Placed::Refused(refused) => Ok(Err(refused)),
        Placed::Exists => {
            Ok(locked_file_meets(client, scope, path, precondition)?.and(Err(files::not_found())))
        }
    }
}

fn append(client: Client, scope: &str, path: &str, content: &str) -> SqlResult<ToolResult<String>> {
    if path == "/" {
        return Ok(Err(a_directory()));
    }
    let limit = max_file_bytes();
    // Append to the file when it exists and has room; else create it.
    // The loop comes back only when a file turned up at the path between
    // the two (created concurrently), or went away after it was found too
    // big. With history kept, the file is locked first, so that the
    // version the append replaces is the one saved: a file created or
    // changed after the save looked would be appended to unsaved.
    for _ in 0..MAX_TRIES {
        let there = settings::history_retention() == 0 || lock_file_if_there(client, scope, path)?;
        if there {
            versions::save_before_append(client, scope, path, content.len(), limit)?;
            let appended = APPEND_EXISTING
                .run(client, &[scope.into(), path.into(), content.into(), limit.into()])?;
            if !appended.is_empty() {
                let version = appended.first().required::<i32>(1, "version")?;
                return Ok(Ok(files::append_result(version)));
            }
        }
        match place_new_file(client, scope, path, content)? {
            Placed::Created(version) => return Ok(Ok(files::append_result(version))),
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

fn update(
    client: Client, scope: &str, path: &str, old: &str, new: &str,
) -> SqlResult<ToolResult<String>> {
    let limit = max_file_bytes();
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
            return Ok(Err(files::not_found()));
        }
        let row = table.first();
        let content = crate::pg::datums::text_at(&row, 1)?.unwrap_or_default();
        let limit_bytes = usize::try_from(limit).unwrap_or(0);
        let (replacement, replaced) = match files::replace_counted(content, old, new, limit_bytes) {
            Replacement::Replaced(replacement, replaced) => (replacement, replaced),
            Replacement::NotFound => {
                let version = row.required::<i32>(4, "version")?;
                return Ok(Ok(files::update_result(0, version)));
            }
            Replacement::TooLarge { .. } => {
                return Ok(Err(ToolError::new(
                    Code::Efbig,
                    format!(
                        "EFBIG: the file would exceed {limit} bytes (agent_memory.max_file_bytes)"
                    ),
                )));
            }
        };
        let at = RowVersion::of(&row, 2, 3)?;
        versions::save_row_version(client, scope, path, at.ctid(), at.xmin)?;
        let written = WRITE_VERSION.run(
            client,
            &[at.ctid(), at.xmin.into(), scope.into(), path.into(), replacement.as_str().into()],
        )?;
        if !written.is_empty() {
            let version = written.first().required::<i32>(1, "version")?;
            return Ok(Ok(files::update_result(replaced, version)));
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
    if deleted.files == 0 && deleted.dirs == 0 {
        return Ok(Err(ToolError::new(Code::Enoent, "ENOENT: file or directory not found")));
    }
    forget_scope_if_empty(client, scope)?;
    Ok(Ok(format!("{{\"files\":{},\"dirs\":{}}}", deleted.files, deleted.dirs)))
}

/// The files at `path` or under it whose search column matches `query`,
/// best first, each with its matching words marked. No file at or under
/// the path (but the root) is ENOENT; a query of only common words finds
/// nothing.
fn search(client: Client, scope: &str, path: &str, query: &Query) -> SqlResult<ToolResult<String>> {
    let mut matches = Vec::new();
    if !query.wanted.is_empty() {
        // A query of only common words is no error: no NOTICE either.
        let _quiet = NoNotices::hold();
        let mut args = vec![
            scope.into(),
            path.into(),
            files::under(path).into(),
            files::under_end(path).into(),
            query.wanted.as_str().into(),
            query.unwanted.as_str().into(),
            files::MAX_SEARCH_MATCHES.into(),
        ];
        let search = if plans::on_citus()? {
            let config =
                SEARCH_CONFIG.read(client, &[])?.first().required::<String>(1, "config")?;
            args.push(config.into());
            &SEARCH_ON_CITUS
        } else {
            &SEARCH
        };
        let table = search.read(client, &args)?;
        for row in table {
            matches.push((
                row.required::<String>(1, "path")?,
                row.value::<String>(2)?.unwrap_or_default(),
                row.required::<f32>(3, "score")?,
            ));
        }
    }
    if matches.is_empty()
        && path != "/"
        && READ.read(client, &[scope.into(), path.into()])?.is_empty()
        && !is_directory(client, scope, path)?
    {
        return Ok(Err(ToolError::new(Code::Enoent, "ENOENT: file or directory not found")));
    }
    Ok(Ok(files::search_result(&matches)))
}

fn run(
    scope: &str, command: &Command, path: &str, precondition: &Precondition,
) -> SqlResult<ToolResult<String>> {
    let _generic = GenericPlans::force()?;
    Spi::connect_mut(|client| {
        if !precondition.is_none() {
            // The scope's row is locked before any file's (see
            // store::lock_scope): a delete takes it, and an append may go
            // on to create the file, which takes it too. So the check
            // takes it first for both.
            let takes_scope = matches!(command, Command::Delete | Command::Append { .. });
            if takes_scope {
                lock_scope(client, scope)?;
            }
            if let Err(conflict) = locked_file_meets(client, scope, path, precondition)? {
                if takes_scope {
                    // The lock may have made the row of a scope that
                    // holds nothing.
                    forget_scope_if_empty(client, scope)?;
                }
                return Ok(Err(conflict));
            }
            // No file was there to lock: an append may only create it.
            if let Command::Append { content } = command
                && precondition.version == Some(agent_memory_core::versions::ABSENT)
            {
                return create_only(client, scope, path, content, precondition);
            }
        }
        match command {
            Command::Read => read(client, scope, path),
            Command::List => list(client, scope, path),
            Command::Append { content } => append(client, scope, path, content),
            Command::Update { old, new } => update(client, scope, path, old, new),
            Command::Delete => delete(client, scope, path),
            Command::Search { query } => search(client, scope, path, query),
        }
    })
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
    let parsed = parsed.and_then(|(command, path)| {
        let precondition = files::precondition_of(fields.as_deref().unwrap_or_default(), &command)?;
        Ok((command, path, precondition))
    });
    let answer = match (scope, parsed) {
        (_, Err(error)) => Err(error),
        (None, Ok(_)) | (Some(""), Ok(_)) => Err(ToolError::new(Code::Einval, "scope is required")),
        (Some(scope), Ok(_)) if files::check_scope(scope).is_err() => Err(ToolError::new(
            Code::Einval,
            format!("scope is longer than {} bytes", files::MAX_SCOPE_BYTES),
        )),
        (Some(scope), Ok((command, path, precondition))) => {
            let answer = run(scope, &command, &path, &precondition)?;
            if answer.is_ok() && command.writes() {
                crate::pg::notify::queue_files_change(scope)?;
            }
            answer
        }
    };
    Ok(JsonText(files::envelope(&echo, answer)))
}

#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_scope(
    memory_node_id: Option<&str>, scope: default!(Option<&str>, "'global'"),
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
    scope: Option<&str>, content: default!(Option<&str>, "'tree'"),
    max_chars: default!(Option<i32>, "4000"),
) -> SqlResult<String> {
    let scope = scope.ok_or_else(|| Error::null("scope")).or_report()?;
    let max_chars = match max_chars {
        Some(n) if n >= 1 => n as usize,
        Some(n) => {
            return Err(Error::invalid(format!("max_chars must be at least 1, not {n}")))
                .or_report();
        }
        None => return Err(Error::null("max_chars")).or_report(),
    };
    let full = args::one_of("content", content, &["tree", "full"]).or_report()? == "full";
    let mut rendering = files::Rendering::new(max_chars, settings::max_result_bytes());
    if full {
        // Files are read one at a time; only what can still fit is kept.
        for_each_row(&SCOPE_FILES, &[Some(scope)], &mut |row| {
            rendering.push_file(row.text(1, "path")?, row.text(2, "content")?).or_report()
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
    name: default!(Option<&str>, "'memory'"), description: default!(Option<&str>, "NULL"),
    title: default!(Option<&str>, "NULL"), format: default!(Option<&str>, "'anthropic'"),
) -> SqlResult<pgrx::JsonB> {
    files::tool_definition(name, description, title, format).map(pgrx::JsonB).or_report()
}

// The statements.

/// The first path of scope $1 in [$2, $3): one index probe per entry of a
/// listing, whatever the size of the subtrees it skips.
static FIRST_FROM: Statement = Statement::read_only(
    "SELECT f.path::text FROM agent_memory.memory_files f
     WHERE f.scope OPERATOR(pg_catalog.=) $1
       AND f.path OPERATOR(pg_catalog.>=) $2 AND f.path OPERATOR(pg_catalog.<) $3
       AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
     ORDER BY f.path LIMIT 1",
    &[TEXT, TEXT, TEXT],
);

/// Scope $1's files at path $2 or in the range [$3, $4) under it whose
/// search column has any of the words $5 and none of the words $6 (see
/// recall::Query), in recall's text search configuration: their paths,
/// snippets (the first 20,000 characters, words marked with **) and
/// ts_rank_cd scores, best first, at most $7. The files are read through
/// the scope's keys (a scope holds a bounded number of files; the search
/// column's index holds every scope's words), and the snippets are made
/// for the rows kept only.
static SEARCH: Statement = Statement::read_only(
    concat!(
        "WITH q AS MATERIALIZED (
       SELECT c.config, ",
        matching!("c.config", "$5", "$6"),
        " AS q
       FROM agent_memory.recall_settings c),
     best AS MATERIALIZED (
       SELECT f.path, f.content, pg_catalog.ts_rank_cd(f.search, q.q) AS score
       FROM (SELECT f.* FROM agent_memory.memory_files f
             WHERE f.scope OPERATOR(pg_catalog.=) $1
               AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
               AND (f.path OPERATOR(pg_catalog.=) $2
                    OR (f.path OPERATOR(pg_catalog.>=) $3 AND f.path OPERATOR(pg_catalog.<) $4))
             OFFSET 0) f, q
       WHERE f.search OPERATOR(pg_catalog.@@) q.q
       ORDER BY score DESC, f.path LIMIT $7)
     SELECT b.path::pg_catalog.text,
            pg_catalog.ts_headline(q.config, pg_catalog.left(b.content, 20000), q.q,
              'StartSel=**, StopSel=**, MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=\" … \"'),
            b.score
     FROM best b, q ORDER BY b.score DESC, b.path"
    ),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, INT4],
);

/// The text search configuration of the search columns.
static SEARCH_CONFIG: Statement = Statement::read_only(
    "SELECT c.config::pg_catalog.text FROM agent_memory.recall_settings c",
    &[],
);

/// SEARCH on Citus, in configuration $8 (read first, by SEARCH_CONFIG),
/// as one query over the scope's shard: inside a function delegated with
/// force_delegation, Citus refuses a statement that joins a shard with a
/// reference table, or that it plans in parts (a CTE).
static SEARCH_ON_CITUS: Statement = Statement::read_only(
    concat!(
        "SELECT b.path::pg_catalog.text,
            pg_catalog.ts_headline($8::pg_catalog.regconfig, pg_catalog.left(b.content, 20000), b.q,
              'StartSel=**, StopSel=**, MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=\" … \"'),
            b.score
     FROM (SELECT f.path, f.content, q.q, pg_catalog.ts_rank_cd(f.search, q.q) AS score
           FROM agent_memory.memory_files f,
                (SELECT ",
        matching!("$8::pg_catalog.regconfig", "$5", "$6"),
        " AS q) q
           WHERE f.scope OPERATOR(pg_catalog.=) $1
             AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
             AND (f.path OPERATOR(pg_catalog.=) $2
                  OR (f.path OPERATOR(pg_catalog.>=) $3 AND f.path OPERATOR(pg_catalog.<) $4))
             AND f.search OPERATOR(pg_catalog.@@) q.q
           ORDER BY score DESC, f.path LIMIT $7) b
     ORDER BY b.score DESC, b.path"
    ),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT, INT4, TEXT],
);

/// Append to an existing file within the size limit ($4 bytes); returns
/// its version now.
static APPEND_EXISTING: Statement = Statement::read_write(
    concat!(
        "UPDATE agent_memory.memory_files f
          SET content = f.content OPERATOR(pg_catalog.||) $3, updated_at = pg_catalog.now(),
              version = f.version OPERATOR(pg_catalog.+) 1",
        file_at!("f"),
        "
            AND (pg_catalog.octet_length(f.content) OPERATOR(pg_catalog.+) pg_catalog.octet_length($3))
                OPERATOR(pg_catalog.<=) $4
          RETURNING f.version"
    ),
    &[TEXT, TEXT, TEXT, INT4],
);

/// A file's content as of now (a fresh snapshot: the statement runs
/// read-write), the row version it was read from, and its version.
static READ_VERSION: Statement = Statement::read_write(
    concat!(
        "SELECT f.content, f.ctid, f.xmin, f.version
         FROM agent_memory.memory_files f",
        file_at!("f")
    ),
    &[TEXT, TEXT],
);

/// Write content $5 into file $3 of scope $4 at the row version read
/// (ctid $1, xmin $2) and nowhere else: when a concurrent change replaced
/// that version meanwhile, the recheck of READ COMMITTED finds a version
/// of another ctid and xmin and no row is written, so
/// the caller reads again and no change is lost. The xmin condition is
/// what rejects the new version on PostgreSQL minor releases before
/// November 2025, whose recheck ignored the ctid one.
static WRITE_VERSION: Statement = Statement::read_write(
    "UPDATE agent_memory.memory_files f
     SET content = $5, updated_at = pg_catalog.now(), version = f.version OPERATOR(pg_catalog.+) 1
     WHERE f.ctid OPERATOR(pg_catalog.=) $1 AND f.xmin OPERATOR(pg_catalog.=) $2
       AND f.scope OPERATOR(pg_catalog.=) $3 AND f.path OPERATOR(pg_catalog.=) $4
       AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
     RETURNING f.version",
    &[TID, XID, TEXT, TEXT, TEXT],
);
