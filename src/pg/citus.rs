//! Living beside Citus, which delegates a call of a distributed function
//! to the node that holds the shard of its first argument.
//!
//! When Citus is preloaded, a planner hook keeps three kinds of call from
//! being delegated; they run on the node they were sent to, whose
//! statements Citus routes one by one, as calls in a transaction block do:
//!
//! - a first argument that is or may fold to NULL: Citus 13.2 crashes the
//!   backend that delegates it (`function_call_delegation.c` hashes the
//!   value without testing it), and a crash restarts every connection of
//!   the server. Run here, the function refuses the NULL as it does on a
//!   single server;
//! - a call made while the session has changed an `agent_memory.*`
//!   setting (`SET`): a delegated call reads the settings of the worker,
//!   which never saw the `SET`. A tenant set for the session, a word
//!   budget or a size limit then holds as it does on a single server;
//! - a call within a subquery, a `WITH` query or a sublink, or beside
//!   another `FROM` item, or in the body of a SQL function the planner
//!   inlines: Citus decides on the query as the planner left it, delegates
//!   such a query too, and then crashes the backend deparsing it, whatever
//!   the key.
//!
//! The bare form `SELECT agent_memory.f(...)` reads no table, so it is
//! planned without Citus. A function in `FROM` (`SELECT * FROM
//! agent_memory.f(...)`) goes through Citus's planner, with a condition
//! added (`WHERE now() IS NOT NULL`), which Citus cannot fold away: it
//! delegates no query with one.
//!
//! The hook acts when a statement is planned: a plan kept and run again
//! after a later `SET` (a prepared statement without parameters, static
//! SQL in PL/pgSQL) stays as it was planned.
//!
//! Every other statement goes to Citus untouched, but for a query that
//! calls a SQL function of the database's own which the planner may
//! inline: it gets the condition too, since the function's body may call
//! agent_memory.

use std::ffi::{CStr, c_char, c_int};

use pgrx::list::PgList;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::pg::settings;

static mut PREVIOUS_PLANNER: pg_sys::planner_hook_type = None;

/// At library load, when preloading after Citus: take the planner hook.
pub fn init(preloading: bool) {
    if !preloading || !citus_preloaded() {
        return;
    }
    // SAFETY: hooks are set at load time, on the main thread.
    unsafe {
        PREVIOUS_PLANNER = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
    }
}

/// Whether `shared_preload_libraries` names citus.
fn citus_preloaded() -> bool {
    // SAFETY: reads a setting by its name; NULL when it is unknown.
    let value =
        unsafe { pg_sys::GetConfigOption(c"shared_preload_libraries".as_ptr(), true, false) };
    if value.is_null() {
        return false;
    }
    // SAFETY: a setting's value is a NUL-terminated string.
    let libraries = unsafe { CStr::from_ptr(value) }.to_string_lossy();
    libraries.split(',').any(|library| library.trim().trim_matches('"') == "citus")
}

#[pg_guard]
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query, query_string: *const c_char, cursor_options: c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: the planner's arguments, as PostgreSQL hands them to a hook.
    unsafe {
        if !must_run_here(parse, bound_params)
            && let Some(previous) = PREVIOUS_PLANNER
        {
            keep_calls_in_from_here(parse, bound_params);
            return previous(parse, query_string, cursor_options, bound_params);
        }
        pg_sys::standard_planner(parse, query_string, cursor_options, bound_params)
    }
}

