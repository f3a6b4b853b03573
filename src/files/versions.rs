//! History of memory-tool files: while `agent_memory.history_retention` is
//! above 0, a change or a delete of a file first saves the file as it is
//! (its version, content and times) in memory_file_versions, and keeps only
//! the versions numbered within the retention of the one saved. Each save
//! locks the files it saves and saves only what the write that follows
//! will change, so a refused request saves nothing. A rename moves a file's
//! versions with it; a file created where a deleted one left versions takes
//! the version after them, with history on or off (see CREATE_FILE).
//!
//! The memory tool runs with the caller's search_path (see memory_tool.rs),
//! so these statements name every function, operator and type with its
//! schema.

use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::error::quoted;
use agent_memory_core::files::memory_tool as files;
use agent_memory_core::versions;

use crate::files::store::{self, Client, Placed, file_at};
use crate::pg::args::{INT4, TEXT, TID, TIMESTAMPTZ, XID};
use crate::pg::c_functions::{TableCall, materialized_table_function};
use crate::pg::datums::JsonbBytes;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Rows, Statement, first_value_of, iso_fields};
use crate::pg::settings;
use crate::pg::stream::StreamStatement;

/// The arguments every save takes first: the scope, the file or directory
/// at `path` (and every file under it), and the retention.
fn at_or_under<'a>(
    scope: &'a str, path: &'a str, range: &'a [String; 2], retention: i32,
) -> [pgrx::datum::DatumWithOid<'a>; 5] {
    [
        scope.into(),
        path.into(),
        range[0].as_str().into(),
        range[1].as_str().into(),
        retention.into(),
    ]
}

fn range_of(path: &str) -> [String; 2] {
    [files::under(path), files::under_end(path)]
}

/// Save the file at `path`, or every file of the directory at `path`,
/// before a delete or an edit of what the caller has locked.
pub(crate) fn save_at_or_under(client: Client, scope: &str, path: &str) -> SqlResult<()> {
    save(client, Which::AtOrUnder, scope, path, Vec::new())
}

/// Save file `path` before an append of `bytes` bytes, when the append
/// will fit within `limit` (else the append changes nothing, and nothing
/// is saved).
pub(crate) fn save_before_append(
    client: Client, scope: &str, path: &str, bytes: usize, limit: i32,
) -> SqlResult<()> {
    let fits = vec![(bytes as i32).into(), limit.into()];
    save(client, Which::BeforeAppend, scope, path, fits)
}

/// Save file `path` before a write at the row version the caller read
/// (`ctid`, `xmin`): only while it is still that version, which the write
/// that follows then finds too.
pub(crate) fn save_row_version(
    client: Client, scope: &str, path: &str, ctid: pgrx::datum::DatumWithOid<'_>,
    xmin: pg_sys::TransactionId,
) -> SqlResult<()> {
    save(client, Which::RowVersion, scope, path, vec![ctid, xmin.into()])
}

/// Which files of the scope a save takes, at or under its path.
#[derive(Clone, Copy)]
enum Which {
    /// Every one.
    AtOrUnder,
    /// The one an append will fit ($6 bytes more, within $7).
    BeforeAppend,
    /// The one at a row version ($6 ctid, $7 xmin).
    RowVersion,
}

impl Which {
    fn statement(self) -> &'static Statement {
        match self {
            Which::AtOrUnder => &SAVE_AT_OR_UNDER,
            Which::BeforeAppend => &SAVE_BEFORE_APPEND,
            Which::RowVersion => &SAVE_ROW_VERSION,
        }
    }

    fn locked_on_citus(self) -> &'static Statement {
        match self {
            Which::AtOrUnder => &LOCKED_AT_OR_UNDER_ON_CITUS,
            Which::BeforeAppend => &LOCKED_BEFORE_APPEND_ON_CITUS,
            Which::RowVersion => &LOCKED_ROW_VERSION_ON_CITUS,
        }
    }
}

/// Save the files `which` picks at or under `path`, keeping the versions
/// within the retention, when history is on. `picking` are the arguments
/// of `which`, after those every save takes first (see at_or_under).
fn save(
    client: Client, which: Which, scope: &str, path: &str,
    picking: Vec<pgrx::datum::DatumWithOid<'_>>,
) -> SqlResult<()> {
    let retention = settings::history_retention();
    if retention == 0 {
        return Ok(());
    }
    let range = range_of(path);
    let mut args = Vec::from(at_or_under(scope, path, &range, retention));
    args.extend(picking);
    if crate::pg::plans::on_citus()? {
        return save_on_citus(client, which, scope, &args, retention);
    }
    // Planned once: a plan for the values would cost the save more than
    // running it, and the index plan is the same for any values.
    let _generic = settings::GenericPlans::force()?;
    which.statement().run(client, &args)?;
    Ok(())
}

