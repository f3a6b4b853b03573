//! The one place where failures become SQL errors.
//!
//! The pure core reports an [`agent_memory_core::Error`] with a kind; this
//! module picks the SQLSTATE for each kind and builds the `ErrorReport` pgrx
//! raises. SQL functions return `SqlResult<T>`: pgrx keeps an `ErrorReport`'s
//! own SQLSTATE, message, detail and hint (any other error type would reach the
//! client as a generic 22000).

use agent_memory_core::{Error, ErrorKind};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

/// What every fallible `#[pg_extern]` returns.
pub type SqlResult<T> = Result<T, ErrorReport>;

/// The PostgreSQL error code for each kind of failure.
pub fn sql_error_code(kind: ErrorKind) -> PgSqlErrorCode {
    use PgSqlErrorCode::*;
    match kind {
        ErrorKind::InvalidParameter => ERRCODE_INVALID_PARAMETER_VALUE,
        ErrorKind::NullValue => ERRCODE_NULL_VALUE_NOT_ALLOWED,
        ErrorKind::NotFound => ERRCODE_NO_DATA_FOUND,
        ErrorKind::LimitExceeded => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
        ErrorKind::Conflict => ERRCODE_UNIQUE_VIOLATION,
        ErrorKind::NotAllowed => ERRCODE_INSUFFICIENT_PRIVILEGE,
        ErrorKind::WrongState => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        ErrorKind::VersionConflict => ERRCODE_T_R_SERIALIZATION_FAILURE,
        ErrorKind::Internal => ERRCODE_INTERNAL_ERROR,
    }
}

/// Turn a core error into the report PostgreSQL raises.
#[track_caller]
pub fn report(error: Error) -> ErrorReport {
    let mut report = ErrorReport::new(sql_error_code(error.kind), error.message, "agent_memory");
    if let Some(detail) = error.detail {
        report = report.set_detail(detail);
    }
    if let Some(hint) = error.hint {
        report = report.set_hint(hint);
    }
    report
}

/// A trigger function called as a plain function: 39P01, as PostgreSQL's
/// own trigger functions answer.
#[track_caller]
pub fn not_called_as_trigger(function: &str) -> ErrorReport {
    ErrorReport::new(
        PgSqlErrorCode::ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED,
        format!("{function}: must be called as trigger"),
        "agent_memory",
    )
}

/// `?`-friendly conversion of the results the shell deals with.
pub trait OrReport<T> {
    fn or_report(self) -> SqlResult<T>;
}

impl<T> OrReport<T> for agent_memory_core::Result<T> {
    #[track_caller]
    fn or_report(self) -> SqlResult<T> {
        self.map_err(report)
    }
}

impl<T> OrReport<T> for Result<T, pgrx::spi::Error> {
    /// An SPI failure that is not a PostgreSQL error (those propagate on their
    /// own) means the extension's own query is wrong: an internal error.
    #[track_caller]
    fn or_report(self) -> SqlResult<T> {
        self.map_err(|e| report(Error::internal(format!("agent_memory query failed: {e}"))))
    }
}

/// The five-character SQLSTATE of an error code (PostgreSQL packs it into six
/// bits per character).
pub fn sqlstate_text(code: PgSqlErrorCode) -> String {
    let packed = code as i32;
    (0..5).map(|i| (((packed >> (6 * i)) & 0x3F) as u8 + b'0') as char).collect()
}

/// Raise an error of `kind` through the normal path and return the SQLSTATE
/// PostgreSQL caught. Used by tests to prove the mapping end to end.
#[cfg(any(test, feature = "pg_test"))]
pub fn raise_and_catch_sqlstate(kind: ErrorKind) -> String {
    use pgrx::pg_sys::panic::CaughtError;
    PgTryBuilder::new(|| {
        report(Error::new(kind, "probe")).report(PgLogLevel::ERROR);
        unreachable!("an ERROR report does not return")
    })
    .catch_others(|caught| match caught {
        CaughtError::PostgresError(e) | CaughtError::ErrorReport(e) => {
            sqlstate_text(e.sql_error_code())
        }
        CaughtError::RustPanic { ereport, .. } => sqlstate_text(ereport.sql_error_code()),
    })
    .execute()
}
