//! Graph memory: markdown nodes per owner, linked by refs, with
//! immutable version snapshots and a virtual read-only root. Every
//! statement reads and writes only the caller's tenant's nodes: two tenants
//! may each have an owner of the same name.
//!
//! A write locks the node's row first (`FOR NO KEY UPDATE`), decides in the
//! core whether anything changed, and then stores the change in one
//! statement: a snapshot of the previous state and the new state together
//! when a change description came with it. Concurrent writers of one node
//! queue on the row lock, so none loses an update and each snapshot gets its
//! own version. The tree projection and the markdown format live in
//! `graph_tree` and `graph_markdown`.

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use agent_memory_core::graph::{self, Content, ROOT_ID, WriteKind};
use agent_memory_core::{Error, versions};

use crate::pg::args::{INT4, TEXT, TEXT_ARRAY, TIMESTAMPTZ, checked_list, required};
use crate::pg::c_functions::{TableCall, materialized_table_function};
use crate::pg::datums::{JsonB, JsonbBytes};
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::notify;
use crate::pg::plans::{self, Columns, Statement, first_value_of, iso_fields};
use crate::pg::settings;
use crate::pg::stream::StreamStatement;

// ---------------------------------------------------------------------------
// Arguments

/// The owner argument: present and not blank.
pub fn checked_owner(owner: Option<&str>) -> SqlResult<&str> {
    let owner = owner.ok_or_else(|| Error::null("owner")).or_report()?;
    graph::check_owner(owner).or_report()?;
    Ok(owner)
}

/// A node id argument naming a stored node (the root is refused with 42501).
pub fn checked_node(node_id: Option<&str>) -> SqlResult<&str> {
    let node_id = node_id.ok_or_else(|| Error::null("node_id")).or_report()?;
    graph::check_node_id(node_id).or_report()?;
    Ok(node_id)
}

/// The limits of one node, from the settings.
pub fn node_limits() -> graph::NodeLimits {
    graph::NodeLimits {
        bytes: settings::MAX_NODE_BYTES.get().max(0) as usize,
        refs: settings::MAX_NODE_REFS.get().max(0) as usize,
    }
}

/// Content within `agent_memory.max_node_bytes` and `max_node_refs`.
pub fn checked_size(content: &Content, change_description: Option<&str>) -> SqlResult<()> {
    graph::check_node_size(content, change_description, node_limits()).or_report()
}

pub fn unknown_node(owner: &str, node_id: &str) -> ErrorReport {
    crate::pg::error::report(Error::not_found(format!(
        "graph node {} of owner {} does not exist",
        agent_memory_core::error::quoted(node_id),
        agent_memory_core::error::quoted(owner)
    )))
}

// ---------------------------------------------------------------------------
// Writing

/// A locked node's current content, version and revision.
pub struct Locked {
    pub content: Content,
    pub version: i32,
    pub revision: i32,
    /// What a snapshot keeps beside the content (see SNAPSHOT_ON_CITUS).
    refs: Vec<String>,
    created_at: TimestampWithTimeZone,
    updated_at: TimestampWithTimeZone,
}

/// Lock `node_id` for writing and read it; None when it does not exist.
pub fn lock_node(owner: &str, node_id: &str) -> SqlResult<Option<Locked>> {
    Spi::connect_mut(|client| {
        let table = LOCK_NODE.run(client, &[owner.into(), node_id.into()])?;
        if table.is_empty() {
            return Ok(None);
        }
        let row = table.first();
        Ok(Some(Locked {
            content: Content {
                title: row.required::<String>(1, "title")?,
                description: row.required::<String>(2, "description")?,
                body: row.required::<String>(3, "body")?,
                links: row.required::<Vec<String>>(4, "links")?,
            },
            version: row.required::<i32>(5, "version")?,
            refs: row.required::<Vec<String>>(6, "refs")?,
            created_at: row.required::<TimestampWithTimeZone>(7, "created_at")?,
            updated_at: row.required::<TimestampWithTimeZone>(8, "updated_at")?,
            revision: row.required::<i32>(9, "revision")?,
        }))
    })
}

