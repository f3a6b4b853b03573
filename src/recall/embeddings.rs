//! Embeddings: the application makes them of each item's text, outside the
//! database, and recall compares them with a query's.
//!
//! An embedding is kept in its item's row with the md5 of the text it was
//! made of. A write that changes the text leaves the md5 behind, so recall
//! and the outbox see the embedding as stale at once, whichever statement
//! wrote; a deleted item takes its embedding with it.

use pgrx::iter::TableIterator;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::recall::{self, Kind, checked_kinds};

use super::{
    checked_embedding, checked_scope, each_kind, in_live_sessions, item_text, kind_columns,
    live_sessions, union_all,
};
use crate::pg::args::{FLOAT4_ARRAY, INT4, INT8, TEXT, TEXT_ARRAY};
use crate::pg::datums::JsonB;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement};
use crate::pg::settings::{self, NoNotices};
use crate::sessions::idle_timeout_minutes;

/// The most items one outbox call lists.
const MAX_OUTBOX_ITEMS: i32 = 10_000;

/// The embeddings' dimension; 55000 when none was set.
pub(super) fn dimension(client: &pgrx::spi::SpiClient<'_>) -> SqlResult<usize> {
    let (dimension, _) = stored_settings(client)?;
    checked_dimension(dimension)
}

/// A dimension as recall_settings holds it; 55000 when none was set.
fn checked_dimension(dimension: Option<i32>) -> SqlResult<usize> {
    dimension.and_then(|d| usize::try_from(d).ok()).ok_or_else(no_dimension).or_report()
}

/// The embeddings' dimension, if one was set, and the kinds recall is
/// kept for (see kept_kinds).
fn stored_settings(client: &pgrx::spi::SpiClient<'_>) -> SqlResult<(Option<i32>, Vec<Kind>)> {
    let Some(row) = SETTINGS.read(client, &[])?.next() else {
        return Ok((None, Vec::new()));
    };
    Ok((row.value::<i32>(1)?, kept_kinds(row.value::<Vec<String>>(2)?)))
}

/// The kinds recall is kept for, of recall_settings.kinds as
/// recall_rebuild recorded them (from agent_memory.recall_kinds). The
/// others' search columns are NULL, so their words find nothing; their
/// meaning finds nothing either, the outbox lists none of their items and
/// recall_embed stores no embedding for them: a kind left out costs no
/// write and is not found.
pub(super) fn kept_kinds(recorded: Option<Vec<String>>) -> Vec<Kind> {
    recorded.unwrap_or_default().iter().filter_map(|name| Kind::from_name(name)).collect()
}

/// Take embeddings of `dimension` numbers from now on. Embeddings of
/// another dimension stay stored but are stale: recall skips them and the
/// outbox lists their items again.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn recall_enable_embeddings(dimension: Option<i32>) -> SqlResult<JsonB> {
    let dimension = recall::checked_dimension(dimension).or_report()?;
    // No NOTICE for indexes of another dimension that were never made.
    let _quiet = NoNotices::hold();
    Spi::connect_mut(|client| {
        SET_DIMENSION.run(client, &[dimension.into()])?;
        for kind in Kind::ALL {
            client
                .update(
                    &format!("DROP INDEX IF EXISTS agent_memory.{}", index_name(kind)),
                    None,
                    &[],
                )
                .or_report()?;
        }
        let schema = vector_schema(client)?;
        let indexed = match &schema {
            Some(schema) if dimension <= MAX_HNSW_DIMENSION => {
                for kind in Kind::ALL {
                    let vector = vector_type(schema, dimension);
                    client
                        .update(
                            &format!(
                                "CREATE INDEX {} ON agent_memory.{} USING hnsw
                                   ((embedding::{vector}) {}.vector_cosine_ops)
                                 WHERE embedding IS NOT NULL AND pg_catalog.array_length(embedding, 1) = {dimension}",
                                index_name(kind),
                                kind.table(),
                                quoted_identifier(schema),
                            ),
                            None,
                            &[],
                        )
                        .or_report()?;
                }
                true
            }
            _ => false,
        };
        Ok(JsonB(serde_json::json!({
            "dimension": dimension,
            "index": if indexed { Some("hnsw") } else { None },
        })))
    })
}

