//! How many words a key-value memory value holds.
//!
//! The word budget of a session (600 words by default) is counted over the
//! values' text, the way a person would count what the agent is asked to
//! remember:
//!
//! - a string counts its whitespace-separated words (`"São Paulo"` = 2,
//!   `""` = 0);
//! - a number or a boolean counts 1; `null` counts 0;
//! - an array counts the sum of its elements;
//! - an object counts each key as a string plus its value
//!   (`{"city": "São Paulo"}` = 3).

use serde_json::Value;

/// Words in a string: runs of non-whitespace characters.
pub fn words_in_text(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

/// Words in a JSON value, by the rules in the module documentation.
pub fn words_in_value(value: &Value) -> u64 {
    match value {
        Value::Null => 0,
        Value::Bool(_) | Value::Number(_) => 1,
        Value::String(s) => words_in_text(s),
        Value::Array(items) => items.iter().map(words_in_value).sum(),
        Value::Object(map) => map.iter().map(|(k, v)| words_in_text(k) + words_in_value(v)).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strings_count_whitespace_separated_words() {
        assert_eq!(words_in_value(&json!("hello world")), 2);
        assert_eq!(words_in_value(&json!("  spaced\tout\nwords  ")), 3);
        assert_eq!(words_in_value(&json!("")), 0);
        assert_eq!(words_in_value(&json!("São Paulo")), 2);
    }

    #[test]
    fn scalars_count_one_and_null_none() {
        assert_eq!(words_in_value(&json!(42)), 1);
        assert_eq!(words_in_value(&json!(3.25)), 1);
        assert_eq!(words_in_value(&json!(true)), 1);
        assert_eq!(words_in_value(&json!(null)), 0);
    }

    #[test]
    fn containers_sum_their_parts_and_keys_count() {
        assert_eq!(words_in_value(&json!(["a b", 1, null])), 3);
        assert_eq!(words_in_value(&json!({"city": "São Paulo"})), 3);
        assert_eq!(words_in_value(&json!({"step": {"n": 2, "note": "try again"}})), 6);
        assert_eq!(words_in_value(&json!({})), 0);
    }
}
