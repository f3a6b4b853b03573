//! Prepared plans kept for the life of a backend.
//!
//! Parse and plan, not SPI, dominate the cost of a short statement, so hot
//! paths prepare each statement once per backend (`SPI_keepplan`) and reuse
//! it. PostgreSQL's plan cache re-plans a kept statement by itself when a
//! table it uses changes, so a kept plan never goes stale. Statements plan
//! and run with sequential scans ruled out (see
//! [`NoSequentialScans`]), so that a plan kept from statistics of an
//! empty or smaller table still reaches rows by their keys.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use pgrx::datum::DatumWithOid;
use pgrx::spi::{OwnedPreparedStatement, SpiClient, SpiHeapTupleData, SpiResult, SpiTupleTable};
use pgrx::{FromDatum, IntoDatum, PgOid};

use crate::pg::error::{OrReport, SqlResult};
use crate::pg::settings::NoSequentialScans;

// Timestamps as JavaScript's toISOString() writes them .
macro_rules! iso {
    ($expr:literal) => {
        concat!(
            "pg_catalog.to_char(",
            $expr,
            " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
        )
    };
}
pub(crate) use iso;

// Keys of a jsonb_build_object whose values are timestamps, each written
// as `iso!` writes it: `, 'key', <iso of column>` for each pair.
macro_rules! iso_fields {
    ($($key:literal: $column:literal),+) => {
        concat!($(", '", $key, "', ", crate::pg::plans::iso!($column)),+)
    };
}
pub(crate) use iso_fields;

/// A statement of the extension: its SQL (fully schema-qualified) and the
/// types of its parameters.
pub struct Statement {
    pub sql: &'static str,
    pub args: &'static [PgOid],
    /// Whether it runs read-write: it writes (INSERT/UPDATE/DELETE), or it
    /// must see what committed after the calling statement began (a
    /// read-only SPI statement reuses the caller's snapshot; a read-write
    /// one takes a fresh one in READ COMMITTED).
    pub writes: bool,
}

impl Statement {
    /// A statement that runs read-only, in the calling statement's
    /// snapshot.
    pub const fn read_only(sql: &'static str, args: &'static [PgOid]) -> Self {
        Statement { sql, args, writes: false }
    }

    /// A statement that runs read-write (see `writes`).
    pub const fn read_write(sql: &'static str, args: &'static [PgOid]) -> Self {
        Statement { sql, args, writes: true }
    }
}

thread_local! {
    static PREPARED: RefCell<HashMap<usize, Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
    /// Statements built when they first run, by their text.
    static BUILT: RefCell<HashMap<String, Rc<OwnedPreparedStatement>>> = RefCell::new(HashMap::new());
    /// Whether this backend found the catalog at the library's version.
    static CATALOG_MATCHES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether Citus is installed in this database, as the catalog check
    /// found it.
    static CITUS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Refuse to run statements against a catalog of another version: after a
/// new library is installed and before `ALTER EXTENSION agent_memory UPDATE`,
/// its statements would fail on columns the old tables lack. Checked once per
/// backend, before its first statement is prepared.
pub(crate) fn check_catalog(client: &SpiClient<'_>) -> SpiResult<()> {
    if CATALOG_MATCHES.get() {
        return Ok(());
    }
    let library = env!("CARGO_PKG_VERSION");
    let row = client
        .select(
            "SELECT extversion,
                    EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'citus')
             FROM pg_catalog.pg_extension WHERE extname = 'agent_memory'",
            None,
            &[],
        )?
        .first();
    let (catalog, citus) = if row.is_empty() {
        (None, false)
    } else {
        (row.get::<String>(1)?, row.get::<bool>(2)?.unwrap_or(false))
    };
    CITUS.set(citus);
    match catalog {
        Some(catalog) if catalog != library => pgrx::pg_sys::panic::ErrorReport::new(
            pgrx::PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            format!(
                "agent_memory: the library is version {library}, but this database's extension is version {catalog}"
            ),
            "agent_memory",
        )
        .set_hint("Run ALTER EXTENSION agent_memory UPDATE in this database (docs/operations.md: Upgrades and backups).")
        .report(pgrx::PgLogLevel::ERROR),
        _ => CATALOG_MATCHES.set(true),
    }
    Ok(())
}

/// Whether Citus is installed in this database (checked once per backend,
/// with the catalog). Some statements then take another shape: Citus's
/// router planner sends a statement whole to the node of its key only when
/// every table in it is filtered by that key, no subquery reads another
/// table from a RETURNING or a FROM-less SELECT, and a data-modifying CTE
/// is an UPDATE or a DELETE (see docs/scaling.md). The single-server shapes
/// do more in one statement.
pub fn on_citus() -> SqlResult<bool> {
    ensure_catalog()?;
    Ok(CITUS.get())
}

/// Refuse a catalog of another version (see `check_catalog`), outside an
/// SPI connection.
pub fn ensure_catalog() -> SqlResult<()> {
    if !CATALOG_MATCHES.get() {
        pgrx::Spi::connect(check_catalog).or_report()?;
    }
    Ok(())
}

