//! SQL functions declared by hand as version-1 C functions, where pgrx's
//! own wrappers do not fit: table functions in materialize mode (called
//! once, they put every row into the result store) and a trigger that
//! answers a direct call as PostgreSQL's own trigger functions do.

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

/// A table function in materialize mode: the C symbol `$symbol` (with its
/// version-1 record `$finfo`) runs `$put_rows(fcinfo) -> SqlResult<()>`,
/// which fills the result store, and raises its error, if any.
macro_rules! materialized_table_function {
    ($symbol:ident, $finfo:ident, $put_rows:path) => {
        crate::pg::c_functions::version_1!($finfo);

        /// # Safety
        /// Called by PostgreSQL's function manager with a valid `fcinfo`.
        #[unsafe(no_mangle)]
        #[pgrx::pg_guard]
        pub unsafe extern "C-unwind" fn $symbol(
            fcinfo: pgrx::pg_sys::FunctionCallInfo,
        ) -> pgrx::pg_sys::Datum {
            // SAFETY: fcinfo comes from the function manager.
            if let Err(report) = unsafe { $put_rows(fcinfo) } {
                report.report(pgrx::PgLogLevel::ERROR);
            }
            pgrx::pg_sys::Datum::from(0)
        }
    };
}
pub(crate) use materialized_table_function;
