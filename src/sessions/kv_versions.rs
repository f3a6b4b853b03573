//! History of key-value entries: while `agent_memory.history_retention` is
//! above 0, a write or a delete of a live entry first saves the entry as it
//! is (its version, value and times) in kv_entry_versions, and keeps only
//! the versions numbered within the retention of the one saved. A version
//! expires when its value would have, and goes with its session.
//!
//! Every writer of a session's entries holds the session's write lock
//! (`lock_session`), so the entry saved is the one the write replaces. An
//! entry written anew (absent or expired before) takes the version after
//! the newest its history keeps, with history on or off, so a version
//! number names one value for as long as it is kept.

use pgrx::prelude::*;

use agent_memory_core::versions;

use crate::pg::args::{INT4, JSONB, TEXT, TEXT_ARRAY, TIMESTAMPTZ, checked_id, checked_positive};
use crate::pg::c_functions::{TableCall, materialized_table_function};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Rows, Statement, first_value_of, iso_fields, on_citus};
use crate::pg::settings;
use crate::pg::stream::StreamStatement;
use crate::sessions::kv::{entry_name, stored_document, write_entries};
use crate::sessions::{
    active, active_until, callers_active_session, idle_timeout_minutes, lock_session,
};

type Client<'a, 'b> = &'a mut pgrx::spi::SpiClient<'b>;

/// Save the live entries among `keys` (every live entry when None) of
/// session `session_id` as versions, keeping those within `retention` of
/// each.
pub(crate) fn save_entries(
    client: Client, session_id: &str, keys: Option<&[&str]>, retention: i32,
) -> SqlResult<()> {
    if on_citus()? {
        return save_entries_on_citus(client, session_id, keys, retention);
    }
    let statement = if keys.is_some() { &SAVE } else { &SAVE_ALL };
    // Planned once: a plan for the values would cost the save more than
    // running it, and the index plan is the same for any values.
    let _generic = settings::GenericPlans::force()?;
    statement.run(
        client,
        &[
            session_id.into(),
            keys.map(|keys| keys.to_vec()).into(),
            retention.into(),
            idle_timeout_minutes().into(),
        ],
    )?;
    Ok(())
}

/// As `save_entries`, in the statements Citus routes inside a delegated
/// function: it refuses an INSERT that selects from a distributed table,
/// or one in a CTE. The live entries are read, then each is saved as
/// values and its history trimmed.
fn save_entries_on_citus(
    client: Client, session_id: &str, keys: Option<&[&str]>, retention: i32,
) -> SqlResult<()> {
    // A session gone idle keeps its entries until the cleanup, but a
    // delete there is refused: it saves nothing either.
    if active_until(client, session_id, idle_timeout_minutes())?.is_none() {
        return Ok(());
    }
    // The value as its stored bytes, handed back unchanged.
    type Live = (
        String,
        i32,
        JsonbBytes,
        TimestampWithTimeZone,
        TimestampWithTimeZone,
        TimestampWithTimeZone,
    );
    let live: Vec<Live> = LIVE_ON_CITUS
        .run(client, &[session_id.into(), keys.map(|k| k.to_vec()).into()])?
        .rows(&["key", "version", "value", "created_at", "updated_at", "expires_at"])?;
    for (key, version, value, created_at, updated_at, expires_at) in live {
        SAVE_ONE_ON_CITUS.run(
            client,
            &[
                session_id.into(),
                key.as_str().into(),
                version.into(),
                value.into(),
                created_at.into(),
                updated_at.into(),
                expires_at.into(),
            ],
        )?;
        TRIM_ON_CITUS.run(
            client,
            &[session_id.into(), key.as_str().into(), version.into(), retention.into()],
        )?;
    }
    Ok(())
}

