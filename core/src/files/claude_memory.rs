//! Claude's client-side memory tool (`memory_20250818`) over the memory
//! tool's files: the requests Claude sends (`view`, `create`,
//! `str_replace`, `insert`, `delete`, `rename`), paths under `/memories`,
//! and the exact texts of the answers.
//!
//! `/memories/notes/a.md` is the file `/notes/a.md` of the scope, so Claude
//! and the JSON memory tool share one tree. Answers are those of Anthropic's
//! SDK tool (`BetaLocalFilesystemMemoryTool`) text for text: paths are echoed
//! as Claude gave them, `.` and `..` resolve inside `/memories`, and view
//! ranges are read as the SDK reads them. The refusals the SDK has no text
//! for (a size or file-count limit, a name the scope cannot store, a
//! malformed request) are plain sentences, as the SDK's own refusals are.
//!
//! Every answer is `Ok(text)` or `Err(text)`: the `Err` texts are what a
//! `tool_result` sends back with `is_error: true`.

use super::memory_tool::{self as files, occurrences};

/// The directory every path of the tool lives under.
pub const ROOT: &str = "/memories";
/// The most lines a viewed file may have (the reference implementation's).
pub const MAX_LINES: usize = 999_999;
/// Line numbers are right-aligned to the width of `MAX_LINES`.
const NUMBER_WIDTH: usize = 6;
/// Lines of context shown around an edit.
const SNIPPET_CONTEXT: usize = 2;

/// A command's answer: the text for Claude, or the text of a refusal.
pub type Answer<T> = Result<T, String>;

/// A path of the tool, as Claude reads it (`/memories/...`, normalised) and
/// as the scope stores it (`/...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub shown: String,
    pub stored: String,
}

impl Target {
    pub fn is_root(&self) -> bool {
        self.stored == "/"
    }
}

/// A `view_range` as the SDK reads it: two numbers it slices by, nothing
/// (absent, or not of two elements), or two elements it cannot slice by,
/// where it fails with a Python exception for a file.
pub type ViewRange = std::result::Result<Option<(i64, i64)>, String>;

/// One request, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    View {
        path: Target,
        /// The range a file's view takes; a directory's ignores it,
        /// whatever it is, as the SDK does.
        range: ViewRange,
    },
    Create {
        path: Target,
        text: String,
    },
    StrReplace {
        path: Target,
        old: String,
        new: String,
    },
    Insert {
        path: Target,
        line: i64,
        text: String,
    },
    Delete {
        path: Target,
    },
    Rename {
        from: Target,
        to: Target,
    },
}

impl Request {
    /// The file a precondition names: the one the request changes (a
    /// rename's source); None for a view, which changes nothing.
    pub fn changed_file(&self) -> Option<&Target> {
        match self {
            Request::View { .. } => None,
            Request::Create { path, .. }
            | Request::StrReplace { path, .. }
            | Request::Insert { path, .. }
            | Request::Delete { path } => Some(path),
            Request::Rename { from, .. } => Some(from),
        }
    }
}

/// A precondition an application passes beside a request (Claude's calls
/// have no field for one), checked: a version from 0 (no file), or the 64
/// hex digits of a SHA-256 of the content.
pub fn checked_precondition(
    version: Option<i32>, sha256: Option<&str>,
) -> crate::Result<files::Precondition> {
    let version = crate::versions::checked_expected("expected_version", version)?;
    let sha256 = match sha256 {
        None => None,
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(hex.to_ascii_lowercase())
        }
        Some(_) => {
            return Err(crate::Error::invalid(
                "expected_sha256 must be the 64 hex digits of a SHA-256",
            ));
        }
    };
    Ok(files::Precondition { version, sha256 })
}

/// The error of a precondition that `file` (its version and content, or
/// None) does not meet, named `name` (such as `file "/a" of scope "s"`).
pub fn precondition_conflict(
    name: &str, precondition: &files::Precondition, file: Option<(i32, &str)>,
) -> Option<crate::Error> {
    let version = file.map_or(crate::versions::ABSENT, |(version, _)| version);
    if let Some(expected) = precondition.version
        && expected != version
    {
        return Some(crate::versions::conflict(name, expected, version));
    }
    let expected = precondition.sha256.as_deref()?;
    let found = files::FileVersion::of(file);
    if found.sha256.as_deref() == Some(expected) {
        return None;
    }
    let message = match file {
        None => format!("{name} does not exist"),
        Some(_) => format!("{name} has other content, at version {version}"),
    };
    Some(
        crate::Error::new(crate::ErrorKind::VersionConflict, message)
            .with_detail("It changed since it was read. Nothing was written.")
            .with_hint("Read it again, and retry with the version it has then."),
    )
}

