//! Rules of recall: finding what an agent knows by its content, across
//! every kind of memory.
//!
//! A recall is scoped (it never reads everyone's memory by accident),
//! searches the kinds it is asked for, and ranks each candidate by the
//! signals that found it: words (full-text search) and, when the
//! application gives embeddings, meaning (cosine similarity). The signals
//! combine by reciprocal rank fusion, so neither signal's raw scores need
//! to be comparable, and a recency factor with a floor favours what was
//! written lately without ever scoring an old memory to zero.

use std::cmp::Ordering;

use crate::error::quoted;
use crate::{Error, Result};

/// The kinds of memory recall searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Key-value entries of a session: the key and the value's text.
    Kv,
    /// Messages a thread keeps: their content.
    Message,
    /// Graph nodes: title, description and body.
    Node,
    /// Memory-tool files: path and content.
    File,
    /// Working-memory parts: the part's text.
    Part,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Kv, Kind::Message, Kind::Node, Kind::File, Kind::Part];

    /// The name a caller gives in `kinds` and reads in the `kind` column.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Kv => "kv",
            Kind::Message => "message",
            Kind::Node => "node",
            Kind::File => "file",
            Kind::Part => "working_memory",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether the items of this kind belong to a session, and so live
    /// only while it does.
    pub fn of_session(self) -> bool {
        matches!(self, Kind::Kv | Kind::Message | Kind::Part)
    }
}

/// The kinds a call asks for: all of them when `kinds` is absent; each
/// named once, in the order of [`Kind::ALL`]. An empty list or an unknown
/// name is 22023, so a typo never silently searches nothing.
pub fn checked_kinds(kinds: Option<&[Option<String>]>) -> Result<Vec<Kind>> {
    let Some(kinds) = kinds else {
        return Ok(Kind::ALL.to_vec());
    };
    if kinds.is_empty() {
        return Err(
            Error::invalid("kinds must name at least one kind").with_hint(known_kinds_hint())
        );
    }
    let mut chosen = Vec::new();
    for name in kinds {
        let name = name.as_deref().ok_or_else(|| Error::null("an element of kinds"))?;
        let kind = Kind::from_name(name).ok_or_else(|| {
            Error::invalid(format!("unknown kind {}", crate::error::quoted(name)))
                .with_hint(known_kinds_hint())
        })?;
        if !chosen.contains(&kind) {
            chosen.push(kind);
        }
    }
    chosen.sort();
    Ok(chosen)
}

fn known_kinds_hint() -> String {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    format!("the kinds are {}", names.join(", "))
}

/// Where a recall looks: at least one of these is given, and each kind is
/// searched only where its rows can be: key-value entries, messages and
/// working-memory parts belong to sessions (`session_id`, or every session
/// of `user_id`), graph nodes to an `owner`, files to a `scope`.
pub type Scope<'a> = crate::args::Keys<'a>;

impl crate::args::Keys<'_> {
    /// 22023 when nothing scopes the call: recall never scans every
    /// session, owner and scope.
    pub fn check(&self) -> Result<()> {
        if self.session_id.is_none()
            && self.user_id.is_none()
            && self.owner.is_none()
            && self.scope.is_none()
        {
            return Err(Error::invalid(
                "recall needs a scope: session_id, user_id, owner or scope",
            )
            .with_detail("an unscoped recall would search everyone's memory"));
        }
        Ok(())
    }

    /// Whether kind `kind` has anywhere to look in this scope.
    pub fn reaches(&self, kind: Kind) -> bool {
        match kind {
            Kind::Kv | Kind::Message | Kind::Part => {
                self.session_id.is_some() || self.user_id.is_some()
            }
            Kind::Node => self.owner.is_some(),
            Kind::File => self.scope.is_some(),
        }
    }
}

/// The table that holds each kind's rows.
impl Kind {
    pub fn table(self) -> &'static str {
        match self {
            Kind::Kv => "kv_entries",
            Kind::Message => "thread_messages",
            Kind::Node => "graph_nodes",
            Kind::File => "memory_files",
            Kind::Part => "wm_parts",
        }
    }
}

/// The kinds named in a comma-separated list (a setting's value), each
/// once; an empty list names none. An unknown name is 22023.
pub fn kinds_in_list(list: &str) -> Result<Vec<Kind>> {
    let names: Vec<Option<String>> = list
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| Some(name.to_string()))
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    checked_kinds(Some(&names))
}

