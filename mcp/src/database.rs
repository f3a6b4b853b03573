//! The connections: a small pool, one kept prepared statement per tool on
//! each connection, and a second try on a fresh connection when the first
//! one turns out to be closed (the database restarted since it was opened).

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use serde_json::{Value, json};
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use crate::options::Options;

/// Why a statement gave no row: the database refused it (with its SQLSTATE)
/// or could not be reached.
#[derive(Debug)]
pub enum Failure {
    Refused { sqlstate: String, message: String },
    Unavailable(String),
}

impl Failure {
    /// The failure as the extension's envelope: `{ok: false, error:
    /// {message, code, sqlstate}}`, with the code the memory tool would use
    /// for the same kind of refusal.
    pub fn envelope(&self) -> Value {
        match self {
            Failure::Refused { sqlstate, message } => json!({
                "ok": false,
                "error": {"message": message, "code": code_of(sqlstate), "sqlstate": sqlstate},
            }),
            Failure::Unavailable(message) => json!({
                "ok": false,
                "error": {"message": format!("the database is unavailable: {message}"), "code": "EUNAVAILABLE"},
            }),
        }
    }
}

/// The envelope code of an SQLSTATE the extension raises.
pub fn code_of(sqlstate: &str) -> &'static str {
    match sqlstate {
        "P0002" => "ENOENT",
        "54000" => "EFBIG",
        "40001" => "ECONFLICT",
        "42501" => "EACCES",
        "23505" => "EEXIST",
        "55000" => "ESTATE",
        state if state.starts_with("22") => "EINVAL",
        _ => "EIO",
    }
}

pub struct Database {
    pool: Pool,
}

/// The connection `options` describe: `--dsn`, named as this server, with
/// `--tenant` as a setting of every session.
pub fn connection_config(options: &Options) -> Result<tokio_postgres::Config, String> {
    let mut config: tokio_postgres::Config = options
        .dsn
        .parse()
        .map_err(|error| format!("--dsn: {error}"))?;
    if config.get_application_name().is_none() {
        config.application_name("agent-memory-mcp");
    }
    if let Some(tenant) = &options.tenant {
        let mut settings = config.get_options().map(str::to_owned).unwrap_or_default();
        settings.push_str(&format!(
            " -c agent_memory.tenant={}",
            escape_option(tenant)
        ));
        config.options(settings.trim_start());
    }
    Ok(config)
}

impl Database {
    /// A pool for `config`, connecting lazily: the server starts, and
    /// answers, while the database is down.
    pub fn new(config: tokio_postgres::Config, options: &Options) -> Result<Database, String> {
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Database { pool })
    }

    /// The one row of `sql` (prepared once per connection), first column.
    pub async fn value<T>(&self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<T, Failure>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        // Every pooled connection may have died with a restart; the pool
        // drops each one it finds closed, so a few tries reach a new one.
        let mut last = String::new();
        for _ in 0..3 {
            match self.value_once(sql, args).await {
                Err(Attempt::ConnectionClosed(message)) => last = message,
                other => return other.map_err(Attempt::into_failure),
            }
        }
        Err(Failure::Unavailable(last))
    }

    async fn value_once<T>(&self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<T, Attempt>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        let client = self
            .pool
            .get()
            .await
            .map_err(|error| Attempt::Failed(Failure::Unavailable(error.to_string())))?;
        let statement = client.prepare_cached(sql).await.map_err(Attempt::from)?;
        let row = client
            .query_one(&statement, args)
            .await
            .map_err(Attempt::from)?;
        row.try_get(0).map_err(|error| {
            Attempt::Failed(Failure::Refused {
                sqlstate: "XX000".into(),
                message: error.to_string(),
            })
        })
    }
}

/// One try's outcome: a closed connection is worth one more try, since
/// nothing ran on it.
enum Attempt {
    ConnectionClosed(String),
    Failed(Failure),
}

impl Attempt {
    fn into_failure(self) -> Failure {
        match self {
            Attempt::ConnectionClosed(message) => Failure::Unavailable(message),
            Attempt::Failed(failure) => failure,
        }
    }
}

impl From<tokio_postgres::Error> for Attempt {
    fn from(error: tokio_postgres::Error) -> Attempt {
        if let Some(db) = error.as_db_error() {
            let sqlstate = db.code().code();
            // The server ended the connection (a restart): nothing ran.
            if sqlstate.starts_with("57P") {
                return Attempt::ConnectionClosed(db.message().to_owned());
            }
            return Attempt::Failed(Failure::Refused {
                sqlstate: sqlstate.to_owned(),
                message: db.message().to_owned(),
            });
        }
        if error.is_closed() {
            Attempt::ConnectionClosed(error.to_string())
        } else {
            Attempt::Failed(Failure::Unavailable(error.to_string()))
        }
    }
}

/// A value for `-c name=value` in the startup options: spaces and
/// backslashes escaped with a backslash, as PostgreSQL reads them.
fn escape_option(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for character in value.chars() {
        if character == '\\' || character.is_whitespace() {
            escaped.push('\\');
        }
        escaped.push(character);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_escape_spaces_and_backslashes() {
        assert_eq!(escape_option("acme corp\\x"), "acme\\ corp\\\\x");
    }

    #[test]
    fn sqlstates_become_the_memory_tool_codes() {
        assert_eq!(code_of("P0002"), "ENOENT");
        assert_eq!(code_of("22023"), "EINVAL");
        assert_eq!(code_of("22004"), "EINVAL");
        assert_eq!(code_of("54000"), "EFBIG");
        assert_eq!(code_of("40001"), "ECONFLICT");
        assert_eq!(code_of("XX000"), "EIO");
    }
}