/// Lock `node_id` and check a write's precondition on its revision (0:
/// no such node); None when the node does not exist (and none was
/// expected).
pub fn lock_node_at(
    owner: &str, node_id: &str, expected_revision: Option<i32>,
) -> SqlResult<Option<Locked>> {
    let locked = lock_node(owner, node_id)?;
    let current = locked.as_ref().map_or(versions::ABSENT, |l| l.revision);
    if let Some(expected) = expected_revision
        && expected != current
    {
        let item = format!(
            "graph node {} of owner {}",
            agent_memory_core::error::quoted(node_id),
            agent_memory_core::error::quoted(owner)
        );
        return Err(versions::conflict_of(&item, "revision", expected, current)).or_report();
    }
    Ok(locked)
}

/// The first seven arguments of every statement that writes a node's
/// content: owner, node id, title, description, body, links and refs.
pub(crate) fn content_args<'a>(
    owner: &'a str, node_id: &'a str, content: &'a Content,
) -> Vec<DatumWithOid<'a>> {
    vec![
        owner.into(),
        node_id.into(),
        content.title.as_str().into(),
        content.description.as_str().into(),
        content.body.as_str().into(),
        content.links.clone().into(),
        content.refs().into(),
    ]
}

/// Store `new` over the locked node as `kind` says; returns the version now
/// current.
pub fn store_change(
    owner: &str, node_id: &str, locked: &Locked, new: &Content, kind: WriteKind,
    change_description: Option<&str>,
) -> SqlResult<i32> {
    let on_citus = plans::on_citus()?;
    let statement = match kind {
        WriteKind::Unchanged => return Ok(locked.version),
        WriteKind::InPlace => &UPDATE_IN_PLACE,
        WriteKind::Versioned if on_citus => &UPDATE_VERSION_ON_CITUS,
        WriteKind::Versioned => &UPDATE_VERSIONED,
    };
    checked_size(new, change_description.filter(|_| kind == WriteKind::Versioned))?;
    let mut args = content_args(owner, node_id, new);
    let description = change_description.unwrap_or_default().trim();
    if kind == WriteKind::Versioned && on_citus {
        let old = &locked.content;
        Spi::connect_mut(|client| {
            SNAPSHOT_ON_CITUS
                .run(
                    client,
                    &[
                        owner.into(),
                        node_id.into(),
                        locked.version.into(),
                        old.title.as_str().into(),
                        old.description.as_str().into(),
                        old.body.as_str().into(),
                        old.links.clone().into(),
                        locked.refs.clone().into(),
                        locked.created_at.into(),
                        locked.updated_at.into(),
                        description.into(),
                    ],
                )
                .map(drop)
        })?;
    } else if kind == WriteKind::Versioned {
        args.push(description.into());
    }
    let version = required(first_value_of::<i32>(statement, &args)?, "version")?;
    notify::queue_graph_change(owner)?;
    Ok(version)
}

/// A new node; returns its id.
pub fn create_node(
    owner: &str, node_id: Option<&str>, content: &Content, parents: &[String],
) -> SqlResult<String> {
    checked_size(content, None)?;
    let refs = content.refs();
    let insert = |id: &str| -> SqlResult<bool> {
        let inserted = first_value_of::<i32>(
            &INSERT_NODE,
            &[
                owner.into(),
                id.into(),
                content.title.as_str().into(),
                content.description.as_str().into(),
                content.body.as_str().into(),
                refs.clone().into(),
            ],
        )?;
        Ok(inserted.is_some())
    };
    let id = match node_id {
        Some(id) => {
            if !insert(id)? {
                return Err(Error::conflict(format!(
                    "graph node {} of owner {} already exists",
                    agent_memory_core::error::quoted(id),
                    agent_memory_core::error::quoted(owner)
                )))
                .or_report();
            }
            id.to_owned()
        }
        None => loop {
            // 119 random bits: a repeat is a near impossibility, but a
            // taken id is simply drawn again.
            let id = graph::generate_id(strong_random);
            if insert(&id)? {
                break id;
            }
        },
    };
    link_parents(owner, &id, parents)?;
    notify::queue_graph_change(owner)?;
    Ok(id)
}

