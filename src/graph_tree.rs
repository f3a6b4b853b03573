//! The tree projection of graph memory: one flat scan of the owner's nodes,
//! the projection built in the core (`agent_memory_core::tree`), and the
//! result streamed out as rows (`graph_tree_rows`) or written as one JSON
//! document (`graph_tree`). No recursive query: its cost grows with depth
//! times nodes, this one with nodes plus refs.

use std::fmt::Write as _;

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use agent_memory_core::graph::ROOT_ID;
use agent_memory_core::tree::{Rows, Tree, TreeNode};

use crate::error::{OrReport, SqlResult};
use crate::graph::{JsonbText, checked_owner, iso_of, root_json};
use crate::plans::{Statement, kept};
use crate::sessions::{TEXT, required};

/// Most rows graph_tree_rows returns: a web of shared children can make the
/// projection exponentially larger than the graph.
pub const MAX_TREE_ROWS: u64 = 50_000_000;

static SCAN_FOR_ROWS: Statement = Statement {
    sql: "SELECT node_id::text, refs, created_at, title
          FROM agent_memory.graph_nodes WHERE owner = $1",
    args: &[TEXT],
    writes: false,
};

static SCAN_FOR_JSON: Statement = Statement {
    sql: "SELECT node_id::text, refs, created_at, title, description, version, updated_at
          FROM agent_memory.graph_nodes WHERE owner = $1",
    args: &[TEXT],
    writes: false,
};

/// What the JSON form shows of each node besides its id and refs.
struct NodeFacts {
    title: String,
    description: String,
    version: i32,
    created_at: TimestampWithTimeZone,
    updated_at: TimestampWithTimeZone,
}

/// The owner's nodes; `facts` also reads what the JSON form shows.
fn scan(owner: &str, facts: bool) -> SqlResult<(Vec<TreeNode>, Vec<String>, Vec<NodeFacts>)> {
    Spi::connect(|client| {
        let statement = if facts {
            &SCAN_FOR_JSON
        } else {
            &SCAN_FOR_ROWS
        };
        let plan = kept(client, statement).or_report()?;
        let table = client.select(&*plan, None, &[owner.into()]).or_report()?;
        let mut nodes = Vec::with_capacity(table.len());
        let mut titles = Vec::with_capacity(if facts { 0 } else { table.len() });
        let mut details = Vec::with_capacity(if facts { table.len() } else { 0 });
        for row in table {
            let created = required(
                row.get::<TimestampWithTimeZone>(3).or_report()?,
                "created_at",
            )?;
            nodes.push(TreeNode {
                id: required(row.get::<String>(1).or_report()?, "node_id")?,
                refs: required(row.get::<Vec<String>>(2).or_report()?, "refs")?,
                created: created.into_inner(),
            });
            let title = required(row.get::<String>(4).or_report()?, "title")?;
            if facts {
                details.push(NodeFacts {
                    title,
                    description: required(row.get::<String>(5).or_report()?, "description")?,
                    version: required(row.get::<i32>(6).or_report()?, "version")?,
                    created_at: created,
                    updated_at: required(
                        row.get::<TimestampWithTimeZone>(7).or_report()?,
                        "updated_at",
                    )?,
                });
            } else {
                titles.push(title);
            }
        }
        Ok((nodes, titles, details))
    })
}

/// The rows of the projection, produced one at a time from the cursor.
struct TreeRows {
    rows: Rows,
    ids: Vec<String>,
    titles: Vec<String>,
}

impl Iterator for TreeRows {
    type Item = (String, String, i32, Vec<String>, String);

    fn next(&mut self) -> Option<Self::Item> {
        let row = self.rows.next_row()?;
        let id = |i: u32| self.ids[i as usize].clone();
        Some((
            id(row.node),
            row.parent.map_or_else(|| ROOT_ID.to_owned(), id),
            row.depth as i32,
            row.path.iter().map(|&i| id(i)).collect(),
            self.titles[row.node as usize].clone(),
        ))
    }
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_tree_rows(
    owner: Option<&str>,
) -> Result<
    TableIterator<
        'static,
        (
            name!(node_id, String),
            name!(parent_id, String),
            name!(depth, i32),
            name!(path, Vec<String>),
            name!(title, String),
        ),
    >,
    ErrorReport,
> {
    let owner = checked_owner(owner)?;
    let (nodes, titles, _) = scan(owner, false)?;
    let tree = Tree::build(&nodes);
    tree.check_row_limit(MAX_TREE_ROWS).or_report()?;
    let ids = nodes.into_iter().map(|n| n.id).collect();
    Ok(TableIterator::new(TreeRows {
        rows: tree.into_rows(),
        ids,
        titles,
    }))
}

/// Append `value` as a JSON string.
fn push_json_string(out: &mut String, value: &str) {
    // serde_json escapes exactly what JSON requires.
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "\"\"".to_owned()));
}

/// Append the JSON object of node `i` as a child entry.
fn push_node(out: &mut String, node: &TreeNode, facts: &NodeFacts) {
    out.push_str("{\"id\":");
    push_json_string(out, &node.id);
    out.push_str(",\"title\":");
    push_json_string(out, &facts.title);
    out.push_str(",\"description\":");
    push_json_string(out, &facts.description);
    let _ = write!(
        out,
        ",\"version\":{},\"createdAt\":\"{}\",\"updatedAt\":\"{}\",\"refs\":[",
        facts.version,
        iso_of(facts.created_at, 3),
        iso_of(facts.updated_at, 3)
    );
    for (k, r) in node.refs.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_json_string(out, r);
    }
    out.push_str("]}");
}

fn push_children(out: &mut String, kids: &[u32], nodes: &[TreeNode], facts: &[NodeFacts]) {
    out.push('[');
    for (k, &child) in kids.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_node(out, &nodes[child as usize], &facts[child as usize]);
    }
    out.push(']');
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_tree(owner: Option<&str>) -> SqlResult<JsonbText> {
    let owner = checked_owner(owner)?;
    let (nodes, _, facts) = scan(owner, true)?;
    let tree = Tree::build(&nodes);
    let mut out = String::with_capacity(64 + nodes.len() * 200);
    out.push_str("{\"root\":");
    out.push_str(&root_json().to_string());
    out.push_str(",\"children\":{");
    push_json_string(&mut out, ROOT_ID);
    out.push(':');
    push_children(&mut out, &tree.root_children, &nodes, &facts);
    for (parent, kids) in tree.children.iter().enumerate() {
        if kids.is_empty() {
            continue;
        }
        out.push(',');
        push_json_string(&mut out, &nodes[parent].id);
        out.push(':');
        push_children(&mut out, kids, &nodes, &facts);
    }
    out.push_str("}}");
    Ok(JsonbText(out))
}
