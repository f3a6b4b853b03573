//! Detection of sensitive data in text that an agent asks to remember.
//!
//! The write guard rejects passwords, tokens, CPF numbers, card numbers and PII
//! before they reach memory. [`findings`] reports which *kinds* of sensitive
//! data a text holds — never the data itself, so the caller can refuse a write
//! and say why without echoing the secret.
//!
//! Detectors run from the most specific to the most general, and each one
//! blanks out what it matched, so a card number is not also reported as a
//! phone number.

use std::sync::LazyLock;

use regex::Regex;
use unicode_normalization::UnicodeNormalization;

/// The kinds of sensitive data, in the order they are reported.
pub const KINDS: [&str; 10] = [
    "private_key",
    "jwt",
    "aws_access_key",
    "api_key",
    "bearer_token",
    "password",
    "payment_card",
    "cpf",
    "email",
    "phone",
];

struct Detector {
    kind: &'static str,
    pattern: Regex,
    /// A check on the digits of a match (Luhn, CPF check digits), if any.
    digits_valid: Option<fn(&[u8]) -> bool>,
}

fn detector(
    kind: &'static str, pattern: &str, digits_valid: Option<fn(&[u8]) -> bool>,
) -> Detector {
    Detector {
        kind,
        pattern: Regex::new(pattern).expect("detector pattern compiles"),
        digits_valid,
    }
}