/// As `save`, in the statements Citus routes inside a delegated function:
/// it refuses an INSERT that selects from a distributed table, or one in
/// a CTE. The files are locked and read, then each is saved as values and
/// its history trimmed.
fn save_on_citus(
    client: Client, which: Which, scope: &str, args: &[pgrx::datum::DatumWithOid<'_>],
    retention: i32,
) -> SqlResult<()> {
    let locked: Vec<(String, i32, String, TimestampWithTimeZone, TimestampWithTimeZone)> = which
        .locked_on_citus()
        .run(client, args)?
        .rows(&["path", "version", "content", "created_at", "updated_at"])?;
    for (path, version, content, created_at, updated_at) in &locked {
        SAVE_ONE_ON_CITUS.run(
            client,
            &[
                scope.into(),
                path.as_str().into(),
                (*version).into(),
                content.as_str().into(),
                (*created_at).into(),
                (*updated_at).into(),
            ],
        )?;
        TRIM_ON_CITUS.run(
            client,
            &[scope.into(), path.as_str().into(), (*version).into(), retention.into()],
        )?;
    }
    Ok(())
}

/// On Citus, the newest version kept at `path` (None: none), which a
/// file created there goes past.
pub(crate) fn newest_kept_on_citus(
    client: Client, scope: &str, path: &str,
) -> SqlResult<Option<i32>> {
    NEWEST_ON_CITUS.run(client, &[scope.into(), path.into()])?.first().value::<i32>(1)
}

/// Move the versions kept for the file or directory `from` with it to
/// `to` (a rename): versions left at `to` by files deleted there go first.
/// The paths of the versions kept at `at` or under it, each once: a move
/// of `at` must keep each a valid path.
pub(crate) fn kept_paths(client: Client, scope: &str, at: &str) -> SqlResult<Vec<String>> {
    let [under, end] = range_of(at);
    let table = KEPT_PATHS
        .run(client, &[scope.into(), at.into(), under.as_str().into(), end.as_str().into()])?;
    let mut paths = Vec::with_capacity(table.len());
    for row in table {
        paths.push(row.required::<String>(1, "path")?);
    }
    Ok(paths)
}

/// The numbers and contents of the versions kept at `path`.
pub(crate) fn kept_at(client: Client, scope: &str, path: &str) -> SqlResult<Vec<(i32, String)>> {
    let table = KEPT_AT.run(client, &[scope.into(), path.into()])?;
    let mut kept = Vec::with_capacity(table.len());
    for row in table {
        kept.push((row.required::<i32>(1, "version")?, row.required::<String>(2, "content")?));
    }
    Ok(kept)
}

pub(crate) fn move_versions(client: Client, scope: &str, from: &str, to: &str) -> SqlResult<()> {
    let [to_under, to_end] = range_of(to);
    DROP_AT_OR_UNDER.run(
        client,
        &[scope.into(), to.into(), to_under.as_str().into(), to_end.as_str().into()],
    )?;
    let [from_under, from_end] = range_of(from);
    MOVE.run(
        client,
        &[
            scope.into(),
            from.into(),
            from_under.as_str().into(),
            from_end.as_str().into(),
            to.into(),
            (from.chars().count() as i32).into(),
        ],
    )?;
    Ok(())
}

fn checked_scope(scope: Option<&str>) -> SqlResult<&str> {
    match scope {
        None => Err(Error::null("scope")).or_report(),
        Some("") => Err(Error::invalid("scope must not be empty")).or_report(),
        Some(scope) => Ok(scope),
    }
}

fn checked_path(path: Option<&str>) -> SqlResult<String> {
    let path = path.ok_or_else(|| Error::null("path")).or_report()?;
    files::normalise_path(path).map_err(|refused| Error::invalid(refused.message)).or_report()
}

fn file_name(scope: &str, path: &str) -> String {
    format!("file {} of scope {}", quoted(path), quoted(scope))
}

// memory_versions returns its rows in materialize mode, as kv_versions
// does: a call holds one version at a time.
materialized_table_function! { "memory_versions", memory_versions_wrapper, put_version_rows, r#"
CREATE FUNCTION agent_memory.memory_versions(scope text, path text)
RETURNS TABLE (version integer, content text, updated_at timestamptz, replaced_at timestamptz)
LANGUAGE c STABLE PARALLEL SAFE SET search_path TO pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'memory_versions_wrapper';
"# }

/// The versions kept of the file at `path`, newest first, into the result
/// store.
fn put_version_rows(call: &TableCall) -> SqlResult<()> {
    let scope = checked_scope(call.text(0)?)?;
    let path = checked_path(call.text(1)?)?;
    call.put_rows(&LIST, &[Some(scope), Some(path.as_str())])?;
    Ok(())
}

/// One kept version of a file as `{path, content, version, sha256,
/// createdAt, updatedAt, replacedAt}`, or NULL when it is not kept.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_version(
    scope: Option<&str>, path: Option<&str>, version: Option<i32>,
) -> SqlResult<Option<JsonbBytes>> {
    let scope = checked_scope(scope)?;
    let path = checked_path(path)?;
    let version = versions::checked_version("version", version).or_report()?;
    first_value_of::<JsonbBytes>(&READ, &[scope.into(), path.as_str().into(), version.into()])
}

/// Write a kept version's content back as the file's next version (itself
/// saved in turn, so a restore can be undone), only if the file is at
/// `expected_version` when given (0: no file). A deleted file comes back
/// where it was. Returns `{path, version}`.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_restore(
    scope: Option<&str>, path: Option<&str>, version: Option<i32>,
    expected_version: default!(Option<i32>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let scope = checked_scope(scope)?;
    let path = checked_path(path)?;
    let path = path.as_str();
    let version = versions::checked_version("version", version).or_report()?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    let name = file_name(scope, path);
    let restored = Spi::connect_mut(|client| -> SqlResult<i32> {
        // The scope's row first, as a delete and a creation take it.
        store::lock_scope(client, scope)?;
        let kept = KEPT_CONTENT.run(client, &[scope.into(), path.into(), version.into()])?;
        if kept.is_empty() {
            return Err(versions::not_kept(&name, version)).or_report();
        }
        let content = kept.first().required::<String>(1, "content")?;
        if let Some((at, _)) = store::lock_file(client, scope, path)? {
            if !versions::holds(expected, at) {
                return Err(versions::conflict(&name, expected.unwrap_or_default(), at))
                    .or_report();
            }
            if content.len() > store::max_file_bytes() as usize {
                return Err(Error::limit(store::too_big(content.len() as i64).message)).or_report();
            }
            save_at_or_under(client, scope, path)?;
            return store::write_file(client, scope, path, &content);
        }
        if let Some(expected) = expected
            && expected != versions::ABSENT
        {
            return Err(versions::conflict(&name, expected, versions::ABSENT)).or_report();
        }
        match store::place_new_file(client, scope, path, &content)? {
            Placed::Created(version) => Ok(version),
            Placed::Exists => {
                Err(Error::internal("a file turned up at a path its scope's lock kept free"))
                    .or_report()
            }
            Placed::Refused(refused) => Err(refused.into_sql_error()).or_report(),
        }
    })?;
    crate::pg::notify::queue_files_change(scope)?;
    Ok(JsonbBytes::from_value(serde_json::json!({"path": path, "version": restored})))
}

/// Remove the versions kept of the file or directory at `path`, or of every
/// file of the scope (NULL): for a request to erase what was stored.
/// Returns how many were removed. The files themselves stay.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_purge_history(
    scope: Option<&str>, path: default!(Option<&str>, "NULL"),
) -> SqlResult<i64> {
    let scope = checked_scope(scope)?;
    let path = path.map(|path| checked_path(Some(path))).transpose()?;
    let (path, range) = match &path {
        Some(path) => (path.as_str(), range_of(path)),
        // Every path of the scope: the root and all under it.
        None => ("/", range_of("/")),
    };
    Spi::connect_mut(|client| {
        // The scope's row first, as a restore takes it: a restore reads
        // the version it writes back under that lock, so it never writes
        // back one the purge has removed.
        store::lock_scope(client, scope)?;
        let purged = PURGE
            .run(
                client,
                &[scope.into(), path.into(), range[0].as_str().into(), range[1].as_str().into()],
            )?
            .first()
            .value::<i64>(1)?;
        // The lock may have made the row of a scope that holds nothing.
        store::forget_scope_if_empty(client, scope)?;
        Ok(purged.unwrap_or(0))
    })
}

