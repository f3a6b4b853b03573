//! The file store both dialects of the memory tool share: files in
//! scopes, each scope counting its files so that a full one refuses a new
//! file. A new file is counted first (which locks the scope's row),
//! inserted, then its path is checked (no file above it, no directory at
//! it) and it is removed again when refused. A directory is every file
//! under its path, and, for Claude's dialect, a row of memory_directories
//! that keeps it with no file under it; deleting it deletes both.
//!
//! Every statement reads and writes only rows whose tenant is
//! agent_memory.caller_tenant(), also for a superuser, whom row-level
//! security lets through. Functions, operators and types are named with
//! their schema: the memory tool runs with the caller's search_path.

use agent_memory_core::Error;
use agent_memory_core::files::memory_tool::{self as files, Code, ToolError, ToolResult};

use crate::pg::args::{INT4, TEXT, TEXT_ARRAY};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, FirstRow, Statement};
use crate::pg::settings;

/// The largest file a scope may hold (`agent_memory.max_file_bytes`).
pub(crate) fn max_file_bytes() -> i32 {
    settings::MAX_FILE_BYTES.get()
}

pub(crate) fn too_big(bytes: i64) -> ToolError {
    ToolError::new(
        Code::Efbig,
        format!(
            "EFBIG: file would have {bytes} bytes; at most {} are allowed (agent_memory.max_file_bytes)",
            max_file_bytes()
        ),
    )
}

pub(crate) fn a_directory() -> ToolError {
    ToolError::new(Code::Eisdir, "EISDIR: path is a directory")
}

pub(crate) type Client<'a, 'b> = &'a mut pgrx::spi::SpiClient<'b>;

/// Whether `dir` is a directory: files under it, or kept by Claude's
/// dialect.
pub(crate) fn is_directory(client: Client, scope: &str, dir: &str) -> SqlResult<bool> {
    let table = ANY_UNDER.run(
        client,
        &[scope.into(), files::under(dir).into(), files::under_end(dir).into(), dir.into()],
    )?;
    Ok(table.first().value::<bool>(1)? == Some(true))
}

/// Lock the scope's row, as a new file does first. A delete or a rename
/// takes it before any file's, as it may then count a kept directory or
/// remove the row: with the scope's row always taken first, a creation
/// and a deletion in one scope never wait for each other in a cycle. A
/// scope without a row gets one (counting nothing), so that a file
/// created meanwhile waits for the caller too: the caller forgets it
/// again when it leaves the scope empty.
pub(crate) fn lock_scope(client: Client, scope: &str) -> SqlResult<()> {
    if LOCK_SCOPE.run(client, &[scope.into()])?.is_empty() {
        LOCK_NEW_SCOPE.run(client, &[scope.into()])?;
    }
    Ok(())
}

/// Remove the scope's row when the scope holds nothing any more, so that
/// rows do not pile up for scopes long emptied. The caller holds the row's
/// lock (`lock_scope`) since before its deletion, so no file can have been
/// created since, unseen.
pub(crate) fn forget_scope_if_empty(client: Client, scope: &str) -> SqlResult<()> {
    FORGET_EMPTY_SCOPE.run(client, &[scope.into()])?;
    Ok(())
}

/// Keep directory `dir` when nothing is at or under it any more, as a file
/// system keeps the directory its last file left (Claude's dialect). The
/// row counts in the scope as a file does; in a full scope the directory
/// is not kept. No file may be at `dir` or above it: the callers check
/// (`path_free`).
pub(crate) fn keep_directory(client: Client, scope: &str, dir: &str) -> SqlResult<()> {
    if dir == "/" || is_directory(client, scope, dir)? {
        return Ok(());
    }
    if !count_new_file(client, scope)? {
        return Ok(());
    }
    // Checked again under the scope's lock: a file created since is seen.
    let kept = !KEEP_DIRECTORY
        .run(
            client,
            &[scope.into(), dir.into(), files::under(dir).into(), files::under_end(dir).into()],
        )?
        .is_empty();
    if !kept {
        UNCOUNT_FILE.run(client, &[scope.into(), 1i32.into()])?;
    }
    Ok(())
}

