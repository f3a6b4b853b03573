//! Recall: what the agent knows, found by its words, across every kind of
//! memory the caller may see, in the caller's transaction and tenant.
//!
//! A call runs two statements. The first finds candidates: in each kind
//! asked for, the rows of the scope (found through their keys, so the cost
//! follows the scope's size, never the table's) whose `search` column
//! matches the query, best first, at most a few times k per kind. A kind
//! whose scope is too large to read whole is searched again with the
//! column's GIN index (see by_their_words). The core
//! fuses their ranks with a recency factor and keeps the best k. The second
//! marks the query's words in those k only (ts_headline reads the text, so
//! it runs on what is returned and nothing else). With a query embedding,
//! the candidates by meaning come from pgvector's HNSW indexes, or from
//! comparing the scope's embedded items here (see by_their_meaning).

use pgrx::datum::DatumWithOid;
use pgrx::iter::TableIterator;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use agent_memory_core::Error;
use agent_memory_core::recall::{
    self, Candidate, Kind, MeaningRead, Query, Ranked, Scope, Weights, checked_k, checked_kinds,
};

use crate::pg::args::{FLOAT4_ARRAY, INT4, INT4_ARRAY, TEXT, TEXT_ARRAY, checked_keys};
use crate::pg::datums::{JsonB, float4_array, iso_of};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{self, Columns, Statement};
use crate::pg::search::matching;
use crate::pg::settings::{self, GenericPlans, NoNotices, NoSorts};
use crate::sessions::idle_timeout_minutes;

mod embeddings;
mod rebuild;

/// Old memories count at least this share of a new one's score.
const RECENCY_FLOOR: f64 = 0.5;

/// Where a candidate lives: enough to read its text again by key.
struct Found {
    kind: Kind,
    /// The session, owner or scope it belongs to.
    key: String,
    /// What the read functions take: a kv key, a message seq, a part name
    /// (`node/part` for a node's entry), a node id or a path.
    reference: String,
    /// A message's thread, a part's node (empty: the session's entry).
    thread: Option<String>,
    /// A message's slot in its thread's ring.
    slot: Option<i32>,
    updated_at: TimestampWithTimeZone,
    /// ts_rank_cd of its words, when the words found it.
    keyword_score: Option<f64>,
    /// Cosine similarity of its embedding, when the meaning found it.
    similarity: Option<f64>,
    /// Its text's first 20,000 characters, when the read that found it
    /// returned them: its snippet is made of them, read by the same
    /// statement, so no later statement reads the item again.
    text: Option<String>,
}

// Declared by hand: its result has a column named ref, a word Rust keeps
// for itself (pgrx names result columns after Rust identifiers).
extension_sql!(
    r#"
CREATE FUNCTION agent_memory.recall(
    query text,
    session_id text DEFAULT NULL,
    user_id text DEFAULT NULL,
    owner text DEFAULT NULL,
    scope text DEFAULT NULL,
    kinds text[] DEFAULT NULL,
    k integer DEFAULT 10,
    embedding real[] DEFAULT NULL,
    weights jsonb DEFAULT NULL)
RETURNS TABLE (kind text, key text, ref text, snippet text, score double precision,
               updated_at timestamp with time zone, signals jsonb)
-- Not parallel safe: a search through pgvector sets hnsw.iterative_scan
-- for the transaction, which no parallel operation may do.
STABLE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
-- A query of only common words is no error: no NOTICE either.
SET client_min_messages = warning
-- Its statements are planned once per connection, not once per call.
SET plan_cache_mode = force_generic_plan
LANGUAGE c AS 'MODULE_PATHNAME', 'recall_wrapper';
"#,
    name = "recall"
);

// pgrx reads the result's columns from the signature, so no type alias;
// each SQL argument is a Rust one.
#[allow(clippy::type_complexity, clippy::too_many_arguments)]
#[pg_extern(sql = false)]
#[search_path(pg_catalog, pg_temp)]
fn recall(
    query: Option<&str>, session_id: default!(Option<&str>, "NULL"),
    user_id: default!(Option<&str>, "NULL"), owner: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "NULL"), kinds: default!(Option<Vec<Option<String>>>, "NULL"),
    k: default!(Option<i32>, "10"), embedding: default!(Option<Vec<Option<f32>>>, "NULL"),
    weights: default!(Option<JsonB>, "NULL"),
) -> Result<
    TableIterator<
        'static,
        (
            name!(kind, String),
            name!(key, String),
            name!(reference, String),
            name!(snippet, String),
            name!(score, f64),
            name!(updated_at, TimestampWithTimeZone),
            name!(signals, JsonB),
        ),
    >,
    ErrorReport,
> {
    let embedding = embedding.map(checked_embedding).transpose()?;
    let query = match (query, &embedding) {
        (Some(query), _) => recall::parse_query(query).or_report()?,
        // Meaning alone: no words to match.
        (None, Some(_)) => recall::parse_query("").or_report()?,
        (None, None) => return Err(Error::null("query")).or_report(),
    };
    let scope = checked_scope(session_id, user_id, owner, scope)?;
    let kinds = checked_kinds(kinds.as_deref()).or_report()?;
    let k = checked_k(k, settings::MAX_RECALL_K.get()).or_report()?;
    let weights = recall::weights_from_json(weights.as_ref().map(|JsonB(w)| w)).or_report()?;
    let asked = Asked { query: &query, embedding: embedding.as_deref(), weights };
    let rows = recalled(&asked, &scope, kinds, k)?.into_iter().map(|r| {
        let mut signals = serde_json::json!({
            "keyword": r.keyword_rank.map(|rank| serde_json::json!({"rank": rank, "score": r.keyword_score})),
            "recency": r.recency,
        });
        if embedding.is_some() {
            signals["meaning"] = serde_json::json!(r.meaning_rank.map(
                |rank| serde_json::json!({"rank": rank, "similarity": r.similarity})
            ));
        }
        (
            r.kind.name().to_string(),
            r.key,
            r.reference,
            r.snippet,
            r.score,
            r.updated_at,
            JsonB(signals),
        )
    });
    Ok(TableIterator::new(rows.collect::<Vec<_>>()))
}

/// An embedding argument: no NULL element (22004), then the rules of
/// recall::check_embedding but the dimension (checked against the store's).
fn checked_embedding(embedding: Vec<Option<f32>>) -> SqlResult<Vec<f32>> {
    let values: Vec<f32> = embedding
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| Error::null("an element of embedding"))
        .or_report()?;
    recall::check_embedding(&values, None).or_report()?;
    Ok(values)
}

