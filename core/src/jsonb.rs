//! PostgreSQL's binary `jsonb` format, written directly.
//!
//! A document of a million objects (the JSON tree of a large graph) spends
//! most of its time in `jsonb_in` when it is handed over as text: lexing,
//! building an in-memory tree, sorting keys, converting. Writing the binary
//! form in one pass skips all of it. The layout is PostgreSQL's (see
//! `src/include/utils/jsonb.h` and `convertJsonbValue` in `jsonb_util.c`):
//!
//! * a container is a `u32` header (element count and a kind flag) followed
//!   by one `u32` entry per element (objects: all keys, then all values),
//!   then the elements' data, keys first;
//! * an entry holds the element's type and, for every 32nd element, the end
//!   offset of its data (flagged), else its length;
//! * containers and numerics start on a 4-byte boundary (the padding counts
//!   as the element's data); strings are raw UTF-8;
//! * object keys are sorted by length, then bytewise, without duplicates.
//!
//! The writer streams: the caller opens a container with its element count,
//! writes each element (keys in sorted order, then the values in the same
//! order), and closes it. The extension's tests compare its output byte for
//! byte with what `jsonb_in` makes of the same document.

use crate::{Error, Result};

const JENTRY_OFFLENMASK: usize = 0x0FFF_FFFF;
const JENTRY_HAS_OFF: u32 = 0x8000_0000;
const JENTRY_ISSTRING: u32 = 0x0000_0000;
const JENTRY_ISNUMERIC: u32 = 0x1000_0000;
const JENTRY_ISNULL: u32 = 0x4000_0000;
const JENTRY_ISCONTAINER: u32 = 0x5000_0000;
const JB_FOBJECT: u32 = 0x2000_0000;
const JB_FARRAY: u32 = 0x4000_0000;
const JB_OFFSET_STRIDE: usize = 32;
/// Most elements (or pairs) a container may hold.
const JB_CMASK: usize = 0x0FFF_FFFF;

const JB_FSCALAR: u32 = 0x1000_0000;
const JENTRY_TYPEMASK: u32 = 0x7000_0000;
const JENTRY_ISBOOL_FALSE: u32 = 0x2000_0000;
const JENTRY_ISBOOL_TRUE: u32 = 0x3000_0000;

/// The JSON type of a jsonb value's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonType {
    Object,
    Array,
    String,
    Number,
    Boolean,
    Null,
}

impl JsonType {
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Object => "object",
            JsonType::Array => "array",
            JsonType::String => "string",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
            JsonType::Null => "null",
        }
    }
}

/// The type of the root of a jsonb varlena (4-byte header included), read
/// from its container header without decoding the value; None when the
/// bytes are too short to be jsonb. A scalar is stored as a one-element
/// array flagged scalar: its type is in that element's entry.
pub fn root_type(varlena: &[u8]) -> Option<JsonType> {
    let word =
        |at: usize| varlena.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let header = word(4)?;
    if header & JB_FSCALAR == 0 {
        return Some(if header & JB_FOBJECT != 0 { JsonType::Object } else { JsonType::Array });
    }
    Some(match word(8)? & JENTRY_TYPEMASK {
        JENTRY_ISSTRING => JsonType::String,
        JENTRY_ISNUMERIC => JsonType::Number,
        JENTRY_ISBOOL_FALSE | JENTRY_ISBOOL_TRUE => JsonType::Boolean,
        JENTRY_ISNULL => JsonType::Null,
        _ => return None,
    })
}

/// Most levels of nesting the extension takes in a jsonb argument. The
/// documents it composes from stored values (`build_context`,
/// `messages_json`, `kv_get_all`, ...) wrap a value in at most a few more
/// levels and are decoded with serde_json, which refuses more than 128: a
/// limit well below that keeps everything stored readable.
pub const MAX_DEPTH: usize = 100;

/// The error for a jsonb value nested more than `max` levels deep.
pub fn too_deep(what: &str, max: usize) -> Error {
    Error::limit(format!("{what} is nested more than {max} levels deep"))
        .with_detail("agent_memory takes JSON values nested at most that deep.")
}

/// Whether a jsonb varlena (4-byte header included) nests arrays and
/// objects more than `max` levels deep (`[]` is one level, a scalar none).
/// Walks the containers' entries without recursion or decoding; bytes that
/// are not jsonb count as not too deep (PostgreSQL made the value).
pub fn nested_deeper_than(varlena: &[u8], max: usize) -> bool {
    let word =
        |at: usize| varlena.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    // (where a container's header is, its depth)
    let mut pending = vec![(4usize, 1usize)];
    while let Some((at, depth)) = pending.pop() {
        let Some(header) = word(at) else { continue };
        let scalar = header & JB_FSCALAR != 0;
        if !scalar && depth > max {
            return true;
        }
        let count = (header as usize) & JB_CMASK;
        let entries = if header & JB_FOBJECT != 0 { 2 * count } else { count };
        let data = at + 4 + 4 * entries;
        // An element's data starts where the previous one's ends; an entry
        // holds either that end (flagged) or the element's length.
        let mut end = 0usize;
        for i in 0..entries {
            let Some(entry) = word(at + 4 + 4 * i) else {
                break;
            };
            let start = end;
            let field = (entry as usize) & JENTRY_OFFLENMASK;
            end = if entry & JENTRY_HAS_OFF != 0 { field } else { end + field };
            if entry & JENTRY_TYPEMASK == JENTRY_ISCONTAINER {
                // A nested container starts on a 4-byte boundary of the data.
                let child_depth = if scalar { depth } else { depth + 1 };
                pending.push((data + start.next_multiple_of(4), child_depth));
            }
        }
    }
    false
}

