//! Values handed to PostgreSQL as ready-made datums.
//!
//! pgrx's `String` and `JsonB` results copy through Rust values. Results
//! of millions of rows (the tree projection) or of one big document (the
//! JSON tree) are cheaper when the extension builds the datum itself: a
//! node's id becomes a `text` datum once and is reused in every row that
//! names it; a jsonb document is written in jsonb's binary form, with no
//! JSON text to parse.

use pgrx::callconv::{Arg, ArgAbi, BoxRet, FcInfo};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

use agent_memory_core::jsonb;

/// Declares the SQL type of a datum wrapper, as an argument and as a result.
macro_rules! translatable {
    ($type:ident, $argument:expr, $result:expr) => {
        // SAFETY: the SQL type named is the type of the datum taken or built.
        unsafe impl SqlTranslatable for $type {
            const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!($type);
            const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
            const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> = $argument;
            const RETURN_SQL: Result<ReturnsRef, ReturnsError> = $result;
        }
    };
}

/// Declares a datum wrapper that functions return as SQL type `$sql` (and,
/// with `and taken`, also take as an argument).
macro_rules! returned_as {
    ($type:ident, $sql:literal) => {
        returned_as!(@boxed $type);
        translatable!(
            $type,
            Err(ArgumentError::NotValidAsArgument(stringify!($type))),
            Ok(ReturnsRef::One(SqlMappingRef::literal($sql)))
        );
    };
    ($type:ident, $sql:literal, and taken) => {
        returned_as!(@boxed $type);
        translatable!(
            $type,
            Ok(SqlMappingRef::literal($sql)),
            Ok(ReturnsRef::One(SqlMappingRef::literal($sql)))
        );
    };
    (@boxed $type:ident) => {
        // SAFETY: the datum comes from into_datum and is returned as is.
        unsafe impl BoxRet for $type {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
                match self.into_datum() {
                    Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
                    None => fcinfo.return_null(),
                }
            }
        }
    };
}

/// Reads a wrapper from a jsonb datum detoasted as [`JsonbArg`] takes it.
macro_rules! read_from_jsonb_arg {
    ($type:ident, |$arg:ident| $make:expr) => {
        impl FromDatum for $type {
            unsafe fn from_polymorphic_datum(
                datum: pg_sys::Datum, is_null: bool, typoid: pg_sys::Oid,
            ) -> Option<Self> {
                // SAFETY: a jsonb datum, as JsonbArg takes it.
                unsafe { JsonbArg::from_polymorphic_datum(datum, is_null, typoid) }
                    .map(|$arg| $make)
            }
        }
    };
}

/// Declares a datum wrapper that functions take as an argument of SQL type
/// `$sql` and never return.
macro_rules! taken_as {
    ($type:ident, $sql:literal) => {
        translatable!($type, Ok(SqlMappingRef::literal($sql)), Err(ReturnsError::Datum));
    };
}

/// A jsonb value already in jsonb's binary form (varlena header included),
/// as `agent_memory_core::jsonb::JsonbWriter` writes it.
pub struct JsonbBytes(pub Vec<u8>);

impl JsonbBytes {
    /// A value built in Rust, through jsonb_in (for the rare paths that do
    /// not have the stored bytes).
    pub fn from_value(value: serde_json::Value) -> JsonbBytes {
        let datum = JsonB(value)
            .into_datum()
            .unwrap_or_else(|| raise(agent_memory_core::Error::internal("jsonb_in returned NULL")));
        // jsonb_in made a plain varlena with a 4-byte header, as JsonbArg
        // holds.
        JsonbBytes(JsonbArg(datum).bytes().to_vec())
    }
}

impl IntoDatum for JsonbBytes {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        // SAFETY: a fresh allocation of the value's size, filled by copy.
        unsafe {
            let copy = pg_sys::palloc(self.0.len()).cast::<u8>();
            std::ptr::copy_nonoverlapping(self.0.as_ptr(), copy, self.0.len());
            Some(pg_sys::Datum::from(copy))
        }
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

returned_as!(JsonbBytes, "jsonb");

// The bytes are copied out.
read_from_jsonb_arg!(JsonbBytes, |arg| JsonbBytes(arg.bytes().to_vec()));

/// A jsonb argument taken as it is: detoasted, not decoded. It can say the
/// JSON type of its root and be handed on to a statement unchanged; only
/// what needs to look inside decodes it ([`JsonbArg::decode`]). Valid for
/// the call that received it.
pub struct JsonbArg(pg_sys::Datum);

impl JsonbArg {
    /// The value's bytes, varlena header included.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the datum is a detoasted jsonb with a 4-byte header,
        // which holds its total size.
        unsafe {
            let at = self.0.cast_mut_ptr::<u8>().cast_const();
            let size = (at.cast::<u32>().read_unaligned() >> 2) as usize & 0x3FFF_FFFF;
            std::slice::from_raw_parts(at, size)
        }
    }

