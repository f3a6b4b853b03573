//! Working memory hydrated from graph memory: `wm_init` builds
//! an entry from a project's graph (the project id is the graph's owner),
//! `set_active_node` moves a session's focus and initialises or clears the
//! node entries, `wm_refresh_structure` rewrites the structure index of
//! every entry tied to a project after the graph changed.

use pgrx::prelude::*;
use serde_json::{Value, json};

use agent_memory_core::Error;
use agent_memory_core::graph;
use agent_memory_core::working_memory::{self as wm, Part};

use crate::graph::nodes::read_node_json;
use crate::pg::args::{INT4, TEXT};
use crate::pg::datums::JsonbBytes;
use crate::pg::error::{OrReport, SqlResult};
use crate::pg::notify;
use crate::pg::plans::{Columns, Rows, Statement, first_value_of, iso, on_citus};
use crate::pg::settings;
use crate::sessions::{
    LockMode, active, callers_active_session, idle_timeout_minutes, lock_session,
    lock_session_and_parts, session_gone, session_lock_class,
};
use crate::working_memory::compose::snapshot_after_writes;
use crate::working_memory::parts::{checked_session_node, read_part, strip_keys, write_part};

/// The session's project, as set for the session; P0002 when the session
/// is missing or expired.
fn session_project(session_id: &str) -> SqlResult<Option<String>> {
    Spi::connect_mut(|client| {
        let table =
            SESSION_PROJECT.run(client, &[session_id.into(), idle_timeout_minutes().into()])?;
        if table.is_empty() {
            return Err(session_gone(session_id)).or_report();
        }
        table.first().get::<String>(1).or_report()
    })
}

fn set_session(
    session_id: &str, project_id: Option<&str>, active_node: Option<Option<&str>>,
) -> SqlResult<()> {
    first_value_of::<i32>(
        &SET_SESSION,
        &[
            session_id.into(),
            project_id.into(),
            active_node.flatten().into(),
            i32::from(active_node.is_some()).into(),
        ],
    )?;
    Ok(())
}

/// Write a part if it differs from what is stored.
fn write(session_id: &str, node: &str, part: Part, value: Value) -> SqlResult<()> {
    let value = wm::sanitise(part, value, &strip_keys()).or_report()?;
    write_part(session_id, node, part, pgrx::JsonB(value))?;
    Ok(())
}

/// Set `key` of a part's value, an object (as every stored part that
/// takes keys is: sanitise refuses others); any other value is replaced.
fn set_key(value: &mut Value, key: &str, field: Value) {
    match value {
        Value::Object(fields) => {
            fields.insert(key.to_owned(), field);
        }
        other => *other = json!({ key: field }),
    }
}

/// Build the entry (session, node) from project's graph; the caller holds
/// the session's write lock and has checked the session is active.
fn init_entry(session_id: &str, node: &str, project: &str) -> SqlResult<()> {
    let node_context = if node.is_empty() {
        None
    } else {
        Some(wm::node_context(read_node_json(project, Some(node))?))
    };
    // Counted before anything is written.
    let index = first_value_of::<pgrx::JsonB>(
        &STRUCTURE_INDEX,
        &[project.into(), settings::max_result_bytes_arg().into()],
    )?
    .ok_or_else(structure_too_large)?
    .0;
    set_session(session_id, Some(project), None)?;
    if node.is_empty() {
        // The global entry keeps the active node set_active_node recorded.
        let mut session = read_part(session_id, "", Part::Session)?.unwrap_or_else(|| json!({}));
        set_key(&mut session, "project_id", json!(project));
        write(session_id, "", Part::Session, session)?;
    } else {
        let session = json!({ "project_id": project, "active_node_id": node });
        write(session_id, node, Part::Session, session)?;
        // Where the global entry's session part names another project, that
        // would stay the session's project (see SESSION_PROJECT), and the
        // global structure its graph: both follow the project recorded.
        if let Some(mut global) = read_part(session_id, "", Part::Session)?
            && global.get("project_id").is_some_and(|named| named.as_str() != Some(project))
        {
            set_key(&mut global, "project_id", json!(project));
            write(session_id, "", Part::Session, global)?;
            if let Some(mut structure) = read_part(session_id, "", Part::ProjectStructure)? {
                set_key(&mut structure, "project_graph", index.clone());
                write(session_id, "", Part::ProjectStructure, structure)?;
            }
        }
    }
    // The index replaces the project graph; the elements graph is kept.
    let mut structure = read_part(session_id, node, Part::ProjectStructure)?
        .unwrap_or_else(|| Part::ProjectStructure.empty());
    set_key(&mut structure, "project_graph", index);
    write(session_id, node, Part::ProjectStructure, structure)?;
    if let Some(context) = node_context {
        write(session_id, node, Part::NodeContext, context)?;
    }
    if let Some(history) =
        first_value_of::<pgrx::JsonB>(&LATEST_WORKING_HISTORY, &[session_id.into()])?
    {
        write(session_id, node, Part::WorkingHistory, history.0)?;
    }
    Ok(())
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_init(
    session_id: Option<&str>, node_id: Option<&str>, project_id: default!(Option<&str>, "NULL"),
) -> SqlResult<JsonbBytes> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    if let Some(project) = project_id {
        graph::check_owner(project).or_report()?;
    }
    lock_session_and_parts(session_id)?;
    let project = match project_id {
        Some(project) => {
            session_project(session_id)?;
            project.to_owned()
        }
        None => session_project(session_id)?.ok_or_else(|| no_project(session_id))?,
    };
    hold_project(&project)?;
    init_entry(session_id, node, &project)?;
    snapshot_after_writes(session_id, node)
}

