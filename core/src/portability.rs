//! The lines of an export, as import reads them: one JSON object per item,
//! with its kind, its key, its columns by their names and the versions kept
//! of it. A line is read whole or refused whole: every field it must have,
//! of its type, and no field it may not have.
//!
//! Timestamps and intervals stay text here; the database reads them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::args::check_id;
use crate::versions;
use crate::{Error, Result};

/// The keys an import puts its items under instead of the line's own.
pub type Renames<'a> = crate::args::Keys<'a>;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    pub session_id: String,
    pub user_id: Option<String>,
    pub project_id: Option<String>,
    pub active_node_id: Option<String>,
    pub metadata: Value,
    pub idle_timeout: Option<String>,
    pub created_at: String,
    pub last_activity_at: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub session_id: String,
    pub key: String,
    pub value: Value,
    pub version: i32,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    pub versions: Vec<EntryVersion>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EntryVersion {
    pub version: i32,
    pub value: Value,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    pub replaced_at: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Part {
    pub session_id: String,
    pub node_id: Option<String>,
    pub part: String,
    pub value: Value,
    pub version: i32,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub session_id: String,
    pub node_id: Option<String>,
    pub seq: i64,
    pub keep: i32,
    pub role: String,
    pub content: String,
    pub metadata: Value,
    pub created_at: String,
}

/// Where a session's numbering of messages stands when it is past the
/// newest message the session holds (newer ones were popped or cleared,
/// or a tool result without its call was not stored): its next append
/// takes `last_seq + 1`, after an import too.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageSeq {
    pub session_id: String,
    pub last_seq: i64,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub owner: String,
    pub node_id: String,
    pub title: String,
    pub description: String,
    pub body: String,
    pub links: Vec<String>,
    pub version: i32,
    pub revision: i32,
    pub created_at: String,
    pub updated_at: String,
    pub versions: Vec<NodeVersion>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NodeVersion {
    pub version: i32,
    pub title: String,
    pub description: String,
    pub body: String,
    pub links: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
    pub change_description: String,
    pub saved_at: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub scope: String,
    pub path: String,
    pub content: String,
    pub version: i32,
    pub created_at: String,
    pub updated_at: String,
    pub versions: Vec<FileVersion>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileVersion {
    pub version: i32,
    pub content: String,
    pub created_at: String,
    pub updated_at: String,
    pub replaced_at: String,
}

/// Versions kept of a key-value entry: of one that is gone (deleted, or
/// expired), which `kv_restore` can still bring back, or of one whose
/// versions are too many for its own line (an export puts about 16 MB of
/// kept versions on a line at most).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryHistory {
    pub session_id: String,
    pub key: String,
    pub versions: Vec<EntryVersion>,
}

/// Versions kept of a memory file: of one that was deleted, or of one
/// whose versions are too many for its own line.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileHistory {
    pub scope: String,
    pub path: String,
    pub versions: Vec<FileVersion>,
}

/// Versions of a graph node too many for its own line, which an export
/// puts on lines of their own after it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeHistory {
    pub owner: String,
    pub node_id: String,
    pub versions: Vec<NodeVersion>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Directory {
    pub scope: String,
    pub path: String,
}

/// What an import did with a line it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The item was written.
    Imported,
    /// The item was there already, as the line has it.
    Unchanged,
    /// The item expired since it was exported: nothing to write.
    Expired,
}

impl Outcome {
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Imported => "imported",
            Outcome::Unchanged => "unchanged",
            Outcome::Expired => "expired",
        }
    }
}

/// One line of an export.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Session(Session),
    Entry(Entry),
    Part(Part),
    Message(Message),
    MessageSeq(MessageSeq),
    Node(Node),
    File(File),
    Directory(Directory),
    EntryHistory(EntryHistory),
    FileHistory(FileHistory),
    NodeHistory(NodeHistory),
}

/// The kinds a line may have, as its `kind` field names them.
pub const KINDS: [&str; 11] = [
    "session",
    "kv",
    "part",
    "message",
    "message_seq",
    "node",
    "file",
    "directory",
    "kv_history",
    "file_history",
    "node_history",
];

impl Item {
    /// The kind as a line names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Session(_) => "session",
            Item::Entry(_) => "kv",
            Item::Part(_) => "part",
            Item::Message(_) => "message",
            Item::MessageSeq(_) => "message_seq",
            Item::Node(_) => "node",
            Item::File(_) => "file",
            Item::Directory(_) => "directory",
            Item::EntryHistory(_) => "kv_history",
            Item::FileHistory(_) => "file_history",
            Item::NodeHistory(_) => "node_history",
        }
    }
}