// The statements.

/// The files of scope $1 at $2 or under it (the range [$3, $4)), as the
/// index reads them.
macro_rules! at_or_under {
    ($alias:literal) => {
        concat!(
            $alias,
            ".scope OPERATOR(pg_catalog.=) $1
               AND ",
            $alias,
            ".path OPERATOR(pg_catalog.>=) $2 AND ",
            $alias,
            ".path OPERATOR(pg_catalog.<) $4
               AND (",
            $alias,
            ".path OPERATOR(pg_catalog.=) $2 OR ",
            $alias,
            ".path OPERATOR(pg_catalog.>=) $3)
               AND ",
            $alias,
            ".tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()"
        )
    };
}

/// Only the file at $2 (none under it: an append to a directory is
/// refused and must save and lock nothing), when an append of $6 bytes
/// leaves it within $7 bytes.
macro_rules! fits_append {
    () => {
        " AND f.path OPERATOR(pg_catalog.=) $2
          AND (pg_catalog.octet_length(f.content) OPERATOR(pg_catalog.+) $6) OPERATOR(pg_catalog.<=) $7"
    };
}

/// Only the row version the writer read (ctid $6, xmin $7).
macro_rules! at_row_version {
    () => {
        " AND f.ctid OPERATOR(pg_catalog.=) $6 AND f.xmin OPERATOR(pg_catalog.=) $7"
    };
}

/// Lock the files `at_or_under!` picks that also meet `$which`, save each
/// (replacing a version of the same number an earlier file at its path
/// left), and drop the versions of each path newer than the one saved
/// (that earlier file's) or $5 or more below it.
macro_rules! save_files {
    ($which:expr) => {
        concat!(
            "WITH locked AS MATERIALIZED (
               SELECT f.scope, f.path, f.version, f.content, f.created_at, f.updated_at, f.tenant
               FROM agent_memory.memory_files f
               WHERE ",
            at_or_under!("f"),
            $which,
            "
               FOR UPDATE),
             saved AS (
               INSERT INTO agent_memory.memory_file_versions AS v
                   (scope, path, version, content, created_at, updated_at, tenant)
               SELECT scope, path, version, content, created_at, updated_at, tenant FROM locked
               ON CONFLICT (scope, path, version, tenant) DO UPDATE
                  SET content = excluded.content, created_at = excluded.created_at,
                      updated_at = excluded.updated_at, replaced_at = excluded.replaced_at
               RETURNING v.path, v.version)
           DELETE FROM agent_memory.memory_file_versions v USING saved
           WHERE v.scope OPERATOR(pg_catalog.=) $1
             AND v.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
             AND v.path OPERATOR(pg_catalog.=) saved.path
             AND (v.version OPERATOR(pg_catalog.>) saved.version
                  OR v.version OPERATOR(pg_catalog.<=) (saved.version OPERATOR(pg_catalog.-) $5))"
        )
    };
}

