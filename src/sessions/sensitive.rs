//! What every key-value write must pass: the curator function, when one is
//! configured, and the built-in sensitive-data check.
//!
//! A curator function may approve each write; without one, a basic
//! validator when the curator fails. Here `agent_memory.curator` names a SQL
//! function `(key text, value jsonb) returns boolean`: true stores, false
//! refuses; when it raises an error or returns NULL, the built-in check
//! decides. It runs in a subtransaction, so its failure undoes only itself.

use pgrx::JsonB;
use pgrx::prelude::*;
use serde_json::Value;

use agent_memory_core::Error;
use agent_memory_core::error::quoted;
use agent_memory_core::sessions::{kv, sensitive};

use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::FirstRow;
use crate::pg::settings::{CURATOR, SENSITIVE_DATA, SensitiveData};
use crate::pg::subtransaction::in_subtransaction;

/// The kinds of sensitive data found in a text (never the data itself).
/// It runs no SQL, so it has no search_path to pin (a SET clause would
/// cost a call more than its own work on a short text).
#[pg_extern(immutable, parallel_safe)]
fn sensitive_findings(text: &str) -> Vec<String> {
    sensitive::findings(text).into_iter().map(String::from).collect()
}

/// Decide whether `value` may be stored under `key`: the curator's verdict
/// when it gives one, otherwise the built-in check (refuse sensitive data
/// unless `agent_memory.sensitive_data = 'allow'`). Errors name the kinds
/// found, never the data.
pub fn guard_write(key: &str, value: &Value) -> SqlResult<()> {
    if let Some(curator) = curator_name() {
        match ask_curator(&curator, key, value)? {
            Some(true) => return Ok(()),
            Some(false) => {
                return Err(Error::invalid(format!(
                    "the curator refused the value of key {}",
                    quoted(key)
                ))
                .with_detail(format!("{curator} returned false. Nothing was stored.")))
                .or_report();
            }
            None => {} // the curator failed: the built-in check decides
        }
    }
    builtin_check(key, value)
}

fn builtin_check(key: &str, value: &Value) -> SqlResult<()> {
    if SENSITIVE_DATA.get() == SensitiveData::Allow {
        return Ok(());
    }
    let found = sensitive::findings(&kv::text_to_screen(key, value));
    if found.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!("value of key {} contains sensitive data", quoted(key)))
        .with_detail(format!("Found: {}. Nothing was stored.", found.join(", ")))
        .with_hint("Remove it, or have a superuser set agent_memory.sensitive_data = 'allow'."))
    .or_report()
}

/// The configured curator, if any.
fn curator_name() -> Option<String> {
    CURATOR
        .get()
        .and_then(|name| name.into_string().ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
}

/// The statement that calls the curator, or an error when the setting names
/// no function (key text, value jsonb) returns boolean. Functions run with
/// search_path pg_catalog, pg_temp, so the name must carry its schema.
fn curator_call(name: &str) -> SqlResult<String> {
    let function = Spi::connect(|client| {
        client
            .select(
                "SELECT p.oid::regproc::text FROM pg_catalog.pg_proc p
                 WHERE p.oid = pg_catalog.to_regprocedure($1 || '(text, jsonb)')
                   AND p.prorettype = 'pg_catalog.bool'::pg_catalog.regtype",
                None,
                &[name.into()],
            )?
            .first_value::<String>(1)
    })
    .or_report()?;
    match function {
        Some(function) => Ok(format!("SELECT {function}($1, $2)")),
        None => Err(Error::invalid(format!(
            "agent_memory.curator {} names no function (key text, value jsonb) returns boolean",
            quoted(name)
        ))
        .with_hint("Give the function's schema, e.g. 'public.approve_memory'."))
        .or_report(),
    }
}

/// The curator's verdict: Some(approved), or None when it raised an error or
/// returned NULL. A cancel, a statement timeout or a lock timeout is not the
/// curator's failure but the caller's limit: it fails the write, as it
/// escapes a PL/pgSQL EXCEPTION block.
fn ask_curator(name: &str, key: &str, value: &Value) -> SqlResult<Option<bool>> {
    let call = curator_call(name)?;
    let value = JsonB(value.clone());
    let verdict = in_subtransaction(move || {
        Spi::connect_mut(|client| {
            client.update(call.as_str(), None, &[key.into(), value.into()])?.first_value::<bool>(1)
        })
    });
    match verdict {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(spi_error)) => {
            warning!("agent_memory.curator failed, the built-in check decides: {spi_error}");
            Ok(None)
        }
        Err(failure) => {
            warning!(
                "agent_memory.curator failed, the built-in check decides: {}",
                failure.message
            );
            Ok(None)
        }
    }
}
