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
use agent_memory_core::graph::{self, Content, ROOT_ID};
use agent_memory_core::markdown::{self, Document, Frontmatter, TimeValue};

use crate::graph::nodes::{
    checked_node, checked_owner, iso_of, node_limits, unknown_node, write_node,
};
use crate::pg::args::{INT4, TEXT, TEXT_ARRAY, required};
use crate::pg::datums::JsonB;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::plans::{Columns, Statement};

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
                document: Document {
                    frontmatter,
                    body: row.required::<String>(9, "body")?,
                },
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
    let mut files = Map::new();
    for file in documents(owner, None, true)? {
        files.insert(
            graph::file_name(&file.node_id, file.snapshot),
            Value::String(markdown::render(&file.document)),
        );
    }
    Ok(JsonB(Value::Object(files)))
}

/// Parse a document, naming `file` in an error.
fn parse(file: &str, text: &str) -> SqlResult<Document> {
    markdown::parse(text)
        .map_err(|e| Error::invalid(format!("{}: {}", quoted(file), e.message)))
        .or_report()
}

/// Explicit refs of a document: valid ids (an absent list is an empty one).
fn document_links(file: &str, frontmatter: &Frontmatter) -> SqlResult<Vec<String>> {
    graph::check_refs(frontmatter.refs.as_deref().unwrap_or_default())
        .map_err(|e| Error::invalid(format!("{}: {}", quoted(file), e.message)))
        .or_report()
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_from_markdown(
    owner: Option<&str>,
    node_id: Option<&str>,
    markdown: Option<&str>,
    change_description: default!(Option<&str>, "NULL"),
) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let node_id = checked_node(node_id)?;
    let text = markdown
        .ok_or_else(|| Error::null("markdown"))
        .or_report()?;
    let document = parse(node_id, text)?;
    let fm = &document.frontmatter;
    let links = document_links(node_id, fm)?;
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
    )
}

/// A timestamp of file `file` as text PostgreSQL reads exactly.
fn time_text(file: &str, value: &Option<TimeValue>) -> SqlResult<Option<String>> {
    value
        .as_ref()
        .map(|v| {
            graph::check_time(v)
                .map_err(|e| Error::invalid(format!("{}: {}", quoted(file), e.message)))
        })
        .transpose()
        .or_report()
}