/// An open container.
struct Frame {
    /// Where its entries start in the buffer.
    entries_at: usize,
    /// Its elements: pairs * 2 for an object.
    count: usize,
    /// Pairs for an object (keys come first), None for an array.
    pairs: Option<usize>,
    /// Elements written so far.
    written: usize,
    /// Bytes of the elements' data so far.
    total: usize,
    /// Where the element being written started.
    element_at: usize,
}

/// A jsonb value under construction; [`JsonbWriter::finish`] gives the
/// varlena bytes (4-byte header included).
pub struct JsonbWriter {
    buf: Vec<u8>,
    stack: Vec<Frame>,
    /// The previous key of each open object (for the sort check).
    last_key: Vec<Option<(usize, usize)>>,
    closed_root: bool,
    error: Option<Error>,
    /// The most bytes the document may take, and the error past them.
    budget: Option<(usize, Error)>,
}

impl Default for JsonbWriter {
    fn default() -> Self {
        JsonbWriter::with_capacity(0)
    }
}

fn too_big() -> Error {
    Error::limit("the JSON document exceeds jsonb's size limit (256 MB)")
}

impl JsonbWriter {
    pub fn with_capacity(bytes: usize) -> JsonbWriter {
        let mut buf = Vec::with_capacity(bytes.max(64));
        buf.extend_from_slice(&[0; 4]); // the varlena header, set at the end
        JsonbWriter {
            buf,
            stack: Vec::new(),
            last_key: Vec::new(),
            closed_root: false,
            error: None,
            budget: None,
        }
    }

    /// Stop with `error` (and let go of what was written) once the
    /// document takes more than `max_bytes`: a caller's bound on what one
    /// value may hold in memory, checked as each element ends.
    pub fn with_budget(mut self, max_bytes: usize, error: Error) -> JsonbWriter {
        self.budget = Some((max_bytes, error));
        self
    }

    /// Record the document's first error and stop writing it: what was
    /// written is let go, and every later call writes nothing, so a
    /// document past jsonb's size limit costs no more memory than the limit.
    fn fail(&mut self, error: Error) {
        if self.error.is_none() {
            self.error = Some(error);
        }
        self.buf.truncate(4);
        self.buf.shrink_to_fit();
        self.stack.clear();
        self.last_key.clear();
    }

    fn stopped(&self) -> bool {
        self.error.is_some()
    }