/// Recall as a tool a model calls: `request` is the call's input
/// `{"query", "kinds"?, "k"?}`, the scope is the application's. A bad
/// request is an answer with `"ok": false` for the model, never an SQL
/// error; a bad scope is the application's error (22023).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn recall_tool(
    request: Option<JsonB>, session_id: default!(Option<&str>, "NULL"),
    user_id: default!(Option<&str>, "NULL"), owner: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonB> {
    let scope = checked_scope(session_id, user_id, owner, scope)?;
    let request = request.map_or(serde_json::Value::Null, |JsonB(value)| value);
    let request = match recall::parse_tool_request(&request, settings::MAX_RECALL_K.get()) {
        Ok(request) => request,
        Err(error) => return Ok(JsonB(recall::tool_refusal(&error))),
    };
    let _quiet = NoNotices::hold();
    let asked = Asked { query: &request.query, embedding: None, weights: Weights::default() };
    let memories = recalled(&asked, &scope, request.kinds, request.k)?
        .into_iter()
        .map(|r| {
            serde_json::json!({
                "kind": r.kind.name(),
                "key": r.key,
                "ref": r.reference,
                "snippet": r.snippet,
                "score": r.score,
                "updated_at": iso_of(r.updated_at, 3),
            })
        })
        .collect();
    Ok(JsonB(recall::tool_answer(memories)))
}

#[pg_extern(immutable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn recall_tool_definition(
    name: default!(Option<&str>, "'recall'"), description: default!(Option<&str>, "NULL"),
    title: default!(Option<&str>, "NULL"), format: default!(Option<&str>, "'anthropic'"),
) -> SqlResult<JsonB> {
    Ok(JsonB(recall::tool_definition(name, description, title, format).or_report()?))
}

/// What a call asks for.
struct Asked<'a> {
    query: &'a Query,
    /// The query's embedding, checked but for its dimension.
    embedding: Option<&'a [f32]>,
    weights: Weights,
}

/// One memory recall returns, with what ranked it.
struct Recalled {
    kind: Kind,
    key: String,
    reference: String,
    snippet: String,
    score: f64,
    updated_at: TimestampWithTimeZone,
    keyword_rank: Option<usize>,
    keyword_score: Option<f64>,
    meaning_rank: Option<usize>,
    similarity: Option<f64>,
    recency: f64,
}

/// The best `k` memories of `scope` in `kinds` for what was `asked`, best
/// first.
fn recalled(asked: &Asked, scope: &Scope, kinds: Vec<Kind>, k: usize) -> SqlResult<Vec<Recalled>> {
    let kinds: Vec<Kind> = kinds.into_iter().filter(|kind| scope.reaches(*kind)).collect();
    let by_words = !asked.query.wanted.is_empty() && asked.weights.keyword > 0.0;
    let by_meaning = asked.embedding.is_some() && asked.weights.meaning > 0.0;
    if let (Some(embedding), false) = (asked.embedding, by_meaning && !kinds.is_empty()) {
        // No search by meaning checks it, but a wrong embedding is refused
        // all the same.
        Spi::connect(|client| {
            let dimension = embeddings::dimension(client)?;
            recall::check_embedding(embedding, Some(dimension)).or_report()
        })?;
    }
    if kinds.is_empty() || !(by_words || by_meaning) {
        return Ok(Vec::new());
    }
    // Planning the statements costs more than running them (see CANDIDATES_BY_KEY).
    let _generic = GenericPlans::force()?;
    Spi::connect(|client| -> SqlResult<Vec<_>> {
        let names: Vec<&str> = kinds.iter().map(|kind| kind.name()).collect();
        let per_kind = k * 4 + 20;
        let mut found = Vec::new();
        if by_words {
            found = by_their_words(client, asked.query, scope, &names, per_kind)?;
        }
        if let (true, Some(embedding)) = (by_meaning, asked.embedding) {
            let alone = (!by_words).then_some(asked.weights.meaning);
            let near = by_their_meaning(client, embedding, scope, &names, per_kind, k, alone)?;
            merge(&mut found, near);
        }
        let best = best_of(found, asked.weights, k);
        if best.is_empty() {
            return Ok(Vec::new());
        }
        let snippets = snippets_of(client, &asked.query.wanted, &best)?;
        Ok(best
            .into_iter()
            .zip(snippets)
            .map(|(ranked, snippet)| {
                let found = ranked.candidate.item;
                Recalled {
                    kind: found.kind,
                    key: found.key,
                    reference: found.reference,
                    snippet,
                    score: ranked.score,
                    updated_at: found.updated_at,
                    keyword_rank: ranked.candidate.keyword_rank,
                    keyword_score: found.keyword_score,
                    meaning_rank: ranked.candidate.meaning_rank,
                    similarity: found.similarity,
                    recency: ranked.candidate.recency,
                }
            })
            .collect())
    })
}

/// Where a candidate row's columns 1 to 6 (kind, key, ref, thread, slot,
/// updated_at) say it lives.
fn found_at(row: &pgrx::spi::SpiHeapTupleData<'_>) -> SqlResult<Found> {
    let kind = row.required::<String>(1, "kind")?;
    Ok(Found {
        kind: Kind::from_name(&kind)
            .ok_or_else(|| Error::internal(format!("unknown kind {kind}")))
            .or_report()?,
        key: row.required::<String>(2, "key")?,
        reference: row.required::<String>(3, "ref")?,
        thread: row.value::<String>(4)?,
        slot: row.value::<i32>(5)?,
        updated_at: row.required::<TimestampWithTimeZone>(6, "updated_at")?,
        keyword_score: None,
        similarity: None,
        text: None,
    })
}

/// The arguments $2 to $8 of the statements that read a scope's items:
/// session, user, owner, scope, the kinds asked, at most how many a kind,
/// and the sessions' default idle minutes.
fn scoped<'a>(scope: &Scope<'a>, kinds: &[&str], per_kind: usize) -> [DatumWithOid<'a>; 7] {
    [
        scope.session_id.into(),
        scope.user_id.into(),
        scope.owner.into(),
        scope.scope.into(),
        kinds.to_vec().into(),
        i32::try_from(per_kind).unwrap_or(i32::MAX).into(),
        idle_timeout_minutes().into(),
    ]
}

/// Most rows of a scope a kind reads through the scope's keys before
/// recall turns to the search column's GIN index. Below it, reading the
/// scope is cheaper than the index, whose posting lists hold a common
/// word of every scope of the table; far above, the index is cheaper.
const MOST_READ_BY_KEY: i32 = 10_000;