/// Give each entry of `keys`, just written anew at version 1, the version
/// after the newest its history keeps, with history on or off now (a
/// later save would otherwise replace kept version 1). Returns the keys
/// renumbered, with their versions. Only a write anew pays for the read
/// of the history: an update of a live entry never runs it.
pub(crate) fn number_anew(
    client: Client, session_id: &str, keys: &[&str],
) -> SqlResult<Vec<(String, i32)>> {
    if on_citus()? {
        let newest: Vec<(String, i32)> = NEWEST_ON_CITUS
            .run(client, &[session_id.into(), keys.to_vec().into()])?
            .rows(&["key", "version"])?;
        let mut numbered = Vec::with_capacity(newest.len());
        for (key, newest) in newest {
            let table = RENUMBER_ONE_ON_CITUS
                .run(client, &[session_id.into(), key.as_str().into(), newest.into()])?;
            if !table.is_empty() {
                let version = table.first().required::<i32>(1, "version")?;
                numbered.push((key, version));
            }
        }
        return Ok(numbered);
    }
    let _generic = settings::GenericPlans::force()?;
    NUMBER_ANEW.run(client, &[session_id.into(), keys.to_vec().into()])?.rows(&["key", "version"])
}

// kv_versions returns its rows in materialize mode, each put into the
// result store as it is read: a call holds one version at a time, however
// many the retention keeps and however large each is (pgrx's table
// functions collect every row first).
materialized_table_function! { "kv_versions", kv_versions_wrapper, put_version_rows, r#"
CREATE FUNCTION agent_memory.kv_versions(session_id text, key text)
RETURNS TABLE (version integer, value jsonb, updated_at timestamptz, replaced_at timestamptz, expires_at timestamptz)
LANGUAGE c STRICT STABLE PARALLEL SAFE SET search_path TO pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'kv_versions_wrapper';
"# }

/// The versions an entry's history keeps, newest first (none when the
/// session is gone), into the result store. The function is strict:
/// neither argument is NULL.
fn put_version_rows(call: &TableCall) -> SqlResult<()> {
    let idle = idle_timeout_minutes().to_string();
    call.put_rows(&LIST, &[call.text(0)?, Some(&idle), call.text(1)?])?;
    Ok(())
}

/// One kept version of an entry as `{key, value, version, createdAt,
/// updatedAt, replacedAt, expiresAt}`, or NULL when it is not kept.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_version(session_id: &str, key: &str, version: i32) -> SqlResult<Option<JsonbBytes>> {
    first_value_of::<JsonbBytes>(
        &READ,
        &[session_id.into(), idle_timeout_minutes().into(), key.into(), version.into()],
    )
}

/// Write a kept version's value back as the entry's next version (itself
/// saved in turn, so a restore can be undone), as kv_set writes it: only if
/// the entry is at `expected_version` when given (0: none), with `ttl` or
/// agent_memory.memory_ttl.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_restore(
    session_id: Option<&str>, key: Option<&str>, version: Option<i32>,
    expected_version: default!(Option<i32>, "NULL"), ttl: default!(Option<Interval>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let session_id = checked_id("session_id", session_id)?;
    let key = checked_id("key", key)?;
    let version = versions::checked_version("version", version).or_report()?;
    let expected = versions::checked_expected("expected_version", expected_version).or_report()?;
    let ttl = checked_positive("ttl", ttl)?;
    // Taken before the read, so no write of the session trims the version
    // between the read and the restore.
    lock_session(session_id)?;
    let value = first_value_of::<JsonB>(
        &KEPT_VALUE,
        &[session_id.into(), idle_timeout_minutes().into(), key.into(), version.into()],
    )?
    .ok_or_else(|| versions::not_kept(&entry_name(session_id, key), version))
    .or_report()?;
    let written = write_entries(session_id, &[(key, &value.0)], None, ttl, expected)?;
    stored_document(key, &written)
}

/// Remove the history of one entry (`key`), or of every entry of the
/// session (NULL): for a request to erase what was stored. Returns how
/// many versions were removed. The entries themselves stay.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn kv_purge_history(
    session_id: Option<&str>, key: default!(Option<&str>, "NULL"),
) -> SqlResult<i64> {
    let session_id = checked_id("session_id", session_id)?;
    if let Some(key) = key {
        checked_id("key", Some(key))?;
    }
    lock_session(session_id)?;
    Ok(first_value_of::<i64>(&PURGE, &[session_id.into(), key.into()])?.unwrap_or(0))
}

