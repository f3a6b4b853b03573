//! Sensitive-data detection: any text is scanned, never a panic; the kinds
//! found are each reported once, in `KINDS` order.
#![no_main]

use agent_memory_core::sessions::sensitive::{self, KINDS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let found = sensitive::findings(&text);
    let positions: Vec<usize> = found
        .iter()
        .map(|kind| KINDS.iter().position(|k| k == kind).expect("a known kind"))
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "not once each in KINDS order: {found:?}"
    );

    // The check-digit rules on the input's digits.
    let digits: Vec<u8> = data.iter().map(|b| b % 10).collect();
    let _ = sensitive::luhn_valid(&digits);
    let _ = sensitive::cpf_valid(&digits);
});
