//! Rewriting recall's search columns after a change of its settings.

use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::recall::{self, Kind};

use crate::pg::args::{TEXT, TEXT_ARRAY};
use crate::pg::datums::JsonB;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Rows, Statement};
use crate::pg::settings;

/// Rewrite every memory table's search column in the text search
/// configuration `agent_memory.text_search_config`, kept for the kinds of
/// `agent_memory.recall_kinds` (NULL for the others), index it again
/// (dropping the column dropped its index), and record both.
/// Each table is rewritten under an ACCESS EXCLUSIVE lock, so no write or
/// read of it runs meanwhile; in the caller's transaction, like any DDL.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn recall_rebuild() -> SqlResult<JsonB> {
    let config = setting_text(&settings::TEXT_SEARCH_CONFIG);
    let kept = recall::kinds_in_list(&setting_text(&settings::RECALL_KINDS)).or_report()?;
    Spi::connect_mut(|client| {
        let (schema, name) = recall::config_name(&config);
        let found: Option<(String, String)> =
            CONFIG_LITERAL.run(client, &[schema.into(), name.into()])?.row(&["literal", "name"])?;
        let (literal, recorded) = found
            .ok_or_else(|| {
                Error::invalid(format!(
                    "text search configuration {} does not exist",
                    agent_memory_core::error::quoted(&config)
                ))
                .with_hint("agent_memory.text_search_config names one of \\dF's configurations")
            })
            .or_report()?;
        for kind in Kind::ALL {
            let expression = recall::search_expression(kind, &literal, kept.contains(&kind));
            let table = kind.table();
            for statement in [
                format!(
                    "ALTER TABLE agent_memory.{table} DROP COLUMN search,
                     ADD COLUMN search tsvector GENERATED ALWAYS AS ({expression}) STORED"
                ),
                format!(
                    "CREATE INDEX {table}_search_idx ON agent_memory.{table}
                     USING gin (search) WHERE search IS NOT NULL"
                ),
            ] {
                client.update(&statement, None, &[]).or_report()?;
            }
        }
        let names: Vec<&str> = kept.iter().map(|kind| kind.name()).collect();
        RECORD.run(client, &[recorded.as_str().into(), names.clone().into()])?;
        Ok(JsonB(serde_json::json!({"config": recorded, "kinds": names})))
    })
}

fn setting_text(setting: &pgrx::GucSetting<Option<std::ffi::CString>>) -> String {
    setting.get().map(|value| value.to_string_lossy().into_owned()).unwrap_or_default()
}

/// Configuration $2 of schema $1 (pg_catalog when NULL): an SQL literal of
/// it, and its name (schema-qualified but in pg_catalog); no row when there
/// is no such configuration.
static CONFIG_LITERAL: Statement = Statement::read_write(
    "SELECT pg_catalog.quote_literal(c.oid::regconfig::text) || '::regconfig', c.oid::regconfig::text
     FROM pg_catalog.pg_ts_config c JOIN pg_catalog.pg_namespace n ON n.oid = c.cfgnamespace
     WHERE c.cfgname = $2 AND n.nspname = coalesce($1, 'pg_catalog')",
    &[TEXT, TEXT],
);

/// Record configuration $1 (a name, as CONFIG_LITERAL gives it) and kinds
/// $2 as the columns' own.
static RECORD: Statement = Statement::read_write(
    "UPDATE agent_memory.recall_settings SET config = $1::regconfig, kinds = $2",
    &[TEXT, TEXT_ARRAY],
);