/// Add `child` to the refs of every parent; each must exist. The parents
/// are locked in id order, whatever order the call gave: two creations
/// under the same parents never wait for each other in a circle.
fn link_parents(owner: &str, child: &str, parents: &[String]) -> SqlResult<()> {
    if parents.is_empty() {
        return Ok(());
    }
    let mut in_order = parents.to_vec();
    in_order.sort_unstable();
    in_order.dedup();
    let max_refs = node_limits().refs;
    let linked = Spi::connect_mut(|client| -> SqlResult<usize> {
        let link_parents = if plans::on_citus()? { &LINK_PARENTS_ON_CITUS } else { &LINK_PARENTS };
        let table =
            link_parents.run(client, &[owner.into(), child.into(), in_order.clone().into()])?;
        let linked = table.len();
        for row in table {
            let refs = row.required::<i32>(2, "refs")?;
            if refs as usize > max_refs {
                let parent = row.required::<String>(1, "node_id")?;
                return Err(Error::limit(format!(
                    "parent node {} would have {refs} refs, over the limit of {max_refs} refs",
                    agent_memory_core::error::quoted(&parent)
                ))
                .with_hint("raise agent_memory.max_node_refs, or split the parent"))
                .or_report();
            }
        }
        Ok(linked)
    })?;
    if linked == in_order.len() {
        return Ok(());
    }
    // Some parent was not updated: it already lists the child, or it is
    // missing. Only the latter is an error (and undoes the whole call).
    let existing: std::collections::HashSet<String> =
        first_value_of::<Vec<String>>(&EXISTING, &[owner.into(), in_order.into()])?
            .unwrap_or_default()
            .into_iter()
            .collect();
    if let Some(missing) = parents.iter().find(|p| !existing.contains(*p)) {
        return Err(Error::not_found(format!(
            "parent node {} of owner {} does not exist",
            agent_memory_core::error::quoted(missing),
            agent_memory_core::error::quoted(owner)
        )))
        .or_report();
    }
    Ok(())
}

/// Fill `buffer` from PostgreSQL's cryptographically strong random source.
fn strong_random(buffer: &mut [u8]) {
    // SAFETY: the pointer and length describe `buffer`, which is writable.
    let ok = unsafe { pg_sys::pg_strong_random(buffer.as_mut_ptr().cast(), buffer.len()) };
    if !ok {
        crate::pg::error::report(Error::internal("could not generate random bytes for a node id"))
            .report(PgLogLevel::ERROR);
    }
}

