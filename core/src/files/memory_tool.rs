//! The memory tool: a tree of text files per scope, addressed by
//! paths, driven by requests `{path, command, content?, oldContent?,
//! expectedVersion?, expectedSha256?}` and
//! answered with a JSON envelope. This module holds the rules: what a path
//! may be and its one canonical spelling, what a request must hold, and the
//! envelope's exact text (keys in the envelope's order, as `JSON.stringify`
//! writes them).

use unicode_normalization::UnicodeNormalization;

use crate::args::one_of;
use crate::error::quoted;
use crate::jsonb::Field;
use crate::recall::{Query, parse_query};
use crate::versions;
use crate::{Error, Result};

/// Most bytes of a normalised path.
pub const MAX_PATH_BYTES: usize = 1024;

/// The most bytes a scope's name may have: with a path of at most
/// MAX_PATH_BYTES, a file's key stays within what an index entry holds.
pub const MAX_SCOPE_BYTES: usize = 1024;

/// A scope's name: not empty, at most MAX_SCOPE_BYTES.
pub fn check_scope(scope: &str) -> Result<()> {
    if scope.is_empty() {
        return Err(Error::invalid("scope must not be empty"));
    }
    if scope.len() > MAX_SCOPE_BYTES {
        return Err(Error::invalid(format!(
            "scope has {} bytes; at most {MAX_SCOPE_BYTES} are allowed",
            scope.len()
        )));
    }
    Ok(())
}
/// Most bytes of one segment of a path.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// Most segments of a path.
pub const MAX_SEGMENTS: usize = 32;

/// The error codes of the envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A missing file or directory.
    Enoent,
    /// A missing or wrong-typed argument, an unknown command, a bad path, a
    /// request that is not an object.
    Einval,
    /// A read or update of a directory.
    Eisdir,
    /// A list of a file (or a file where a directory is needed).
    Enotdir,
    /// Content above `agent_memory.max_file_bytes`.
    Efbig,
    /// More files than `agent_memory.max_files_per_scope`.
    Enospc,
    /// The file is not at the version, or has not the content, that the
    /// request's precondition names.
    Econflict,
}

impl Code {
    pub fn name(self) -> &'static str {
        match self {
            Code::Enoent => "ENOENT",
            Code::Einval => "EINVAL",
            Code::Eisdir => "EISDIR",
            Code::Enotdir => "ENOTDIR",
            Code::Efbig => "EFBIG",
            Code::Enospc => "ENOSPC",
            Code::Econflict => "ECONFLICT",
        }
    }
}

/// A request the tool refuses: the envelope's `error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    pub code: Code,
    pub message: String,
    /// For ECONFLICT: what the file is now, so that the agent can read it
    /// again and retry.
    pub current: Option<FileVersion>,
}

/// A file's version and the SHA-256 of its content; version 0 and no hash
/// when there is no file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    pub version: i32,
    pub sha256: Option<String>,
}

impl FileVersion {
    /// The version of a file with `content`, or of no file.
    pub fn of(file: Option<(i32, &str)>) -> FileVersion {
        match file {
            Some((version, content)) => {
                FileVersion { version, sha256: Some(versions::sha256_hex(content)) }
            }
            None => FileVersion { version: versions::ABSENT, sha256: None },
        }
    }
}

impl ToolError {
    pub fn new(code: Code, message: impl Into<String>) -> ToolError {
        ToolError { code, message: message.into(), current: None }
    }

    fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(Code::Einval, message)
    }

    /// The error a function that speaks SQL rather than the envelope
    /// (a restore, an import) raises for this refusal: a size or count
    /// limit is 54000, as for every limit; anything else is bad input.
    pub fn into_sql_error(self) -> Error {
        match self.code {
            Code::Efbig | Code::Enospc => Error::limit(self.message),
            _ => Error::invalid(self.message),
        }
    }
}

pub type ToolResult<T> = std::result::Result<T, ToolError>;

fn is_control(c: char) -> bool {
    c.is_control()
}

/// The canonical spelling of a path: NFC, one leading `/`, segments joined
/// by single `/`, no trailing `/` (the root is `/`, as is the empty path).
/// Refused (EINVAL): `.` or `..` segments, percent-encoded dots, slashes or
/// backslashes, backslashes, control characters, a segment over 255 bytes,
/// more than 32 segments, more than 1,024 bytes in all.
pub fn normalise_path(raw: &str) -> ToolResult<String> {
    // Most paths are plain ASCII and already canonical but for slashes:
    // those take one pass and one allocation (the general rules below cost
    // a read more than a tenth of the tool's own work).
    match plain_ascii_path(raw) {
        Some(path) => Ok(path),
        None => normalise_by_the_rules(raw),
    }
}

/// `normalise_path` for any text: each rule in turn, the first broken one
/// named in the error.
fn normalise_by_the_rules(raw: &str) -> ToolResult<String> {
    // ASCII text is already in NFC: only other text goes through the
    // normaliser.
    let text: String = if raw.is_ascii() { raw.to_owned() } else { raw.nfc().collect() };
    if let Some(c) = text.chars().find(|&c| is_control(c)) {
        return Err(ToolError::invalid(format!(
            "path must not contain control characters (found U+{:04X})",
            c as u32
        )));
    }
    if text.contains('\\') {
        return Err(ToolError::invalid("path must not contain backslashes"));
    }
    let lower = text.to_ascii_lowercase();
    if ["%2e", "%2f", "%5c"].iter().any(|code| lower.contains(code)) {
        return Err(ToolError::invalid(
            "path must not contain percent-encoded dots, slashes or backslashes",
        ));
    }
    let segments: Vec<&str> = text.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(dots) = segments.iter().find(|s| **s == "." || **s == "..") {
        return Err(ToolError::invalid(format!("path must not contain {} segments", quoted(dots))));
    }
    if segments.len() > MAX_SEGMENTS {
        return Err(ToolError::invalid(format!(
            "path has {} segments; at most {MAX_SEGMENTS} are allowed",
            segments.len()
        )));
    }
    if let Some(long) = segments.iter().find(|s| s.len() > MAX_SEGMENT_BYTES) {
        return Err(ToolError::invalid(format!(
            "a path segment has {} bytes; at most {MAX_SEGMENT_BYTES} are allowed",
            long.len()
        )));
    }
    let path = format!("/{}", segments.join("/"));
    if path.len() > MAX_PATH_BYTES {
        return Err(ToolError::invalid(format!(
            "path has {} bytes; at most {MAX_PATH_BYTES} are allowed",
            path.len()
        )));
    }
    Ok(path)
}

