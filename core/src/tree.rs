//! The tree projection of a graph (seed 003): a parent's refs are its
//! children, nodes nobody references hang under the virtual root, a node
//! with two parents appears under both, and cycles never loop.
//!
//! [`Tree::build`] walks the graph depth-first from the root once and keeps
//! every edge except those that point back to a node on the current walk
//! (a ref to an ancestor). What is left is acyclic, so the projection is
//! finite; a cycle that nothing outside it references is attached to the
//! root once, at its earliest node. The work is linear in nodes plus refs,
//! and the input is packed ([`Graph`]) so a million nodes cost a handful of
//! allocations, not millions.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

use crate::{Error, Result};

/// Index of a node in the [`Graph`].
pub type NodeIndex = u32;

/// The nodes of one owner as the flat scan reads them, packed: every id
/// and ref is a span of one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    text: String,
    ids: Vec<Range<usize>>,
    /// Node i's refs are `refs[ref_start[i]..ref_start[i + 1]]`.
    ref_start: Vec<usize>,
    refs: Vec<Range<usize>>,
    created: Vec<i64>,
}

impl Default for Graph {
    fn default() -> Graph {
        Graph::with_capacity(0, 0, 0)
    }
}

impl Graph {
    pub fn with_capacity(nodes: usize, refs: usize, text_bytes: usize) -> Graph {
        let mut ref_start = Vec::with_capacity(nodes + 1);
        ref_start.push(0);
        Graph {
            text: String::with_capacity(text_bytes),
            ids: Vec::with_capacity(nodes),
            ref_start,
            refs: Vec::with_capacity(refs),
            created: Vec::with_capacity(nodes),
        }
    }

    fn span(&mut self, value: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(value);
        start..self.text.len()
    }

    /// Add a node (ids unique). `created` (any monotonic unit) orders the
    /// root's children. Its refs follow with [`Graph::add_ref`].
    pub fn add_node(&mut self, id: &str, created: i64) {
        let span = self.span(id);
        self.ids.push(span);
        self.created.push(created);
        self.ref_start.push(self.refs.len());
    }

