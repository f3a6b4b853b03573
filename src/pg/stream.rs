//! Reading a large query result row by row as the executor produces it.
//!
//! SPI normally copies every result row into a tuple table before the
//! caller sees the first one; for the million-row scan of the graph tree
//! that copy costs more than the scan. Here the query runs through SPI
//! (same permissions, row-level security and snapshot as any statement)
//! with a destination receiver of our own, which hands each row's values to
//! a Rust closure while they are still in the executor's slot.

use std::cell::RefCell;
use std::collections::HashMap;

use pgrx::pg_sys;
use pgrx::prelude::*;

use agent_memory_core::Error;

use crate::pg::error::{OrReport, SqlResult, report};

/// A read-only statement with text parameters (NULL allowed), prepared once
/// per backend.
pub struct StreamStatement {
    pub sql: &'static str,
    pub params: usize,
    /// The type of each result column: the reader trusts them, so they are
    /// checked before the first row (a table changed by hand fails cleanly).
    pub columns: &'static [pg_sys::Oid],
}

thread_local! {
    static PLANS: RefCell<HashMap<usize, usize>> = RefCell::new(HashMap::new());
}

/// The values of one result row, valid only during the callback.
pub struct StreamRow<'a> {
    values: &'a [pg_sys::Datum],
    nulls: &'a [bool],
}

impl StreamRow<'_> {
    /// Column `column` (1-based), or an internal error when it is NULL.
    pub fn datum(&self, column: usize, what: &str) -> SqlResult<pg_sys::Datum> {
        match (self.values.get(column - 1), self.nulls.get(column - 1)) {
            (Some(&value), Some(false)) => Ok(value),
            _ => Err(report(Error::internal(format!("column {what} is unexpectedly NULL")))),
        }
    }

    /// A text column, borrowed from the row.
    pub fn text(&self, column: usize, what: &str) -> SqlResult<&str> {
        let datum = self.datum(column, what)?;
        // SAFETY: the column is text (checked at startup); the row outlives
        // the borrow. Inline values are read in place, without a call.
        let text = unsafe {
            match crate::pg::datums::inline_payload(datum) {
                Some(bytes) => crate::pg::datums::database_str(bytes),
                None => <&str>::from_datum(datum, false),
            }
        };
        text.ok_or_else(|| report(Error::internal(format!("column {what} is not UTF-8 text"))))
    }

    /// Column `column` (1-based), None when it is NULL.
    pub fn nullable(&self, column: usize) -> Option<pg_sys::Datum> {
        match (self.values.get(column - 1), self.nulls.get(column - 1)) {
            (Some(&value), Some(false)) => Some(value),
            _ => None,
        }
    }

    pub fn int8(&self, column: usize, what: &str) -> SqlResult<i64> {
        // SAFETY: the column is an int8.
        Ok(unsafe { i64::from_datum(self.datum(column, what)?, false) }.unwrap_or_default())
    }

    pub fn int4(&self, column: usize, what: &str) -> SqlResult<i32> {
        // SAFETY: the column is an int4.
        Ok(unsafe { i32::from_datum(self.datum(column, what)?, false) }.unwrap_or_default())
    }

    pub fn timestamptz(&self, column: usize, what: &str) -> SqlResult<TimestampWithTimeZone> {
        let datum = self.datum(column, what)?;
        // SAFETY: the column is a timestamptz.
        unsafe { TimestampWithTimeZone::from_datum(datum, false) }
            .ok_or_else(|| report(Error::internal(format!("column {what} is not a timestamp"))))
    }
}

type Callback<'f> = dyn FnMut(&StreamRow<'_>) -> SqlResult<()> + 'f;

/// The destination receiver: PostgreSQL's struct first, then our state.
#[repr(C)]
struct Receiver {
    base: pg_sys::DestReceiver,
    columns: &'static [pg_sys::Oid],
    /// Points to a `&mut Callback` (a thin pointer to the closure's fat one).
    each: *mut std::ffi::c_void,
    failure: Option<pgrx::pg_sys::panic::ErrorReport>,
    /// What a callback allocates in PostgreSQL (detoasted values) lives
    /// for one row: the context is reset after each.
    row_context: pg_sys::MemoryContext,
}