    pub fn root_type(&self) -> Option<agent_memory_core::jsonb::JsonType> {
        agent_memory_core::jsonb::root_type(self.bytes())
    }

    /// The value as serde JSON, read from its binary form.
    pub fn decode(&self) -> Option<serde_json::Value> {
        Some(value_of(self.bytes(), self.0))
    }

    /// Raise 54000 when the value nests more than `jsonb::MAX_DEPTH` levels.
    fn check_depth(&self, index: usize) {
        if jsonb::nested_deeper_than(self.bytes(), jsonb::MAX_DEPTH) {
            raise(jsonb::too_deep(&format!("jsonb argument {}", index + 1), jsonb::MAX_DEPTH));
        }
    }
}

impl FromDatum for JsonbArg {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum, is_null: bool, _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        if is_null {
            return None;
        }
        // SAFETY: a jsonb datum; detoasting gives the whole value with a
        // 4-byte header (a copy when it was short, compressed or toasted).
        let plain = unsafe { pg_sys::pg_detoast_datum(datum.cast_mut_ptr()) };
        Some(JsonbArg(pg_sys::Datum::from(plain)))
    }
}

impl IntoDatum for &JsonbArg {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(self.0)
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

// SAFETY: unboxed with FromDatum, as pgrx unboxes its own JsonB.
unsafe impl<'fcx> ArgAbi<'fcx> for JsonbArg {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        let value: JsonbArg = unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"));
        value.check_depth(index);
        value
    }
}

taken_as!(JsonbArg, "jsonb");

/// A tool's request (jsonb): like [`JsonbArg`], but a request nested too
/// deep is not an SQL error at the call. The tools answer every bad request
/// in their own format (an envelope, a refusal text), this one too.
pub struct ToolRequest(JsonbArg);

/// A request nested more than `jsonb::MAX_DEPTH` levels: it is not decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooDeep;

impl ToolRequest {
    /// The request's top-level fields, read in place (None: not an
    /// object).
    pub fn fields(&self) -> Result<Option<Vec<(&str, jsonb::Field<'_>)>>, TooDeep> {
        if jsonb::nested_deeper_than(self.0.bytes(), jsonb::MAX_DEPTH) {
            return Err(TooDeep);
        }
        Ok(jsonb::object_fields(self.0.bytes()).unwrap_or(None))
    }

    /// The request as serde JSON.
    pub fn decode(&self) -> Result<serde_json::Value, TooDeep> {
        if jsonb::nested_deeper_than(self.0.bytes(), jsonb::MAX_DEPTH) {
            return Err(TooDeep);
        }
        Ok(self.0.decode().unwrap_or(serde_json::Value::Null))
    }
}

read_from_jsonb_arg!(ToolRequest, |arg| ToolRequest(arg));

// SAFETY: unboxed with FromDatum, as JsonbArg, without the depth check.
unsafe impl<'fcx> ArgAbi<'fcx> for ToolRequest {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        let index = arg.index();
        unsafe { arg.unbox_arg_using_from_datum() }
            .unwrap_or_else(|| panic!("argument {index} must not be null"))
    }
}

taken_as!(ToolRequest, "jsonb");

/// Raise `error` as the SQL error of its kind (from places that cannot
/// return a `SqlResult`, such as datum conversions).
fn raise(error: agent_memory_core::Error) -> ! {
    crate::pg::error::report(error).report(PgLogLevel::ERROR);
    unreachable!("an ERROR report does not return")
}

/// A jsonb value as serde JSON: pgrx's `JsonB`, used in its place
/// everywhere, except that failures have their SQLSTATE instead of
/// reaching clients as internal errors (pgrx's panics): an argument nested
/// more than `jsonb::MAX_DEPTH` levels is refused before it is decoded, and
/// a stored value too deep for serde_json to decode (more than 128 levels,
/// only possible for rows written without the extension's functions) is
/// 54000 too.
#[derive(Debug, Clone)]
pub struct JsonB(pub serde_json::Value);

// The value is decoded from its bytes.
read_from_jsonb_arg!(JsonB, |arg| JsonB(value_of(arg.bytes(), arg.0)));

