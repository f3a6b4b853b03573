//! The memory tool (seed 002): `memory_scope` names a scope, `memory_tool`
//! runs one request `{path, command, content?, oldContent?}` on the scope's
//! files and answers with the seed's JSON envelope.
//!
//! A bad request is an envelope with `ok:false`, never an SQL error, and
//! changes nothing. Each command is one call in the caller's transaction:
//! reads and single-file writes are one statement; an append to a file
//! that does not exist yet first checks that its path is free (no file
//! above it, no directory at it) and that the scope has room.

use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::memory_files::{self as files, Code, Command, Echo, ToolError, ToolResult};

use crate::datums::{JsonText, JsonbArg};
use crate::error::{OrReport, SqlResult};
use crate::plans::{Statement, kept};
use crate::sessions::{INT4, TEXT, TEXT_ARRAY};
use crate::settings;

pub(crate) static READ: Statement = Statement {
    sql: "SELECT f.content FROM agent_memory.memory_files f WHERE f.scope = $1 AND f.path = $2",
    args: &[TEXT, TEXT],
    writes: false,
};

/// Whether anything lies under the range [$2, $3) of scope $1: a
/// directory's files.
static ANY_UNDER: Statement = Statement {
    sql: "SELECT EXISTS (SELECT FROM agent_memory.memory_files f
                         WHERE f.scope = $1 AND f.path >= $2 AND f.path < $3)",
    args: &[TEXT, TEXT, TEXT],
    writes: true,
};

/// The first path of scope $1 in [$2, $3): one index probe per entry of a
/// listing, whatever the size of the subtrees it skips.
static FIRST_FROM: Statement = Statement {
    sql: "SELECT f.path FROM agent_memory.memory_files f
          WHERE f.scope = $1 AND f.path >= $2 AND f.path < $3
          ORDER BY f.path LIMIT 1",
    args: &[TEXT, TEXT, TEXT],
    writes: false,
};

/// Append to an existing file within the size limit ($4 bytes).
static APPEND_EXISTING: Statement = Statement {
    sql: "UPDATE agent_memory.memory_files f
          SET content = f.content || $3, updated_at = pg_catalog.now()
          WHERE f.scope = $1 AND f.path = $2
            AND pg_catalog.octet_length(f.content) + pg_catalog.octet_length($3) <= $4
          RETURNING true",
    args: &[TEXT, TEXT, TEXT, INT4],
    writes: true,
};

/// The size of a file, when it exists.
static FILE_BYTES: Statement = Statement {
    sql: "SELECT pg_catalog.octet_length(f.content) FROM agent_memory.memory_files f
          WHERE f.scope = $1 AND f.path = $2",
    args: &[TEXT, TEXT],
    writes: true,
};

/// Whether any of the paths $2 of scope $1 is a file.
static ANY_FILE: Statement = Statement {
    sql: "SELECT EXISTS (SELECT FROM agent_memory.memory_files f
                         WHERE f.scope = $1 AND f.path = ANY ($2))",
    args: &[TEXT, TEXT_ARRAY],
    writes: true,
};

/// Count one more file in scope $1 if it has room ($2 files at most).
static TAKE_ROOM: Statement = Statement {
    sql: "INSERT INTO agent_memory.memory_scopes AS s (scope, files) VALUES ($1, 1)
          ON CONFLICT (scope) DO UPDATE SET files = s.files + 1 WHERE s.files < $2
          RETURNING s.files",
    args: &[TEXT, INT4],
    writes: true,
};

/// Create a file (or, when a concurrent append created it first, append).
static CREATE_FILE: Statement = Statement {
    sql: "INSERT INTO agent_memory.memory_files AS f (scope, path, content) VALUES ($1, $2, $3)
          ON CONFLICT (scope, path) DO UPDATE
            SET content = f.content || excluded.content, updated_at = pg_catalog.now()
          RETURNING f.xmax = 0",
    args: &[TEXT, TEXT, TEXT],
    writes: true,
};

/// Create a file unless one is already there (then no row).
static CREATE_ONLY: Statement = Statement {
    sql: "INSERT INTO agent_memory.memory_files (scope, path, content) VALUES ($1, $2, $3)
          ON CONFLICT (scope, path) DO NOTHING
          RETURNING true",
    args: &[TEXT, TEXT, TEXT],
    writes: true,
};

/// Give back room counted for a file that a concurrent append created.
static GIVE_ROOM: Statement = Statement {
    sql: "UPDATE agent_memory.memory_scopes SET files = files - $2 WHERE scope = $1",
    args: &[TEXT, INT4],
    writes: true,
};

