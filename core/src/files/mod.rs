//! Rules of path-addressed memory files: the memory tool's paths, requests
//! and envelope, and Claude's `memory_20250818` dialect over the same files.

/// Claude's memory tool over the memory tool's files.
pub mod claude_memory;
/// Paths, requests and the JSON envelope of the memory tool.
pub mod memory_tool;