/// The expression of a kind's search column: the words recall matches, in
/// text search configuration `config` (an SQL literal), or NULL when the
/// kind is not kept in step. A tsvector holds at most 1 MB, so each text
/// is cut first (at most 200,000 characters in all; JSON past 800,000
/// bytes stands in as the words of its first 200,000 characters). A fresh
/// install's columns (sql/schema.sql) are these with 'english'.
pub fn search_expression(kind: Kind, config: &str, kept: bool) -> String {
    if !kept {
        return "NULL::tsvector".to_string();
    }
    let words = |text: &str| format!("pg_catalog.to_tsvector({config}, {text})");
    let json_words = |filter: &str| {
        format!(
            "CASE WHEN pg_catalog.octet_length(value::text) <= 800000 \
             THEN pg_catalog.jsonb_to_tsvector({config}, value, '{filter}') \
             ELSE {} END",
            words("pg_catalog.left(value::text, 200000)")
        )
    };
    match kind {
        Kind::Kv => format!(
            "pg_catalog.setweight({}, 'A') || {}",
            words("pg_catalog.left(key, 1000)"),
            json_words(r#"["string", "numeric", "key"]"#)
        ),
        Kind::Message => words("pg_catalog.left(content, 200000)"),
        Kind::Part => json_words(r#"["string", "numeric"]"#),
        Kind::Node => format!(
            "pg_catalog.setweight({}, 'A') || pg_catalog.setweight({}, 'B') || {}",
            words("pg_catalog.left(title, 10000)"),
            words("pg_catalog.left(description, 40000)"),
            words("pg_catalog.left(body, 150000)")
        ),
        Kind::File => format!(
            "pg_catalog.setweight({}, 'A') || {}",
            words("pg_catalog.translate(pg_catalog.left(path, 1000), '/._-', '    ')"),
            words("pg_catalog.left(content, 200000)")
        ),
    }
}

/// A text search configuration's name as a setting gives it: its schema,
/// when qualified (`public.mine`), and its own name. Unqualified names are
/// pg_catalog's.
pub fn config_name(config: &str) -> (Option<&str>, &str) {
    match config.trim().split_once('.') {
        Some((schema, name)) => (Some(schema), name),
        None => (None, config.trim()),
    }
}

/// The most characters a query may have.
pub const MAX_QUERY_CHARS: usize = 10_000;

/// The most words a query may have, its phrases' words and the unwanted
/// ones included, each different term counted once: ranking an item costs
/// more than in proportion to the words it is ranked by.
pub const MAX_QUERY_WORDS: usize = 32;

/// A query as recall reads it: an item matches when it has any of the
/// wanted terms and none of the unwanted ones. Each side is written for
/// PostgreSQL's `websearch_to_tsquery`, terms joined by `or`, so that its
/// text search configuration normalises the words (stems them, drops
/// common words) and keeps a phrase's words in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Words and quoted phrases, any of which an item must have.
    pub wanted: String,
    /// Words and phrases marked `-`, none of which an item may have.
    pub unwanted: String,
}

/// Read a query as a web search box does: `"quoted words"` are a phrase,
/// `-word` or `-"a phrase"` must be absent, `or` between terms changes
/// nothing (any term matches), and every other word is a term. An
/// unclosed quote runs to the end. Longer than [`MAX_QUERY_CHARS`], or
/// more than [`MAX_QUERY_WORDS`] words, is 54000.
pub fn parse_query(query: &str) -> Result<Query> {
    let chars = query.chars().count();
    if chars > MAX_QUERY_CHARS {
        return Err(Error::limit(format!(
            "the query has {chars} characters, more than {MAX_QUERY_CHARS}"
        )));
    }
    let (mut wanted, mut unwanted) = (Vec::new(), Vec::new());
    let mut rest = query;
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let negated = rest.starts_with('-');
        if negated {
            rest = &rest[1..];
        }
        let term = if let Some(inner) = rest.strip_prefix('"') {
            let end = inner.find('"').unwrap_or(inner.len());
            let phrase = inner[..end].split_whitespace().collect::<Vec<_>>().join(" ");
            rest = inner.get(end + 1..).unwrap_or("");
            (!phrase.is_empty()).then(|| format!("\"{phrase}\""))
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
            let word = &rest[..end];
            rest = &rest[end..];
            let keyword = word.eq_ignore_ascii_case("or");
            (!word.is_empty() && !word.starts_with('-') && !keyword).then(|| word.to_string())
        };
        if let Some(term) = term {
            let terms = if negated { &mut unwanted } else { &mut wanted };
            if !terms.contains(&term) {
                terms.push(term);
            }
        }
    }
    let words: usize =
        wanted.iter().chain(&unwanted).map(|term| term.split_whitespace().count()).sum();
    if words > MAX_QUERY_WORDS {
        return Err(Error::limit(format!(
            "the query has {words} words, more than {MAX_QUERY_WORDS}"
        ))
        .with_hint("ask with fewer words: an item is ranked by every one of them"));
    }
    Ok(Query { wanted: wanted.join(" or "), unwanted: unwanted.join(" or ") })
}

/// The number of items a call returns: `k`, at least 1 and at most `max`.
pub fn checked_k(k: Option<i32>, max: i32) -> Result<usize> {
    match k {
        None => Err(Error::null("k")),
        Some(k) if k < 1 => Err(Error::invalid(format!("k must be at least 1, not {k}"))),
        Some(k) if k > max => Err(Error::limit(format!("k must be at most {max}, not {k}"))
            .with_hint("agent_memory.max_recall_k sets the maximum")),
        Some(k) => Ok(k as usize),
    }
}

/// An embedding an application gives: finite numbers, not all zero (its
/// direction is what cosine similarity compares), of the dimension the
/// store expects when it has one. Anything else is 22023 and stores
/// nothing.
pub fn check_embedding(values: &[f32], dimension: Option<usize>) -> Result<()> {
    if values.is_empty() {
        return Err(Error::invalid("an embedding must have at least one element"));
    }
    if let Some(dimension) = dimension
        && values.len() != dimension
    {
        return Err(Error::invalid(format!(
            "the embedding has {} dimensions, not {dimension}",
            values.len()
        )));
    }
    if let Some(at) = values.iter().position(|v| !v.is_finite()) {
        // Spelled as PostgreSQL spells them.
        let value = match values[at] {
            v if v.is_nan() => "NaN",
            v if v > 0.0 => "Infinity",
            _ => "-Infinity",
        };
        return Err(Error::invalid(format!(
            "element {} of the embedding is {value}, not a finite number",
            at + 1
        )));
    }
    if values.iter().all(|v| *v == 0.0) {
        return Err(Error::invalid("an embedding must not be all zeros")
            .with_detail("cosine similarity compares directions; a zero vector has none"));
    }
    // pgvector sums the squares in single precision, as here: a length
    // whose square overflows or falls below the normal numbers would give
    // a distance of NaN, and the item would never be found.
    let squares: f32 = values.iter().map(|v| v * v).sum();
    if !squares.is_normal() {
        return Err(Error::invalid(
            "the embedding's length is out of range for single precision",
        )
        .with_detail(
            "the sum of its squared elements must lie between about 1.2e-38 and 3.4e38; scale it, say to length 1",
        ));
    }
    Ok(())
}

