//! Memory files: path-addressed files in scopes, answered with a JSON
//! envelope by the memory tool, and in Claude's own dialect.

/// Claude's memory tool (`memory_20250818`) over the same files.
pub mod claude_memory;
/// The memory tool: requests `{path, command, ...}` and their envelope.
pub mod memory_tool;
/// The file store both dialects share: scopes, files, directories.
pub mod store;
/// Earlier versions of files, kept per agent_memory.history_retention.
pub mod versions;
