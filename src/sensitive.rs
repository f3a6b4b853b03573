//! Sensitive data: the SQL face of the detector, and the guard every
//! key-value write passes through.

use pgrx::prelude::*;
use serde_json::Value;

use agent_memory_core::error::quoted;
use agent_memory_core::{Error, kv, sensitive};

use crate::error::{OrReport, SqlResult};
use crate::settings::{SENSITIVE_DATA, SensitiveData};

/// The kinds of sensitive data found in a text (never the data itself).
#[pg_extern(immutable, parallel_safe)]
fn sensitive_findings(text: &str) -> Vec<String> {
    sensitive::findings(text)
        .into_iter()
        .map(String::from)
        .collect()
}

/// Refuse to store `value` under `key` when it holds sensitive data, unless
/// `agent_memory.sensitive_data = 'allow'`. The error names the kinds found,
/// never the data.
pub fn guard_write(key: &str, value: &Value) -> SqlResult<()> {
    if SENSITIVE_DATA.get() == SensitiveData::Allow {
        return Ok(());
    }
    let found = sensitive::findings(&kv::text_to_screen(key, value));
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "value of key {} contains sensitive data",
        quoted(key)
    ))
    .with_detail(format!("Found: {}. Nothing was stored.", found.join(", ")))
    .with_hint("Remove it, or have a superuser set agent_memory.sensitive_data = 'allow'."))
    .or_report()
}
