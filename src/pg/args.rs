//! Arguments: the parameter types of statements, and the checks every
//! SQL function applies to its arguments before it runs anything.

use pgrx::prelude::*;
use pgrx::{PgBuiltInOids, PgOid};

use agent_memory_core::files::memory_tool as files;
use agent_memory_core::{Error, args};

use crate::pg::error::{OrReport, SqlResult};

/// The built-in types statements take their parameters as.
macro_rules! parameter_types {
    ($($name:ident = $oid:ident),* $(,)?) => {
        $(pub const $name: PgOid = PgOid::BuiltIn(PgBuiltInOids::$oid);)*
    };
}

parameter_types! {
    TEXT = TEXTOID, INT4 = INT4OID, INT8 = INT8OID, BOOL = BOOLOID, JSONB = JSONBOID,
    INTERVAL = INTERVALOID, TIMESTAMPTZ = TIMESTAMPTZOID, TID = TIDOID, XID = XIDOID,
    TEXT_ARRAY = TEXTARRAYOID, INT4_ARRAY = INT4ARRAYOID, JSONB_ARRAY = JSONBARRAYOID,
    FLOAT4_ARRAY = FLOAT4ARRAYOID,
}

/// Check an identifier argument: present, not empty, not too long.
#[inline]
pub fn checked_id<'a>(what: &str, value: Option<&'a str>) -> SqlResult<&'a str> {
    args::check_id(what, value).or_report()
}

/// An id that may be NULL, checked as `checked_id` checks it when given.
pub fn checked_optional_id<'a>(what: &str, value: Option<&'a str>) -> SqlResult<Option<&'a str>> {
    value.map(|id| checked_id(what, Some(id))).transpose()
}

/// The keys memory is held under, when given: each checked as the
/// functions that write under it check it (`checked_id`, a graph's owner,
/// a memory-tool scope).
pub fn checked_keys<'a>(
    session_id: Option<&'a str>, user_id: Option<&'a str>, owner: Option<&'a str>,
    scope: Option<&'a str>,
) -> SqlResult<args::Keys<'a>> {
    Ok(args::Keys {
        session_id: checked_optional_id("session_id", session_id)?,
        user_id: checked_optional_id("user_id", user_id)?,
        owner: owner
            .map(|owner| agent_memory_core::graph::check_owner(owner).map(|()| owner))
            .transpose()
            .or_report()?,
        scope: scope
            .map(|scope| files::check_scope(scope).map(|()| scope))
            .transpose()
            .or_report()?,
    })
}

/// A column that cannot be NULL, read without panicking if it somehow is.
pub fn required<T>(value: Option<T>, column: &str) -> SqlResult<T> {
    value
        .ok_or_else(|| Error::internal(format!("column {column} is unexpectedly NULL")))
        .or_report()
}

/// Refuse an interval that is not positive as a whole, or is over the
/// longest duration (see `agent_memory_core::args::check_duration`).
pub fn checked_positive(what: &str, value: Option<Interval>) -> SqlResult<Option<Interval>> {
    if let Some(i) = &value {
        args::check_duration(what, i.months(), i.days(), i.micros()).or_report()?;
    }
    Ok(value)
}

/// A text[] argument without NULL elements.
pub fn checked_list(what: &str, items: Vec<Option<String>>) -> SqlResult<Vec<String>> {
    args::check_list(what, items).or_report()
}
