//! Rules of graph memory: node ids, refs, what counts as a change,
//! appends, generated ids and the file names of an exported folder.
//!
//! A node's refs are its children: the explicit ref list first, then the
//! `[[id]]` wiki links of its body, in order, each id once.

use std::collections::HashSet;

use crate::error::quoted;
use crate::{Error, Result};
use markdown::TimeValue;

/// A graph folder to import, checked whole before anything is written.
pub mod import;
/// Nodes as markdown files with YAML frontmatter.
pub mod markdown;
/// The tree projection of a graph.
pub mod tree;

/// The virtual root as a read shows it: never stored, so no timestamps.
pub fn root_json() -> serde_json::Value {
    serde_json::json!({
        "id": ROOT_ID,
        "title": ROOT_TITLE,
        "description": ROOT_DESCRIPTION,
        "version": 1,
        "createdAt": null,
        "updatedAt": null,
        "refs": [],
        "unresolvedRefs": [],
        "body": ROOT_BODY,
    })
}

/// The virtual root: always present, read-only, never stored.
pub const ROOT_ID: &str = "__root__";

/// Longest node id. Generated ids have [`GENERATED_ID_LEN`] characters.
pub const MAX_ID_LEN: usize = 64;

/// Length of a generated (cuid2-shaped) id.
pub const GENERATED_ID_LEN: usize = 24;

/// The prompt the virtual root shows: what the graph is and how to keep it.
pub const ROOT_TITLE: &str = "Memory Graph";
pub const ROOT_DESCRIPTION: &str = "The root of the memory graph; every other node hangs below it.";
pub const ROOT_BODY: &str = "\
# Memory Graph

This is the root of the memory graph. It is virtual and read-only: every other
document is a node below it.

- Each node holds one piece of lasting knowledge: a preference, a decision, a
  person, a project, a procedure. Keep it short and specific.
- A node's children are the nodes it links to, either in its refs or with
  `[[node id]]` links in its body.
- Create a node under at least one parent; use `__root__` for a new topic.
- Before creating a node, look at the tree: extend an existing node rather
  than writing a second one on the same subject.
- Give a change description when you rewrite a node, so its previous
  version is kept.
";

/// Whether `id` may name a stored node: 1 to 64 ASCII letters, digits, `_` or
/// `-` (safe in a file name and a `[[link]]`), and not the root.
pub fn is_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id != ROOT_ID
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A node id given by the caller for a stored node.
pub fn check_node_id(id: &str) -> Result<()> {
    if id == ROOT_ID {
        return Err(Error::not_allowed("the root node \"__root__\" is read-only")
            .with_detail("the root is virtual: its content comes with the extension"));
    }
    if !is_node_id(id) {
        return Err(Error::invalid(format!("invalid node id {}", quoted(id)))
            .with_detail(format!(
                "a node id has 1 to {MAX_ID_LEN} characters, each an ASCII letter, digit, \"_\" or \"-\""
            )));
    }
    Ok(())
}

/// The owner of a graph: a user or project id, not empty.
pub fn check_owner(owner: &str) -> Result<()> {
    if owner.trim().is_empty() {
        return Err(Error::invalid("owner must not be empty"));
    }
    Ok(())
}

/// The ids linked from a body with `[[id]]`, in order, each once. A link
/// whose text is not a node id (`[[see the notes]]`) is plain text.
pub fn body_links(body: &str) -> Vec<String> {
    let mut links: Vec<String> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut rest = body;
    while let Some(start) = rest.find("[[") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("]]") else { break };
        let inner = &after[..end];
        // "[[a [[b]]": the innermost opening bracket starts the link.
        let inner = match inner.rfind("[[") {
            Some(i) => &inner[i + 2..],
            None => inner,
        };
        let id = inner.trim();
        if is_node_id(id) && seen.insert(id) {
            links.push(id.to_owned());
        }
        rest = &after[end + 2..];
    }
    links
}

/// A node's refs: its explicit refs, then its body's links, each id once.
pub fn merge_refs(explicit: &[String], body: &str) -> Vec<String> {
    let mut refs: Vec<String> = Vec::with_capacity(explicit.len());
    let mut seen: HashSet<String> = HashSet::new();
    for id in explicit.iter().cloned().chain(body_links(body)) {
        if seen.insert(id.clone()) {
            refs.push(id);
        }
    }
    refs
}

