//! SQL functions declared by hand as version-1 C functions, where pgrx's
//! own wrappers do not fit: table functions in materialize mode (called
//! once, they put every row into the result store) and a trigger that
//! answers a direct call as PostgreSQL's own trigger functions do.

use crate::pg::error::SqlResult;

/// The `pg_finfo_<symbol>` record that tells the function manager a C
/// symbol follows the version-1 calling convention.
macro_rules! version_1 {
    ($finfo:ident) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static pgrx::pg_sys::Pg_finfo_record {
            const V1: pgrx::pg_sys::Pg_finfo_record =
                pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}
pub(crate) use version_1;

/// A table function in materialize mode: `$sql` declares it (as the
/// `extension_sql!` entity `$name`) with the C symbol `$symbol`, which
/// runs `$put_rows(&TableCall) -> SqlResult<()>` to fill the result store
/// and raises its error, if any:
///
/// ```ignore
/// materialized_table_function! { "graph_nodes", graph_nodes_wrapper, put_node_rows, r#"
/// CREATE FUNCTION agent_memory.graph_nodes(owner text) RETURNS TABLE (...)
/// LANGUAGE c STABLE AS 'MODULE_PATHNAME', 'graph_nodes_wrapper';
/// "# }
/// ```
macro_rules! materialized_table_function {
    ($name:tt, $symbol:ident, $put_rows:path, $sql:tt $(,)?) => {
        pgrx::extension_sql!($sql, name = $name);

        const _: () = {
            #[unsafe(export_name = concat!("pg_finfo_", stringify!($symbol)))]
            extern "C" fn version_1() -> &'static pgrx::pg_sys::Pg_finfo_record {
                const V1: pgrx::pg_sys::Pg_finfo_record =
                    pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
                &V1
            }
        };

        /// # Safety
        /// Called by PostgreSQL's function manager with a valid `fcinfo`.
        #[unsafe(no_mangle)]
        #[pgrx::pg_guard]
        pub unsafe extern "C-unwind" fn $symbol(
            fcinfo: pgrx::pg_sys::FunctionCallInfo,
        ) -> pgrx::pg_sys::Datum {
            // SAFETY: fcinfo comes from the function manager.
            let call = unsafe { crate::pg::c_functions::TableCall::new(fcinfo) };
            if let Err(report) = $put_rows(&call) {
                report.report(pgrx::PgLogLevel::ERROR);
            }
            pgrx::pg_sys::Datum::from(0)
        }
    };
}
pub(crate) use materialized_table_function;

/// A call of a table function in materialize mode, as the function reads
/// its arguments and fills its result.
pub struct TableCall {
    fcinfo: pgrx::pg_sys::FunctionCallInfo,
}

impl TableCall {
    /// # Safety
    /// `fcinfo` is a call's, from the function manager, with a ReturnSetInfo
    /// allowing materialize mode (InitMaterializedSRF checks it).
    pub unsafe fn new(fcinfo: pgrx::pg_sys::FunctionCallInfo) -> TableCall {
        TableCall { fcinfo }
    }

    /// Argument `n` (from 0), a text, None when NULL.
    pub fn text(&self, n: usize) -> SqlResult<Option<&str>> {
        self.check_type(n, pgrx::pg_sys::TEXTOID)?;
        // SAFETY: argument `n` is a text (checked above).
        Ok(unsafe { pgrx::fcinfo::pg_getarg::<&str>(self.fcinfo, n) })
    }

    /// Argument `n` (from 0), an integer, None when NULL.
    pub fn int4(&self, n: usize) -> SqlResult<Option<i32>> {
        self.check_type(n, pgrx::pg_sys::INT4OID)?;
        // SAFETY: argument `n` is an integer (checked above).
        Ok(unsafe { pgrx::fcinfo::pg_getarg::<i32>(self.fcinfo, n) })
    }

    /// Argument `n` exists and is of type `expected`, as the call passes it:
    /// a value read as another type would be read from the wrong bytes.
    fn check_type(&self, n: usize, expected: pgrx::pg_sys::Oid) -> SqlResult<()> {
        // SAFETY: the call's flinfo, as `new` was promised; the function
        // returns InvalidOid when it cannot tell.
        let found = unsafe {
            if n >= (*self.fcinfo).nargs as usize {
                pgrx::pg_sys::InvalidOid
            } else {
                pgrx::pg_sys::get_fn_expr_argtype((*self.fcinfo).flinfo, n as i32)
            }
        };
        if found == expected {
            Ok(())
        } else {
            Err(crate::pg::error::report(agent_memory_core::Error::internal(format!(
                "argument {n} of a table function is not of the type its reader expects"
            ))))
        }
    }

    /// Put every row of `statement`, run with `params`, into the result,
    /// and return how many there were (see [`crate::pg::stream::put_rows`]).
    pub fn put_rows(
        &self, statement: &'static crate::pg::stream::StreamStatement, params: &[Option<&str>],
    ) -> SqlResult<u64> {
        // SAFETY: as `new` was promised.
        unsafe { crate::pg::stream::put_rows(self.fcinfo, statement, params) }
    }

    /// The call itself, for a function that fills the result store on its
    /// own.
    pub fn fcinfo(&self) -> pgrx::pg_sys::FunctionCallInfo {
        self.fcinfo
    }
}