/// The commands, in the documentation's order.
pub const COMMANDS: [&str; 6] = ["view", "create", "str_replace", "insert", "delete", "rename"];

/// A path as given, fit to quote in an answer: control characters escaped.
fn as_given(raw: &str) -> String {
    raw.chars()
        .flat_map(|c| {
            let escaped: Vec<char> =
                if c.is_control() { c.escape_default().collect() } else { vec![c] };
            escaped
        })
        .collect()
}

/// Map a path of the tool to the scope's path. It must be `/memories` or
/// lie under it. `.` and `..` segments are resolved as the SDK resolves
/// them (there are no links to follow), and a `..` above `/memories` is an
/// attempt to escape; the rest follows the memory tool's path rules. The
/// path is shown as given, as the SDK echoes it.
pub fn target(raw: &str) -> Answer<Target> {
    let rest = match raw.strip_prefix(ROOT) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => {
            return Err(format!("Path must start with /memories, got: {}", as_given(raw)));
        }
    };
    let mut segments: Vec<&str> = Vec::new();
    for segment in rest.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(format!("Path {} would escape /memories directory", as_given(raw)));
                }
            }
            name => segments.push(name),
        }
    }
    let resolved = format!("/{}", segments.join("/"));
    let stored = files::normalise_path(&resolved)
        .map_err(|e| format!("The path {} cannot be stored: {}", as_given(raw), e.message))?;
    Ok(Target { shown: as_given(raw), stored })
}

/// Check one request: `{command, path, ...}` with the arguments the
/// command needs.
pub fn parse(request: &serde_json::Value) -> Answer<Request> {
    use serde_json::Value;
    let Value::Object(fields) = request else {
        return Err("The request must be a JSON object".to_owned());
    };
    let command = match fields.get("command") {
        Some(Value::String(c)) => c.as_str(),
        None | Some(Value::Null) => return Err("Parameter `command` is required".to_owned()),
        Some(_) => return Err("Parameter `command` must be a string".to_owned()),
    };
    if !COMMANDS.contains(&command) {
        return Err(format!(
            "Unrecognized command {}. The allowed commands are: {}",
            as_given(command),
            COMMANDS.join(", ")
        ));
    }
    let text = |name: &str| -> Answer<String> {
        match fields.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => {
                Err(format!("Parameter `{name}` is required for command: {command}"))
            }
            Some(_) => Err(format!("Parameter `{name}` must be a string")),
        }
    };
    let integer = |name: &str| -> Answer<i64> {
        match fields.get(name) {
            Some(Value::Number(n)) => {
                n.as_i64().ok_or_else(|| format!("Parameter `{name}` must be an integer"))
            }
            None | Some(Value::Null) => {
                Err(format!("Parameter `{name}` is required for command: {command}"))
            }
            Some(_) => Err(format!("Parameter `{name}` must be an integer")),
        }
    };
    let path = |name: &str| -> Answer<Target> { target(&text(name)?) };
    Ok(match command {
        "view" => {
            // Python's ints, and its booleans, which are ints too.
            let number = |v: &Value| v.as_i64().or_else(|| v.as_bool().map(i64::from));
            let range = match fields.get("view_range") {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(pair)) if pair.len() == 2 => {
                    match (number(&pair[0]), number(&pair[1])) {
                        (Some(start), Some(end)) => Ok(Some((start, end))),
                        _ => Err(bad_range()),
                    }
                }
                // The SDK reads a range of two elements and ignores others.
                Some(Value::Array(_)) => Ok(None),
                Some(Value::String(s)) if s.chars().count() != 2 => Ok(None),
                Some(_) => Err(bad_range()),
            };
            Request::View { path: path("path")?, range }
        }
        "create" => Request::Create { path: path("path")?, text: text("file_text")? },
        "str_replace" => {
            let path = path("path")?;
            let old = text("old_str")?;
            if old.is_empty() {
                return Err("Parameter `old_str` must not be empty".to_owned());
            }
            Request::StrReplace { path, old, new: text("new_str")? }
        }
        "insert" => Request::Insert {
            path: path("path")?,
            line: integer("insert_line")?,
            text: text("insert_text")?,
        },
        "delete" => Request::Delete { path: path("path")? },
        _ => Request::Rename { from: path("old_path")?, to: path("new_path")? },
    })
}