/// Explicit refs given by a caller: valid ids, never the root; duplicates
/// are dropped, order kept.
pub fn check_refs(refs: &[String]) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::with_capacity(refs.len());
    let mut seen: HashSet<&str> = HashSet::new();
    for id in refs {
        if id == ROOT_ID {
            return Err(Error::invalid("the root node cannot be a ref")
                .with_detail("every node already hangs below the root"));
        }
        if !is_node_id(id) {
            return Err(Error::invalid(format!("invalid ref {}", quoted(id)))
                .with_detail(format!(
                    "a node id has 1 to {MAX_ID_LEN} characters, each an ASCII letter, digit, \"_\" or \"-\""
                )));
        }
        if seen.insert(id) {
            out.push(id.clone());
        }
    }
    Ok(out)
}

/// The parents of a new node: at least one; the root or node ids, each once.
/// Returns the stored parents (the root changes nothing stored).
pub fn check_parents(parents: &[String], child: Option<&str>) -> Result<Vec<String>> {
    if parents.is_empty() {
        return Err(Error::invalid("a new node needs at least one parent")
            .with_hint("use '__root__' to put it at the top of the graph"));
    }
    let mut stored: Vec<String> = Vec::new();
    // A set, not stored.contains: a list of 100,000 parents took seconds.
    let mut seen: HashSet<&str> = HashSet::new();
    for parent in parents {
        if parent == ROOT_ID {
            continue;
        }
        if !is_node_id(parent) {
            return Err(Error::invalid(format!("invalid parent id {}", quoted(parent))));
        }
        if child == Some(parent.as_str()) {
            return Err(Error::invalid(format!(
                "node {} cannot be its own parent",
                quoted(parent)
            )));
        }
        if seen.insert(parent) {
            stored.push(parent.clone());
        }
    }
    Ok(stored)
}

/// What one node may hold: its title, description and body together at most
/// `bytes` (a change description too, on its own), and at most `refs` refs.
#[derive(Debug, Clone, Copy)]
pub struct NodeLimits {
    pub bytes: usize,
    pub refs: usize,
}

/// A node's content within `limits` (`agent_memory.max_node_bytes` and
/// `agent_memory.max_node_refs`).
pub fn check_node_size(
    content: &Content, change_description: Option<&str>, limits: NodeLimits,
) -> Result<()> {
    let text = content.title.len() + content.description.len() + content.body.len();
    if text > limits.bytes {
        return Err(Error::limit(format!(
            "node of {text} bytes (title, description and body) exceeds the limit of {} bytes",
            limits.bytes
        ))
        .with_hint("raise agent_memory.max_node_bytes, or split the node"));
    }
    if let Some(change) = change_description.filter(|c| c.len() > limits.bytes) {
        return Err(Error::limit(format!(
            "change description of {} bytes exceeds the limit of {} bytes",
            change.len(),
            limits.bytes
        )));
    }
    // Explicit refs alone can exceed the limit: count them before merging.
    let refs =
        if content.links.len() > limits.refs { content.links.len() } else { content.refs().len() };
    if refs > limits.refs {
        return Err(Error::limit(format!(
            "node with {refs} refs exceeds the limit of {} refs",
            limits.refs
        ))
        .with_detail("refs are the node's explicit refs and the links in its body")
        .with_hint("raise agent_memory.max_node_refs, or split the node"));
    }
    Ok(())
}

/// A title: not blank.
pub fn check_title(title: &str) -> Result<()> {
    if title.trim().is_empty() {
        return Err(Error::invalid("title must not be empty"));
    }
    Ok(())
}

/// The fields of a node that make up its meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub title: String,
    pub description: String,
    pub body: String,
    /// The explicit refs (the body's links are derived from the body).
    pub links: Vec<String>,
}

impl Content {
    /// The node's refs: explicit ones, then body links.
    pub fn refs(&self) -> Vec<String> {
        merge_refs(&self.links, &self.body)
    }
}

/// What a write does to a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Nothing differs: nothing is written, `updated_at` included.
    Unchanged,
    /// A change without a change description: updated in place.
    InPlace,
    /// A change with a change description: the previous state becomes an
    /// immutable version and the version number goes up by one.
    Versioned,
}

