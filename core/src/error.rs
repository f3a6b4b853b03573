//! Errors of the pure core and the SQLSTATE each kind becomes.
//!
//! The core never decides how an error is raised; it only says what kind of
//! failure it is. The extension maps every [`ErrorKind`] to a PostgreSQL
//! SQLSTATE in one place (`src/pg/error.rs`), and its tests check that the code a
//! client sees is the one [`ErrorKind::sqlstate`] documents here.

use std::fmt;

/// What went wrong, at the granularity a client can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// An argument has a value the function cannot accept.
    InvalidParameter,
    /// A required argument is NULL.
    NullValue,
    /// The thing asked for does not exist (or has expired).
    NotFound,
    /// A size, count or budget limit would be exceeded.
    LimitExceeded,
    /// The write conflicts with existing data (an id owned by someone else).
    Conflict,
    /// The caller may not do this (read-only object, another tenant).
    NotAllowed,
    /// The object is not in a state that allows the operation.
    WrongState,
    /// A write's precondition failed: the item is not at the version (or
    /// content) the writer last read, so it was changed meanwhile.
    VersionConflict,
    /// A bug or an unexpected condition inside the extension.
    Internal,
}

impl ErrorKind {
    /// Every kind, for tests and documentation.
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::InvalidParameter,
        ErrorKind::NullValue,
        ErrorKind::NotFound,
        ErrorKind::LimitExceeded,
        ErrorKind::Conflict,
        ErrorKind::NotAllowed,
        ErrorKind::WrongState,
        ErrorKind::VersionConflict,
        ErrorKind::Internal,
    ];

    /// The five-character SQLSTATE a client sees for this kind.
    pub const fn sqlstate(self) -> &'static str {
        match self {
            ErrorKind::InvalidParameter => "22023", // invalid_parameter_value
            ErrorKind::NullValue => "22004",        // null_value_not_allowed
            ErrorKind::NotFound => "P0002",         // no_data_found
            ErrorKind::LimitExceeded => "54000",    // program_limit_exceeded
            ErrorKind::Conflict => "23505",         // unique_violation
            ErrorKind::NotAllowed => "42501",       // insufficient_privilege
            ErrorKind::WrongState => "55000",       // object_not_in_prerequisite_state
            ErrorKind::VersionConflict => "40001",  // serialization_failure
            ErrorKind::Internal => "XX000",         // internal_error
        }
    }
}

/// A failure with a message that names the offending value, and optionally a
/// detail and a hint (the three fields of a PostgreSQL error report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into(), detail: None, hint: None }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParameter, message)
    }

    pub fn null(argument: &str) -> Self {
        Self::new(ErrorKind::NullValue, format!("{argument} must not be null"))
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    pub fn limit(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::LimitExceeded, message)
    }

    /// A value a function would build in memory is past
    /// `agent_memory.max_result_bytes` (`max_bytes`): `what_takes` names
    /// it, with its verb ("the tree takes").
    pub fn too_large_to_build(what_takes: &str, max_bytes: usize) -> Self {
        Self::limit(format!("{what_takes} more than {max_bytes} bytes as one JSON value"))
            .with_detail("agent_memory.max_result_bytes limits a value a function builds in memory")
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    pub fn not_allowed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotAllowed, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Longest excerpt of a user value that an error message repeats.
pub const QUOTE_LIMIT: usize = 64;

/// Quote a user-supplied value for an error message, PostgreSQL style
/// (`"value"`), cut to [`QUOTE_LIMIT`] characters so a huge argument never
/// floods the log. Control characters are escaped so a message stays one line.
pub fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(QUOTE_LIMIT) + 4);
    out.push('"');
    for (count, ch) in value.chars().enumerate() {
        if count == QUOTE_LIMIT {
            out.push('…');
            break;
        }
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_kind_has_a_distinct_well_formed_sqlstate() {
        let codes: HashSet<_> = ErrorKind::ALL.iter().map(|k| k.sqlstate()).collect();
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        for code in codes {
            assert_eq!(code.len(), 5, "{code}");
            assert!(code.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()));
        }
    }

    #[test]
    fn documented_codes() {
        assert_eq!(ErrorKind::InvalidParameter.sqlstate(), "22023");
        assert_eq!(ErrorKind::NotFound.sqlstate(), "P0002");
        assert_eq!(ErrorKind::LimitExceeded.sqlstate(), "54000");
        assert_eq!(ErrorKind::Conflict.sqlstate(), "23505");
        assert_eq!(ErrorKind::NotAllowed.sqlstate(), "42501");
        assert_eq!(ErrorKind::VersionConflict.sqlstate(), "40001");
    }

    #[test]
    fn builders_keep_kind_message_detail_and_hint() {
        let e = Error::limit("value has 700 words")
            .with_detail("the budget is 600 words")
            .with_hint("raise agent_memory.kv_word_budget");
        assert_eq!(e.kind, ErrorKind::LimitExceeded);
        assert_eq!(e.to_string(), "value has 700 words");
        assert_eq!(e.detail.as_deref(), Some("the budget is 600 words"));
        assert_eq!(e.hint.as_deref(), Some("raise agent_memory.kv_word_budget"));
        assert_eq!(Error::null("session_id").message, "session_id must not be null");
    }

    #[test]
    fn quoted_escapes_and_truncates() {
        assert_eq!(quoted("abc"), "\"abc\"");
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(quoted("line\nbreak"), "\"line\\nbreak\"");
        let long = "x".repeat(200);
        let q = quoted(&long);
        assert_eq!(q.chars().count(), QUOTE_LIMIT + 3);
        assert!(q.ends_with("…\""));
        // Multi-byte characters are cut on a character boundary.
        assert_eq!(quoted(&"é".repeat(100)).chars().count(), QUOTE_LIMIT + 3);
    }
}