fn bad_range() -> String {
    "Parameter `view_range` must be a list of two integers [start, end]".to_owned()
}

/// The refusal of `view`, `str_replace` and `insert` for a path that names
/// nothing.
pub fn not_found(path: &Target) -> String {
    format!("The path {} does not exist. Please provide a valid path.", path.shown)
}

/// The refusal of `delete` and `rename` for a path that names nothing.
pub fn nothing_there(path: &Target) -> String {
    format!("The path {} does not exist", path.shown)
}

/// The refusal of `str_replace` and `insert` for a directory.
pub fn not_a_file(path: &Target) -> String {
    format!("The path {} is not a file.", path.shown)
}

pub fn already_exists(path: &Target) -> String {
    format!("File {} already exists", path.shown)
}

pub fn destination_exists(path: &Target) -> String {
    format!("The destination {} already exists", path.shown)
}

pub fn root_not_deleted() -> String {
    "Cannot delete the /memories directory itself".to_owned()
}

pub fn root_not_renamed() -> String {
    "Cannot rename the /memories directory itself".to_owned()
}

pub fn into_itself(from: &Target, to: &Target) -> String {
    format!("Cannot move {} into itself ({})", from.shown, to.shown)
}

pub fn file_above(path: &Target) -> String {
    format!("A directory on the way to {} is a file", path.shown)
}

pub fn too_big(path: &Target, bytes: usize, max_bytes: i64) -> String {
    format!(
        "File {} would have {bytes} bytes; at most {max_bytes} are allowed (agent_memory.max_file_bytes)",
        path.shown
    )
}

pub fn memory_full(max_files: i64) -> String {
    format!(
        "Memory is full: it holds {max_files} files, the most allowed (agent_memory.max_files_per_scope)"
    )
}

pub fn bad_destination(from: &Target, to: &Target, why: &str) -> String {
    format!("Cannot rename {} to {}: {why}", from.shown, to.shown)
}

pub fn created(path: &Target) -> String {
    format!("File created successfully at: {}", path.shown)
}

pub fn deleted(path: &Target) -> String {
    format!("Successfully deleted {}", path.shown)
}

pub fn renamed(from: &Target, to: &Target) -> String {
    format!("Successfully renamed {} to {}", from.shown, to.shown)
}

/// A size as the SDK writes it: bytes below 1 KiB (`512B`), then the
/// largest unit up to G, whole when it is whole (`2K`), else with one
/// decimal, rounded (`1.5K`).
pub fn human_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0B".to_owned();
    }
    let unit = ((63 - bytes.leading_zeros()) / 10).min(3);
    let size = bytes as f64 / 1024f64.powi(unit as i32);
    let unit = ['B', 'K', 'M', 'G'][unit as usize];
    if size.fract() == 0.0 { format!("{}{unit}", size as u64) } else { format!("{size:.1}{unit}") }
}

/// Whether a listing leaves an entry out, with everything under it.
fn hidden(name: &str) -> bool {
    name.starts_with('.')
}