/// Cosine similarity of two embeddings of the same dimension, in [-1, 1].
/// Sums run in f64, so 4,096 dimensions lose no precision that matters to
/// a ranking.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    debug_assert_eq!(a.len(), b.len());
    let (mut dot, mut aa, mut bb) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    (dot / (aa.sqrt() * bb.sqrt())).clamp(-1.0, 1.0)
}

/// The reciprocal-rank-fusion constant: a signal's rank r contributes
/// weight / (RRF_K + r), so a signal's first ranks count clearly more than
/// its later ones (the fifth about three quarters of the first), and the
/// recency factor reorders near ranks but does not bury a best match.
pub const RRF_K: f64 = 10.0;

/// How much each signal counts in the fused score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub keyword: f64,
    pub meaning: f64,
}

/// Meaning counts twice as much as words unless a call says otherwise: an
/// embedding matches a question worded otherwise than the memory, where
/// shared words are often chance.
impl Default for Weights {
    fn default() -> Self {
        Weights { keyword: 1.0, meaning: 2.0 }
    }
}

impl Weights {
    /// Weights are finite and not negative, and at least one is positive.
    pub fn check(&self) -> Result<()> {
        for (name, w) in [("keyword", self.keyword), ("meaning", self.meaning)] {
            if !w.is_finite() || w < 0.0 {
                return Err(Error::invalid(format!(
                    "the {name} weight must be a finite number of at least 0, not {w}"
                )));
            }
        }
        if self.keyword == 0.0 && self.meaning == 0.0 {
            return Err(Error::invalid("at least one weight must be above 0"));
        }
        Ok(())
    }
}

/// The recency factor of an item `age_seconds` old: 1 for a new item,
/// halving every `half_life_seconds` towards `floor`, never below it. A
/// half-life of 0 or less turns recency off (factor 1).
pub fn recency_factor(age_seconds: f64, half_life_seconds: f64, floor: f64) -> f64 {
    if half_life_seconds <= 0.0 || !age_seconds.is_finite() {
        return 1.0;
    }
    let floor = floor.clamp(0.0, 1.0);
    let decay = 0.5f64.powf(age_seconds.max(0.0) / half_life_seconds);
    floor + (1.0 - floor) * decay
}

/// The weights a call gives as `{"keyword": w, "meaning": w}` (one left
/// out keeps its default); NULL is the default weights. Anything else is 22023.
pub fn weights_from_json(weights: Option<&serde_json::Value>) -> Result<Weights> {
    let Some(weights) = weights else {
        return Ok(Weights::default());
    };
    let serde_json::Value::Object(fields) = weights else {
        return Err(Error::invalid(
            r#"weights must be an object such as {"keyword": 1, "meaning": 2}"#,
        ));
    };
    let mut out = Weights::default();
    for (name, value) in fields {
        let weight = value.as_f64().ok_or_else(|| {
            Error::invalid(format!("the {name} weight must be a number, not {value}"))
        })?;
        match name.as_str() {
            "keyword" => out.keyword = weight,
            "meaning" => out.meaning = weight,
            other => {
                return Err(Error::invalid(format!("unknown weight {}", quoted(other)))
                    .with_hint("the weights are keyword and meaning"));
            }
        }
    }
    out.check()?;
    Ok(out)
}

/// The most dimensions an embedding may have (pgvector's own limit).
pub const MAX_DIMENSION: i32 = 16_000;

/// A dimension as recall_enable_embeddings takes it.
pub fn checked_dimension(dimension: Option<i32>) -> Result<i32> {
    match dimension {
        None => Err(Error::null("dimension")),
        Some(d) if (1..=MAX_DIMENSION).contains(&d) => Ok(d),
        Some(d) => Err(Error::invalid(format!("dimension must be 1 to {MAX_DIMENSION}, not {d}"))),
    }
}

/// An item as recall names it (kind, key, ref), read into the columns of
/// its table's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'a> {
    pub kind: Kind,
    /// The session, owner or scope.
    pub key: &'a str,
    /// The kv key, node id or path; a working-memory part's name.
    pub name: &'a str,
    /// A working-memory part's node key ('' for the session's entry).
    pub node_key: &'a str,
    /// A message's seq.
    pub seq: i64,
}

/// Check `key`, recall's `key` of a `kind` item, as the kind's writes
/// check it: a file's is its scope and a node's its owner, whose names
/// may be longer than a session's id.
pub fn check_key(kind: Kind, key: Option<&str>) -> Result<&str> {
    match kind {
        Kind::File => {
            let scope = key.ok_or_else(|| Error::null("key"))?;
            crate::files::memory_tool::check_scope(scope)?;
            Ok(scope)
        }
        Kind::Node => {
            let owner = key.ok_or_else(|| Error::null("key"))?;
            crate::graph::check_owner(owner)?;
            Ok(owner)
        }
        Kind::Kv | Kind::Message | Kind::Part => crate::args::check_id("key", key),
    }
}

/// Read `reference` as recall's `ref` of a `kind` item: a message's seq
/// is a number; a working-memory part is `part` or `node/part`.
pub fn item_of<'a>(kind: Kind, key: &'a str, reference: &'a str) -> Result<Item<'a>> {
    let mut item = Item { kind, key, name: reference, node_key: "", seq: 0 };
    match kind {
        Kind::Message => {
            item.seq = reference.parse().map_err(|_| {
                Error::invalid(format!(
                    "a message's ref is its seq, a number, not {}",
                    quoted(reference)
                ))
            })?;
        }
        Kind::Part => {
            if let Some((node_key, part)) = reference.rsplit_once('/') {
                item.node_key = node_key;
                item.name = part;
            }
        }
        Kind::Kv | Kind::Node | Kind::File => {}
    }
    Ok(item)
}

