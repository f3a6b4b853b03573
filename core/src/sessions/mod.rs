//! Rules of sessions and what expires with them: key-value writes, the
//! word budget and how values count words, and the sensitive-data guard.

/// The word budget of a session's key-value memory.
pub mod budget;
/// How the cleanup worker sizes its batches.
pub mod cleanup;
/// Sizes and the shape of a key-value batch.
pub mod kv;
/// Sensitive data in text an agent asks to remember.
pub mod sensitive;
/// How many words a value holds.
pub mod words;