/// The plan of `statement`, prepared on first use in this backend and kept
/// for the life of the backend.
fn prepared_plan(
    client: &SpiClient<'_>, statement: &'static Statement,
) -> SpiResult<Rc<OwnedPreparedStatement>> {
    // Statements are statics: their address identifies them.
    let id = statement as *const Statement as usize;
    if let Some(plan) = PREPARED.with(|plans| plans.borrow().get(&id).cloned()) {
        return Ok(plan);
    }
    check_catalog(client)?;
    let prepared = if statement.writes {
        client.prepare_mut(statement.sql, statement.args)?
    } else {
        client.prepare(statement.sql, statement.args)?
    };
    let plan = Rc::new(prepared.keep());
    PREPARED.with(|plans| plans.borrow_mut().insert(id, plan.clone()));
    Ok(plan)
}

/// Run read-only a statement built at run time, from what is known only
/// then (a type's schema, a dimension, the kinds a call reads), with
/// `args` of types `types`. Prepared
/// on first use in this backend and kept, as a Statement is, by its text:
/// a backend keeps one per text it was built to.
pub fn read_built<'conn>(
    client: &SpiClient<'conn>, sql: &str, types: &[PgOid], args: &[DatumWithOid<'_>],
) -> SqlResult<SpiTupleTable<'conn>> {
    let kept = BUILT.with(|plans| plans.borrow().get(sql).cloned());
    let plan = match kept {
        Some(plan) => plan,
        None => {
            check_catalog(client).or_report()?;
            let plan = Rc::new(client.prepare(sql, types).or_report()?.keep());
            BUILT.with(|plans| plans.borrow_mut().insert(sql.to_string(), plan.clone()));
            plan
        }
    };
    let _by_index = NoSequentialScans::hold();
    client.select(&*plan, None, args).or_report()
}

impl Statement {
    /// Run the statement read-write with `args`, prepared once per backend
    /// (see [`prepared_plan`]): it sees what committed before it began, in READ
    /// COMMITTED.
    pub fn run<'conn>(
        &'static self, client: &mut SpiClient<'conn>, args: &[DatumWithOid<'_>],
    ) -> SqlResult<SpiTupleTable<'conn>> {
        let plan = prepared_plan(client, self).or_report()?;
        let _by_index = NoSequentialScans::hold();
        client.update(&*plan, None, args).or_report()
    }

    /// As `run`, for a read-write statement that only reads, where the
    /// caller's transaction may write nothing at all (a read function's
    /// probe). `run` marks the transaction as writing (pgrx takes a
    /// transaction id at once), which makes every later statement of the
    /// call read-write too, and leaves a commit record to flush. A plan
    /// prepared read-write runs read-write by itself, with a snapshot of
    /// its own, and takes no transaction id.
    pub fn probe<'conn>(
        &'static self, client: &SpiClient<'conn>, args: &[DatumWithOid<'_>],
    ) -> SqlResult<SpiTupleTable<'conn>> {
        debug_assert!(self.writes, "a probe is a read-write statement");
        let _by_index = NoSequentialScans::hold();
        self.select(client, args)
    }

    /// As `read`, for a statement that reads a whole table (every session
    /// of a tenant): without the guard, since a sequential scan is its
    /// best plan.
    pub fn read_whole_table<'conn>(
        &'static self, client: &SpiClient<'conn>, args: &[DatumWithOid<'_>],
    ) -> SqlResult<SpiTupleTable<'conn>> {
        self.select(client, args)
    }

    /// Run the statement read-only with `args`, prepared once per backend:
    /// it reads the calling statement's snapshot.
    pub fn read<'conn>(
        &'static self, client: &SpiClient<'conn>, args: &[DatumWithOid<'_>],
    ) -> SqlResult<SpiTupleTable<'conn>> {
        let _by_index = NoSequentialScans::hold();
        self.select(client, args)
    }

    /// The prepared plan run through SPI's select: read-only, or for a
    /// plan prepared read-write, read-write without a transaction id.
    fn select<'conn>(
        &'static self, client: &SpiClient<'conn>, args: &[DatumWithOid<'_>],
    ) -> SqlResult<SpiTupleTable<'conn>> {
        let plan = prepared_plan(client, self).or_report()?;
        client.select(&*plan, None, args).or_report()
    }
}

/// Typed columns of a result row, 1-based as in SQL.
pub trait Columns {
    /// Column `ordinal`; None when it is NULL (or the result has no row).
    fn value<T: FromDatum + IntoDatum>(&self, ordinal: usize) -> SqlResult<Option<T>>;

    /// Column `ordinal`, which the statement never leaves NULL: an internal
    /// error rather than a panic if it somehow is.
    fn required<T: FromDatum + IntoDatum>(&self, ordinal: usize, column: &str) -> SqlResult<T> {
        crate::pg::args::required(self.value::<T>(ordinal)?, column)
    }
}