/// Gives the query the condition `WHERE now() IS NOT NULL` when Citus
/// might delegate a call of `agent_memory.f(...)` that must run here.
/// Citus decides on the query as PostgreSQL's planner left it: subqueries
/// pulled up, SQL functions inlined, constant expressions folded. So the
/// hook keeps here:
///
/// - a query whose one `FROM` item is such a call with a key that may be
///   NULL (see [`key_may_be_null`]), or made after the session changed a
///   setting;
/// - a query with a call anywhere else: within a subquery, a `WITH` query
///   or a sublink, or beside another `FROM` item, or beside a `WITH`
///   query or a sublink. Citus 13.2 delegates such a query too, and then
///   crashes the backend deparsing it, whatever the key;
/// - a query that calls a SQL function PostgreSQL may inline, whose body
///   may hold such a call.
///
/// Citus delegates no query with a `WHERE` it cannot fold away, so the
/// call runs here, as in a transaction block. The condition is stable,
/// so the planner keeps it, and has no column, so the plan checks it once.
/// Citus never delegates a query that reads one of the extension's tables
/// (it plans it as a distributed query) nor a `UNION`, `INTERSECT` or
/// `EXCEPT`, whose planning takes no `WHERE` at its top: those are left as
/// they are.
///
/// # Safety
/// As for [`must_run_here`]; the planner may change the query it plans.
unsafe fn keep_calls_in_from_here(parse: *mut pg_sys::Query, bound_params: pg_sys::ParamListInfo) {
    // SAFETY: as the caller's; every node is tested for its tag before it
    // is read as that node.
    unsafe {
        let query = &mut *parse;
        if query.commandType != pg_sys::CmdType::CMD_SELECT
            || query.jointree.is_null()
            || !query.setOperations.is_null()
        {
            return;
        }
        let schema = pg_sys::get_namespace_oid(c"agent_memory".as_ptr(), true);
        if schema == pg_sys::InvalidOid {
            return;
        }
        let entries = PgList::<pg_sys::RangeTblEntry>::from_pg(query.rtable);
        if entries.iter_ptr().any(|entry| {
            (*entry).rtekind == pg_sys::RTEKind::RTE_RELATION
                && pg_sys::get_rel_namespace((*entry).relid) == schema
        }) {
            return;
        }
        let mut found = Calls { schema, depth: 0, here: 0, hidden: false };
        pg_sys::query_tree_walker(parse, Some(count_calls), (&raw mut found).cast(), 0);
        if !found.hidden && (found.here == 0 || bare_call(query).is_some()) {
            // No call, or the bare form, which `must_run_here` took care of.
            // A call wrapped in an expression the planner folds away
            // (`CASE WHEN true THEN agent_memory.f(...) END`) is not the
            // bare form here, and gets the condition.
            return;
        }
        let mut in_from = 0;
        let mut null_key = false;
        for entry in entries.iter_ptr() {
            if (*entry).rtekind != pg_sys::RTEKind::RTE_FUNCTION {
                continue;
            }
            for function in
                PgList::<pg_sys::RangeTblFunction>::from_pg((*entry).functions).iter_ptr()
            {
                let expr = (*function).funcexpr;
                if expr.is_null() || (*expr).type_ != pg_sys::NodeTag::T_FuncExpr {
                    continue;
                }
                let call = &*(expr as *mut pg_sys::FuncExpr);
                if pg_sys::get_func_namespace(call.funcid) == schema {
                    in_from += 1;
                    null_key |= key_may_be_null(call, bound_params);
                }
            }
        }
        let only_from_item = entries.len() == 1
            && in_from == found.here
            && query.cteList.is_null()
            && !query.hasSubLinks;
        if found.hidden || !only_from_item || null_key || settings_changed_in_session() {
            // Added to a `WHERE` already there: Citus folds away one that
            // is constant (`WHERE true`) and delegates the query.
            let quals = &mut (*query.jointree).quals;
            let here: *mut pg_sys::Node = always_true().cast();
            *quals = if quals.is_null() {
                here
            } else {
                let mut both = PgList::<pg_sys::Node>::new();
                both.push(*quals);
                both.push(here);
                pg_sys::make_andclause(both.into_pg()).cast()
            };
        }
    }
}

/// What a walk of a query found: how many calls of functions of schema
/// `schema` the query itself makes, and whether it holds a call the query
/// as planned may show Citus where this one does not.
struct Calls {
    schema: pg_sys::Oid,
    /// How deep the walk is in queries within the query.
    depth: u32,
    here: u32,
    /// A call of the schema within a query within the query, or a call of
    /// a SQL function PostgreSQL may inline.
    hidden: bool,
}

/// The language of SQL functions (`pg_language`'s `sql`).
const SQL_LANGUAGE: pg_sys::Oid = pg_sys::Oid::from_u32(14);

/// Counts the calls in `node` into the `Calls` at `context`, walking into
/// the queries within it; true stops the walk (a hidden call is enough).
#[pg_guard]
unsafe extern "C-unwind" fn count_calls(
    node: *mut pg_sys::Node, context: *mut std::ffi::c_void,
) -> bool {
    // SAFETY: `context` is the `Calls` the walk was started with, read and
    // written through the pointer only (a nested walk takes it too); every
    // node is tested for its tag before it is read as that node.
    unsafe {
        if node.is_null() {
            return false;
        }
        let calls = context.cast::<Calls>();
        let function = match (*node).type_ {
            pg_sys::NodeTag::T_Query => {
                (*calls).depth += 1;
                let stop = pg_sys::query_tree_walker(node.cast(), Some(count_calls), context, 0);
                (*calls).depth -= 1;
                return stop;
            }
            pg_sys::NodeTag::T_FuncExpr => (*(node as *mut pg_sys::FuncExpr)).funcid,
            pg_sys::NodeTag::T_OpExpr
            | pg_sys::NodeTag::T_DistinctExpr
            | pg_sys::NodeTag::T_NullIfExpr => {
                pg_sys::get_opcode((*(node as *mut pg_sys::OpExpr)).opno)
            }
            _ => pg_sys::InvalidOid,
        };
        if function != pg_sys::InvalidOid {
            match function_kind(function, (*calls).schema) {
                FunctionKind::Extension if (*calls).depth == 0 => (*calls).here += 1,
                FunctionKind::Extension | FunctionKind::MayBeInlined => {
                    (*calls).hidden = true;
                    return true;
                }
                FunctionKind::Other => {}
            }
        }
        pg_sys::expression_tree_walker(node, Some(count_calls), context)
    }
}