    fn pad_to_int(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// Start an element of the open container. The root must be a
    /// container (a scalar root needs a wrapper this writer does not make).
    fn begin_element(&mut self) {
        if let Some(frame) = self.stack.last_mut() {
            frame.element_at = self.buf.len();
        } else {
            self.fail(Error::internal("jsonb writer: the root must be an object or array"));
        }
    }

    /// Start a container: an element of the open one, or the root.
    fn begin_container_element(&mut self) {
        if !self.stack.is_empty() {
            self.begin_element();
        } else if self.closed_root {
            self.fail(Error::internal("jsonb writer: a second root value"));
        }
    }

    /// Record the element just written as entry `written` of its container.
    fn end_element(&mut self, kind: u32) {
        if self.stopped() {
            return;
        }
        let Some(frame) = self.stack.last_mut() else {
            self.closed_root = true;
            return;
        };
        if frame.written >= frame.count {
            let error = Error::internal("jsonb writer: more elements than declared");
            self.fail(error);
            return;
        }
        let len = self.buf.len() - frame.element_at;
        frame.total += len;
        if frame.total > JENTRY_OFFLENMASK {
            self.fail(too_big());
            return;
        }
        if let Some((max_bytes, error)) = &self.budget
            && self.buf.len() > *max_bytes
        {
            let error = error.clone();
            self.fail(error);
            return;
        }
        let entry = if frame.written % JB_OFFSET_STRIDE == 0 {
            kind | JENTRY_HAS_OFF | frame.total as u32
        } else {
            kind | len as u32
        };
        let at = frame.entries_at + 4 * frame.written;
        self.buf[at..at + 4].copy_from_slice(&entry.to_ne_bytes());
        frame.written += 1;
    }

    fn begin_container(&mut self, count: usize, pairs: Option<usize>, flag: u32) {
        if self.stopped() {
            return;
        }
        self.begin_container_element();
        let declared = pairs.unwrap_or(count);
        if declared > JB_CMASK {
            self.fail(too_big());
        }
        if self.stopped() {
            return;
        }
        self.pad_to_int();
        self.buf.extend_from_slice(&((declared as u32 & JB_CMASK as u32) | flag).to_ne_bytes());
        let entries_at = self.buf.len();
        self.buf.resize(entries_at + 4 * count, 0);
        self.stack.push(Frame { entries_at, count, pairs, written: 0, total: 0, element_at: 0 });
        self.last_key.push(None);
    }

    /// Open an object of `pairs` key-value pairs: write the keys (sorted by
    /// length, then bytewise, each once), then the values in the same order.
    pub fn begin_object(&mut self, pairs: usize) {
        self.begin_container(2 * pairs, Some(pairs), JB_FOBJECT);
    }

    /// Open an array of `items` elements.
    pub fn begin_array(&mut self, items: usize) {
        self.begin_container(items, None, JB_FARRAY);
    }

    /// Close the innermost open container.
    pub fn end(&mut self) {
        if self.stopped() {
            return;
        }
        let Some(frame) = self.stack.pop() else {
            self.fail(Error::internal("jsonb writer: end without a container"));
            return;
        };
        self.last_key.pop();
        if frame.written != frame.count {
            self.fail(Error::internal("jsonb writer: fewer elements than declared"));
        }
        // The container's own length, padding included, goes in the
        // parent's entry: end_element measures it from where it started.
        self.end_element(JENTRY_ISCONTAINER);
    }

    /// A string: an object key while the object's keys are being written,
    /// otherwise a value.
    pub fn string(&mut self, value: &str) {
        if self.stopped() {
            return;
        }
        self.begin_element();
        let writing_a_key = self
            .stack
            .last()
            .is_some_and(|frame| frame.pairs.is_some_and(|pairs| frame.written < pairs));
        if writing_a_key {
            self.check_key_order(value);
        }
        if self.stopped() {
            return;
        }
        self.buf.extend_from_slice(value.as_bytes());
        self.end_element(JENTRY_ISSTRING);
    }

    fn check_key_order(&mut self, key: &str) {
        let start = self.buf.len();
        let previous = self.last_key.last().copied().flatten();
        if let Some((at, len)) = previous {
            let before = &self.buf[at..at + len];
            let in_order = (len, before) < (key.len(), key.as_bytes());
            if !in_order {
                self.fail(Error::internal("jsonb writer: object keys out of order or repeated"));
                return;
            }
        }
        if let Some(slot) = self.last_key.last_mut() {
            *slot = Some((start, key.len()));
        }
    }

    pub fn null(&mut self) {
        if self.stopped() {
            return;
        }
        self.begin_element();
        self.end_element(JENTRY_ISNULL);
    }

    pub fn boolean(&mut self, value: bool) {
        if self.stopped() {
            return;
        }
        self.begin_element();
        self.end_element(if value { JENTRY_ISBOOL_TRUE } else { JENTRY_ISBOOL_FALSE });
    }

    /// A number, given as the bytes of a PostgreSQL `numeric` datum (its
    /// varlena header included).
    pub fn numeric(&mut self, datum: &[u8]) {
        if self.stopped() {
            return;
        }
        self.begin_element();
        self.pad_to_int();
        self.buf.extend_from_slice(datum);
        self.end_element(JENTRY_ISNUMERIC);
    }

    /// A stored jsonb value, given as its varlena (4-byte header included),
    /// copied in as one element (see [`JsonbWriter::container`]).
    pub fn jsonb(&mut self, varlena: &[u8]) {
        self.container(varlena.get(4..).unwrap_or_default());
    }

    /// A finished jsonb root container (what follows a varlena's header,
    /// or what [`JsonbWriter::finish_into`] gives), copied in as one
    /// element: a nested container has the same layout as a root one (its
    /// offsets count from its own start), so the bytes go in as they are;
    /// a scalar root gives its one element. Bytes that are not jsonb make
    /// the document fail.
    pub fn container(&mut self, root: &[u8]) {
        if self.stopped() {
            return;
        }
        let word = |at: usize| {
            root.get(at..at + 4).and_then(|bytes| bytes.try_into().ok()).map(u32::from_ne_bytes)
        };
        let Some(header) = word(0) else {
            self.fail(Error::internal("jsonb writer: a stored value is not jsonb"));
            return;
        };
        if header & JB_FSCALAR == 0 {
            self.begin_container_element();
            self.pad_to_int();
            self.buf.extend_from_slice(root);
            self.end_element(JENTRY_ISCONTAINER);
            return;
        }
        // A scalar root: an array of one element, flagged, whose data
        // follows its single entry (already aligned there).
        let element = word(4).and_then(|entry| {
            let len = entry as usize & JENTRY_OFFLENMASK;
            root.get(8..8 + len).map(|data| (entry & JENTRY_TYPEMASK, data))
        });
        let Some((kind, data)) = element else {
            self.fail(Error::internal("jsonb writer: a stored value is not jsonb"));
            return;
        };
        self.begin_element();
        if kind == JENTRY_ISNUMERIC {
            self.pad_to_int();
        }
        self.buf.extend_from_slice(data);
        self.end_element(kind);
    }

    /// Append the finished root container (no varlena header) to `out`, and
    /// start over empty: many small documents written with one buffer.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let result = match self.error.take() {
            Some(error) => Err(error),
            None if !self.stack.is_empty() || !self.closed_root => {
                Err(Error::internal("jsonb writer: unfinished document"))
            }
            None => {
                out.extend_from_slice(&self.buf[4..]);
                Ok(())
            }
        };
        self.buf.truncate(4);
        self.stack.clear();
        self.last_key.clear();
        self.closed_root = false;
        result
    }

    /// The finished varlena (4-byte header, then the root container).
    pub fn finish(mut self) -> Result<Vec<u8>> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if !self.stack.is_empty() || !self.closed_root {
            return Err(Error::internal("jsonb writer: unfinished document"));
        }
        let len = self.buf.len();
        if len > 0x3FFF_FFFF {
            return Err(too_big());
        }
        // SET_VARSIZE for a 4-byte header (little-endian layout).
        self.buf[..4].copy_from_slice(&((len as u32) << 2).to_le_bytes());
        Ok(self.buf)
    }
}

/// Why a jsonb varlena could not be read as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// Nested deeper than the reader follows (see [`to_value`]).
    TooDeep,
    /// Not a jsonb value PostgreSQL would write.
    Malformed,
}

/// Deepest nesting [`to_value`] follows: serde_json's own limit, so a
/// value it reads is one serde_json could also have parsed from text.
pub const READ_MAX_DEPTH: usize = 128;