/// The items whose words match, best first, at most `per_kind` a kind:
/// read through the scope's keys, or, in a kind whose scope has more than
/// MOST_READ_BY_KEY rows, as the planner finds them (see
/// CANDIDATES_BY_INDEX).
fn by_their_words(
    client: &pgrx::spi::SpiClient<'_>, query: &Query, scope: &Scope, kinds: &[&str],
    per_kind: usize,
) -> SqlResult<Vec<Found>> {
    let arguments = |kinds: &[&str], most_read: i32| {
        let mut args = vec![query.wanted.as_str().into()];
        args.extend(scoped(scope, kinds, per_kind));
        args.push(query.unwanted.as_str().into());
        args.push(most_read.into());
        args
    };
    let mut found = Vec::new();
    let mut larger: Vec<&str> = Vec::new();
    for row in CANDIDATES_BY_KEY.read(client, &arguments(kinds, MOST_READ_BY_KEY))? {
        let mut item = found_at(&row)?;
        match row.value::<f64>(7)? {
            Some(score) => {
                item.keyword_score = Some(score);
                found.push(item);
            }
            None => larger.push(item.kind.name()),
        }
    }
    if larger.is_empty() {
        return Ok(found);
    }
    found.retain(|item| !larger.contains(&item.kind.name()));
    for row in CANDIDATES_BY_INDEX.read(client, &arguments(&larger, i32::MAX))? {
        let mut item = found_at(&row)?;
        item.keyword_score = Some(row.required::<f64>(7, "score")?);
        found.push(item);
    }
    Ok(found)
}

/// The items whose embedding is nearest `embedding` by cosine similarity
/// (above 0), best first, at most `per_kind` a kind. With pgvector's
/// indexes (see recall_enable_embeddings), their HNSW indexes find them;
/// a kind of which the index found fewer than `k` (a scope too small for
/// the index to reach, or one that has fewer) is compared item by item.
/// When meaning is `alone` (no words to fuse with), a first read takes
/// fewer a kind, and the full read follows only if reading deeper could
/// change the best `k`. Without pgvector, every embedded item of the scope
/// is compared here, at most agent_memory.max_exact_recall of them. Only
/// the kinds recall is kept for are searched (see embeddings::kept_kinds).
fn by_their_meaning(
    client: &pgrx::spi::SpiClient<'_>, embedding: &[f32], scope: &Scope, kinds: &[&str],
    per_kind: usize, k: usize, alone: Option<f64>,
) -> SqlResult<Vec<Found>> {
    let embeddings::MeaningState { dimension, neighbours, kept } =
        embeddings::meaning_state(client)?;
    recall::check_embedding(embedding, Some(dimension)).or_report()?;
    // Kinds left out of recall are not found by meaning either, as their
    // NULL search columns keep words from finding them.
    let kinds: Vec<&str> =
        kinds.iter().copied().filter(|name| kept.iter().any(|kind| kind.name() == *name)).collect();
    let kinds = kinds.as_slice();
    let embeddings::Neighbours::Pgvector { schema, iterative_scan } = neighbours else {
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        return compared(client, embedding, dimension, scope, kinds, per_kind)?
            .ok_or_else(over_cap)
            .or_report();
    };
    let search = PgvectorSearch { embedding, schema: &schema, dimension, scope };
    let nearest =
        |depth: usize, reading| nearest_of_each_kind(client, &search, kinds, depth, k, reading);
    let near = match alone {
        _ if kinds.is_empty() => Vec::new(),
        Some(weight) => {
            let depth = recall::first_meaning_depth(k);
            let reading = if recall::first_meaning_read_takes_texts(k) {
                Reading::IndexWithTexts
            } else {
                Reading::Index
            };
            let first = nearest(depth, reading)?;
            if deeper_read_needed(&first, depth, weight, k) {
                nearest(per_kind, Reading::Index)?
            } else {
                first
            }
        }
        None => nearest(per_kind, Reading::Index)?,
    };
    // Set back what the state's statement set.
    settings::set_for_transaction(
        "hnsw.iterative_scan",
        if iterative_scan.is_empty() { "off" } else { &iterative_scan },
    )?;
    Ok(near)
}

/// Whether a read of `depth` a kind that found `near` could miss one of
/// the best `k` (see recall::deeper_meaning_read_needed).
fn deeper_read_needed(near: &[Found], depth: usize, weight: f64, k: usize) -> bool {
    let half_life = f64::from(settings::RECALL_HALF_LIFE_S.get());
    let read: Vec<MeaningRead> = near
        .iter()
        .map(|f| MeaningRead {
            kind: f.kind,
            similarity: f.similarity.unwrap_or(0.0),
            recency: recall::recency_factor(age_seconds(f.updated_at), half_life, RECENCY_FLOOR),
        })
        .collect();
    recall::deeper_meaning_read_needed(&read, depth, weight, k)
}

/// A search through pgvector: the query's embedding, pgvector's schema,
/// the embeddings' dimension and the scope searched.
struct PgvectorSearch<'a> {
    embedding: &'a [f32],
    schema: &'a str,
    dimension: usize,
    scope: &'a Scope<'a>,
}

/// The `per_kind` items of each kind nearest the search's embedding
/// through pgvector's indexes, read as `through_index` says, and for a
/// kind of which the index found fewer than `k`, the nearest compared item
/// by item (past the cap, what the index found is the best recall can give
/// for that kind). Best first.
fn nearest_of_each_kind(
    client: &pgrx::spi::SpiClient<'_>, search: &PgvectorSearch, kinds: &[&str], per_kind: usize,
    k: usize, through_index: Reading,
) -> SqlResult<Vec<Found>> {
    let (near, _) = nearest_by_pgvector(client, search, kinds, per_kind, through_index)?;
    let short: Vec<&str> = kinds
        .iter()
        .copied()
        .filter(|name| near.iter().filter(|f| f.kind.name() == *name).count() < k)
        .collect();
    if short.is_empty() {
        return Ok(near);
    }
    let (exact, over_cap) =
        nearest_by_pgvector(client, search, &short, per_kind, Reading::Exactly)?;
    let compared = |f: &Found| short.contains(&f.kind.name()) && !over_cap.contains(&f.kind);
    Ok(nearest_first(near.into_iter().filter(|f| !compared(f)).chain(exact).collect()))
}

/// The error of a scope too large to compare item by item.
fn over_cap() -> Error {
    let cap = settings::MAX_EXACT_RECALL.get();
    Error::limit(format!("the scope holds more than {cap} embedded items to compare")).with_hint(
        "agent_memory.max_exact_recall sets how many; with pgvector, \
         recall_enable_embeddings makes an index that serves larger scopes",
    )
}