/// The canonical spelling of a printable ASCII path without `\` or `%`
/// whose segments are all allowed; None for any other path, which the
/// general rules of `normalise_path` then judge (and explain).
fn plain_ascii_path(raw: &str) -> Option<String> {
    let mut path = String::with_capacity(raw.len() + 1);
    let mut segments = 0;
    for segment in raw.split('/') {
        if segment.is_empty() {
            continue;
        }
        let plain = segment.bytes().all(|b| (b' '..=b'~').contains(&b) && b != b'\\' && b != b'%');
        if !plain || segment == "." || segment == ".." || segment.len() > MAX_SEGMENT_BYTES {
            return None;
        }
        segments += 1;
        path.push('/');
        path.push_str(segment);
    }
    if segments > MAX_SEGMENTS || path.len() > MAX_PATH_BYTES {
        return None;
    }
    if path.is_empty() {
        path.push('/');
    }
    Some(path)
}

/// The directory holding a normalised path (`/` for a top-level entry).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(at) => &path[..at],
    }
}

/// Every directory above a normalised path, nearest last, root excluded.
pub fn ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/').skip(1).map(|(at, _)| &path[..at]).collect()
}

/// The prefix every path under directory `dir` starts with.
pub fn under(dir: &str) -> String {
    if dir == "/" { "/".to_owned() } else { format!("{dir}/") }
}

/// The end of the range of paths under `dir` in byte order: `0` is the
/// byte after `/`, so `[under(dir), under_end(dir))` holds exactly the
/// paths inside it (and `/a/b` never catches `/a/bc`).
pub fn under_end(dir: &str) -> String {
    if dir == "/" { "0".to_owned() } else { format!("{dir}0") }
}

/// The entry of directory `dir` that `path` (under it) belongs to: its
/// name, and whether it is a directory (the path goes deeper).
pub fn entry_of<'a>(dir: &str, path: &'a str) -> (&'a str, bool) {
    let rest = &path[under(dir).len()..];
    match rest.find('/') {
        Some(at) => (&rest[..at], true),
        None => (rest, false),
    }
}

/// How many directories a deletion of `dir` removes, from the directories
/// that held the files it removed: `dir` itself and every directory
/// between it and one of them.
pub fn directories_removed<'a>(dir: &'a str, holders: impl Iterator<Item = &'a str>) -> usize {
    let mut dirs = std::collections::HashSet::new();
    dirs.insert(dir);
    let mut last = dir;
    for holder in holders {
        // Files of one directory mostly come one after another.
        if holder == last {
            continue;
        }
        last = holder;
        let mut at = holder;
        while at.len() > dir.len() {
            if !dirs.insert(at) {
                break;
            }
            at = parent(at);
        }
    }
    dirs.len()
}

/// A request to the tool, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Read,
    List,
    Append {
        content: String,
    },
    Update {
        old: String,
        new: String,
    },
    Delete,
    /// The files at or under the path whose words match, best first.
    Search {
        query: Query,
    },
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Read => "read",
            Command::List => "list",
            Command::Append { .. } => "append",
            Command::Update { .. } => "update",
            Command::Delete => "delete",
            Command::Search { .. } => "search",
        }
    }

    /// Whether the command changes files (when it succeeds).
    pub fn writes(&self) -> bool {
        matches!(self, Command::Append { .. } | Command::Update { .. } | Command::Delete)
    }
}

/// What a request names, as given: echoed in the envelope even when the
/// request is refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    pub command: Option<String>,
    pub path: Option<String>,
}

/// Check a request `{path, command, content?, oldContent?}`: the command
/// and the normalised path, or the error, with what to echo either way.
pub fn parse_request(request: &serde_json::Value) -> (Echo, ToolResult<(Command, String)>) {
    let fields: Option<Vec<(&str, Field)>> = match request {
        serde_json::Value::Object(map) => Some(
            map.iter()
                .map(|(key, value)| {
                    let field = match value {
                        serde_json::Value::String(s) => Field::Str(s),
                        serde_json::Value::Null => Field::Null,
                        serde_json::Value::Number(n) => Field::Number(n.as_i64()),
                        _ => Field::Other,
                    };
                    (key.as_str(), field)
                })
                .collect(),
        ),
        _ => None,
    };
    parse_fields(fields.as_deref())
}

/// [`parse_request`] of a request read as its top-level fields (None: not
/// an object), as `jsonb::object_fields` reads them.
pub fn parse_fields(fields: Option<&[(&str, Field)]>) -> (Echo, ToolResult<(Command, String)>) {
    let mut echo = Echo::default();
    let Some(fields) = fields else {
        return (echo, Err(ToolError::invalid("request must be a JSON object")));
    };
    let get = |key: &str| fields.iter().find(|(name, _)| *name == key).map(|(_, field)| *field);
    let string = |key: &str| match get(key) {
        Some(Field::Str(s)) => Some(s),
        _ => None,
    };
    echo.command = string("command").map(str::to_owned);
    echo.path = string("path").map(str::to_owned);
    let result = (|| {
        let command = match get("command") {
            None | Some(Field::Null) => return Err(ToolError::invalid("command is required")),
            Some(Field::Str(c)) => c,
            Some(_) => return Err(ToolError::invalid("command must be a string")),
        };
        let path = match get("path") {
            None | Some(Field::Null) => return Err(ToolError::invalid("path is required")),
            Some(Field::Str(p)) => normalise_path(p)?,
            Some(_) => return Err(ToolError::invalid("path must be a string")),
        };
        let text = |key: &str| -> ToolResult<String> {
            match get(key) {
                None | Some(Field::Null) => {
                    Err(ToolError::invalid(format!("{key} is required for {command}")))
                }
                Some(Field::Str(s)) => Ok(s.to_owned()),
                Some(_) => Err(ToolError::invalid(format!("{key} must be a string"))),
            }
        };
        let parsed = match command {
            "read" => Command::Read,
            "list" => Command::List,
            "delete" => Command::Delete,
            "append" => Command::Append { content: text("content")? },
            "update" => {
                let old = text("oldContent")?;
                if old.is_empty() {
                    return Err(ToolError::invalid("oldContent must not be empty"));
                }
                Command::Update { old, new: text("content")? }
            }
            "search" => Command::Search {
                query: parse_query(&text("query")?)
                    .map_err(|error| ToolError::invalid(error.message))?,
            },
            other => {
                return Err(ToolError::invalid(format!(
                    "unknown command {}; the commands are read, list, append, update, delete, search",
                    quoted(other)
                )));
            }
        };
        Ok((parsed, path))
    })();
    if let Ok((_, path)) = &result {
        echo.path = Some(path.clone());
    }
    (echo, result)
}

