//! Facts about the loaded library.

use pgrx::prelude::*;

/// The version this shared library was built as (from Cargo.toml). After an
/// upgrade of the files but before `ALTER EXTENSION agent_memory UPDATE`, it
/// differs from `pg_extension.extversion`, which is how to spot that state.
pub fn library_version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

// STABLE, not IMMUTABLE: replacing the .so changes the answer without any
// catalog change, so it must not be folded into plans or indexes.
// It runs no SQL: no search_path to pin.
#[pg_extern(stable, parallel_safe, name = "version")]
fn agent_memory_version() -> &'static str {
    library_version()
}