/// Decide how a write of `new` over `old` is stored. Refs are compared as
/// the node's merged refs, in order.
pub fn write_kind(old: &Content, new: &Content, change_description: Option<&str>) -> WriteKind {
    // The explicit list counts even when the merged refs stay the same (a
    // link moved from the body into the list): it decides what a later
    // body edit keeps.
    let changed = old.title != new.title
        || old.description != new.description
        || old.body != new.body
        || old.links != new.links
        || old.refs() != new.refs();
    match (changed, change_description) {
        (false, _) => WriteKind::Unchanged,
        (true, Some(description)) if !description.trim().is_empty() => WriteKind::Versioned,
        (true, _) => WriteKind::InPlace,
    }
}

/// The body after an append: `addition` goes on a new line unless the body
/// is empty or already ends with one.
pub fn appended_body(body: &str, addition: &str) -> String {
    let mut out = String::with_capacity(body.len() + addition.len() + 1);
    out.push_str(body);
    if !body.is_empty() && !addition.is_empty() && !body.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(addition);
    out
}

/// A generated node id shaped like a cuid2: a lowercase letter, then 23
/// lowercase letters or digits, drawn without bias from `random` bytes
/// (about 119 bits of entropy). `random` is asked for more bytes until
/// the id is complete.
pub fn generate_id(mut random: impl FnMut(&mut [u8])) -> String {
    const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::with_capacity(GENERATED_ID_LEN);
    let mut buffer = [0u8; 32];
    while id.len() < GENERATED_ID_LEN {
        random(&mut buffer);
        for &byte in &buffer {
            // The first character is a letter (26 choices), the rest base36;
            // bytes past the largest multiple are rejected to stay unbiased.
            let choices: u8 = if id.is_empty() { 26 } else { 36 };
            let limit = 256 - (256 % choices as u16);
            if (byte as u16) < limit {
                id.push(ALPHABET[(byte % choices) as usize] as char);
                if id.len() == GENERATED_ID_LEN {
                    break;
                }
            }
        }
    }
    id
}

/// A timestamp of a graph file as text PostgreSQL reads exactly: ISO 8601
/// with a date, a time and a zone (`Z` or an offset), or finite
/// milliseconds since 1970 (what daycare writes). Anything else (`now`,
/// `infinity`, a time without a zone, which would be read in the session's
/// zone) is refused, and so is a date or time that does not exist
/// (February 30th, hour 24, a zone past ±15:59) or an instant outside
/// 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z, which graph_export
/// could not write back as ISO 8601.
pub fn check_time(value: &TimeValue) -> Result<String> {
    match value {
        TimeValue::EpochMillis(ms) => {
            // Whole milliseconds and the microseconds of the rest, each
            // exact (ms * 1000 is not, near the range's ends).
            let micros = (ms.abs() < 1.0e15)
                .then(|| ms.trunc() as i64 * 1000 + ((ms - ms.trunc()) * 1000.0).round() as i64);
            match micros {
                Some(micros) if crate::time::in_iso_range(micros) => {
                    Ok(crate::time::iso_utc(micros, 6))
                }
                _ => Err(out_of_range(&ms.to_string())),
            }
        }
        TimeValue::Text(text) => {
            let fields = iso_fields(text).ok_or_else(|| {
                Error::invalid(format!(
                    "timestamp {} is not ISO 8601 with a time zone",
                    quoted(text)
                ))
                .with_hint("write it as 2026-05-01T12:00:00Z, or as milliseconds since 1970")
            })?;
            let micros = fields.unix_micros().map_err(|detail| {
                Error::invalid(format!("timestamp {} is not a valid time", quoted(text)))
                    .with_detail(detail)
            })?;
            if crate::time::in_iso_range(micros) {
                Ok(text.clone())
            } else {
                Err(out_of_range(&quoted(text)))
            }
        }
    }
}

/// The instants graph files hold, as an error's detail.
pub const TIME_RANGE: &str = "a time is from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z";

/// The error of a time outside the range graph files hold.
fn out_of_range(time: &str) -> Error {
    Error::invalid(format!("timestamp {time} is out of range")).with_detail(TIME_RANGE)
}

/// The fields of an ISO 8601 time with a zone, as written (not yet
/// checked against the calendar).
struct IsoFields<'a> {
    year: i64,
    month: u32,
    day: u32,
    hour: i64,
    minute: i64,
    second: i64,
    /// The digits after the decimal point (may be none).
    fraction: &'a str,
    /// The zone's offset east of UTC: sign, hours, minutes (`Z`: 0).
    zone: (i64, i64, i64),
}