/// What a write request requires of the file at its path: a version
/// (0: no file) and the SHA-256 of its content, each when given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Precondition {
    pub version: Option<i32>,
    pub sha256: Option<String>,
}

impl Precondition {
    pub fn is_none(&self) -> bool {
        self.version.is_none() && self.sha256.is_none()
    }

    /// Whether the file at the path (its version and content, or None)
    /// meets it; ECONFLICT with what the file is now when it does not.
    pub fn check(&self, file: Option<(i32, &str)>) -> ToolResult<()> {
        let version = file.map_or(versions::ABSENT, |(version, _)| version);
        let mut current = None;
        if let Some(expected) = self.version
            && expected != version
        {
            current = Some(FileVersion::of(file));
        }
        if current.is_none()
            && let Some(expected) = &self.sha256
        {
            let found = FileVersion::of(file);
            if found.sha256.as_deref() != Some(expected.as_str()) {
                current = Some(found);
            }
        }
        let Some(current) = current else {
            return Ok(());
        };
        let message = match (self.version, file) {
            (Some(versions::ABSENT), Some(_)) => {
                format!("ECONFLICT: the file already exists, at version {version}")
            }
            (_, None) => "ECONFLICT: the file does not exist".to_owned(),
            (Some(expected), Some(_)) if expected != version => {
                format!("ECONFLICT: the file is at version {version}, not {expected}")
            }
            _ => format!("ECONFLICT: the file's content changed; it is at version {version}"),
        };
        Err(ToolError { code: Code::Econflict, message, current: Some(current) })
    }
}

/// The precondition of a request (its `expectedVersion`, an integer from
/// 0, and `expectedSha256`, 64 hex digits), which only the commands that
/// change a file take.
pub fn precondition_of(fields: &[(&str, Field)], command: &Command) -> ToolResult<Precondition> {
    let get = |key: &str| fields.iter().find(|(name, _)| *name == key).map(|(_, field)| *field);
    let version = match get("expectedVersion") {
        None | Some(Field::Null) => None,
        Some(Field::Number(Some(n))) if (0..=i64::from(i32::MAX)).contains(&n) => Some(n as i32),
        Some(_) => {
            return Err(ToolError::invalid("expectedVersion must be an integer from 0 (no file)"));
        }
    };
    let sha256 = match get("expectedSha256") {
        None | Some(Field::Null) => None,
        Some(Field::Str(hex)) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(hex.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(ToolError::invalid(
                "expectedSha256 must be the 64 hex digits of a SHA-256",
            ));
        }
    };
    let precondition = Precondition { version, sha256 };
    if !precondition.is_none()
        && !matches!(command, Command::Append { .. } | Command::Update { .. } | Command::Delete)
    {
        return Err(ToolError::invalid(format!(
            "{} takes no expectedVersion or expectedSha256; only append, update and delete do",
            command.name()
        )));
    }
    Ok(precondition)
}

/// A JSON string as `JSON.stringify` writes it.
pub fn json_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    push_json_string(&mut out, value);
    out
}

/// Append `value` as a JSON string, escaped as `JSON.stringify` (and
/// serde_json) escape it: quote, backslash and control characters only.
pub fn push_json_string(out: &mut String, value: &str) {
    out.push('"');
    let mut clean = 0;
    for (i, byte) in value.bytes().enumerate() {
        let escaped = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        out.push_str(&value[clean..i]);
        clean = i + 1;
        if escaped.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[usize::from(byte >> 4)] as char);
            out.push(HEX[usize::from(byte & 0xf)] as char);
        } else {
            out.push_str(escaped);
        }
    }
    out.push_str(&value[clean..]);
    out.push('"');
}

fn push_echo(out: &mut String, value: &Option<String>) {
    match value.as_deref() {
        Some(value) => push_json_string(out, value),
        None => out.push_str("null"),
    }
}

/// The envelope of a success: `{"command","path","ok":true,"result"}`,
/// `result` already JSON text.
/// The envelope of an answer: its result, or its error.
pub fn envelope(echo: &Echo, answer: ToolResult<String>) -> String {
    match answer {
        Ok(result) => envelope_ok(echo, &result),
        Err(error) => envelope_error(echo, &error),
    }
}

/// The answer for a path where no file is.
pub fn not_found() -> ToolError {
    ToolError::new(Code::Enoent, "ENOENT: file not found")
}

pub fn envelope_ok(echo: &Echo, result: &str) -> String {
    let echoed =
        echo.command.as_ref().map_or(4, String::len) + echo.path.as_ref().map_or(4, String::len);
    let mut out = String::with_capacity(48 + echoed + result.len());
    out.push_str("{\"command\":");
    push_echo(&mut out, &echo.command);
    out.push_str(",\"path\":");
    push_echo(&mut out, &echo.path);
    out.push_str(",\"ok\":true,\"result\":");
    out.push_str(result);
    out.push('}');
    out
}