enum FunctionKind {
    /// A function of schema agent_memory.
    Extension,
    /// A SQL function without `SECURITY DEFINER` or `SET` (and not volatile
    /// if it returns a set), which the planner may replace with its body;
    /// not a built-in one, whose body calls no extension.
    MayBeInlined,
    Other,
}

/// What kind of function `function` is.
///
/// # Safety
/// Called while planning, in a transaction.
unsafe fn function_kind(function: pg_sys::Oid, schema: pg_sys::Oid) -> FunctionKind {
    // SAFETY: a catalog lookup by oid, released before returning; the
    // tuple is a pg_proc row while held.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as c_int,
            pg_sys::Datum::from(function),
        );
        if tuple.is_null() {
            return FunctionKind::Other;
        }
        let proc = &*(pg_sys::GETSTRUCT(tuple) as *const pg_sys::FormData_pg_proc);
        let kind = if proc.pronamespace == schema {
            FunctionKind::Extension
        } else if proc.prolang == SQL_LANGUAGE
            && function.to_u32() >= pg_sys::FirstNormalObjectId
            && !(proc.proretset && proc.provolatile == pg_sys::PROVOLATILE_VOLATILE as c_char)
            && !proc.prosecdef
            && pg_sys::heap_attisnull(
                tuple,
                pg_sys::Anum_pg_proc_proconfig as c_int,
                std::ptr::null_mut(),
            )
        {
            FunctionKind::MayBeInlined
        } else {
            FunctionKind::Other
        };
        pg_sys::ReleaseSysCache(tuple);
        kind
    }
}

/// `now() IS NOT NULL`: true, and stable, so never folded to a constant.
///
/// # Safety
/// Called while planning, in the planner's memory context.
unsafe fn always_true() -> *mut pg_sys::NullTest {
    // SAFETY: builds new nodes in the current memory context.
    unsafe {
        let now = pg_sys::makeFuncExpr(
            pg_sys::Oid::from(pg_sys::F_NOW),
            pg_sys::TIMESTAMPTZOID,
            std::ptr::null_mut(),
            pg_sys::InvalidOid,
            pg_sys::InvalidOid,
            pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
        );
        let mut test = PgBox::<pg_sys::NullTest>::alloc_node(pg_sys::NodeTag::T_NullTest);
        test.arg = now.cast();
        test.nulltesttype = pg_sys::NullTestType::IS_NOT_NULL;
        test.location = -1;
        test.into_pg()
    }
}

/// Whether the query is `SELECT agent_memory.f(...)`, the shape Citus
/// delegates (one column, no FROM), with a key that may be NULL (see
/// [`key_may_be_null`])
/// or made while the session has changed a setting. Such a query
/// reads no table, so it can be planned without Citus: Citus's hooks see
/// no relation of it. (A function in FROM cannot skip Citus's planner:
/// Citus's relation hooks would run without its planner's context.)
///
/// # Safety
/// `parse` is a query being planned and `bound_params` its parameters (or
/// NULL).
unsafe fn must_run_here(parse: *mut pg_sys::Query, bound_params: pg_sys::ParamListInfo) -> bool {
    // SAFETY: the caller passes a valid query.
    unsafe {
        match bare_call(&*parse) {
            Some(call) => key_may_be_null(call, bound_params) || settings_changed_in_session(),
            None => false,
        }
    }
}

/// The call of a query `SELECT agent_memory.f(...)`: one column that is
/// the call itself, no `FROM`, no `WITH` query, no sublink.
///
/// # Safety
/// `query` is a query being planned; every node is tested for its tag
/// before it is read as that node.
unsafe fn bare_call(query: &pg_sys::Query) -> Option<&pg_sys::FuncExpr> {
    // SAFETY: as the function's.
    unsafe {
        if query.commandType != pg_sys::CmdType::CMD_SELECT
            || query.hasSubLinks
            || !query.cteList.is_null()
            || query.jointree.is_null()
            || !(*query.jointree).fromlist.is_null()
        {
            return None;
        }
        let targets = PgList::<pg_sys::TargetEntry>::from_pg(query.targetList);
        if targets.len() != 1 {
            return None;
        }
        let expr = (*targets.get_ptr(0)?).expr as *mut pg_sys::Node;
        if expr.is_null() || (*expr).type_ != pg_sys::NodeTag::T_FuncExpr {
            return None;
        }
        let call = &*(expr as *mut pg_sys::FuncExpr);
        in_extension_schema(call.funcid).then_some(call)
    }
}