/// The kind a line names, when it names one: to report it with a refusal
/// of the rest of the line.
pub fn kind_of(line: &str) -> Option<&'static str> {
    let value: Value = serde_json::from_str(line).ok()?;
    let kind = value.get("kind")?.as_str()?;
    KINDS.iter().find(|k| **k == kind).copied()
}

fn fields<T: DeserializeOwned>(kind: &str, object: Value) -> Result<T> {
    serde_json::from_value(object).map_err(|e| Error::invalid(format!("{kind} line: {e}")))
}

/// Read one line, with its keys renamed as `renames` says. Checks the
/// line's shape and every key (ids as the write functions check them,
/// versions from 1); the rules of each kind's content are the write
/// functions' own, applied when the item is written.
pub fn parse_line(line: &str, renames: &Renames<'_>) -> Result<Item> {
    let value: Value = serde_json::from_str(line.trim_end())
        .map_err(|e| Error::invalid(format!("line is not one JSON value: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(Error::invalid("line is not a JSON object"));
    };
    let kind = match object.remove("kind") {
        Some(Value::String(kind)) => kind,
        Some(_) => return Err(Error::invalid("kind must be a string")),
        None => return Err(Error::invalid("line has no kind")),
    };
    check_finite_times(&object)?;
    let object = Value::Object(object);
    let rename = |key: &mut String, to: Option<&str>| {
        if let Some(to) = to {
            *key = to.to_owned();
        }
    };
    let item = match kind.as_str() {
        "session" => {
            let mut session: Session = fields(&kind, object)?;
            rename(&mut session.session_id, renames.session_id);
            if let Some(user) = renames.user_id {
                session.user_id = Some(user.to_owned());
            }
            Item::Session(session)
        }
        "kv" => {
            let mut entry: Entry = fields(&kind, object)?;
            rename(&mut entry.session_id, renames.session_id);
            Item::Entry(entry)
        }
        "part" => {
            let mut part: Part = fields(&kind, object)?;
            rename(&mut part.session_id, renames.session_id);
            Item::Part(part)
        }
        "message" => {
            let mut message: Message = fields(&kind, object)?;
            rename(&mut message.session_id, renames.session_id);
            Item::Message(message)
        }
        "message_seq" => {
            let mut numbering: MessageSeq = fields(&kind, object)?;
            rename(&mut numbering.session_id, renames.session_id);
            Item::MessageSeq(numbering)
        }
        "node" => {
            let mut node: Node = fields(&kind, object)?;
            rename(&mut node.owner, renames.owner);
            Item::Node(node)
        }
        "file" => {
            let mut file: File = fields(&kind, object)?;
            rename(&mut file.scope, renames.scope);
            Item::File(file)
        }
        "directory" => {
            let mut directory: Directory = fields(&kind, object)?;
            rename(&mut directory.scope, renames.scope);
            Item::Directory(directory)
        }
        "kv_history" => {
            let mut history: EntryHistory = fields(&kind, object)?;
            rename(&mut history.session_id, renames.session_id);
            Item::EntryHistory(history)
        }
        "file_history" => {
            let mut history: FileHistory = fields(&kind, object)?;
            rename(&mut history.scope, renames.scope);
            Item::FileHistory(history)
        }
        "node_history" => {
            let mut history: NodeHistory = fields(&kind, object)?;
            rename(&mut history.owner, renames.owner);
            Item::NodeHistory(history)
        }
        other => {
            return Err(Error::invalid(format!(
                "unknown kind {}: a line is one of {}",
                crate::error::quoted(other),
                KINDS.join(", ")
            )));
        }
    };
    check_keys(&item)?;
    Ok(item)
}

/// The times of a line (its `…_at` fields and its kept versions') are
/// finite: no write stores an infinite time, and one in a session's
/// creation made every read of the tenant's session statistics fail.
fn check_finite_times(object: &serde_json::Map<String, Value>) -> Result<()> {
    let times = |fields: &serde_json::Map<String, Value>| -> Result<()> {
        for (name, value) in fields {
            if let (true, Some(text)) = (name.ends_with("_at"), value.as_str()) {
                // PostgreSQL reads "infinity" with a sign, a time zone and
                // spaces around it.
                if text.to_ascii_lowercase().contains("infinity") {
                    return Err(Error::invalid(format!(
                        "{name} must be a finite time, not {}",
                        crate::error::quoted(text)
                    )));
                }
            }
        }
        Ok(())
    };
    times(object)?;
    if let Some(Value::Array(versions)) = object.get("versions") {
        for version in versions.iter().filter_map(Value::as_object) {
            times(version)?;
        }
    }
    Ok(())
}

fn check_version(what: &str, version: i64) -> Result<()> {
    check_number(what, version, versions::MOST_IMPORTED.into())
}

/// A version, revision or seq: from 1 to `most`, so that writes after the
/// import can still count up.
fn check_number(what: &str, number: i64, most: i64) -> Result<()> {
    if number < 1 {
        return Err(Error::invalid(format!("{what} must be 1 or more")));
    }
    if number > most {
        return Err(Error::invalid(format!("{what} must be at most {most}")));
    }
    Ok(())
}

/// Kept versions: each from 1, each older than the item's `current`.
fn check_kept(kept: impl Iterator<Item = i32>, current: i32, item: &str) -> Result<()> {
    for version in kept {
        check_version("a kept version", version.into())?;
        if version >= current {
            return Err(Error::invalid(format!(
                "a kept version must be older than the {item}'s version"
            )));
        }
    }
    Ok(())
}

/// The keys and version numbers of an item, as the write functions check
/// theirs.
fn check_keys(item: &Item) -> Result<()> {
    match item {
        Item::Session(s) => {
            check_id("session_id", Some(&s.session_id))?;
            if let Some(user) = &s.user_id {
                check_id("user_id", Some(user))?;
            }
            if !s.metadata.is_object() {
                return Err(Error::invalid("metadata must be a JSON object"));
            }
        }
        Item::Entry(e) => {
            check_id("session_id", Some(&e.session_id))?;
            check_id("key", Some(&e.key))?;
            check_version("version", e.version.into())?;
            check_kept(e.versions.iter().map(|v| v.version), e.version, "entry")?;
        }
        Item::Part(p) => {
            check_id("session_id", Some(&p.session_id))?;
            if let Some(node) = &p.node_id {
                check_id("node_id", Some(node))?;
            }
            check_version("version", p.version.into())?;
        }
        Item::Message(m) => {
            check_id("session_id", Some(&m.session_id))?;
            if let Some(node) = &m.node_id {
                check_id("node_id", Some(node))?;
            }
            check_number("seq", m.seq, versions::MOST_IMPORTED_SEQ)?;
            if !m.metadata.is_object() {
                return Err(Error::invalid("metadata must be a JSON object"));
            }
        }
        Item::MessageSeq(n) => {
            check_id("session_id", Some(&n.session_id))?;
            check_number("last_seq", n.last_seq, versions::MOST_IMPORTED_SEQ)?;
        }
        Item::Node(n) => {
            check_id("owner", Some(&n.owner))?;
            check_id("node_id", Some(&n.node_id))?;
            check_version("version", n.version.into())?;
            check_version("revision", n.revision.into())?;
            check_kept(n.versions.iter().map(|v| v.version), n.version, "node")?;
        }
        Item::File(f) => {
            check_id("scope", Some(&f.scope))?;
            check_version("version", f.version.into())?;
            check_kept(f.versions.iter().map(|v| v.version), f.version, "file")?;
        }
        Item::Directory(d) => {
            check_id("scope", Some(&d.scope))?;
        }
        Item::EntryHistory(h) => {
            check_id("session_id", Some(&h.session_id))?;
            check_id("key", Some(&h.key))?;
            check_history(h.versions.iter().map(|v| v.version))?;
        }
        Item::FileHistory(h) => {
            check_id("scope", Some(&h.scope))?;
            check_history(h.versions.iter().map(|v| v.version))?;
        }
        Item::NodeHistory(h) => {
            check_id("owner", Some(&h.owner))?;
            check_id("node_id", Some(&h.node_id))?;
            check_history(h.versions.iter().map(|v| v.version))?;
        }
    }
    Ok(())
}

/// The versions of a history line: at least one, each number once.
fn check_history(versions: impl Iterator<Item = i32>) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for version in versions {
        check_version("a kept version", version.into())?;
        if !seen.insert(version) {
            return Err(Error::invalid(format!("kept version {version} is there twice")));
        }
    }
    if seen.is_empty() {
        return Err(Error::invalid("a history line keeps at least one version"));
    }
    Ok(())
}

/// A run of lines that import can write together: consecutive lines of
/// one kind and one place, which one statement per table can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Entries of one session, no key twice.
    Entries,
    /// Plain messages (no tool call or result, no idempotency key) of one
    /// session's thread with one keep, each seq one more than the line
    /// before.
    Messages,
    /// Files of one scope, no path twice and none under another.
    Files,
    /// Other lines that read, of any kinds, each written as it would be
    /// alone but all in one subtransaction.
    Lines,
}