/// The envelope of a refusal: `{"command","path","ok":false,"error":{"message","code"}}`,
/// the error with `"version"` and `"sha256"` (null for no file) for ECONFLICT.
pub fn envelope_error(echo: &Echo, error: &ToolError) -> String {
    let current = match &error.current {
        None => String::new(),
        Some(current) => format!(
            ",\"version\":{},\"sha256\":{}",
            current.version,
            current.sha256.as_deref().map_or_else(|| "null".to_owned(), json_string)
        ),
    };
    format!(
        "{{\"command\":{},\"path\":{},\"ok\":false,\"error\":{{\"message\":{},\"code\":\"{}\"{current}}}}}",
        echo.command.as_deref().map_or_else(|| "null".to_owned(), json_string),
        echo.path.as_deref().map_or_else(|| "null".to_owned(), json_string),
        json_string(&error.message),
        error.code.name()
    )
}

/// The result of a read: `{"content","version","sha256"}`, the version and
/// hash being what a later write's precondition may name.
pub fn read_result(content: &str, version: i32) -> String {
    let mut out = String::with_capacity(content.len() + 112);
    out.push_str("{\"content\":");
    push_json_string(&mut out, content);
    out.push_str(",\"version\":");
    out.push_str(&version.to_string());
    out.push_str(",\"sha256\":\"");
    out.push_str(&versions::sha256_hex(content));
    out.push_str("\"}");
    out
}

/// The result of an append: `{"status":"ok","version"}`.
pub fn append_result(version: i32) -> String {
    format!("{{\"status\":\"ok\",\"version\":{version}}}")
}

/// The result of an update: `{"replaced","version"}` (the file's version
/// now, unchanged when nothing was replaced).
pub fn update_result(replaced: usize, version: i32) -> String {
    format!("{{\"replaced\":{replaced},\"version\":{version}}}")
}

/// The result of a list: entries sorted by name.
pub fn list_result(entries: &mut [(String, bool)]) -> String {
    entries.sort();
    let items: Vec<String> = entries
        .iter()
        .map(|(name, dir)| {
            format!(
                "{{\"name\":{},\"kind\":\"{}\"}}",
                json_string(name),
                if *dir { "dir" } else { "file" }
            )
        })
        .collect();
    format!("{{\"entries\":[{}]}}", items.join(","))
}

/// The most matches a search answers with.
pub const MAX_SEARCH_MATCHES: i32 = 10;

/// The result of a search: `{"matches":[{"path","snippet","score"}]}`,
/// best first as given.
pub fn search_result(matches: &[(String, String, f32)]) -> String {
    let items: Vec<serde_json::Value> = matches
        .iter()
        .map(|(path, snippet, score)| serde_json::json!({"path": path, "snippet": snippet, "score": score}))
        .collect();
    serde_json::json!({ "matches": items }).to_string()
}

/// How many times `old` occurs in `content`, without overlaps (what a
/// replace-all replaces).
pub fn occurrences(content: &str, old: &str) -> usize {
    if old.is_empty() { 0 } else { content.matches(old).count() }
}

/// What replacing every occurrence of a text in a file's content gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replacement {
    /// The text is not in the content.
    NotFound,
    /// The new content would be `bytes` long, past the limit: it is not
    /// built, so a short text replaced by a long one many times over costs
    /// no memory.
    TooLarge { bytes: usize },
    /// The new content, and how many occurrences were replaced.
    Replaced(String, usize),
}

/// `content` with every occurrence of `old` (not empty) replaced by `new`,
/// left to right as PostgreSQL's `replace` does, if the result is at most
/// `limit` bytes.
pub fn replace_counted(content: &str, old: &str, new: &str, limit: usize) -> Replacement {
    let count = content.matches(old).count();
    if count == 0 {
        return Replacement::NotFound;
    }
    // Occurrences do not overlap, so they hold at most the content's bytes.
    let bytes = (content.len() - count * old.len()).saturating_add(count.saturating_mul(new.len()));
    if bytes > limit {
        return Replacement::TooLarge { bytes };
    }
    let mut out = String::with_capacity(bytes);
    let mut clean = 0;
    for (at, _) in content.match_indices(old) {
        out.push_str(&content[clean..at]);
        out.push_str(new);
        clean = at + old.len();
    }
    out.push_str(&content[clean..]);
    Replacement::Replaced(out, count)
}

/// The lines of a tree listing of a scope's files (normalised paths, any
/// order): every directory once as `name/`, then what it holds, two spaces
/// deeper, entries by name.
pub fn tree_lines(paths: &[String]) -> Vec<String> {
    let mut split: Vec<Vec<&str>> =
        paths.iter().map(|p| p.split('/').filter(|s| !s.is_empty()).collect()).collect();
    split.sort();
    let mut lines = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    for segments in &split {
        let (dirs, file) = segments.split_at(segments.len().saturating_sub(1));
        let shared = open.iter().zip(dirs).take_while(|(a, b)| a == b).count();
        open.truncate(shared);
        for dir in &dirs[shared..] {
            lines.push(format!("{}{dir}/", "  ".repeat(open.len())));
            open.push(dir);
        }
        if let Some(file) = file.first() {
            lines.push(format!("{}{file}", "  ".repeat(open.len())));
        }
    }
    lines
}

/// A rendering made line by line within `max_chars` characters: when the
/// lines do not all fit, the first whole lines that do and a last line
/// saying what was left out (never a silent truncation). Lines are kept only while they could still fit, the rest
/// only counted, so it holds at most `max_chars` characters however much is
/// rendered, and refuses to hold more than `max_bytes` bytes.
pub struct Rendering {
    max_chars: usize,
    max_bytes: usize,
    kept: Vec<String>,
    kept_chars: usize,
    kept_bytes: usize,
    /// Every line pushed, and their characters (separators not counted).
    lines: usize,
    chars: usize,
}

impl Rendering {
    pub fn new(max_chars: usize, max_bytes: usize) -> Rendering {
        Rendering {
            max_chars,
            max_bytes,
            kept: Vec::new(),
            kept_chars: 0,
            kept_bytes: 0,
            lines: 0,
            chars: 0,
        }
    }