/// pgvector's HNSW index takes vectors of at most this many dimensions.
const MAX_HNSW_DIMENSION: i32 = 2000;

/// The name of a kind's HNSW index on its embeddings.
fn index_name(kind: Kind) -> String {
    format!("{}_embedding_idx", kind.table())
}

/// An identifier quoted for SQL.
pub(super) fn quoted_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// pgvector's type of `dimension` numbers in its schema `schema`.
fn vector_type(schema: &str, dimension: i32) -> String {
    format!("{}.vector({dimension})", quoted_identifier(schema))
}

/// The schema pgvector is installed in, if it is.
fn vector_schema(client: &pgrx::spi::SpiClient<'_>) -> SqlResult<Option<String>> {
    let table = VECTOR_SCHEMA.read(client, &[])?;
    if table.is_empty() {
        return Ok(None);
    }
    table.first().value::<String>(1)
}

/// Where recall finds embeddings' neighbours.
pub(super) enum Neighbours {
    /// It compares every embedded item of the scope itself.
    Compared,
    /// pgvector computes the distances, through its HNSW indexes when the
    /// scope is large: pgvector's schema, and the caller's
    /// hnsw.iterative_scan to set back after ('' when it had none).
    Pgvector { schema: String, iterative_scan: String },
}

/// What recall by meaning reads first (see MEANING_STATE).
pub(super) struct MeaningState {
    /// The embeddings' dimension.
    pub dimension: usize,
    /// Where their neighbours are found.
    pub neighbours: Neighbours,
    /// The kinds recall is kept for (see kept_kinds).
    pub kept: Vec<Kind>,
}

/// The embeddings' dimension (55000 when none was set), where their
/// neighbours are found and the kinds recall is kept for (see
/// MEANING_STATE).
pub(super) fn meaning_state(client: &pgrx::spi::SpiClient<'_>) -> SqlResult<MeaningState> {
    let table = MEANING_STATE.read(client, &[])?;
    let (dimension, schema, iterative_scan, kept) = match table.into_iter().next() {
        None => (None, None, None, None),
        Some(row) => (
            row.value::<i32>(1)?,
            row.value::<String>(2)?,
            row.value::<String>(3)?,
            row.value::<Vec<String>>(4)?,
        ),
    };
    let dimension = checked_dimension(dimension)?;
    let neighbours = match schema {
        Some(schema) => {
            Neighbours::Pgvector { schema, iterative_scan: iterative_scan.unwrap_or_default() }
        }
        None => Neighbours::Compared,
    };
    Ok(MeaningState { dimension, neighbours, kept: kept_kinds(kept) })
}

fn no_dimension() -> Error {
    Error::new(agent_memory_core::ErrorKind::WrongState, "recall takes no embeddings yet")
        .with_hint("agent_memory.recall_enable_embeddings(dimension) sets their dimension")
}

// Declared by hand for its argument named ref (see recall).
extension_sql!(
    r#"
CREATE FUNCTION agent_memory.recall_embed(
    kind text,
    key text,
    ref text,
    embedding real[],
    source_md5 text DEFAULT NULL)
RETURNS boolean
VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_embed_wrapper';
"#,
    name = "recall_embed"
);