// ---------------------------------------------------------------------------
// SQL functions

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_create(
    owner: Option<&str>, title: Option<&str>, description: Option<&str>, body: Option<&str>,
    parents: Option<Vec<Option<String>>>, node_id: default!(Option<&str>, "NULL"),
) -> SqlResult<String> {
    let owner = checked_owner(owner)?;
    let node_id = match node_id {
        Some(id) => Some(checked_node(Some(id))?),
        None => None,
    };
    let title = title.ok_or_else(|| Error::null("title")).or_report()?;
    graph::check_title(title).or_report()?;
    let body = body.unwrap_or_default();
    let parents = parents.ok_or_else(|| Error::null("parents")).or_report()?;
    let parents = graph::check_parents(&checked_list("parents", parents)?, node_id).or_report()?;
    let content = Content {
        title: title.to_owned(),
        description: description.unwrap_or_default().to_owned(),
        body: body.to_owned(),
        links: Vec::new(),
    };
    create_node(owner, node_id, &content, &parents)
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_read(owner: Option<&str>, node_id: Option<&str>) -> SqlResult<JsonbBytes> {
    let owner = checked_owner(owner)?;
    if node_id == Some(ROOT_ID) {
        return Ok(JsonbBytes::from_value(graph::root_json()));
    }
    // A stored node is returned as the statement built it: never decoded.
    let node_id = checked_node(node_id)?;
    first_value_of::<JsonbBytes>(&READ_NODE, &[owner.into(), node_id.into()])?
        .ok_or_else(|| unknown_node(owner, node_id))
}

/// A node as `graph_read` shows it (the root's prompt for `__root__`)
/// without its revision, as a working-memory entry's node_context holds
/// it; P0002 when the owner has no such node.
pub fn read_node_json(owner: &str, node_id: Option<&str>) -> SqlResult<serde_json::Value> {
    if node_id == Some(ROOT_ID) {
        return Ok(graph::root_json());
    }
    let node_id = checked_node(node_id)?;
    let mut node = first_value_of::<JsonB>(&READ_NODE, &[owner.into(), node_id.into()])?
        .map(|json| json.0)
        .ok_or_else(|| unknown_node(owner, node_id))?;
    if let Some(fields) = node.as_object_mut() {
        fields.remove("revision");
    }
    Ok(node)
}

/// Write a node; NULL title, description, body or refs keep the current one.
/// With `expected_revision`, only a node at that revision.
#[allow(clippy::too_many_arguments)]
pub fn write_node(
    owner: &str, node_id: &str, title: Option<&str>, description: Option<&str>, body: Option<&str>,
    refs: Option<Vec<String>>, change_description: Option<&str>, expected_revision: Option<i32>,
) -> SqlResult<i32> {
    if let Some(title) = title {
        graph::check_title(title).or_report()?;
    }
    let links = match refs {
        Some(refs) => Some(graph::check_refs(&refs).or_report()?),
        None => None,
    };
    let locked = lock_node_at(owner, node_id, expected_revision)?
        .ok_or_else(|| unknown_node(owner, node_id))?;
    let current = &locked.content;
    let new = Content {
        title: title.map_or_else(|| current.title.clone(), str::to_owned),
        description: description.map_or_else(|| current.description.clone(), str::to_owned),
        body: body.map_or_else(|| current.body.clone(), str::to_owned),
        links: links.unwrap_or_else(|| current.links.clone()),
    };
    let kind = graph::write_kind(current, &new, change_description);
    store_change(owner, node_id, &locked, &new, kind, change_description)
}

// The arguments are the SQL function's.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_write(
    owner: Option<&str>, node_id: Option<&str>, title: Option<&str>, description: Option<&str>,
    body: Option<&str>, refs: default!(Option<Vec<Option<String>>>, "NULL"),
    change_description: default!(Option<&str>, "NULL"),
    expected_revision: default!(Option<i32>, "NULL"),
) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let node_id = checked_node(node_id)?;
    let expected =
        versions::checked_expected("expected_revision", expected_revision).or_report()?;
    let refs = match refs {
        Some(refs) => Some(checked_list("refs", refs)?),
        None => None,
    };
    write_node(owner, node_id, title, description, body, refs, change_description, expected)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_append(
    owner: Option<&str>, node_id: Option<&str>, content: Option<&str>,
    expected_revision: default!(Option<i32>, "NULL"),
) -> SqlResult<i32> {
    let owner = checked_owner(owner)?;
    let node_id = checked_node(node_id)?;
    let addition = content.ok_or_else(|| Error::null("content")).or_report()?;
    let expected =
        versions::checked_expected("expected_revision", expected_revision).or_report()?;
    let locked =
        lock_node_at(owner, node_id, expected)?.ok_or_else(|| unknown_node(owner, node_id))?;
    let body = graph::appended_body(&locked.content.body, addition);
    let new = Content { body, ..locked.content.clone() };
    let kind = graph::write_kind(&locked.content, &new, None);
    store_change(owner, node_id, &locked, &new, kind, None)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_delete(
    owner: Option<&str>, node_id: Option<&str>, expected_revision: default!(Option<i32>, "NULL"),
) -> SqlResult<bool> {
    let owner = checked_owner(owner)?;
    let node_id = checked_node(node_id)?;
    let expected =
        versions::checked_expected("expected_revision", expected_revision).or_report()?;
    // Lock first: a snapshot a concurrent write commits meanwhile is then
    // visible to the delete, and goes with the node.
    if lock_node_at(owner, node_id, expected)?.is_none() {
        return Ok(false);
    }
    let deleted = first_value_of::<i32>(&DELETE_NODE, &[owner.into(), node_id.into()])?.is_some();
    if deleted {
        notify::queue_graph_change(owner)?;
    }
    Ok(deleted)
}

// graph_nodes and graph_versions return their rows in materialize mode,
// each put into the result store as it is read: a call holds one node or
// version at a time, however many the owner keeps (pgrx's table functions
// collect every row first). The C symbols keep the names earlier versions
// declared, so their catalogs find them.
materialized_table_function! { "graph_nodes", graph_nodes_wrapper, put_node_rows, r#"
CREATE FUNCTION agent_memory.graph_nodes(owner text)
RETURNS TABLE (node_id text, title text, description text, version integer, updated_at timestamptz)
LANGUAGE c STABLE PARALLEL SAFE SET search_path TO pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'graph_nodes_wrapper';
"# }

/// The owner's nodes (never versions), by id, into the result store.
fn put_node_rows(call: &TableCall) -> SqlResult<()> {
    let owner = checked_owner(call.text(0)?)?;
    call.put_rows(&LIST_NODES, &[Some(owner)])?;
    Ok(())
}

materialized_table_function! { "graph_versions", graph_versions_wrapper, put_version_rows, r#"
CREATE FUNCTION agent_memory.graph_versions(owner text, node_id text)
RETURNS TABLE (version integer, change_description text, created_at timestamptz)
LANGUAGE c STABLE PARALLEL SAFE SET search_path TO pg_catalog, pg_temp
AS 'MODULE_PATHNAME', 'graph_versions_wrapper';
"# }

/// A node's saved versions, oldest first, into the result store; an
/// unknown node is an error.
fn put_version_rows(call: &TableCall) -> SqlResult<()> {
    let owner = checked_owner(call.text(0)?)?;
    let node_id = call.text(1)?;
    // The virtual root is never written, so it has no saved versions.
    let root = node_id == Some(ROOT_ID);
    let node_id = if root { ROOT_ID } else { checked_node(node_id)? };
    let rows = call.put_rows(&LIST_VERSIONS, &[Some(owner), Some(node_id)])?;
    if rows == 0
        && !root
        && first_value_of::<i32>(&CURRENT_VERSION, &[owner.into(), node_id.into()])?.is_none()
    {
        return Err(unknown_node(owner, node_id));
    }
    Ok(())
}

#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, pg_temp)]
fn graph_version(
    owner: Option<&str>, node_id: Option<&str>, version: Option<i32>,
) -> SqlResult<JsonbBytes> {
    let owner = checked_owner(owner)?;
    if node_id == Some(ROOT_ID) {
        return Err(Error::not_found("the root node has no saved versions")).or_report();
    }
    let node_id = checked_node(node_id)?;
    let version = version.ok_or_else(|| Error::null("version")).or_report()?;
    if let Some(json) = first_value_of::<JsonbBytes>(
        &READ_VERSION,
        &[owner.into(), node_id.into(), version.into()],
    )? {
        return Ok(json);
    }
    let current = first_value_of::<i32>(&CURRENT_VERSION, &[owner.into(), node_id.into()])?
        .ok_or_else(|| unknown_node(owner, node_id))?;
    let mut error = Error::not_found(format!(
        "graph node {} has no saved version {version}",
        agent_memory_core::error::quoted(node_id)
    ));
    if version == current {
        error = error.with_hint(format!("version {current} is the current one: use graph_read"));
    }
    Err(error).or_report()
}

// The statements.

/// A new node ($1 owner, $2 id, $3 title, $4 description, $5 body, $6 refs)
/// of the caller's tenant; no row: the id is taken.
static INSERT_NODE: Statement = Statement::read_write(
    "INSERT INTO agent_memory.graph_nodes
         (owner, node_id, title, description, body, refs, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, agent_memory.caller_tenant())
     ON CONFLICT DO NOTHING
     RETURNING 1",
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY],
);

/// The update of parent rows `p`, chosen by `$parents` (a FROM and a
/// WHERE), that do not list child $2 yet (see LINK_PARENTS).
macro_rules! link_parents {
    ($parents:literal) => {
        concat!(
            "UPDATE agent_memory.graph_nodes p
             SET links = p.links || $2::text,
                 refs = p.links || $2::text
                        || pg_catalog.array_remove(p.refs[pg_catalog.cardinality(p.links) + 1:], $2::text),
                 updated_at = pg_catalog.now(), revision = p.revision + 1 ",
            $parents,
            " AND NOT ($2 = ANY (p.links))
             RETURNING p.node_id, pg_catalog.cardinality(p.refs)"
        )
    };
}

/// Add child $2 to the explicit refs of parents $3 of owner $1 that do not
/// list it yet. refs stay "explicit refs, then body links": the child goes
/// right after the explicit ones and leaves the body-link part.
///
/// Keys reach the table as a fenced list (`OFFSET 0`) joined on every key
/// column: the only way in is one primary-key probe per parent. Written
/// as `node_id = ANY ($3)`, an owner the statistics think tiny got a plan
/// reading all of the owner's nodes and filtering them.
static LINK_PARENTS: Statement = Statement::read_write(
    link_parents!(
        "FROM (SELECT $1::text AS owner, parent, agent_memory.caller_tenant() AS tenant
               FROM pg_catalog.unnest($3::text[]) AS parent OFFSET 0) k
         WHERE p.owner = k.owner AND p.node_id = k.parent AND p.tenant = k.tenant"
    ),
    &[TEXT, TEXT, TEXT_ARRAY],
);

/// LINK_PARENTS on Citus, filtered by owner $1 itself: inside a function
/// delegated with force_delegation, Citus refuses a statement whose key
/// comes from a join.
static LINK_PARENTS_ON_CITUS: Statement = Statement::read_write(
    link_parents!(
        "WHERE p.owner = $1 AND p.node_id = ANY ($3) AND p.tenant = agent_memory.caller_tenant()"
    ),
    LINK_PARENTS.args,
);

/// Which of ids $2 exist for owner $1 (a probe per id, as LINK_PARENTS).
static EXISTING: Statement = Statement::read_write(
    "SELECT pg_catalog.array_agg(n.node_id::text)
     FROM (SELECT $1::text AS owner, id, agent_memory.caller_tenant() AS tenant
           FROM pg_catalog.unnest($2::text[]) AS id OFFSET 0) k
     JOIN agent_memory.graph_nodes n
       ON n.owner = k.owner AND n.node_id = k.id AND n.tenant = k.tenant",
    &[TEXT, TEXT_ARRAY],
);

/// Lock a node for writing and read what a write compares.
static LOCK_NODE: Statement = Statement::read_write(
    "SELECT title, description, body, links, version, refs, created_at, updated_at, revision
     FROM agent_memory.graph_nodes
     WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()
     FOR NO KEY UPDATE",
    &[TEXT, TEXT],
);

/// `UPDATE` node $2 of owner $1 to title $3, description $4, body $5,
/// links $6 and refs $7, and `$version` (the next version, or nothing),
/// returning its version.
macro_rules! update_node {
    ($version:literal) => {
        concat!(
            "UPDATE agent_memory.graph_nodes
             SET title = $3, description = $4, body = $5, links = $6, refs = $7, ",
            $version,
            "updated_at = pg_catalog.now(), revision = revision + 1
             WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()
             RETURNING version"
        )
    };
}

/// A change without a change description, in place.
static UPDATE_IN_PLACE: Statement = Statement::read_write(
    update_node!(""),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY],
);