/// A jsonb value as serde JSON: read from its binary form, or (for a layout
/// that reader refuses, which PostgreSQL should never write) through its
/// text; nested deeper than serde_json reads is 54000 either way.
fn value_of(bytes: &[u8], datum: pg_sys::Datum) -> serde_json::Value {
    match jsonb::to_value(bytes) {
        Ok(value) => value,
        Err(jsonb::ReadError::TooDeep) => {
            raise(jsonb::too_deep("a jsonb value", jsonb::READ_MAX_DEPTH))
        }
        Err(jsonb::ReadError::Malformed) => value_through_text(datum),
    }
}

fn value_through_text(datum: pg_sys::Datum) -> serde_json::Value {
    // SAFETY: a jsonb datum; jsonb_out gives its text in the current
    // memory context.
    let text = unsafe {
        pgrx::direct_function_call::<&core::ffi::CStr>(pg_sys::jsonb_out, &[Some(datum)])
    }
    .unwrap_or_else(|| raise(agent_memory_core::Error::internal("jsonb_out returned NULL")));
    let text = text.to_str().unwrap_or_else(|_| {
        raise(agent_memory_core::Error::internal("the text of a jsonb value is not UTF-8"))
    });
    match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => {
            raise(jsonb::too_deep("a jsonb value", jsonb::READ_MAX_DEPTH))
        }
        Err(e) => {
            raise(agent_memory_core::Error::internal(format!("cannot read a jsonb value: {e}")))
        }
    }
}

impl IntoDatum for JsonB {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        pgrx::JsonB(self.0).into_datum()
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONBOID
    }
}

returned_as!(JsonB, "jsonb", and taken);

// SAFETY: unboxed with FromDatum after the depth check, as JsonbArg.
unsafe impl<'fcx> ArgAbi<'fcx> for JsonB {
    unsafe fn unbox_arg_unchecked(arg: Arg<'_, 'fcx>) -> Self {
        // SAFETY: as for JsonbArg, whose unboxing checks the depth.
        let raw = unsafe { JsonbArg::unbox_arg_unchecked(arg) };
        JsonB(raw.decode().expect("a non-null jsonb decodes"))
    }
}

/// A `json` value given as its exact text (key order and spacing kept, as
/// `jsonb` would not).
pub struct JsonText(pub String);

impl IntoDatum for JsonText {
    fn into_datum(self) -> Option<pg_sys::Datum> {
        Some(text_datum(&self.0))
    }

    fn type_oid() -> pg_sys::Oid {
        pg_sys::JSONOID
    }
}

returned_as!(JsonText, "json");

/// A `text` datum holding `value`, in the current memory context.
/// The bytes of `value` as a `numeric` datum (varlena header included), as
/// `JsonbWriter::numeric` takes them.
pub fn numeric_bytes(value: i64) -> Vec<u8> {
    // SAFETY: int8_numeric takes one int8 and returns a plain (4-byte
    // header) numeric varlena.
    unsafe {
        let datum = pgrx::fcinfo::direct_function_call_as_datum(
            pg_sys::int8_numeric,
            &[Some(pg_sys::Datum::from(value))],
        )
        .unwrap_or(pg_sys::Datum::from(0));
        let ptr = datum.cast_mut_ptr::<u8>();
        if ptr.is_null() {
            return Vec::new();
        }
        let size = (ptr.cast::<u32>().read_unaligned() >> 2) as usize;
        std::slice::from_raw_parts(ptr, size).to_vec()
    }
}

pub fn text_datum(value: &str) -> pg_sys::Datum {
    // SAFETY: the pointer and length describe `value`; PostgreSQL copies it.
    let text =
        unsafe { pg_sys::cstring_to_text_with_len(value.as_ptr().cast(), value.len() as i32) };
    pg_sys::Datum::from(text)
}

// The builders below write varlena headers in their little-endian form.
#[cfg(target_endian = "big")]
compile_error!("agent_memory builds varlenas for little-endian machines only");

/// Many `text` values built once into one aligned buffer (no allocation or
/// call into PostgreSQL per value), each usable as a datum, or copied
/// whole into an array, for as long as the block lives.
pub struct TextBlock {
    /// Each value as a plain varlena: a 4-byte header, the bytes, zero
    /// padding to a 4-byte boundary.
    words: Vec<u32>,
    /// Where each value starts, and its length in words.
    spans: Vec<(u32, u32)>,
}

