//! The connections: a small pool, one kept prepared statement per tool on
//! each connection, and a second try on a fresh connection when the one
//! taken turns out to be closed (the database restarted since it was
//! opened) before the statement was sent. Once a statement is sent it is
//! never sent again: it may have committed. A call that is cancelled (by
//! its client, or because the server is closing) has its running statement
//! cancelled in PostgreSQL.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::FutureExt;
use futures_util::future::{BoxFuture, Shared};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use crate::options::Options;

/// Why a statement gave no row: the database refused it (with its SQLSTATE)
/// or could not be reached.
#[derive(Debug)]
pub enum Failure {
    Refused {
        sqlstate: String,
        message: String,
    },
    Unavailable(String),
    /// The connection was lost after the statement was sent: it may or may
    /// not have committed.
    Interrupted(String),
    /// The call was cancelled before its statement ran.
    Cancelled,
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
            Failure::Interrupted(message) => json!({
                "ok": false,
                "error": {
                    "message": format!(
                        "the database is unavailable: the connection was lost while the statement ran, \
                         so the change may or may not have been applied ({message})"
                    ),
                    "code": "EUNAVAILABLE",
                },
            }),
            Failure::Cancelled => json!({
                "ok": false,
                "error": {"message": "the call was cancelled before it ran", "code": "EUNAVAILABLE"},
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

/// Resolves once the call it belongs to is cancelled; every clone resolves
/// with it.
pub type Cancelled = Shared<BoxFuture<'static, ()>>;

/// The cancellation of a call, from whatever signals it (the request's
/// cancellation token).
pub fn cancellation(signal: impl Future<Output = ()> + Send + 'static) -> Cancelled {
    signal.boxed().shared()
}

/// How long a cancelled statement may take to end before its connection is
/// dropped rather than given back to the pool.
const CANCELLED_STATEMENT_GRACE: Duration = Duration::from_secs(5);

pub struct Database {
    pool: Pool,
    /// The server is closing: every running statement is cancelled.
    closing: Arc<watch::Sender<bool>>,
    /// How many statements are sent and not yet ended.
    running: Arc<watch::Sender<usize>>,
    /// This call's cancellation, for the view `cancelled_by` gives.
    cancelled: Option<Cancelled>,
}

/// Counts a statement as running until dropped.
struct Running(Arc<watch::Sender<usize>>);

impl Running {
    fn start(running: &Arc<watch::Sender<usize>>) -> Running {
        running.send_modify(|count| *count += 1);
        Running(running.clone())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count -= 1);
    }
}

/// The connection `options` describe: `--dsn`, named as this server, with
/// `--tenant` as a setting of every session.
pub fn connection_config(options: &Options) -> Result<tokio_postgres::Config, String> {
    let mut config: tokio_postgres::Config =
        options.dsn.parse().map_err(|error| format!("--dsn: {error}"))?;
    if config.get_application_name().is_none() {
        config.application_name("agent-memory-mcp");
    }
    if let Some(tenant) = &options.tenant {
        let mut settings = config.get_options().map(str::to_owned).unwrap_or_default();
        settings.push_str(&format!(" -c agent_memory.tenant={}", escape_option(tenant)));
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
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Database {
            pool,
            closing: Arc::new(watch::Sender::new(false)),
            running: Arc::new(watch::Sender::new(0)),
            cancelled: None,
        })
    }

    /// The same database for one call that `cancelled` may cancel.
    pub fn cancelled_by(&self, cancelled: Cancelled) -> Database {
        Database {
            pool: self.pool.clone(),
            closing: self.closing.clone(),
            running: self.running.clone(),
            cancelled: Some(cancelled),
        }
    }

    /// Cancels every running statement and waits, at most `patience`, for
    /// them to end; calls after this one are refused.
    pub async fn close(&self, patience: Duration) {
        self.closing.send_replace(true);
        let mut running = self.running.subscribe();
        let ended = tokio::time::timeout(patience, running.wait_for(|count| *count == 0)).await;
        if ended.is_err() {
            tracing::warn!("statements still running after they were cancelled");
        }
    }

    /// Resolves when this call is cancelled or the server closes.
    async fn interrupted(&self) {
        let mut closing = self.closing.subscribe();
        let closes = async move {
            // An error means the sender is gone, which cannot happen while
            // `self` holds it: wait for ever then.
            if closing.wait_for(|closing| *closing).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        match &self.cancelled {
            Some(cancelled) => {
                tokio::select! {
                    () = cancelled.clone() => {}
                    () = closes => {}
                }
            }
            None => closes.await,
        }
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
                Err(Attempt::NotSent(message)) => last = message,
                other => return other.map_err(Attempt::into_failure),
            }
        }
        Err(Failure::Unavailable(last))
    }