/// One candidate item and where each signal ranked it (1 = best; None:
/// that signal did not find it).
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<T> {
    pub item: T,
    pub keyword_rank: Option<usize>,
    pub meaning_rank: Option<usize>,
    /// The item's recency factor (see [`recency_factor`]).
    pub recency: f64,
}

/// A candidate with its fused score.
#[derive(Debug, Clone, PartialEq)]
pub struct Ranked<T> {
    pub candidate: Candidate<T>,
    pub score: f64,
}

/// The fused score of a candidate: the weighted reciprocal ranks of the
/// signals that found it, times its recency factor.
pub fn fused_score<T>(candidate: &Candidate<T>, weights: Weights) -> f64 {
    let part = |rank: Option<usize>, weight: f64| rank.map_or(0.0, |r| weight / (RRF_K + r as f64));
    (part(candidate.keyword_rank, weights.keyword) + part(candidate.meaning_rank, weights.meaning))
        * candidate.recency
}

/// The best `k` candidates by fused score, best first. Ties keep the order
/// the candidates came in, so a call is deterministic.
pub fn fuse<T>(candidates: Vec<Candidate<T>>, weights: Weights, k: usize) -> Vec<Ranked<T>> {
    let mut ranked: Vec<Ranked<T>> = candidates
        .into_iter()
        .map(|candidate| Ranked { score: fused_score(&candidate, weights), candidate })
        .filter(|r| r.score > 0.0)
        .collect();
    // A stable sort: equal scores stay in their incoming order.
    ranked.sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(Ordering::Equal));
    ranked.truncate(k);
    ranked
}

/// The ranks (1 = best) of scores, highest first; equal scores share the
/// order they came in.
pub fn ranks_of(scores: &[f64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].partial_cmp(&scores[a]).unwrap_or(Ordering::Equal));
    let mut ranks = vec![0; scores.len()];
    for (rank, index) in order.into_iter().enumerate() {
        ranks[index] = rank + 1;
    }
    ranks
}

/// What a model asks of recall as a tool: `{"query", "kinds"?, "k"?}`.
/// The scope is never the model's to choose: the application gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRequest {
    pub query: Query,
    pub kinds: Vec<Kind>,
    pub k: usize,
}

/// How many memories a tool call returns when it does not say.
pub const TOOL_DEFAULT_K: i32 = 10;

/// Check a tool call's input (`max_k`: agent_memory.max_recall_k). Every
/// refusal is a message for the model; other fields are ignored.
pub fn parse_tool_request(request: &serde_json::Value, max_k: i32) -> Result<ToolRequest> {
    let serde_json::Value::Object(fields) = request else {
        return Err(Error::invalid("request must be a JSON object"));
    };
    let query = match fields.get("query") {
        None | Some(serde_json::Value::Null) => return Err(Error::invalid("query is required")),
        Some(serde_json::Value::String(query)) => parse_query(query)?,
        Some(_) => return Err(Error::invalid("query must be a string")),
    };
    let kinds = match fields.get("kinds") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::Array(items)) => Some(
            items
                .iter()
                .map(|item| match item {
                    serde_json::Value::String(name) => Ok(Some(name.clone())),
                    _ => Err(Error::invalid("kinds must be a list of strings")),
                })
                .collect::<Result<Vec<_>>>()?,
        ),
        Some(_) => return Err(Error::invalid("kinds must be a list of strings")),
    };
    let kinds = checked_kinds(kinds.as_deref())?;
    let k = match fields.get("k") {
        None | Some(serde_json::Value::Null) => Some(TOOL_DEFAULT_K),
        Some(serde_json::Value::Number(k)) => Some(
            k.as_i64()
                .and_then(|k| i32::try_from(k).ok())
                .ok_or_else(|| Error::invalid(format!("k must be a whole number, not {k}")))?,
        ),
        Some(_) => return Err(Error::invalid("k must be a whole number")),
    };
    let k = checked_k(k, max_k)?;
    Ok(ToolRequest { query, kinds, k })
}

/// The description of recall as a tool, unless the application gives one.
pub const TOOL_DESCRIPTION: &str = "Search your long-term memory by its words: key-value \
     entries, past messages, working memory, knowledge-graph notes and memory files. \
     Ask with the words the memory would contain; \"a phrase\" keeps words together, -word \
     excludes. Answers {ok, result: {memories: [{kind, key, ref, snippet, score, updated_at}]}} \
     best first, the matching words marked **, or {ok: false, error: {message, code}}.";

/// Recall's definition for a model (see [`crate::tool::definition`]).
pub fn tool_definition(
    name: Option<&str>, description: Option<&str>, title: Option<&str>, format: Option<&str>,
) -> Result<serde_json::Value> {
    let name = name.ok_or_else(|| Error::null("name"))?;
    let kinds: Vec<&str> = Kind::ALL.iter().map(|kind| kind.name()).collect();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "The words to look for, any of them."},
            "kinds": {"type": "array", "items": {"type": "string", "enum": kinds}, "description": "Only these kinds of memory; all of them when left out."},
            "k": {"type": "integer", "minimum": 1, "description": "How many memories to return, 10 when left out."}
        },
        "required": ["query"],
        "additionalProperties": false
    });
    crate::tool::definition(name, description.unwrap_or(TOOL_DESCRIPTION), title, schema, format)
}

/// A tool call's answer: `{"ok": true, "result": {"memories": [...]}}`,
/// the memories as given (already JSON objects, best first).
pub fn tool_answer(memories: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"ok": true, "result": {"memories": memories}})
}