impl TextBlock {
    pub fn new<'a>(values: impl Iterator<Item = &'a str>) -> TextBlock {
        let mut block = TextBlock { words: Vec::new(), spans: Vec::new() };
        for value in values {
            let start = block.words.len();
            block.words.push(((value.len() as u32) + 4) << 2); // SET_VARSIZE
            block.words.resize(start + 1 + value.len().div_ceil(4), 0);
            // SAFETY: the words just added hold at least value.len() bytes,
            // and u8 has no alignment requirement.
            unsafe {
                let bytes = block.words.as_mut_ptr().add(start + 1).cast::<u8>();
                std::ptr::copy_nonoverlapping(value.as_ptr(), bytes, value.len());
            }
            block.spans.push((start as u32, (block.words.len() - start) as u32));
        }
        block
    }

    /// Value `i` as a `text` datum, valid while the block lives.
    pub fn datum(&self, i: u32) -> pg_sys::Datum {
        let (start, _) = self.spans[i as usize];
        pg_sys::Datum::from(self.words[start as usize..].as_ptr())
    }

    /// Value `i` as its varlena words (header and padding included).
    fn words(&self, i: u32) -> &[u32] {
        let (start, len) = self.spans[i as usize];
        &self.words[start as usize..(start + len) as usize]
    }
}

/// A one-dimensional `text[]` of values of `block`, laid out as
/// `construct_array` lays it out, built in `out` (reused from row to row);
/// the datum is valid until `out` changes.
pub fn text_array(out: &mut Vec<u32>, block: &TextBlock, elements: &[u32]) -> pg_sys::Datum {
    out.clear();
    // Header: size (set below), ndim 1, no null bitmap, element type,
    // dims[0], lbound[0]; 24 bytes, so the first element is aligned.
    out.extend_from_slice(&[0, 1, 0, pg_sys::TEXTOID.to_u32(), elements.len() as u32, 1]);
    for &element in elements {
        // Each value is whole words, so every element starts on a 4-byte
        // boundary and the array ends on one, as construct_array pads.
        out.extend_from_slice(block.words(element));
    }
    out[0] = ((out.len() * 4) as u32) << 2; // SET_VARSIZE
    pg_sys::Datum::from(out.as_ptr())
}

/// A one-dimensional `real[]` of `values` (at least one), laid out as
/// `construct_array` lays it out, built in `out`: one buffer, not an
/// allocation and a call into PostgreSQL per element. The datum is valid
/// until `out` changes.
pub fn float4_array(out: &mut Vec<u32>, values: &[f32]) -> pg_sys::Datum {
    debug_assert!(!values.is_empty(), "an empty array has no dimension");
    out.clear();
    // Header: size (set below), ndim 1, no null bitmap, element type,
    // dims[0], lbound[0]; 24 bytes, so the first element is aligned.
    out.extend_from_slice(&[0, 1, 0, pg_sys::FLOAT4OID.to_u32(), values.len() as u32, 1]);
    // A real is passed by value and stored as its 4 bytes.
    out.extend(values.iter().map(|value| value.to_bits()));
    out[0] = ((out.len() * 4) as u32) << 2; // SET_VARSIZE
    pg_sys::Datum::from(out.as_ptr())
}

