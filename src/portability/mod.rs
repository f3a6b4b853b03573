//! What a user holds across every kind of memory, as one thing: exported
//! as JSON lines, imported into another database, erased in one call.

/// Erase a user: sessions with all they hold, and the graph owners and
/// file scopes the application keys by the user.
pub mod erase;

/// Take an export's lines back, one per call, each whole or refused.
pub mod import;

// export(): one query over every kind, in SQL (sql/portability.sql).
pgrx::extension_sql_file!(
    "../../sql/portability.sql",
    name = "portability",
    requires = ["tenants"]
);