    async fn value_once<T>(&self, sql: &str, args: &[&(dyn ToSql + Sync)]) -> Result<T, Attempt>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        let client = tokio::select! {
            client = self.pool.get() => client
                .map_err(|error| Attempt::Failed(Failure::Unavailable(error.to_string())))?,
            () = self.interrupted() => return Err(Attempt::Failed(Failure::Cancelled)),
        };
        // Preparing runs nothing: a connection found closed here is worth
        // another try.
        let statement = client.prepare_cached(sql).await.map_err(Attempt::not_sent)?;
        if client.is_closed() {
            return Err(Attempt::NotSent("the connection is closed".into()));
        }
        if self.interrupted().now_or_never().is_some() {
            return Err(Attempt::Failed(Failure::Cancelled));
        }
        let _running = Running::start(&self.running);
        let mut query = Box::pin(client.query_one(&statement, args));
        let mut cancelled = false;
        let ended = tokio::select! {
            // The statement is sent on the first poll: from then on a
            // cancellation has to reach PostgreSQL.
            biased;
            row = &mut query => Some(row),
            () = self.interrupted() => {
                // The statement ends with PostgreSQL's cancel (or had ended
                // before it arrived).
                cancelled = true;
                if let Err(error) = client.cancel_token().cancel_query(NoTls).await {
                    tracing::warn!("cancelling a statement: {error}");
                }
                tokio::time::timeout(CANCELLED_STATEMENT_GRACE, &mut query).await.ok()
            }
        };
        drop(query);
        if cancelled {
            // PostgreSQL signals the backend after the cancel request is
            // answered: on a connection given back, the signal could land
            // on the next call's statement. A connection that was sent a
            // cancel is never reused.
            drop(deadpool_postgres::Object::take(client));
        }
        let Some(row) = ended else {
            return Err(Attempt::Failed(Failure::Interrupted(
                "the statement did not end when cancelled".into(),
            )));
        };
        let row = row.map_err(Attempt::sent)?;
        row.try_get(0).map_err(|error| {
            Attempt::Failed(Failure::Refused {
                sqlstate: "XX000".into(),
                message: error.to_string(),
            })
        })
    }
}

/// One try's outcome: a connection that closed before the statement was
/// sent is worth another try, since nothing ran on it.
enum Attempt {
    NotSent(String),
    Failed(Failure),
}

impl Attempt {
    fn into_failure(self) -> Failure {
        match self {
            Attempt::NotSent(message) => Failure::Unavailable(message),
            Attempt::Failed(failure) => failure,
        }
    }

    /// An error before the statement was sent: a lost connection is tried
    /// again.
    fn not_sent(error: tokio_postgres::Error) -> Attempt {
        if error.is_closed() || is_connection_ended(&error) {
            return Attempt::NotSent(error.to_string());
        }
        Attempt::Failed(failure_of(error))
    }

    /// An error once the statement was sent: a lost connection leaves
    /// unknown whether it committed, so it is not sent again.
    fn sent(error: tokio_postgres::Error) -> Attempt {
        if error.is_closed() || is_connection_ended(&error) {
            return Attempt::Failed(Failure::Interrupted(error.to_string()));
        }
        Attempt::Failed(failure_of(error))
    }
}

/// Whether the server ended the connection (57P: a shutdown, a terminated
/// backend).
fn is_connection_ended(error: &tokio_postgres::Error) -> bool {
    error.as_db_error().is_some_and(|db| db.code().code().starts_with("57P"))
}

fn failure_of(error: tokio_postgres::Error) -> Failure {
    match error.as_db_error() {
        Some(db) => Failure::Refused {
            sqlstate: db.code().code().to_owned(),
            message: db.message().to_owned(),
        },
        None => Failure::Unavailable(error.to_string()),
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