/// Every embedded item of the scope in `kinds`, compared with `embedding`
/// here: the `per_kind` times the kinds' count most similar (above 0),
/// best first; None when the scope holds more than
/// agent_memory.max_exact_recall of them.
fn compared(
    client: &pgrx::spi::SpiClient<'_>, embedding: &[f32], dimension: usize, scope: &Scope,
    kinds: &[&str], per_kind: usize,
) -> SqlResult<Option<Vec<Found>>> {
    let cap = settings::MAX_EXACT_RECALL.get();
    let table = EMBEDDED.read(
        client,
        &[
            i32::try_from(dimension).unwrap_or(i32::MAX).into(),
            scope.session_id.into(),
            scope.user_id.into(),
            scope.owner.into(),
            scope.scope.into(),
            kinds.to_vec().into(),
            cap.saturating_add(1).into(),
            idle_timeout_minutes().into(),
        ],
    )?;
    if table.len() > usize::try_from(cap).unwrap_or(0) {
        return Ok(None);
    }
    let mut near = nearest_first(most_similar(table, embedding)?);
    near.truncate(per_kind * kinds.len());
    Ok(Some(near))
}

/// `near` sorted by similarity, the most similar first.
fn nearest_first(mut near: Vec<Found>) -> Vec<Found> {
    near.sort_by(|a, b| {
        b.similarity.partial_cmp(&a.similarity).unwrap_or(std::cmp::Ordering::Equal)
    });
    near
}

/// How pgvector finds a scope's nearest items.
#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// Through each kind's HNSW index: the index scan goes on past other
    /// scopes' items and stale embeddings until it has enough or has read
    /// as far as pgvector lets it (iterative scan, in the order it finds
    /// them; they are sorted here). Planned once, without sorts, so that
    /// it reads the indexes whatever the statistics say of the scope.
    Index,
    /// As Index, with each item's text (its first 20,000 characters) for
    /// its snippet: the first read of meaning alone, of k + 10 items a
    /// kind, for a k small enough that the texts held stay few
    /// (recall::first_meaning_read_takes_texts).
    IndexWithTexts,
    /// Every embedded item of the scope, through its key, compared and
    /// sorted: at most agent_memory.max_exact_recall of them.
    Exactly,
}

/// The items nearest the search's embedding by pgvector's cosine
/// distance, per kind the `per_kind` nearest, read as `reading` says, and
/// the kinds whose scope, read exactly, holds more than
/// agent_memory.max_exact_recall items (none of theirs is returned). The
/// statement is built for the kinds asked, pgvector's schema, the
/// dimension and the reading, and kept.
fn nearest_by_pgvector(
    client: &pgrx::spi::SpiClient<'_>, search: &PgvectorSearch, kinds: &[&str], per_kind: usize,
    reading: Reading,
) -> SqlResult<(Vec<Found>, Vec<Kind>)> {
    let PgvectorSearch { embedding, schema, dimension, scope } = *search;
    let quoted = embeddings::quoted_identifier(schema);
    let branches: Vec<&str> = NEAREST_OF_KIND
        .iter()
        .filter(|(kind, _)| kinds.contains(kind))
        .map(|(_, branch)| *branch)
        .collect();
    let (fence, compared, texts) = match reading {
        // The scope's rows fold into the statement, which an index reads.
        Reading::Index => ("", "NULL::int8", "false"),
        Reading::IndexWithTexts => ("", "NULL::int8", "true"),
        // A subquery with a LIMIT stays apart: its rows are all compared.
        Reading::Exactly => (" LIMIT $9", "pg_catalog.count(*) OVER ()", "false"),
    };
    // The schema's name goes in last: it is the one text here that is not
    // ours, and a placeholder spelled inside it must stay a name.
    let sql = format!("{NEAREST_SESSIONS}{}", branches.join(" UNION ALL "))
        .replace("__VECTOR__", "__SCHEMA__.vector(__DIMENSION__)")
        .replace("__DIMENSION__", &dimension.to_string())
        .replace("__FENCE__", fence)
        .replace("__COMPARED__", compared)
        .replace("__TEXTS__", texts)
        .replace("__SCHEMA__", &quoted);
    let cap = settings::MAX_EXACT_RECALL.get();
    let mut numbers = Vec::new();
    // SAFETY: the array lives in `numbers`, which outlives the statement.
    let embedding =
        unsafe { DatumWithOid::new(float4_array(&mut numbers, embedding), pg_sys::FLOAT4ARRAYOID) };
    let mut args = vec![embedding];
    args.extend(scoped(scope, kinds, per_kind));
    args.push(cap.saturating_add(1).into());
    let _index_order = (reading != Reading::Exactly).then(NoSorts::hold);
    let table = plans::read_built(
        client,
        &sql,
        &[FLOAT4_ARRAY, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, INT4, INT4, INT4],
        &args,
    )?;
    let mut near = Vec::with_capacity(table.len());
    let mut over_cap = Vec::new();
    for row in table {
        let mut item = found_at(&row)?;
        // Each kind counts the rows of its own scope.
        if row.value::<i64>(8)?.unwrap_or(0) > i64::from(cap) {
            if !over_cap.contains(&item.kind) {
                over_cap.push(item.kind);
            }
            continue;
        }
        let similarity = 1.0 - row.required::<f64>(7, "distance")?;
        if similarity > 0.0 {
            item.similarity = Some(similarity);
            item.text = row.value::<String>(9)?;
            near.push(item);
        }
    }
    Ok((nearest_first(near), over_cap))
}

/// The rows of `table` (as found_at reads them, with column 7 the stored
/// embedding) whose similarity to `embedding` is above 0: pointing away
/// from the query (or across it) is no likeness.
fn most_similar(
    mut table: pgrx::spi::SpiTupleTable<'_>, embedding: &[f32],
) -> SqlResult<Vec<Found>> {
    let mut near = Vec::with_capacity(table.len());
    // The rows hold a large embedding as a pointer to its stored value:
    // each is read (detoasted) into a context emptied after it, so the
    // comparison holds one at a time, not the whole scope's.
    let mut one_embedding = pgrx::PgMemoryContexts::new("agent_memory recall: one embedding");
    while let Some(row) = table.next() {
        let mut item = found_at(&row)?;
        // Stored embeddings hold no NULL: recall_embed refuses them.
        let stored = table
            .get_datum_by_ordinal(7)
            .or_report()?
            .ok_or_else(|| Error::internal("column embedding is unexpectedly NULL"))
            .or_report()?;
        // SAFETY: column 7 is a float4[]; nothing read in the context
        // outlives the closure, which returns a number.
        let similarity = unsafe {
            let similarity = one_embedding.switch_to(|_| {
                // Read in place: no copy of the numbers.
                let numbers = pgrx::datum::Array::<f32>::from_polymorphic_datum(
                    stored,
                    false,
                    pg_sys::FLOAT4ARRAYOID,
                );
                match numbers.as_ref().map(|numbers| numbers.as_slice()) {
                    Some(Ok(numbers)) => recall::cosine(embedding, numbers),
                    _ => 0.0,
                }
            });
            one_embedding.reset();
            similarity
        };
        if similarity > 0.0 {
            item.similarity = Some(similarity);
            near.push(item);
        }
    }
    Ok(near)
}

