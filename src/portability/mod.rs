//! What a user holds across every kind of memory, as one thing: erased in
//! one call.

/// Erase a user: sessions with all they hold, and the graph owners and
/// file scopes the application keys by the user.
pub mod erase;
