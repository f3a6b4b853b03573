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
use crate::{Error, Result};

/// The keys an import puts its items under instead of the line's own.
#[derive(Debug, Default, Clone, Copy)]
pub struct Renames<'a> {
    pub session_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub owner: Option<&'a str>,
    pub scope: Option<&'a str>,
}

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
    Node(Node),
    File(File),
    Directory(Directory),
}

/// The kinds a line may have, as its `kind` field names them.
pub const KINDS: [&str; 7] = [
    "session",
    "kv",
    "part",
    "message",
    "node",
    "file",
    "directory",
];

impl Item {
    /// The kind as a line names it.
    pub fn kind(&self) -> &'static str {
        match self {
            Item::Session(_) => "session",
            Item::Entry(_) => "kv",
            Item::Part(_) => "part",
            Item::Message(_) => "message",
            Item::Node(_) => "node",
            Item::File(_) => "file",
            Item::Directory(_) => "directory",
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

fn check_version(what: &str, version: i64) -> Result<()> {
    if version < 1 {
        return Err(Error::invalid(format!("{what} must be 1 or more")));
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
            check_version("seq", m.seq)?;
            if !m.metadata.is_object() {
                return Err(Error::invalid("metadata must be a JSON object"));
            }
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
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let renames = Renames {
            session_id: Some("s2"),
            owner: Some("o2"),
            ..Renames::default()
        };
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
}