#[pg_guard]
unsafe extern "C-unwind" fn receive_slot(
    slot: *mut pg_sys::TupleTableSlot, receiver: *mut pg_sys::DestReceiver,
) -> bool {
    // SAFETY: `receiver` is the Receiver passed to SPI below (its first
    // field is the DestReceiver), `slot` a valid slot of the result.
    unsafe {
        let receiver = &mut *receiver.cast::<Receiver>();
        pg_sys::slot_getallattrs(slot);
        let natts = (*(*slot).tts_tupleDescriptor).natts as usize;
        let row = StreamRow {
            values: std::slice::from_raw_parts((*slot).tts_values, natts),
            nulls: std::slice::from_raw_parts((*slot).tts_isnull, natts),
        };
        let each = &mut *receiver.each.cast::<&mut Callback<'_>>();
        let outer = pg_sys::MemoryContextSwitchTo(receiver.row_context);
        let outcome = each(&row);
        pg_sys::MemoryContextSwitchTo(outer);
        pg_sys::MemoryContextReset(receiver.row_context);
        match outcome {
            Ok(()) => true,
            Err(failure) => {
                // Stop the executor; the error is raised once SPI returns.
                receiver.failure = Some(failure);
                false
            }
        }
    }
}

/// Before the first row: the result has the columns the reader expects.
#[pg_guard]
unsafe extern "C-unwind" fn startup(
    receiver: *mut pg_sys::DestReceiver, operation: i32, tupdesc: pg_sys::TupleDesc,
) {
    let _ = operation;
    // SAFETY: `receiver` is our Receiver; `tupdesc` describes the result.
    unsafe {
        let expected = (*receiver.cast::<Receiver>()).columns;
        let natts = (*tupdesc).natts;
        let found: Vec<pg_sys::Oid> =
            (1..=natts).map(|n| pg_sys::SPI_gettypeid(tupdesc, n)).collect();
        if found.as_slice() != expected {
            report(Error::internal(
                "a stream statement's columns are not of the types its reader expects",
            ))
            .report(PgLogLevel::ERROR);
        }
    }
}

// Nothing to tear down (this cannot fail, so needs no guard).

unsafe extern "C-unwind" fn nothing(_receiver: *mut pg_sys::DestReceiver) {}

/// Run `statement` with text parameters `params` and call `each` with every
/// result row. The statement runs read-only in the caller's snapshot; what
/// the callback allocates in PostgreSQL is freed after each row, so memory
/// stays flat however many rows there are.
pub fn for_each_row(
    statement: &'static StreamStatement, params: &[Option<&str>], mut each: &mut Callback<'_>,
) -> SqlResult<()> {
    if params.len() != statement.params {
        return Err(report(Error::internal("stream statement called with the wrong parameters")));
    }
    Spi::connect(|client| {
        // SAFETY: inside an SPI connection; the plan is kept for the life of
        // the backend; the parameter list and receiver outlive the call.
        unsafe {
            let key = statement as *const StreamStatement as usize;
            let mut plan = PLANS.with(|plans| plans.borrow().get(&key).copied()).unwrap_or(0)
                as pg_sys::SPIPlanPtr;
            if plan.is_null() {
                crate::pg::plans::check_catalog(client).or_report()?;
                let mut types = vec![pg_sys::TEXTOID; statement.params];
                // Planned for each call's values: one owner may hold most
                // of a table or a sliver of it, and a scan of a million
                // rows can afford a tenth of a millisecond of planning.
                let Ok(sql) = std::ffi::CString::new(statement.sql) else {
                    return Err(report(Error::internal("a stream statement holds a NUL")));
                };
                plan = pg_sys::SPI_prepare_cursor(
                    sql.as_ptr(),
                    statement.params as i32,
                    types.as_mut_ptr(),
                    pg_sys::CURSOR_OPT_CUSTOM_PLAN as i32,
                );
                if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
                    return Err(report(Error::internal("could not prepare a stream statement")));
                }
                PLANS.with(|plans| plans.borrow_mut().insert(key, plan as usize));
            }

            let list = pg_sys::makeParamList(params.len() as i32);
            (*list).numParams = params.len() as i32;
            let slots = (*list).params.as_mut_slice(params.len());
            for (slot, value) in slots.iter_mut().zip(params) {
                *slot = pg_sys::ParamExternData {
                    value: value.map_or(pg_sys::Datum::from(0), crate::pg::datums::text_datum),
                    isnull: value.is_none(),
                    pflags: pg_sys::PARAM_FLAG_CONST as u16,
                    ptype: pg_sys::TEXTOID,
                };
            }

            let mut receiver = Receiver {
                base: pg_sys::DestReceiver {
                    receiveSlot: Some(receive_slot),
                    rStartup: Some(startup),
                    rShutdown: Some(nothing),
                    rDestroy: Some(nothing),
                    mydest: pg_sys::CommandDest::DestNone,
                },
                columns: statement.columns,
                each: (&mut each as *mut &mut Callback<'_>).cast(),
                failure: None,
                row_context: pg_sys::AllocSetContextCreateExtended(
                    pg_sys::CurrentMemoryContext,
                    c"agent_memory stream row".as_ptr(),
                    pg_sys::ALLOCSET_DEFAULT_MINSIZE as usize,
                    pg_sys::ALLOCSET_DEFAULT_INITSIZE as usize,
                    pg_sys::ALLOCSET_DEFAULT_MAXSIZE as usize,
                ),
            };
            let options = pg_sys::SPIExecuteOptions {
                params: list,
                read_only: true,
                allow_nonatomic: false,
                must_return_tuples: false,
                tcount: 0,
                dest: (&mut receiver as *mut Receiver).cast(),
                owner: std::ptr::null_mut(),
            };
            let by_index = crate::pg::settings::NoSequentialScans::hold();
            let status = pg_sys::SPI_execute_plan_extended(plan, &options);
            drop(by_index);
            pg_sys::MemoryContextDelete(receiver.row_context);
            if let Some(failure) = receiver.failure.take() {
                return Err(failure);
            }
            if status < 0 {
                return Err(report(Error::internal(format!("stream statement failed ({status})"))));
            }
            Ok(())
        }
    })
}