/// Store `embedding` for an item (as recall names it: kind, key, ref).
/// With `source_md5` (the outbox's), only if the item still holds the text
/// it was made of. True when stored; false when the item is gone or its
/// text changed.
#[pg_extern(sql = false)]
#[search_path(pg_catalog, pg_temp)]
fn recall_embed(
    kind: Option<&str>, key: Option<&str>, reference: Option<&str>,
    embedding: Option<Vec<Option<f32>>>, source_md5: default!(Option<&str>, "NULL"),
) -> SqlResult<bool> {
    let kinds = kind.map(|kind| vec![Some(kind.to_string())]);
    let kind =
        checked_kinds(Some(kinds.as_deref().ok_or_else(|| Error::null("kind")).or_report()?))
            .or_report()?[0];
    let key = recall::check_key(kind, key).or_report()?;
    let reference = reference.ok_or_else(|| Error::null("ref")).or_report()?;
    let item = recall::item_of(kind, key, reference).or_report()?;
    let embedding =
        checked_embedding(embedding.ok_or_else(|| Error::null("embedding")).or_report()?)?;
    Spi::connect_mut(|client| {
        let (dimension, kept) = stored_settings(client)?;
        recall::check_embedding(&embedding, Some(checked_dimension(dimension)?)).or_report()?;
        if !kept.contains(&kind) {
            // A kind left out of recall costs no write (see kept_kinds).
            return Ok(false);
        }
        let vector = embedding.clone();
        // The item's own columns: a message is named by its seq, the rest
        // by their name.
        let (statement, name) = match kind {
            Kind::Message => (&EMBED_MESSAGE, item.seq.into()),
            Kind::Part => (&EMBED_PART, item.name.into()),
            Kind::Kv => (&EMBED_KV, item.name.into()),
            Kind::Node => (&EMBED_NODE, item.name.into()),
            Kind::File => (&EMBED_FILE, item.name.into()),
        };
        let mut args = vec![item.key.into(), name, vector.into(), source_md5.into()];
        if kind.of_session() {
            // A session's items take embeddings only while it is active
            // (idle minutes $6 by default); $5 is a part's node key.
            let node_key = (kind == Kind::Part).then_some(item.node_key);
            args.extend([node_key.into(), idle_timeout_minutes().into()]);
        }
        let stored = statement.run(client, &args)?;
        Ok(!stored.is_empty())
    })
}

// Declared by hand for its column named ref (see recall).
extension_sql!(
    r#"
CREATE FUNCTION agent_memory.recall_outbox(
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    max_items integer DEFAULT 100)
RETURNS TABLE (kind text, key text, ref text, content text, source_md5 text)
STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_outbox_wrapper';
"#,
    name = "recall_outbox"
);

/// The items of a scope that need an embedding: none yet, or one of
/// another text or dimension. Each with its text (what to embed) and the
/// text's md5 (what recall_embed checks), at most `max_items`.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
#[search_path(pg_catalog, pg_temp)]
fn recall_outbox(
    session_id: default!(Option<&str>, "NULL"), user_id: default!(Option<&str>, "NULL"),
    owner: default!(Option<&str>, "NULL"), scope: default!(Option<&str>, "NULL"),
    kinds: default!(Option<Vec<Option<String>>>, "NULL"), max_items: default!(Option<i32>, "100"),
) -> Result<
    TableIterator<
        'static,
        (
            name!(kind, String),
            name!(key, String),
            name!(reference, String),
            name!(content, String),
            name!(source_md5, String),
        ),
    >,
    ErrorReport,
> {
    let scope = checked_scope(session_id, user_id, owner, scope)?;
    let kinds = checked_kinds(kinds.as_deref()).or_report()?;
    let max_items = match max_items {
        None => return Err(Error::null("max_items")).or_report(),
        Some(n) if (1..=MAX_OUTBOX_ITEMS).contains(&n) => n,
        Some(n) => {
            return Err(Error::invalid(format!(
                "max_items must be 1 to {MAX_OUTBOX_ITEMS}, not {n}"
            )))
            .or_report();
        }
    };
    let kinds: Vec<Kind> = kinds.into_iter().filter(|kind| scope.reaches(*kind)).collect();
    if kinds.is_empty() {
        return Ok(TableIterator::new(Vec::new()));
    }
    let rows = Spi::connect(|client| -> SqlResult<Vec<_>> {
        let (dimension, kept) = stored_settings(client)?;
        let names: Vec<&str> =
            kinds.iter().filter(|kind| kept.contains(kind)).map(|kind| kind.name()).collect();
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let table = OUTBOX.read(
            client,
            &[
                dimension.into(),
                scope.session_id.into(),
                scope.user_id.into(),
                scope.owner.into(),
                scope.scope.into(),
                names.into(),
                max_items.into(),
                idle_timeout_minutes().into(),
                settings::max_result_bytes_arg().into(),
            ],
        )?;
        let mut rows = Vec::with_capacity(table.len());
        for row in table {
            rows.push((
                row.required::<String>(1, "kind")?,
                row.required::<String>(2, "key")?,
                row.required::<String>(3, "ref")?,
                row.required::<String>(7, "content")?,
                row.required::<String>(8, "source_md5")?,
            ));
        }
        Ok(rows)
    })?;
    Ok(TableIterator::new(rows))
}

