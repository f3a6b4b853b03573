//! Rules of a key-value write that need no database: sizes and the shape of
//! a batch.

use serde_json::Value;

use crate::error::{Error, Result, quoted};

/// Largest value stored under one key, as JSON text.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// Refuse a value whose JSON text is larger than [`MAX_VALUE_BYTES`].
pub fn check_value_size(key: &str, value: &Value) -> Result<()> {
    let bytes = value.to_string().len();
    if bytes > MAX_VALUE_BYTES {
        return Err(Error::limit(format!(
            "value of key {} is {bytes} bytes, over the limit of {MAX_VALUE_BYTES}",
            quoted(key)
        )));
    }
    Ok(())
}

/// The entries of an `update_context` batch: a non-empty JSON object whose
/// keys become memory keys.
pub fn batch_entries(entries: &Value) -> Result<Vec<(&str, &Value)>> {
    let Some(map) = entries.as_object() else {
        return Err(Error::invalid("entries must be a JSON object of key → value"));
    };
    if map.is_empty() {
        return Err(Error::invalid("entries must hold at least one key"));
    }
    Ok(map.iter().map(|(k, v)| (k.as_str(), v)).collect())
}

/// What the sensitive-data check reads for one entry: the key and the value
/// together (a key named "password" is as telling as the value), as JSON text
/// and, for every string inside, as raw text (JSON escaping can hide a
/// pattern, e.g. the line breaks of a private key).
pub fn text_to_screen(key: &str, value: &Value) -> String {
    let mut text = serde_json::json!({ key: value }).to_string();
    fn strings(value: &Value, out: &mut String) {
        match value {
            Value::String(s) => {
                out.push('\n');
                out.push_str(s);
            }
            Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    strings(value, &mut text);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::sessions::sensitive::findings;
    use serde_json::json;

    #[test]
    fn value_size_limit() {
        assert!(check_value_size("k", &json!("small")).is_ok());
        let big = json!("x".repeat(MAX_VALUE_BYTES));
        let err = check_value_size("k", &big).unwrap_err();
        assert_eq!(err.kind, ErrorKind::LimitExceeded);
        assert!(err.message.starts_with("value of key \"k\" is 1048578 bytes"));
    }

    #[test]
    fn batches_are_non_empty_objects() {
        let v = json!({"a": 1, "b": "two"});
        assert_eq!(batch_entries(&v).unwrap().len(), 2);
        assert_eq!(batch_entries(&json!({})).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(batch_entries(&json!([1])).unwrap_err().kind, ErrorKind::InvalidParameter);
    }

    #[test]
    fn screening_sees_the_key_and_unescaped_strings() {
        assert_eq!(findings(&text_to_screen("password", &json!("hunter2"))), vec!["password"]);
        let pem = json!({"k": "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----"});
        assert_eq!(findings(&text_to_screen("deploy", &pem)), vec!["private_key"]);
        assert!(findings(&text_to_screen("plan", &json!(["step one", 2]))).is_empty());
    }
}