/// Add the items found by meaning to those found by words: an item both
/// found is one candidate with both scores.
fn merge(found: &mut Vec<Found>, near: Vec<Found>) {
    if found.is_empty() {
        *found = near;
        return;
    }
    let mut at: std::collections::HashMap<(Kind, String, String), usize> = found
        .iter()
        .enumerate()
        .map(|(i, f)| ((f.kind, f.key.clone(), f.reference.clone()), i))
        .collect();
    for item in near {
        let id = (item.kind, item.key.clone(), item.reference.clone());
        match at.get(&id) {
            Some(&i) => {
                found[i].similarity = item.similarity;
                found[i].text = found[i].text.take().or(item.text);
            }
            None => {
                at.insert(id, found.len());
                found.push(item);
            }
        }
    }
}

/// The scope arguments, each checked as the read functions check it; at
/// least one is required.
fn checked_scope<'a>(
    session_id: Option<&'a str>, user_id: Option<&'a str>, owner: Option<&'a str>,
    scope: Option<&'a str>,
) -> SqlResult<Scope<'a>> {
    let scope = checked_keys(session_id, user_id, owner, scope)?;
    scope.check().or_report()?;
    Ok(scope)
}

/// Rank the candidates by each signal's score, weigh in recency, fuse,
/// and keep the best `k`.
fn best_of(found: Vec<Found>, weights: Weights, k: usize) -> Vec<Ranked<Found>> {
    let half_life = f64::from(settings::RECALL_HALF_LIFE_S.get());
    let keyword_scores: Vec<Option<f64>> = found.iter().map(|f| f.keyword_score).collect();
    let similarities: Vec<Option<f64>> = found.iter().map(|f| f.similarity).collect();
    let keyword_ranks = recall::ranks_among(&keyword_scores);
    let meaning_ranks = recall::ranks_among(&similarities);
    let candidates = found
        .into_iter()
        .zip(keyword_ranks.into_iter().zip(meaning_ranks))
        .map(|(item, (keyword_rank, meaning_rank))| Candidate {
            recency: recall::recency_factor(age_seconds(item.updated_at), half_life, RECENCY_FLOOR),
            keyword_rank,
            meaning_rank,
            item,
        })
        .collect();
    recall::fuse(candidates, weights, k)
}

/// Seconds from `at` to the transaction's start (now() in SQL).
fn age_seconds(at: TimestampWithTimeZone) -> f64 {
    // SAFETY: a plain read of the current transaction's start time.
    let now = unsafe { pg_sys::GetCurrentTransactionStartTimestamp() };
    now.saturating_sub(at.into_inner()) as f64 / 1_000_000.0
}

/// The snippet of each of `best`, in order: its text with the query's
/// words marked. The texts the reads returned are marked as they are;
/// unless every item came with its text, the items are read again.
fn snippets_of(
    client: &pgrx::spi::SpiClient<'_>, query: &str, best: &[Ranked<Found>],
) -> SqlResult<Vec<String>> {
    let texts: Option<Vec<&str>> = best.iter().map(|r| r.candidate.item.text.as_deref()).collect();
    if let Some(texts) = texts {
        let table = SNIPPETS_OF_TEXTS.read(client, &[query.into(), texts.into()])?;
        return in_order(table, best.len());
    }
    if plans::on_citus()? {
        return snippets_one_by_one(client, query, best);
    }
    let items = best.iter().map(|r| &r.candidate.item);
    let kinds: Vec<&str> = items.clone().map(|f| f.kind.name()).collect();
    let keys: Vec<&str> = items.clone().map(|f| f.key.as_str()).collect();
    let refs: Vec<&str> = items.clone().map(|f| f.reference.as_str()).collect();
    let threads: Vec<Option<&str>> = items.clone().map(|f| f.thread.as_deref()).collect();
    let slots: Vec<Option<i32>> = items.map(|f| f.slot).collect();
    let text_of_kinds: String = TEXT_OF_KIND
        .iter()
        .filter(|(kind, _)| kinds.contains(kind))
        .map(|(_, when)| *when)
        .collect();
    let sql = SNIPPETS.replace("__TEXT__", &format!("CASE w.kind{text_of_kinds} END"));
    let table = plans::read_built(
        client,
        &sql,
        &[TEXT, TEXT_ARRAY, TEXT_ARRAY, TEXT_ARRAY, TEXT_ARRAY, INT4_ARRAY],
        &[query.into(), kinds.into(), keys.into(), refs.into(), threads.into(), slots.into()],
    )?;
    in_order(table, best.len())
}

/// The snippets of `table`'s rows (ordinal, snippet) in the order of the
/// ordinals 1 to `count`; an item with no row has an empty snippet.
fn in_order(table: pgrx::spi::SpiTupleTable<'_>, count: usize) -> SqlResult<Vec<String>> {
    let mut snippets = vec![String::new(); count];
    for row in table {
        let at = row.required::<i64>(1, "ord")?;
        let snippet = row.value::<String>(2)?.unwrap_or_default();
        if let Some(slot) = usize::try_from(at - 1).ok().and_then(|i| snippets.get_mut(i)) {
            *slot = snippet;
        }
    }
    Ok(snippets)
}

/// The snippet of each of `best`, in order, one statement an item: on
/// Citus, where each reads the shard of the item's key alone. SNIPPETS
/// reads the items of every kind among them, whose keys lie on other
/// shards, in one statement, which Citus cannot route.
fn snippets_one_by_one(
    client: &pgrx::spi::SpiClient<'_>, query: &str, best: &[Ranked<Found>],
) -> SqlResult<Vec<String>> {
    best.iter()
        .map(|ranked| {
            let item = &ranked.candidate.item;
            let statement = match item.kind {
                Kind::Kv => &SNIPPET_OF_ENTRY,
                Kind::Message => &SNIPPET_OF_MESSAGE,
                Kind::Part => &SNIPPET_OF_PART,
                Kind::Node => &SNIPPET_OF_NODE,
                Kind::File => &SNIPPET_OF_FILE,
            };
            let table = statement.read(
                client,
                &[
                    query.into(),
                    item.key.as_str().into(),
                    item.reference.as_str().into(),
                    item.thread.as_deref().into(),
                    item.slot.into(),
                ],
            )?;
            Ok(table.first().value::<String>(1)?.unwrap_or_default())
        })
        .collect()
}

