//! The tree projection of graph memory: one flat scan of the owner's nodes,
//! the projection built in the core (`agent_memory_core::tree`), and the
//! result streamed out as rows (`graph_tree_rows`) or written as one JSON
//! document (`graph_tree`). No recursive query: its cost grows with depth
//! times nodes, this one with nodes plus refs.

use std::fmt::Write as _;
use std::ops::Range;

use pgrx::prelude::*;
use pgrx::{Array, FromDatum};

use agent_memory_core::graph::ROOT_ID;
use agent_memory_core::json::push_string as push_json_string;
use agent_memory_core::tree::{Graph, Tree};

use crate::datums::{JsonbText, for_each_text_element, text_array, text_datum};
use crate::error::{OrReport, SqlResult};
use crate::graph::{checked_owner, iso_of, root_json};
use crate::sessions::required;
use crate::stream::{StreamStatement, for_each_row};

/// Most rows graph_tree_rows returns: a web of shared children can make the
/// projection exponentially larger than the graph.
pub const MAX_TREE_ROWS: u64 = 50_000_000;

static SCAN_FOR_ROWS: StreamStatement = StreamStatement {
    sql: c"SELECT node_id, refs, created_at, title
           FROM agent_memory.graph_nodes WHERE owner = $1",
    params: 1,
};

static SCAN_FOR_JSON: StreamStatement = StreamStatement {
    sql: c"SELECT node_id, refs, created_at, title, description, version, updated_at
           FROM agent_memory.graph_nodes WHERE owner = $1",
    params: 1,
};

/// Text per node, packed into one string.
#[derive(Default)]
struct Texts {
    text: String,
    spans: Vec<Range<usize>>,
}

impl Texts {
    fn push(&mut self, value: &str) {
        let start = self.text.len();
        self.text.push_str(value);
        self.spans.push(start..self.text.len());
    }

    fn get(&self, node: u32) -> &str {
        &self.text[self.spans[node as usize].clone()]
    }
}

/// What the JSON form shows of each node besides its id and refs.
#[derive(Default)]
struct Facts {
    descriptions: Texts,
    versions: Vec<i32>,
    created: Vec<TimestampWithTimeZone>,
    updated: Vec<TimestampWithTimeZone>,
}

/// The owner's nodes, packed; `facts` also reads what the JSON form shows.
/// Rows are read as the executor produces them (see `stream`).
fn scan(owner: &str, facts: bool) -> SqlResult<(Graph, Texts, Option<Facts>)> {
    let statement = if facts {
        &SCAN_FOR_JSON
    } else {
        &SCAN_FOR_ROWS
    };
    let mut graph = Graph::default();
    let mut titles = Texts::default();
    let mut details = facts.then(Facts::default);
    for_each_row(statement, &[owner], &mut |row| {
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
        titles.push(row.text(4, "title")?);
        if let Some(details) = details.as_mut() {
            details.descriptions.push(row.text(5, "description")?);
            details.versions.push(row.int4(6, "version")?);
            details.created.push(created);
            details.updated.push(row.timestamptz(7, "updated_at")?);
        }
        Ok(())
    })?;
    Ok((graph, titles, details))
}

// graph_tree_rows returns its rows in materialize mode: the function is
// called once and puts every row into the result store, instead of being
// called once per row (what pgrx's table functions do), which for a
// million rows costs more than building the projection. pgrx has no
// materialize mode, so the function is declared by hand.
extension_sql!(
    r#"
CREATE FUNCTION agent_memory.graph_tree_rows(owner text)
RETURNS TABLE (node_id text, parent_id text, depth integer, path text[], title text)
STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
LANGUAGE c AS 'MODULE_PATHNAME', 'graph_tree_rows_materialized';
"#,
    name = "graph_tree_rows"
);

#[unsafe(no_mangle)]
#[doc(hidden)]
pub extern "C" fn pg_finfo_graph_tree_rows_materialized() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}

/// The C entry point of graph_tree_rows(owner).
///
/// # Safety
/// Called by PostgreSQL's function manager with a valid `fcinfo`.
#[unsafe(no_mangle)]
#[pg_guard]
pub unsafe extern "C-unwind" fn graph_tree_rows_materialized(
    fcinfo: pg_sys::FunctionCallInfo,
) -> pg_sys::Datum {
    // SAFETY: fcinfo comes from the function manager.
    if let Err(report) = unsafe { put_tree_rows(fcinfo) } {
        report.report(PgLogLevel::ERROR);
    }
    pg_sys::Datum::from(0)
}