/// Text bytes read from the database as a `str`. A UTF-8 database only
/// stores valid UTF-8 (PostgreSQL checks encodings on input), so there the
/// bytes are taken as they are; elsewhere they are checked.
pub fn database_str(bytes: &[u8]) -> Option<&str> {
    thread_local! {
        // SAFETY: a plain read of the database's encoding.
        static UTF8: bool = unsafe { pg_sys::GetDatabaseEncoding() } == pg_sys::pg_enc::PG_UTF8 as i32;
    }
    if UTF8.with(|utf8| *utf8) {
        // SAFETY: the database encoding is UTF-8 (see above).
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// The payload of a varlena stored inline and uncompressed (1- or 4-byte
/// header), read in place; None when it is compressed or stored out of
/// line, and so needs detoasting.
///
/// # Safety
/// `datum` must point to a varlena that outlives `'a`.
pub unsafe fn inline_payload<'a>(datum: pg_sys::Datum) -> Option<&'a [u8]> {
    // SAFETY: a varlena starts with its header; the sizes come from it.
    unsafe {
        let ptr = datum.cast_mut_ptr::<u8>().cast_const();
        let first = ptr.read();
        if first & 0x01 == 0x01 {
            if first == 0x01 {
                return None; // a TOAST pointer
            }
            let size = ((first >> 1) & 0x7F) as usize;
            Some(std::slice::from_raw_parts(ptr.add(1), size.saturating_sub(1)))
        } else if first & 0x03 == 0x00 {
            let size = (ptr.cast::<u32>().read_unaligned() >> 2) as usize;
            Some(std::slice::from_raw_parts(ptr.add(4), size.saturating_sub(4)))
        } else {
            None // compressed
        }
    }
}

/// A text datum as a `str`, read where it lies, or detoasted first when it
/// is stored compressed or out of line (the copy goes to the current
/// memory context); None when it is not UTF-8.
///
/// # Safety
/// `datum` must be a text varlena that outlives `'a`.
unsafe fn text_in_place<'a>(datum: pg_sys::Datum) -> Option<&'a str> {
    // SAFETY: the caller vouches for the datum.
    unsafe {
        let plain = if inline_payload(datum).is_some() {
            datum
        } else {
            pg_sys::Datum::from(pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr()))
        };
        inline_payload(plain).and_then(database_str)
    }
}

/// Column `ordinal` (1-based, of a text type) of the current row of an SPI
/// result, read in place (detoasted first when stored compressed or out of
/// line); None for NULL. `SpiTupleTable::get::<&str>` costs several times
/// more: it switches memory contexts and checks the type on every call.
pub fn text_at<'a>(
    table: &'a pgrx::spi::SpiTupleTable<'_>, ordinal: usize,
) -> crate::pg::error::SqlResult<Option<&'a str>> {
    use crate::pg::error::OrReport;
    let Some(datum) = table.get_datum_by_ordinal(ordinal).or_report()? else {
        return Ok(None);
    };
    // SAFETY: the datum is a text value of the result, which lives as long
    // as `table`; a detoasted copy lives in the current memory context,
    // which outlives this call's use of it.
    let text = unsafe { text_in_place(datum) };
    text.map(Some)
        .ok_or_else(|| agent_memory_core::Error::internal("a text column is not UTF-8 text"))
        .or_report()
}

/// The first column, as text, of every row of the last SPI result, read in
/// place (a value stored compressed or out of line is detoasted first);
/// NULLs are left out; None when a value is not UTF-8. Reading each row
/// through `SpiTupleTable` (which builds a tuple of entries per row) costs
/// several times more.
///
/// # Safety
/// The last SPI result has `rows` rows, its first column is of a text type,
/// and it lives as long as `'a`.
pub unsafe fn last_result_texts<'a>(rows: usize) -> Option<Vec<&'a str>> {
    let mut texts = Vec::with_capacity(rows);
    // SAFETY: the caller vouches for the result; every row is read through
    // PostgreSQL's own accessor.
    unsafe {
        let table = pg_sys::SPI_tuptable;
        if table.is_null() || rows == 0 {
            return Some(texts);
        }
        let tuples = std::slice::from_raw_parts((*table).vals, rows);
        for &tuple in tuples {
            let mut is_null = false;
            let datum = pg_sys::SPI_getbinval(tuple, (*table).tupdesc, 1, &mut is_null);
            if is_null {
                continue;
            }
            texts.push(text_in_place(datum)?);
        }
    }
    Some(texts)
}

