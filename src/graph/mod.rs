//! Graph memory: markdown nodes per owner, linked by refs, with immutable
//! version snapshots, read and written as nodes, as markdown files, and as
//! a tree.

/// Graph memory as markdown files: export, import, one node.
pub mod markdown;
/// Nodes: create, write, read, versions.
pub mod nodes;
/// The tree projection of graph memory, as rows or JSON.
pub mod tree;
