//! The resources a client reads: the memory tool's files as a tree, and the
//! knowledge graph's tree, each only for the operator's own scope or owner.

use crate::database::{Database, Failure};
use crate::options::Options;

/// How many characters of the file tree a read returns at most (the render
/// says at its end what a cut left out).
const TREE_CHARS: i32 = 100_000;

pub enum Resource {
    MemoryTree(String),
    GraphTree(String),
}

/// The resources the operator's options enable.
pub fn offered(options: &Options) -> Vec<Resource> {
    let mut offered = Vec::new();
    if let Some(scope) = &options.scope {
        offered.push(Resource::MemoryTree(scope.clone()));
    }
    if let Some(owner) = &options.owner {
        offered.push(Resource::GraphTree(owner.clone()));
    }
    offered
}

impl Resource {
    pub fn uri(&self) -> String {
        match self {
            Resource::MemoryTree(scope) => format!("memory://{}/tree", percent_encoded(scope)),
            Resource::GraphTree(owner) => format!("graph://{}/tree", percent_encoded(owner)),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Resource::MemoryTree(_) => "memory tree",
            Resource::GraphTree(_) => "graph tree",
        }
    }

    pub fn description(&self) -> &'static str {
        match self {
            Resource::MemoryTree(_) => {
                "The memory tool's files of this scope, as an indented tree of paths"
            }
            Resource::GraphTree(_) => {
                "The knowledge graph as a tree: the root and each node's children"
            }
        }
    }

    pub fn mime_type(&self) -> &'static str {
        match self {
            Resource::MemoryTree(_) => "text/plain",
            Resource::GraphTree(_) => "application/json",
        }
    }

    pub async fn read(&self, database: &Database) -> Result<String, Failure> {
        match self {
            Resource::MemoryTree(scope) => {
                database
                    .value(
                        "SELECT agent_memory.memory_render($1, 'tree', $2)",
                        &[scope, &TREE_CHARS],
                    )
                    .await
            }
            Resource::GraphTree(owner) => {
                database.value("SELECT agent_memory.graph_tree($1)::text", &[owner]).await
            }
        }
    }
}

/// `value` with every byte but unreserved ones (RFC 3986) as %XX, so that
/// any scope or owner makes one URI authority.
fn percent_encoded(value: &str) -> String {
    let mut encoded = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_percent_encoded_in_uris() {
        assert_eq!(
            Resource::MemoryTree("agent:travel/α".into()).uri(),
            "memory://agent%3Atravel%2F%CE%B1/tree"
        );
        assert_eq!(Resource::GraphTree("alice".into()).uri(), "graph://alice/tree");
    }
}