/// Call `each` with every element of a one-dimensional `text[]` without
/// NULLs, read in place. Returns false, having called nothing, for any
/// other layout (NULLs, more dimensions, an unexpected element header),
/// which the caller then reads the slow way.
///
/// # Safety
/// `datum` must be a valid `text[]` datum; the elements passed to `each`
/// live as long as it does.
pub unsafe fn for_each_text_element<'a>(
    datum: pg_sys::Datum, mut each: impl FnMut(&'a str),
) -> bool {
    // SAFETY: a text[] datum is a varlena; detoasting a compressed or
    // out-of-line one gives its plain form; a short (1-byte header) one
    // stays where it is.
    unsafe {
        let raw = if inline_payload(datum).is_some() {
            datum.cast_mut_ptr::<u8>().cast_const()
        } else {
            pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr()).cast::<u8>().cast_const()
        };
        let first = raw.read();
        // The array's payload, and its size as if it had a 4-byte header:
        // offsets inside an array (element alignment) count from there.
        let (payload, total) = if first & 0x01 == 0x01 {
            if first == 0x01 {
                return false; // an external pointer: not expected after detoast
            }
            (raw.add(1), ((first >> 1) & 0x7F) as usize - 1 + 4)
        } else {
            let header = raw.cast::<u32>().read_unaligned();
            if header & 3 != 0 {
                return false; // compressed: not expected after detoast
            }
            (raw.add(4), (header >> 2) as usize)
        };
        // Byte `at` of the array counted as with a 4-byte header.
        let array = payload.wrapping_sub(4);
        if total < 16 {
            return false;
        }
        let ndim = array.wrapping_add(4).cast::<i32>().read_unaligned();
        let dataoffset = array.wrapping_add(8).cast::<i32>().read_unaligned();
        if ndim == 0 {
            return true; // an empty array
        }
        if ndim != 1
            || total < 24
            || dataoffset != 0
            || array.wrapping_add(12).cast::<pg_sys::Oid>().read_unaligned() != pg_sys::TEXTOID
        {
            return false;
        }
        let count = array.wrapping_add(16).cast::<i32>().read_unaligned() as usize;
        let int_align = |n: usize| (n + 3) & !3;
        // Two passes: the first checks every element, so that a layout this
        // reader does not handle is refused before `each` sees anything.
        for calling in [false, true] {
            let mut at = 24;
            for _ in 0..count {
                at = int_align(at);
                if at + 4 > total {
                    return false;
                }
                let element = array.wrapping_add(at).cast::<u32>().read_unaligned();
                let size = (element >> 2) as usize;
                if element & 3 != 0 || size < 4 || at + size > total {
                    return false;
                }
                let bytes: &'a [u8] =
                    std::slice::from_raw_parts(array.wrapping_add(at + 4), size - 4);
                match database_str(bytes) {
                    Some(text) if calling => each(text),
                    Some(_) => {}
                    None => return false,
                }
                at += size;
            }
        }
        true
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Reading jsonb's binary form gives what its text (jsonb_out) parses
    /// to, numbers digit for digit included.
    #[pg_test]
    fn binary_jsonb_reads_as_its_text_parses() {
        let wide: String = format!(
            "{{{}}}",
            (0..70).map(|i| format!("\"key{i}\": {i}.{i}")).collect::<Vec<_>>().join(", ")
        );
        let documents = [
            "0",
            "-0",
            "1.5",
            "-12345.678",
            "1e20",
            "1.0e-10",
            "-123456789012345678901234567890.123456789",
            "0.00001",
            "3.000",
            "100",
            "9999",
            "10000",
            "1e-300",
            "true",
            "null",
            r#""São Paulo \"quoted\" \\ \n\t é""#,
            "[]",
            "{}",
            r#"[1, "two", [3, [4, {"five": 5.0}]], null, false]"#,
            r#"{"a": {"b": {"c": [{"d": -0.5}]}}, "": "", "emoji": "🦀"}"#,
            &wide,
        ];
        for text in documents {
            let text_c = std::ffi::CString::new(text).expect("no NUL");
            // SAFETY: jsonb_in takes a NUL-terminated C string.
            let datum = unsafe {
                pgrx::fcinfo::direct_function_call_as_datum(
                    pg_sys::jsonb_in,
                    &[Some(pg_sys::Datum::from(text_c.as_ptr()))],
                )
            }
            .expect("jsonb_in");
            // SAFETY: a jsonb datum made just above.
            let arg = unsafe {
                <super::JsonbArg as pgrx::FromDatum>::from_polymorphic_datum(
                    datum,
                    false,
                    pg_sys::JSONBOID,
                )
            }
            .expect("not null");
            let binary = agent_memory_core::jsonb::to_value(arg.bytes()).expect("readable");
            let through_text = super::value_through_text(datum);
            assert_eq!(binary, through_text, "{text}");
            assert_eq!(binary.to_string(), through_text.to_string(), "{text}");
        }
    }
}

/// A PostgreSQL timestamptz as ISO text (3 or 6 fraction digits).
pub fn iso_of(timestamp: TimestampWithTimeZone, fraction_digits: u32) -> String {
    let micros: i64 = timestamp.into_inner();
    agent_memory_core::time::iso_utc(
        micros.saturating_add(agent_memory_core::time::POSTGRES_EPOCH_UNIX_MICROS),
        fraction_digits,
    )
}

extension_sql!(
    r#"
-- The bytes a jsonb value takes once read whole, from its header alone:
-- the length octet_length reads of any varlena, without fetching or
-- decompressing the value. The functions that build one value from many
-- stored ones add these up first, to refuse past max_result_bytes before
-- building anything.
CREATE FUNCTION agent_memory.value_bytes(value jsonb) RETURNS integer
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE internal AS 'byteaoctetlen';
"#,
    name = "value_bytes"
);