/// The answer to `view` of a directory: its entries two levels deep by
/// name (each directory followed by what it holds), hidden entries left
/// out with all they hold, each with its size (a directory's is the sum of
/// the files under it, as `du` counts). `files_under` are the stored paths
/// under the directory with their sizes in bytes, `kept_under` the
/// directories kept there with no file under them.
pub fn directory_listing(
    dir: &Target, files_under: &[(String, u64)], kept_under: &[String],
) -> String {
    use std::collections::BTreeMap;
    let prefix = files::under(&dir.stored);
    let mut total = 0u64;
    // Segment lists sort each directory right before what it holds.
    let mut entries: BTreeMap<Vec<&str>, (u64, bool)> = BTreeMap::new();
    let kept = kept_under.iter().map(|path| (path, None));
    for (path, bytes) in files_under.iter().map(|(p, b)| (p, Some(*b))).chain(kept) {
        total += bytes.unwrap_or(0);
        let Some(rest) = path.strip_prefix(&prefix) else {
            continue;
        };
        let segments: Vec<&str> = rest.split('/').collect();
        for depth in 1..=segments.len().min(2) {
            // A kept directory is a directory down to its last segment.
            let is_dir = depth < segments.len() || bytes.is_none();
            if hidden(segments[depth - 1]) {
                break;
            }
            let entry = entries.entry(segments[..depth].to_vec()).or_insert((0, is_dir));
            entry.0 += bytes.unwrap_or(0);
        }
    }
    let mut out = format!(
        "Here're the files and directories up to 2 levels deep in {}, excluding hidden items:\n{}\t{}",
        dir.shown,
        human_size(total),
        dir.shown
    );
    for (segments, (bytes, is_dir)) in entries {
        out.push('\n');
        out.push_str(&human_size(bytes));
        out.push('\t');
        out.push_str(&dir.shown);
        out.push('/');
        out.push_str(&segments.join("/"));
        if is_dir {
            out.push('/');
        }
    }
    out
}