impl Columns for SpiTupleTable<'_> {
    fn value<T: FromDatum + IntoDatum>(&self, ordinal: usize) -> SqlResult<Option<T>> {
        if self.is_empty() {
            return Ok(None);
        }
        self.get::<T>(ordinal).or_report()
    }
}

impl Columns for SpiHeapTupleData<'_> {
    fn value<T: FromDatum + IntoDatum>(&self, ordinal: usize) -> SqlResult<Option<T>> {
        self.get::<T>(ordinal).or_report()
    }
}

/// A result row read as a tuple of typed columns, 1 to n in order, none of
/// which the statement leaves NULL. `names` name the columns for the
/// internal error a NULL would raise.
pub trait Row: Sized {
    fn read_from(row: &impl Columns, names: &[&str]) -> SqlResult<Self>;
}

macro_rules! tuple_row {
    ($($column:ident $index:tt),+) => {
        impl<$($column: FromDatum + IntoDatum),+> Row for ($($column,)+) {
            fn read_from(row: &impl Columns, names: &[&str]) -> SqlResult<Self> {
                Ok(($(row.required::<$column>(
                    $index + 1,
                    names.get($index).copied().unwrap_or("unnamed"),
                )?,)+))
            }
        }
    };
}
tuple_row!(A 0);
tuple_row!(A 0, B 1);
tuple_row!(A 0, B 1, C 2);
tuple_row!(A 0, B 1, C 2, D 3);
tuple_row!(A 0, B 1, C 2, D 3, E 4);
tuple_row!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_row!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);

/// A whole result read as tuples of required columns (see [`Row`]), so
/// that a call site reads a statement's rows in one line.
pub trait Rows {
    /// Every row.
    fn rows<R: Row>(self, names: &[&str]) -> SqlResult<Vec<R>>;
    /// The first row; None when there is none.
    fn row<R: Row>(self, names: &[&str]) -> SqlResult<Option<R>>;
}

impl Rows for SpiTupleTable<'_> {
    fn rows<R: Row>(self, names: &[&str]) -> SqlResult<Vec<R>> {
        let mut rows = Vec::with_capacity(self.len());
        for row in self {
            rows.push(R::read_from(&row, names)?);
        }
        Ok(rows)
    }

    fn row<R: Row>(self, names: &[&str]) -> SqlResult<Option<R>> {
        if self.is_empty() {
            return Ok(None);
        }
        R::read_from(&self.first(), names).map(Some)
    }
}

/// Reading the first row of a result, where "no row" is an answer (a missing
/// key), not an error as `SpiTupleTable::get` would make it.
pub trait FirstRow {
    /// Column `ordinal` (1-based) of the first row; None when there is no
    /// row or the value is NULL.
    fn first_value<T: pgrx::FromDatum + pgrx::IntoDatum>(
        self, ordinal: usize,
    ) -> SpiResult<Option<T>>;
}

impl FirstRow for pgrx::spi::SpiTupleTable<'_> {
    fn first_value<T: pgrx::FromDatum + pgrx::IntoDatum>(
        self, ordinal: usize,
    ) -> SpiResult<Option<T>> {
        if self.is_empty() { Ok(None) } else { self.first().get::<T>(ordinal) }
    }
}

/// Run a read-only statement that builds one value in column 1 only while
/// what it would take, counted first from the stored values' headers, is
/// within `agent_memory.max_result_bytes` (the last of `args`, as
/// `settings::max_result_bytes_arg` gives it). Returns the value, None
/// without a row, and 54000 when it was not built: `what_takes` names it
/// with its verb, `hint` says how to read less.
pub fn bounded_value(
    statement: &'static Statement, args: &[pgrx::datum::DatumWithOid<'_>], what_takes: &str,
    hint: &str,
) -> SqlResult<Option<crate::pg::datums::JsonbBytes>> {
    pgrx::Spi::connect(|client| {
        let table = statement.read(client, args)?;
        if table.is_empty() {
            return Ok(None);
        }
        match table.first().value(1)? {
            Some(value) => Ok(Some(value)),
            None => Err(agent_memory_core::Error::too_large_to_build(
                what_takes,
                crate::pg::settings::max_result_bytes(),
            )
            .with_hint(hint))
            .or_report(),
        }
    })
}

/// Run a kept statement in its own SPI connection and return column 1 of
/// its first row (None: no row, or NULL). Writing statements run read-write.
pub fn first_value_of<T: pgrx::FromDatum + pgrx::IntoDatum>(
    statement: &'static Statement, args: &[pgrx::datum::DatumWithOid<'_>],
) -> SqlResult<Option<T>> {
    if statement.writes {
        pgrx::Spi::connect_mut(|client| statement.run(client, args)?.first().value::<T>(1))
    } else {
        pgrx::Spi::connect(|client| statement.read(client, args)?.first().value::<T>(1))
    }
}