/// Whether a call's key, its first parameter, may be NULL when Citus
/// reads it: anything but a constant or a bound parameter that is not NULL,
/// given first in positional notation or named (`session_id => ...`)
/// anywhere. An expression may fold to a NULL constant (`nullif('a',
/// 'a')`) before Citus reads it. A key left to its default is NULL (the
/// only function of the extension with a default key, `wm_clear`,
/// defaults it to NULL).
///
/// # Safety
/// As for [`must_run_here`]; `call` is a function call of the query.
unsafe fn key_may_be_null(call: &pg_sys::FuncExpr, bound_params: pg_sys::ParamListInfo) -> bool {
    // SAFETY: the arguments are expression nodes, tested for their tag
    // before one is read as a named argument.
    unsafe {
        let args = PgList::<pg_sys::Node>::from_pg(call.args);
        for (index, arg) in args.iter_ptr().enumerate() {
            if (*arg).type_ == pg_sys::NodeTag::T_NamedArgExpr {
                let named = &*(arg as *mut pg_sys::NamedArgExpr);
                if named.argnumber == 0 {
                    return !known_not_null(named.arg.cast(), bound_params);
                }
            } else if index == 0 {
                return !known_not_null(arg, bound_params);
            }
        }
        true
    }
}

/// Whether a key is a constant that is not NULL, or a parameter (bound, or
/// left to be bound when the plan runs) that is not bound to NULL.
///
/// # Safety
/// As for [`must_run_here`]; `key` is an expression node of the query.
unsafe fn known_not_null(key: *mut pg_sys::Node, bound_params: pg_sys::ParamListInfo) -> bool {
    // SAFETY: as the caller's; the node is tested for its tag first.
    unsafe {
        let key = pg_sys::strip_implicit_coercions(key);
        match (*key).type_ {
            pg_sys::NodeTag::T_Const => !(*(key as *mut pg_sys::Const)).constisnull,
            pg_sys::NodeTag::T_Param => !bound_null(key as *mut pg_sys::Param, bound_params),
            _ => false,
        }
    }
}

/// Whether some `agent_memory.*` setting differs from the value RESET
/// would give it: the session changed it with SET (or set_config).
/// Settings hidden from ordinary roles are server-wide: no session sets
/// them.
fn settings_changed_in_session() -> bool {
    settings::NAMES.iter().any(|name| {
        // SAFETY: reads of settings this library defined, by name; the
        // values are NUL-terminated strings (NULL for an unset string).
        unsafe {
            let flags = pg_sys::GetConfigOptionFlags(name.as_ptr(), true);
            if flags & pg_sys::GUC_SUPERUSER_ONLY as c_int != 0 {
                return false;
            }
            let now = pg_sys::GetConfigOption(name.as_ptr(), true, false);
            let reset = pg_sys::GetConfigOptionResetString(name.as_ptr());
            match (now.is_null(), reset.is_null()) {
                (false, false) => CStr::from_ptr(now) != CStr::from_ptr(reset),
                (true, true) => false,
                _ => true,
            }
        }
    })
}

/// Whether an external parameter is bound to NULL.
///
/// # Safety
/// As for [`must_run_here`].
unsafe fn bound_null(param: *mut pg_sys::Param, bound_params: pg_sys::ParamListInfo) -> bool {
    // SAFETY: as the caller's; the parameter list is read only within its
    // length, through its fetch hook when it has one.
    unsafe {
        let param = &*param;
        if param.paramkind != pg_sys::ParamKind::PARAM_EXTERN || bound_params.is_null() {
            return false;
        }
        let list = &mut *bound_params;
        if param.paramid < 1 || param.paramid > list.numParams {
            return false;
        }
        let mut workspace = std::mem::zeroed::<pg_sys::ParamExternData>();
        let value = match list.paramFetch {
            Some(fetch) => fetch(bound_params, param.paramid, true, &mut workspace),
            None => list.params.as_mut_ptr().add(param.paramid as usize - 1),
        };
        !value.is_null() && (*value).isnull
    }
}

/// Whether function `funcid` lives in schema agent_memory.
fn in_extension_schema(funcid: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups by oid; NULL when there is no such schema.
    unsafe {
        let name = pg_sys::get_namespace_name(pg_sys::get_func_namespace(funcid));
        !name.is_null() && CStr::from_ptr(name).to_bytes() == b"agent_memory"
    }
}
