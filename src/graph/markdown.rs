//! Graph memory as markdown files, in their on-disk format: `<id>.md` is
//! a node (frontmatter `title`, `description`, `version`, `createdAt`,
//! `updatedAt`, and `refs` when it has explicit refs, then the body), and
//! `<id>.v<N>.md` its version N (the same plus `changeDescription` and
//! `savedAt`). Timestamps are written with microseconds, so an export
//! imported into an empty owner gives back exactly the same graph.

use pgrx::prelude::*;
use serde_json::{Map, Value};

use agent_memory_core::Error;
use agent_memory_core::error::quoted;
use agent_memory_core::graph::import;
use agent_memory_core::graph::markdown::{self, Document, Frontmatter, TimeValue};
use agent_memory_core::graph::{self, ROOT_ID};

use crate::graph::nodes::{
    checked_node, checked_owner, content_args, node_limits, unknown_node, write_node,
};
use crate::pg::args::{INT4, TEXT, TEXT_ARRAY, required};
use crate::pg::datums::{JsonB, iso_of};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement, first_value_of};
use crate::pg::settings;

/// One file of a graph folder, read from the database.
struct FileRow {
    node_id: String,
    snapshot: Option<i32>,
    document: Document,
}

fn stamp(timestamp: TimestampWithTimeZone) -> TimeValue {
    TimeValue::Text(iso_of(timestamp, 6))
}