    /// Add a ref (a child id, in order) to the node added last. Unknown ids
    /// are dangling refs and are skipped by the projection.
    pub fn add_ref(&mut self, id: &str) {
        let span = self.span(id);
        self.refs.push(span);
        if let Some(last) = self.ref_start.last_mut() {
            *last = self.refs.len();
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    pub fn id(&self, node: NodeIndex) -> &str {
        &self.text[self.ids[node as usize].clone()]
    }

    /// The refs of `node`, in order, as stored (dangling ones included).
    pub fn refs(&self, node: NodeIndex) -> impl Iterator<Item = &str> {
        self.refs_of(node as usize)
    }

    fn refs_of(&self, node: usize) -> impl Iterator<Item = &str> {
        self.refs[self.ref_start[node]..self.ref_start[node + 1]]
            .iter()
            .map(|span| &self.text[span.clone()])
    }

    /// (created, id): the order of the root's children.
    fn order_key(&self, node: NodeIndex) -> (i64, &str) {
        (self.created[node as usize], self.id(node))
    }
}

/// FxHash (the Rust compiler's hasher): ids are short, and SipHash's
/// protection against chosen keys buys nothing when the only keys are the
/// owner's own ids.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(SEED);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(SEED);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The projection: the kept child edges and the root's children.
///
/// Its nodes are numbered in the order the depth-first walk first reaches
/// them (use [`Tree::original`] to find a node in the [`Graph`]), so that
/// producing the rows, which follows the same order, reads memory mostly
/// front to back: at a million nodes that halves the cost of the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The root's children: unreferenced nodes, then one node per cycle
    /// unreachable from the root, each group ordered by (created, id).
    pub root_children: Vec<NodeIndex>,
    /// Node i's kept children are `children[start[i]..start[i + 1]]`, in
    /// refs order.
    start: Vec<usize>,
    children: Vec<NodeIndex>,
    /// The Graph index of each node.
    original: Vec<NodeIndex>,
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

/// The resolved refs of every node (Graph numbering) while walking.
struct Walk {
    start: Vec<usize>,
    targets: Vec<NodeIndex>,
    kept: Vec<bool>,
    state: Vec<u8>,
    /// Nodes in the order the walk first reached them.
    order: Vec<NodeIndex>,
}

impl Walk {
    /// Depth-first walk from `top`, keeping each edge that does not point
    /// back to a node on the walk.
    fn from(&mut self, top: NodeIndex) {
        // (node, next edge to look at)
        let mut stack: Vec<(NodeIndex, usize)> = vec![(top, self.start[top as usize])];
        self.state[top as usize] = ON_PATH;
        self.order.push(top);
        while let Some(frame) = stack.last_mut() {
            let (node, edge) = *frame;
            if edge == self.start[node as usize + 1] {
                self.state[node as usize] = DONE;
                stack.pop();
                continue;
            }
            frame.1 += 1;
            let child = self.targets[edge];
            match self.state[child as usize] {
                ON_PATH => {} // a ref back to an ancestor is not followed
                DONE => self.kept[edge] = true,
                _ => {
                    self.kept[edge] = true;
                    self.state[child as usize] = ON_PATH;
                    self.order.push(child);
                    stack.push((child, self.start[child as usize]));
                }
            }
        }
    }
}

impl Tree {
    /// Build the projection of `graph`.
    pub fn build(graph: &Graph) -> Tree {
        let count = graph.len();
        let mut index: HashMap<&str, NodeIndex, BuildHasherDefault<FxHasher>> =
            HashMap::with_capacity_and_hasher(count, Default::default());
        for node in 0..count as NodeIndex {
            index.insert(graph.id(node), node);
        }

        // Resolved refs: known ids, not the node itself, each once
        // (seen[child] == i marks a child already taken for node i).
        let mut referenced = vec![false; count];
        let mut seen = vec![NodeIndex::MAX; count];
        let mut start = Vec::with_capacity(count + 1);
        let mut targets: Vec<NodeIndex> = Vec::with_capacity(graph.refs.len());
        start.push(0);
        for node in 0..count {
            for id in graph.refs_of(node) {
                match index.get(id) {
                    Some(&child)
                        if child as usize != node && seen[child as usize] != node as u32 =>
                    {
                        seen[child as usize] = node as u32;
                        targets.push(child);
                        referenced[child as usize] = true;
                    }
                    _ => {}
                }
            }
            start.push(targets.len());
        }
        drop(index);
        drop(seen);

        let mut walk = Walk {
            kept: vec![false; targets.len()],
            start,
            targets,
            state: vec![WHITE; count],
            order: Vec::with_capacity(count),
        };
        let by_age = |a: &NodeIndex, b: &NodeIndex| graph.order_key(*a).cmp(&graph.order_key(*b));
        let mut tops: Vec<NodeIndex> = (0..count as NodeIndex)
            .filter(|&n| !referenced[n as usize])
            .collect();
        tops.sort_unstable_by(by_age);
        for &top in &tops {
            walk.from(top);
        }
        // Whatever is still unreached sits on cycles nothing else reaches.
        let mut rest: Vec<NodeIndex> = (0..count as NodeIndex)
            .filter(|&n| walk.state[n as usize] == WHITE)
            .collect();
        rest.sort_unstable_by(by_age);
        for node in rest {
            if walk.state[node as usize] == WHITE {
                tops.push(node);
                walk.from(node);
            }
        }

        // Number the nodes in walk order and keep only the kept edges.
        let mut rank = vec![0 as NodeIndex; count];
        for (r, &node) in walk.order.iter().enumerate() {
            rank[node as usize] = r as NodeIndex;
        }
        let kept_edges = walk.kept.iter().filter(|&&k| k).count();
        let mut tree = Tree {
            root_children: tops.iter().map(|&n| rank[n as usize]).collect(),
            start: Vec::with_capacity(count + 1),
            children: Vec::with_capacity(kept_edges),
            original: walk.order,
        };
        tree.start.push(0);
        for &node in &tree.original {
            let edges = walk.start[node as usize]..walk.start[node as usize + 1];
            for edge in edges {
                if walk.kept[edge] {
                    tree.children.push(rank[walk.targets[edge] as usize]);
                }
            }
            tree.start.push(tree.children.len());
        }
        tree
    }

    /// The Graph index of `node`.
    pub fn original(&self, node: NodeIndex) -> NodeIndex {
        self.original[node as usize]
    }

    /// The kept children of `node`, in refs order.
    pub fn children(&self, node: NodeIndex) -> &[NodeIndex] {
        &self.children[self.start[node as usize]..self.start[node as usize + 1]]
    }

    /// Whether `node` has kept children.
    pub fn has_children(&self, node: NodeIndex) -> bool {
        !self.children(node).is_empty()
    }

    /// How many nodes the projection covers.
    pub fn node_count(&self) -> usize {
        self.original.len()
    }

    /// How many rows the depth-first projection has (a node appears once per
    /// path from the root), saturating at `u64::MAX`.
    pub fn row_count(&self) -> u64 {
        // Every node is reached, so when each node but the root's children
        // has exactly one kept edge into it, the projection is a forest:
        // one row per node.
        if self.children.len() + self.root_children.len() == self.node_count() {
            return self.node_count() as u64;
        }
        // Rows of a node's subtree, itself included, memoised; the kept
        // edges are acyclic, so a post-order pass computes them all.
        let count = self.node_count();
        let mut rows: Vec<u64> = vec![0; count];
        let mut done = vec![false; count];
        let mut stack: Vec<(NodeIndex, usize)> = Vec::new();
        for &top in &self.root_children {
            if done[top as usize] {
                continue;
            }
            stack.push((top, 0));
            while let Some(frame) = stack.last_mut() {
                let (node, next) = *frame;
                let kids = self.children(node);
                if next == kids.len() {
                    let total = kids
                        .iter()
                        .fold(1u64, |acc, &k| acc.saturating_add(rows[k as usize]));
                    rows[node as usize] = total;
                    done[node as usize] = true;
                    stack.pop();
                    continue;
                }
                frame.1 += 1;
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
    /// (node on the path, next child edge of it to look at)
    stack: Vec<(NodeIndex, usize)>,
    /// The next of the root's children to start from.
    next_top: usize,
}

impl Rows {
    /// The next row, or None after the last.
    pub fn next_row(&mut self) -> Option<Row<'_>> {
        let tree = &self.tree;
        while let Some(frame) = self.stack.last_mut() {
            let (node, edge) = *frame;
            if edge == tree.start[node as usize + 1] {
                self.stack.pop();
                self.path.pop();
                continue;
            }
            frame.1 += 1;
            let child = tree.children[edge];
            self.path.push(child);
            self.stack.push((child, tree.start[child as usize]));
            return Some(Row {
                node: child,
                parent: Some(node),
                depth: self.path.len(),
                path: &self.path,
            });
        }
        let top = *tree.root_children.get(self.next_top)?;
        self.next_top += 1;
        self.path.push(top);
        self.stack.push((top, tree.start[top as usize]));
        Some(Row {
            node: top,
            parent: None,
            depth: 1,
            path: &self.path,
        })
    }

    /// The tree the rows come from.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(spec: &[(&str, &[&str])]) -> Graph {
        let mut graph = Graph::default();
        for (i, (id, refs)) in spec.iter().enumerate() {
            graph.add_node(id, i as i64);
            for r in refs.iter() {
                graph.add_ref(r);
            }
        }
        graph
    }

    /// Rows as "path/with/slashes" strings.
    fn rows(nodes: &Graph) -> Vec<String> {
        let tree = Tree::build(nodes);
        let expected = tree.row_count();
        let original = tree.original.clone();
        let id = |i: NodeIndex| nodes.id(original[i as usize]);
        let mut out = Vec::new();
        let mut cursor = tree.into_rows();
        while let Some(row) = cursor.next_row() {
            let path: Vec<&str> = row.path.iter().map(|&i| id(i)).collect();
            assert_eq!(row.depth, path.len());
            assert_eq!(*path.last().unwrap(), id(row.node));
            let parent = row.parent.map(id);
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
        nodes.created = vec![5, 1, 1];
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
        let tops: Vec<&str> = tree
            .root_children
            .iter()
            .map(|&r| nodes.id(tree.original(r)))
            .collect();
        assert_eq!(tops, ["top", "c1", "d1"]);
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
        let mut nodes = Graph::default();
        for (i, (id, refs)) in spec.iter().enumerate() {
            nodes.add_node(id, i as i64);
            for r in refs {
                nodes.add_ref(r);
            }
        }
        let tree = Tree::build(&nodes);
        assert!(tree.row_count() > 1u64 << 40);
        let error = tree.check_row_limit(10_000_000).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::LimitExceeded);
        let small = graph(&[("a", &["b"]), ("b", &[])]);
        assert_eq!(Tree::build(&small).check_row_limit(2).unwrap(), 2);
    }

    #[test]
    fn empty_graph() {
        let tree = Tree::build(&Graph::default());
        assert!(tree.root_children.is_empty());
        assert_eq!(tree.row_count(), 0);
    }

    #[test]
    fn a_long_chain_does_not_overflow_the_stack() {
        let count = 200_000;
        let mut nodes = Graph::with_capacity(count, count, count * 14);
        for i in 0..count {
            nodes.add_node(&format!("n{i}"), i as i64);
            if i + 1 < count {
                nodes.add_ref(&format!("n{}", i + 1));
            }
        }
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
