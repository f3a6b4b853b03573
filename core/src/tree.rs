//! The tree projection of a graph (seed 003): a parent's refs are its
//! children, nodes nobody references hang under the virtual root, a node
//! with two parents appears under both, and cycles never loop.
//!
//! [`Tree::build`] walks the graph depth-first from the root once and keeps
//! every edge except those that point back to a node on the current walk
//! (a ref to an ancestor). What is left is acyclic, so the projection is
//! finite; a cycle that nothing outside it references is attached to the
//! root once, at its earliest node. The work is linear in nodes plus refs.

use std::collections::HashMap;

use crate::{Error, Result};

/// One stored node, as the flat scan reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub id: String,
    /// Child ids in order (explicit refs, then body links); unknown ids are
    /// dangling refs and are skipped.
    pub refs: Vec<String>,
    /// Creation time (any monotonic unit): orders the root's children.
    pub created: i64,
}

/// Index of a node in the input slice.
pub type NodeIndex = u32;

/// The projection: the kept child edges of every node and of the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The root's children: unreferenced nodes, then one node per cycle
    /// unreachable from the root, each group ordered by (created, id).
    pub root_children: Vec<NodeIndex>,
    /// `children[i]`: the kept children of node `i`, in refs order.
    pub children: Vec<Vec<NodeIndex>>,
}

/// One row of the depth-first projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row<'t> {
    pub node: NodeIndex,
    /// None: a child of the root.
    pub parent: Option<NodeIndex>,
    /// 1 for the root's children.
    pub depth: usize,
    /// The nodes from the root's child down to this node (inclusive).
    pub path: &'t [NodeIndex],
}

const WHITE: u8 = 0; // not reached yet
const ON_PATH: u8 = 1; // on the current walk
const DONE: u8 = 2; // finished

impl Tree {
    /// Build the projection of `nodes` (ids unique).
    pub fn build(nodes: &[TreeNode]) -> Tree {
        let count = nodes.len();
        let index: HashMap<&str, NodeIndex> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), i as NodeIndex))
            .collect();

        // Resolved refs: known ids, not the node itself, each once
        // (seen[child] == i marks a child already taken for node i).
        let mut referenced = vec![false; count];
        let mut seen = vec![u32::MAX; count];
        let resolved: Vec<Vec<NodeIndex>> = nodes
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let mut out: Vec<NodeIndex> = Vec::with_capacity(node.refs.len());
                for r in &node.refs {
                    match index.get(r.as_str()) {
                        Some(&child) if child as usize != i && seen[child as usize] != i as u32 => {
                            seen[child as usize] = i as u32;
                            out.push(child);
                            referenced[child as usize] = true;
                        }
                        _ => {}
                    }
                }
                out
            })
            .collect();

        let mut order: Vec<NodeIndex> = (0..count as NodeIndex).collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (&nodes[a as usize], &nodes[b as usize]);
            a.created.cmp(&b.created).then_with(|| a.id.cmp(&b.id))
        });

        let mut tree = Tree {
            root_children: Vec::new(),
            children: vec![Vec::new(); count],
        };
        let mut state = vec![WHITE; count];
        for &start in &order {
            if !referenced[start as usize] {
                tree.root_children.push(start);
                tree.walk(start, &resolved, &mut state);
            }
        }
        // Whatever is still unreached sits on cycles nothing else reaches.
        for &start in &order {
            if state[start as usize] == WHITE {
                tree.root_children.push(start);
                tree.walk(start, &resolved, &mut state);
            }
        }
        tree
    }

    /// Depth-first walk from `start`, keeping each edge that does not point
    /// back to a node on the walk.
    fn walk(&mut self, start: NodeIndex, resolved: &[Vec<NodeIndex>], state: &mut [u8]) {
        // (node, next ref to look at)
        let mut stack: Vec<(NodeIndex, usize)> = vec![(start, 0)];
        state[start as usize] = ON_PATH;
        while let Some(top) = stack.last_mut() {
            let (node, next) = *top;
            let refs = &resolved[node as usize];
            if next == refs.len() {
                state[node as usize] = DONE;
                stack.pop();
                continue;
            }
            top.1 += 1;
            let child = refs[next];
            match state[child as usize] {
                ON_PATH => {} // a ref back to an ancestor is not followed
                DONE => self.children[node as usize].push(child),
                _ => {
                    self.children[node as usize].push(child);
                    state[child as usize] = ON_PATH;
                    stack.push((child, 0));
                }
            }
        }
    }

    /// How many rows the depth-first projection has (a node appears once per
    /// path from the root), saturating at `u64::MAX`.
    pub fn row_count(&self) -> u64 {
        // Rows of a node's subtree, itself included, memoised; the kept
        // edges are acyclic, so a post-order pass computes them all.
        let count = self.children.len();
        let mut rows: Vec<u64> = vec![0; count];
        let mut done = vec![false; count];
        let mut stack: Vec<(NodeIndex, usize)> = Vec::new();
        for &start in &self.root_children {
            if done[start as usize] {
                continue;
            }
            stack.push((start, 0));
            while let Some(top) = stack.last_mut() {
                let (node, next) = *top;
                let kids = &self.children[node as usize];
                if next == kids.len() {
                    let total = kids
                        .iter()
                        .fold(1u64, |acc, &k| acc.saturating_add(rows[k as usize]));
                    rows[node as usize] = total;
                    done[node as usize] = true;
                    stack.pop();
                    continue;
                }
                top.1 += 1;
                let child = kids[next];
                if !done[child as usize] {
                    stack.push((child, 0));
                }
            }
        }
        self.root_children
            .iter()
            .fold(0u64, |acc, &k| acc.saturating_add(rows[k as usize]))
    }

    /// Refuse projections larger than `limit` rows (a dense web of shared
    /// children multiplies the rows).
    pub fn check_row_limit(&self, limit: u64) -> Result<u64> {
        let rows = self.row_count();
        if rows > limit {
            return Err(Error::limit(format!(
                "the tree projection would have {rows} rows, more than {limit}"
            ))
            .with_detail("a node appears once under each of its parents, with its whole subtree")
            .with_hint("use graph_tree(), which lists each parent's children once"));
        }
        Ok(rows)
    }

    /// The rows of the depth-first projection, in order.
    pub fn into_rows(self) -> Rows {
        Rows {
            tree: self,
            path: Vec::new(),
            stack: Vec::new(),
            next_top: 0,
        }
    }
}