// The statements.

/// The embeddings' dimension (NULL: none set) and the kinds recall is
/// kept for.
static SETTINGS: Statement =
    Statement::read_only("SELECT c.dimension, c.kinds FROM agent_memory.recall_settings c", &[]);

/// The schema of pgvector, when 0.8 or later is installed (recall reads
/// its indexes only then: see MEANING_STATE).
static VECTOR_SCHEMA: Statement = Statement::read_only(
    "SELECT n.nspname::text FROM pg_catalog.pg_extension e
     JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'vector'
       AND pg_catalog.string_to_array(e.extversion, '.')::int[] >= '{0,8}'",
    &[],
);

/// The embeddings' dimension; when pgvector (0.8 or later, for its
/// iterative scan) is installed and every kind has its HNSW index (which
/// recall_enable_embeddings makes for the dimension it sets, and DROP
/// EXTENSION vector drops), pgvector's schema and the caller's
/// hnsw.iterative_scan, which it sets to relaxed_order for the rest of the
/// transaction (an error rolls it back; recall sets it back after); and
/// the kinds recall is kept for.
static MEANING_STATE: Statement = Statement::read_only(
    "SELECT c.dimension, v.nspname,
            CASE WHEN v.nspname IS NOT NULL
                 THEN coalesce(pg_catalog.current_setting('hnsw.iterative_scan', true), '')
                      || pg_catalog.left(pg_catalog.set_config('hnsw.iterative_scan', 'relaxed_order', true), 0)
            END,
            c.kinds
     FROM agent_memory.recall_settings c
     LEFT JOIN (SELECT n.nspname::text FROM pg_catalog.pg_extension e
                JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
                WHERE e.extname = 'vector'
                  AND pg_catalog.string_to_array(e.extversion, '.')::int[] >= '{0,8}'
                  AND pg_catalog.to_regclass('agent_memory.kv_entries_embedding_idx') IS NOT NULL
                  AND pg_catalog.to_regclass('agent_memory.thread_messages_embedding_idx') IS NOT NULL
                  AND pg_catalog.to_regclass('agent_memory.wm_parts_embedding_idx') IS NOT NULL
                  AND pg_catalog.to_regclass('agent_memory.graph_nodes_embedding_idx') IS NOT NULL
                  AND pg_catalog.to_regclass('agent_memory.memory_files_embedding_idx') IS NOT NULL) v
       ON c.dimension IS NOT NULL",
    &[],
);

/// Set the embeddings' dimension to $1.
static SET_DIMENSION: Statement =
    Statement::read_write("UPDATE agent_memory.recall_settings SET dimension = $1", &[INT4]);

/// Store embedding $3 in the row `$alias` of `$table` that `$key` finds (a
/// caller's tenant's), with the md5 of its text; when $4 is given, only if
/// that md5 is $4.
macro_rules! embed {
    ($kind:tt, $table:literal, $alias:literal, $key:expr) => {
        concat!(
            "UPDATE agent_memory.",
            $table,
            " ",
            $alias,
            " SET embedding = $3, embedding_md5 = pg_catalog.md5(",
            item_text!($kind, $alias),
            ") WHERE ",
            $key,
            " AND ",
            $alias,
            ".tenant = agent_memory.caller_tenant() AND ($4::text IS NULL OR pg_catalog.md5(",
            item_text!($kind, $alias),
            ") = $4)"
        )
    };
}

/// `embed!` for an item of session $1 that `$key` finds, while the session
/// is active (default idle minutes $6).
macro_rules! embed_in_session {
    ($kind:tt, $table:literal, $alias:literal, $key:literal) => {
        embed!(
            $kind,
            $table,
            $alias,
            concat!(
                $alias,
                ".session_id = $1 AND ",
                $key,
                " AND EXISTS (SELECT FROM agent_memory.sessions s
                              WHERE s.session_id = $1 AND s.tenant = agent_memory.caller_tenant() AND ",
                crate::sessions::active!("s", "$6"),
                ")"
            )
        )
    };
}