/// A change with a change description ($8): the locked row's current state
/// becomes a snapshot, and the node takes the new state and the next
/// version. Both parts read the same (post-lock) snapshot of the row.
static UPDATE_VERSIONED: Statement = Statement::read_write(
    concat!(
        "WITH snapshot AS (
           INSERT INTO agent_memory.graph_node_versions
               (owner, node_id, version, title, description, body, links, refs,
                created_at, updated_at, change_description, tenant)
           SELECT owner, node_id, version, title, description, body, links, refs,
                  created_at, updated_at, $8, tenant
           FROM agent_memory.graph_nodes
           WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()) ",
        update_node!("version = version + 1, ")
    ),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, TEXT],
);

/// UPDATE_VERSIONED on Citus, in two statements: inside a function
/// delegated with force_delegation, Citus refuses an INSERT … SELECT. The
/// locked row's state, as LOCK_NODE read it, becomes a snapshot ($3
/// version, $4 to $10 its columns, $11 the change description)...
static SNAPSHOT_ON_CITUS: Statement = Statement::read_write(
    "INSERT INTO agent_memory.graph_node_versions
         (owner, node_id, version, title, description, body, links, refs,
          created_at, updated_at, change_description, tenant)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, agent_memory.caller_tenant())",
    &[TEXT, TEXT, INT4, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY, TIMESTAMPTZ, TIMESTAMPTZ, TEXT],
);