/// Read file `path` of `scope` and hand its content (borrowed from the
/// result, not copied) and version to `use_file`; None when there is no
/// file.
pub(crate) fn with_file<T>(
    client: Client, scope: &str, path: &str, use_file: impl FnOnce(&str, i32) -> T,
) -> SqlResult<Option<T>> {
    let table = READ.read(client, &[scope.into(), path.into()])?;
    if table.is_empty() {
        return Ok(None);
    }
    let row = table.first();
    let version = row.required::<i32>(2, "version")?;
    let content = crate::pg::datums::text_at(&row, 1)?;
    Ok(Some(use_file(content.unwrap_or_default(), version)))
}

/// Lock file `path` of `scope` until the transaction ends, and check
/// `precondition` against it (its version and content, or no file).
pub(crate) fn locked_file_meets(
    client: Client, scope: &str, path: &str, precondition: &files::Precondition,
) -> SqlResult<ToolResult<()>> {
    let table = LOCK_FILE.run(client, &[scope.into(), path.into()])?;
    if table.is_empty() {
        return Ok(precondition.check(None));
    }
    let row = table.first();
    let version = row.required::<i32>(2, "version")?;
    let content = crate::pg::datums::text_at(&row, 1)?.unwrap_or_default();
    Ok(precondition.check(Some((version, content))))
}

/// Lock file `path` of `scope` until the transaction ends; its version and
/// content, or None when there is no file.
pub(crate) fn lock_file(
    client: Client, scope: &str, path: &str,
) -> SqlResult<Option<(i32, String)>> {
    let table = LOCK_FILE.run(client, &[scope.into(), path.into()])?;
    if table.is_empty() {
        return Ok(None);
    }
    let row = table.first();
    Ok(Some((row.required::<i32>(2, "version")?, row.required::<String>(1, "content")?)))
}

/// Lock file `path` of `scope` until the transaction ends; whether it is
/// there.
pub(crate) fn lock_file_if_there(client: Client, scope: &str, path: &str) -> SqlResult<bool> {
    Ok(!LOCK_FILE.run(client, &[scope.into(), path.into()])?.is_empty())
}

/// Write `content` into the file at `path` (locked by the caller) as its
/// next version; returns that version.
pub(crate) fn write_file(client: Client, scope: &str, path: &str, content: &str) -> SqlResult<i32> {
    WRITE_FILE
        .run(client, &[scope.into(), path.into(), content.into()])?
        .first()
        .required::<i32>(1, "version")
}