/// Replace every occurrence of $3 by $4 in a file (locked first, so a
/// concurrent append or update is replayed on, not lost), within the size
/// limit ($5 bytes). Returns whether the result fits (or nothing changes)
/// and how many occurrences there were; no row when there is no file.
static UPDATE_FILE: Statement = Statement {
    sql: "WITH old AS (
            SELECT f.content FROM agent_memory.memory_files f
            WHERE f.scope = $1 AND f.path = $2 FOR NO KEY UPDATE),
          new AS (
            SELECT (pg_catalog.length(old.content)
                    - pg_catalog.length(pg_catalog.replace(old.content, $3, ''))) / pg_catalog.length($3) AS replaced,
                   pg_catalog.replace(old.content, $3, $4) AS content
            FROM old),
          written AS (
            UPDATE agent_memory.memory_files f SET content = new.content, updated_at = pg_catalog.now()
            FROM new
            WHERE f.scope = $1 AND f.path = $2 AND new.replaced > 0
              AND pg_catalog.octet_length(new.content) <= $5
            RETURNING 1)
          SELECT new.replaced = 0 OR pg_catalog.octet_length(new.content) <= $5, new.replaced
          FROM new",
    args: &[TEXT, TEXT, TEXT, TEXT, INT4],
    writes: true,
};

/// Delete a file, or every file of a directory (the range [$3, $4)), and
/// count them off the scope. Returns how many files went, whether the file
/// $2 itself was one, and the distinct directories that held them (a
/// directory's subdirectories follow from those).
pub(crate) static DELETE_FILES: Statement = Statement {
    sql: "WITH gone AS (
            DELETE FROM agent_memory.memory_files f
            WHERE f.scope = $1 AND (f.path = $2 OR (f.path >= $3 AND f.path < $4))
            RETURNING f.path),
          counted AS (
            UPDATE agent_memory.memory_scopes s SET files = s.files - (SELECT count(*) FROM gone)
            WHERE s.scope = $1 AND EXISTS (SELECT FROM gone))
          SELECT (SELECT count(*) FROM gone)::int4,
                 EXISTS (SELECT FROM gone WHERE gone.path = $2),
                 ARRAY (SELECT DISTINCT pg_catalog.left(g.path,
                          pg_catalog.length(g.path) - pg_catalog.strpos(pg_catalog.reverse(g.path), '/'))
                        FROM gone g)",
    args: &[TEXT, TEXT, TEXT, TEXT],
    writes: true,
};

/// A setting-like argument that must be one of `choices`.
fn one_of<'a>(what: &str, value: Option<&'a str>, choices: &[&str]) -> SqlResult<&'a str> {
    let value = value.ok_or_else(|| Error::null(what)).or_report()?;
    if choices.contains(&value) {
        return Ok(value);
    }
    Err(Error::invalid(format!(
        "unknown {what} {}",
        agent_memory_core::error::quoted(value)
    ))
    .with_detail(format!("{what} is one of: {}", choices.join(", "))))
    .or_report()
}

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
    let plan = kept(client, &ANY_UNDER).or_report()?;
    let table = client
        .update(
            &*plan,
            None,
            &[
                scope.into(),
                files::under(dir).into(),
                files::under_end(dir).into(),
            ],
        )
        .or_report()?;
    Ok(table.first().get::<bool>(1).or_report()? == Some(true))
}

fn read(client: Client, scope: &str, path: &str) -> SqlResult<ToolResult<String>> {
    let plan = kept(client, &READ).or_report()?;
    let table = client
        .select(&*plan, None, &[scope.into(), path.into()])
        .or_report()?;
    if !table.is_empty() {
        let content = table
            .first()
            .get::<&str>(1)
            .or_report()?
            .unwrap_or_default();
        return Ok(Ok(files::read_result(content)));
    }
    if path == "/" || is_directory(client, scope, path)? {
        return Ok(Err(a_directory()));
    }
    Ok(Err(not_found()))
}

