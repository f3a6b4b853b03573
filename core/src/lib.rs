//! The pure core of `agent_memory`: every rule that needs no database.
//!
//! Everything here is plain Rust: no PostgreSQL types, no SPI, no pgrx.
//! Validation, parsing, path rules, the envelopes, the tool definitions,
//! budgets and trim decisions live here with their unit tests, runnable
//! with `cargo test -p agent_memory_core` and no server. The extension
//! (`src/`) runs the statements, holds the locks and converts between SQL
//! values and these types; it turns an [`Error`] into an SQL error with the
//! SQLSTATE of its [`ErrorKind`] in one place.

// The floor every room stands on: errors and their SQLSTATEs, argument
// checks, the binary jsonb format, packed strings, a transaction's pending
// notifications, tenant keys, time and what every tool definition shares,
// and the versions a write can be conditioned on.
pub mod args;
pub mod error;
pub mod jsonb;
pub mod notify;
pub mod packed;
pub mod tenant;
pub mod time;
pub mod tool;
pub mod versions;

// One module per capability, named as its folder in the extension's `src/`.
pub mod files;
pub mod graph;
pub mod messages;
pub mod portability;
pub mod recall;
pub mod sessions;
pub mod working_memory;

pub use error::{Error, ErrorKind, Result};