/// A refused tool call: `{"ok": false, "error": {"message", "code"}}`,
/// with the memory tool's codes (EINVAL for a bad request).
pub fn tool_refusal(error: &Error) -> serde_json::Value {
    serde_json::json!({"ok": false, "error": {"message": error.message, "code": "EINVAL"}})
}

/// The rank of each score among the scores present (1 = highest, ties in
/// the order given); None where there is no score.
pub fn ranks_among(scores: &[Option<f64>]) -> Vec<Option<usize>> {
    let present: Vec<f64> = scores.iter().flatten().copied().collect();
    let mut ranks = ranks_of(&present).into_iter();
    scores.iter().map(|score| score.and_then(|_| ranks.next())).collect()
}

/// How many items a kind recall by meaning alone reads first: the best
/// `k` and ten more, which settle the best `k` (see
/// [`deeper_meaning_read_needed`]) unless the nearest items are much older
/// than those just past them.
pub fn first_meaning_depth(k: usize) -> usize {
    k + 10
}

/// Whether recall by meaning alone of the best `k` takes each item's text
/// from its first read (for the snippets), rather than reading the best
/// `k`'s texts apart. The first read holds `first_meaning_depth(k)` items
/// a kind, so texts come along only for a `k` small enough that holding
/// them all stays within a few megabytes whatever `max_recall_k` allows.
pub fn first_meaning_read_takes_texts(k: usize) -> bool {
    k <= MOST_K_TAKING_TEXTS
}

/// The largest `k` for which [`first_meaning_read_takes_texts`] holds: the
/// default `k`.
pub const MOST_K_TAKING_TEXTS: usize = 10;

/// An item a read by meaning kept: its kind, similarity (above 0) and
/// recency factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeaningRead {
    pub kind: Kind,
    pub similarity: f64,
    pub recency: f64,
}