/// ... and the node takes the new state and the next version.
static UPDATE_VERSION_ON_CITUS: Statement = Statement::read_write(
    update_node!("version = version + 1, "),
    &[TEXT, TEXT, TEXT, TEXT, TEXT, TEXT_ARRAY, TEXT_ARRAY],
);

/// Remove a node (locked first) and its snapshots.
static DELETE_NODE: Statement = Statement::read_write(
    "WITH snapshots AS (
       DELETE FROM agent_memory.graph_node_versions
       WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant())
     DELETE FROM agent_memory.graph_nodes
     WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()
     RETURNING 1",
    &[TEXT, TEXT],
);

// Node $2 of owner $1 from table $table as JSON (graph_read's shape), with
// the keys $extra and the condition $filter; refs that name no node of
// the owner (in the row's tenant) are listed again as unresolved, in order:
// one primary-key probe per ref (OFFSET 0 keeps the planner from turning
// the NOT EXISTS into a join that may read all of the owner's nodes).
// Every table is filtered by $1, the owner, so that Citus sends the
// statement whole to the owner's node.
macro_rules! node_read {
    ($table:literal, $extra:literal, $filter:literal) => {
        concat!(
            "SELECT pg_catalog.jsonb_build_object(
               'id', n.node_id, 'title', n.title, 'description', n.description,
               'version', n.version",
            iso_fields!("createdAt": "n.created_at", "updatedAt": "n.updated_at"),
            ", 'refs', pg_catalog.to_jsonb(n.refs),
               'unresolvedRefs', pg_catalog.to_jsonb(ARRAY(
                  SELECT u.r FROM pg_catalog.unnest(n.refs) WITH ORDINALITY AS u(r, i)
                  WHERE NOT EXISTS (SELECT FROM agent_memory.graph_nodes g
                                    WHERE g.owner = $1 AND g.node_id = u.r
                                      AND g.tenant = n.tenant OFFSET 0)
                  ORDER BY u.i)),
               'body', n.body, ",
            $extra,
            ") FROM agent_memory.",
            $table,
            " n WHERE n.owner = $1 AND n.node_id = $2 AND n.tenant = agent_memory.caller_tenant()",
            $filter
        )
    };
}

