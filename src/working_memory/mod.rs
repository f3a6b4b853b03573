//! Working memory: an entry per (session, node), made of parts stored on
//! their own, read composed with the session's messages, and built from
//! graph memory.

/// Composed reads: the snapshot, the entry, the context bundle.
pub mod compose;
/// Entries built from graph memory: init, focus, structure refresh.
pub mod from_graph;
/// The parts of an entry: read, write, patch, clear.
pub mod parts;
