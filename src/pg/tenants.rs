//! Tenants: whose memory a caller reads and writes. Every memory table has
//! a `tenant` column, in every key right after the session, owner or
//! scope, filled from [`caller_tenant`]; every statement of the extension
//! addresses the caller's tenant only, and a row-level security policy
//! compares the column with [`visible_tenant`] (sql/tenants.sql).
//!
//! While `agent_memory.tenant_isolation` is off, every role shares one
//! memory, tenant `''`. While it is on, a tenant is the current role,
//! optionally narrowed by the application with `SET agent_memory.tenant`:
//! role `app` acting for tenant `acme` is `app/acme`. The role's name is
//! written as an identifier (quoted when it needs to be), so role `a/b`
//! (`"a/b"`) and role `a` acting for `b` (`a/b`) never share rows, no
//! setting takes a role into another role's rows, and no role's tenant is
//! `''`. The extension's own group roles have no tenant: every tenant's
//! role may `SET ROLE` to them, so memory written as one would be shared.
//!
//! Both are Rust functions rather than SQL ones so that calling them loads
//! the library: a value a non-superuser set for `agent_memory.*` before the
//! library was loaded in its backend is then checked, and a SUSET value it
//! had no right to set is discarded before any policy reads it.

use pgrx::prelude::*;

use agent_memory_core::tenant::tenant_key;

use agent_memory_core::Error;

use crate::pg::error::{SqlResult, report};
use crate::pg::settings::{TENANT, TENANT_ISOLATION};

/// Roles the extension creates for every tenant to share.
const GROUP_ROLES: [&str; 3] = ["agent_memory_writer", "agent_memory_reader", "agent_memory_owner"];

fn current_role() -> String {
    // SAFETY: GetUserId is the current role, which exists (noerr = false
    // raises otherwise); the name is a palloc'd C string we copy at once.
    unsafe {
        let name = pg_sys::GetUserNameFromId(pg_sys::GetUserId(), false);
        std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned()
    }
}

/// The tenant the caller reads and writes as: `''` while isolation is off,
/// else its role and the tenant chosen with `agent_memory.tenant`.
// Not pinned to a search_path, unlike every other function: it runs no
// SQL, and as the default of every tenant column it runs once per inserted
// row, where a SET clause would cost more than the function's own work.
#[pg_extern(stable, parallel_safe)]
pub(crate) fn caller_tenant() -> SqlResult<String> {
    if !TENANT_ISOLATION.get() {
        return Ok(String::new());
    }
    isolated_tenant()
}

fn isolated_tenant() -> SqlResult<String> {
    let role = current_role();
    if GROUP_ROLES.contains(&role.as_str()) {
        return Err(report(
            Error::not_allowed(format!(
                "role \"{role}\" is shared by every tenant, so it has no memory of its own"
            ))
            .with_hint("RESET ROLE, or SET ROLE to the role of one tenant"),
        ));
    }
    let tenant = TENANT.get();
    let tenant = tenant.as_ref().map(|t| t.to_string_lossy());
    Ok(tenant_key(&role, tenant.as_deref()))
}

/// The tenant whose rows the caller may see and change: '' (the memory
/// every role shares) while `agent_memory.tenant_isolation` is off for
/// it. Not every tenant's: where isolation is on for other roles, a role
/// left without it must not reach their rows by direct SQL.
// Not pinned either: it runs no SQL (see caller_tenant).
#[pg_extern(stable, parallel_safe)]
fn visible_tenant() -> SqlResult<Option<String>> {
    if TENANT_ISOLATION.get() { isolated_tenant().map(Some) } else { Ok(Some(String::new())) }
}

// The tenant column, policies and table owner of every memory table.
extension_sql_file!(
    "../../sql/tenants.sql",
    name = "tenants",
    requires = [caller_tenant, visible_tenant]
);