impl IsoFields<'_> {
    /// Microseconds since the Unix epoch, the fraction rounded as
    /// PostgreSQL rounds it; else what does not exist.
    fn unix_micros(&self) -> std::result::Result<i64, String> {
        let (sign, zone_hours, zone_minutes) = self.zone;
        if self.year < 1 {
            return Err("year 0000 does not exist: 0001 follows 1 BC".into());
        }
        if !(1..=12).contains(&self.month) {
            return Err(format!("month {} is not 1 to 12", self.month));
        }
        let days = crate::time::days_in_month(self.year, self.month);
        if !(1..=days).contains(&self.day) {
            return Err(format!(
                "day {} is not 1 to {days} in {:04}-{:02}",
                self.day, self.year, self.month
            ));
        }
        if self.hour > 23 || self.minute > 59 || self.second > 59 {
            return Err(format!(
                "{:02}:{:02}:{:02} is not a time of day",
                self.hour, self.minute, self.second
            ));
        }
        if zone_hours > 15 || zone_minutes > 59 {
            return Err(format!(
                "zone offset {zone_hours:02}:{zone_minutes:02} is not 00:00 to 15:59"
            ));
        }
        let seconds = crate::time::days_from_civil(self.year, self.month, self.day) * 86_400
            + self.hour * 3600
            + self.minute * 60
            + self.second
            - sign * (zone_hours * 3600 + zone_minutes * 60);
        let fraction = if self.fraction.is_empty() {
            0
        } else {
            // Digits only: it parses; PostgreSQL rounds half to even.
            let value: f64 = format!("0.{}", self.fraction).parse().unwrap_or(0.0);
            (value * 1.0e6).round_ties_even() as i64
        };
        Ok(seconds * 1_000_000 + fraction)
    }
}

/// The fields of `text` when it is shaped as ISO 8601 with a date, a time
/// (`T` or a space between) and a zone.
fn iso_fields(text: &str) -> Option<IsoFields<'_>> {
    let b = text.as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(range)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let date_time = b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && (b[10] == b'T' || b[10] == b' ')
        && b[13] == b':'
        && b[16] == b':';
    if !date_time {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    // `get`: byte 19 may fall inside a multi-byte character.
    let mut rest = text.get(19..)?;
    let mut fraction = "";
    if let Some(after) = rest.strip_prefix('.') {
        let len = after.bytes().take_while(u8::is_ascii_digit).count();
        if len == 0 {
            return None;
        }
        (fraction, rest) = after.split_at(len);
    }
    let z = rest.as_bytes();
    let zone = if rest == "Z" {
        (1, 0, 0)
    } else if z.len() == 6 && (z[0] == b'+' || z[0] == b'-') && z[3] == b':' {
        let at = b.len() - 6;
        let sign = if z[0] == b'+' { 1 } else { -1 };
        (sign, number(at + 1..at + 3)?, number(at + 4..at + 6)?)
    } else {
        return None;
    };
    Some(IsoFields {
        year,
        month: u32::try_from(month).ok()?,
        day: u32::try_from(day).ok()?,
        hour,
        minute,
        second,
        fraction,
        zone,
    })
}

/// A file of an exported graph folder: `<id>.md` is a node, `<id>.v<N>.md`
/// its version N.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileName {
    pub node_id: String,
    pub version: Option<i32>,
}

/// Parse a file name of a graph folder (a path prefix is ignored).
pub fn parse_file_name(name: &str) -> Result<FileName> {
    let base = name.rsplit('/').next().unwrap_or(name);
    let bad = || {
        Error::invalid(format!("unexpected file name {}", quoted(name)))
            .with_detail("a graph folder holds \"<node id>.md\" and \"<node id>.v<N>.md\" files")
    };
    let stem = base.strip_suffix(".md").ok_or_else(bad)?;
    let (node_id, version) = match stem.rsplit_once(".v") {
        Some((id, digits)) => {
            let version: i32 = if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                digits.parse().map_err(|_| bad())?
            } else {
                return Err(bad());
            };
            if version < 1 {
                return Err(bad());
            }
            (id, Some(version))
        }
        None => (stem, None),
    };
    check_node_id(node_id)?;
    Ok(FileName { node_id: node_id.to_owned(), version })
}