/// Where a line's run may continue: lines in one run have equal places.
#[derive(PartialEq)]
enum Place<'a> {
    Entries(&'a str),
    Messages(&'a str, Option<&'a str>, i32),
    Files(&'a str),
}

fn place(item: &Item) -> Option<Place<'_>> {
    match item {
        Item::Entry(e) => Some(Place::Entries(&e.session_id)),
        Item::Message(m) if is_plain(m) => {
            Some(Place::Messages(&m.session_id, m.node_id.as_deref(), m.keep))
        }
        Item::File(f) => Some(Place::Files(&f.scope)),
        _ => None,
    }
}

/// A message an append can write with others: no tool call or result, no
/// idempotency key (see `messages::BatchMessage::is_plain`).
fn is_plain(m: &Message) -> bool {
    m.role != "tool"
        && m.metadata.get("tool_calls").is_none()
        && m.metadata.get("idempotency_key").is_none()
}

/// Split lines, in order, into runs `(kind, start..end)` of two or more
/// lines that can be written together: runs of entries or of messages,
/// and between them runs of the other lines. A line that did not parse
/// ends a run and is in none; so is a line alone between two runs.
pub fn runs<E>(items: &[std::result::Result<Item, E>]) -> Vec<(RunKind, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut lines_from = 0;
    for (kind, range) in runs_of_one_place(items) {
        lines_runs(items, lines_from..range.start, &mut found);
        lines_from = range.end;
        found.push((kind, range));
    }
    lines_runs(items, lines_from..items.len(), &mut found);
    found
}