// The statements.

/// Save the live entries `$which` picks among those of session $1, while
/// the session is active (default idle minutes $4), replacing a version
/// of the same number that an earlier life of the key left, and drop the
/// versions of each that are newer than the one saved (that earlier
/// life's) or $3 or more below it. Returns how many were saved.
macro_rules! save_entries {
    ($which:literal) => {
        concat!(
            "WITH saved AS (
               INSERT INTO agent_memory.kv_entry_versions AS v
                   (session_id, key, version, value, created_at, updated_at, expires_at, tenant)
               SELECT e.session_id, e.key, e.version, e.value, e.created_at, e.updated_at, e.expires_at, e.tenant
               FROM agent_memory.kv_entries e
               WHERE e.session_id = $1 AND e.tenant = agent_memory.caller_tenant()",
            $which,
            "
                 AND e.expires_at > pg_catalog.now()
                 AND EXISTS (SELECT FROM agent_memory.sessions s WHERE ",
            callers_active_session!("$4"),
            ")
               ON CONFLICT (session_id, key, version, tenant) DO UPDATE
                  SET value = excluded.value, created_at = excluded.created_at,
                      updated_at = excluded.updated_at, expires_at = excluded.expires_at,
                      replaced_at = excluded.replaced_at
               RETURNING v.key, v.version),
             trimmed AS (
               DELETE FROM agent_memory.kv_entry_versions v USING saved
               WHERE v.session_id = $1 AND v.tenant = agent_memory.caller_tenant() AND v.key = saved.key
                 AND (v.version > saved.version OR v.version <= saved.version - $3))
             SELECT pg_catalog.count(*) FROM saved"
        )
    };
}

/// The entries $2.
static SAVE: Statement =
    Statement::read_write(save_entries!(" AND e.key = ANY ($2)"), &[TEXT, TEXT_ARRAY, INT4, INT4]);

/// Every entry ($2 is NULL).
static SAVE_ALL: Statement =
    Statement::read_write(save_entries!(""), &[TEXT, TEXT_ARRAY, INT4, INT4]);

/// On Citus: the live entries $2 of session $1 (every one when NULL),
/// with the columns a version keeps, locked: a call Citus does not
/// delegate takes the session's write lock on the coordinator, one it
/// delegates on the worker, so the row lock is what keeps two writers
/// from saving the same version.
static LIVE_ON_CITUS: Statement = Statement::read_write(
    "SELECT e.key, e.version, e.value, e.created_at, e.updated_at, e.expires_at
     FROM agent_memory.kv_entries e
     WHERE e.session_id = $1 AND e.tenant = agent_memory.caller_tenant()
       AND ($2::text[] IS NULL OR e.key = ANY ($2))
       AND e.expires_at > pg_catalog.now()
     FOR UPDATE",
    &[TEXT, TEXT_ARRAY],
);

/// On Citus: save entry $2 of session $1 as version $3 (value $4, dates
/// $5 to $7), replacing a version of that number an earlier life of the
/// key left.
static SAVE_ONE_ON_CITUS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.kv_entry_versions AS v
         (session_id, key, version, value, created_at, updated_at, expires_at, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, agent_memory.caller_tenant())
     ON CONFLICT (session_id, key, version, tenant) DO UPDATE
        SET value = excluded.value, created_at = excluded.created_at,
            updated_at = excluded.updated_at, expires_at = excluded.expires_at,
            replaced_at = excluded.replaced_at",
    &[TEXT, TEXT, INT4, JSONB, TIMESTAMPTZ, TIMESTAMPTZ, TIMESTAMPTZ],
);

/// On Citus: drop the versions of entry $2 of session $1 newer than the
/// one just saved ($3, an earlier life's) or $4 or more below it.
static TRIM_ON_CITUS: Statement = Statement::read_write(
    "DELETE FROM agent_memory.kv_entry_versions v
     WHERE v.session_id = $1 AND v.tenant = agent_memory.caller_tenant() AND v.key = $2
       AND (v.version > $3 OR v.version <= $3 - $4)",
    &[TEXT, TEXT, INT4, INT4],
);