/// Key-value entry $2 of active session $1, while it has not expired ($5
/// is unused: the session's statements take the same arguments).
static EMBED_KV: Statement = Statement::read_write(
    embed_in_session!("kv", "kv_entries", "e", "e.key = $2 AND e.expires_at > pg_catalog.now()"),
    &[TEXT, TEXT, FLOAT4_ARRAY, TEXT, TEXT, INT4],
);

/// Message seq $2 of active session $1 (among the session's messages: seq
/// has no index of its own, and a session keeps a bounded number; $5 is
/// unused).
static EMBED_MESSAGE: Statement = Statement::read_write(
    embed_in_session!("message", "thread_messages", "m", "m.seq = $2"),
    &[TEXT, INT8, FLOAT4_ARRAY, TEXT, TEXT, INT4],
);

/// Part $2 of node key $5 ('' for the session's entry) of active session
/// $1.
static EMBED_PART: Statement = Statement::read_write(
    embed_in_session!("working_memory", "wm_parts", "p", "p.node_key = $5 AND p.part = $2"),
    &[TEXT, TEXT, FLOAT4_ARRAY, TEXT, TEXT, INT4],
);

/// Node $2 of owner $1.
static EMBED_NODE: Statement = Statement::read_write(
    embed!("node", "graph_nodes", "n", "n.owner = $1 AND n.node_id = $2"),
    &[TEXT, TEXT, FLOAT4_ARRAY, TEXT],
);

/// File $2 of scope $1.
static EMBED_FILE: Statement = Statement::read_write(
    embed!("file", "memory_files", "f", "f.scope = $1 AND f.path = $2"),
    &[TEXT, TEXT, FLOAT4_ARRAY, TEXT],
);

/// One kind's items that need an embedding, as (kind, key, ref, thread,
/// slot, updated_at, text, md5 of text): `$columns`, the text and its md5
/// of the rows of `$from` that pass `$filter`, when kind `$kind` is asked
/// for ($6), with no embedding of their current text in dimension $1.
macro_rules! outbox {
    ($kind:tt, $alias:literal, $columns:literal, $from:expr, $filter:literal) => {
        concat!(
            kind_columns!($kind, $columns),
            ", t.text, pg_catalog.md5(t.text) FROM ",
            $from,
            " CROSS JOIN LATERAL (SELECT ",
            item_text!($kind, $alias),
            " AS text) t WHERE '",
            $kind,
            "' = ANY ($6) AND ",
            $filter,
            " AND (",
            $alias,
            ".embedding IS NULL
                   OR pg_catalog.array_length(",
            $alias,
            ".embedding, 1) IS DISTINCT FROM $1
                   OR ",
            $alias,
            ".embedding_md5 IS DISTINCT FROM pg_catalog.md5(t.text)))"
        )
    };
}

/// The items of the kinds named in $6 in the scope (see each_kind and
/// live_sessions) that need an embedding in dimension $1 (NULL: every
/// item), at most $7, and no more once their texts reach $9 bytes (the
/// first always): the window that counts them keeps what it holds in a
/// tuplestore, which spills to disk, so a call's memory stays bounded
/// however long the texts are.
static OUTBOX: Statement = Statement::read_only(
    concat!(
        "WITH ",
        live_sessions!(),
        " SELECT o.kind, o.key, o.ref, o.thread, o.slot, o.updated_at, o.text, o.md5
         FROM (SELECT o.*,
                      pg_catalog.sum(pg_catalog.octet_length(o.text)) OVER (ROWS UNBOUNDED PRECEDING)
                        OPERATOR(pg_catalog.-) pg_catalog.octet_length(o.text) AS bytes_before
               FROM (",
        each_kind!(outbox),
        " LIMIT $7) o (kind, key, ref, thread, slot, updated_at, text, md5)) o
         WHERE o.bytes_before OPERATOR(pg_catalog.=) 0
            OR o.bytes_before OPERATOR(pg_catalog.<) $9::int8"
    ),
    &[INT4, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, INT4, INT4, INT4],
);