static SAVE_AT_OR_UNDER: Statement =
    Statement::read_write(save_files!(""), &[TEXT, TEXT, TEXT, TEXT, INT4]);

static SAVE_BEFORE_APPEND: Statement =
    Statement::read_write(save_files!(fits_append!()), &[TEXT, TEXT, TEXT, TEXT, INT4, INT4, INT4]);

static SAVE_ROW_VERSION: Statement = Statement::read_write(
    save_files!(at_row_version!()),
    &[TEXT, TEXT, TEXT, TEXT, INT4, TID, XID],
);

/// On Citus: lock and read the files of scope $1 at or under $2 that
/// `$which` picks, with the columns a version keeps.
macro_rules! locked_on_citus {
    ($which:expr) => {
        concat!(
            "SELECT f.path::pg_catalog.text, f.version, f.content, f.created_at, f.updated_at
             FROM agent_memory.memory_files f
             WHERE ",
            at_or_under!("f"),
            $which,
            "
             FOR UPDATE"
        )
    };
}

static LOCKED_AT_OR_UNDER_ON_CITUS: Statement =
    Statement::read_write(locked_on_citus!(""), &[TEXT, TEXT, TEXT, TEXT, INT4]);

static LOCKED_BEFORE_APPEND_ON_CITUS: Statement = Statement::read_write(
    locked_on_citus!(fits_append!()),
    &[TEXT, TEXT, TEXT, TEXT, INT4, INT4, INT4],
);

static LOCKED_ROW_VERSION_ON_CITUS: Statement = Statement::read_write(
    locked_on_citus!(at_row_version!()),
    &[TEXT, TEXT, TEXT, TEXT, INT4, TID, XID],
);

/// On Citus: save file $2 of scope $1 as version $3 (content $4, dates $5
/// and $6), replacing a version of that number an earlier file at the
/// path left.
static SAVE_ONE_ON_CITUS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.memory_file_versions AS v
         (scope, path, version, content, created_at, updated_at, tenant)
     VALUES ($1, $2::agent_memory.memory_path, $3, $4, $5, $6, agent_memory.caller_tenant())
     ON CONFLICT (scope, path, version, tenant) DO UPDATE
        SET content = excluded.content, created_at = excluded.created_at,
            updated_at = excluded.updated_at, replaced_at = excluded.replaced_at",
    &[TEXT, TEXT, INT4, TEXT, TIMESTAMPTZ, TIMESTAMPTZ],
);