/// Lines numbered as the tool numbers them: right-aligned to six places,
/// then a tab.
fn numbered<'a>(first: usize, lines: impl Iterator<Item = &'a str>) -> String {
    lines
        .enumerate()
        .map(|(i, line)| format!("{:>NUMBER_WIDTH$}\t{line}", first + i))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer to `view` of a file: its lines numbered, all of them or
/// those of the range `[start, end]` as the SDK slices them: from line
/// `start` (1 at least) to line `end` (-1: the last), past the end or
/// before the start showing none.
pub fn file_view(path: &Target, content: &str, range: Option<(i64, i64)>) -> Answer<String> {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() > MAX_LINES {
        return Err(format!("File {} exceeds maximum line limit of 999,999 lines.", path.shown));
    }
    let count = lines.len() as i64;
    let (start, end) = match range {
        None => (0, count),
        Some((first, last)) => (first.max(1) - 1, if last == -1 { count } else { last }),
    };
    // Python's slice lines[start:end]: a negative end counts from the end.
    let bound = |i: i64| {
        if i < 0 { (count + i).max(0) } else { i.min(count) }
    };
    let (from, to) = (bound(start) as usize, bound(end) as usize);
    let shown = if from < to { &lines[from..to] } else { &[][..] };
    Ok(format!(
        "Here's the content of {} with line numbers:\n{}",
        path.shown,
        numbered(start as usize + 1, shown.iter().copied())
    ))
}

/// `str_replace`: the file's new content and the answer, when `old` occurs
/// exactly once.
pub fn replace_once(
    path: &Target, content: &str, old: &str, new: &str,
) -> Answer<(String, String)> {
    match occurrences(content, old) {
        0 => {
            return Err(format!(
                "No replacement was performed, old_str `{old}` did not appear verbatim in {}.",
                path.shown
            ));
        }
        1 => {}
        _ => {
            // Every place old starts, overlaps included, as the SDK lists them.
            let lines: Vec<String> = line_of_each(content, &overlapping_starts(content, old))
                .map(|line| line.to_string())
                .collect();
            return Err(format!(
                "No replacement was performed. Multiple occurrences of old_str `{old}` in lines: {}. Please ensure it is unique",
                lines.join(", ")
            ));
        }
    }
    let at = content.find(old).unwrap_or(0);
    let edited = format!("{}{new}{}", &content[..at], &content[at + old.len()..]);
    // The first line of the change, with two lines of context each side.
    let first = content[..at].matches('\n').count();
    let lines: Vec<&str> = edited.split('\n').collect();
    let from = first.saturating_sub(SNIPPET_CONTEXT);
    let to = (first + SNIPPET_CONTEXT + 1).min(lines.len());
    let answer = format!(
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
        numbered(from + 1, lines[from..to].iter().copied())
    );
    Ok((edited, answer))
}

/// Where `needle` (not empty) starts in `text`, overlaps included, in
/// order. Knuth-Morris-Pratt over the bytes: time linear in both, whatever
/// they repeat. A match of valid UTF-8 in valid UTF-8 starts on a char.
fn overlapping_starts(text: &str, needle: &str) -> Vec<usize> {
    let (text, needle) = (text.as_bytes(), needle.as_bytes());
    if needle.is_empty() {
        return Vec::new();
    }
    // fallback[i]: the length of the longest proper border of needle[..=i].
    let mut fallback = vec![0usize; needle.len()];
    let mut border = 0;
    for i in 1..needle.len() {
        while border > 0 && needle[i] != needle[border] {
            border = fallback[border - 1];
        }
        if needle[i] == needle[border] {
            border += 1;
        }
        fallback[i] = border;
    }
    let mut starts = Vec::new();
    let mut matched = 0;
    for (at, &byte) in text.iter().enumerate() {
        while matched > 0 && byte != needle[matched] {
            matched = fallback[matched - 1];
        }
        if byte == needle[matched] {
            matched += 1;
        }
        if matched == needle.len() {
            starts.push(at + 1 - needle.len());
            matched = fallback[matched - 1];
        }
    }
    starts
}

/// The 1-based line of each of `offsets` (in order) in `text`, counting
/// the newlines once.
fn line_of_each<'a>(text: &'a str, offsets: &'a [usize]) -> impl Iterator<Item = usize> + 'a {
    let mut line = 1;
    let mut counted = 0;
    offsets.iter().map(move |&at| {
        line += text.as_bytes()[counted..at].iter().filter(|&&b| b == b'\n').count();
        counted = at;
        line
    })
}

/// `insert`: the file's new content with `text` as new lines after line
/// `line` (0: at the top), and the answer. The file's lines are split on
/// `\n`; the result ends with a newline.
pub fn insert_lines(
    path: &Target, content: &str, line: i64, text: &str,
) -> Answer<(String, String)> {
    let mut lines: Vec<&str> = if content.is_empty() {
        Vec::new()
    } else {
        content.strip_suffix('\n').unwrap_or(content).split('\n').collect()
    };
    if line < 0 || line > lines.len() as i64 {
        return Err(format!(
            "Invalid `insert_line` parameter: {line}. It should be within the range [0, {}].",
            lines.len()
        ));
    }
    lines.insert(line as usize, text.trim_end_matches('\n'));
    let mut edited = lines.join("\n");
    if !edited.ends_with('\n') {
        edited.push('\n');
    }
    Ok((edited, format!("The file {} has been edited.", path.shown)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(raw: &str) -> Target {
        target(raw).unwrap()
    }

    #[test]
    fn paths_live_under_memories() {
        assert_eq!(at("/memories"), Target { shown: "/memories".into(), stored: "/".into() });
        assert_eq!(at("/memories/").stored, "/");
        // Shown as given, stored normalised.
        let t = at("/memories//notes///a.md/");
        assert_eq!(
            (t.shown.as_str(), t.stored.as_str()),
            ("/memories//notes///a.md/", "/notes/a.md")
        );
        // . and .. resolve inside /memories, as the SDK resolves them.
        assert_eq!(at("/memories/a/../b.txt").stored, "/b.txt");
        assert_eq!(at("/memories/./a/.").stored, "/a");
        assert_eq!(at("/memories/a/..").stored, "/");
        // NFC: two spellings of é reach one file.
        assert_eq!(at("/memories/cafe\u{301}").stored, at("/memories/caf\u{e9}").stored);
    }

    #[test]
    fn paths_outside_memories_are_refused() {
        for raw in ["/etc/passwd", "memories/a", "/memoriesx/a", "", "/"] {
            assert_eq!(
                target(raw).unwrap_err(),
                format!("Path must start with /memories, got: {raw}")
            );
        }
        for raw in ["/memories/../etc", "/memories/a/../../x", "/memories/.."] {
            assert_eq!(
                target(raw).unwrap_err(),
                format!("Path {raw} would escape /memories directory")
            );
        }
        // A name the store refuses is refused with the rule it breaks.
        assert_eq!(
            target("/memories/%2E%2E/x").unwrap_err(),
            "The path /memories/%2E%2E/x cannot be stored: path must not contain percent-encoded dots, slashes or backslashes"
        );
        let err = target("/memories/a\u{0}b").unwrap_err();
        assert!(err.starts_with("The path /memories/a\\u{0}b cannot be stored: "), "{err}");
        assert!(target("/memories/a\\b").unwrap_err().contains("backslashes"));
    }

    #[test]
    fn requests_are_checked() {
        let ok =
            parse(&json!({"command": "view", "path": "/memories", "view_range": [1, -1]})).unwrap();
        assert_eq!(ok, Request::View { path: at("/memories"), range: Ok(Some((1, -1))) });
        let cases = [
            (json!([]), "The request must be a JSON object"),
            (json!({}), "Parameter `command` is required"),
            (json!({"command": 3}), "Parameter `command` must be a string"),
            (
                json!({"command": "cat"}),
                "Unrecognized command cat. The allowed commands are: view, create, str_replace, insert, delete, rename",
            ),
            (
                json!({"command": "create", "path": "/memories/a"}),
                "Parameter `file_text` is required for command: create",
            ),
            (
                json!({"command": "create", "path": "/memories/a", "file_text": 1}),
                "Parameter `file_text` must be a string",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": "2", "insert_text": ""}),
                "Parameter `insert_line` must be an integer",
            ),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": ""}),
                "Parameter `insert_line` must be an integer",
            ),
            (
                json!({"command": "str_replace", "path": "/memories/a", "old_str": "", "new_str": "x"}),
                "Parameter `old_str` must not be empty",
            ),
            (
                json!({"command": "str_replace", "path": "/memories/a", "old_str": "x"}),
                "Parameter `new_str` is required for command: str_replace",
            ),
            (
                json!({"command": "rename", "old_path": "/memories/a"}),
                "Parameter `new_path` is required for command: rename",
            ),
            (
                json!({"command": "delete", "path": "/tmp/a"}),
                "Path must start with /memories, got: /tmp/a",
            ),
        ];
        for (request, answer) in cases {
            assert_eq!(parse(&request).unwrap_err(), answer, "{request}");
        }
    }

    #[test]
    fn a_range_of_one_element_is_ignored() {
        let request = json!({"command": "view", "path": "/memories/a", "view_range": [1]});
        assert_eq!(
            parse(&request).unwrap(),
            Request::View { path: at("/memories/a"), range: Ok(None) }
        );
        // As the SDK reads them: booleans are numbers, a string of
        // another length than two is ignored, and two elements it cannot
        // slice by are left to the view of a file to refuse.
        let range = |value: serde_json::Value| match parse(
            &json!({"command": "view", "path": "/memories/a", "view_range": value}),
        ) {
            Ok(Request::View { range, .. }) => range,
            other => panic!("{other:?}"),
        };
        assert_eq!(range(json!([true, 1])), Ok(Some((1, 1))));
        assert_eq!(range(json!("1-2")), Ok(None));
        assert_eq!(range(json!(["a", "b"])), Err(bad_range()));
        assert_eq!(range(json!([1.5, 2])), Err(bad_range()));
    }

    #[test]
    fn sizes_read_as_the_sdk_writes_them() {
        // Each value as the SDK's _format_file_size gives it.
        for (bytes, shown) in [
            (0, "0B"),
            (1023, "1023B"),
            (1024, "1K"),
            (1536, "1.5K"),
            (1537, "1.5K"),
            (3182, "3.1K"),
            (4096, "4K"),
            (10 * 1024 - 1, "10.0K"),
            (12 * 1024, "12K"),
            (1024 * 1024, "1M"),
            (5 * 1024 * 1024 * 1024, "5G"),
            (3 * 1024u64.pow(4) / 2, "1536G"),
        ] {
            assert_eq!(human_size(bytes), shown, "{bytes}");
        }
    }

    #[test]
    fn directories_list_two_levels_with_sizes() {
        let files: Vec<(String, u64)> = [
            ("/a-b.md", 100),
            ("/a/x.md", 2048),
            ("/a/deep/er/y.md", 1024),
            ("/.hidden/z", 10),
            ("/node_modules/m.js", 10),
            ("/.env", 5),
        ]
        .iter()
        .map(|(p, b)| (p.to_string(), *b))
        .collect();
        let listing = directory_listing(&at("/memories"), &files, &[]);
        assert_eq!(
            listing,
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n\
             3.1K\t/memories\n\
             3K\t/memories/a/\n\
             1K\t/memories/a/deep/\n\
             2K\t/memories/a/x.md\n\
             100B\t/memories/a-b.md\n\
             10B\t/memories/node_modules/\n\
             10B\t/memories/node_modules/m.js"
        );
        let sub: Vec<(String, u64)> =
            files.into_iter().filter(|(p, _)| p.starts_with("/a/")).collect();
        let listing = directory_listing(&at("/memories/a"), &sub, &[]);
        assert!(
            listing.ends_with(
                "3K\t/memories/a\n1K\t/memories/a/deep/\n1K\t/memories/a/deep/er/\n2K\t/memories/a/x.md"
            ),
            "{listing}"
        );
    }

    #[test]
    fn kept_directories_are_listed_empty() {
        let files = vec![("/a/x.md".to_string(), 10)];
        let kept = vec!["/a/empty".to_string(), "/b/c/d".to_string(), "/.h/e".to_string()];
        assert_eq!(
            directory_listing(&at("/memories"), &files, &kept),
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n\
             10B\t/memories\n\
             10B\t/memories/a/\n\
             0B\t/memories/a/empty/\n\
             10B\t/memories/a/x.md\n\
             0B\t/memories/b/\n\
             0B\t/memories/b/c/"
        );
        // A directory that holds only a kept one, viewed itself.
        assert_eq!(
            directory_listing(&at("/memories/b/c"), &[], &["/b/c/d".to_string()]),
            "Here're the files and directories up to 2 levels deep in /memories/b/c, excluding hidden items:\n\
             0B\t/memories/b/c\n\
             0B\t/memories/b/c/d/"
        );
    }

    #[test]
    fn files_show_numbered_lines() {
        let p = at("/memories/n.md");
        assert_eq!(
            file_view(&p, "one\ntwo\nthree", None).unwrap(),
            "Here's the content of /memories/n.md with line numbers:\n     1\tone\n     2\ttwo\n     3\tthree"
        );
        assert_eq!(
            file_view(&p, "one\ntwo\nthree", Some((2, -1))).unwrap(),
            "Here's the content of /memories/n.md with line numbers:\n     2\ttwo\n     3\tthree"
        );
        assert_eq!(
            file_view(&p, "one\ntwo\nthree", Some((2, 2))).unwrap(),
            "Here's the content of /memories/n.md with line numbers:\n     2\ttwo"
        );
        // As the SDK slices: the start is 1 at least, an end past the
        // file stops at its last line, an empty slice shows no line.
        let head = "Here's the content of /memories/n.md with line numbers:\n";
        for (range, lines) in [
            ((0, 1), "     1\ta"),
            ((-5, -1), "     1\ta\n     2\tb"),
            ((1, 100), "     1\ta\n     2\tb"),
            ((2, 1), ""),
            ((4, 10), ""),
            ((1, -2), ""),
            ((1, -3), ""),
        ] {
            assert_eq!(
                file_view(&p, "a\nb", Some(range)).unwrap(),
                format!("{head}{lines}"),
                "{range:?}"
            );
        }
        assert_eq!(file_view(&p, "a\nb\nc", Some((1, -2))).unwrap(), format!("{head}     1\ta"));
        let huge = "\n".repeat(MAX_LINES);
        assert_eq!(
            file_view(&p, &huge, None).unwrap_err(),
            "File /memories/n.md exceeds maximum line limit of 999,999 lines."
        );
    }

    #[test]
    fn replace_needs_exactly_one_occurrence() {
        let p = at("/memories/n.md");
        let text = "1\n2\n3\nold\n5\n6\n7";
        let (edited, answer) = replace_once(&p, text, "old", "new\nnewer").unwrap();
        assert_eq!(edited, "1\n2\n3\nnew\nnewer\n5\n6\n7");
        assert_eq!(
            answer,
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     2\t2\n     3\t3\n     4\tnew\n     5\tnewer\n     6\t5"
        );
        assert_eq!(
            replace_once(&p, text, "nope", "x").unwrap_err(),
            "No replacement was performed, old_str `nope` did not appear verbatim in /memories/n.md."
        );
        assert_eq!(
            replace_once(&p, "a\nb a\na", "a", "x").unwrap_err(),
            "No replacement was performed. Multiple occurrences of old_str `a` in lines: 1, 2, 3. Please ensure it is unique"
        );
        // Overlapping places are listed, as the SDK finds them.
        assert_eq!(
            replace_once(&p, "aaaa", "aa", "x").unwrap_err(),
            "No replacement was performed. Multiple occurrences of old_str `aa` in lines: 1, 1, 1. Please ensure it is unique"
        );
        assert_eq!(
            replace_once(&p, "é\néé\n", "é", "x").unwrap_err(),
            "No replacement was performed. Multiple occurrences of old_str `é` in lines: 1, 2, 2. Please ensure it is unique"
        );
        // At the top, the snippet starts at line 1.
        let (_, answer) = replace_once(&p, "x\ny", "x", "z").unwrap();
        assert!(answer.ends_with(":\n     1\tz\n     2\ty"), "{answer}");
    }

    #[test]
    fn overlapping_starts_are_every_place_a_text_starts() {
        // Each against every char position checked by hand.
        for (text, needle) in [
            ("aaaa", "aa"),
            ("abababab", "abab"),
            ("aabaabaaab", "aab"),
            ("abcabdabcabc", "abcab"),
            ("ééaé", "é"),
            ("x", "xy"),
            ("", "a"),
        ] {
            let naive: Vec<usize> = text
                .char_indices()
                .filter(|(at, _)| text[*at..].starts_with(needle))
                .map(|(at, _)| at)
                .collect();
            assert_eq!(overlapping_starts(text, needle), naive, "{needle} in {text}");
        }
        let lines: Vec<usize> = line_of_each("a\n\nb a\n", &[0, 3, 5]).collect();
        assert_eq!(lines, [1, 3, 3]);
    }

    #[test]
    fn many_overlapping_occurrences_take_linear_time() {
        // A long needle repeated through the text, and a newline at every
        // place: a check that rescans per place would take minutes here.
        let p = at("/memories/n.md");
        let text = "a".repeat(200_000);
        let needle = "a".repeat(100_000);
        assert_eq!(overlapping_starts(&text, &needle).len(), 100_001);
        let lines = "\n".repeat(200_000);
        let refused = replace_once(&p, &lines, "\n", "b").unwrap_err();
        assert!(
            refused.ends_with("199999, 200000. Please ensure it is unique"),
            "{}",
            &refused[refused.len() - 80..]
        );
    }

    #[test]
    fn insert_adds_lines_after_a_line() {
        let p = at("/memories/n.md");
        assert_eq!(
            insert_lines(&p, "a\nb\n", 0, "top\n").unwrap(),
            ("top\na\nb\n".to_owned(), "The file /memories/n.md has been edited.".to_owned())
        );
        assert_eq!(insert_lines(&p, "a\nb", 2, "end").unwrap().0, "a\nb\nend\n");
        assert_eq!(insert_lines(&p, "a\nb", 1, "x\ny").unwrap().0, "a\nx\ny\nb\n");
        assert_eq!(insert_lines(&p, "", 0, "first").unwrap().0, "first\n");
        assert_eq!(
            insert_lines(&p, "a\nb\n", 3, "x").unwrap_err(),
            "Invalid `insert_line` parameter: 3. It should be within the range [0, 2]."
        );
        assert!(insert_lines(&p, "a", -1, "x").is_err());
    }
    #[test]
    fn a_precondition_names_the_changed_file() {
        let p = target("/memories/a.md").unwrap();
        let q = target("/memories/b.md").unwrap();
        let view = Request::View { path: p.clone(), range: Ok(None) };
        assert_eq!(view.changed_file(), None);
        let rename = Request::Rename { from: p.clone(), to: q };
        assert_eq!(rename.changed_file(), Some(&p));
    }

    #[test]
    fn a_precondition_is_checked_against_the_file() {
        let by_version = checked_precondition(Some(2), None).unwrap();
        assert!(precondition_conflict("f", &by_version, Some((2, "x"))).is_none());
        let stale = precondition_conflict("f", &by_version, Some((3, "x"))).unwrap();
        assert_eq!(stale.kind, crate::ErrorKind::VersionConflict);
        assert_eq!(stale.message, "f is at version 3, not 2");
        let hash = crate::versions::sha256_hex("x");
        let by_hash = checked_precondition(None, Some(&hash.to_ascii_uppercase())).unwrap();
        assert!(precondition_conflict("f", &by_hash, Some((7, "x"))).is_none());
        assert_eq!(
            precondition_conflict("f", &by_hash, Some((7, "y"))).unwrap().message,
            "f has other content, at version 7"
        );
        assert_eq!(precondition_conflict("f", &by_hash, None).unwrap().message, "f does not exist");
        assert!(checked_precondition(Some(-1), None).is_err());
        assert!(checked_precondition(None, Some("abc")).is_err());
    }
}
