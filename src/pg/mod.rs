//! The floor every capability stands on: how a statement is prepared, run
//! and read, how arguments are checked and values converted, how a failure
//! becomes a SQLSTATE, and the settings, tenants and notifications every
//! capability shares.

/// Argument checks and the parameter types of statements.
pub mod args;
/// SQL functions declared by hand as C functions.
pub mod c_functions;
/// Living beside Citus: calls it must not delegate.
pub mod citus;
/// Datums built by the extension for large results.
pub mod datums;
/// Every failure becomes a specific SQLSTATE here, and only here.
pub mod error;
/// Facts about the installed library (version).
pub mod meta;
/// Change notifications: sent at commit, only while someone listens.
pub mod notify;
/// Prepared plans kept per backend, and running them.
pub mod plans;
/// SQL of full-text search: which items match a query.
pub mod search;
/// Every `agent_memory.*` setting (GUC), defined in one place.
pub mod settings;
/// Large query results read row by row as the executor produces them.
pub mod stream;
/// A body run in a subtransaction, its error caught as PL/pgSQL catches it.
pub mod subtransaction;
/// Tenants: whose rows a caller sees under `agent_memory.tenant_isolation`.
pub mod tenants;