fn list(client: Client, scope: &str, dir: &str) -> SqlResult<ToolResult<String>> {
    let plan = kept(client, &FIRST_FROM).or_report()?;
    let end = files::under_end(dir);
    let mut from = files::under(dir);
    let mut entries: Vec<(String, bool)> = Vec::new();
    loop {
        let table = client
            .select(
                &*plan,
                None,
                &[scope.into(), from.as_str().into(), end.as_str().into()],
            )
            .or_report()?;
        if table.is_empty() {
            break;
        }
        let Some(path) = table.first().get::<String>(1).or_report()? else {
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
        let file = kept(client, &READ).or_report()?;
        let table = client
            .select(&*file, None, &[scope.into(), dir.into()])
            .or_report()?;
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
    let plan = kept(client, &APPEND_EXISTING).or_report()?;
    let table = client
        .update(
            &*plan,
            None,
            &[scope.into(), path.into(), content.into(), limit.into()],
        )
        .or_report()?;
    if !table.is_empty() {
        return Ok(Ok(OK.to_owned()));
    }
    // Not appended: the file is too big for it, or does not exist yet.
    let sizes = kept(client, &FILE_BYTES).or_report()?;
    let table = client
        .update(&*sizes, None, &[scope.into(), path.into()])
        .or_report()?;
    if let Some(bytes) = (!table.is_empty())
        .then(|| table.first().get::<i32>(1))
        .transpose()
        .or_report()?
        .flatten()
    {
        return Ok(Err(too_big(i64::from(bytes) + content.len() as i64)));
    }
    // Created, or appended to a file a concurrent append created first.
    Ok(place_new_file(client, scope, path, content, true)?.map(|_| OK.to_owned()))
}

/// What became of a new file.
pub(crate) enum Placed {
    Created,
    /// A concurrent call created the file first: appended to it, or (when
    /// not appending) left alone.
    Existed,
}

/// Create a file at `path`, within the size limit: no directory may be at
/// the path and no file above it, and the scope must have room.
pub(crate) fn place_new_file(
    client: Client,
    scope: &str,
    path: &str,
    content: &str,
    append: bool,
) -> SqlResult<ToolResult<Placed>> {
    if content.len() > max_file_bytes() as usize {
        return Ok(Err(too_big(content.len() as i64)));
    }
    if is_directory(client, scope, path)? {
        return Ok(Err(a_directory()));
    }
    let above: Vec<String> = files::ancestors(path)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if !above.is_empty() {
        let plan = kept(client, &ANY_FILE).or_report()?;
        let table = client
            .update(&*plan, None, &[scope.into(), above.into()])
            .or_report()?;
        if table.first().get::<bool>(1).or_report()? == Some(true) {
            return Ok(Err(ToolError::new(
                Code::Enotdir,
                "ENOTDIR: a directory of the path is a file",
            )));
        }
    }
    let room = kept(client, &TAKE_ROOM).or_report()?;
    let max_files = settings::MAX_FILES_PER_SCOPE.get();
    let table = client
        .update(&*room, None, &[scope.into(), max_files.into()])
        .or_report()?;
    if table.is_empty() {
        return Ok(Err(ToolError::new(
            Code::Enospc,
            format!(
                "ENOSPC: the scope holds {max_files} files, the most allowed (agent_memory.max_files_per_scope)"
            ),
        )));
    }
    let create = kept(client, if append { &CREATE_FILE } else { &CREATE_ONLY }).or_report()?;
    let table = client
        .update(&*create, None, &[scope.into(), path.into(), content.into()])
        .or_report()?;
    if !table.is_empty() && table.first().get::<bool>(1).or_report()? == Some(true) {
        return Ok(Ok(Placed::Created));
    }
    let give = kept(client, &GIVE_ROOM).or_report()?;
    client
        .update(&*give, None, &[scope.into(), 1i32.into()])
        .or_report()?;
    Ok(Ok(Placed::Existed))
}

fn update(
    client: Client,
    scope: &str,
    path: &str,
    old: &str,
    new: &str,
) -> SqlResult<ToolResult<String>> {
    let limit = max_file_bytes();
    let plan = kept(client, &UPDATE_FILE).or_report()?;
    let table = client
        .update(
            &*plan,
            None,
            &[
                scope.into(),
                path.into(),
                old.into(),
                new.into(),
                limit.into(),
            ],
        )
        .or_report()?;
    if table.is_empty() {
        if path == "/" || is_directory(client, scope, path)? {
            return Ok(Err(a_directory()));
        }
        return Ok(Err(not_found()));
    }
    let row = table.first();
    if row.get::<bool>(1).or_report()? != Some(true) {
        return Ok(Err(ToolError::new(
            Code::Efbig,
            format!("EFBIG: the file would exceed {limit} bytes (agent_memory.max_file_bytes)"),
        )));
    }
    let replaced = row.get::<i32>(2).or_report()?.unwrap_or(0);
    Ok(Ok(format!("{{\"replaced\":{replaced}}}")))
}

fn delete(client: Client, scope: &str, path: &str) -> SqlResult<ToolResult<String>> {
    if path == "/" {
        return Ok(Err(ToolError::new(
            Code::Einval,
            "the root cannot be deleted; delete its entries",
        )));
    }
    let plan = kept(client, &DELETE_FILES).or_report()?;
    let table = client
        .update(
            &*plan,
            None,
            &[
                scope.into(),
                path.into(),
                files::under(path).into(),
                files::under_end(path).into(),
            ],
        )
        .or_report()?;
    let row = table.first();
    let files_gone = row.get::<i32>(1).or_report()?.unwrap_or(0);
    if files_gone == 0 {
        return Ok(Err(ToolError::new(
            Code::Enoent,
            "ENOENT: file or directory not found",
        )));
    }
    let dirs = if row.get::<bool>(2).or_report()? == Some(true) {
        0
    } else {
        let parents = row.get::<Vec<String>>(3).or_report()?.unwrap_or_default();
        files::directories_removed(path, parents.iter().map(String::as_str))
    };
    Ok(Ok(format!("{{\"files\":{files_gone},\"dirs\":{dirs}}}")))
}

fn run(scope: &str, command: &Command, path: &str) -> SqlResult<ToolResult<String>> {
    Spi::connect_mut(|client| match command {
        Command::Read => read(client, scope, path),
        Command::List => list(client, scope, path),
        Command::Append { content } => append(client, scope, path, content),
        Command::Update { old, new } => update(client, scope, path, old, new),
        Command::Delete => delete(client, scope, path),
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_tool(scope: Option<&str>, request: Option<JsonbArg>) -> SqlResult<JsonText> {
    let request = request
        .and_then(|r| r.decode())
        .unwrap_or(serde_json::Value::Null);
    let (echo, parsed) = files::parse_request(&request);
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
    let node = memory_node_id
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Error::null("memory_node_id"))
        .or_report()?;
    let key = if one_of("scope", scope, &["global", "perThread"])? == "global" {
        serde_json::json!([node])
    } else {
        let thread = thread_id
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::invalid("a perThread scope needs a thread_id"))
            .or_report()?;
        serde_json::json!([node, thread])
    };
    Ok(key.to_string())
}

/// A scope's files in path order: paths only, or paths and contents.
static SCOPE_PATHS: Statement = Statement {
    sql: "SELECT f.path FROM agent_memory.memory_files f WHERE f.scope = $1 ORDER BY f.path",
    args: &[TEXT],
    writes: false,
};

static SCOPE_FILES: Statement = Statement {
    sql: "SELECT f.path, f.content FROM agent_memory.memory_files f WHERE f.scope = $1 ORDER BY f.path",
    args: &[TEXT],
    writes: false,
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
    let full = one_of("content", content, &["tree", "full"])? == "full";
    let lines = Spi::connect(|client| -> SqlResult<Vec<String>> {
        let plan = kept(client, if full { &SCOPE_FILES } else { &SCOPE_PATHS }).or_report()?;
        let table = client.select(&*plan, None, &[scope.into()]).or_report()?;
        let mut rows = Vec::with_capacity(table.len());
        for row in table {
            let path = row.get::<String>(1).or_report()?.unwrap_or_default();
            let text = if full {
                row.get::<String>(2).or_report()?.unwrap_or_default()
            } else {
                String::new()
            };
            rows.push((path, text));
        }
        Ok(if full {
            files::full_lines(rows.iter().map(|(p, c)| (p.as_str(), c.as_str())))
        } else {
            let paths: Vec<String> = rows.into_iter().map(|(p, _)| p).collect();
            files::tree_lines(&paths)
        })
    })?;
    Ok(files::within(&lines, max_chars))
}

#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn memory_tool_definition(
    name: default!(Option<&str>, "'memory'"),
    description: default!(Option<&str>, "NULL"),
    title: default!(Option<&str>, "NULL"),
    format: default!(Option<&str>, "'anthropic'"),
) -> SqlResult<pgrx::JsonB> {
    let name = name.ok_or_else(|| Error::null("name")).or_report()?;
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(Error::invalid(format!(
            "tool name {} must be 1 to 64 letters, digits, _ or -",
            agent_memory_core::error::quoted(name)
        )))
        .or_report();
    }
    let description = description.unwrap_or(
        "Memory that persists across conversations: text files addressed by paths. \
         Commands: read a file, list a directory (an empty path is the root), append to a file \
         (creating it), update a file (replace every occurrence of oldContent by content), \
         delete a file or a whole directory. Answers with a JSON envelope {command, path, ok, result | error}.",
    );
    let mut schema = serde_json::json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path of the file or directory, such as /notes/today; an empty path is the root."},
            "command": {"type": "string", "enum": ["read", "list", "append", "update", "delete"], "description": "What to do at the path."},
            "content": {"type": "string", "description": "append: the text to add; update: the replacement text."},
            "oldContent": {"type": "string", "description": "update: the text to replace, every occurrence."}
        },
        "required": ["path", "command"],
        "additionalProperties": false
    });
    if let Some(title) = title {
        schema["title"] = serde_json::json!(title);
    }
    let definition = if one_of("format", format, &["anthropic", "openai"])? == "anthropic" {
        serde_json::json!({"name": name, "description": description, "input_schema": schema})
    } else {
        serde_json::json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema}
        })
    };
    Ok(pgrx::JsonB(definition))
}