    /// Add one line.
    pub fn push(&mut self, line: &str) -> Result<()> {
        let chars = line.chars().count();
        let cost = chars + usize::from(self.lines > 0);
        // Kept while every line so far was kept and the whole still fits.
        if self.kept.len() == self.lines && self.kept_chars.saturating_add(cost) <= self.max_chars {
            self.kept_bytes += line.len() + 1;
            if self.kept_bytes > self.max_bytes {
                return Err(Error::limit(format!(
                    "the rendering takes more than {} bytes",
                    self.max_bytes
                ))
                .with_detail(
                    "agent_memory.max_result_bytes limits a value a function builds in memory",
                )
                .with_hint("ask for fewer characters with max_chars"));
            }
            self.kept.push(line.to_owned());
            self.kept_chars += cost;
        }
        self.lines += 1;
        self.chars += chars;
        Ok(())
    }

    /// Add a file of a full rendering: its path as a heading, then its
    /// content, after a blank line when other lines came before.
    pub fn push_file(&mut self, path: &str, content: &str) -> Result<()> {
        if self.lines > 0 {
            self.push("")?;
        }
        self.push(&format!("### {path}"))?;
        for line in content.lines() {
            self.push(line)?;
        }
        Ok(())
    }

    /// The text: everything when it fits, else the first lines that fit
    /// with the note of what was left out.
    pub fn finish(self) -> String {
        let max_chars = self.max_chars;
        let total = self.chars + self.lines.saturating_sub(1);
        if total <= max_chars {
            return self.kept.join("\n");
        }
        let note = |more_lines: usize, more_chars: usize| {
            format!(
                "[cut at {max_chars} characters: {more_lines} more lines, {more_chars} more characters left out]"
            )
        };
        // The note with the largest numbers it could carry: the real one is
        // never longer.
        let budget = max_chars.saturating_sub(note(self.lines, total).chars().count() + 1);
        let mut kept = 0;
        let mut used = 0;
        for line in &self.kept {
            let cost = line.chars().count() + usize::from(kept > 0);
            if used + cost > budget {
                break;
            }
            used += cost;
            kept += 1;
        }
        let left_chars = total - used;
        let mut out = self.kept[..kept].join("\n");
        if kept > 0 {
            out.push('\n');
        }
        out.push_str(&note(self.lines - kept, left_chars));
        out
    }
}

/// The scope key of a memory node: `["<node>"]` for a `global` scope (one
/// per node), `["<node>", "<thread>"]` for `perThread` (one per node and
/// thread).
pub fn scope_key(node: Option<&str>, scope: Option<&str>, thread: Option<&str>) -> Result<String> {
    let node = node.ok_or_else(|| Error::null("memory_node_id"))?;
    if node.is_empty() {
        return Err(Error::invalid("memory_node_id must not be empty"));
    }
    let key = if one_of("scope", scope, &["global", "perThread"])? == "global" {
        serde_json::json!([node])
    } else {
        let thread = thread
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Error::invalid("a perThread scope needs a thread_id"))?;
        serde_json::json!([node, thread])
    };
    let key = key.to_string();
    check_scope(&key)?;
    Ok(key)
}

/// What the memory tool does, as a model reads it by default.
pub const TOOL_DESCRIPTION: &str = "Memory that persists across conversations: text files addressed by paths. \
     Commands: read a file, list a directory (an empty path is the root), append to a file \
     (creating it), update a file (replace every occurrence of oldContent by content), \
     delete a file or a whole directory, search the files at or under a path for words (query). \
     A read gives the file's version; pass it back as expectedVersion to append, update or \
     delete only if nobody changed the file since (ECONFLICT otherwise: read it again). \
     Answers with a JSON envelope {command, path, ok, result | error}.";

