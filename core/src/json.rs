//! JSON written directly as text, for documents too large to build as a
//! `serde_json::Value` first (the JSON tree of a million-node graph).

use std::fmt::Write as _;

/// Append `value` as a JSON string literal.
pub fn push_string(out: &mut String, value: &str) {
    out.push('"');
    let mut plain = 0;
    for (i, byte) in value.bytes().enumerate() {
        let escape = match byte {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&value[plain..i]);
        if escape.is_empty() {
            let _ = write!(out, "\\u{byte:04x}");
        } else {
            out.push_str(escape);
        }
        plain = i + 1;
    }
    out.push_str(&value[plain..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_read_back_as_themselves() {
        for value in [
            "",
            "plain",
            "quote \" and backslash \\",
            "lines\nand\ttabs\r",
            "control \u{1} \u{1f} \u{7f}",
            "unicode é 日本 😀 \u{2028}",
        ] {
            let mut out = String::new();
            push_string(&mut out, value);
            let back: String = serde_json::from_str(&out).unwrap();
            assert_eq!(back, value, "{out}");
        }
        let mut out = String::from("x");
        push_string(&mut out, "a\u{1}");
        assert_eq!(out, "x\"a\\u0001\"");
    }
}
