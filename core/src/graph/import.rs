//! A graph folder to import: `{"<file name>": "<markdown>"}`, where
//! `<id>.md` is a node and `<id>.v<N>.md` its version N. Every file is read
//! and checked here, before anything is written, so a bad folder changes
//! nothing.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::markdown::{self, Document, Frontmatter, TimeValue};
use super::{self as graph, Content, NodeLimits};
use crate::error::{Error, Result, quoted};

/// A checked file of the folder.
#[derive(Debug)]
pub struct ImportFile {
    pub name: String,
    pub node_id: String,
    pub document: Document,
    /// The explicit refs, checked.
    pub links: Vec<String>,
    /// createdAt, updatedAt and savedAt as text PostgreSQL reads exactly.
    pub times: [Option<String>; 3],
}

impl ImportFile {
    /// What the file says of its node; an absent title is the node id.
    pub fn content(&self) -> Content {
        let fm = &self.document.frontmatter;
        Content {
            title: fm.title.clone().unwrap_or_else(|| self.node_id.clone()),
            description: fm.description.clone().unwrap_or_default(),
            body: self.document.body.clone(),
            links: self.links.clone(),
        }
    }
}

/// A folder whose files all passed their checks: its nodes, and the older
/// versions (number, file) of those nodes.
#[derive(Debug, Default)]
pub struct Import {
    pub nodes: Vec<ImportFile>,
    pub versions: Vec<(i32, ImportFile)>,
}