/// The memory tool's definition for a model: `anthropic` (name,
/// description, input_schema) or `openai` (a function tool); `name` is 1 to
/// 64 letters, digits, `_` or `-`.
pub fn tool_definition(
    name: Option<&str>, description: Option<&str>, title: Option<&str>, format: Option<&str>,
) -> Result<serde_json::Value> {
    let name = name.ok_or_else(|| Error::null("name"))?;
    let description = description.unwrap_or(TOOL_DESCRIPTION);
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Path of the file or directory, such as /notes/today; an empty path is the root."},
            "command": {"type": "string", "enum": ["read", "list", "append", "update", "delete", "search"], "description": "What to do at the path."},
            "content": {"type": "string", "description": "append: the text to add; update: the replacement text."},
            "oldContent": {"type": "string", "description": "update: the text to replace, every occurrence."},
            "query": {"type": "string", "description": "search: the words to find, any of them; \"a phrase\" keeps words together, -word excludes."},
            "expectedVersion": {"type": "integer", "minimum": 0, "description": "append, update, delete: act only if the file is at this version (from read; 0: only if there is no file)."},
            "expectedSha256": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$", "description": "append, update, delete: act only if the file's content has this SHA-256 (from read)."}
        },
        "required": ["path", "command"],
        "additionalProperties": false
    });
    crate::tool::definition(name, description, title, schema, format)
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_append_update_and_delete_write() {
        use super::Command;
        let writing: Vec<&str> = [
            Command::Read,
            Command::List,
            Command::Append { content: String::new() },
            Command::Update { old: String::new(), new: String::new() },
            Command::Delete,
        ]
        .iter()
        .filter(|command| command.writes())
        .map(Command::name)
        .collect();
        assert_eq!(writing, ["append", "update", "delete"]);
    }

    #[test]
    fn json_strings_are_escaped_as_serde_json_escapes_them() {
        let mut every_ascii = String::new();
        for c in 0u8..=0x7f {
            every_ascii.push(c as char);
        }
        for value in [every_ascii.as_str(), "", "plain", "é \u{2028} 🦀 \"q\" \\ end\u{1f}"] {
            assert_eq!(json_string(value), serde_json::to_string(value).unwrap(), "{value:?}");
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn paths_have_one_spelling() {
        for (raw, canonical) in [
            ("", "/"),
            ("/", "/"),
            ("//", "/"),
            ("/notes/today", "/notes/today"),
            ("notes/today", "/notes/today"),
            ("//notes///today/", "/notes/today"),
            ("/caf\u{0065}\u{0301}", "/caf\u{00e9}"),
            ("/a b/c-d_e.txt", "/a b/c-d_e.txt"),
            ("/.hidden/..x", "/.hidden/..x"),
        ] {
            assert_eq!(normalise_path(raw).unwrap(), canonical, "{raw:?}");
        }
    }

    #[test]
    fn bad_paths_are_einval() {
        let long_segment = format!("/{}", "x".repeat(256));
        let deep = "/a".repeat(33);
        let long_path = format!("/{}", vec!["y".repeat(200); 6].join("/"));
        for raw in [
            "/a/../b",
            "..",
            "/./a",
            "/a/.",
            "/a/%2e%2e/b",
            "/a%2Fb",
            "/a%5cb",
            "/a\\b",
            "/a\u{0}b",
            "/a\nb",
            "/a\u{7f}",
            "/a\u{85}",
            long_segment.as_str(),
            deep.as_str(),
            long_path.as_str(),
        ] {
            let error = normalise_path(raw).expect_err(raw);
            assert_eq!(error.code, Code::Einval, "{raw:?}");
        }
        assert!(normalise_path(&format!("/{}", "x".repeat(255))).is_ok());
        assert!(normalise_path(&"/a".repeat(32)).is_ok());
    }

    #[test]
    fn the_plain_ascii_shortcut_agrees_with_the_rules() {
        // Every path built from these pieces, up to four of them: slashes,
        // dots, escapes, controls, non-ASCII, and segments at the limits.
        let at_limit = "x".repeat(MAX_SEGMENT_BYTES);
        let over_limit = "x".repeat(MAX_SEGMENT_BYTES + 1);
        let pieces = [
            "",
            "/",
            "//",
            "a",
            ".",
            "..",
            "...",
            " ",
            "~",
            "%",
            "%2e",
            "\\",
            "\n",
            "\u{7f}",
            "\u{e9}",
            "e\u{301}",
            at_limit.as_str(),
            over_limit.as_str(),
        ];
        let mut shortcut_taken = 0;
        let mut paths = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = paths
                .iter()
                .flat_map(|p| pieces.iter().map(move |piece| format!("{p}{piece}")))
                .collect();
            paths.extend(longer);
        }
        paths.push("/a".repeat(MAX_SEGMENTS));
        paths.push("/a".repeat(MAX_SEGMENTS + 1));
        paths.push(format!("/{}", [at_limit.as_str(); 4].join("/")));
        paths.push(format!("/{}", [at_limit.as_str(); 5].join("/")));
        for raw in &paths {
            let by_the_rules = normalise_by_the_rules(raw);
            if let Some(shortcut) = plain_ascii_path(raw) {
                shortcut_taken += 1;
                assert_eq!(Ok(shortcut), by_the_rules, "{raw:?}");
            }
            assert_eq!(normalise_path(raw), by_the_rules, "{raw:?}");
        }
        // Both sides of the shortcut were exercised.
        assert!(shortcut_taken > 1000 && shortcut_taken < paths.len() - 1000);
    }

    #[test]
    fn parents_ancestors_and_ranges() {
        assert_eq!(parent("/notes/today"), "/notes");
        assert_eq!(parent("/notes"), "/");
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
        assert_eq!((under("/a"), under_end("/a")), ("/a/".to_owned(), "/a0".to_owned()));
        assert_eq!((under("/"), under_end("/")), ("/".to_owned(), "0".to_owned()));
        assert!("/a/bc" < under_end("/a").as_str() && "/a0" >= under_end("/a").as_str());
        assert!(!("/ab" >= under("/a").as_str() && "/ab" < under_end("/a").as_str()));
        assert_eq!(entry_of("/notes", "/notes/today"), ("today", false));
        assert_eq!(entry_of("/", "/notes/today"), ("notes", true));
        // Files /notes/today, /notes/a/b/c, /notes/a/x: held by /notes,
        // /notes/a/b and /notes/a.
        assert_eq!(
            directories_removed("/notes", ["/notes", "/notes/a/b", "/notes/a"].into_iter()),
            3
        );
        assert_eq!(directories_removed("/notes", ["/notes/x/y/z"].into_iter()), 4);
        assert_eq!(directories_removed("/notes", ["/notes"].into_iter()), 1);
    }

    #[test]
    fn requests_are_checked() {
        let (echo, parsed) =
            parse_request(&json!({"path": "/notes//x/", "command": "append", "content": "hi"}));
        assert_eq!(parsed.unwrap(), (Command::Append { content: "hi".into() }, "/notes/x".into()));
        assert_eq!(echo.path.as_deref(), Some("/notes/x"));
        let refused = |request: serde_json::Value| parse_request(&request).1.unwrap_err();
        assert_eq!(
            refused(json!({"path": "/notes/x", "command": "append"})).message,
            "content is required for append"
        );
        assert_eq!(refused(json!([1])).code, Code::Einval);
        assert_eq!(refused(json!({"path": "/a"})).message, "command is required");
        assert_eq!(
            refused(json!({"path": "/a", "command": 3})).message,
            "command must be a string"
        );
        assert_eq!(refused(json!({"command": "read"})).message, "path is required");
        assert_eq!(refused(json!({"path": 7, "command": "read"})).message, "path must be a string");
        assert!(
            refused(json!({"path": "/a", "command": "move"})).message.contains("unknown command")
        );
        assert_eq!(
            refused(json!({"path": "/a", "command": "update", "oldContent": "", "content": "x"}))
                .message,
            "oldContent must not be empty"
        );
        assert_eq!(
            refused(json!({"path": "/a", "command": "update", "oldContent": "a"})).message,
            "content is required for update"
        );
        assert_eq!(
            refused(json!({"path": "/a", "command": "append", "content": 5})).message,
            "content must be a string"
        );
        assert_eq!(
            refused(json!({"path": "/", "command": "search"})).message,
            "query is required for search"
        );
        let too_long = "w ".repeat(crate::recall::MAX_QUERY_CHARS);
        assert_eq!(
            refused(json!({"path": "/", "command": "search", "query": too_long})).code,
            Code::Einval
        );
        let (_, parsed) = parse_request(
            &json!({"path": "/notes/", "command": "search", "query": "deploy -staging"}),
        );
        let (command, path) = parsed.unwrap();
        assert_eq!(path, "/notes");
        let Command::Search { query } = command else {
            panic!("not a search: {command:?}");
        };
        assert_eq!((query.wanted.as_str(), query.unwanted.as_str()), ("deploy", "staging"));
        let (echo, _) = parse_request(&json!({"path": "/a/../b", "command": "read"}));
        assert_eq!(echo.path.as_deref(), Some("/a/../b"), "a bad path is echoed as given");
    }

    #[test]
    fn search_results_keep_their_order() {
        let result = search_result(&[
            ("/b".into(), "**deploy** on fridays".into(), 0.5),
            ("/a".into(), "no **deploy**".into(), 0.25),
        ]);
        let value: serde_json::Value = serde_json::from_str(&result).unwrap();
        assert_eq!(value["matches"][0]["path"], "/b");
        assert_eq!(value["matches"][1]["score"], 0.25);
        assert_eq!(search_result(&[]), r#"{"matches":[]}"#);
    }

    fn within(lines: &[String], max_chars: usize) -> String {
        let mut rendering = Rendering::new(max_chars, usize::MAX);
        for line in lines {
            rendering.push(line).unwrap();
        }
        rendering.finish()
    }

    #[test]
    fn tree_and_full_renderings() {
        let paths: Vec<String> =
            ["/notes/today", "/a-b", "/notes/work/plan", "/readme", "/notes/a"]
                .iter()
                .map(|p| p.to_string())
                .collect();
        assert_eq!(
            tree_lines(&paths).join("\n"),
            "a-b\nnotes/\n  a\n  today\n  work/\n    plan\nreadme"
        );
        assert!(tree_lines(&[]).is_empty());
        let mut full = Rendering::new(usize::MAX, usize::MAX);
        full.push_file("/a", "one\ntwo").unwrap();
        full.push_file("/b", "three").unwrap();
        assert_eq!(full.finish(), "### /a\none\ntwo\n\n### /b\nthree");
    }

    #[test]
    fn a_cut_says_what_it_left_out() {
        let lines: Vec<String> = (1..=50).map(|i| format!("line number {i}")).collect();
        let all = lines.join("\n");
        assert_eq!(within(&lines, all.chars().count()), all, "everything fits: no note");
        let cut = within(&lines, 200);
        assert!(cut.chars().count() <= 200, "{cut}");
        let kept = cut.lines().count() - 1;
        let last = cut.lines().last().unwrap();
        let left: usize =
            lines[kept..].iter().map(|l| l.chars().count()).sum::<usize>() + (50 - kept);
        assert_eq!(
            last,
            format!(
                "[cut at 200 characters: {} more lines, {left} more characters left out]",
                50 - kept
            )
        );
        assert!(cut.starts_with("line number 1\nline number 2"));
        // Line by line, holding only what can fit.
        for max_chars in [1, 5, 60, 200, 700, 10_000] {
            let mut rendering = Rendering::new(max_chars, usize::MAX);
            for line in &lines {
                rendering.push(line).unwrap();
            }
            assert!(rendering.kept.iter().map(|l| l.chars().count()).sum::<usize>() <= max_chars);
            let text = rendering.finish();
            assert_eq!(text == all, all.chars().count() <= max_chars, "{max_chars}: {text}");
        }
        let mut small = Rendering::new(10_000, 100);
        let refused = lines.iter().try_for_each(|line| small.push(line));
        assert_eq!(refused.unwrap_err().kind, crate::ErrorKind::LimitExceeded);
        let tiny = within(&lines, 5);
        assert!(tiny.starts_with("[cut at 5 characters: 50 more lines"), "{tiny}");
    }

    #[test]
    fn envelopes_have_the_documented_text() {
        let echo = Echo { command: Some("read".into()), path: Some("/notes/today".into()) };
        assert_eq!(
            envelope_ok(&echo, &read_result("...", 3)),
            r#"{"command":"read","path":"/notes/today","ok":true,"result":{"content":"...","version":3,"sha256":"ab5df625bc76dbd4e163bed2dd888df828f90159bb93556525c31821b6541d46"}}"#
        );
        let echo = Echo { command: Some("read".into()), path: Some("/missing".into()) };
        assert_eq!(
            envelope(&echo, Err(not_found())),
            r#"{"command":"read","path":"/missing","ok":false,"error":{"message":"ENOENT: file not found","code":"ENOENT"}}"#
        );
        let echo = Echo { command: Some("list".into()), path: Some("/".into()) };
        let mut entries = vec![("notes".to_owned(), true)];
        assert_eq!(
            envelope_ok(&echo, &list_result(&mut entries)),
            r#"{"command":"list","path":"/","ok":true,"result":{"entries":[{"name":"notes","kind":"dir"}]}}"#
        );
        assert_eq!(
            envelope_error(&Echo::default(), &ToolError::invalid("x")),
            r#"{"command":null,"path":null,"ok":false,"error":{"message":"x","code":"EINVAL"}}"#
        );
        assert_eq!(json_string("a\"b\n\u{1}é"), r#""a\"b\n\u0001é""#);
        assert_eq!(occurrences("hello hello", "hello"), 2);
        assert_eq!(occurrences("aaa", "aa"), 1);
        let replaced = |text: &str, n| Replacement::Replaced(text.to_owned(), n);
        assert_eq!(replace_counted("aaa", "aa", "b", 100), replaced("ba", 1));
        assert_eq!(replace_counted("one two one", "one", "1", 100), replaced("1 two 1", 2));
        assert_eq!(
            replace_counted("caf\u{e9} caf\u{e9}", "\u{e9}", "e", 100),
            replaced("cafe cafe", 2)
        );
        assert_eq!(replace_counted("abc", "x", "y", 100), Replacement::NotFound);
        // Exactly at the limit is kept; one byte past it is refused.
        assert_eq!(replace_counted("ab", "b", "cd", 3), replaced("acd", 1));
        assert_eq!(replace_counted("ab", "b", "cd", 2), Replacement::TooLarge { bytes: 3 });
    }

    #[test]
    fn a_scope_is_not_empty_and_not_longer_than_a_path() {
        assert!(check_scope("s").is_ok());
        assert!(check_scope(&"é".repeat(MAX_SCOPE_BYTES / 2)).is_ok());
        for bad in [String::new(), "é".repeat(MAX_SCOPE_BYTES / 2 + 1)] {
            assert_eq!(check_scope(&bad).unwrap_err().kind, crate::ErrorKind::InvalidParameter);
        }
    }

    #[test]
    fn a_replacement_past_the_limit_is_refused_before_it_is_built() {
        // 100,000 occurrences, each replaced by 100,000 bytes: 10 GB if
        // built. The answer comes from counting alone.
        let content = "a".repeat(100_000);
        let new = "b".repeat(100_000);
        assert_eq!(
            replace_counted(&content, "a", &new, 102_400),
            Replacement::TooLarge { bytes: 10_000_000_000 }
        );
    }

    #[test]
    fn preconditions_are_checked_and_conflicts_say_what_the_file_is() {
        let update = Command::Update { old: "a".into(), new: "b".into() };
        let fields = [
            ("expectedVersion", Field::Number(Some(2))),
            (
                "expectedSha256",
                Field::Str("AB5DF625BC76DBD4E163BED2DD888DF828F90159BB93556525C31821B6541D46"),
            ),
        ];
        let both = precondition_of(&fields, &update).unwrap();
        assert_eq!(both.version, Some(2));
        assert_eq!(
            both.sha256.as_deref(),
            Some("ab5df625bc76dbd4e163bed2dd888df828f90159bb93556525c31821b6541d46")
        );
        assert_eq!(both.check(Some((2, "..."))), Ok(()));
        let moved = both.check(Some((3, "..."))).unwrap_err();
        assert_eq!(moved.code, Code::Econflict);
        assert_eq!(moved.message, "ECONFLICT: the file is at version 3, not 2");
        let echo = Echo { command: Some("update".into()), path: Some("/a".into()) };
        assert_eq!(
            envelope_error(&echo, &moved),
            r#"{"command":"update","path":"/a","ok":false,"error":{"message":"ECONFLICT: the file is at version 3, not 2","code":"ECONFLICT","version":3,"sha256":"ab5df625bc76dbd4e163bed2dd888df828f90159bb93556525c31821b6541d46"}}"#
        );
        let edited = both.check(Some((2, "....")));
        assert_eq!(
            edited.unwrap_err().message,
            "ECONFLICT: the file's content changed; it is at version 2"
        );
        let gone = both.check(None).unwrap_err();
        assert_eq!(gone.message, "ECONFLICT: the file does not exist");
        assert_eq!(gone.current, Some(FileVersion { version: 0, sha256: None }));
        let create_only =
            precondition_of(&[("expectedVersion", Field::Number(Some(0)))], &update).unwrap();
        assert_eq!(create_only.check(None), Ok(()));
        assert_eq!(
            create_only.check(Some((1, ""))).unwrap_err().message,
            "ECONFLICT: the file already exists, at version 1"
        );
        assert!(precondition_of(&[], &Command::Read).unwrap().is_none());
        for bad in [
            ("expectedVersion", Field::Number(Some(-1))),
            ("expectedVersion", Field::Number(None)),
            ("expectedVersion", Field::Str("2")),
            ("expectedSha256", Field::Str("abc")),
            ("expectedSha256", Field::Number(Some(1))),
        ] {
            assert_eq!(precondition_of(&[bad], &update).unwrap_err().code, Code::Einval);
        }
        let on_read =
            precondition_of(&[("expectedVersion", Field::Number(Some(1)))], &Command::Read);
        assert_eq!(
            on_read.unwrap_err().message,
            "read takes no expectedVersion or expectedSha256; only append, update and delete do"
        );
    }

    #[test]
    fn scope_keys_are_per_node_or_per_node_and_thread() {
        assert_eq!(scope_key(Some("n1"), Some("global"), Some("t")).unwrap(), r#"["n1"]"#);
        assert_eq!(scope_key(Some("n1"), Some("perThread"), Some("t9")).unwrap(), r#"["n1","t9"]"#);
        let no_thread = scope_key(Some("n1"), Some("perThread"), Some("")).unwrap_err();
        assert_eq!(no_thread.message, "a perThread scope needs a thread_id");
        assert_eq!(
            scope_key(None, Some("global"), None).unwrap_err().kind,
            crate::ErrorKind::NullValue
        );
        assert!(scope_key(Some(""), Some("global"), None).is_err());
        let unknown = scope_key(Some("n1"), Some("perUser"), None).unwrap_err();
        assert_eq!(unknown.message, "unknown scope \"perUser\"");
        assert_eq!(unknown.detail.as_deref(), Some("scope is one of: global, perThread"));
    }

    #[test]
    fn tool_definitions_in_both_formats() {
        let anthropic =
            tool_definition(Some("memory"), None, Some("T"), Some("anthropic")).unwrap();
        assert_eq!(anthropic["name"], "memory");
        assert_eq!(anthropic["description"], TOOL_DESCRIPTION);
        assert_eq!(anthropic["input_schema"]["title"], "T");
        assert_eq!(anthropic["input_schema"]["required"], serde_json::json!(["path", "command"]));
        let openai = tool_definition(Some("mem-1"), Some("d"), None, Some("openai")).unwrap();
        assert_eq!(openai["type"], "function");
        assert_eq!(openai["function"]["description"], "d");
        assert!(openai["function"]["parameters"].get("title").is_none());
        for bad in ["", "has space", &"x".repeat(65)] {
            assert!(tool_definition(Some(bad), None, None, Some("openai")).is_err(), "{bad:?}");
        }
        assert!(tool_definition(Some("m"), None, None, Some("gemini")).is_err());
    }
}