/// The files of `node_id` (None: every node) of `owner`.
fn documents(owner: &str, node_id: Option<&str>, snapshots: bool) -> SqlResult<Vec<FileRow>> {
    Spi::connect(|client| {
        let table = DOCUMENTS.read(client, &[owner.into(), node_id.into(), snapshots.into()])?;
        let mut files = Vec::with_capacity(table.len());
        for row in table {
            let links = row.required::<Vec<String>>(8, "links")?;
            let frontmatter = Frontmatter {
                title: Some(row.required::<String>(3, "title")?),
                description: Some(row.required::<String>(4, "description")?),
                version: Some(row.required::<i32>(5, "version")?),
                created_at: Some(stamp(required(row.get(6).or_report()?, "created_at")?)),
                updated_at: Some(stamp(required(row.get(7).or_report()?, "updated_at")?)),
                refs: (!links.is_empty()).then_some(links),
                change_description: row.value::<String>(10)?,
                saved_at: row.value::<TimestampWithTimeZone>(11)?.map(stamp),
            };
            files.push(FileRow {
                node_id: row.required::<String>(1, "node_id")?,
                snapshot: row.value::<i32>(2)?,
                document: Document { frontmatter, body: row.required::<String>(9, "body")? },
            });
        }
        Ok(files)
    })
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_to_markdown(owner: Option<&str>, node_id: Option<&str>) -> SqlResult<String> {
    let owner = checked_owner(owner)?;
    if node_id == Some(ROOT_ID) {
        return Ok(markdown::render(&Document {
            frontmatter: Frontmatter {
                title: Some(graph::ROOT_TITLE.to_owned()),
                description: Some(graph::ROOT_DESCRIPTION.to_owned()),
                version: Some(1),
                ..Frontmatter::default()
            },
            body: graph::ROOT_BODY.to_owned(),
        }));
    }
    let node_id = checked_node(node_id)?;
    let file = documents(owner, Some(node_id), false)?
        .into_iter()
        .next()
        .ok_or_else(|| unknown_node(owner, node_id))?;
    Ok(markdown::render(&file.document))
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_export(owner: Option<&str>) -> SqlResult<JsonB> {
    let owner = checked_owner(owner)?;
    let max_bytes = settings::max_result_bytes();
    let too_large = || {
        Err(Error::too_large_to_build("the folder takes", max_bytes)
            .with_hint("read the nodes one by one with graph_to_markdown"))
        .or_report()
    };
    // What the rows take, before reading them; then what the files take as
    // they are written, since a frontmatter escapes control characters
    // (six bytes for one).
    let bytes = first_value_of::<i64>(&EXPORT_BYTES, &[owner.into()])?.unwrap_or(0);
    if usize::try_from(bytes).map_or(true, |bytes| bytes > max_bytes) {
        return too_large();
    }
    let mut files = Map::new();
    let mut written = 0usize;
    for file in documents(owner, None, true)? {
        let name = graph::file_name(&file.node_id, file.snapshot);
        let text = markdown::render(&file.document);
        written = written.saturating_add(name.len() + text.len());
        if written > max_bytes {
            return too_large();
        }
        files.insert(name, Value::String(text));
    }
    Ok(JsonB(Value::Object(files)))
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_from_markdown(
    owner: Option<&str>, node_id: Option<&str>, markdown: Option<&str>,
    change_description: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let node_id = checked_node(node_id)?;
    let text = markdown.ok_or_else(|| Error::null("markdown")).or_report()?;
    let document = import::parse_document(node_id, text).or_report()?;
    let fm = &document.frontmatter;
    let links = import::document_links(node_id, fm).or_report()?;
    // The document is the node: an absent description or refs list means
    // none; an absent title keeps the current one. version and the
    // timestamps belong to the database and are not taken from the text.
    // The node must exist (write_node says P0002 otherwise): a new node
    // needs a parent, which only graph_create and graph_import give.
    let description = fm.description.clone().unwrap_or_default();
    write_node(
        owner,
        node_id,
        fm.title.as_deref(),
        Some(&description),
        Some(&document.body),
        Some(links),
        change_description,
        None,
    )
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_import(owner: Option<&str>, files: Option<JsonB>) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let files = files.ok_or_else(|| Error::null("files")).or_report()?;
    // Every file is read and checked before anything is written.
    let import = import::check_import(&files.0, node_limits()).or_report()?;
    let (nodes, versions) = (&import.nodes, &import.versions);

    Spi::connect_mut(|client| -> SqlResult<()> {
        for file in nodes {
            let fm = &file.document.frontmatter;
            let content = file.content();
            let mut args = content_args(owner, &file.node_id, &content);
            args.extend([
                fm.version.unwrap_or(1).into(),
                file.times[0].as_deref().into(),
                file.times[1].as_deref().into(),
            ]);
            let inserted = IMPORT_NODE.run(client, &args)?;
            if inserted.is_empty() {
                return Err(Error::conflict(format!(
                    "graph node {} of owner {} already exists",
                    quoted(&file.node_id),
                    quoted(owner)
                ))
                .with_hint("import into an owner that does not have these nodes"))
                .or_report();
            }
        }
        for (n, file) in versions {
            let fm = &file.document.frontmatter;
            let content = file.content();
            IMPORT_VERSION.run(
                client,
                &[
                    owner.into(),
                    file.node_id.as_str().into(),
                    (*n).into(),
                    content.title.as_str().into(),
                    content.description.as_str().into(),
                    content.body.as_str().into(),
                    content.links.clone().into(),
                    content.refs().into(),
                    file.times[0].as_deref().into(),
                    file.times[1].as_deref().into(),
                    fm.change_description.as_deref().unwrap_or_default().into(),
                    file.times[2].as_deref().into(),
                ],
            )?;
        }
        Ok(())
    })?;
    if !nodes.is_empty() {
        crate::pg::notify::queue_graph_change(owner)?;
    }
    Ok(import.len() as i32)
}

// The statements.

/// Every node of an owner ($2 NULL) or one node, and their snapshots
/// ($3: with snapshots), as the files describe them; the caller's tenant's
/// only. snapshot is NULL for the current state.
static DOCUMENTS: Statement = Statement::read_only(
    "SELECT node_id::text, NULL::int4 AS snapshot, title, description, version, created_at,
            updated_at, links, body, NULL::text AS change_description,
            NULL::timestamptz AS saved_at
     FROM agent_memory.graph_nodes
     WHERE owner = $1 AND ($2::text IS NULL OR node_id = $2)
       AND tenant = agent_memory.caller_tenant()
     UNION ALL
     SELECT node_id::text, version, title, description, version, created_at,
            updated_at, links, body, change_description, saved_at
     FROM agent_memory.graph_node_versions
     WHERE $3 AND owner = $1 AND ($2::text IS NULL OR node_id = $2)
       AND tenant = agent_memory.caller_tenant()
     ORDER BY 1, 2 NULLS FIRST",
    &[TEXT, TEXT, pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::BOOLOID)],
);

/// What graph_export's folder of owner $1 takes at least: the bytes of
/// its files' text, read from the values' headers, and a frontmatter's
/// worth for each.
static EXPORT_BYTES: Statement = Statement::read_only(
    "SELECT ((SELECT coalesce(sum(pg_catalog.octet_length(n.title)::int8
                                 + pg_catalog.octet_length(n.description)
                                 + pg_catalog.octet_length(n.body)
                                 + pg_catalog.pg_column_size(n.links) + 256), 0)
             FROM agent_memory.graph_nodes n
             WHERE n.owner = $1 AND n.tenant = agent_memory.caller_tenant())
          + (SELECT coalesce(sum(pg_catalog.octet_length(v.title)::int8
                                 + pg_catalog.octet_length(v.description)
                                 + pg_catalog.octet_length(v.body)
                                 + pg_catalog.octet_length(v.change_description)
                                 + pg_catalog.pg_column_size(v.links) + 256), 0)
             FROM agent_memory.graph_node_versions v
             WHERE v.owner = $1 AND v.tenant = agent_memory.caller_tenant()))::int8",
    &[TEXT],
);

/// A node as a folder holds it ($8, $9: timestamps as text, NULL for now()),
/// in the caller's tenant.
static IMPORT_NODE: Statement = Statement::read_write(
    "INSERT INTO agent_memory.graph_nodes
         (owner, node_id, title, description, body, links, refs, version, created_at, updated_at,
          tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
             coalesce($9::timestamptz, pg_catalog.now()),
             coalesce($10::timestamptz, $9::timestamptz, pg_catalog.now()),
             agent_memory.caller_tenant())
     ON CONFLICT DO NOTHING
     RETURNING 1",
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, INT4, TEXT, TEXT],
);

static IMPORT_VERSION: Statement = Statement::read_write(
    "INSERT INTO agent_memory.graph_node_versions
         (owner, node_id, version, title, description, body, links, refs,
          created_at, updated_at, change_description, saved_at, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
             coalesce($9::timestamptz, pg_catalog.now()),
             coalesce($10::timestamptz, $9::timestamptz, pg_catalog.now()),
             $11,
             coalesce($12::timestamptz, $10::timestamptz, $9::timestamptz, pg_catalog.now()),
             agent_memory.caller_tenant())",
    &[TEXT, TEXT, INT4, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, TEXT, TEXT, TEXT, TEXT],
);