/// Scan, build the projection and put its rows into the result store.
///
/// SAFETY: `fcinfo` is the call's, with a ReturnSetInfo allowing
/// materialize mode (InitMaterializedSRF checks it).
unsafe fn put_tree_rows(fcinfo: pg_sys::FunctionCallInfo) -> SqlResult<()> {
    let owner = unsafe { pgrx::fcinfo::pg_getarg::<&str>(fcinfo, 0) };
    let owner = checked_owner(owner)?;
    let (graph, titles, _) = scan(owner, false)?;
    let tree = Tree::build(&graph);
    tree.check_row_limit(MAX_TREE_ROWS).or_report()?;

    // Each node's id and title become a text datum once; rows point to them.
    // They are made in the tree's order (the order rows visit nodes), so
    // the rows read them front to back.
    let count = tree.node_count() as u32;
    let ids: Vec<pg_sys::Datum> = (0..count)
        .map(|node| text_datum(graph.id(tree.original(node))))
        .collect();
    let title_datums: Vec<pg_sys::Datum> = (0..count)
        .map(|node| text_datum(titles.get(tree.original(node))))
        .collect();
    let root = text_datum(ROOT_ID);
    drop(titles);

    let mut rows = tree.into_rows();
    let mut path: Vec<pg_sys::Datum> = Vec::new();
    let mut produced: u64 = 0;
    unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC);
        let result = (*fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
        let (store, desc) = ((*result).setResult, (*result).setDesc);
        while let Some(row) = rows.next_row() {
            path.clear();
            path.extend(row.path.iter().map(|&node| ids[node as usize]));
            let array = text_array(&path);
            let mut values = [
                ids[row.node as usize],
                row.parent.map_or(root, |p| ids[p as usize]),
                pg_sys::Datum::from(row.depth as i32),
                array,
                title_datums[row.node as usize],
            ];
            let mut nulls = [false; 5];
            pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            pg_sys::pfree(array.cast_mut_ptr());
            produced += 1;
            if produced % 16_384 == 0 {
                pgrx::check_for_interrupts!();
            }
        }
    }
    Ok(())
}

/// Append the JSON object of `node` as a child entry.
fn push_node(out: &mut String, graph: &Graph, titles: &Texts, facts: &Facts, node: u32) {
    let i = node as usize;
    out.push_str("{\"id\":");
    push_json_string(out, graph.id(node));
    out.push_str(",\"title\":");
    push_json_string(out, titles.get(node));
    out.push_str(",\"description\":");
    push_json_string(out, facts.descriptions.get(node));
    let _ = write!(
        out,
        ",\"version\":{},\"createdAt\":\"{}\",\"updatedAt\":\"{}\",\"refs\":[",
        facts.versions[i],
        iso_of(facts.created[i], 3),
        iso_of(facts.updated[i], 3)
    );
    for (k, r) in graph.refs(node).enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_json_string(out, r);
    }
    out.push_str("]}");
}

fn push_children(
    out: &mut String,
    kids: impl Iterator<Item = u32>,
    graph: &Graph,
    titles: &Texts,
    facts: &Facts,
) {
    out.push('[');
    for (k, child) in kids.enumerate() {
        if k > 0 {
            out.push(',');
        }
        push_node(out, graph, titles, facts, child);
    }
    out.push(']');
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_tree(owner: Option<&str>) -> SqlResult<JsonbText> {
    let owner = checked_owner(owner)?;
    let (graph, titles, facts) = scan(owner, true)?;
    let facts = required(facts, "facts")?;
    let tree = Tree::build(&graph);
    let mut out = String::with_capacity(64 + graph.len() * 200);
    out.push_str("{\"root\":");
    out.push_str(&root_json().to_string());
    out.push_str(",\"children\":{");
    push_json_string(&mut out, ROOT_ID);
    out.push(':');
    // Tree nodes are numbered in walk order; the graph has the data.
    let original = |nodes: &[u32]| {
        nodes
            .iter()
            .map(|&node| tree.original(node))
            .collect::<Vec<_>>()
    };
    push_children(
        &mut out,
        original(&tree.root_children).into_iter(),
        &graph,
        &titles,
        &facts,
    );
    for parent in 0..tree.node_count() as u32 {
        if !tree.has_children(parent) {
            continue;
        }
        out.push(',');
        push_json_string(&mut out, graph.id(tree.original(parent)));
        out.push(':');
        push_children(
            &mut out,
            original(tree.children(parent)).into_iter(),
            &graph,
            &titles,
            &facts,
        );
    }
    out.push_str("}}");
    Ok(JsonbText(out))
}