/// A jsonb varlena (4-byte header included) as a serde_json value, read
/// from the binary form: no text round trip through `jsonb_out` and a JSON
/// parser. Numbers keep every digit (serde_json's arbitrary precision).
pub fn to_value(varlena: &[u8]) -> std::result::Result<serde_json::Value, ReadError> {
    let root = Container::at(varlena, 4)?;
    let value = root.value(varlena, 0)?;
    if root.header & JB_FSCALAR == 0 {
        return Ok(value);
    }
    // A scalar is stored as a one-element array flagged scalar.
    match value {
        serde_json::Value::Array(mut items) if items.len() == 1 => {
            items.pop().ok_or(ReadError::Malformed)
        }
        _ => Err(ReadError::Malformed),
    }
}

/// A top-level field of a jsonb object as [`object_fields`] reads it: a
/// string (borrowed from the value), a null, or anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field<'a> {
    Str(&'a str),
    Null,
    /// A number: its value when it is an integer that fits in an i64.
    Number(Option<i64>),
    Other,
}

/// The top-level fields of a jsonb object (varlena, 4-byte header
/// included), in jsonb's key order, read in place: no value is decoded or
/// copied. None when the root is not an object.
pub fn object_fields(
    varlena: &[u8],
) -> std::result::Result<Option<Vec<(&str, Field<'_>)>>, ReadError> {
    let root = Container::at(varlena, 4)?;
    if root.header & JB_FSCALAR != 0 || !root.is_object() {
        return Ok(None);
    }
    let data = root.data();
    let spans = root.spans(varlena)?;
    let text = |start: usize, end: usize| {
        std::str::from_utf8(&varlena[data + start..data + end]).map_err(|_| ReadError::Malformed)
    };
    let mut fields = Vec::with_capacity(root.count);
    for i in 0..root.count {
        let (kind, start, end) = spans[i];
        if kind != JENTRY_ISSTRING {
            return Err(ReadError::Malformed);
        }
        let (kind, value_start, value_end) = spans[root.count + i];
        let field = match kind {
            JENTRY_ISSTRING => Field::Str(text(value_start, value_end)?),
            JENTRY_ISNULL => Field::Null,
            JENTRY_ISNUMERIC => Field::Number(
                varlena
                    .get(data + value_start.next_multiple_of(4)..data + value_end)
                    .and_then(|datum| numeric_text(datum).ok())
                    .and_then(|text| text.parse().ok()),
            ),
            _ => Field::Other,
        };
        fields.push((text(start, end)?, field));
    }
    Ok(Some(fields))
}

struct Container {
    at: usize,
    header: u32,
    count: usize,
}

fn word_at(bytes: &[u8], at: usize) -> std::result::Result<u32, ReadError> {
    bytes
        .get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(ReadError::Malformed)
}

impl Container {
    fn at(bytes: &[u8], at: usize) -> std::result::Result<Container, ReadError> {
        let header = word_at(bytes, at)?;
        Ok(Container { at, header, count: header as usize & JB_CMASK })
    }

    fn is_object(&self) -> bool {
        self.header & JB_FOBJECT != 0
    }

    fn entries(&self) -> usize {
        if self.is_object() { 2 * self.count } else { self.count }
    }

    fn data(&self) -> usize {
        self.at + 4 + 4 * self.entries()
    }

    /// (type, start, end) of every entry, offsets from `data()`: keys then
    /// values for an object.
    fn spans(&self, bytes: &[u8]) -> std::result::Result<Vec<(u32, usize, usize)>, ReadError> {
        // One pass over the entries: each element starts where the previous
        // one ends.
        let data = self.data();
        // Each entry is 4 bytes of the input: a count the bytes cannot hold
        // is refused before anything is allocated for it.
        if data > bytes.len() {
            return Err(ReadError::Malformed);
        }
        let mut spans = Vec::with_capacity(self.entries());
        let mut end = 0usize;
        for j in 0..self.entries() {
            let entry = word_at(bytes, self.at + 4 + 4 * j)?;
            let start = end;
            let field = entry as usize & JENTRY_OFFLENMASK;
            end = if entry & JENTRY_HAS_OFF != 0 { field } else { end + field };
            if end < start || data + end > bytes.len() {
                return Err(ReadError::Malformed);
            }
            spans.push((entry & JENTRY_TYPEMASK, start, end));
        }
        Ok(spans)
    }

    fn value(
        &self, bytes: &[u8], depth: usize,
    ) -> std::result::Result<serde_json::Value, ReadError> {
        if depth >= READ_MAX_DEPTH {
            return Err(ReadError::TooDeep);
        }
        let data = self.data();
        let spans = self.spans(bytes)?;
        let read = |(kind, start, end): (u32, usize, usize)| {
            scalar_or_container(bytes, data, kind, start, end, depth)
        };
        if self.is_object() {
            let mut map = serde_json::Map::new();
            for i in 0..self.count {
                let (kind, start, end) = spans[i];
                if kind != JENTRY_ISSTRING {
                    return Err(ReadError::Malformed);
                }
                let key = std::str::from_utf8(&bytes[data + start..data + end])
                    .map_err(|_| ReadError::Malformed)?;
                map.insert(key.to_owned(), read(spans[self.count + i])?);
            }
            Ok(serde_json::Value::Object(map))
        } else {
            spans
                .into_iter()
                .map(read)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map(serde_json::Value::Array)
        }
    }
}

