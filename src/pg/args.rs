//! Arguments: the parameter types of statements, and the checks every
//! SQL function applies to its arguments before it runs anything.

use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid};

use agent_memory_core::Error;
use agent_memory_core::error::quoted;

use crate::pg::error::{OrReport, SqlResult};

pub const TEXT: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTOID);
pub const INT4: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4OID);
pub const JSONB: PgOid = PgOid::BuiltIn(PgBuiltInOids::JSONBOID);
pub const INTERVAL: PgOid = PgOid::BuiltIn(PgBuiltInOids::INTERVALOID);
pub const TEXT_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::TEXTARRAYOID);
pub const INT8: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT8OID);
pub const INT4_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::INT4ARRAYOID);
pub const JSONB_ARRAY: PgOid = PgOid::BuiltIn(PgBuiltInOids::JSONBARRAYOID);
pub const TIMESTAMPTZ: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIMESTAMPTZOID);
pub const BOOL: PgOid = PgOid::BuiltIn(PgBuiltInOids::BOOLOID);
pub const TID: PgOid = PgOid::BuiltIn(PgBuiltInOids::TIDOID);
pub const XID: PgOid = PgOid::BuiltIn(PgBuiltInOids::XIDOID);

/// Longest session id, user id or key accepted.
pub const MAX_ID_CHARS: usize = 256;

/// Check an identifier argument: present, not empty, not too long.
pub fn checked_id<'a>(what: &str, value: Option<&'a str>) -> SqlResult<&'a str> {
    let value = value.ok_or_else(|| Error::null(what)).or_report()?;
    if value.is_empty() {
        return Err(Error::invalid(format!("{what} must not be empty"))).or_report();
    }
    if value.chars().count() > MAX_ID_CHARS {
        return Err(Error::invalid(format!(
            "{what} {} is longer than {MAX_ID_CHARS} characters",
            quoted(value)
        )))
        .or_report();
    }
    Ok(value)
}

/// A column that cannot be NULL, read without panicking if it somehow is.
pub fn required<T>(value: Option<T>, column: &str) -> SqlResult<T> {
    value
        .ok_or_else(|| Error::internal(format!("column {column} is unexpectedly NULL")))
        .or_report()
}

/// Refuse a non-positive interval.
pub fn checked_positive(what: &str, value: Option<Interval>) -> SqlResult<Option<Interval>> {
    match value {
        Some(i) if i.as_micros() <= 0 && i.months() <= 0 && i.days() <= 0 => {
            Err(Error::invalid(format!("{what} must be positive"))).or_report()
        }
        other => Ok(other),
    }
}

/// A text[] argument without NULL elements.
pub fn checked_list(what: &str, items: Vec<Option<String>>) -> SqlResult<Vec<String>> {
    items
        .into_iter()
        .map(|item| {
            item.ok_or_else(|| Error::null(&format!("an element of {what}")))
                .or_report()
        })
        .collect()
}