/// Whether reading deeper by meaning alone could change the best `k` of
/// what a first read of `depth` items a kind kept (`read`, in the order
/// fusion takes it), fused with `weight` as [`fuse`] fuses them. A kind
/// that kept `depth` items may hold more: an item not read has at most the
/// least similarity it kept, so it ranks behind every kept item more
/// similar, and scores at most `weight / (RRF_K + that rank)`. No deeper
/// read changes the best `k` when each of them is more similar than any
/// unread item (their ranks stay as they are) and the k-th scores above
/// what any unread item can.
pub fn deeper_meaning_read_needed(
    read: &[MeaningRead], depth: usize, weight: f64, k: usize,
) -> bool {
    let mut kinds: Vec<Kind> = read.iter().map(|item| item.kind).collect();
    kinds.sort();
    kinds.dedup();
    let least_of_cut_kinds: Vec<f64> = kinds
        .into_iter()
        .filter_map(|kind| {
            let of_kind = read.iter().filter(|item| item.kind == kind);
            (of_kind.clone().count() >= depth)
                .then(|| of_kind.map(|item| item.similarity).fold(f64::INFINITY, f64::min))
        })
        .collect();
    if least_of_cut_kinds.is_empty() || k == 0 {
        return false;
    }
    let similarities: Vec<f64> = read.iter().map(|item| item.similarity).collect();
    let candidates = read
        .iter()
        .zip(ranks_of(&similarities))
        .map(|(item, rank)| Candidate {
            item: item.similarity,
            keyword_rank: None,
            meaning_rank: Some(rank),
            recency: item.recency,
        })
        .collect();
    let meaning = Weights { keyword: 0.0, meaning: weight };
    let best = fuse(candidates, meaning, k);
    let Some(kth) = best.get(k - 1) else {
        return true;
    };
    least_of_cut_kinds.iter().any(|&least| {
        let ahead = similarities.iter().filter(|s| **s > least).count();
        let unread_at_most = weight / (RRF_K + (ahead + 1) as f64);
        best.iter().any(|ranked| ranked.candidate.item <= least) || kth.score <= unread_at_most
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn only_a_small_k_takes_its_texts_from_the_first_meaning_read() {
        assert!(first_meaning_read_takes_texts(1));
        assert!(first_meaning_read_takes_texts(10));
        assert!(!first_meaning_read_takes_texts(11));
        assert!(!first_meaning_read_takes_texts(1000));
        // What a call may hold: 20,000 characters of at most 4 bytes, for
        // each item of the five kinds' first reads.
        let most_bytes = 5 * first_meaning_depth(MOST_K_TAKING_TEXTS) * 20_000 * 4;
        assert!(most_bytes <= 8 << 20, "{most_bytes}");
    }

    #[test]
    fn the_session_kinds_are_its_keys_messages_and_parts() {
        let of_session: Vec<Kind> = Kind::ALL.into_iter().filter(|k| k.of_session()).collect();
        assert_eq!(of_session, [Kind::Kv, Kind::Message, Kind::Part]);
    }

    fn names(list: &[&str]) -> Vec<Option<String>> {
        list.iter().map(|s| Some((*s).to_owned())).collect()
    }

    fn read_of(items: &[(Kind, f64, f64)]) -> Vec<MeaningRead> {
        items
            .iter()
            .map(|&(kind, similarity, recency)| MeaningRead { kind, similarity, recency })
            .collect()
    }

    /// Twenty items of one kind, similarity 0.9 down to 0.71.
    fn twenty_nodes(recency: f64) -> Vec<MeaningRead> {
        let items: Vec<(Kind, f64, f64)> =
            (0..20).map(|i| (Kind::Node, 0.9 - f64::from(i) * 0.01, recency)).collect();
        read_of(&items)
    }

    #[test]
    fn a_first_meaning_read_settles_fresh_items() {
        // Read as deep as asked: the best 10 score 1/11..1/20, an unread
        // item at most 1/31.
        assert!(!deeper_meaning_read_needed(&twenty_nodes(1.0), 20, 1.0, 10));
        // A kind that kept fewer than it asked for has nothing unread.
        assert!(!deeper_meaning_read_needed(&twenty_nodes(0.5), 21, 1.0, 10));
    }

    #[test]
    fn a_first_meaning_read_is_not_enough_for_old_items_or_too_few() {
        // The nearest are old (recency 0.5): the 10th scores 0.5/20, below
        // the 1/31 an unread fresh item could reach.
        assert!(deeper_meaning_read_needed(&twenty_nodes(0.5), 20, 1.0, 10));
        // Fewer kept than k while the kind was cut short.
        let few = read_of(&[(Kind::Node, 0.9, 1.0), (Kind::Node, 0.8, 1.0)]);
        assert!(deeper_meaning_read_needed(&few, 2, 1.0, 10));
    }

    #[test]
    fn a_first_meaning_read_is_not_enough_when_a_best_item_could_lose_its_rank() {
        // Nodes cut short at 0.85, and one of the best 3 (a file of 0.6)
        // is less similar, so an unread node could rank ahead of it.
        let read =
            read_of(&[(Kind::Node, 0.9, 1.0), (Kind::Node, 0.85, 1.0), (Kind::File, 0.6, 1.0)]);
        assert!(deeper_meaning_read_needed(&read, 2, 1.0, 3));
        // The file at 0.95 instead, and the best 2: both stay ahead of any
        // unread node, and the 2nd (1/12) beats what it could score (1/13).
        let read =
            read_of(&[(Kind::File, 0.95, 1.0), (Kind::Node, 0.9, 1.0), (Kind::Node, 0.85, 1.0)]);
        assert!(!deeper_meaning_read_needed(&read, 2, 1.0, 2));
    }

    #[test]
    fn tool_requests_are_checked_for_the_model() {
        let request = parse_tool_request(
            &serde_json::json!({"query": "tea -coffee", "kinds": ["kv", "node"], "k": 3, "extra": 1}),
            100,
        )
        .unwrap();
        assert_eq!(request.query.wanted, "tea");
        assert_eq!(request.kinds, vec![Kind::Kv, Kind::Node]);
        assert_eq!(request.k, 3);
        let defaults = parse_tool_request(&serde_json::json!({"query": "tea"}), 100).unwrap();
        assert_eq!((defaults.kinds.len(), defaults.k), (5, 10));
        let refused =
            |request: serde_json::Value| parse_tool_request(&request, 100).unwrap_err().message;
        assert_eq!(refused(serde_json::json!([])), "request must be a JSON object");
        assert_eq!(refused(serde_json::json!({})), "query is required");
        assert_eq!(refused(serde_json::json!({"query": 1})), "query must be a string");
        assert_eq!(
            refused(serde_json::json!({"query": "a", "kinds": "kv"})),
            "kinds must be a list of strings"
        );
        assert!(refused(serde_json::json!({"query": "a", "kinds": ["kvs"]})).contains("kvs"));
        assert_eq!(
            refused(serde_json::json!({"query": "a", "k": 2.5})),
            "k must be a whole number, not 2.5"
        );
        assert_eq!(
            refused(serde_json::json!({"query": "a", "k": 0})),
            "k must be at least 1, not 0"
        );
        assert_eq!(
            refused(serde_json::json!({"query": "a", "k": 101})),
            "k must be at most 100, not 101"
        );
        assert_eq!(
            tool_refusal(&Error::invalid("query is required")),
            serde_json::json!({"ok": false, "error": {"message": "query is required", "code": "EINVAL"}})
        );
    }

    #[test]
    fn the_tool_definition_lists_every_kind() {
        let definition = tool_definition(Some("recall"), None, None, Some("anthropic")).unwrap();
        let kinds = &definition["input_schema"]["properties"]["kinds"]["items"]["enum"];
        assert_eq!(kinds.as_array().unwrap().len(), Kind::ALL.len());
        let openai = tool_definition(Some("recall"), Some("d"), Some("T"), Some("openai")).unwrap();
        assert_eq!(openai["function"]["parameters"]["title"], "T");
        assert!(tool_definition(Some("re call"), None, None, Some("openai")).is_err());
    }

    #[test]
    fn weights_come_as_an_object_of_numbers() {
        assert_eq!(weights_from_json(None).unwrap(), Weights::default());
        let w = weights_from_json(Some(&serde_json::json!({"keyword": 3}))).unwrap();
        assert_eq!((w.keyword, w.meaning), (3.0, Weights::default().meaning));
        for bad in [
            serde_json::json!([1]),
            serde_json::json!({"keyword": "1"}),
            serde_json::json!({"recency": 1}),
            serde_json::json!({"keyword": -1}),
            serde_json::json!({"keyword": 0, "meaning": 0}),
        ] {
            let error = weights_from_json(Some(&bad)).unwrap_err();
            assert_eq!(error.kind, ErrorKind::InvalidParameter, "{bad}");
        }
    }

    #[test]
    fn an_item_is_read_from_its_ref() {
        let message = item_of(Kind::Message, "s", "42").unwrap();
        assert_eq!(message.seq, 42);
        assert!(item_of(Kind::Message, "s", "x").is_err());
        let part = item_of(Kind::Part, "s", "node/a/fetched_context").unwrap();
        assert_eq!((part.node_key, part.name), ("node/a", "fetched_context"));
        let part = item_of(Kind::Part, "s", "session").unwrap();
        assert_eq!((part.node_key, part.name), ("", "session"));
        assert_eq!(item_of(Kind::File, "f", "/a/b").unwrap().name, "/a/b");
        assert_eq!(checked_dimension(Some(384)).unwrap(), 384);
        assert!(checked_dimension(Some(0)).is_err());
        assert!(checked_dimension(Some(16_001)).is_err());
        assert_eq!(checked_dimension(None).unwrap_err().kind, ErrorKind::NullValue);
    }

    #[test]
    fn ranks_skip_missing_scores() {
        assert_eq!(
            ranks_among(&[Some(0.2), None, Some(0.9), Some(0.2)]),
            vec![Some(2), None, Some(1), Some(3)]
        );
        assert_eq!(ranks_among(&[None, None]), vec![None, None]);
    }

    #[test]
    fn a_configuration_name_may_be_qualified() {
        assert_eq!(config_name(" english "), (None, "english"));
        assert_eq!(config_name("public.mine"), (Some("public"), "mine"));
    }

    #[test]
    fn kinds_in_a_setting_and_their_search_columns() {
        assert_eq!(kinds_in_list(" ").unwrap(), vec![]);
        assert_eq!(kinds_in_list("file, kv,file").unwrap(), vec![Kind::Kv, Kind::File]);
        assert_eq!(kinds_in_list("kv,nodes").unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(search_expression(Kind::Node, "'english'", false), "NULL::tsvector");
        let message = search_expression(Kind::Message, "'simple'", true);
        assert_eq!(message, "pg_catalog.to_tsvector('simple', pg_catalog.left(content, 200000))");
        for kind in Kind::ALL {
            let expression = search_expression(kind, "'english'", true);
            assert!(!expression.contains("'simple'"), "{expression}");
            assert_eq!(expression.matches('(').count(), expression.matches(')').count());
        }
    }

    #[test]
    fn a_query_wants_any_term_and_none_of_the_negated() {
        let q = parse_query("flights to  porto").unwrap();
        assert_eq!(q.wanted, "flights or to or porto");
        assert_eq!(q.unwanted, "");
        let q = parse_query(r#"window "train to  porto" -bus -"night train" OR seat"#).unwrap();
        assert_eq!(q.wanted, r#"window or "train to porto" or seat"#);
        assert_eq!(q.unwanted, r#"bus or "night train""#);
        // An unclosed quote runs to the end; empty phrases and lone dashes
        // are nothing; a dash inside a word is part of it.
        let q = parse_query(r#"e-mail - "" "open phrase"#).unwrap();
        assert_eq!(q.wanted, r#"e-mail or "open phrase""#);
        assert_eq!(q.unwanted, "");
        // A quote ends a word; syntax characters stay in words, for the
        // text search parser to read as text.
        let q = parse_query(r#"a"b c" !(&|:*<->)'\ --x"#).unwrap();
        assert_eq!(q.wanted, r#"a or "b c" or !(&|:*<->)'\"#);
        assert_eq!(q.unwanted, "");
        assert_eq!(parse_query("  or OR ").unwrap().wanted, "");
        let long = "w ".repeat(MAX_QUERY_CHARS);
        assert_eq!(parse_query(&long).unwrap_err().kind, ErrorKind::LimitExceeded);
        assert!(parse_query(&long[..MAX_QUERY_CHARS]).is_ok());
    }

    #[test]
    fn a_key_is_checked_as_the_kinds_writes_check_it() {
        let scope = "m".repeat(1024);
        assert_eq!(check_key(Kind::File, Some(&scope)).unwrap(), scope);
        assert!(check_key(Kind::File, Some(&"m".repeat(1025))).is_err());
        assert!(check_key(Kind::Node, Some(&"m".repeat(300))).is_ok());
        assert!(check_key(Kind::Kv, Some(&"m".repeat(300))).is_err());
        assert!(check_key(Kind::Kv, Some("k")).is_ok());
        assert_eq!(check_key(Kind::File, None).unwrap_err().kind, ErrorKind::NullValue);
        assert!(check_key(Kind::File, Some("")).is_err());
    }

    #[test]
    fn a_query_of_many_words_is_refused() {
        let words = |n: usize| (0..n).map(|i| format!("w{i}")).collect::<Vec<_>>();
        assert!(parse_query(&words(MAX_QUERY_WORDS).join(" ")).is_ok());
        let error = parse_query(&words(MAX_QUERY_WORDS + 1).join(" ")).unwrap_err();
        assert_eq!(error.kind, ErrorKind::LimitExceeded);
        // A phrase's words and unwanted words count; a term given twice
        // counts once.
        let phrase = format!("\"{}\"", words(MAX_QUERY_WORDS).join(" "));
        assert!(parse_query(&phrase).is_ok());
        assert!(parse_query(&format!("{phrase} -other")).is_err());
        assert!(parse_query(&format!("{phrase} w0 w1")).is_err());
        let repeated = vec!["same"; 100].join(" ");
        assert_eq!(parse_query(&repeated).unwrap().wanted, "same");
    }

    #[test]
    fn kinds_default_to_all_and_are_checked() {
        assert_eq!(checked_kinds(None).unwrap(), Kind::ALL.to_vec());
        assert_eq!(
            checked_kinds(Some(&names(&["file", "kv", "file"]))).unwrap(),
            vec![Kind::Kv, Kind::File]
        );
        let unknown = checked_kinds(Some(&names(&["kv", "nodes"]))).unwrap_err();
        assert_eq!(unknown.kind, ErrorKind::InvalidParameter);
        assert!(unknown.hint.unwrap().contains("working_memory"));
        assert_eq!(checked_kinds(Some(&[])).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(checked_kinds(Some(&[None])).unwrap_err().kind, ErrorKind::NullValue);
        for kind in Kind::ALL {
            assert_eq!(Kind::from_name(kind.name()), Some(kind));
        }
    }

    #[test]
    fn an_unscoped_recall_is_refused() {
        assert_eq!(Scope::default().check().unwrap_err().kind, ErrorKind::InvalidParameter);
        let owner_only = Scope { owner: Some("alice"), ..Scope::default() };
        assert!(owner_only.check().is_ok());
        assert!(owner_only.reaches(Kind::Node));
        assert!(!owner_only.reaches(Kind::Kv));
        assert!(!owner_only.reaches(Kind::File));
        let user = Scope { user_id: Some("alice"), ..Scope::default() };
        assert!(user.reaches(Kind::Message) && user.reaches(Kind::Part));
        assert!(!user.reaches(Kind::Node));
    }

    #[test]
    fn k_is_bounded() {
        assert_eq!(checked_k(Some(10), 100).unwrap(), 10);
        assert_eq!(checked_k(Some(100), 100).unwrap(), 100);
        assert_eq!(checked_k(Some(0), 100).unwrap_err().kind, ErrorKind::InvalidParameter);
        assert_eq!(checked_k(Some(101), 100).unwrap_err().kind, ErrorKind::LimitExceeded);
        assert_eq!(checked_k(None, 100).unwrap_err().kind, ErrorKind::NullValue);
    }

    #[test]
    fn embeddings_are_finite_nonzero_and_of_the_right_size() {
        assert!(check_embedding(&[0.1, -0.2, 0.3], Some(3)).is_ok());
        assert!(check_embedding(&[0.1, -0.2, 0.3], None).is_ok());
        assert!(check_embedding(&[1e18, 1.0], None).is_ok());
        assert!(check_embedding(&[1e-18, 0.0], None).is_ok());
        for bad in [
            check_embedding(&[], None),
            check_embedding(&[0.1, 0.2], Some(3)),
            check_embedding(&[0.1, f32::NAN], None),
            check_embedding(&[f32::INFINITY, 0.2], None),
            check_embedding(&[0.0, 0.0], None),
            // Squares past f32's range, and below its normal numbers.
            check_embedding(&[2e19, 1.0], None),
            check_embedding(&[1e-30, 2e-30, 1e-30], None),
        ] {
            assert_eq!(bad.unwrap_err().kind, ErrorKind::InvalidParameter);
        }
        let message = check_embedding(&[1.0, f32::NEG_INFINITY], None).unwrap_err().message;
        assert!(message.contains("element 2"), "{message}");
    }

    #[test]
    fn cosine_compares_directions() {
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-12);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-12);
        assert!((cosine(&[1.0, 1.0], &[-1.0, -1.0]) + 1.0).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 1.0]), 0.0);
    }

    #[test]
    fn recency_halves_towards_its_floor_and_never_below() {
        let day = 86_400.0;
        assert_eq!(recency_factor(0.0, day, 0.3), 1.0);
        assert!((recency_factor(day, day, 0.0) - 0.5).abs() < 1e-12);
        assert!((recency_factor(day, day, 0.2) - 0.6).abs() < 1e-12);
        let ancient = recency_factor(1e6 * day, day, 0.2);
        assert!((ancient - 0.2).abs() < 1e-12 && ancient > 0.0);
        // Off, or a clock that puts the item in the future.
        assert_eq!(recency_factor(5.0 * day, 0.0, 0.2), 1.0);
        assert_eq!(recency_factor(-day, day, 0.2), 1.0);
    }

    #[test]
    fn weights_are_checked() {
        assert!(Weights::default().check().is_ok());
        for bad in [
            Weights { keyword: -1.0, meaning: 1.0 },
            Weights { keyword: f64::NAN, meaning: 1.0 },
            Weights { keyword: 0.0, meaning: 0.0 },
        ] {
            assert_eq!(bad.check().unwrap_err().kind, ErrorKind::InvalidParameter);
        }
    }

    fn candidate(item: &str, keyword: Option<usize>, meaning: Option<usize>) -> Candidate<String> {
        Candidate {
            item: item.to_owned(),
            keyword_rank: keyword,
            meaning_rank: meaning,
            recency: 1.0,
        }
    }

    #[test]
    fn fusion_prefers_items_both_signals_found() {
        let fused = fuse(
            vec![
                candidate("words only, first", Some(1), None),
                candidate("both, second each", Some(2), Some(2)),
                candidate("meaning only, first", None, Some(1)),
                candidate("found by neither", None, None),
            ],
            EQUAL,
            10,
        );
        let order: Vec<&str> = fused.iter().map(|r| r.candidate.item.as_str()).collect();
        // An item no signal found is never returned; ties keep their order.
        assert_eq!(order, ["both, second each", "words only, first", "meaning only, first"]);
        assert!((fused[0].score - 2.0 / (RRF_K + 2.0)).abs() < 1e-12);
    }

    const EQUAL: Weights = Weights { keyword: 1.0, meaning: 1.0 };

    #[test]
    fn meaning_counts_more_than_words_unless_told() {
        let items = || {
            vec![
                candidate("words, first", Some(1), None),
                candidate("meaning, second", None, Some(2)),
            ]
        };
        assert_eq!(fuse(items(), Weights::default(), 1)[0].candidate.item, "meaning, second");
        assert_eq!(fuse(items(), EQUAL, 1)[0].candidate.item, "words, first");
    }

    #[test]
    fn weights_and_recency_move_the_ranking() {
        let items = || vec![candidate("words", Some(1), None), candidate("meaning", None, Some(1))];
        let meaning_first = fuse(items(), Weights { keyword: 0.5, meaning: 1.0 }, 1);
        assert_eq!(meaning_first[0].candidate.item, "meaning");
        let mut old = items();
        old[1].recency = 0.5;
        assert_eq!(fuse(old, EQUAL, 1)[0].candidate.item, "words");
        assert_eq!(fuse(items(), EQUAL, 1).len(), 1);
    }

    #[test]
    fn ranks_follow_scores() {
        assert_eq!(ranks_of(&[0.1, 0.9, 0.5, 0.9]), vec![4, 1, 3, 2]);
        assert!(ranks_of(&[]).is_empty());
    }
}