static DETECTORS: LazyLock<Vec<Detector>> = LazyLock::new(|| {
    vec![
        detector("private_key", r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----", None),
        detector("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}", None),
        detector(
            "aws_access_key",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|(?i)\baws_secret_access_key\b\W{0,3}[:=]\W{0,3}[A-Za-z0-9/+=]{40}",
            None,
        ),
        detector(
            "api_key",
            concat!(
                r"\bsk-[A-Za-z0-9_-]{20,}|\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{30,}",
                r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAIza[0-9A-Za-z_-]{35}|\bglpat-[A-Za-z0-9_-]{20,}",
                r#"|(?i)\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret|secret[_-]?key)\b["']?\s*[:=]\s*["']?[A-Za-z0-9\-._~+/]{8,}"#,
            ),
            None,
        ),
        detector("bearer_token", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*", None),
        detector(
            "password",
            r#"(?i)\b(?:password|passwd|pwd|passphrase|senha)\b(?:["']?\s*[:=]|\s+(?:is|é|=))\s*["']?[^\s"',;}]+"#,
            None,
        ),
        detector("payment_card", r"\b\d(?:[ -]?\d){12,18}\b", Some(luhn_valid)),
        detector("cpf", r"\b\d{3}\.?\d{3}\.?\d{3}-?\d{2}\b", Some(cpf_valid)),
        detector(
            "email",
            r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            None,
        ),
        detector(
            "phone",
            r"(?:\+\d{1,3}[\s.-]?)?(?:\(\d{2,4}\)|\b\d{2,4})[\s.-]\d{3,5}[\s.-]?\d{4}\b|\+\d{10,14}\b",
            None,
        ),
    ]
});

/// Format characters (zero-width spaces and joiners, direction marks):
/// invisible, so they may sit inside a number or a keyword unseen.
static FORMAT_CHARACTERS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\p{Cf}+").expect("pattern compiles"));

/// `text` as the detectors read it: compatibility forms folded (full-width
/// digits and letters become ASCII) and format characters left out, so
/// that neither hides a secret a reader would see. ASCII text is as it is.
fn as_read(text: &str) -> String {
    if text.is_ascii() {
        return text.to_string();
    }
    let folded: String = text.nfkc().collect();
    FORMAT_CHARACTERS.replace_all(&folded, "").into_owned()
}

/// The kinds of sensitive data found in `text`, each once, in [`KINDS`] order.
pub fn findings(text: &str) -> Vec<&'static str> {
    let mut rest = as_read(text);
    let mut found = Vec::new();
    for d in DETECTORS.iter() {
        let mut spans = Vec::new();
        for m in d.pattern.find_iter(&rest) {
            let valid = match d.digits_valid {
                Some(check) => check(&digits_of(m.as_str())),
                None => true,
            };
            if valid {
                spans.push(m.range());
            }
        }
        if spans.is_empty() {
            continue;
        }
        found.push(d.kind);
        // Blank out matches (same byte length, so later spans stay aligned).
        for span in spans {
            let blank = " ".repeat(span.len());
            rest.replace_range(span, &blank);
        }
    }
    found
}

/// The digits of a match, in any script: the detectors' `\d` matches every
/// decimal digit, and a check of the digits must read them all.
fn digits_of(s: &str) -> Vec<u8> {
    s.chars().filter_map(digit_value).collect()
}

static DECIMAL_DIGIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d$").expect("pattern compiles"));

fn is_decimal_digit(c: char) -> bool {
    let mut buffer = [0u8; 4];
    DECIMAL_DIGIT.is_match(c.encode_utf8(&mut buffer))
}

/// The value of a decimal digit of any script. Unicode encodes each
/// script's digits as a run of ten from zero, so the value is the distance
/// back to the run's start (runs that follow each other, the mathematical
/// digits, are folded to ASCII before).
fn digit_value(c: char) -> Option<u8> {
    if c.is_ascii_digit() {
        return Some(c as u8 - b'0');
    }
    if !is_decimal_digit(c) {
        return None;
    }
    let mut value = 0u8;
    while value < 9 {
        match char::from_u32(c as u32 - u32::from(value) - 1) {
            Some(before) if is_decimal_digit(before) => value += 1,
            _ => break,
        }
    }
    Some(value)
}

/// Luhn checksum of a 13–19 digit card number.
pub fn luhn_valid(digits: &[u8]) -> bool {
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = d as u32;
            if i % 2 == 1 {
                let doubled = d * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                d
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// The two check digits of a Brazilian CPF (and not a run of one digit).
pub fn cpf_valid(digits: &[u8]) -> bool {
    if digits.len() != 11 || digits.iter().all(|&d| d == digits[0]) {
        return false;
    }
    let check = |n: usize| -> u8 {
        let sum: u32 = digits[..n]
            .iter()
            .enumerate()
            .map(|(i, &d)| d as u32 * (n as u32 + 1 - i as u32))
            .sum();
        ((sum * 10) % 11 % 10) as u8
    };
    check(9) == digits[9] && check(10) == digits[10]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_other_digits_or_with_invisible_marks_are_found() {
        // Full-width, Arabic-Indic and Devanagari digits of a test card,
        // and one cut by zero-width spaces.
        for card in [
            "\u{ff14}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}",
            "\u{664}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}\u{661}",
            "\u{96a}\u{967}\u{967}\u{967} \u{967}\u{967}\u{967}\u{967} \u{967}\u{967}\u{967}\u{967} \u{967}\u{967}\u{967}\u{967}",
            "card 4111\u{200b}1111\u{200b}1111\u{200b}1111",
            "card 4111 1111 1111 111\u{ff11}",
        ] {
            assert_eq!(findings(card), ["payment_card"], "{card}");
        }
        // A valid CPF in full-width digits.
        assert_eq!(
            findings(
                "\u{ff15}\u{ff12}\u{ff19}\u{ff19}\u{ff18}\u{ff12}\u{ff12}\u{ff14}\u{ff17}\u{ff12}\u{ff15}"
            ),
            ["cpf"]
        );
        // A password keyword spelt with a zero-width joiner.
        assert_eq!(findings("pass\u{200d}word: hunter22"), ["password"]);
        // Digits of other scripts that pass no check stay unreported.
        assert!(findings("\u{664}\u{662}").is_empty());
        assert_eq!(digit_value('\u{669}'), Some(9));
        assert_eq!(digit_value('\u{660}'), Some(0));
        assert_eq!(digit_value('x'), None);
    }

    fn kinds(text: &str) -> Vec<&'static str> {
        findings(text)
    }

    #[test]
    fn clean_text_has_no_findings() {
        for text in [
            "the user prefers dark mode and metric units",
            "order 12345 shipped on 2024-01-15, total 99.90",
            r#"{"step": 3, "plan": ["search", "summarise"], "version": "1.2.3"}"#,
            "call the function at 10:30 with n=1000000",
            "the password policy requires 12 characters",
        ] {
            assert_eq!(kinds(text), Vec::<&str>::new(), "{text}");
        }
    }

    #[test]
    fn payment_cards_need_a_valid_luhn_checksum() {
        assert_eq!(kinds("card 4111 1111 1111 1111 exp 12/29"), vec!["payment_card"]);
        assert_eq!(kinds("card 4539-1488-0343-6467"), vec!["payment_card"]);
        assert_eq!(kinds("card 4539148803436467"), vec!["payment_card"]);
        // One digit off: not a card number (and not mistaken for anything else).
        assert_eq!(kinds("ref 4539148803436468"), Vec::<&str>::new());
    }

    #[test]
    fn cpf_needs_valid_check_digits() {
        assert_eq!(kinds("CPF 529.982.247-25"), vec!["cpf"]);
        assert_eq!(kinds("cpf: 52998224725"), vec!["cpf"]);
        assert_eq!(kinds("CPF 529.982.247-26"), Vec::<&str>::new());
        assert_eq!(kinds("111.111.111-11"), Vec::<&str>::new());
    }

    #[test]
    fn credentials() {
        assert_eq!(kinds("password=hunter2"), vec!["password"]);
        assert_eq!(kinds(r#"{"senha": "minhaSenha123"}"#), vec!["password"]);
        assert_eq!(kinds("my password is correct-horse"), vec!["password"]);
        assert_eq!(kinds("Authorization: Bearer abcdefghijklmnop1234"), vec!["bearer_token"]);
        assert_eq!(kinds("key sk-proj-abcdefghijklmnopqrstuvwx"), vec!["api_key"]);
        assert_eq!(kinds(r#"{"api_key": "0123456789abcdef"}"#), vec!["api_key"]);
        assert_eq!(kinds("ghp_abcdefghijklmnopqrstuvwxyz0123456789"), vec!["api_key"]);
        assert_eq!(kinds("AKIAIOSFODNN7EXAMPLE"), vec!["aws_access_key"]);
        assert_eq!(
            kinds(
                "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
            ),
            vec!["jwt"]
        );
        assert_eq!(
            kinds("-----BEGIN RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----"),
            vec!["private_key"]
        );
    }

    #[test]
    fn personal_contact_data() {
        assert_eq!(kinds("write to ana.souza+ai@example.com.br"), vec!["email"]);
        assert_eq!(kinds("call +55 11 91234-5678"), vec!["phone"]);
        assert_eq!(kinds("call (11) 91234-5678"), vec!["phone"]);
        assert_eq!(kinds("call 415-555-0100"), vec!["phone"]);
        assert_eq!(kinds("call +14155550100"), vec!["phone"]);
    }

    #[test]
    fn several_kinds_are_reported_once_each_in_a_stable_order() {
        let text =
            "email bob@example.org, card 4111111111111111, other card 5500 0000 0000 0004, pwd: x1";
        assert_eq!(kinds(text), vec!["password", "payment_card", "email"]);
    }

    #[test]
    fn check_digit_algorithms() {
        assert!(!luhn_valid(&digits_of("79927398713"))); // 11 digits: too short for a card
        assert!(luhn_valid(&digits_of("4111111111111111")));
        assert!(!luhn_valid(&digits_of("4111111111111112")));
        assert!(cpf_valid(&digits_of("52998224725")));
        assert!(!cpf_valid(&digits_of("52998224724")));
        assert!(!cpf_valid(&digits_of("00000000000")));
    }
}