/// Advisory lock class of the project locks.
const PROJECT_LOCK_CLASS: i32 = 1634559342;

/// Hold the project's lock, shared, until the transaction ends: taken by
/// what builds an entry's structure index from the project's graph
/// (`wm_init`, `set_active_node`), after the session's write lock and
/// before the graph is read.
fn hold_project(project: &str) -> SqlResult<()> {
    crate::sessions::lock_name(PROJECT_LOCK_CLASS, project, LockMode::SharedUntilCommit)
}

/// The structure index of a project's graph would take more than
/// `agent_memory.max_result_bytes`.
fn structure_too_large() -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(
        Error::too_large_to_build(
            "the structure index of the project's graph takes",
            settings::max_result_bytes(),
        )
        .with_hint(
            "give the project's nodes fewer or shorter descriptions, or raise agent_memory.max_result_bytes",
        ),
    )
}

fn no_project(session_id: &str) -> pgrx::pg_sys::panic::ErrorReport {
    crate::pg::error::report(
        Error::invalid(format!(
            "session {} has no project",
            agent_memory_core::error::quoted(session_id)
        ))
        .with_hint("Name it: agent_memory.wm_init(session_id, node_id, project_id)."),
    )
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn set_active_node(session_id: Option<&str>, node_id: Option<&str>) -> SqlResult<JsonbBytes> {
    let (session_id, node) = checked_session_node(session_id, node_id)?;
    lock_session_and_parts(session_id)?;
    let project = session_project(session_id)?;
    let active = (!node.is_empty()).then_some(node);
    if let Some(node) = active {
        let project = project.ok_or_else(|| no_project(session_id))?;
        hold_project(&project)?;
        init_entry(session_id, node, &project)?;
    } else {
        crate::working_memory::parts::clear_node_entries(session_id)?;
    }
    set_session(session_id, None, Some(active))?;
    // The global entry follows the focus, so a composed read of it (and a
    // listener) sees the new active node.
    let mut global = read_part(session_id, "", Part::Session)?.unwrap_or_else(|| json!({}));
    set_key(&mut global, "active_node_id", active.map_or(Value::Null, |n| json!(n)));
    write(session_id, "", Part::Session, global)?;
    snapshot_after_writes(session_id, node)
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, pg_temp)]
fn wm_refresh_structure(project_id: Option<&str>) -> SqlResult<i32> {
    let project = project_id.ok_or_else(|| Error::null("project_id")).or_report()?;
    graph::check_owner(project).or_report()?;
    let args = || [project.into(), idle_timeout_minutes().into()];
    // Wait for every entry being tied to the project (its wm_init holds the
    // project's lock) to commit: it is then tied when the sessions are read,
    // and one tied later reads the graph as it is now. The lock is let go
    // at once, so the refresh never waits for a session while holding it.
    crate::sessions::lock_name(PROJECT_LOCK_CLASS, project, LockMode::WaitForHolders)?;
    if on_citus()? {
        // Each session's row too, on its shard (see lock_session): the
        // advisory locks hold on this node only.
        let tied = Spi::connect_mut(|client| {
            TIED_SESSIONS.run(client, &args())?.rows::<(String,)>(&["session_id"])
        })?;
        for (session_id,) in tied {
            lock_session(&session_id)?;
        }
    } else {
        first_value_of::<i64>(&LOCK_TIED, &args())?;
    }
    let limit = settings::max_result_bytes_arg();
    if first_value_of::<i64>(&TIED_STRUCTURE_BYTES, &args())?
        .is_some_and(|bytes| bytes > i64::from(limit))
    {
        return Err(structure_too_large());
    }
    Spi::connect_mut(|client| {
        let table = REFRESH_TIED
            .run(client, &[project.into(), idle_timeout_minutes().into(), limit.into()])?;
        let mut changed = 0;
        for row in table {
            let session = row.get::<&str>(1).or_report()?.unwrap_or_default();
            let node = row.get::<&str>(2).or_report()?.unwrap_or_default();
            let version = row.value::<i32>(3)?;
            notify::queue_change(session, node, Some(Part::ProjectStructure.name()), version)?;
            changed += 1;
        }
        Ok(changed)
    })
}