/// A parsed file of the folder being imported.
struct ImportFile {
    name: String,
    node_id: String,
    document: Document,
    links: Vec<String>,
    /// createdAt, updatedAt and savedAt, checked.
    times: [Option<String>; 3],
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_import(owner: Option<&str>, files: Option<JsonB>) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let files = files.ok_or_else(|| Error::null("files")).or_report()?;
    let Value::Object(files) = files.0 else {
        return Err(Error::invalid(
            "files must be a JSON object of file name to content",
        ))
        .or_report();
    };
    // Read and check every file before writing anything.
    let mut nodes: Vec<ImportFile> = Vec::new();
    let mut versions: Vec<(i32, ImportFile)> = Vec::new();
    for (name, content) in &files {
        let Value::String(text) = content else {
            return Err(Error::invalid(format!(
                "file {} is not a JSON string",
                quoted(name)
            )))
            .or_report();
        };
        let file = graph::parse_file_name(name).or_report()?;
        let document = parse(name, text)?;
        let links = document_links(name, &document.frontmatter)?;
        let fm = &document.frontmatter;
        let times = [
            time_text(name, &fm.created_at)?,
            time_text(name, &fm.updated_at)?,
            time_text(name, &fm.saved_at)?,
        ];
        let parsed = ImportFile {
            name: name.clone(),
            node_id: file.node_id,
            document,
            links,
            times,
        };
        graph::check_node_size(
            &content_of(&parsed),
            parsed.document.frontmatter.change_description.as_deref(),
            node_limits(),
        )
        .map_err(|mut e| {
            e.message = format!("{}: {}", quoted(name), e.message);
            e
        })
        .or_report()?;
        match file.version {
            None => {
                if nodes.iter().any(|n| n.node_id == parsed.node_id) {
                    return Err(Error::invalid(format!(
                        "node {} appears twice",
                        quoted(&parsed.node_id)
                    )))
                    .or_report();
                }
                nodes.push(parsed)
            }
            Some(n) => {
                if versions
                    .iter()
                    .any(|(v, f)| *v == n && f.node_id == parsed.node_id)
                {
                    return Err(Error::invalid(format!(
                        "file {} appears twice",
                        quoted(name)
                    )))
                    .or_report();
                }
                versions.push((n, parsed))
            }
        }
    }
    for (n, file) in &versions {
        let fm = &file.document.frontmatter;
        let Some(node) = nodes.iter().find(|node| node.node_id == file.node_id) else {
            return Err(
                Error::invalid(format!("{} has no node file", quoted(&file.name)))
                    .with_hint(format!("add {}", graph::file_name(&file.node_id, None))),
            )
            .or_report();
        };
        let current = node.document.frontmatter.version.unwrap_or(1);
        if *n >= current {
            return Err(Error::invalid(format!(
                "{}: version {n} is not older than the node's version {current}",
                quoted(&file.name)
            )))
            .or_report();
        }
        if fm.version.is_some_and(|v| v != *n) {
            return Err(Error::invalid(format!(
                "{}: its frontmatter says version {}",
                quoted(&file.name),
                fm.version.unwrap_or_default()
            )))
            .or_report();
        }
        if fm
            .change_description
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
        {
            return Err(Error::invalid(format!(
                "{} has no changeDescription",
                quoted(&file.name)
            )))
            .or_report();
        }
    }
    for file in nodes.iter().chain(versions.iter().map(|(_, f)| f)) {
        if file
            .document
            .frontmatter
            .title
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(Error::invalid(format!(
                "{}: title must not be empty",
                quoted(&file.name)
            )))
            .or_report();
        }
    }

    Spi::connect_mut(|client| -> SqlResult<()> {
        for file in &nodes {
            let fm = &file.document.frontmatter;
            let content = content_of(file);
            let inserted = IMPORT_NODE.run(
                client,
                &[
                    owner.into(),
                    file.node_id.as_str().into(),
                    content.title.as_str().into(),
                    content.description.as_str().into(),
                    content.body.as_str().into(),
                    content.links.clone().into(),
                    content.refs().into(),
                    fm.version.unwrap_or(1).into(),
                    file.times[0].as_deref().into(),
                    file.times[1].as_deref().into(),
                ],
            )?;
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
        for (n, file) in &versions {
            let fm = &file.document.frontmatter;
            let content = content_of(file);
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
    Ok((nodes.len() + versions.len()) as i32)
}

/// What a file says of its node; an absent title is the node id.
fn content_of(file: &ImportFile) -> Content {
    let fm = &file.document.frontmatter;
    Content {
        title: fm.title.clone().unwrap_or_else(|| file.node_id.clone()),
        description: fm.description.clone().unwrap_or_default(),
        body: file.document.body.clone(),
        links: file.links.clone(),
    }
}

// The statements.

/// Every node of an owner ($2 NULL) or one node, and their snapshots
/// ($3: with snapshots), as the files describe them; the caller's tenant's
/// only. snapshot is NULL for the current state.
static DOCUMENTS: Statement = Statement {
    sql: "SELECT node_id::text, NULL::int4 AS snapshot, title, description, version, created_at,
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
    args: &[
        TEXT,
        TEXT,
        pgrx::PgOid::BuiltIn(pgrx::PgBuiltInOids::BOOLOID),
    ],
    writes: false,
};

/// A node as a folder holds it ($8, $9: timestamps as text, NULL for now()),
/// in the caller's tenant.
static IMPORT_NODE: Statement = Statement {
    sql: "INSERT INTO agent_memory.graph_nodes
              (owner, node_id, title, description, body, links, refs, version, created_at, updated_at,
               tenant)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                  coalesce($9::timestamptz, pg_catalog.now()),
                  coalesce($10::timestamptz, $9::timestamptz, pg_catalog.now()),
                  agent_memory.caller_tenant())
          ON CONFLICT DO NOTHING
          RETURNING 1",
    args: &[
        TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, INT4, TEXT, TEXT,
    ],
    writes: true,
};

static IMPORT_VERSION: Statement = Statement {
    sql: "INSERT INTO agent_memory.graph_node_versions
              (owner, node_id, version, title, description, body, links, refs,
               created_at, updated_at, change_description, saved_at, tenant)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                  coalesce($9::timestamptz, pg_catalog.now()),
                  coalesce($10::timestamptz, $9::timestamptz, pg_catalog.now()),
                  $11,
                  coalesce($12::timestamptz, $10::timestamptz, $9::timestamptz, pg_catalog.now()),
                  agent_memory.caller_tenant())",
    args: &[
        TEXT, TEXT, INT4, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, TEXT, TEXT, TEXT, TEXT,
    ],
    writes: true,
};
