//! Running a body in an internal subtransaction, as PL/pgSQL runs an
//! EXCEPTION block: an error rolls back what the body did and comes back as
//! a value; the caller's transaction goes on.

use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use agent_memory_core::Error;

use crate::pg::error::sqlstate_text;

/// How a body failed: its SQLSTATE, message, detail and hint.
#[derive(Debug, Clone)]
pub struct Failure {
    pub sqlstate: String,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

/// A refusal decided without running the body fails as the body would.
impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        Failure {
            sqlstate: error.kind.sqlstate().to_string(),
            message: error.message,
            detail: error.detail,
            hint: error.hint,
        }
    }
}

/// Errors that end the caller's statement or transaction rather than the
/// body: a cancel, a timeout, and the failures a client retries the whole
/// transaction for. They roll back the subtransaction and are raised again.
fn is_caller_limit(code: PgSqlErrorCode) -> bool {
    matches!(
        code,
        PgSqlErrorCode::ERRCODE_QUERY_CANCELED
            | PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE
            | PgSqlErrorCode::ERRCODE_T_R_SERIALIZATION_FAILURE
            | PgSqlErrorCode::ERRCODE_T_R_DEADLOCK_DETECTED
    )
}

/// Run `body` in an internal subtransaction: released when it returns,
/// rolled back when it raises an error, which comes back as a [`Failure`]
/// (see [`is_caller_limit`] for those raised again).
pub fn in_subtransaction<R>(
    body: impl FnOnce() -> R + std::panic::UnwindSafe,
) -> Result<R, Failure> {
    // SAFETY: the PL/pgSQL pattern: remember the memory context and resource
    // owner, begin, and on either outcome release or roll back the
    // subtransaction and restore both.
    unsafe {
        let context = pg_sys::CurrentMemoryContext;
        let owner = pg_sys::CurrentResourceOwner;
        pg_sys::BeginInternalSubTransaction(std::ptr::null());
        pg_sys::MemoryContextSwitchTo(context);
        let outcome = PgTryBuilder::new(|| Ok(body()))
            .catch_others(|caught| {
                let report = match &caught {
                    CaughtError::PostgresError(e) | CaughtError::ErrorReport(e) => e,
                    CaughtError::RustPanic { ereport, .. } => ereport,
                };
                let code = report.sql_error_code();
                Err(if is_caller_limit(code) {
                    Escape::Raise(Box::new(caught))
                } else {
                    Escape::Failed(Failure {
                        sqlstate: sqlstate_text(code),
                        message: report.message().to_string(),
                        detail: report.detail().map(str::to_string),
                        hint: report.hint().map(str::to_string),
                    })
                })
            })
            .execute();
        pg_sys::MemoryContextSwitchTo(context);
        if outcome.is_ok() {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::FlushErrorState();
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
        match outcome {
            Ok(result) => Ok(result),
            Err(Escape::Failed(failure)) => Err(failure),
            Err(Escape::Raise(caught)) => caught.rethrow(),
        }
    }
}

/// How a body run in a subtransaction failed.
enum Escape {
    /// Its own error: the caller goes on.
    Failed(Failure),
    /// A caller's limit, raised again once the subtransaction is gone.
    Raise(Box<CaughtError>),
}
