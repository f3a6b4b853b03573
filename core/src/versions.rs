//! Preconditions: a write that replaces or deletes an item can name the
//! version of it the writer last read, and then happens only if the item is
//! still at that version. Version 0 stands for "no such item", so a
//! precondition of 0 creates only. Every change of an item takes the next
//! version; a failed precondition changes nothing and is a
//! [`ErrorKind::VersionConflict`](crate::ErrorKind::VersionConflict).

use crate::error::{Error, Result};

/// The version of an item that does not exist.
pub const ABSENT: i32 = 0;

/// The highest version or revision an import may give an item: far above
/// any that writes reach, and far enough below the integer's limit that
/// the writes after it can still count on.
pub const MOST_IMPORTED: i32 = 1_000_000_000;

/// The highest message seq an import may give, for the same reason.
pub const MOST_IMPORTED_SEQ: i64 = 1_000_000_000_000_000_000;

/// A precondition argument as given: none, or a version (0: absent).
pub fn checked_expected(argument: &str, expected: Option<i32>) -> Result<Option<i32>> {
    match expected {
        Some(version) if version < 0 => Err(Error::invalid(format!(
            "{argument} must be 0 (no such item) or a version, not {version}"
        ))),
        other => Ok(other),
    }
}

/// Whether an item at version `current` meets the precondition.
pub fn holds(expected: Option<i32>, current: i32) -> bool {
    expected.is_none_or(|expected| expected == current)
}

/// The conflict of a precondition on `item` (such as `key "goal" of session
/// "s"`): what the writer expected and what the item is at now.
pub fn conflict(item: &str, expected: i32, current: i32) -> Error {
    conflict_of(item, "version", expected, current)
}

/// [`conflict`] of an item whose counter has another name (a graph node's
/// `revision`: its `version` counts only the versions it saved).
pub fn conflict_of(item: &str, counter: &str, expected: i32, current: i32) -> Error {
    let message = match (expected, current) {
        (ABSENT, _) => format!("{item} already exists, at {counter} {current}"),
        (_, ABSENT) => format!("{item} does not exist, not at {counter} {expected}"),
        _ => format!("{item} is at {counter} {current}, not {expected}"),
    };
    Error::new(crate::ErrorKind::VersionConflict, message)
        .with_detail("It changed since it was read. Nothing was written.")
        .with_hint("Read it again, and retry with the version it has then.")
}

/// The lowercase hex SHA-256 of a text's UTF-8 bytes, as Anthropic's memory
/// stores name a content (`content_sha256`).
pub fn sha256_hex(text: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut hex = String::with_capacity(64);
    for byte in Sha256::digest(text.as_bytes()) {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// A version argument of a history function: required, and 1 or more.
pub fn checked_version(argument: &str, version: Option<i32>) -> Result<i32> {
    match version {
        None => Err(Error::null(argument)),
        Some(version) if version < 1 => {
            Err(Error::invalid(format!("{argument} must be 1 or more, not {version}")))
        }
        Some(version) => Ok(version),
    }
}

/// The error of a restore or a read that names a version the history of
/// `item` does not keep (never saved, trimmed, expired or purged).
pub fn not_kept(item: &str, version: i32) -> Error {
    Error::not_found(format!("{item} keeps no version {version}")).with_hint(
        "History keeps the versions replaced while agent_memory.history_retention was above 0.",
    )
}

/// The version an item written anew takes when its history already holds
/// versions up to `newest_kept`: numbers go on past them, so a version
/// names one content across a delete and a re-creation.
pub fn first_version_after(newest_kept: Option<i32>) -> i32 {
    newest_kept.map_or(1, |newest| newest.saturating_add(1).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_negative_version_is_refused() {
        assert_eq!(checked_expected("expected_version", None), Ok(None));
        assert_eq!(checked_expected("expected_version", Some(0)), Ok(Some(0)));
        assert_eq!(checked_expected("expected_version", Some(7)), Ok(Some(7)));
        let error = checked_expected("expected_version", Some(-1)).unwrap_err();
        assert_eq!(error.kind, ErrorKind::InvalidParameter);
        assert_eq!(error.message, "expected_version must be 0 (no such item) or a version, not -1");
    }

    #[test]
    fn no_precondition_always_holds() {
        assert!(holds(None, 0));
        assert!(holds(None, 5));
        assert!(holds(Some(5), 5));
        assert!(!holds(Some(4), 5));
        assert!(holds(Some(ABSENT), ABSENT));
        assert!(!holds(Some(ABSENT), 1));
    }

    #[test]
    fn a_conflict_says_what_was_found() {
        let item = r#"key "goal" of session "s""#;
        let error = conflict(item, 2, 3);
        assert_eq!(error.kind, ErrorKind::VersionConflict);
        assert_eq!(error.message, r#"key "goal" of session "s" is at version 3, not 2"#);
        assert_eq!(
            conflict(item, 0, 3).message,
            r#"key "goal" of session "s" already exists, at version 3"#
        );
        assert_eq!(
            conflict(item, 2, 0).message,
            r#"key "goal" of session "s" does not exist, not at version 2"#
        );
        assert_eq!(
            error.detail.as_deref(),
            Some("It changed since it was read. Nothing was written.")
        );
        assert_eq!(
            conflict_of(r#"graph node "n""#, "revision", 1, 4).message,
            r#"graph node "n" is at revision 4, not 1"#
        );
    }

    #[test]
    fn sha256_of_known_texts() {
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        // UTF-8 bytes, not characters: "é" is the two bytes c3 a9.
        assert_eq!(
            sha256_hex("é"),
            "4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c"
        );
    }

    #[test]
    fn a_version_argument_is_one_or_more() {
        assert_eq!(checked_version("version", Some(3)), Ok(3));
        assert_eq!(checked_version("version", None).unwrap_err().kind, crate::ErrorKind::NullValue);
        let zero = checked_version("version", Some(0)).unwrap_err();
        assert_eq!(zero.kind, crate::ErrorKind::InvalidParameter);
        assert!(zero.message.contains("not 0"), "{}", zero.message);
    }

    #[test]
    fn numbering_goes_on_past_the_history() {
        assert_eq!(first_version_after(None), 1);
        assert_eq!(first_version_after(Some(4)), 5);
        assert_eq!(first_version_after(Some(i32::MAX)), i32::MAX);
    }

    #[test]
    fn a_version_not_kept_is_not_found() {
        let error = not_kept("key \"goal\"", 2);
        assert_eq!(error.kind, crate::ErrorKind::NotFound);
        assert_eq!(error.message, "key \"goal\" keeps no version 2");
    }
}
