//! jsonb's binary form, as the extension reads arguments and stored values:
//! any bytes are read or refused, never a panic (the shell hands over only
//! what PostgreSQL made, but a reader that trusts its input must not crash
//! the server on a value it does not know).
#![no_main]

use agent_memory_core::jsonb;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = jsonb::root_type(data);
    let _ = jsonb::nested_deeper_than(data, jsonb::MAX_DEPTH);
    if let Ok(value) = jsonb::to_value(data) {
        // What was read is plain JSON: it prints and parses back the same.
        let text = value.to_string();
        let again: serde_json::Value = serde_json::from_str(&text).expect("printed JSON parses");
        assert_eq!(again, value);
    }
    let _ = jsonb::numeric_text(data);
});