// The statements.

/// The CTE `live`: the sessions (session_id, tenant) of the scope, session
/// $2, or every session of user $3, or session $2 of user $3; only active
/// ones (default idle minutes $8), as the read functions see them. Each way
/// to name sessions is a branch of its own that its index serves, also in
/// a generic plan.
macro_rules! live_sessions {
    () => {
        concat!(
            "live AS MATERIALIZED (
               SELECT s.session_id, s.tenant FROM agent_memory.sessions s
               WHERE $2::text IS NOT NULL AND s.session_id = $2 AND s.tenant = agent_memory.caller_tenant()
                 AND ($3::text IS NULL OR s.user_id = $3) AND ",
            crate::sessions::active!("s", "$8"),
            "
               UNION ALL
               SELECT s.session_id, s.tenant FROM agent_memory.sessions s
               WHERE $2::text IS NULL AND s.user_id = $3 AND s.tenant = agent_memory.caller_tenant() AND ",
            crate::sessions::active!("s", "$8"),
            ")"
        )
    };
}
pub(crate) use live_sessions;

/// The text of an item of kind `$kind` in row `$alias`: what its snippet
/// shows, what an embedding is made of (see recall_outbox), and what the
/// md5 beside the embedding is of.
macro_rules! item_text {
    // A JSON null value has no text of its own (#>> gives NULL): its
    // text is `null`, so every kv entry has some.
    ("kv", $alias:literal) => {
        concat!($alias, ".key || ': ' || coalesce(", $alias, ".value #>> '{}', 'null')")
    };
    ("message", $alias:literal) => {
        concat!($alias, ".content")
    };
    ("working_memory", $alias:literal) => {
        concat!($alias, ".part || ': ' || ", $alias, ".value::text")
    };
    ("node", $alias:literal) => {
        concat!(
            $alias,
            ".title || E'\\n' || ",
            $alias,
            ".description || E'\\n' || ",
            $alias,
            ".body"
        )
    };
    ("file", $alias:literal) => {
        concat!($alias, ".path || E'\\n' || ", $alias, ".content")
    };
}
pub(crate) use item_text;

/// Each kind's rows of the scope as `$each!(kind, alias, columns, from,
/// filter)`, joined by UNION ALL: `columns` (key, ref, thread, slot,
/// updated_at) and the rows of `from` that pass `filter`, with the
/// sessions of CTE `live`, owner $4's nodes and scope $5's files, every
/// row of the caller's tenant.
macro_rules! each_kind {
    ($each:ident) => {
        each_kind!(@with union_all, $each)
    };
    (@with $callback:ident, $each:ident) => {
        $callback!(
            $each!(
                "kv",
                "e",
                "e.session_id::text, e.key::text, NULL::text, NULL::int4, e.updated_at",
                in_live_sessions!("kv_entries", "e"),
                "e.expires_at > pg_catalog.now()"
            ),
            $each!(
                "message",
                "m",
                "m.session_id::text, m.seq::text, m.thread_key, m.slot, m.created_at",
                in_live_sessions!("thread_messages", "m"),
                "true"
            ),
            $each!(
                "working_memory",
                "p",
                "p.session_id::text,
                 CASE WHEN p.node_key = '' THEN p.part ELSE p.node_key || '/' || p.part END,
                 p.node_key, NULL::int4, p.updated_at",
                in_live_sessions!("wm_parts", "p"),
                "true"
            ),
            $each!(
                "node",
                "n",
                "n.owner::text, n.node_id::text, NULL::text, NULL::int4, n.updated_at",
                "agent_memory.graph_nodes n",
                "n.owner = $4 AND n.tenant = agent_memory.caller_tenant()"
            ),
            $each!(
                "file",
                "f",
                "f.scope::text, f.path::text, NULL::text, NULL::int4, f.updated_at",
                "agent_memory.memory_files f",
                "f.scope = $5 AND f.tenant = agent_memory.caller_tenant()"
            )
        )
    };
}
pub(crate) use each_kind;

/// Its arguments joined by UNION ALL.
macro_rules! union_all {
    ($first:ident ! $first_args:tt $(, $each:ident ! $args:tt)*) => {
        concat!($first!$first_args $(, " UNION ALL ", $each!$args)*)
    };
}
pub(crate) use union_all;

/// Its arguments as an array, in the kinds' order (see each_kind).
macro_rules! by_kind {
    ($($each:ident ! ($kind:tt, $($rest:tt)*)),*) => {
        [$(($kind, $each!($kind, $($rest)*))),*]
    };
}

/// The text search configuration of the search columns.
macro_rules! config {
    () => {
        "(SELECT c.config FROM agent_memory.recall_settings c)"
    };
}

/// The words an item must have any of, $1 (see recall::Query), in the
/// search columns' text search configuration.
macro_rules! wanted {
    () => {
        $crate::pg::search::words_of!(config!(), "$1")
    };
}

/// `(SELECT '$kind', $columns`: the start of one kind's rows.
macro_rules! kind_columns {
    ($kind:tt, $columns:literal) => {
        concat!("(SELECT '", $kind, "', ", $columns)
    };
}
pub(crate) use kind_columns;

/// One kind's candidates, as (kind, key, ref, thread, slot, updated_at,
/// score): `$columns` (key to updated_at) of the rows of `$from` that pass
/// `$filter` and whose search column (`$alias.search`) matches, when kind
/// `$kind` is asked for ($6), best first, at most $7, from at most $10
/// rows. A kind with more than $10 rows shows as a first row with a NULL
/// score, and none of its rows count. `by_key` tests the match above the
/// read, so the rows are read through the scope's keys and never through
/// the search column's GIN index, whose posting lists span every scope of
/// the table; `by_index` tests it in the read, and the planner may use
/// the index.
macro_rules! candidates {
    ($read:ident, $kind:tt, $alias:literal, $columns:literal, $from:expr, $filter:literal) => {
        concat!(
            kind_columns!($kind, $columns),
            ", CASE WHEN ",
            $alias,
            ".read OPERATOR(pg_catalog.<=) $10 THEN pg_catalog.ts_rank_cd(",
            $alias,
            ".search, q.q)::float8 END AS score
              FROM (SELECT ",
            $alias,
            ".*, ",
            rows_read!($read),
            " AS read FROM ",
            $from,
            ", q WHERE '",
            $kind,
            "' = ANY ($6) AND ",
            $filter,
            matched_in_read!($read, $alias),
            " LIMIT $10::int8 OPERATOR(pg_catalog.+) 1) ",
            $alias,
            ", q
              WHERE ",
            $alias,
            ".read OPERATOR(pg_catalog.>) $10 OR ",
            $alias,
            ".search @@ q.q
              ORDER BY score DESC LIMIT $7)"
        )
    };
}