/// What became of a new file.
pub(crate) enum Placed {
    /// At this version (1, or past the versions kept at its path).
    Created(i32),
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
    client: Client, scope: &str, path: &str, content: &str,
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
        return Ok(Placed::Refused(path_free(client, scope, path)?.unwrap_or(full)));
    }
    let table = if crate::pg::plans::on_citus()? {
        let newest = crate::files::versions::newest_kept_on_citus(client, scope, path)?;
        CREATE_FILE_ON_CITUS
            .run(client, &[scope.into(), path.into(), content.into(), newest.unwrap_or(0).into()])?
    } else {
        CREATE_FILE.run(client, &[scope.into(), path.into(), content.into()])?
    };
    let created =
        if table.is_empty() { None } else { Some(table.first().required::<i32>(1, "version")?) };
    let refused = if let Some(version) = created {
        match path_free(client, scope, path)? {
            None => return Ok(Placed::Created(version)),
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
    if !COUNT_NEW_FILE.run(client, &[scope.into(), max_files.into()])?.is_empty() {
        return Ok(true);
    }
    // The bound reached the limit: count the files and try once more.
    if RECOUNT.run(client, &[scope.into(), max_files.into()])?.is_empty() {
        return Ok(false);
    }
    Ok(!COUNT_NEW_FILE.run(client, &[scope.into(), max_files.into()])?.is_empty())
}

/// Count `count` new files in the scope at once (an import's), locking its
/// row as `count_new_file` does; false, counting none, when they would
/// bring it past its limit (the bound may be above the files there: one
/// by one, `count_new_file` counts them exactly).
pub(crate) fn count_new_files(client: Client, scope: &str, count: i32) -> SqlResult<bool> {
    let max_files = settings::MAX_FILES_PER_SCOPE.get();
    if count > max_files {
        return Ok(false);
    }
    Ok(!COUNT_NEW_FILES.run(client, &[scope.into(), count.into(), max_files.into()])?.is_empty())
}

/// Why a new file's path is not free, if it is not.
pub(crate) fn path_free(client: Client, scope: &str, path: &str) -> SqlResult<Option<ToolError>> {
    let table = PATH_FREE.run(
        client,
        &[
            scope.into(),
            files::under(path).into(),
            files::under_end(path).into(),
            files::ancestors(path).into(),
            path.into(),
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

/// What a deletion removed.
pub(crate) struct Deleted {
    pub files: usize,
    /// Directories: 0 for a file.
    pub dirs: usize,
}

/// Delete the file or directory `path` (not the root): a directory's
/// files and the directories kept in it, or the kept directory alone. The
/// scope's row is locked first (`lock_scope`), so the caller may count a
/// kept directory or remove the row of a scope left empty. Nothing there
/// to delete, a scope without files loses the row the lock may have made.
pub(crate) fn delete_path(client: Client, scope: &str, path: &str) -> SqlResult<Deleted> {
    lock_scope(client, scope)?;
    let range = [files::under(path), files::under_end(path)];
    let args = || -> [pgrx::datum::DatumWithOid<'_>; 4] {
        [scope.into(), path.into(), range[0].as_str().into(), range[1].as_str().into()]
    };
    crate::files::versions::save_at_or_under(client, scope, path)?;
    let table = DELETE_FILES.run(client, &args())?;
    // SAFETY: `table` is the last result, and `paths` is not used after
    // the next statement.
    let paths = unsafe { crate::pg::datums::last_result_texts(table.len()) }
        .ok_or_else(|| Error::internal("a deleted path is not UTF-8 text"))
        .or_report()?;
    if paths.contains(&path) {
        return Ok(Deleted { files: 1, dirs: 0 });
    }
    let files = paths.len();
    // The directories that held the deleted files.
    let mut holders: Vec<String> = Vec::new();
    for held in paths {
        let holder = files::parent(held);
        if holders.last().map(String::as_str) != Some(holder) {
            holders.push(holder.to_owned());
        }
    }
    let table = DELETE_DIRECTORIES.run(client, &args())?;
    for row in table {
        holders.push(row.value::<String>(1)?.unwrap_or_default());
    }
    let dirs = if holders.is_empty() {
        0
    } else {
        files::directories_removed(path, holders.iter().map(String::as_str))
    };
    if files == 0 && dirs == 0 {
        forget_scope_if_empty(client, scope)?;
    }
    Ok(Deleted { files, dirs })
}

/// The size of a file as of now, when it is there.
pub(crate) fn file_bytes(client: Client, scope: &str, path: &str) -> SqlResult<Option<i64>> {
    let bytes =
        FILE_BYTES.run(client, &[scope.into(), path.into()])?.first_value::<i32>(1).or_report()?;
    Ok(bytes.map(i64::from))
}

// The statements.

/// ` WHERE` row `$alias` is the file at path $2 of scope $1, in the
/// caller's tenant.
macro_rules! file_at {
    ($alias:literal) => {
        concat!(
            " WHERE ",
            $alias,
            ".scope OPERATOR(pg_catalog.=) $1 AND ",
            $alias,
            ".path OPERATOR(pg_catalog.=) $2 AND ",
            $alias,
            ".tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()"
        )
    };
}
pub(crate) use file_at;

/// Whether a directory is at path `$path` of scope $1: a file lies under
/// it (the range [`$under`, `$end`)), or a directory is kept at it or
/// under it. Each arm is a range of its table's key.
macro_rules! directory_at {
    ($path:literal, $under:literal, $end:literal) => {
        concat!(
            "(EXISTS (SELECT FROM agent_memory.memory_files f
                      WHERE f.scope OPERATOR(pg_catalog.=) $1
                        AND f.path OPERATOR(pg_catalog.>=) ",
            $under,
            " AND f.path OPERATOR(pg_catalog.<) ",
            $end,
            "
                        AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())
              OR EXISTS (SELECT FROM agent_memory.memory_directories d
                         WHERE d.scope OPERATOR(pg_catalog.=) $1
                           AND d.path OPERATOR(pg_catalog.>=) ",
            $path,
            " AND d.path OPERATOR(pg_catalog.<) ",
            $end,
            "
                           AND (d.path OPERATOR(pg_catalog.=) ",
            $path,
            " OR d.path OPERATOR(pg_catalog.>=) ",
            $under,
            ")
                           AND d.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()))"
        )
    };
}

pub(crate) static READ: Statement = Statement::read_only(
    concat!("SELECT f.content, f.version FROM agent_memory.memory_files f", file_at!("f")),
    &[TEXT, TEXT],
);

/// Whether $4 is a directory of scope $1 (the range [$2, $3) under it).
/// READ, locking the file's row against every other change until the
/// transaction ends: what a precondition is checked against.
static LOCK_FILE: Statement = Statement::read_write(
    concat!(
        "SELECT f.content, f.version FROM agent_memory.memory_files f",
        file_at!("f"),
        "
          FOR NO KEY UPDATE"
    ),
    &[TEXT, TEXT],
);

static ANY_UNDER: Statement = Statement::read_write(
    concat!("SELECT ", directory_at!("$4", "$2", "$3")),
    &[TEXT, TEXT, TEXT, TEXT],
);

static LOCK_SCOPE: Statement = Statement::read_write(
    "SELECT FROM agent_memory.memory_scopes s
     WHERE s.scope OPERATOR(pg_catalog.=) $1
       AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
     FOR NO KEY UPDATE",
    &[TEXT],
);

/// Make the row of scope $1, counting nothing, or lock the one made since
/// LOCK_SCOPE found none.
static LOCK_NEW_SCOPE: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_scopes AS s (scope, files, tenant)
     VALUES ($1, 0, agent_memory.caller_tenant())
     ON CONFLICT (scope, tenant) DO UPDATE SET files = s.files",
    &[TEXT],
);

static FORGET_EMPTY_SCOPE: Statement = Statement::read_write(
    "DELETE FROM agent_memory.memory_scopes s
     WHERE s.scope OPERATOR(pg_catalog.=) $1
       AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
       AND NOT EXISTS (SELECT FROM agent_memory.memory_files f
                       WHERE f.scope OPERATOR(pg_catalog.=) $1
                         AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())
       AND NOT EXISTS (SELECT FROM agent_memory.memory_directories d
                       WHERE d.scope OPERATOR(pg_catalog.=) $1
                         AND d.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())",
    &[TEXT],
);

/// Keep directory $2 of scope $1 (the range [$3, $4) under it) when no
/// directory is there any more. Runs under the scope's row lock, taken by
/// counting the row first.
static KEEP_DIRECTORY: Statement = Statement::read_write(
    concat!(
        "INSERT INTO agent_memory.memory_directories (scope, path, tenant)
         SELECT $1, $2, agent_memory.caller_tenant()
         WHERE NOT ",
        directory_at!("$2", "$3", "$4"),
        "
         ON CONFLICT (scope, path, tenant) DO NOTHING"
    ),
    &[TEXT, TEXT, TEXT, TEXT],
);

/// Delete the rows of `$table` at path $2 of scope $1 and under it (the
/// range [$3, $4)) in one pass, returning their paths. The index condition
/// is the range [$2, $4), which holds both: an OR of the two would leave
/// the path out of it, and a scope the statistics think tiny would be read
/// whole.
macro_rules! delete_at_or_under {
    ($table:literal) => {
        concat!(
            "DELETE FROM agent_memory.",
            $table,
            " t
             WHERE t.scope OPERATOR(pg_catalog.=) $1
               AND t.path OPERATOR(pg_catalog.>=) $2 AND t.path OPERATOR(pg_catalog.<) $4
               AND (t.path OPERATOR(pg_catalog.=) $2 OR t.path OPERATOR(pg_catalog.>=) $3)
               AND t.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
             RETURNING t.path"
        )
    };
}

/// Delete the kept directory $2 and those under it.
static DELETE_DIRECTORIES: Statement =
    Statement::read_write(delete_at_or_under!("memory_directories"), &[TEXT, TEXT, TEXT, TEXT]);

/// Create the file $2 of scope $1 with content $3, unless a file is
/// already at the path in the caller's tenant (then no row is written; a
/// concurrent creation is waited for). The path's other rules are checked
/// after (PATH_FREE), and a refused file removed again in the same call:
/// a new file costs three short statements, where checking everything
/// before writing cost one statement of three probes and two writes that
/// took longer. The file takes the version after those a deleted file
/// left kept at its path, whether history is on now or not, so that a
/// number never names two contents. Returns its version.
static CREATE_FILE: Statement = Statement::read_write(
    concat!(
        "INSERT INTO agent_memory.memory_files AS f (scope, path, content, tenant, version)
         VALUES ($1, $2, $3, agent_memory.caller_tenant(),
                 (SELECT coalesce(pg_catalog.max(v.version), 0) OPERATOR(pg_catalog.+) 1
                  FROM agent_memory.memory_file_versions v",
        file_at!("v"),
        "))
         ON CONFLICT (scope, path, tenant) DO NOTHING
         RETURNING f.version"
    ),
    &[TEXT, TEXT, TEXT],
);

/// As CREATE_FILE on Citus, which takes no subquery in the values: the
/// file takes the version after $4, the newest kept at its path.
static CREATE_FILE_ON_CITUS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_files AS f (scope, path, content, tenant, version)
     VALUES ($1, $2, $3, agent_memory.caller_tenant(), $4 OPERATOR(pg_catalog.+) 1)
     ON CONFLICT (scope, path, tenant) DO NOTHING
     RETURNING f.version",
    &[TEXT, TEXT, TEXT, INT4],
);

/// Count one more file in scope $1 when it holds fewer than $2. The
/// scope's row stays locked to the end of the transaction (also when it is
/// full), so creations in one scope follow one another from here on: the
/// checks of PATH_FREE, made after, see every file created before. The row
/// is the caller's tenant's: another tenant's scope of the same name is
/// another row.
static COUNT_NEW_FILE: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_scopes AS s (scope, files, tenant)
     VALUES ($1, 1, agent_memory.caller_tenant())
     ON CONFLICT (scope, tenant) DO UPDATE SET files = s.files OPERATOR(pg_catalog.+) 1
       WHERE s.files OPERATOR(pg_catalog.<) $2",
    &[TEXT, INT4],
);

/// Count $2 more files in scope $1 when that leaves it at most $3, as
/// COUNT_NEW_FILE counts one.
static COUNT_NEW_FILES: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_scopes AS s (scope, files, tenant)
     VALUES ($1, $2, agent_memory.caller_tenant())
     ON CONFLICT (scope, tenant) DO UPDATE SET files = s.files OPERATOR(pg_catalog.+) $2
       WHERE s.files OPERATOR(pg_catalog.+) $2 OPERATOR(pg_catalog.<=) $3
     RETURNING 1",
    &[TEXT, INT4, INT4],
);

/// Whether a new file's path $5 is free of anything else: no file under it
/// (the range [$2, $3)) and no kept directory at it or under it (either is
/// a directory at the path), and no file above it (none of $4, probed one
/// by one: a fenced list joined on every key column, so no statistics can
/// turn it into a read of the whole scope). Read-write, for a snapshot
/// taken after COUNT_NEW_FILE.
static PATH_FREE: Statement = Statement::read_write(
    concat!(
        "SELECT NOT ",
        directory_at!("$5", "$2", "$3"),
        ",
                 NOT EXISTS (SELECT FROM (SELECT $1::pg_catalog.text AS scope, path,
                                                 agent_memory.caller_tenant() AS tenant
                                          FROM pg_catalog.unnest($4::pg_catalog.text[]) AS path
                                          OFFSET 0) a
                             JOIN agent_memory.memory_files f
                               ON f.scope OPERATOR(pg_catalog.=) $1
                              AND f.path OPERATOR(pg_catalog.=) a.path
                              AND f.tenant OPERATOR(pg_catalog.=) a.tenant)"
    ),
    &[TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT],
);

/// Content $3 into file $2 of scope $1, as its next version.
static WRITE_FILE: Statement = Statement::read_write(
    concat!(
        "UPDATE agent_memory.memory_files f
          SET content = $3, updated_at = pg_catalog.now(), version = f.version OPERATOR(pg_catalog.+) 1",
        file_at!("f"),
        "
          RETURNING f.version"
    ),
    &[TEXT, TEXT, TEXT],
);

/// Remove a file this call created and then refused.
static REMOVE_FILE: Statement = Statement::read_write(
    concat!("DELETE FROM agent_memory.memory_files f", file_at!("f")),
    &[TEXT, TEXT],
);

/// Give back room counted for a file that was not created after all (one
/// was there) or was refused.
static UNCOUNT_FILE: Statement = Statement::read_write(
    "UPDATE agent_memory.memory_scopes SET files = files OPERATOR(pg_catalog.-) $2
     WHERE scope OPERATOR(pg_catalog.=) $1
       AND tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()",
    &[TEXT, INT4],
);

/// Count the files of scope $1 exactly, with the directories kept in it
/// that are still empty (one a file was created under since is not), when
/// its upper bound reached the limit: the bound becomes the count, when
/// below the limit $2. The scope's
/// row is already locked by the COUNT_NEW_FILE that found no room, so no other
/// creation can slip in between.
static RECOUNT: Statement = Statement::read_write(
    "UPDATE agent_memory.memory_scopes s SET files = c.files
     FROM (SELECT ((SELECT pg_catalog.count(*) FROM agent_memory.memory_files f
                    WHERE f.scope OPERATOR(pg_catalog.=) $1
                      AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())
                   OPERATOR(pg_catalog.+)
                   (SELECT pg_catalog.count(*) FROM agent_memory.memory_directories d
                    WHERE d.scope OPERATOR(pg_catalog.=) $1
                      AND d.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
                      AND NOT EXISTS (
                        SELECT FROM agent_memory.memory_files f
                        WHERE f.scope OPERATOR(pg_catalog.=) $1
                          AND f.path OPERATOR(pg_catalog.>=) (d.path OPERATOR(pg_catalog.||) '/')
                          AND f.path OPERATOR(pg_catalog.<) (d.path OPERATOR(pg_catalog.||) '0')
                          AND f.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant())))::pg_catalog.int4
                  AS files) c
     WHERE s.scope OPERATOR(pg_catalog.=) $1
       AND s.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
       AND c.files OPERATOR(pg_catalog.<) $2
     RETURNING s.files",
    &[TEXT, INT4],
);

/// Delete a file, or every file of a directory (what the answer counts
/// follows from the paths). The scope's file count is an upper bound, so a
/// delete leaves it.
pub(crate) static DELETE_FILES: Statement =
    Statement::read_write(delete_at_or_under!("memory_files"), &[TEXT, TEXT, TEXT, TEXT]);

/// The size of file $2 of scope $1 as of now.
static FILE_BYTES: Statement = Statement::read_write(
    concat!(
        "SELECT pg_catalog.octet_length(f.content) FROM agent_memory.memory_files f",
        file_at!("f")
    ),
    &[TEXT, TEXT],
);