/// The runs of lines that read within `within`, two or more long.
fn lines_runs<E>(
    items: &[std::result::Result<Item, E>], within: std::ops::Range<usize>,
    found: &mut Vec<(RunKind, std::ops::Range<usize>)>,
) {
    let mut start = within.start;
    while start < within.end {
        let end = (start..within.end).find(|&at| items[at].is_err()).unwrap_or(within.end);
        if end - start >= 2 {
            found.push((RunKind::Lines, start..end));
        }
        start = end + 1;
    }
}

fn runs_of_one_place<E>(
    items: &[std::result::Result<Item, E>],
) -> Vec<(RunKind, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let mut end = start + 1;
        if let Ok(first) = &items[start]
            && let Some(at) = place(first)
        {
            // An entry's key, or a file's path with the directories above
            // it: what no later line of the run may have again.
            let mut taken = std::collections::HashSet::new();
            let mut take = |item: &'_ Item| -> bool {
                match item {
                    Item::Entry(e) => taken.insert(e.key.clone()),
                    Item::File(f) => {
                        let above = crate::files::memory_tool::ancestors(&f.path);
                        let free = !taken.contains(&f.path)
                            && !taken.contains(&format!("{}/", f.path))
                            && above.iter().all(|dir| !taken.contains(*dir));
                        taken.insert(f.path.clone());
                        taken.extend(above.iter().map(|dir| format!("{dir}/")));
                        free
                    }
                    _ => true,
                }
            };
            take(first);
            while let Some(Ok(next)) = items.get(end) {
                let continues = place(next).is_some_and(|p| p == at)
                    && match (&items[end - 1], next) {
                        (Ok(Item::Message(before)), Item::Message(m)) => {
                            before.seq.checked_add(1) == Some(m.seq)
                        }
                        (_, item) => take(item),
                    };
                if !continues {
                    break;
                }
                end += 1;
            }
            if end - start >= 2 {
                let kind = match first {
                    Item::Entry(_) => RunKind::Entries,
                    Item::File(_) => RunKind::Files,
                    _ => RunKind::Messages,
                };
                found.push((kind, start..end));
            }
        }
        start = end;
    }
    found
}

/// Whether a file line may go where no file is but versions of a deleted
/// one are kept (`kept`: their numbers and contents): each kept version
/// must hold the line's content of its number, the file's own or a kept
/// one's, or be older than the file and of a number the line does not
/// keep. Then one number still names one content (a deleted file's last
/// version is kept, so its export agrees); otherwise the line is refused
/// as an item there with other content.
pub fn kept_versions_agree(kept: &[(i32, &str)], file: &File) -> bool {
    kept.iter().all(|&(version, content)| {
        if version == file.version {
            return content == file.content;
        }
        version < file.version
            && file
                .versions
                .iter()
                .find(|v| v.version == version)
                .is_none_or(|v| v.content == content)
    })
}

/// Whether kept versions numbered `kept` are all within `retention`
/// (agent_memory.history_retention) of the newest of them: numbered
/// above the newest less the retention, as a write keeps an item's
/// versions. No version is within retention 0; none kept is within any.
pub fn within_retention(retention: i32, kept: impl IntoIterator<Item = i32>) -> bool {
    let kept: Vec<i32> = kept.into_iter().collect();
    let Some(&newest) = kept.iter().max() else {
        return true;
    };
    let floor = i64::from(newest) - i64::from(retention.max(0));
    kept.iter().all(|&version| i64::from(version) > floor)
}

