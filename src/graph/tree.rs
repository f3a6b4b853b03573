//! The tree projection of graph memory: one flat scan of the owner's nodes,
//! the projection built in the core (`agent_memory_core::graph::tree`), and the
//! result streamed out as rows (`graph_tree_rows`) or written as one JSON
//! document (`graph_tree`). No recursive query: its cost grows with depth
//! times nodes, this one with nodes plus refs.

use pgrx::prelude::*;
use pgrx::{Array, FromDatum};

use agent_memory_core::graph::ROOT_ID;
use agent_memory_core::graph::tree::{Graph, Tree};
use agent_memory_core::jsonb::{JsonbWriter, key_order};
use agent_memory_core::packed::{Packed, Span};
use agent_memory_core::{Error, ErrorKind, graph, time};

use crate::graph::nodes::checked_owner;
use crate::pg::args::required;
use crate::pg::c_functions::{TableCall, materialized_table_function};
use crate::pg::datums::{JsonbBytes, TextBlock, for_each_text_element, numeric_bytes, text_array};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::stream::{StreamStatement, for_each_row};

/// Most ids in all the paths of graph_tree_rows together, per row allowed
/// (`agent_memory.max_tree_rows`): a web of shared children can make the
/// projection exponentially larger than the graph, and a long chain makes
/// its paths long.
const PATH_IDS_PER_ROW: u64 = 10;

/// One text per node (the titles), packed.
#[derive(Default)]
struct Texts {
    text: Packed,
    spans: Vec<Span>,
}

impl Texts {
    fn push(&mut self, value: &str) {
        let span = self.text.push(value);
        self.spans.push(span);
    }

    fn get(&self, node: u32) -> &str {
        self.text.get(&self.spans[node as usize])
    }
}

