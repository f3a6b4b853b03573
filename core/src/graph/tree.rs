//! The tree projection of a graph: a parent's refs are its
//! children, nodes no other node references hang under the virtual root, a
//! node with two parents appears under both, and cycles never loop.
//!
//! [`Tree::build`] resolves the refs into edges and walks the graph
//! depth-first from the root once, numbering the nodes as it reaches them;
//! a cycle that nothing outside it references is attached to the root
//! once, at its earliest node. The rows ([`Tree::into_rows`]) follow every
//! edge except one back to a node on the current path (a ref to an
//! ancestor, or to the node itself), so they are finite. The work is
//! linear in nodes plus refs, and the input is packed ([`Graph`]) so a
//! million nodes cost a handful of allocations, not millions.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::packed::{Packed, Span};
use crate::{Error, Result};

/// Index of a node in the [`Graph`].
pub type NodeIndex = u32;

/// The nodes of one owner as the flat scan reads them, packed: every id
/// and ref is a span of one string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    text: Packed,
    ids: Vec<Span>,
    /// Node i's refs are `refs[ref_start[i]..ref_start[i + 1]]`.
    ref_start: Vec<usize>,
    refs: Vec<Span>,
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
            text: Packed::with_capacity(text_bytes),
            ids: Vec::with_capacity(nodes),
            ref_start,
            refs: Vec::with_capacity(refs),
            created: Vec::with_capacity(nodes),
        }
    }

    /// Add a node (ids unique). `created` (any monotonic unit) orders the
    /// root's children. Its refs follow with [`Graph::add_ref`].
    pub fn add_node(&mut self, id: &str, created: i64) {
        let span = self.text.push(id);
        self.ids.push(span);
        self.created.push(created);
        self.ref_start.push(self.refs.len());
    }

    /// Add a ref (a child id, in order) to the node added last. Unknown ids
    /// are dangling refs and are skipped by the projection.
    pub fn add_ref(&mut self, id: &str) {
        let span = self.text.push(id);
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
        self.text.get(&self.ids[node as usize])
    }

    /// The refs of `node`, in order, as stored (dangling ones included).
    pub fn refs(&self, node: NodeIndex) -> impl Iterator<Item = &str> {
        self.refs_of(node as usize)
    }

    fn refs_of(&self, node: usize) -> impl Iterator<Item = &str> {
        self.refs[self.ref_start[node]..self.ref_start[node + 1]]
            .iter()
            .map(|span| self.text.get(span))
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

/// The projection: every node's children and the root's children.
///
/// Its nodes are numbered in the order a depth-first walk first reaches
/// them (use [`Tree::original`] to find a node in the [`Graph`]), so that
/// producing the rows, which follows the same order, reads memory mostly
/// front to back: at a million nodes that halves the cost of the rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The root's children: nodes no other node references, then the
    /// oldest node of each cycle nothing outside it references, each group
    /// ordered by (created, id).
    pub root_children: Vec<NodeIndex>,
    /// Node i's children are `children[start[i]..start[i + 1]]`: its refs
    /// that name an existing node (itself included), in order, each once.
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

/// Resolved refs in Graph numbering: node i's are
/// `targets[start[i]..start[i + 1]]`.
struct Edges {
    start: Vec<usize>,
    targets: Vec<NodeIndex>,
}

impl Edges {
    fn of(&self, node: NodeIndex) -> &[NodeIndex] {
        &self.targets[self.start[node as usize]..self.start[node as usize + 1]]
    }
}

/// Mark everything reachable from `top`, recording first visits in order
/// (depth first, refs in order).
fn reach(edges: &Edges, top: NodeIndex, seen: &mut [bool], order: &mut Vec<NodeIndex>) {
    if seen[top as usize] {
        return;
    }
    seen[top as usize] = true;
    order.push(top);
    let mut stack: Vec<(NodeIndex, usize)> = vec![(top, 0)];
    while let Some(frame) = stack.last_mut() {
        let (node, next) = *frame;
        let Some(&child) = edges.of(node).get(next) else {
            stack.pop();
            continue;
        };
        frame.1 += 1;
        if !seen[child as usize] {
            seen[child as usize] = true;
            order.push(child);
            stack.push((child, 0));
        }
    }
}

/// The strongly connected components of the nodes in `nodes` (edges to
/// nodes outside are ignored): component[i] for each node, u32::MAX for
/// nodes outside. Tarjan's algorithm, iterative.
fn components(edges: &Edges, nodes: &[NodeIndex], count: usize) -> Vec<u32> {
    const NONE: u32 = u32::MAX;
    let mut inside = vec![false; count];
    for &n in nodes {
        inside[n as usize] = true;
    }
    let mut index = vec![NONE; count];
    let mut low = vec![0u32; count];
    let mut on_stack = vec![false; count];
    let mut component = vec![NONE; count];
    let mut stack: Vec<NodeIndex> = Vec::new();
    let mut next_index = 0u32;
    let mut next_component = 0u32;
    for &root in nodes {
        if index[root as usize] != NONE {
            continue;
        }
        let mut calls: Vec<(NodeIndex, usize)> = vec![(root, 0)];
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(frame) = calls.last_mut() {
            let (node, next) = *frame;
            if let Some(&child) = edges.of(node).get(next) {
                frame.1 += 1;
                if !inside[child as usize] {
                    continue;
                }
                if index[child as usize] == NONE {
                    index[child as usize] = next_index;
                    low[child as usize] = next_index;
                    next_index += 1;
                    stack.push(child);
                    on_stack[child as usize] = true;
                    calls.push((child, 0));
                } else if on_stack[child as usize] {
                    low[node as usize] = low[node as usize].min(index[child as usize]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent as usize] = low[parent as usize].min(low[node as usize]);
            }
            if low[node as usize] == index[node as usize] {
                while let Some(member) = stack.pop() {
                    on_stack[member as usize] = false;
                    component[member as usize] = next_component;
                    if member == node {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
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

        // Resolved refs: known ids, each once (seen[child] == i marks a
        // child already taken for node i). A ref of a node to itself is a
        // cycle of one: the node lists itself as a child, and the rows do
        // not follow it, but it does not keep the node from the root.
        let mut referenced = vec![false; count];
        let mut seen = vec![NodeIndex::MAX; count];
        let mut edges = Edges {
            start: Vec::with_capacity(count + 1),
            targets: Vec::with_capacity(graph.refs.len()),
        };
        edges.start.push(0);
        for node in 0..count {
            for id in graph.refs_of(node) {
                match index.get(id) {
                    Some(&child) if seen[child as usize] != node as u32 => {
                        seen[child as usize] = node as u32;
                        edges.targets.push(child);
                        referenced[child as usize] |= child as usize != node;
                    }
                    _ => {}
                }
            }
            edges.start.push(edges.targets.len());
        }
        drop(index);
        drop(seen);

        let by_age = |a: &NodeIndex, b: &NodeIndex| graph.order_key(*a).cmp(&graph.order_key(*b));
        let mut tops: Vec<NodeIndex> =
            (0..count as NodeIndex).filter(|&n| !referenced[n as usize]).collect();
        tops.sort_unstable_by(by_age);
        let mut reached = vec![false; count];
        let mut order: Vec<NodeIndex> = Vec::with_capacity(count);
        for &top in &tops {
            reach(&edges, top, &mut reached, &mut order);
        }

        // What is left is only reachable through cycles. Each cycle that
        // nothing outside it references (a strongly connected component
        // with no edge into it) hangs under the root at its oldest node;
        // everything else left is reachable from those.
        let unreached: Vec<NodeIndex> =
            (0..count as NodeIndex).filter(|&n| !reached[n as usize]).collect();
        if !unreached.is_empty() {
            let component = components(&edges, &unreached, count);
            let mut entered = vec![false; count];
            let mut oldest: HashMap<u32, NodeIndex> = HashMap::new();
            for &node in &unreached {
                let own = component[node as usize];
                for &child in edges.of(node) {
                    let theirs = component[child as usize];
                    if theirs != own && theirs != u32::MAX {
                        entered[theirs as usize] = true;
                    }
                }
                let slot = oldest.entry(own).or_insert(node);
                if by_age(&node, slot).is_lt() {
                    *slot = node;
                }
            }
            let mut cycle_tops: Vec<NodeIndex> = oldest
                .into_iter()
                .filter(|(c, _)| !entered[*c as usize])
                .map(|(_, node)| node)
                .collect();
            cycle_tops.sort_unstable_by(by_age);
            for top in cycle_tops {
                tops.push(top);
                reach(&edges, top, &mut reached, &mut order);
            }
        }

        // Number the nodes in walk order.
        let mut rank = vec![0 as NodeIndex; count];
        for (r, &node) in order.iter().enumerate() {
            rank[node as usize] = r as NodeIndex;
        }
        let mut tree = Tree {
            root_children: tops.iter().map(|&n| rank[n as usize]).collect(),
            start: Vec::with_capacity(count + 1),
            children: Vec::with_capacity(edges.targets.len()),
            original: order,
        };
        tree.start.push(0);
        for &node in &tree.original {
            tree.children.extend(edges.of(node).iter().map(|&child| rank[child as usize]));
            tree.start.push(tree.children.len());
        }
        tree
    }

    /// The Graph index of `node`.
    pub fn original(&self, node: NodeIndex) -> NodeIndex {
        self.original[node as usize]
    }

    /// The children of `node`, in refs order.
    pub fn children(&self, node: NodeIndex) -> &[NodeIndex] {
        &self.children[self.start[node as usize]..self.start[node as usize + 1]]
    }

    /// Whether `node` has children.
    pub fn has_children(&self, node: NodeIndex) -> bool {
        !self.children(node).is_empty()
    }

    /// How many nodes the projection covers.
    pub fn node_count(&self) -> usize {
        self.original.len()
    }

    /// How many rows the projection has and how many ids all their paths
    /// hold together (both saturating), when no node is its own descendant
    /// through another; None when refs form such a cycle (the walk then
    /// depends on the path).
    /// Linear in nodes and refs: each node's count of paths to it is the sum
    /// of its parents'.
    pub fn acyclic_size(&self) -> Option<(u64, u64)> {
        let count = self.node_count();
        // A node's ref to itself is never followed (the node is on its own
        // path), so it adds no row and is no cycle here.
        let mut parents_left = vec![0u32; count];
        for node in 0..count as NodeIndex {
            for &child in self.children(node) {
                parents_left[child as usize] += u32::from(child != node);
            }
        }
        let mut paths = vec![0u64; count];
        let mut ids = vec![0u64; count];
        let mut ready: Vec<NodeIndex> = Vec::new();
        for &top in &self.root_children {
            paths[top as usize] = 1;
            ids[top as usize] = 1;
            if parents_left[top as usize] == 0 {
                ready.push(top);
            }
        }
        let (mut rows, mut path_ids, mut done) = (0u64, 0u64, 0usize);
        while let Some(node) = ready.pop() {
            done += 1;
            let (p, i) = (paths[node as usize], ids[node as usize]);
            rows = rows.saturating_add(p);
            path_ids = path_ids.saturating_add(i);
            for &child in self.children(node).iter().filter(|&&child| child != node) {
                let c = child as usize;
                paths[c] = paths[c].saturating_add(p);
                ids[c] = ids[c].saturating_add(i).saturating_add(p);
                parents_left[c] -= 1;
                if parents_left[c] == 0 {
                    ready.push(child);
                }
            }
        }
        (done == count).then_some((rows, path_ids))
    }

    /// The rows of the depth-first projection, in order, refusing to go
    /// past `max_rows` rows or `max_path_ids` ids in all paths together (a
    /// web of shared children multiplies the rows, a long chain the ids).
    /// Without cycles the size is known first, and a projection too large
    /// is refused before any row is made.
    pub fn into_rows(self, max_rows: u64, max_path_ids: u64) -> Result<Rows> {
        if let Some((rows, path_ids)) = self.acyclic_size()
            && (rows > max_rows || path_ids > max_path_ids)
        {
            return Err(too_large(max_rows, max_path_ids).with_detail(format!(
                "it would have {rows} rows and {path_ids} ids in their paths; a node appears once under each of its parents, with its whole subtree"
            )));
        }
        let count = self.node_count();
        Ok(Rows {
            tree: self,
            path: Vec::new(),
            on_path: vec![false; count],
            stack: Vec::new(),
            next_top: 0,
            rows: 0,
            path_ids: 0,
            max_rows,
            max_path_ids,
        })
    }
}

fn too_large(max_rows: u64, max_path_ids: u64) -> Error {
    Error::limit(format!(
        "the tree projection has more than {max_rows} rows or {max_path_ids} ids in its paths"
    ))
    .with_hint("use graph_tree(), which lists each parent's children once, or raise agent_memory.max_tree_rows")
}

/// A cursor over the depth-first projection: it keeps only the current
/// path, so a projection of millions of rows is produced one row at a time.
/// A ref to a node already on the path (an ancestor) is not followed.
#[derive(Debug, Clone)]
pub struct Rows {
    tree: Tree,
    path: Vec<NodeIndex>,
    on_path: Vec<bool>,
    /// (node on the path, next child of it to look at)
    stack: Vec<(NodeIndex, usize)>,
    /// The next of the root's children to start from.
    next_top: usize,
    rows: u64,
    path_ids: u64,
    max_rows: u64,
    max_path_ids: u64,
}

impl Rows {
    /// The next row, None after the last, or an error once the projection
    /// goes past its limits.
    pub fn next_row(&mut self) -> Result<Option<Row<'_>>> {
        let tree = &self.tree;
        let mut entered = None;
        while let Some(frame) = self.stack.last_mut() {
            let (node, next) = *frame;
            let Some(&child) = tree.children(node).get(next) else {
                self.stack.pop();
                self.path.pop();
                self.on_path[node as usize] = false;
                continue;
            };
            frame.1 += 1;
            if self.on_path[child as usize] {
                continue; // a ref back to an ancestor is not followed
            }
            entered = Some((child, Some(node)));
            break;
        }
        let (node, parent) = match entered {
            Some(step) => step,
            None => {
                let Some(&top) = tree.root_children.get(self.next_top) else {
                    return Ok(None);
                };
                self.next_top += 1;
                (top, None)
            }
        };
        self.path.push(node);
        self.on_path[node as usize] = true;
        self.stack.push((node, 0));
        self.rows += 1;
        self.path_ids += self.path.len() as u64;
        if self.rows > self.max_rows || self.path_ids > self.max_path_ids {
            return Err(too_large(self.max_rows, self.max_path_ids).with_detail(
                "a node appears once under each of its parents, with its whole subtree",
            ));
        }
        Ok(Some(Row { node, parent, depth: self.path.len(), path: &self.path }))
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
        let original = tree.original.clone();
        let id = |i: NodeIndex| nodes.id(original[i as usize]);
        let mut out = Vec::new();
        let mut cursor = tree.into_rows(u64::MAX, u64::MAX).unwrap();
        while let Some(row) = cursor.next_row().unwrap() {
            let path: Vec<&str> = row.path.iter().map(|&i| id(i)).collect();
            assert_eq!(row.depth, path.len());
            assert_eq!(*path.last().unwrap(), id(row.node));
            let parent = row.parent.map(id);
            assert_eq!(parent, path.len().checked_sub(2).map(|i| path[i]));
            // A path never names a node twice.
            let mut unique = path.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), path.len(), "{path:?}");
            out.push(path.join("/"));
        }
        out
    }

    /// The root's children and each node's children, by id.
    fn children(nodes: &Graph) -> Vec<String> {
        let tree = Tree::build(nodes);
        let id = |i: NodeIndex| nodes.id(tree.original(i));
        let mut out = vec![format!(
            "root: {}",
            tree.root_children.iter().map(|&c| id(c)).collect::<Vec<_>>().join(" ")
        )];
        let mut lines: Vec<String> = (0..tree.node_count() as NodeIndex)
            .filter(|&n| tree.has_children(n))
            .map(|n| {
                let kids: Vec<&str> = tree.children(n).iter().map(|&c| id(c)).collect();
                format!("{}: {}", id(n), kids.join(" "))
            })
            .collect();
        lines.sort();
        out.extend(lines);
        out
    }

    #[test]
    fn refs_are_children_and_unreferenced_nodes_hang_under_the_root() {
        let nodes = graph(&[("a", &["b", "c"]), ("b", &["d"]), ("c", &[]), ("d", &[]), ("e", &[])]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/d", "a/c", "e"]);
        assert_eq!(children(&nodes), ["root: a e", "a: b c", "b: d"]);
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
    fn dangling_refs_are_skipped_and_a_self_ref_is_a_cycle_of_one() {
        let nodes = graph(&[("a", &["gone", "a", "b", "b"]), ("b", &[])]);
        assert_eq!(rows(&nodes), ["a", "a/b"]);
        assert_eq!(children(&nodes), ["root: a", "a: a b"]);
        // The rows never follow it, so their size is still known first.
        let tree = Tree::build(&nodes);
        assert_eq!(tree.acyclic_size(), Some((2, 3)));
        // Only itself refers to b: it still hangs under the root.
        let nodes = graph(&[("a", &[]), ("b", &["b", "c"]), ("c", &[])]);
        assert_eq!(rows(&nodes), ["a", "b", "b/c"]);
        assert_eq!(children(&nodes), ["root: a b", "b: b c"]);
    }

    #[test]
    fn a_ref_back_to_an_ancestor_is_not_followed() {
        // a -> b -> c -> a: a is referenced, so nothing is unreferenced;
        // the cycle is attached to the root once, at its earliest node.
        let nodes = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/c"]);
        // The children map keeps every ref: it is a map, not a walk.
        assert_eq!(children(&nodes), ["root: a", "a: b", "b: c", "c: a"]);
        // A cycle below a reachable node: r -> x -> y -> x.
        let nodes = graph(&[("r", &["x"]), ("x", &["y"]), ("y", &["x"])]);
        assert_eq!(rows(&nodes), ["r", "r/x", "r/x/y"]);
    }

    #[test]
    fn ancestors_are_checked_along_each_path() {
        // b and c reference each other under a: below b, c's ref to b goes
        // back up the path; below c, b's ref to c does. Each node still
        // appears under both of its parents.
        let nodes = graph(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &["b"])]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/c", "a/c", "a/c/b"]);
        // Creation order does not change it.
        let nodes = graph(&[("c", &["b"]), ("b", &["c"]), ("a", &["b", "c"])]);
        assert_eq!(rows(&nodes), ["a", "a/b", "a/b/c", "a/c", "a/c/b"]);
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
        assert_eq!(rows(&nodes), ["top", "c1", "c1/c2", "c1/c2/tail", "d1", "d1/d2"]);
        assert_eq!(children(&nodes)[0], "root: top c1 d1");
    }

    #[test]
    fn only_a_cycle_is_attached_not_what_hangs_below_it() {
        // tail is older than the cycle that references it: the cycle, not
        // tail, goes under the root.
        let nodes = graph(&[("tail", &[]), ("c1", &["c2"]), ("c2", &["c1", "tail"])]);
        assert_eq!(rows(&nodes), ["c1", "c1/c2", "c1/c2/tail"]);
        // A cycle fed by another cycle hangs below it, not under the root.
        let nodes =
            graph(&[("x1", &["x2"]), ("x2", &["x1", "y1"]), ("y1", &["y2"]), ("y2", &["y1"])]);
        assert_eq!(children(&nodes)[0], "root: x1");
        assert_eq!(rows(&nodes), ["x1", "x1/x2", "x1/x2/y1", "x1/x2/y1/y2"]);
    }

    #[test]
    fn dense_cycles_never_repeat_a_node_on_a_path() {
        let nodes = graph(&[
            ("a", &["b", "c"]),
            ("b", &["c", "a"]),
            ("c", &["b", "d"]),
            ("d", &["a", "b"]),
        ]);
        assert_eq!(
            rows(&nodes),
            ["a", "a/b", "a/b/c", "a/b/c/d", "a/c", "a/c/b", "a/c/d", "a/c/d/b"]
        );
    }

    #[test]
    fn limits_stop_the_rows() {
        // A ladder of diamonds doubles the rows at every level.
        let mut nodes = Graph::default();
        for level in 0..40 {
            for side in ["l", "r"] {
                nodes.add_node(&format!("{side}{level}"), level);
                nodes.add_ref(&format!("l{}", level + 1));
                nodes.add_ref(&format!("r{}", level + 1));
            }
        }
        nodes.add_node("l40", 40);
        nodes.add_node("r40", 40);
        // Without cycles the size is known before any row: 2^42 - 2 rows.
        let tree = Tree::build(&nodes);
        assert_eq!(tree.acyclic_size().map(|(rows, _)| rows), Some((1u64 << 42) - 2));
        let error = tree.into_rows(1000, u64::MAX).unwrap_err();
        assert_eq!(error.kind, crate::ErrorKind::LimitExceeded);
        assert!(error.detail.as_deref().unwrap_or_default().contains("4398046511102 rows"));
        // With a cycle (the last level back to the first) the rows stop at
        // the limit.
        nodes.add_ref("l0");
        let tree = Tree::build(&nodes);
        assert_eq!(tree.acyclic_size(), None);
        let mut cursor = tree.into_rows(1000, u64::MAX).unwrap();
        let mut produced = 0;
        let error = loop {
            match cursor.next_row() {
                Ok(Some(_)) => produced += 1,
                Ok(None) => panic!("the ladder ended"),
                Err(error) => break error,
            }
        };
        assert_eq!(produced, 1000);
        assert_eq!(error.kind, crate::ErrorKind::LimitExceeded);
        // A long chain: few rows, many ids in their paths, known first.
        let chain = graph(&[("a", &["b"]), ("b", &["c"]), ("c", &[])]);
        assert_eq!(Tree::build(&chain).acyclic_size(), Some((3, 6)));
        assert!(Tree::build(&chain).into_rows(10, 5).is_err());
        let mut cursor = Tree::build(&chain).into_rows(10, 6).unwrap();
        for _ in 0..3 {
            assert!(cursor.next_row().unwrap().is_some());
        }
        assert!(cursor.next_row().unwrap().is_none());
    }

    #[test]
    fn acyclic_size_counts_what_the_walk_makes() {
        // Shared children, two tops, a diamond: the count equals the walk.
        let dag = graph(&[
            ("a", &["b", "c"]),
            ("b", &["d"]),
            ("c", &["d"]),
            ("d", &["e"]),
            ("e", &[]),
            ("f", &["d"]),
        ]);
        let tree = Tree::build(&dag);
        let size = tree.acyclic_size().unwrap();
        let mut cursor = tree.into_rows(u64::MAX, u64::MAX).unwrap();
        let (mut rows, mut ids) = (0u64, 0u64);
        while let Some(row) = cursor.next_row().unwrap() {
            rows += 1;
            ids += row.path.len() as u64;
        }
        assert_eq!(size, (rows, ids));
        assert_eq!(rows, 10);
    }

    #[test]
    fn empty_graph() {
        let tree = Tree::build(&Graph::default());
        assert!(tree.root_children.is_empty());
        assert!(tree.into_rows(1, 1).unwrap().next_row().unwrap().is_none());
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
        let mut deepest = 0;
        let mut cursor = tree.into_rows(u64::MAX, u64::MAX).unwrap();
        while let Some(row) = cursor.next_row().unwrap() {
            deepest = deepest.max(row.depth);
        }
        assert_eq!(deepest, count);
        // A cycle of the same length.
        let mut ring = Graph::default();
        for i in 0..count {
            ring.add_node(&format!("n{i}"), i as i64);
            ring.add_ref(&format!("n{}", (i + 1) % count));
        }
        let tree = Tree::build(&ring);
        assert_eq!(tree.root_children.len(), 1);
        assert_eq!(tree.node_count(), count);
    }
}