/// Put every row of `statement`, run with `params`, into the result store
/// of a table function called in materialize mode, as the rows are read,
/// and return how many there were: the call holds one row at a time
/// whatever the result holds (the store spills to disk past work_mem). The
/// statement's columns are the function's result columns, in order.
///
/// # Safety
/// `fcinfo` is the call's, with a ReturnSetInfo allowing materialize mode
/// (InitMaterializedSRF checks it).
pub unsafe fn put_rows(
    fcinfo: pg_sys::FunctionCallInfo, statement: &'static StreamStatement, params: &[Option<&str>],
) -> SqlResult<u64> {
    let columns = statement.columns.len();
    // A variable-length value (text, jsonb) stored out of line is a
    // pointer into a table: it is fetched, in the row's memory, so the
    // store keeps the value. A value compressed in line stays compressed.
    // SAFETY: the column types are built-in types.
    let variable: Vec<bool> =
        statement.columns.iter().map(|&oid| unsafe { pg_sys::get_typlen(oid) } == -1).collect();
    let mut values = vec![pg_sys::Datum::from(0); columns];
    let mut nulls = vec![false; columns];
    let mut rows = 0;
    // A catalog of another version is refused first, as what to do.
    crate::pg::plans::ensure_catalog()?;
    // SAFETY: as the caller promises; the store copies the values.
    unsafe {
        pg_sys::InitMaterializedSRF(fcinfo, pg_sys::MAT_SRF_USE_EXPECTED_DESC);
        let result = (*fcinfo).resultinfo.cast::<pg_sys::ReturnSetInfo>();
        let (store, desc) = ((*result).setResult, (*result).setDesc);
        // The function's declared columns are the statement's: the store
        // reads each value as the type its column declares.
        let declared: Vec<pg_sys::Oid> =
            (1..=(*desc).natts).map(|n| pg_sys::SPI_gettypeid(desc, n)).collect();
        if declared.as_slice() != statement.columns {
            return Err(report(Error::internal(
                "a table function's declared columns are not those of its statement",
            )));
        }
        for_each_row(statement, params, &mut |row| {
            for column in 0..columns {
                let value = row.nullable(column + 1);
                nulls[column] = value.is_none();
                values[column] = match value {
                    Some(datum)
                        if variable[column]
                            && pgrx::varlena::varatt_is_1b_e(datum.cast_mut_ptr()) =>
                    {
                        pg_sys::Datum::from(pg_sys::detoast_external_attr(datum.cast_mut_ptr()))
                    }
                    Some(datum) => datum,
                    None => pg_sys::Datum::from(0),
                };
            }
            pg_sys::tuplestore_putvalues(store, desc, values.as_mut_ptr(), nulls.as_mut_ptr());
            rows += 1;
            Ok(())
        })?;
    }
    Ok(rows)
}