// The statements.

/// The structure index of owner $1's graph (in the caller's tenant):
/// every node without its body, oldest first, and an edge for each ref that
/// names a node of the graph (a dangling ref has nothing to point at).
macro_rules! structure_index {
    () => {
        concat!(
            "pg_catalog.jsonb_build_object(
               'nodes', coalesce((
                  SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                           'id', n.node_id, 'title', n.title, 'description', n.description,
                           'version', n.version, 'updatedAt', ",
            iso!("n.updated_at"),
            ") ORDER BY n.created_at, n.node_id)
                  FROM agent_memory.graph_nodes n
                  WHERE n.owner = $1 AND n.tenant = agent_memory.caller_tenant()), '[]'),
               'edges', coalesce((
                  SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('source', n.node_id, 'target', r.id)
                                              ORDER BY n.created_at, n.node_id, r.i)
                  FROM agent_memory.graph_nodes n
                  CROSS JOIN LATERAL pg_catalog.unnest(n.refs) WITH ORDINALITY AS r (id, i)
                  WHERE n.owner = $1 AND n.tenant = agent_memory.caller_tenant()
                    AND EXISTS (SELECT FROM agent_memory.graph_nodes t
                                WHERE t.owner = $1 AND t.node_id = r.id
                                  AND t.tenant = n.tenant)), '[]'))"
        )
    };
}

/// What the structure index of owner $1's graph takes at least: each
/// node's id, title and description (their lengths, read from the values'
/// headers) plus 128 bytes for the rest of it (its version and updatedAt,
/// the key names, the object's header and its entry in the array: 124 at
/// most), each edge's two ids plus 40, and 64 for the index's own object.
/// Counted before the index is built, so that a graph past
/// `agent_memory.max_result_bytes` is refused without being read whole.
macro_rules! structure_index_bytes {
    () => {
        "(SELECT 64
                 + (SELECT coalesce(sum(pg_catalog.octet_length(n.node_id)::int8
                                        + coalesce(pg_catalog.octet_length(n.title), 0)
                                        + coalesce(pg_catalog.octet_length(n.description), 0)
                                        + 128), 0)
                    FROM agent_memory.graph_nodes n
                    WHERE n.owner = $1 AND n.tenant = agent_memory.caller_tenant())
                 + (SELECT coalesce(sum(pg_catalog.octet_length(n.node_id)::int8
                                        + pg_catalog.octet_length(r.id) + 40), 0)
                    FROM agent_memory.graph_nodes n
                    CROSS JOIN LATERAL pg_catalog.unnest(n.refs) AS r (id)
                    WHERE n.owner = $1 AND n.tenant = agent_memory.caller_tenant()
                      AND EXISTS (SELECT FROM agent_memory.graph_nodes t
                                  WHERE t.owner = $1 AND t.node_id = r.id
                                    AND t.tenant = n.tenant)))::int8"
    };
}

/// The entries tied to project $1 (by their session part, else their
/// session's project) that hold a structure index of their own, among
/// active sessions ($2 idle minutes) of the caller's tenant.
macro_rules! tied_structures {
    () => {
        concat!(
            "SELECT p.session_id, p.node_key
             FROM agent_memory.wm_parts p JOIN agent_memory.sessions s USING (session_id, tenant)
             WHERE p.tenant = agent_memory.caller_tenant() AND p.part = 'project_structure' AND ",
            active!("s", "$2"),
            " AND coalesce(coalesce((SELECT sp.value FROM agent_memory.wm_parts sp
                                     WHERE sp.session_id = p.session_id AND sp.tenant = p.tenant
                                       AND sp.node_key = p.node_key
                                       AND sp.part = 'session' AND sp.value ? 'project_id'),
                                    (SELECT sp.value FROM agent_memory.wm_parts sp
                                     WHERE sp.session_id = p.session_id AND sp.tenant = p.tenant
                                       AND sp.node_key = ''
                                       AND sp.part = 'session' AND sp.value ? 'project_id'))
                           ->> 'project_id',
                           s.project_id) = $1"
        )
    };
}