fn scalar_or_container(
    bytes: &[u8], data: usize, kind: u32, start: usize, end: usize, depth: usize,
) -> std::result::Result<serde_json::Value, ReadError> {
    use serde_json::Value;
    match kind {
        JENTRY_ISSTRING => std::str::from_utf8(&bytes[data + start..data + end])
            .map(|s| Value::String(s.to_owned()))
            .map_err(|_| ReadError::Malformed),
        JENTRY_ISNUMERIC => {
            let at = data + start.next_multiple_of(4);
            let text = numeric_text(bytes.get(at..data + end).ok_or(ReadError::Malformed)?)?;
            serde_json::from_str::<serde_json::Number>(&text)
                .map(Value::Number)
                .map_err(|_| ReadError::Malformed)
        }
        JENTRY_ISBOOL_FALSE => Ok(Value::Bool(false)),
        JENTRY_ISBOOL_TRUE => Ok(Value::Bool(true)),
        JENTRY_ISNULL => Ok(Value::Null),
        JENTRY_ISCONTAINER => {
            let at = data + start.next_multiple_of(4);
            Container::at(bytes, at)?.value(bytes, depth + 1)
        }
        _ => Err(ReadError::Malformed),
    }
}

/// The decimal text of a PostgreSQL `numeric` datum (varlena header
/// included), as `numeric_out` writes it: base-10000 digits, a weight (the
/// power of 10000 of the first digit) and a display scale.
pub fn numeric_text(datum: &[u8]) -> std::result::Result<String, ReadError> {
    // A 4-byte header (a 1-byte one is flagged by the low bit).
    let (size, body) = if datum.first().is_some_and(|b| b & 1 == 1) {
        ((datum[0] >> 1) as usize, 1usize)
    } else {
        ((word_at(datum, 0)? >> 2) as usize, 4usize)
    };
    let datum = datum.get(..size).ok_or(ReadError::Malformed)?;
    let half = |at: usize| {
        datum.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]])).ok_or(ReadError::Malformed)
    };
    let header = half(body)?;
    let (negative, dscale, weight, digits_at) = if header & 0x8000 != 0 && header & 0x4000 == 0 {
        // Short format: sign, display scale and weight in the one header.
        let weight =
            if header & 0x0040 != 0 { (header | !0x003F) as i16 } else { (header & 0x003F) as i16 };
        (header & 0x2000 != 0, ((header & 0x1F80) >> 7) as usize, weight, body + 2)
    } else if header & 0xC000 == 0xC000 {
        return Err(ReadError::Malformed); // NaN or infinity: not JSON
    } else {
        let weight = half(body + 2)? as i16;
        (header & 0x4000 != 0, (header & 0x3FFF) as usize, weight, body + 4)
    };
    let digits: Vec<u16> =
        (digits_at..datum.len()).step_by(2).map(half).collect::<std::result::Result<_, _>>()?;
    let digit =
        |i: i64| -> u16 { if i < 0 { 0 } else { digits.get(i as usize).copied().unwrap_or(0) } };
    let mut out = String::new();
    if negative && !digits.is_empty() {
        out.push('-');
    }
    let weight = i64::from(weight);
    if weight < 0 {
        out.push('0');
    } else {
        for i in 0..=weight {
            if i == 0 {
                out.push_str(&digit(i).to_string());
            } else {
                out.push_str(&format!("{:04}", digit(i)));
            }
        }
    }
    if dscale > 0 {
        out.push('.');
        let mut fraction = String::with_capacity(dscale + 4);
        let mut i = weight + 1;
        while fraction.len() < dscale {
            fraction.push_str(&format!("{:04}", digit(i)));
            i += 1;
        }
        fraction.truncate(dscale);
        out.push_str(&fraction);
    }
    Ok(out)
}