/// Refuse what would leave `item` with kept versions numbered `kept` that
/// a write under `retention` would not keep (see `within_retention`):
/// import takes no more history than writes keep, and drops none of a
/// line silently.
pub fn check_retention(
    retention: i32, kept: impl IntoIterator<Item = i32>, item: &str,
) -> Result<()> {
    let kept: Vec<i32> = kept.into_iter().collect();
    if within_retention(retention, kept.iter().copied()) {
        return Ok(());
    }
    let oldest = kept.iter().copied().min().unwrap_or_default();
    let newest = kept.iter().copied().max().unwrap_or_default();
    let needed = i64::from(newest) - i64::from(oldest) + 1;
    let versions = if oldest == newest {
        format!("version {newest}")
    } else {
        format!("versions {oldest} to {newest}")
    };
    Err(Error::invalid(format!(
        "{item} would keep {versions}, more than agent_memory.history_retention ({retention}) keeps: raise it to {needed} or more for the import"
    ))
    .with_hint(format!(
        "SET agent_memory.history_retention = {needed} while importing; nothing of the line was imported."
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_versions_go_within_the_retention_of_the_newest() {
        // Nothing kept is within any retention, 0 included.
        assert!(within_retention(0, []));
        assert!(within_retention(3, []));
        // Retention 0 keeps no version.
        assert!(!within_retention(0, [1]));
        // Numbered within the retention of the newest, gaps allowed.
        assert!(within_retention(3, [1, 2, 3]));
        assert!(within_retention(3, [3, 1]));
        assert!(within_retention(2, [4, 5]));
        assert!(within_retention(1, [7]));
        // One too old for the retention, however few are kept.
        assert!(!within_retention(2, [1, 2, 3]));
        assert!(!within_retention(2, [1, 3]));
        assert!(!within_retention(1, [6, 7]));
        // The largest numbers and retention do not overflow.
        assert!(within_retention(1000, [i32::MAX, i32::MAX - 999]));
        assert!(!within_retention(1000, [i32::MAX, i32::MAX - 1000]));
        assert!(within_retention(1000, [1]));
    }

    #[test]
    fn history_past_the_retention_is_refused_with_what_to_raise() {
        assert!(check_retention(3, [1, 2, 3], "entry").is_ok());
        let error = check_retention(2, [1, 2, 3], "entry \"k\"").unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParameter);
        assert_eq!(error.kind.sqlstate(), "22023");
        assert!(error.message.starts_with("entry \"k\" would keep versions 1 to 3"));
        assert!(error.message.contains("raise it to 3 or more"));
        assert!(error.hint.unwrap().contains("SET agent_memory.history_retention = 3"));
        let error = check_retention(0, [4], "file").unwrap_err();
        assert_eq!(
            error.message,
            "file would keep version 4, more than agent_memory.history_retention (0) keeps: raise it to 1 or more for the import"
        );
    }

    #[test]
    fn a_file_goes_where_kept_versions_agree_with_it() {
        let version = |version: i32, content: &str| FileVersion {
            version,
            content: content.into(),
            created_at: String::new(),
            updated_at: String::new(),
            replaced_at: String::new(),
        };
        let file = File {
            scope: "s".into(),
            path: "/x".into(),
            content: "NEW3".into(),
            version: 3,
            created_at: String::new(),
            updated_at: String::new(),
            versions: vec![version(1, "NEW1"), version(2, "NEW2")],
        };
        assert!(kept_versions_agree(&[], &file));
        // The same history, or part of it: an export imported again.
        assert!(kept_versions_agree(&[(1, "NEW1"), (2, "NEW2")], &file));
        assert!(kept_versions_agree(&[(2, "NEW2")], &file));
        // Another content under a number the line keeps.
        assert!(!kept_versions_agree(&[(1, "OLD1")], &file));
        // A deleted file's history, its last version kept: its export
        // goes back.
        assert!(kept_versions_agree(&[(1, "NEW1"), (2, "NEW2"), (3, "NEW3")], &file));
        // A kept version as new as the line's file with other content, or
        // newer.
        assert!(!kept_versions_agree(&[(3, "OLD3")], &file));
        assert!(!kept_versions_agree(&[(1, "NEW1"), (5, "OLD5")], &file));
    }
    use crate::ErrorKind;

    const ENTRY: &str = r#"{"kind": "kv", "session_id": "s1", "key": "goal", "value": {"a": 1},
        "version": 3, "created_at": "2026-01-01 00:00:00+00", "updated_at": "2026-01-02 00:00:00+00",
        "expires_at": "2027-01-01 00:00:00+00",
        "versions": [{"version": 2, "value": "old", "created_at": "2026-01-01 00:00:00+00",
                      "updated_at": "2026-01-01 00:00:00+00", "expires_at": "2027-01-01 00:00:00+00",
                      "replaced_at": "2026-01-02 00:00:00+00"}]}"#;

    fn refused(line: &str) -> String {
        let error = parse_line(line, &Renames::default()).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParameter);
        error.message
    }

    #[test]
    fn reads_an_entry_with_its_versions() {
        let Item::Entry(entry) = parse_line(ENTRY, &Renames::default()).unwrap() else {
            panic!("not an entry");
        };
        assert_eq!(entry.key, "goal");
        assert_eq!(entry.version, 3);
        assert_eq!(entry.value, serde_json::json!({"a": 1}));
        assert_eq!(entry.versions.len(), 1);
        assert_eq!(entry.versions[0].value, serde_json::json!("old"));
    }

    #[test]
    fn renames_only_the_key_of_the_kind() {
        let renames = Renames { session_id: Some("s2"), owner: Some("o2"), ..Renames::default() };
        let Item::Entry(entry) = parse_line(ENTRY, &renames).unwrap() else {
            panic!("not an entry");
        };
        assert_eq!(entry.session_id, "s2");
        let line = r#"{"kind": "directory", "scope": "a", "path": "/x"}"#;
        let Item::Directory(dir) = parse_line(line, &renames).unwrap() else {
            panic!("not a directory");
        };
        assert_eq!(dir.scope, "a");
    }

    #[test]
    fn refuses_truncated_lines_and_wrong_kinds() {
        assert!(refused(&ENTRY[..40]).contains("not one JSON value"));
        assert!(refused("[1]").contains("not a JSON object"));
        assert!(refused(r#"{"key": "x"}"#).contains("no kind"));
        assert!(refused(r#"{"kind": 3}"#).contains("must be a string"));
        assert!(refused(r#"{"kind": "graph"}"#).contains("unknown kind \"graph\""));
        // A line of another kind's fields.
        let as_file = ENTRY.replacen(r#""kind": "kv""#, r#""kind": "file""#, 1);
        assert!(refused(&as_file).contains("file line"));
    }

    #[test]
    fn refuses_wrong_types_and_unknown_fields() {
        let text_version = ENTRY.replacen(r#""version": 3"#, r#""version": "3""#, 1);
        assert!(refused(&text_version).contains("kv line"));
        let extra = ENTRY.replacen(r#""key": "goal""#, r#""key": "goal", "words": 2"#, 1);
        assert!(refused(&extra).contains("unknown field"));
        let missing = ENTRY.replacen(r#""key": "goal","#, "", 1);
        assert!(refused(&missing).contains("missing field `key`"));
    }

    #[test]
    fn refuses_empty_keys_and_bad_versions() {
        let empty = ENTRY.replacen(r#""key": "goal""#, r#""key": """#, 1);
        assert!(refused(&empty).contains("key must not be empty"));
        let zero = ENTRY.replacen(r#""version": 3"#, r#""version": 0"#, 1);
        assert!(refused(&zero).contains("version must be 1 or more"));
        // Writes after an import count up from its version: one at the
        // integer's limit could never be written again.
        let top = ENTRY.replacen(r#""version": 3"#, r#""version": 2147483647"#, 1);
        assert!(refused(&top).contains("version must be at most 1000000000"));
        let newer = ENTRY.replacen(r#""version": 2"#, r#""version": 7"#, 1);
        assert!(refused(&newer).contains("older than the entry's version"));
        let line = r#"{"kind": "message", "session_id": "s", "node_id": null, "seq": 0, "keep": 5,
            "role": "user", "content": "hi", "metadata": {}, "created_at": "2026-01-01"}"#;
        assert!(refused(line).contains("seq must be 1 or more"));
    }

    #[test]
    fn names_the_kind_of_a_refused_line() {
        assert_eq!(kind_of(r#"{"kind": "node", "x": 1}"#), Some("node"));
        assert_eq!(kind_of(r#"{"kind": "graph"}"#), None);
        assert_eq!(kind_of("{\"kind\": \"kv\""), None);
    }
    fn entry(session: &str, key: &str) -> Item {
        let mut line: Value = serde_json::from_str(ENTRY).unwrap();
        line["session_id"] = session.into();
        line["key"] = key.into();
        parse_line(&line.to_string(), &Renames::default()).unwrap()
    }

    fn message(session: &str, seq: i64, keep: i32) -> Item {
        Item::Message(Message {
            session_id: session.to_string(),
            node_id: None,
            seq,
            keep,
            role: "user".to_string(),
            content: "hello".to_string(),
            metadata: serde_json::json!({}),
            created_at: "2026-01-01 00:00:00+00".to_string(),
        })
    }

    #[test]
    fn runs_group_consecutive_lines_of_one_place() {
        let items: Vec<std::result::Result<Item, ()>> = vec![
            Ok(entry("s1", "a")),
            Ok(entry("s1", "b")),
            Ok(entry("s1", "c")),
            Ok(message("s1", 1, 50)),
            Ok(message("s1", 2, 50)),
            Ok(entry("s2", "a")),
            Ok(message("s1", 3, 50)),
        ];
        assert_eq!(
            runs(&items),
            vec![(RunKind::Entries, 0..3), (RunKind::Messages, 3..5), (RunKind::Lines, 5..7)]
        );
    }

    #[test]
    fn runs_end_where_a_line_could_not_join() {
        let items: Vec<std::result::Result<Item, ()>> = vec![
            // A key twice: the second starts a new run.
            Ok(entry("s1", "a")),
            Ok(entry("s1", "b")),
            Ok(entry("s1", "a")),
            Ok(entry("s1", "c")),
            // Another session, a refused line, a seq gap, another keep.
            Ok(entry("s2", "a")),
            Err(()),
            Ok(message("s1", 1, 50)),
            Ok(message("s1", 3, 50)),
            Ok(message("s1", 4, 20)),
            Ok(message("s1", 5, 20)),
            Ok(message("s1", 6, 20)),
        ];
        assert_eq!(
            runs(&items),
            vec![
                (RunKind::Entries, 0..2),
                (RunKind::Entries, 2..4),
                // Line 4 is alone before the refused line 5.
                (RunKind::Lines, 6..8),
                (RunKind::Messages, 8..11),
            ]
        );
    }

    #[test]
    fn a_tool_call_or_result_ends_a_run_of_messages() {
        let mut call = message("s1", 3, 50);
        if let Item::Message(m) = &mut call {
            m.metadata = serde_json::json!({"tool_calls": [{"id": "c1"}]});
        }
        let mut result = message("s1", 4, 50);
        if let Item::Message(m) = &mut result {
            m.role = "tool".to_string();
        }
        let items: Vec<std::result::Result<Item, ()>> = vec![
            Ok(message("s1", 1, 50)),
            Ok(message("s1", 2, 50)),
            Ok(call),
            Ok(result),
            Ok(message("s1", 5, 50)),
            Ok(message("s1", 6, 50)),
        ];
        assert_eq!(
            runs(&items),
            vec![(RunKind::Messages, 0..2), (RunKind::Lines, 2..4), (RunKind::Messages, 4..6)]
        );
    }

    fn file(scope: &str, path: &str) -> Item {
        Item::File(File {
            scope: scope.to_string(),
            path: path.to_string(),
            content: "x".to_string(),
            version: 1,
            created_at: "2026-01-01 00:00:00+00".to_string(),
            updated_at: "2026-01-01 00:00:00+00".to_string(),
            versions: Vec::new(),
        })
    }

    #[test]
    fn a_run_of_files_has_no_path_twice_or_under_another() {
        let items: Vec<std::result::Result<Item, ()>> = vec![
            Ok(file("s", "/a/b.md")),
            Ok(file("s", "/a/c.md")),
            // A file where the run has a directory: a new run.
            Ok(file("s", "/a")),
            Ok(file("s", "/d.md")),
            // A file under a file of the run: a new run.
            Ok(file("s", "/d.md/e.md")),
            Ok(file("s", "/f.md")),
            // The same path again, then another scope.
            Ok(file("s", "/f.md")),
            Ok(file("t", "/f.md")),
        ];
        assert_eq!(
            runs(&items),
            vec![
                (RunKind::Files, 0..2),
                (RunKind::Files, 2..4),
                (RunKind::Files, 4..6),
                (RunKind::Lines, 6..8),
            ]
        );
    }

    #[test]
    fn reads_where_a_sessions_numbering_of_messages_stands() {
        let line = r#"{"kind": "message_seq", "session_id": "s1", "last_seq": 12}"#;
        let renames = Renames { session_id: Some("s2"), ..Renames::default() };
        assert_eq!(
            parse_line(line, &renames).unwrap(),
            Item::MessageSeq(MessageSeq { session_id: "s2".into(), last_seq: 12 })
        );
        assert_eq!(kind_of(line), Some("message_seq"));
        assert!(refused(&line.replace("12", "0")).contains("last_seq must be 1 or more"));
        assert!(refused(&line.replace("12", "\"12\"")).contains("message_seq line"));
        assert!(refused(&line.replace("}", r#", "seq": 1}"#)).contains("unknown field `seq`"));
        assert!(refused(&line.replace("\"s1\"", "\"\"")).contains("session_id"));
    }

    #[test]
    fn runs_of_other_kinds_are_lines() {
        let session =
            parse_line(r#"{"kind": "directory", "scope": "s", "path": "/a"}"#, &Renames::default())
                .unwrap();
        let items: Vec<std::result::Result<Item, ()>> =
            vec![Ok(session.clone()), Ok(session), Ok(entry("s1", "a"))];
        assert_eq!(runs(&items), vec![(RunKind::Lines, 0..3)]);
        assert_eq!(runs(&items[2..]), vec![]);
    }

    #[test]
    fn infinite_times_are_refused_in_a_line_and_its_versions() {
        let renames = Renames::default();
        let session = r#"{"kind": "session", "session_id": "s", "user_id": "u", "project_id": null,
            "active_node_id": null, "metadata": {}, "idle_timeout": null,
            "created_at": " -Infinity UTC", "last_activity_at": "2026-01-01"}"#;
        let error = parse_line(session, &renames).unwrap_err();
        assert_eq!(error.kind.sqlstate(), "22023");
        assert!(error.message.starts_with("created_at must be a finite time"), "{}", error.message);
        let entry = r#"{"kind": "kv", "session_id": "s", "key": "k", "value": {"created_at": "infinity"},
            "version": 2, "created_at": "2026-01-01", "updated_at": "2026-01-01", "expires_at": "2027-01-01",
            "versions": [{"version": 1, "value": 1, "created_at": "2026-01-01", "updated_at": "2026-01-01",
                          "expires_at": "infinity", "replaced_at": "2026-01-01"}]}"#;
        let error = parse_line(entry, &renames).unwrap_err();
        assert!(error.message.starts_with("expires_at must be"), "{}", error.message);
        // A value's own fields are the user's, not times of the line.
        let fine = entry.replace(r#""expires_at": "infinity""#, r#""expires_at": "2027-01-01""#);
        assert!(parse_line(&fine, &renames).is_ok());
    }

    #[test]
    fn history_lines_keep_one_version_or_more_each_once() {
        let renames = Renames { session_id: Some("copy"), ..Renames::default() };
        let version = |n: i32| {
            format!(
                r#"{{"version": {n}, "value": {n}, "created_at": "2026-01-01", "updated_at": "2026-01-01",
                    "expires_at": "2027-01-01", "replaced_at": "2026-01-02"}}"#
            )
        };
        let line = |versions: &[String]| {
            format!(
                r#"{{"kind": "kv_history", "session_id": "s", "key": "k", "versions": [{}]}}"#,
                versions.join(", ")
            )
        };
        let Item::EntryHistory(history) =
            parse_line(&line(&[version(1), version(3)]), &renames).unwrap()
        else {
            panic!("not a history line");
        };
        assert_eq!(history.session_id, "copy");
        assert_eq!(history.versions.len(), 2);
        for (versions, refusal) in [
            (vec![], "a history line keeps at least one version"),
            (vec![version(2), version(2)], "kept version 2 is there twice"),
            (vec![version(0)], "a kept version must be 1 or more"),
        ] {
            assert_eq!(parse_line(&line(&versions), &renames).unwrap_err().message, refusal);
        }
        let file = r#"{"kind": "file_history", "scope": "s", "path": "/a", "versions": [
            {"version": 1, "content": "x", "created_at": "2026-01-01", "updated_at": "2026-01-01",
             "replaced_at": "2026-01-02"}]}"#;
        assert!(matches!(parse_line(file, &Renames::default()), Ok(Item::FileHistory(_))));
    }

    #[test]
    fn a_node_history_line_takes_the_renamed_owner() {
        let node_version = |n: i32| {
            format!(
                r#"{{"version": {n}, "title": "T", "description": "", "body": "b{n}", "links": [],
                    "created_at": "2026-01-01", "updated_at": "2026-01-01",
                    "change_description": "edit", "saved_at": "2026-01-02"}}"#
            )
        };
        let line = |versions: &[String]| {
            format!(
                r#"{{"kind": "node_history", "owner": "o", "node_id": "n", "versions": [{}]}}"#,
                versions.join(", ")
            )
        };
        let renames = Renames { owner: Some("copy"), ..Renames::default() };
        let Item::NodeHistory(history) =
            parse_line(&line(&[node_version(1), node_version(2)]), &renames).unwrap()
        else {
            panic!("not a node history line");
        };
        assert_eq!((history.owner.as_str(), history.node_id.as_str()), ("copy", "n"));
        assert_eq!(history.versions[1].body, "b2");
        assert_eq!(kind_of(&line(&[])), Some("node_history"));
        assert_eq!(
            parse_line(&line(&[node_version(1), node_version(1)]), &renames).unwrap_err().message,
            "kept version 1 is there twice"
        );
        let no_node = line(&[node_version(1)]).replace(r#""node_id": "n", "#, "");
        assert!(parse_line(&no_node, &renames).is_err());
    }
}