/// A cursor over the depth-first projection: it keeps only the current
/// path, so a projection of millions of rows is produced one row at a time.
#[derive(Debug, Clone)]
pub struct Rows {
    tree: Tree,
    path: Vec<NodeIndex>,
    /// (node on the path, next child of it to visit)
    stack: Vec<(NodeIndex, usize)>,
    /// The next of the root's children to start from.
    next_top: usize,
}

impl Rows {
    /// The next row, or None after the last.
    pub fn next_row(&mut self) -> Option<Row<'_>> {
        while let Some(frame) = self.stack.last_mut() {
            let (node, next) = *frame;
            let kids = &self.tree.children[node as usize];
            if next == kids.len() {
                self.stack.pop();
                self.path.pop();
                continue;
            }
            frame.1 += 1;
            let child = kids[next];
            self.path.push(child);
            self.stack.push((child, 0));
            return Some(Row {
                node: child,
                parent: Some(node),
                depth: self.path.len(),
                path: &self.path,
            });
        }
        let top = *self.tree.root_children.get(self.next_top)?;
        self.next_top += 1;
        self.path.push(top);
        self.stack.push((top, 0));
        Some(Row {
            node: top,
            parent: None,
            depth: 1,
            path: &self.path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(spec: &[(&str, &[&str])]) -> Vec<TreeNode> {
        spec.iter()
            .enumerate()
            .map(|(i, (id, refs))| TreeNode {
                id: id.to_string(),
                refs: refs.iter().map(|r| r.to_string()).collect(),
                created: i as i64,
            })
            .collect()
    }

    /// Rows as "path/with/slashes" strings.
    fn rows(nodes: &[TreeNode]) -> Vec<String> {
        let tree = Tree::build(nodes);
        let expected = tree.row_count();
        let mut out = Vec::new();
        let mut cursor = tree.into_rows();
        while let Some(row) = cursor.next_row() {
            let path: Vec<&str> = row
                .path
                .iter()
                .map(|&i| nodes[i as usize].id.as_str())
                .collect();
            assert_eq!(row.depth, path.len());
            assert_eq!(*path.last().unwrap(), nodes[row.node as usize].id);
            let parent = row.parent.map(|p| nodes[p as usize].id.as_str());
            assert_eq!(parent, path.len().checked_sub(2).map(|i| path[i]));
            out.push(path.join("/"));
        }
        assert_eq!(out.len() as u64, expected);
        out
    }

    #[test]
    fn refs_are_children_and_unreferenced_nodes_hang_under_the_root() {
        let nodes = graph(&[
            ("a", &["b", "c"]),
            ("b", &["d"]),
            ("c", &[]),
            ("d", &[]),
            ("e", &[]),
        ]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/d", "a/c", "e"]);
    }

    #[test]
    fn root_children_are_ordered_by_creation_then_id() {
        let mut nodes = graph(&[("z", &[]), ("y", &[]), ("x", &[])]);
        nodes[0].created = 5;
        nodes[1].created = 1;
        nodes[2].created = 1;
        assert_eq!(rows(&nodes), ["x", "y", "z"]);
    }

    #[test]
    fn a_node_with_two_parents_appears_under_both_with_its_subtree() {
        let nodes = graph(&[("a", &["s"]), ("b", &["s"]), ("s", &["t"]), ("t", &[])]);
        assert_eq!(rows(&nodes), ["a", "a/s", "a/s/t", "b", "b/s", "b/s/t"]);
    }

    #[test]
    fn dangling_refs_and_self_refs_are_skipped() {
        let nodes = graph(&[("a", &["gone", "a", "b", "b"]), ("b", &[])]);
        assert_eq!(rows(&nodes), ["a", "a/b"]);
    }

    #[test]
    fn a_ref_back_to_an_ancestor_is_not_followed() {
        // a -> b -> c -> a: a is referenced, so nothing is unreferenced;
        // the cycle is attached to the root once, at its earliest node.
        let nodes = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/c"]);
        // A cycle below a reachable node: r -> x -> y -> x.
        let nodes = graph(&[("r", &["x"]), ("x", &["y"]), ("y", &["x"])]);
        assert_eq!(rows(&nodes), ["r", "r/x", "r/x/y"]);
    }

    #[test]
    fn unreachable_cycles_are_attached_once_each() {
        let nodes = graph(&[
            ("top", &[]),
            ("c1", &["c2"]),
            ("c2", &["c1", "tail"]),
            ("tail", &[]),
            ("d1", &["d2"]),
            ("d2", &["d1"]),
        ]);
        assert_eq!(
            rows(&nodes),
            ["top", "c1", "c1/c2", "c1/c2/tail", "d1", "d1/d2"]
        );
        let tree = Tree::build(&nodes);
        assert_eq!(tree.root_children, vec![0, 1, 4]);
    }

    #[test]
    fn the_kept_edges_are_acyclic_and_cover_every_node() {
        // A dense little graph with cycles both ways.
        let nodes = graph(&[
            ("a", &["b", "c"]),
            ("b", &["c", "a"]),
            ("c", &["b", "d"]),
            ("d", &["a", "b"]),
        ]);
        let tree = Tree::build(&nodes);
        let listed = rows(&nodes);
        for id in ["a", "b", "c", "d"] {
            assert!(listed.iter().any(|r| r.ends_with(id)), "{id} missing");
        }
        // Each path lists a node at most once.
        for row in &listed {
            let parts: Vec<&str> = row.split('/').collect();
            let mut unique = parts.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(parts.len(), unique.len(), "{row}");
        }
        assert_eq!(listed, ["a", "a/b", "a/b/c", "a/b/c/d", "a/c", "a/c/d"]);
        assert_eq!(tree.row_count(), 6);
    }

    #[test]
    fn row_limit() {
        // A ladder of diamonds doubles the rows at every level.
        let mut spec: Vec<(String, Vec<String>)> = Vec::new();
        for level in 0..40 {
            let next = |side: &str| format!("{side}{}", level + 1);
            spec.push((format!("l{level}"), vec![next("l"), next("r")]));
            spec.push((format!("r{level}"), vec![next("l"), next("r")]));
        }
        spec.push(("l40".into(), vec![]));
        spec.push(("r40".into(), vec![]));
        let nodes: Vec<TreeNode> = spec
            .into_iter()
            .enumerate()
            .map(|(i, (id, refs))| TreeNode {
                id,
                refs,
                created: i as i64,
            })
            .collect();
        let tree = Tree::build(&nodes);
        assert!(tree.row_count() > 1u64 << 40);
        let error = tree.check_row_limit(10_000_000).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::LimitExceeded);
        let small = graph(&[("a", &["b"]), ("b", &[])]);
        assert_eq!(Tree::build(&small).check_row_limit(2).unwrap(), 2);
    }

    #[test]
    fn empty_graph() {
        let tree = Tree::build(&[]);
        assert!(tree.root_children.is_empty());
        assert_eq!(tree.row_count(), 0);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let count = 200_000;
        let nodes: Vec<TreeNode> = (0..count)
            .map(|i| TreeNode {
                id: format!("n{i}"),
                refs: if i + 1 < count {
                    vec![format!("n{}", i + 1)]
                } else {
                    vec![]
                },
                created: i as i64,
            })
            .collect();
        let tree = Tree::build(&nodes);
        assert_eq!(tree.row_count(), count as u64);
        let mut deepest = 0;
        let mut cursor = tree.into_rows();
        while let Some(row) = cursor.next_row() {
            deepest = deepest.max(row.depth);
        }
        assert_eq!(deepest, count);
    }
}