/// Sort object keys the way jsonb stores them: by length, then bytewise.
pub fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A jsonb scalar as PostgreSQL stores it: a one-element array flagged
    /// scalar, the element's entry, its data.
    fn scalar(entry: u32, data: &[u8]) -> Vec<u8> {
        let size = 4 + 4 + 4 + data.len();
        let mut bytes = ((size as u32) << 2).to_le_bytes().to_vec();
        bytes.extend((1 | JB_FSCALAR | JB_FARRAY).to_le_bytes());
        bytes.extend(entry.to_le_bytes());
        bytes.extend(data);
        bytes
    }

    /// `{"k": ["v", null], "key": true}`, written element by element.
    fn write_inner(w: &mut JsonbWriter) {
        w.begin_object(2);
        w.string("k");
        w.string("key");
        w.begin_array(2);
        w.string("v");
        w.null();
        w.end();
        w.boolean(true);
        w.end();
    }

    #[test]
    fn a_stored_value_copied_in_is_the_value_written_in_place() {
        let mut inner = JsonbWriter::default();
        write_inner(&mut inner);
        let inner = inner.finish().unwrap();

        let mut in_place = JsonbWriter::default();
        in_place.begin_array(4);
        in_place.string("odd");
        write_inner(&mut in_place);
        in_place.string("é");
        in_place.numeric(&[0x18, 0, 0, 0, 0, 0x80]);
        in_place.end();

        let mut copied = JsonbWriter::default();
        copied.begin_array(4);
        copied.string("odd"); // leaves the next element unaligned
        copied.jsonb(&inner);
        copied.jsonb(&scalar(2, "é".as_bytes()));
        copied.jsonb(&scalar(JENTRY_ISNUMERIC | 6, &[0x18, 0, 0, 0, 0, 0x80]));
        copied.end();
        assert_eq!(copied.finish().unwrap(), in_place.finish().unwrap());

        // At the root, a stored container is the whole document.
        let mut root = JsonbWriter::default();
        root.jsonb(&inner);
        assert_eq!(root.finish().unwrap(), inner);
    }

    #[test]
    fn documents_finished_into_a_buffer_are_copied_in_whole() {
        let mut w = JsonbWriter::default();
        let mut out = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..2 {
            write_inner(&mut w);
            w.finish_into(&mut out).unwrap();
            ends.push(out.len());
        }
        // Unfinished or wrong: an error, and the writer starts over clean.
        w.begin_array(2);
        w.null();
        assert!(w.finish_into(&mut out).is_err());
        assert_eq!(out.len(), ends[1]);

        let mut copied = JsonbWriter::default();
        copied.begin_array(3);
        copied.string("x");
        copied.container(&out[..ends[0]]);
        copied.container(&out[ends[0]..ends[1]]);
        copied.end();
        let mut in_place = JsonbWriter::default();
        in_place.begin_array(3);
        in_place.string("x");
        write_inner(&mut in_place);
        write_inner(&mut in_place);
        in_place.end();
        assert_eq!(copied.finish().unwrap(), in_place.finish().unwrap());
    }

    #[test]
    fn a_document_past_its_budget_stops_and_lets_go() {
        let mut w = JsonbWriter::with_capacity(0).with_budget(1000, Error::limit("over budget"));
        w.begin_array(100);
        for _ in 0..100 {
            w.string(&"x".repeat(100));
        }
        // Stopped at the element that passed 1000 bytes, holding nothing.
        assert!(w.buf.len() <= 4, "{}", w.buf.len());
        w.end();
        assert_eq!(w.finish().unwrap_err().message, "over budget");
        // Within its budget a document is whole.
        let mut w = JsonbWriter::with_capacity(0).with_budget(1000, Error::limit("over budget"));
        w.begin_array(2);
        w.string("a");
        w.string("b");
        w.end();
        assert!(w.finish().is_ok());
    }

    #[test]
    fn bytes_that_are_not_jsonb_fail_the_document() {
        for bad in [&[][..], &[0, 0, 0, 0][..], &scalar(20, b"ab")[..12]] {
            let mut w = JsonbWriter::default();
            w.begin_array(1);
            w.jsonb(bad);
            w.end();
            assert!(w.finish().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn root_type_reads_the_container_header() {
        let mut object = JsonbWriter::default();
        object.begin_object(0);
        object.end();
        assert_eq!(root_type(&object.finish().unwrap()), Some(JsonType::Object));
        let mut array = JsonbWriter::default();
        array.begin_array(1);
        array.string("x");
        array.end();
        assert_eq!(root_type(&array.finish().unwrap()), Some(JsonType::Array));
        assert_eq!(root_type(&scalar(2, b"ab")), Some(JsonType::String));
        assert_eq!(root_type(&scalar(JENTRY_ISNUMERIC | 8, &[0; 8])), Some(JsonType::Number));
        assert_eq!(root_type(&scalar(JENTRY_ISBOOL_TRUE, b"")), Some(JsonType::Boolean));
        assert_eq!(root_type(&scalar(JENTRY_ISBOOL_FALSE, b"")), Some(JsonType::Boolean));
        assert_eq!(root_type(&scalar(JENTRY_ISNULL, b"")), Some(JsonType::Null));
        assert_eq!(root_type(&scalar(JENTRY_ISCONTAINER, b"")), None);
        assert_eq!(root_type(&[0, 0, 0]), None);
    }

    fn words(bytes: &[u8]) -> Vec<u32> {
        bytes
            .chunks(4)
            .map(|c| {
                let mut w = [0u8; 4];
                w[..c.len()].copy_from_slice(c);
                u32::from_ne_bytes(w)
            })
            .collect()
    }

    /// A numeric datum with a 4-byte header: the 16-bit words given.
    fn numeric(words: &[u16]) -> Vec<u8> {
        let size = 4 + 2 * words.len();
        let mut bytes = ((size as u32) << 2).to_le_bytes().to_vec();
        for w in words {
            bytes.extend(w.to_le_bytes());
        }
        bytes
    }

    #[test]
    fn numerics_read_as_numeric_out_writes_them() {
        // short format: 0x8000 | sign 0x2000 | dscale << 7 | 7-bit weight
        assert_eq!(numeric_text(&numeric(&[0x8000])).unwrap(), "0");
        assert_eq!(numeric_text(&numeric(&[0x8080, 1, 5000])).unwrap(), "1.5");
        assert_eq!(numeric_text(&numeric(&[0xA181, 1, 2345, 6780])).unwrap(), "-12345.678");
        assert_eq!(numeric_text(&numeric(&[0x827F, 1])).unwrap(), "0.0001");
        assert_eq!(numeric_text(&numeric(&[0x8005, 1])).unwrap(), "100000000000000000000");
        // trailing zeros of the display scale are kept
        assert_eq!(numeric_text(&numeric(&[0x8100, 2])).unwrap(), "2.00");
        // long format: sign and dscale, then the weight
        assert_eq!(numeric_text(&numeric(&[0x0000, 0, 1])).unwrap(), "1");
        assert_eq!(numeric_text(&numeric(&[0x4002, 0, 3, 1400])).unwrap(), "-3.14");
        // NaN and infinities are not JSON
        assert_eq!(numeric_text(&numeric(&[0xC000])), Err(ReadError::Malformed));
    }

    #[test]
    fn written_documents_read_back() {
        let mut w = JsonbWriter::default();
        w.begin_object(3);
        for key in ["a", "list", "nested"] {
            w.string(key);
        }
        w.string("São Paulo");
        w.begin_array(40); // more than one offset stride
        for i in 0..40 {
            match i % 4 {
                0 => w.string(&format!("s{i}")),
                1 => w.boolean(i % 8 == 1),
                2 => w.null(),
                _ => w.numeric(&numeric(&[0x8000, i as u16])),
            }
        }
        w.end();
        w.begin_object(1);
        w.string("k");
        w.begin_array(0);
        w.end();
        w.end();
        w.end();
        let value = to_value(&w.finish().unwrap()).unwrap();
        assert_eq!(value["a"], serde_json::json!("São Paulo"));
        assert_eq!(value["nested"], serde_json::json!({"k": []}));
        let list = value["list"].as_array().unwrap();
        assert_eq!(list.len(), 40);
        assert_eq!(list[0], serde_json::json!("s0"));
        assert_eq!(list[1], serde_json::json!(true));
        assert_eq!(list[5], serde_json::json!(false));
        assert_eq!(list[6], serde_json::Value::Null);
        assert_eq!(list[39].to_string(), "39");
        assert_eq!(list[36], serde_json::json!("s36"));
    }

    #[test]
    fn object_fields_are_read_in_place() {
        let mut w = JsonbWriter::default();
        w.begin_object(5);
        for key in ["n", "ok", "path", "command", "nothing"] {
            w.string(key);
        }
        w.begin_array(1);
        w.string("x");
        w.end();
        w.boolean(true);
        w.string("/notes/é");
        w.string("read");
        w.null();
        w.end();
        let bytes = w.finish().unwrap();
        assert_eq!(
            object_fields(&bytes),
            Ok(Some(vec![
                ("n", Field::Other),
                ("ok", Field::Other),
                ("path", Field::Str("/notes/é")),
                ("command", Field::Str("read")),
                ("nothing", Field::Null),
            ]))
        );
        // Numbers: an integer's value, none for another number.
        let mut w = JsonbWriter::default();
        w.begin_object(3);
        for key in ["f", "n", "v"] {
            w.string(key);
        }
        w.numeric(&numeric(&[0x8080, 1, 5000]));
        w.numeric(&numeric(&[0xA000, 7]));
        w.numeric(&numeric(&[0x8000, 7]));
        w.end();
        assert_eq!(
            object_fields(&w.finish().unwrap()),
            Ok(Some(vec![
                ("f", Field::Number(None)),
                ("n", Field::Number(Some(-7))),
                ("v", Field::Number(Some(7))),
            ]))
        );
        // Not objects: an array, a scalar.
        let mut array = JsonbWriter::default();
        array.begin_array(0);
        array.end();
        assert_eq!(object_fields(&array.finish().unwrap()), Ok(None));
        assert_eq!(object_fields(&scalar(2, b"ab")), Ok(None));
        // A truncated value is malformed, not read past its end.
        assert_eq!(object_fields(&bytes[..bytes.len() - 3]), Err(ReadError::Malformed));
    }

    #[test]
    fn scalars_read_back() {
        assert_eq!(to_value(&scalar(2, b"ab")), Ok(serde_json::json!("ab")));
        assert_eq!(to_value(&scalar(JENTRY_ISBOOL_TRUE, b"")), Ok(serde_json::json!(true)));
        assert_eq!(to_value(&scalar(JENTRY_ISNULL, b"")), Ok(serde_json::Value::Null));
        let n = numeric(&[0x8080, 1, 5000]);
        let v = to_value(&scalar(JENTRY_ISNUMERIC | n.len() as u32, &n)).unwrap();
        assert_eq!(v.to_string(), "1.5");
    }

    #[test]
    fn a_document_past_the_limit_stops_growing_at_it() {
        // 300 elements of 1 MB: past 256 MB the writer fails, lets go of
        // what it wrote, and writes nothing more.
        let megabyte = "x".repeat(1 << 20);
        let mut w = JsonbWriter::default();
        w.begin_array(300);
        for written in 0..300 {
            w.string(&megabyte);
            if written < 255 {
                assert!(!w.stopped(), "stopped after {written} elements");
            }
        }
        assert!(w.stopped());
        assert!(w.buf.capacity() < 1024, "{} bytes held", w.buf.capacity());
        w.end();
        assert_eq!(w.finish().unwrap_err().kind, crate::ErrorKind::LimitExceeded);
        // A writer reused for small documents starts over after a failure.
        let mut w = JsonbWriter::default();
        w.begin_object(2);
        w.string("b");
        w.string("a");
        let mut out = Vec::new();
        assert!(w.finish_into(&mut out).is_err());
        w.begin_array(1);
        w.null();
        w.end();
        assert!(w.finish_into(&mut out).is_ok() && !out.is_empty());
    }

    #[test]
    fn bad_or_too_deep_input_is_an_error_not_a_panic() {
        assert_eq!(to_value(&[0, 0]), Err(ReadError::Malformed));
        let mut bad = scalar(2, b"ab");
        bad.truncate(bad.len() - 1); // the string runs past the end
        assert_eq!(to_value(&bad), Err(ReadError::Malformed));
        // A header claiming 2^28 - 1 pairs in 8 bytes: refused, nothing
        // allocated for them.
        let mut huge = 8u32.to_le_bytes().to_vec();
        huge.extend((JB_FOBJECT | 0x0FFF_FFFF).to_le_bytes());
        assert_eq!(to_value(&huge), Err(ReadError::Malformed));
        let mut w = JsonbWriter::default();
        for _ in 0..READ_MAX_DEPTH + 1 {
            w.begin_array(1);
        }
        w.null();
        for _ in 0..READ_MAX_DEPTH + 1 {
            w.end();
        }
        assert_eq!(to_value(&w.finish().unwrap()), Err(ReadError::TooDeep));
    }

    #[test]
    fn booleans_are_entries_without_data() {
        let mut w = JsonbWriter::default();
        w.begin_array(2);
        w.boolean(true);
        w.boolean(false);
        w.end();
        let out = w.finish().unwrap();
        // header, two entries, no data
        assert_eq!(out.len(), 4 + 4 + 8);
        let w = words(&out[4..16]);
        assert_eq!(w[0], 2 | JB_FARRAY);
        assert_eq!(w[1], JENTRY_ISBOOL_TRUE | JENTRY_HAS_OFF); // every 32nd entry holds an offset
        assert_eq!(w[2], JENTRY_ISBOOL_FALSE);
    }

    #[test]
    fn an_array_of_two_strings() {
        let mut w = JsonbWriter::default();
        w.begin_array(2);
        w.string("ab");
        w.string("c");
        w.end();
        let out = w.finish().unwrap();
        // header, 2 entries, "abc" (3 bytes): 4 + 4 + 8 + 3 = 19 bytes
        assert_eq!(out.len(), 19);
        assert_eq!(u32::from_le_bytes(out[..4].try_into().unwrap()) >> 2, 19);
        let w = words(&out[4..16]);
        assert_eq!(w[0], 2 | JB_FARRAY);
        assert_eq!(w[1], JENTRY_HAS_OFF | 2); // element 0: end offset
        assert_eq!(w[2], 1); // element 1: length
        assert_eq!(&out[16..], b"abc");
    }

    #[test]
    fn objects_put_keys_first_and_pad_containers() {
        let mut w = JsonbWriter::default();
        w.begin_object(2);
        w.string("a");
        w.string("bb");
        w.string("x"); // value of "a"
        w.begin_array(0); // value of "bb"
        w.end();
        w.end();
        let out = w.finish().unwrap();
        let head = words(&out[4..24]);
        assert_eq!(head[0], 2 | JB_FOBJECT);
        assert_eq!(head[1], JENTRY_HAS_OFF | 1); // "a"
        assert_eq!(head[2], 2); // "bb"
        assert_eq!(head[3], 1); // "x"
        // data so far: "a" "bb" "x" = 4 bytes at offset 24: already aligned,
        // so the empty array is 4 bytes (its header), no padding.
        assert_eq!(head[4], JENTRY_ISCONTAINER | 4);
        assert_eq!(&out[24..28], b"abbx");
        assert_eq!(words(&out[28..32])[0], JB_FARRAY);
    }

    #[test]
    fn every_32nd_entry_holds_an_offset() {
        let mut w = JsonbWriter::default();
        w.begin_array(70);
        for _ in 0..70 {
            w.string("xy");
        }
        w.end();
        let out = w.finish().unwrap();
        let entries = words(&out[8..8 + 4 * 70]);
        for (i, e) in entries.iter().enumerate() {
            if i % 32 == 0 {
                assert_eq!(*e, JENTRY_HAS_OFF | (2 * (i as u32 + 1)), "{i}");
            } else {
                assert_eq!(*e, 2, "{i}");
            }
        }
    }

    #[test]
    fn mistakes_are_errors_not_bad_documents() {
        let mut w = JsonbWriter::default();
        w.begin_object(2);
        w.string("bb");
        w.string("a"); // shorter key after a longer one
        w.null();
        w.null();
        w.end();
        assert!(w.finish().is_err());

        let mut w = JsonbWriter::default();
        w.begin_array(2);
        w.null();
        w.end();
        assert!(w.finish().is_err());

        let mut w = JsonbWriter::default();
        w.begin_array(1);
        w.null();
        w.null();
        w.end();
        assert!(w.finish().is_err());

        let mut w = JsonbWriter::default();
        w.begin_array(1);
        assert!(w.finish().is_err());

        let mut w = JsonbWriter::default();
        w.string("a scalar root");
        assert!(w.finish().is_err());

        let mut w = JsonbWriter::default();
        w.begin_array(0);
        w.end();
        w.begin_array(0);
        w.end();
        assert!(w.finish().is_err());
    }

    /// `depth` arrays inside each other, or objects `{"a": ...}` (with a
    /// string key and value next to each level, so entries have offsets).
    fn nested(depth: usize, objects: bool) -> Vec<u8> {
        let mut w = JsonbWriter::default();
        for level in 1..=depth {
            let inner = level < depth;
            if objects {
                w.begin_object(1 + inner as usize);
                w.string("a");
                if inner {
                    w.string("bb");
                }
                w.string("x"); // value of "a"; the next level is that of "bb"
            } else {
                w.begin_array(1 + inner as usize);
                w.string("x");
            }
        }
        for _ in 0..depth {
            w.end();
        }
        w.finish().unwrap()
    }

    #[test]
    fn nesting_depth_is_measured_without_decoding() {
        for objects in [false, true] {
            for depth in [1, 2, 3, 37, 100, 101, 1000] {
                let bytes = nested(depth, objects);
                assert!(!nested_deeper_than(&bytes, depth), "{depth} {objects}");
                assert!(nested_deeper_than(&bytes, depth - 1), "{depth} {objects}");
            }
        }
        // A container after 40 siblings (past an offset stride).
        let mut w = JsonbWriter::default();
        w.begin_array(41);
        for _ in 0..40 {
            w.string("abc");
        }
        w.begin_array(1);
        w.begin_array(0);
        w.end();
        w.end();
        w.end();
        let bytes = w.finish().unwrap();
        assert!(!nested_deeper_than(&bytes, 3));
        assert!(nested_deeper_than(&bytes, 2));
        // Scalars nest nothing; bytes too short are not too deep.
        assert!(!nested_deeper_than(&scalar(2, b"ab"), 0));
        assert!(!nested_deeper_than(&[0, 0, 0], 0));
        assert_eq!(too_deep("value", 100).kind, crate::ErrorKind::LimitExceeded);
    }

    #[test]
    fn keys_sort_by_length_then_bytes() {
        let mut keys = vec!["updatedAt", "id", "createdAt", "refs", "body", "a"];
        keys.sort_by(|a, b| key_order(a, b));
        assert_eq!(keys, ["a", "id", "body", "refs", "createdAt", "updatedAt"]);
    }
}