/// A node as graph_read shows it: the node's keys and its revision.
static READ_NODE: Statement =
    Statement::read_only(node_read!("graph_nodes", "'revision', n.revision", ""), &[TEXT, TEXT]);

/// Version $3 of a node: the node's keys and the version's change description.
static READ_VERSION: Statement = Statement::read_only(
    node_read!(
        "graph_node_versions",
        "'changeDescription', n.change_description",
        " AND n.version = $3"
    ),
    &[TEXT, TEXT, INT4],
);

static CURRENT_VERSION: Statement = Statement::read_only(
    "SELECT version FROM agent_memory.graph_nodes
     WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()",
    &[TEXT, TEXT],
);

static LIST_NODES: StreamStatement = StreamStatement {
    sql: "SELECT node_id::text, title, description, version, updated_at
          FROM agent_memory.graph_nodes
          WHERE owner = $1 AND tenant = agent_memory.caller_tenant()
          ORDER BY node_id",
    params: 1,
    columns: &[
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::TEXTOID,
        pg_sys::INT4OID,
        pg_sys::TIMESTAMPTZOID,
    ],
};

static LIST_VERSIONS: StreamStatement = StreamStatement {
    sql: "SELECT version, change_description, saved_at
          FROM agent_memory.graph_node_versions
          WHERE owner = $1 AND node_id = $2 AND tenant = agent_memory.caller_tenant()
          ORDER BY version",
    params: 2,
    columns: &[pg_sys::INT4OID, pg_sys::TEXTOID, pg_sys::TIMESTAMPTZOID],
};