/// The number of each row read: counted by the key; by the index, every
/// row of the scope is read and none needs a number.
macro_rules! rows_read {
    (by_key) => {
        "pg_catalog.row_number() OVER ()"
    };
    (by_index) => {
        "0::int8"
    };
}

/// The match inside the read (see candidates).
macro_rules! matched_in_read {
    (by_key, $alias:literal) => {
        ""
    };
    (by_index, $alias:literal) => {
        concat!(" AND ", $alias, ".search @@ q.q")
    };
}

/// Candidates read through the scope's keys (see candidates).
macro_rules! by_key {
    ($($args:tt)*) => {
        candidates!(by_key, $($args)*)
    };
}

/// Candidates the search column's index may find (see candidates).
macro_rules! by_index {
    ($($args:tt)*) => {
        candidates!(by_index, $($args)*)
    };
}

/// Table `$table` as `$alias`, joined to the live sessions of the scope.
macro_rules! in_live_sessions {
    ($table:literal, $alias:literal) => {
        concat!(
            "live JOIN agent_memory.",
            $table,
            " ",
            $alias,
            " ON ",
            $alias,
            ".session_id = live.session_id AND ",
            $alias,
            ".tenant = live.tenant"
        )
    };
}
pub(crate) use in_live_sessions;

/// The query: the words an item must have any of, $1, and none of, $9
/// (see matching).
macro_rules! query {
    () => {
        concat!("q AS MATERIALIZED (SELECT ", matching!(config!(), "$1", "$9"), " AS q)")
    };
}

/// The candidates of each kind named in $6: rows of the scope (see
/// each_kind and live_sessions) whose search column has the query's words
/// (see query), best first by ts_rank_cd, at most $7 per kind, read
/// `by_key` or `by_index`, from at most $10 rows a kind (see candidates).
macro_rules! candidates_of_each_kind {
    ($read:ident) => {
        Statement::read_only(
            concat!("WITH ", query!(), ", ", live_sessions!(), " ", each_kind!($read)),
            &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, INT4, INT4, TEXT, INT4],
        )
    };
}

/// The candidates, read through the scope's keys. The function runs it as
/// a generic plan (planning it costs more than running it).
static CANDIDATES_BY_KEY: Statement = candidates_of_each_kind!(by_key);

/// The candidates of kinds whose scope is larger than CANDIDATES_BY_KEY
/// reads, from every row of the scope ($10: no bound): the planner may
/// read the search column's GIN index, alone or with the scope's keys.
static CANDIDATES_BY_INDEX: Statement = candidates_of_each_kind!(by_index);

/// Row `$alias` of kind `$kind` has an embedding of `$dimension` numbers,
/// made of the text it holds now.
macro_rules! embedded_now {
    ($kind:tt, $alias:literal, $dimension:literal) => {
        concat!(
            $alias,
            ".embedding IS NOT NULL AND pg_catalog.array_length(",
            $alias,
            ".embedding, 1) = ",
            $dimension,
            " AND ",
            $alias,
            ".embedding_md5 = pg_catalog.md5(",
            item_text!($kind, $alias),
            ")"
        )
    };
}

/// ` WHERE` kind `$kind` is among those asked for ($6) and `$filter`
/// holds.
macro_rules! asked_kind_where {
    ($kind:tt, $filter:literal) => {
        concat!(" WHERE '", $kind, "' = ANY ($6) AND ", $filter)
    };
}

/// `$from` and ` WHERE` kind `$kind` is asked for, `$filter` holds, and the
/// embedding has `$dimension` dimensions and was made of the text the row
/// holds now.
macro_rules! embedded_where {
    ($kind:tt, $alias:literal, $from:expr, $filter:literal, $dimension:literal) => {
        concat!(
            $from,
            asked_kind_where!($kind, $filter),
            " AND ",
            embedded_now!($kind, $alias, $dimension)
        )
    };
}

/// One kind's embedded items, as (kind, key, ref, thread, slot,
/// updated_at, embedding): `$columns` and the embedding of the rows of
/// `$from` that pass `$filter`, when kind `$kind` is asked for ($6), whose
/// embedding has $1 dimensions and was made of the text they hold now.
macro_rules! embedded {
    ($kind:tt, $alias:literal, $columns:literal, $from:expr, $filter:literal) => {
        concat!(
            kind_columns!($kind, $columns),
            ", ",
            $alias,
            ".embedding FROM ",
            embedded_where!($kind, $alias, $from, $filter, "$1"),
            ")"
        )
    };
}

/// The embedded items of the kinds named in $6 in the scope (see
/// each_kind and live_sessions) whose embedding has $1 dimensions and is
/// of their current text (see embedded), at most $7.
static EMBEDDED: Statement = Statement::read_only(
    concat!("WITH ", live_sessions!(), " ", each_kind!(embedded), " LIMIT $7"),
    &[INT4, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, INT4, INT4],
);