/// Each node's object in the JSON form, written as the scan reads the node
/// (its data is at hand then, and the objects go into one buffer front to
/// back); the document copies each in whole under every parent. Writing
/// them later, in the document's order, read every node's facts from a
/// random place in memory, which cost more than the writing.
#[derive(Default)]
struct NodeObjects {
    writer: JsonbWriter,
    numbers: Numerics,
    stamp: String,
    /// Node i's object is `bytes[ends[i - 1]..ends[i]]` (from 0 for i = 0).
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl NodeObjects {
    fn get(&self, node: u32) -> &[u8] {
        let node = node as usize;
        let start = if node == 0 { 0 } else { self.ends[node - 1] };
        &self.bytes[start..self.ends[node]]
    }
}

/// Microseconds since 1970 of a timestamptz.
fn unix_micros(at: TimestampWithTimeZone) -> i64 {
    at.into_inner().saturating_add(time::POSTGRES_EPOCH_UNIX_MICROS)
}

/// The owner's nodes (in the caller's tenant), packed; `objects` also
/// writes each node's object of the JSON form. Rows are read as the
/// executor produces them (see `stream`).
fn scan(owner: &str, objects: bool) -> SqlResult<(Graph, Texts, Option<NodeObjects>)> {
    let statement = if objects { &SCAN_FOR_JSON } else { &SCAN_FOR_ROWS };
    let mut graph = Graph::default();
    let mut titles = Texts::default();
    let mut objects = objects.then(NodeObjects::default);
    for_each_row(statement, &[Some(owner)], &mut |row| {
        let created = row.timestamptz(3, "created_at")?;
        graph.add_node(row.text(1, "node_id")?, created.into_inner());
        let refs = row.datum(2, "refs")?;
        // SAFETY: refs is a text[] of the row, read during the callback.
        unsafe {
            if !for_each_text_element(refs, |id| graph.add_ref(id)) {
                let refs = required(Array::<&str>::from_datum(refs, false), "refs")?;
                for id in refs.iter().flatten() {
                    graph.add_ref(id);
                }
            }
        }
        if let Some(objects) = objects.as_mut() {
            let node = (graph.len() - 1) as u32;
            let w = &mut objects.writer;
            w.begin_object(CHILD_KEYS.len());
            for key in CHILD_KEYS {
                w.string(key);
            }
            w.string(graph.id(node));
            w.begin_array(graph.refs(node).count());
            for r in graph.refs(node) {
                w.string(r);
            }
            w.end();
            w.string(row.text(4, "title")?);
            w.numeric(objects.numbers.of(row.int4(6, "version")?));
            for at in [created, row.timestamptz(7, "updated_at")?] {
                objects.stamp.clear();
                time::push_iso_utc(&mut objects.stamp, unix_micros(at), 3);
                w.string(&objects.stamp);
            }
            w.string(row.text(5, "description")?);
            w.end();
            w.finish_into(&mut objects.bytes).or_report()?;
            objects.ends.push(objects.bytes.len());
        } else {
            titles.push(row.text(4, "title")?);
        }
        Ok(())
    })?;
    Ok((graph, titles, objects))
}

// graph_tree_rows returns its rows in materialize mode: the function is
// called once and puts every row into the result store, instead of being
// called once per row (what pgrx's table functions do), which for a
// million rows costs more than building the projection. pgrx has no
// materialize mode, so the function is declared by hand.
materialized_table_function! { "graph_tree_rows", graph_tree_rows_materialized, put_tree_rows, r#"
CREATE FUNCTION agent_memory.graph_tree_rows(owner text)
RETURNS TABLE (node_id text, parent_id text, depth integer, path text[], title text)
LANGUAGE c STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'graph_tree_rows_materialized';
"# }

/// Scan, build the projection and put its rows into the result store.
fn put_tree_rows(call: &TableCall) -> SqlResult<()> {
    let owner = checked_owner(call.text(0)?)?;
    let (graph, titles, _) = scan(owner, false)?;
    let tree = Tree::build(&graph);

    // Each node's id and title become a text value once, in one block, in
    // the tree's order (the order rows visit nodes), so the rows read them
    // front to back; rows point to them.
    let count = tree.node_count() as u32;
    let ids = TextBlock::new((0..count).map(|node| graph.id(tree.original(node))));
    let title_values = TextBlock::new((0..count).map(|node| titles.get(tree.original(node))));
    let root = TextBlock::new(std::iter::once(ROOT_ID));
    drop(titles);

    let max_rows = crate::pg::settings::MAX_TREE_ROWS.get().max(1) as u64;
    let mut rows =
        tree.into_rows(max_rows, max_rows.saturating_mul(PATH_IDS_PER_ROW)).or_report()?;
    let mut path = Vec::new();
    let mut produced: u64 = 0;
    // SAFETY: the call allows materialize mode (TableCall::new's promise).
    unsafe {
        let fcinfo = call.fcinfo();
        pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC);
        let result = (*fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
        let (store, desc) = ((*result).setResult, (*result).setDesc);
        while let Some(row) = rows.next_row().or_report()? {
            let mut values = [
                ids.datum(row.node),
                row.parent.map_or(root.datum(0), |p| ids.datum(p)),
                pg_sys::Datum::from(row.depth as i32),
                text_array(&mut path, &ids, row.path),
                title_values.datum(row.node),
            ];
            let mut nulls = [false; 5];
            // The store copies the values.
            pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            produced += 1;
            if produced.is_multiple_of(16_384) {
                pgrx::check_for_interrupts!();
            }
        }
    }
    Ok(())
}

/// Numbers as jsonb stores them: `numeric` datums, made once per distinct
/// value.
#[derive(Default)]
struct Numerics(std::collections::BTreeMap<i32, Vec<u8>>, Option<(i32, Vec<u8>)>);

impl Numerics {
    fn of(&mut self, value: i32) -> &[u8] {
        // Most nodes share a version: remember the last one asked for.
        if self.1.as_ref().is_none_or(|(last, _)| *last != value) {
            let bytes =
                self.0.entry(value).or_insert_with(|| numeric_bytes(i64::from(value))).clone();
            self.1 = Some((value, bytes));
        }
        self.1.as_ref().map_or(&[], |(_, bytes)| bytes.as_slice())
    }
}

/// The keys of a child entry, in jsonb's order (length, then bytes).
const CHILD_KEYS: [&str; 7] =
    ["id", "refs", "title", "version", "createdAt", "updatedAt", "description"];

/// The virtual root as graph_read shows it, keys in jsonb's order.
fn write_root(w: &mut JsonbWriter, numbers: &mut Numerics) {
    let keys = [
        "id",
        "body",
        "refs",
        "title",
        "version",
        "createdAt",
        "updatedAt",
        "description",
        "unresolvedRefs",
    ];
    w.begin_object(keys.len());
    for key in keys {
        w.string(key);
    }
    w.string(ROOT_ID);
    w.string(graph::ROOT_BODY);
    w.begin_array(0);
    w.end();
    w.string(graph::ROOT_TITLE);
    w.numeric(numbers.of(1));
    w.null();
    w.null();
    w.string(graph::ROOT_DESCRIPTION);
    w.begin_array(0);
    w.end();
    w.end();
}

/// graph_tree's document, as jsonb bytes (varlena header included).
pub fn tree_document(owner: &str) -> SqlResult<Vec<u8>> {
    let (graph, _, objects) = scan(owner, true)?;
    let objects = required(objects, "node objects")?;
    let tree = Tree::build(&graph);
    let mut numbers = Numerics::default();
    let node_id = |rank: u32| graph.id(tree.original(rank));
    // The children map: "__root__" and every parent with children, keys in
    // jsonb's order.
    let mut keyed: Vec<(&str, u32)> = (0..tree.node_count() as u32)
        .filter(|&rank| tree.has_children(rank))
        .map(|rank| (node_id(rank), rank))
        .collect();
    keyed.sort_unstable_by(|a, b| key_order(a.0, b.0));
    let root_at = keyed.partition_point(|&(id, _)| key_order(id, ROOT_ID).is_lt());
    let parents: Vec<u32> = keyed.iter().map(|&(_, rank)| rank).collect();

    let max_bytes = crate::pg::settings::max_result_bytes();
    let mut w =
        JsonbWriter::with_capacity((256 + objects.bytes.len() + graph.len() * 8).min(max_bytes))
            .with_budget(max_bytes, Error::too_large_to_build("the tree takes", max_bytes));
    w.begin_object(2);
    w.string("root");
    w.string("children");
    write_root(&mut w, &mut numbers);
    w.begin_object(parents.len() + 1);
    for (k, &(id, _)) in keyed.iter().enumerate() {
        if k == root_at {
            w.string(ROOT_ID);
        }
        w.string(id);
    }
    if root_at == parents.len() {
        w.string(ROOT_ID);
    }
    let children = |w: &mut JsonbWriter, kids: &[u32]| {
        w.begin_array(kids.len());
        for &kid in kids {
            w.container(objects.get(tree.original(kid)));
        }
        w.end();
    };
    for (k, &rank) in parents.iter().enumerate() {
        if k == root_at {
            children(&mut w, &tree.root_children);
        }
        children(&mut w, tree.children(rank));
    }
    if root_at == parents.len() {
        children(&mut w, &tree.root_children);
    }
    w.end();
    w.end();
    w.finish()
        .map_err(|e| match e.kind {
            ErrorKind::LimitExceeded => e.with_hint("read the tree as rows with graph_tree_rows()"),
            _ => e,
        })
        .or_report()
}

/// The tree projection as one jsonb document, written in jsonb's binary
/// form directly (no JSON text to parse).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_tree(owner: Option<&str>) -> SqlResult<JsonbBytes> {
    let owner = checked_owner(owner)?;
    Ok(JsonbBytes(tree_document(owner)?))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// The jsonb graph_tree writes is byte for byte what PostgreSQL makes
    /// of the same document as text: a different layout could read wrong.
    #[pg_test]
    fn graph_tree_writes_canonical_jsonb() {
        Spi::run(
            "SELECT agent_memory.graph_create('bytes', 'Top é', '', '', ARRAY['__root__'], node_id => 'top');
             SELECT agent_memory.graph_create('bytes', 'Child ' || i, CASE WHEN i % 2 = 0 THEN '' ELSE 'd \"q\" ' || i END,
                                              '[[dangling]]', ARRAY['top'], node_id => 'c' || i)
             FROM generate_series(1, 70) i;
             SELECT agent_memory.graph_write('bytes', 'c7', NULL, NULL, NULL, change_description => 'no-op');
             SELECT agent_memory.graph_write('bytes', 'c8', 'Child 8 v2', NULL, NULL, change_description => 'v2');
             SELECT agent_memory.graph_create('bytes', 'Loop', '', '[[top]]', ARRAY['c1'], node_id => 'zz');",
        )
        .expect("graph");
        for owner in ["bytes", "nobody"] {
            let written = super::tree_document(owner).expect("tree document");
            // SAFETY: `written` is a complete jsonb varlena; jsonb_out and
            // jsonb_in take and give plain datums.
            let reparsed = unsafe {
                let text = pgrx::fcinfo::direct_function_call_as_datum(
                    pg_sys::jsonb_out,
                    &[Some(pg_sys::Datum::from(written.as_ptr()))],
                )
                .expect("jsonb_out");
                let again =
                    pgrx::fcinfo::direct_function_call_as_datum(pg_sys::jsonb_in, &[Some(text)])
                        .expect("jsonb_in")
                        .cast_mut_ptr::<u8>();
                let size = (again.cast::<u32>().read_unaligned() >> 2) as usize;
                std::slice::from_raw_parts(again, size).to_vec()
            };
            assert_eq!(written.len(), reparsed.len(), "{owner}: sizes differ");
            assert!(written == reparsed, "{owner}: bytes differ");
        }
    }
}

// The statements.

// A scan of the caller's nodes of owner $1: the columns every projection
// reads, then `$column`s of the types `$type`.
macro_rules! node_scan {
    ($($column:literal: $type:ident),*) => {
        StreamStatement {
            sql: concat!(
                "SELECT node_id, refs, created_at, title",
                $(", ", $column,)*
                " FROM agent_memory.graph_nodes
                  WHERE owner = $1 AND tenant = agent_memory.caller_tenant()"
            ),
            params: 1,
            columns: &[
                pg_sys::TEXTOID,
                pg_sys::TEXTARRAYOID,
                pg_sys::TIMESTAMPTZOID,
                pg_sys::TEXTOID,
                $(pg_sys::$type,)*
            ],
        }
    };
}

static SCAN_FOR_ROWS: StreamStatement = node_scan!();

static SCAN_FOR_JSON: StreamStatement = node_scan!(
    "description": TEXTOID,
    "version": INT4OID,
    "updated_at": TIMESTAMPTZOID
);