/// On Citus: the newest version the history of each entry $2 of session
/// $1 keeps (no row for an entry whose history keeps none).
static NEWEST_ON_CITUS: Statement = Statement::read_write(
    "SELECT v.key, pg_catalog.max(v.version) FROM agent_memory.kv_entry_versions v
     WHERE v.session_id = $1 AND v.tenant = agent_memory.caller_tenant() AND v.key = ANY ($2)
     GROUP BY v.key",
    &[TEXT, TEXT_ARRAY],
);

/// On Citus: entry $2 of session $1, just written anew, takes the version
/// after $3, the newest its history keeps.
static RENUMBER_ONE_ON_CITUS: Statement = Statement::read_write(
    "UPDATE agent_memory.kv_entries e SET version = $3 + 1
     WHERE e.session_id = $1 AND e.tenant = agent_memory.caller_tenant() AND e.key = $2
       AND e.version <= $3
     RETURNING e.version",
    &[TEXT, TEXT, INT4],
);

/// Entries $2 of session $1, just written anew, take the version after the
/// newest their history keeps.
static NUMBER_ANEW: Statement = Statement::read_write(
    "UPDATE agent_memory.kv_entries e SET version = n.newest + 1
     FROM (SELECT v.key, max(v.version) AS newest FROM agent_memory.kv_entry_versions v
           WHERE v.session_id = $1 AND v.tenant = agent_memory.caller_tenant() AND v.key = ANY ($2)
           GROUP BY v.key) n
     WHERE e.session_id = $1 AND e.tenant = agent_memory.caller_tenant() AND e.key = n.key
       AND e.version <= n.newest
     RETURNING e.key, e.version",
    &[TEXT, TEXT_ARRAY],
);

/// The kept versions of entry $3 of active session $1 ($2 idle minutes,
/// or the expression given for them).
macro_rules! kept_versions {
    ($columns:literal, $which:literal) => {
        kept_versions!($columns, $which, "$2")
    };
    ($columns:literal, $which:literal, $idle_minutes:literal) => {
        concat!(
            "SELECT ",
            $columns,
            " FROM agent_memory.kv_entry_versions v JOIN agent_memory.sessions s
               ON s.session_id = v.session_id AND s.tenant = v.tenant
             WHERE v.session_id = $1 AND v.key = $3 AND v.tenant = agent_memory.caller_tenant()
               AND v.expires_at > pg_catalog.now() AND ",
            active!("s", $idle_minutes),
            $which
        )
    };
}

static LIST: StreamStatement = StreamStatement {
    sql: kept_versions!(
        "v.version, v.value, v.updated_at, v.replaced_at, v.expires_at",
        " ORDER BY v.version DESC",
        "$2::int4"
    ),
    params: 3,
    columns: &[
        pg_sys::INT4OID,
        pg_sys::JSONBOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::TIMESTAMPTZOID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static READ: Statement = Statement::read_only(
    concat!(
        "SELECT pg_catalog.jsonb_build_object('key', v.key, 'value', v.value, 'version', v.version",
        iso_fields!(
            "createdAt": "v.created_at", "updatedAt": "v.updated_at",
            "replacedAt": "v.replaced_at", "expiresAt": "v.expires_at"
        ),
        ") FROM (",
        kept_versions!("v.*", " AND v.version = $4"),
        ") v"
    ),
    &[TEXT, INT4, TEXT, INT4],
);

/// The value of kept version $4, read under the session's lock.
static KEPT_VALUE: Statement = Statement::read_write(
    kept_versions!("v.value", " AND v.version = $4"),
    &[TEXT, INT4, TEXT, INT4],
);

/// Remove the versions of entry $2 of session $1 (all entries: NULL).
static PURGE: Statement = Statement::read_write(
    "WITH purged AS (
       DELETE FROM agent_memory.kv_entry_versions v
       WHERE v.session_id = $1 AND v.tenant = agent_memory.caller_tenant()
         AND ($2::text IS NULL OR v.key = $2)
       RETURNING 1)
     SELECT count(*) FROM purged",
    &[TEXT, TEXT],
);