/// The structure index of owner $1's graph, NULL when it would take more
/// than $2 bytes (`structure_index_bytes!`).
static STRUCTURE_INDEX: Statement = Statement::read_only(
    concat!(
        "SELECT CASE WHEN z.bytes <= $2 THEN ",
        structure_index!(),
        " END FROM (SELECT ",
        structure_index_bytes!(),
        " AS bytes) z"
    ),
    &[TEXT, INT4],
);

/// What the structure index of owner $1's graph would take, when an entry
/// tied to it ($2 idle minutes, as `tied_structures!`) holds one; no row
/// otherwise.
static TIED_STRUCTURE_BYTES: Statement = Statement::read_write(
    concat!("SELECT ", structure_index_bytes!(), " WHERE EXISTS (", tied_structures!(), ")"),
    &[TEXT, INT4],
);

/// The session's project ($1): the global entry's session part, else the
/// sessions row; and whether the session is active ($2 idle minutes).
static SESSION_PROJECT: Statement = Statement::read_write(
    concat!(
        "SELECT coalesce((SELECT p.value ->> 'project_id' FROM agent_memory.wm_parts p
                          WHERE p.session_id = s.session_id AND p.tenant = s.tenant
                            AND p.node_key = '' AND p.part = 'session'),
                         s.project_id)
         FROM agent_memory.sessions s
         WHERE ",
        callers_active_session!("$2")
    ),
    &[TEXT, INT4],
);

/// Record a session's project and focus ($1 session, $2 project or NULL to
/// keep, $3 active node, $4: whether to set the active node).
static SET_SESSION: Statement = Statement::read_write(
    "UPDATE agent_memory.sessions
     SET project_id = coalesce($2, project_id),
         active_node_id = CASE WHEN $4 = 1 THEN $3 ELSE active_node_id END,
         last_activity_at = greatest(last_activity_at, pg_catalog.now())
     WHERE session_id = $1 AND tenant = agent_memory.caller_tenant()
     RETURNING 1",
    &[TEXT, TEXT, TEXT, INT4],
);

/// The session's most recently written working history, in any entry.
static LATEST_WORKING_HISTORY: Statement = Statement::read_write(
    "SELECT p.value FROM agent_memory.wm_parts p
     WHERE p.session_id = $1 AND p.tenant = agent_memory.caller_tenant()
       AND p.part = 'working_history'
     ORDER BY p.updated_at DESC, p.node_key LIMIT 1",
    &[TEXT],
);

/// Take the write lock of every session with an entry tied to project $1,
/// in session order, so a concurrent patch queues behind the refresh.
static LOCK_TIED: Statement = Statement::read_write(
    concat!(
        "SELECT pg_catalog.count(pg_catalog.pg_advisory_xact_lock(",
        session_lock_class!(),
        ", pg_catalog.hashtext(CASE agent_memory.caller_tenant() WHEN '' THEN l.session_id
                                 ELSE agent_memory.caller_tenant() || pg_catalog.chr(1) || l.session_id END)))
         FROM (SELECT DISTINCT t.session_id FROM (",
        tied_structures!(),
        ") t ORDER BY t.session_id) l"
    ),
    &[TEXT, INT4],
);

/// The sessions with an entry tied to project $1, in session order.
static TIED_SESSIONS: Statement = Statement::read_write(
    concat!("SELECT DISTINCT t.session_id FROM (", tied_structures!(), ") t ORDER BY t.session_id"),
    &[TEXT, INT4],
);

/// Replace the project graph of every tied entry whose index differs,
/// with versions as any part write; a row per entry changed. None when the
/// index would take more than $3 bytes (checked before, with
/// TIED_STRUCTURE_BYTES).
static REFRESH_TIED: Statement = Statement::read_write(
    concat!(
        "WITH fresh AS (SELECT CASE WHEN z.bytes <= $3 THEN ",
        structure_index!(),
        " END AS graph FROM (SELECT ",
        structure_index_bytes!(),
        " AS bytes) z)
         UPDATE agent_memory.wm_parts p
         SET value = pg_catalog.jsonb_set(p.value, '{project_graph}', f.graph),
             version = p.version + 1, updated_at = pg_catalog.now()
         FROM fresh f, (",
        tied_structures!(),
        ") t
         WHERE p.session_id = t.session_id AND p.node_key = t.node_key AND p.part = 'project_structure'
           AND p.tenant = agent_memory.caller_tenant()
           AND f.graph IS NOT NULL AND p.value -> 'project_graph' IS DISTINCT FROM f.graph
         RETURNING p.session_id, p.node_key, p.version"
    ),
    &[TEXT, INT4, INT4],
);