/// On Citus: drop the versions of file $2 of scope $1 newer than the one
/// just saved ($3, an earlier file's) or $4 or more below it.
static TRIM_ON_CITUS: Statement = Statement::read_write(
    "DELETE FROM agent_memory.memory_file_versions v
     WHERE v.scope OPERATOR(pg_catalog.=) $1
       AND v.tenant OPERATOR(pg_catalog.=) agent_memory.caller_tenant()
       AND v.path OPERATOR(pg_catalog.=) $2
       AND (v.version OPERATOR(pg_catalog.>) $3
            OR v.version OPERATOR(pg_catalog.<=) ($3 OPERATOR(pg_catalog.-) $4))",
    &[TEXT, TEXT, INT4, INT4],
);

/// On Citus: the newest version kept at path $2 of scope $1.
static NEWEST_ON_CITUS: Statement = Statement::read_write(
    concat!(
        "SELECT pg_catalog.max(v.version) FROM agent_memory.memory_file_versions v",
        file_at!("v")
    ),
    &[TEXT, TEXT],
);

/// Drop the versions kept at $2 or under it.
static DROP_AT_OR_UNDER: Statement = Statement::read_write(
    concat!("DELETE FROM agent_memory.memory_file_versions v WHERE ", at_or_under!("v")),
    &[TEXT, TEXT, TEXT, TEXT],
);

/// The versions kept at path $2, as a write under the scope's lock sees
/// them.
static KEPT_AT: Statement = Statement::read_write(
    "SELECT v.version, v.content FROM agent_memory.memory_file_versions v
     WHERE v.scope = $1 AND v.path = $2 AND v.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT],
);

/// The paths kept at $2 or under it, each once.
static KEPT_PATHS: Statement = Statement::read_write(
    concat!(
        "SELECT DISTINCT v.path FROM agent_memory.memory_file_versions v WHERE ",
        at_or_under!("v")
    ),
    &[TEXT, TEXT, TEXT, TEXT],
);

/// Move the versions kept at $2 or under it to $5: each path's first $6
/// characters become $5 (as the files move).
static MOVE: Statement = Statement::read_write(
    concat!(
        "UPDATE agent_memory.memory_file_versions v
         SET path = ($5 OPERATOR(pg_catalog.||) pg_catalog.substr(v.path, $6 OPERATOR(pg_catalog.+) 1))::agent_memory.memory_path
         WHERE ",
        at_or_under!("v")
    ),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, INT4],
);

static LIST: StreamStatement = StreamStatement {
    sql: "SELECT v.version, v.content, v.updated_at, v.replaced_at
          FROM agent_memory.memory_file_versions v
          WHERE v.scope = $1 AND v.path = $2 AND v.tenant = agent_memory.caller_tenant()
          ORDER BY v.version DESC",
    params: 2,
    columns: &[pg_sys::INT4OID, pg_sys::TEXTOID, pg_sys::TIMESTAMPTZOID, pg_sys::TIMESTAMPTZOID],
};

static READ: Statement = Statement::read_only(
    concat!(
        "SELECT pg_catalog.jsonb_build_object(
                  'path', v.path, 'content', v.content, 'version', v.version,
                  'sha256', pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(v.content, 'UTF8')), 'hex')",
        iso_fields!("createdAt": "v.created_at", "updatedAt": "v.updated_at", "replacedAt": "v.replaced_at"),
        ")
         FROM agent_memory.memory_file_versions v
         WHERE v.scope = $1 AND v.path = $2 AND v.version = $3 AND v.tenant = agent_memory.caller_tenant()"
    ),
    &[TEXT, TEXT, INT4],
);

static KEPT_CONTENT: Statement = Statement::read_write(
    "SELECT v.content FROM agent_memory.memory_file_versions v
     WHERE v.scope = $1 AND v.path = $2 AND v.version = $3 AND v.tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT, INT4],
);

/// Remove the versions kept at $2 or under it; how many.
static PURGE: Statement = Statement::read_write(
    concat!(
        "WITH purged AS (DELETE FROM agent_memory.memory_file_versions v WHERE ",
        at_or_under!("v"),
        " RETURNING 1)
         SELECT pg_catalog.count(*) FROM purged"
    ),
    &[TEXT, TEXT, TEXT, TEXT],
);