/// The file name of a node (`version` None) or of one of its versions.
pub fn file_name(node_id: &str, version: Option<i32>) -> String {
    match version {
        Some(v) => format!("{node_id}.v{v}.md"),
        None => format!("{node_id}.md"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_root_reads_as_a_node_with_no_times_and_no_refs() {
        let root = root_json();
        assert_eq!(root["id"], ROOT_ID);
        assert_eq!(root["title"], ROOT_TITLE);
        assert_eq!(root["version"], 1);
        assert!(root["createdAt"].is_null() && root["updatedAt"].is_null());
        assert_eq!(root["refs"], serde_json::json!([]));
    }

    #[test]
    fn node_ids() {
        assert!(is_node_id("abc"));
        assert!(is_node_id("tz4a98xxat96iws9zmbrgj3a"));
        assert!(is_node_id("project_atlas-2"));
        assert!(is_node_id(&"a".repeat(64)));
        assert!(!is_node_id(&"a".repeat(65)));
        assert!(!is_node_id(""));
        assert!(!is_node_id("a b"));
        assert!(!is_node_id("a.v1"));
        assert!(!is_node_id("../x"));
        assert!(!is_node_id("é"));
        assert!(!is_node_id(ROOT_ID));
        assert_eq!(check_node_id(ROOT_ID).unwrap_err().kind, ErrorKind::NotAllowed);
        assert_eq!(check_node_id("a/b").unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(check_owner(" ").unwrap_err().kind, ErrorKind::InvalidParameter);
        assert!(check_owner("user-1").is_ok());
    }

    #[test]
    fn body_links_in_order_once_and_only_ids() {
        let body = "See [[b]] and [[a]], again [[b]]; [[ c ]] [[not an id]] [[__root__]] [[]] [[x";
        assert_eq!(body_links(body), strings(&["b", "a", "c"]));
        assert_eq!(body_links("[[a [[b]] c]]"), strings(&["b"]));
        assert_eq!(body_links("no links"), Vec::<String>::new());
        assert_eq!(body_links("[[é]] [[ok]]"), strings(&["ok"]));
    }

    #[test]
    fn refs_are_explicit_then_body_links_without_duplicates() {
        assert_eq!(
            merge_refs(&strings(&["c", "a"]), "[[a]] [[b]] [[c]] [[d]]"),
            strings(&["c", "a", "b", "d"])
        );
        assert_eq!(merge_refs(&[], ""), Vec::<String>::new());
    }

    #[test]
    fn explicit_refs_and_parents_are_checked() {
        assert_eq!(check_refs(&strings(&["a", "b", "a"])).unwrap(), strings(&["a", "b"]));
        assert_eq!(check_refs(&strings(&[ROOT_ID])).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert!(check_refs(&strings(&["a b"])).is_err());
        assert_eq!(check_parents(&[], None).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(
            check_parents(&strings(&[ROOT_ID, "p", "p"]), Some("c")).unwrap(),
            strings(&["p"])
        );
        assert_eq!(check_parents(&strings(&[ROOT_ID]), None).unwrap(), Vec::<String>::new());
        assert!(check_parents(&strings(&["bad id"]), None).is_err());
        assert!(check_parents(&strings(&["x"]), Some("x")).is_err());
    }

    #[test]
    fn limits() {
        let limits = NodeLimits { bytes: 4, refs: 2 };
        let node = |title: &str, description: &str, body: &str, links: &[&str]| Content {
            title: title.into(),
            description: description.into(),
            body: body.into(),
            links: links.iter().map(|l| l.to_string()).collect(),
        };
        assert!(check_node_size(&node("ab", "c", "d", &[]), None, limits).is_ok());
        let e = check_node_size(&node("ab", "cd", "", &[]), Some("abcd"), limits);
        assert!(e.is_ok());
        let e = check_node_size(&node("a", "", "", &[]), Some("abcde"), limits).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        let e = check_node_size(&node("a", "", "", &["x", "y", "z"]), None, limits).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        // Body links count as refs.
        let e = check_node_size(
            &node("a", "", "[[x]] [[y]]", &["z"]),
            None,
            NodeLimits { bytes: 100, refs: 2 },
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        let e = check_node_size(&node("ab", "cd", "e", &[]), None, limits).unwrap_err();
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        assert!(e.message.contains("5 bytes"));
        assert!(check_title("  ").is_err());
        assert!(check_title("T").is_ok());
    }

    fn content(title: &str, body: &str, links: &[&str]) -> Content {
        Content {
            title: title.into(),
            description: "d".into(),
            body: body.into(),
            links: strings(links),
        }
    }

    #[test]
    fn what_a_write_does() {
        let old = content("T", "body [[a]]", &["b"]);
        assert_eq!(write_kind(&old, &old.clone(), Some("why")), WriteKind::Unchanged);
        assert_eq!(write_kind(&old, &old.clone(), None), WriteKind::Unchanged);
        let retitled = content("T2", "body [[a]]", &["b"]);
        assert_eq!(write_kind(&old, &retitled, None), WriteKind::InPlace);
        assert_eq!(write_kind(&old, &retitled, Some("  ")), WriteKind::InPlace);
        assert_eq!(write_kind(&old, &retitled, Some("rename")), WriteKind::Versioned);
        // Refs are compared merged: moving a ref from the list into the body
        // changes the body, so it is a change.
        let moved = content("T", "body [[a]] [[b]]", &[]);
        assert_eq!(write_kind(&old, &moved, None), WriteKind::InPlace);
        // Same merged refs with another explicit list: still a change, since
        // the list decides what a later body edit keeps.
        let same_refs = content("T", "body [[a]]", &["b", "a"]);
        assert_eq!(old.refs(), strings(&["b", "a"]));
        assert_eq!(same_refs.refs(), strings(&["b", "a"]));
        assert_eq!(write_kind(&old, &same_refs, Some("x")), WriteKind::Versioned);
        let reordered = content("T", "body [[a]]", &["a", "b"]);
        assert_eq!(write_kind(&old, &reordered, Some("x")), WriteKind::Versioned);
    }

    #[test]
    fn appends_go_on_a_new_line() {
        assert_eq!(appended_body("", "x"), "x");
        assert_eq!(appended_body("a", "x"), "a\nx");
        assert_eq!(appended_body("a\n", "x"), "a\nx");
        assert_eq!(appended_body("a", ""), "a");
    }

    #[test]
    fn generated_ids_are_cuid2_shaped_and_unbiased_in_range() {
        let mut counter = 0u8;
        let id = generate_id(|buf| {
            for b in buf.iter_mut() {
                *b = counter;
                counter = counter.wrapping_add(37);
            }
        });
        assert_eq!(id.len(), GENERATED_ID_LEN);
        assert!(id.as_bytes()[0].is_ascii_lowercase());
        assert!(id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        assert!(is_node_id(&id));
        // Bytes that would bias the draw are skipped: all-255 input never
        // completes a single character, so the generator asks again.
        let mut calls = 0;
        let id = generate_id(|buf| {
            calls += 1;
            let fill = if calls < 3 { 255 } else { 7 };
            buf.fill(fill);
        });
        assert_eq!(calls, 3);
        assert_eq!(id, format!("h{}", "h".repeat(23)));
    }

    #[test]
    fn file_times() {
        let ok = |v: TimeValue| check_time(&v).unwrap();
        assert_eq!(ok(TimeValue::EpochMillis(1718000000000.0)), "2024-06-10T06:13:20.000000Z");
        for text in [
            "2026-05-01T12:00:00Z",
            "2026-05-01T12:00:00.123456Z",
            "2026-05-01 12:00:00+02:00",
            "2026-05-01T12:00:00.5-03:30",
        ] {
            assert_eq!(ok(TimeValue::Text(text.into())), text);
        }
        for text in [
            "now",
            "infinity",
            "2026-05-01T12:00:00",
            "2026-05-01",
            "2026-05-01T12:00:00.Z",
            "2026-05-01T12:00:00+0200",
            "yesterday 12:00:00+00:00",
        ] {
            assert!(check_time(&TimeValue::Text(text.into())).is_err(), "{text}");
        }
        assert!(check_time(&TimeValue::EpochMillis(f64::NAN)).is_err());
        assert!(check_time(&TimeValue::EpochMillis(f64::INFINITY)).is_err());
    }

    #[test]
    fn file_times_that_do_not_exist_are_refused() {
        let refused = |text: &str| {
            let error = check_time(&TimeValue::Text(text.into())).unwrap_err();
            assert_eq!(error.kind.sqlstate(), "22023", "{text}");
            error
        };
        for text in [
            "2025-02-29T00:00:00Z",
            "2025-02-30T00:00:00Z",
            "1900-02-29T00:00:00Z",
            "2025-04-31T00:00:00Z",
            "2025-00-10T00:00:00Z",
            "2025-13-01T00:00:00Z",
            "2025-01-00T00:00:00Z",
            "2025-01-01T24:00:00Z",
            "2025-01-01T23:60:00Z",
            "2025-01-01T23:59:60Z",
            "2025-01-01T00:00:00+99:00",
            "2025-01-01T00:00:00+16:00",
            "2025-01-01T00:00:00-14:60",
            "0000-06-01T00:00:00Z",
        ] {
            let error = refused(text);
            assert!(error.message.ends_with("is not a valid time"), "{text}: {}", error.message);
        }
        for text in [
            "0001-01-01T00:00:00+14:00",
            "0001-01-01T00:00:00.5+00:01",
            "9999-12-31T23:59:59-00:01",
            "9999-12-31T23:59:59.9999996Z",
        ] {
            let error = refused(text);
            assert!(error.message.ends_with("is out of range"), "{text}: {}", error.message);
        }
        let ok = |text: &str| check_time(&TimeValue::Text(text.into())).unwrap();
        for text in [
            "2024-02-29T00:00:00Z",
            "2000-02-29T23:59:59.999999Z",
            "0001-01-01T00:00:00Z",
            "0001-01-01T00:00:00-14:00",
            "9999-12-31T23:59:59.999999Z",
            "9999-12-31T23:59:59.9999994Z",
            "9999-12-31T23:59:59+15:59",
            "2025-01-01T00:00:00-15:59",
        ] {
            assert_eq!(ok(text), text);
        }
    }

    #[test]
    fn file_times_in_milliseconds_are_within_four_digit_years() {
        let time = |ms: f64| check_time(&TimeValue::EpochMillis(ms));
        assert_eq!(time(-62_135_596_800_000.0).unwrap(), "0001-01-01T00:00:00.000000Z");
        assert_eq!(time(253_402_300_799_999.0).unwrap(), "9999-12-31T23:59:59.999000Z");
        for ms in [
            -62_135_596_800_001.0,
            253_402_300_800_000.0,
            7.0e15,
            -8.0e15,
            1.0e300,
            f64::NEG_INFINITY,
        ] {
            let error = time(ms).unwrap_err();
            assert_eq!(error.kind.sqlstate(), "22023");
            assert!(error.message.ends_with("is out of range"), "{}", error.message);
        }
    }

    #[test]
    fn many_parents_are_deduplicated_in_first_seen_order() {
        let parents: Vec<String> = (0..200_000).map(|i| format!("p{}", i % 100_000)).collect();
        let stored = check_parents(&parents, None).unwrap();
        assert_eq!(stored.len(), 100_000);
        assert_eq!(stored[..2], ["p0".to_string(), "p1".to_string()]);
        assert_eq!(stored[99_999], "p99999");
    }

    #[test]
    fn file_times_with_multibyte_characters_are_refused_not_a_panic() {
        // Found by fuzz/fuzz_targets/markdown.rs: byte 19 inside a character
        // (the ☕ at bytes 17..20), and a multi-byte character in the zone.
        for text in [
            ":\t2026-01: café ☕ \0\0\0\0\0\0\0\u{4}0:00p",
            "2026-05-01T12:00:0☕Z",
            "2026-05-01T12:00:00+€12",
            "2026-05-01T12:00:00.5-0é:0",
            "2026-05-01T12:00:00ééé",
        ] {
            assert!(check_time(&TimeValue::Text(text.into())).is_err(), "{text}");
        }
    }

    #[test]
    fn file_names() {
        assert_eq!(
            parse_file_name("abc.md").unwrap(),
            FileName { node_id: "abc".into(), version: None }
        );
        assert_eq!(
            parse_file_name("graph/abc.v12.md").unwrap(),
            FileName { node_id: "abc".into(), version: Some(12) }
        );
        for bad in [
            "abc",
            "abc.txt",
            "abc.v.md",
            "abc.v0.md",
            "abc.vx.md",
            "a b.md",
            ".md",
            "abc.v99999999999.md",
        ] {
            assert!(parse_file_name(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_file_name("__root__.md").unwrap_err().kind, ErrorKind::NotAllowed);
        assert_eq!(file_name("abc", None), "abc.md");
        assert_eq!(file_name("abc", Some(3)), "abc.v3.md");
    }
}