/// One kind's items nearest the query embedding $1 by pgvector's cosine
/// distance, at most $7, as (kind, key, ref, thread, slot, updated_at,
/// cosine distance, how many were compared, text). nearest_by_pgvector
/// puts in the vector type, its schema, the dimension and the reading: no
/// fence, and the scope's rows fold into the statement for the kind's HNSW
/// index to read (compared: NULL), with the items' texts for their
/// snippets when __TEXTS__ is true; a fence of LIMIT $9, and every row of
/// the scope is compared, up to $9, and counted, with no text (the rows
/// are projected before they are sorted). The distance is computed once,
/// for the order and the result, and the query embedding is made a vector
/// once (an InitPlan), not for each row.
macro_rules! nearest {
    ($kind:tt, $alias:literal, $columns:literal, $from:expr, $filter:literal) => {
        concat!(
            kind_columns!($kind, $columns),
            ", (",
            $alias,
            ".embedding::__VECTOR__) OPERATOR(__SCHEMA__.<=>) (SELECT $1::__VECTOR__) AS distance,
             __COMPARED__, CASE WHEN __TEXTS__ THEN pg_catalog.left(",
            item_text!($kind, $alias),
            ", 20000) END FROM (SELECT ",
            $alias,
            ".* FROM ",
            embedded_where!($kind, $alias, $from, $filter, "__DIMENSION__"),
            "__FENCE__) ",
            $alias,
            " ORDER BY distance LIMIT $7)"
        )
    };
}

/// The start of the statement of the items of the scope nearest the query
/// embedding $1: the scope's sessions; then, joined by UNION ALL, the
/// branch (see nearest) of each kind asked for, of NEAREST_OF_KIND by the
/// kind's name.
const NEAREST_SESSIONS: &str = concat!("WITH ", live_sessions!(), " ");
const NEAREST_OF_KIND: [(&str, &str); 5] = each_kind!(@with by_kind, nearest);

/// The snippet of `$text`: its first 20,000 characters, the words of
/// tsquery `$query` marked with **.
macro_rules! headline {
    ($text:expr, $query:expr) => {
        concat!(
            "pg_catalog.ts_headline(",
            config!(),
            ", pg_catalog.left(",
            $text,
            ", 20000), ",
            $query,
            ", 'StartSel=**, StopSel=**, MaxWords=35, MinWords=12, MaxFragments=2, FragmentDelimiter=\" … \"')"
        )
    };
}

/// ` FROM` the row `$alias` of `$table` that `$filter` picks, in the
/// caller's tenant.
macro_rules! item_row {
    ($alias:literal, $table:literal, $filter:literal) => {
        concat!(
            " FROM agent_memory.",
            $table,
            " ",
            $alias,
            " WHERE ",
            $filter,
            " AND ",
            $alias,
            ".tenant = agent_memory.caller_tenant()"
        )
    };
}

/// The snippet of one item of kind `$kind` (see headline), for the words
/// $1 (see recall::Query): the row `$alias` of `$table` of the caller's
/// tenant that `$filter` names by the item's key $2, ref $3, thread or
/// node key $4 and slot $5.
macro_rules! snippet_of_one {
    ($kind:tt, $alias:literal, $table:literal, $filter:literal) => {
        Statement::read_only(
            concat!(
                "SELECT ",
                headline!(item_text!($kind, $alias), wanted!()),
                item_row!($alias, $table, $filter)
            ),
            &[TEXT, TEXT, TEXT, TEXT, INT4],
        )
    };
}

static SNIPPET_OF_ENTRY: Statement =
    snippet_of_one!("kv", "e", "kv_entries", "e.session_id = $2 AND e.key = $3");
static SNIPPET_OF_MESSAGE: Statement = snippet_of_one!(
    "message",
    "m",
    "thread_messages",
    "m.session_id = $2 AND m.thread_key = $4 AND m.slot = $5 AND m.seq = $3::int8"
);
static SNIPPET_OF_PART: Statement = snippet_of_one!(
    "working_memory",
    "p",
    "wm_parts",
    "p.session_id = $2 AND p.node_key = $4
     AND p.part = CASE WHEN $4 = '' THEN $3 ELSE pg_catalog.substr($3, pg_catalog.length($4) + 2) END"
);
static SNIPPET_OF_NODE: Statement =
    snippet_of_one!("node", "n", "graph_nodes", "n.owner = $2 AND n.node_id = $3");
static SNIPPET_OF_FILE: Statement =
    snippet_of_one!("file", "f", "memory_files", "f.scope = $2 AND f.path = $3");

/// `WHEN '$kind' THEN` the text of the item of `$table` that `$filter`
/// picks, in the caller's tenant.
macro_rules! text_when {
    ($kind:tt, $alias:literal, $table:literal, $filter:literal) => {
        concat!(
            " WHEN '",
            $kind,
            "' THEN (SELECT ",
            item_text!($kind, $alias),
            item_row!($alias, $table, $filter),
            ")"
        )
    };
}

/// The snippet of each item of the parallel arrays $2 (kind), $3 (key),
/// $4 (ref), $5 (thread or node key), $6 (slot): the first 20,000
/// characters of its text, the words $1 (see recall::Query) marked with
/// **, by the ordinal of the item. snippets_of puts in for __TEXT__ a CASE
/// of the kinds among the items (see TEXT_OF_KIND): a kind that is not
/// among them costs the statement nothing, neither its table's lock nor
/// its subquery's setup.
const SNIPPETS: &str = concat!(
    "WITH q AS MATERIALIZED (SELECT ",
    wanted!(),
    " AS q)
     SELECT w.ord, ",
    headline!("__TEXT__", "q.q"),
    "
     FROM q, ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
                        pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
                        pg_catalog.unnest($6::int4[]))
             WITH ORDINALITY AS w(kind, key, ref, thread, slot, ord)"
);

/// The snippet of each text of $2 (see headline), by its ordinal, for the
/// words $1 (see recall::Query).
static SNIPPETS_OF_TEXTS: Statement = Statement::read_only(
    concat!(
        "WITH q AS MATERIALIZED (SELECT ",
        wanted!(),
        " AS q)
         SELECT t.ord, ",
        headline!("t.text", "q.q"),
        " FROM q, pg_catalog.unnest($2::text[]) WITH ORDINALITY AS t(text, ord)"
    ),
    &[TEXT, TEXT_ARRAY],
);

/// Each kind's `WHEN` in the CASE of SNIPPETS: the text of the item that
/// row w names. A message is read by its slot and its seq: a statement of
/// the call may see a later message in the slot.
const TEXT_OF_KIND: [(&str, &str); 5] = [
    ("kv", text_when!("kv", "e", "kv_entries", "e.session_id = w.key AND e.key = w.ref")),
    (
        "message",
        text_when!(
            "message",
            "m",
            "thread_messages",
            "m.session_id = w.key AND m.thread_key = w.thread AND m.slot = w.slot
             AND m.seq = w.ref::int8"
        ),
    ),
    (
        "working_memory",
        text_when!(
            "working_memory",
            "p",
            "wm_parts",
            "p.session_id = w.key AND p.node_key = w.thread
             AND p.part = CASE WHEN w.thread = '' THEN w.ref
                               ELSE pg_catalog.substr(w.ref, pg_catalog.length(w.thread) + 2) END"
        ),
    ),
    ("node", text_when!("node", "n", "graph_nodes", "n.owner = w.key AND n.node_id = w.ref")),
    ("file", text_when!("file", "f", "memory_files", "f.scope = w.key AND f.path = w.ref")),
];