impl Import {
    /// How many files the folder has.
    pub fn len(&self) -> usize {
        self.nodes.len() + self.versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `error`, of the same kind, about file `file`.
fn in_file(file: &str, error: Error) -> Error {
    Error { message: format!("{}: {}", quoted(file), error.message), ..error }
}

/// `error`'s message about file `file`, as an invalid file.
fn invalid_file(file: &str, error: Error) -> Error {
    Error::invalid(format!("{}: {}", quoted(file), error.message))
}

/// Parse a node's markdown, naming `file` in an error.
pub fn parse_document(file: &str, text: &str) -> Result<Document> {
    markdown::parse(text).map_err(|e| invalid_file(file, e))
}

/// A document's explicit refs as valid ids (an absent list is an empty one).
pub fn document_links(file: &str, frontmatter: &Frontmatter) -> Result<Vec<String>> {
    graph::check_refs(frontmatter.refs.as_deref().unwrap_or_default())
        .map_err(|e| invalid_file(file, e))
}

fn time_text(file: &str, value: &Option<TimeValue>) -> Result<Option<String>> {
    value.as_ref().map(|v| graph::check_time(v).map_err(|e| invalid_file(file, e))).transpose()
}

/// Read and check every file of `files`: names, markdown, refs, times and
/// sizes within `limits`; each node at most once; each version older than
/// its node, numbered as its frontmatter says, with a change description;
/// no blank title.
pub fn check_import(files: &Value, limits: NodeLimits) -> Result<Import> {
    let Value::Object(files) = files else {
        return Err(Error::invalid("files must be a JSON object of file name to content"));
    };
    let mut import = Import::default();
    // What was read already, looked up by key: a folder of many files
    // costs time in proportion to its size.
    let mut node_ids: HashSet<String> = HashSet::new();
    let mut version_keys: HashSet<(i32, String)> = HashSet::new();
    for (name, content) in files {
        let Value::String(text) = content else {
            return Err(Error::invalid(format!("file {} is not a JSON string", quoted(name))));
        };
        let file = graph::parse_file_name(name)?;
        let document = parse_document(name, text)?;
        let links = document_links(name, &document.frontmatter)?;
        let fm = &document.frontmatter;
        let times = [
            time_text(name, &fm.created_at)?,
            time_text(name, &fm.updated_at)?,
            time_text(name, &fm.saved_at)?,
        ];
        let parsed =
            ImportFile { name: name.clone(), node_id: file.node_id, document, links, times };
        graph::check_node_size(
            &parsed.content(),
            parsed.document.frontmatter.change_description.as_deref(),
            limits,
        )
        .map_err(|e| in_file(name, e))?;
        match file.version {
            None => {
                if !node_ids.insert(parsed.node_id.clone()) {
                    return Err(Error::invalid(format!(
                        "node {} appears twice",
                        quoted(&parsed.node_id)
                    )));
                }
                import.nodes.push(parsed)
            }
            Some(n) => {
                if !version_keys.insert((n, parsed.node_id.clone())) {
                    return Err(Error::invalid(format!("file {} appears twice", quoted(name))));
                }
                import.versions.push((n, parsed))
            }
        }
    }
    let nodes_by_id: HashMap<&str, &ImportFile> =
        import.nodes.iter().map(|node| (node.node_id.as_str(), node)).collect();
    for (n, file) in &import.versions {
        check_version(&nodes_by_id, *n, file)?;
    }
    for file in import.nodes.iter().chain(import.versions.iter().map(|(_, f)| f)) {
        if file.document.frontmatter.title.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return Err(in_file(&file.name, Error::invalid("title must not be empty")));
        }
    }
    Ok(import)
}

/// Version `n` in `file`: its node is in the folder and newer, its
/// frontmatter agrees on the number, and it says what changed.
fn check_version(nodes: &HashMap<&str, &ImportFile>, n: i32, file: &ImportFile) -> Result<()> {
    let fm = &file.document.frontmatter;
    let Some(node) = nodes.get(file.node_id.as_str()) else {
        return Err(Error::invalid(format!("{} has no node file", quoted(&file.name)))
            .with_hint(format!("add {}", graph::file_name(&file.node_id, None))));
    };
    let current = node.document.frontmatter.version.unwrap_or(1);
    if n >= current {
        return Err(in_file(
            &file.name,
            Error::invalid(format!("version {n} is not older than the node's version {current}")),
        ));
    }
    if let Some(said) = fm.version.filter(|v| *v != n) {
        return Err(in_file(
            &file.name,
            Error::invalid(format!("its frontmatter says version {said}")),
        ));
    }
    if fm.change_description.as_deref().is_none_or(|d| d.trim().is_empty()) {
        return Err(Error::invalid(format!("{} has no changeDescription", quoted(&file.name))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde_json::json;

    const LIMITS: NodeLimits = NodeLimits { bytes: 1 << 20, refs: 100 };

    fn error_of(files: Value) -> Error {
        check_import(&files, LIMITS).expect_err("the folder is refused")
    }

    #[test]
    fn a_node_and_its_older_version_pass() {
        let import = check_import(
            &json!({
                "a.md": "---\ntitle: A\nversion: 2\nrefs: [b]\n---\nbody",
                "a.v1.md": "---\ntitle: A0\nversion: 1\nchangeDescription: first\n---\nold",
                "b.md": "---\n---\n",
            }),
            LIMITS,
        )
        .unwrap();
        assert_eq!(import.len(), 3);
        let a = import.nodes.iter().find(|n| n.node_id == "a").unwrap();
        assert_eq!(a.links, vec!["b".to_string()]);
        assert_eq!(a.content().title, "A");
        let b = import.nodes.iter().find(|n| n.node_id == "b").unwrap();
        assert_eq!(b.content().title, "b", "an absent title is the node id");
        assert_eq!(import.versions[0].0, 1);
    }

    #[test]
    fn the_folder_must_be_an_object_of_strings() {
        assert!(error_of(json!(["a.md"])).message.contains("JSON object"));
        assert!(error_of(json!({"a.md": 1})).message.contains("is not a JSON string"));
    }

    #[test]
    fn a_version_needs_its_node_a_lower_number_and_a_change_description() {
        let orphan = error_of(json!({"a.v1.md": "---\nchangeDescription: x\n---\n"}));
        assert!(orphan.message.contains("has no node file"));
        assert_eq!(orphan.hint.as_deref(), Some("add a.md"));

        let not_older = error_of(json!({
            "a.md": "---\nversion: 2\n---\n",
            "a.v2.md": "---\nchangeDescription: x\n---\n",
        }));
        assert!(not_older.message.contains("version 2 is not older"));

        let disagrees = error_of(json!({
            "a.md": "---\nversion: 3\n---\n",
            "a.v1.md": "---\nversion: 2\nchangeDescription: x\n---\n",
        }));
        assert!(disagrees.message.contains("its frontmatter says version 2"));

        let silent = error_of(json!({
            "a.md": "---\nversion: 2\n---\n",
            "a.v1.md": "---\nchangeDescription: ' '\n---\n",
        }));
        assert!(silent.message.contains("has no changeDescription"));
    }

    #[test]
    fn blank_titles_bad_refs_and_oversized_nodes_are_refused_by_file() {
        let blank = error_of(json!({"a.md": "---\ntitle: ' '\n---\n"}));
        assert_eq!(blank.message, "\"a.md\": title must not be empty");

        let bad_ref = error_of(json!({"a.md": "---\nrefs: ['']\n---\n"}));
        assert!(bad_ref.message.starts_with("\"a.md\": "));

        let big = check_import(
            &json!({"a.md": format!("---\n---\n{}", "x".repeat(64))}),
            NodeLimits { bytes: 16, refs: 100 },
        )
        .unwrap_err();
        assert_eq!(big.kind, ErrorKind::LimitExceeded);
        assert!(big.message.starts_with("\"a.md\": node of"));
    }

    #[test]
    fn a_bad_file_name_is_refused() {
        assert!(error_of(json!({"notes.txt": "x"})).message.contains("unexpected file name"));
    }
}
