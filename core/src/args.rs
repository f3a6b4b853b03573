//! The checks every SQL function applies to its arguments before it runs
//! anything: identifiers, lists and durations.

use crate::error::quoted;
use crate::{Error, Result};

/// Longest session id, user id or key accepted.
pub const MAX_ID_CHARS: usize = 256;

/// An identifier argument named `what`: present, not empty, at most
/// [`MAX_ID_CHARS`] characters.
#[inline]
pub fn check_id<'a>(what: &str, value: Option<&'a str>) -> Result<&'a str> {
    let value = value.ok_or_else(|| Error::null(what))?;
    if value.is_empty() {
        return Err(Error::invalid(format!("{what} must not be empty")));
    }
    // A byte count bounds the character count: only long values are counted.
    if value.len() > MAX_ID_CHARS && value.chars().count() > MAX_ID_CHARS {
        return Err(Error::invalid(format!(
            "{what} {} is longer than {MAX_ID_CHARS} characters",
            quoted(value)
        )));
    }
    Ok(value)
}

/// The four keys memory is held under: a session, every session of a
/// user, a graph owner, a file scope. Each may be absent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keys<'a> {
    pub session_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub owner: Option<&'a str>,
    pub scope: Option<&'a str>,
}

/// A list argument named `what` without NULL elements.
pub fn check_list(what: &str, items: Vec<Option<String>>) -> Result<Vec<String>> {
    items
        .into_iter()
        .map(|item| item.ok_or_else(|| Error::null(&format!("an element of {what}"))))
        .collect()
}

/// `value` when it is one of `choices`; names `what` in the error.
pub fn one_of<'a>(what: &str, value: Option<&'a str>, choices: &[&str]) -> Result<&'a str> {
    let value = value.ok_or_else(|| Error::null(what))?;
    if choices.contains(&value) {
        return Ok(value);
    }
    Err(Error::invalid(format!("unknown {what} {}", quoted(value)))
        .with_detail(format!("{what} is one of: {}", choices.join(", "))))
}

/// The longest duration a session may idle or an entry live: 100 years,
/// in months. Far enough for "never" and near enough that a time it is
/// added to or taken from stays a valid timestamp.
pub const MAX_DURATION_MONTHS: i64 = 100 * 12;

const MICROS_PER_DAY: i128 = 86_400_000_000;

/// A duration argument named `what` (an interval's months, days and
/// microseconds): longer than zero, with no part negative, and at most
/// [`MAX_DURATION_MONTHS`] (a month weighed as 30 days, as PostgreSQL
/// compares intervals). A part may not be negative because a month or a
/// day added to a time has no fixed length: `-1 mon 30 days 1 hour` is
/// positive by comparison, yet takes a time back in a month of 31 days.
pub fn check_duration(what: &str, months: i32, days: i32, micros: i64) -> Result<()> {
    if months < 0 || days < 0 || micros < 0 {
        return Err(Error::invalid(format!("{what} must be positive, with no part negative")));
    }
    let span = (i128::from(months) * 30 + i128::from(days)) * MICROS_PER_DAY + i128::from(micros);
    if span == 0 {
        return Err(Error::invalid(format!("{what} must be positive")));
    }
    if span > i128::from(MAX_DURATION_MONTHS) * 30 * MICROS_PER_DAY {
        return Err(Error::invalid(format!(
            "{what} must be at most {} years",
            MAX_DURATION_MONTHS / 12
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_duration_is_positive_as_a_whole_and_at_most_100_years() {
        const HOUR: i64 = 3_600_000_000;
        assert!(check_duration("ttl", 0, 0, 1).is_ok());
        assert!(check_duration("ttl", 0, 1, 23 * HOUR).is_ok());
        assert!(check_duration("ttl", 1200, 0, 0).is_ok());
        assert!(check_duration("ttl", 1199, 30, 0).is_ok());
        let refused = check_duration("ttl", 0, 0, 0).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::InvalidParameter);
        assert_eq!(refused.message, "ttl must be positive");
        // A negative part, whatever the whole: a month or a day has no
        // fixed length where a time is added to.
        for (months, days, micros) in [
            (0, 1, -25 * HOUR),
            (0, 1, -23 * HOUR),
            (-1, 30, HOUR),
            (1, -27, 0),
            (-1, 0, 0),
            (0, 0, i64::MIN),
        ] {
            let refused = check_duration("ttl", months, days, micros).unwrap_err();
            assert_eq!(refused.kind, ErrorKind::InvalidParameter);
            assert_eq!(refused.message, "ttl must be positive, with no part negative");
        }
        // Past 100 years, up to PostgreSQL's infinite interval.
        for (months, days, micros) in
            [(1200, 0, 1), (1200, 1, 0), (3_600_000, 0, 0), (i32::MAX, i32::MAX, i64::MAX)]
        {
            let refused = check_duration("idle_timeout", months, days, micros).unwrap_err();
            assert_eq!(refused.message, "idle_timeout must be at most 100 years");
        }
    }

    #[test]
    fn an_id_is_present_not_empty_and_at_most_256_characters() {
        assert_eq!(check_id("key", Some("k1")).unwrap(), "k1");
        assert_eq!(check_id("key", None).unwrap_err().kind, ErrorKind::NullValue);
        assert_eq!(check_id("key", Some("")).unwrap_err().message, "key must not be empty");
        let longest = "é".repeat(MAX_ID_CHARS);
        assert!(check_id("key", Some(&longest)).is_ok(), "counted in characters, not bytes");
        let too_long = "x".repeat(MAX_ID_CHARS + 1);
        let error = check_id("session_id", Some(&too_long)).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParameter);
        assert!(error.message.ends_with("is longer than 256 characters"));
    }

    #[test]
    fn a_list_has_no_null_element() {
        assert_eq!(
            check_list("keys", vec![Some("a".into()), Some("b".into())]).unwrap(),
            vec!["a", "b"]
        );
        let error = check_list("keys", vec![Some("a".into()), None]).unwrap_err();
        assert_eq!(error.kind, ErrorKind::NullValue);
        assert!(error.message.contains("an element of keys"));
    }
}
