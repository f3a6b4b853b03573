//! The pure core of `agent_memory`.
//!
//! Everything here is plain Rust: no PostgreSQL types, no SPI, no pgrx. The
//! extension's SQL functions (in the `agent_memory` crate) are thin shells that
//! translate arguments, call into this crate, and turn its [`Error`] into an
//! SQL error in one place. Each module is one capability with its own unit
//! tests, runnable with `cargo test -p agent_memory_core` and no server.

pub mod args;
pub mod budget;
pub mod claude_memory;
pub mod error;
pub mod graph;
pub mod graph_import;
pub mod jsonb;
pub mod kv;
pub mod markdown;
pub mod memory_files;
pub mod messages;
pub mod packed;
pub mod sensitive;
pub mod tenant;
pub mod time;
pub mod tree;
pub mod words;
pub mod working_memory;

pub use error::{Error, ErrorKind, Result};
