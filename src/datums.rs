//! Values handed to PostgreSQL as ready-made datums.
//!
//! pgrx's `String` and `JsonB` results copy through Rust values. Results
//! of millions of rows (the tree projection) or of one big document (the
//! JSON tree) are cheaper when the extension builds the datum itself: a
//! node's id becomes a `text` datum once and is reused in every row that
//! names it; a jsonb document is written in jsonb's binary form, with no
//! JSON text to parse.

use pgrx::callconv::{BoxRet, FcInfo};
use pgrx::pgrx_sql_entity_graph::metadata::{
    ArgumentError, ReturnsError, ReturnsRef, SqlMappingRef, SqlTranslatable, TypeOrigin,
};
use pgrx::prelude::*;

/// Declares how a datum wrapper is returned and what SQL type it is.
macro_rules! returned_as {
    ($type:ident, $sql:literal) => {
        // SAFETY: the datum comes from into_datum and is returned as is.
        unsafe impl BoxRet for $type {
            unsafe fn box_into<'fcx>(self, fcinfo: &mut FcInfo<'fcx>) -> pgrx::datum::Datum<'fcx> {
                match self.into_datum() {
                    Some(datum) => unsafe { fcinfo.return_raw_datum(datum) },
                    None => fcinfo.return_null(),
                }
            }
        }

        // SAFETY: the SQL type named is the type of the datum built.
        unsafe impl SqlTranslatable for $type {
            const TYPE_IDENT: &'static str = pgrx::pgrx_resolved_type!($type);
            const TYPE_ORIGIN: TypeOrigin = TypeOrigin::External;
            const ARGUMENT_SQL: Result<SqlMappingRef, ArgumentError> =
                Err(ArgumentError::NotValidAsArgument(stringify!($type)));
            const RETURN_SQL: Result<ReturnsRef, ReturnsError> =
                Ok(ReturnsRef::One(SqlMappingRef::literal($sql)));
        }
    };
}

/// A jsonb value already in jsonb's binary form (varlena header included),
/// as `agent_memory_core::jsonb::JsonbWriter` writes it.
pub struct JsonbBytes(pub Vec<u8>);

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

/// A `text` datum holding `value`, in the current memory context.
pub fn text_datum(value: &str) -> pg_sys::Datum {
    // SAFETY: the pointer and length describe `value`; PostgreSQL copies it.
    let text =
        unsafe { pg_sys::cstring_to_text_with_len(value.as_ptr().cast(), value.len() as i32) };
    pg_sys::Datum::from(text)
}

// text_array writes varlena headers in their little-endian form.
#[cfg(target_endian = "big")]
compile_error!("agent_memory builds arrays for little-endian machines only");

/// A one-dimensional `text[]` of `elements`, each a plain (uncompressed,
/// 4-byte header) text datum such as [`text_datum`] makes, laid out as
/// `construct_array` would, without its per-element detoast checks.
///
/// # Safety
/// Every element must be a valid, plain, 4-byte-header text datum.
pub unsafe fn text_array(elements: &[pg_sys::Datum]) -> pg_sys::Datum {
    const HEADER: usize = 24; // MAXALIGN(sizeof(ArrayType) + dims + lbound), one dimension
    let int_align = |n: usize| (n + 3) & !3;
    // SAFETY: each element is a plain varlena with a 4-byte header.
    let size_of = |datum: pg_sys::Datum| unsafe {
        (*datum.cast_mut_ptr::<u32>() >> 2) as usize // VARSIZE_4B (little-endian)
    };
    // Each element starts on a 4-byte boundary, and the array ends on one
    // (construct_array pads after the last element too).
    let total = int_align(
        elements
            .iter()
            .fold(HEADER, |end, &element| int_align(end) + size_of(element)),
    );
    // SAFETY: the buffer is `total` bytes and every write below stays in it.
    unsafe {
        let array = pg_sys::palloc0(total).cast::<u8>();
        array.cast::<u32>().write((total as u32) << 2); // SET_VARSIZE (4-byte header)
        array.add(4).cast::<i32>().write(1); // ndim
        array.add(8).cast::<i32>().write(0); // dataoffset: no null bitmap
        array.add(12).cast::<pg_sys::Oid>().write(pg_sys::TEXTOID); // elemtype
        array.add(16).cast::<i32>().write(elements.len() as i32); // dims[0]
        array.add(20).cast::<i32>().write(1); // lbound[0]
        let mut end = HEADER;
        for &element in elements {
            end = int_align(end);
            let size = size_of(element);
            std::ptr::copy_nonoverlapping(element.cast_mut_ptr::<u8>(), array.add(end), size);
            end += size;
        }
        pg_sys::Datum::from(array)
    }
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
    datum: pg_sys::Datum,
    mut each: impl FnMut(&'a str),
) -> bool {
    // SAFETY: a text[] datum is a varlena; detoasting a compressed or
    // out-of-line one gives its plain form; a short (1-byte header) one
    // stays where it is.
    unsafe {
        let raw = pg_sys::pg_detoast_datum_packed(datum.cast_mut_ptr())
            .cast::<u8>()
            .cast_const();
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
            || array
                .wrapping_add(12)
                .cast::<pg_sys::Oid>()
                .read_unaligned()
                != pg_sys::TEXTOID
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
                match std::str::from_utf8(bytes) {
                    Ok(text) if calling => each(text),
                    Ok(_) => {}
                    Err(_) => return false,
                }
                at += size;
            }
        }
        true
    }
}
