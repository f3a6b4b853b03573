//! What every tool's definition for a model API shares: its name's rule
//! and the two formats it is given in.

use crate::args::one_of;
use crate::error::quoted;
use crate::{Error, Result};

/// A tool's definition: `anthropic` (name, description, input_schema) or
/// `openai` (a function tool), with `title` added to its JSON Schema.
/// `name` is 1 to 64 letters, digits, `_` or `-`, as both APIs require.
pub fn definition(
    name: &str, description: &str, title: Option<&str>, mut schema: serde_json::Value,
    format: Option<&str>,
) -> Result<serde_json::Value> {
    let valid = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !valid {
        return Err(Error::invalid(format!(
            "tool name {} must be 1 to 64 letters, digits, _ or -",
            quoted(name)
        )));
    }
    if let Some(title) = title {
        schema["title"] = serde_json::json!(title);
    }
    Ok(if one_of("format", format, &["anthropic", "openai"])? == "anthropic" {
        serde_json::json!({"name": name, "description": description, "input_schema": schema})
    } else {
        serde_json::json!({
            "type": "function",
            "function": {"name": name, "description": description, "parameters": schema}
        })
    })
}
