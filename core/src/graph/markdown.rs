//! Markdown files with YAML frontmatter, the on-disk format of graph-memory
//! nodes.
//!
//! The files come from daycare, which writes them with gray-matter/js-yaml,
//! and go back to it, so [`parse`] reads the part of YAML those files really
//! use and [`render`] writes text that both js-yaml and [`parse`] read back
//! to the same values.
//!
//! The YAML subset: `key: value` entries at column 0; blank lines and `#`
//! comments; plain, single-quoted and double-quoted scalars; flow sequences
//! on one line (`[a, "b"]`); block sequences of scalars (`- item`); block
//! scalars (`|`, `>`, with `-`/`+` chomping and an optional indentation
//! digit). Anything else (nested mappings, anchors, tags, multi-line flow or
//! quoted scalars) is refused with an error naming the line, never guessed.

use std::fmt::Write as _;

use crate::error::{Error, Result, quoted};
use crate::versions;

/// A timestamp as written in frontmatter: daycare writes milliseconds since
/// the epoch; we write ISO 8601 text.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeValue {
    Text(String),
    EpochMillis(f64),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Frontmatter {
    pub title: Option<String>,
    pub description: Option<String>,
    pub version: Option<i32>,
    /// Key `createdAt`.
    pub created_at: Option<TimeValue>,
    /// Key `updatedAt`.
    pub updated_at: Option<TimeValue>,
    pub refs: Option<Vec<String>>,
    /// Key `changeDescription` (version files).
    pub change_description: Option<String>,
    /// Key `savedAt` (version files): when the snapshot was taken.
    pub saved_at: Option<TimeValue>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Document {
    pub frontmatter: Frontmatter,
    pub body: String,
}

/// Spaces and tabs: the only characters YAML trims around scalars (Rust's
/// `trim` would also eat a no-break space that belongs to the value).
const BLANKS: [char; 2] = [' ', '\t'];

/// First characters that give a plain scalar or a key another meaning.
const INDICATORS: &str = "-?:,[]{}#&*!|>'\"%@`";

/// One line of the frontmatter, without its line ending.
struct Line<'a> {
    /// Line number in the whole file (the opening `---` is line 1).
    no: usize,
    text: &'a str,
}

/// A scalar as read: `plain` ones may still mean null or a number, quoted
/// and block scalars are always strings.
struct Scalar {
    text: String,
    plain: bool,
}

impl Scalar {
    fn plain(text: &str) -> Self {
        Scalar { text: text.to_string(), plain: true }
    }
    fn string(text: String) -> Self {
        Scalar { text, plain: false }
    }
}

enum Value {
    Scalar(Scalar),
    Seq(Vec<Scalar>),
}

fn line_error(no: usize, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!("markdown frontmatter line {no}: {what}"))
}

/// Split a markdown file into its frontmatter and body.
pub fn parse(markdown: &str) -> Result<Document> {
    match split(markdown)? {
        None => Ok(Document { frontmatter: Frontmatter::default(), body: markdown.to_string() }),
        Some((lines, body)) => {
            Ok(Document { frontmatter: interpret(parse_entries(&lines)?)?, body: body.to_string() })
        }
    }
}

/// Split a markdown text into all of its frontmatter, as JSON (`meta`), and
/// the text after it. Plain scalars become null, booleans and numbers as
/// YAML reads them; quoted and block scalars stay strings; sequences become
/// arrays. A text without frontmatter has an empty `meta`.
pub fn parse_meta(markdown: &str) -> Result<(serde_json::Map<String, serde_json::Value>, &str)> {
    let Some((lines, body)) = split(markdown)? else {
        return Ok((serde_json::Map::new(), markdown));
    };
    let meta = parse_entries(&lines)?
        .into_iter()
        .map(|(key, _, value)| {
            let json = match value {
                Value::Scalar(s) => scalar_json(s),
                Value::Seq(items) => items.into_iter().map(scalar_json).collect(),
            };
            (key, json)
        })
        .collect();
    Ok((meta, body))
}

fn scalar_json(s: Scalar) -> serde_json::Value {
    use serde_json::Value as Json;
    if !s.plain {
        return Json::String(s.text);
    }
    if is_null(&s) {
        return Json::Null;
    }
    match s.text.as_str() {
        "true" | "True" | "TRUE" => return Json::Bool(true),
        "false" | "False" | "FALSE" => return Json::Bool(false),
        _ => {}
    }
    if let Ok(integer) = s.text.parse::<i64>() {
        return Json::from(integer);
    }
    match parse_number(&s.text).and_then(serde_json::Number::from_f64) {
        Some(number) => Json::Number(number),
        None => Json::String(s.text),
    }
}

/// The frontmatter lines of a markdown text and the body after them; None
/// when the text does not open with `---`.
fn split(markdown: &str) -> Result<Option<(Vec<Line<'_>>, &str)>> {
    let text = markdown.strip_prefix('\u{feff}').unwrap_or(markdown);
    let Some(rest) = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")) else {
        return Ok(None);
    };
    let mut lines = Vec::new();
    let mut remaining = rest;
    loop {
        let (line, after, had_end) = match remaining.find('\n') {
            Some(end) => (&remaining[..end], &remaining[end + 1..], true),
            None => (remaining, "", false),
        };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim_end_matches(BLANKS) == "---" {
            return Ok(Some((lines, after)));
        }
        if !had_end {
            return Err(Error::invalid(
                "markdown frontmatter opened with \"---\" on line 1 is never closed by a \"---\" line",
            ));
        }
        lines.push(Line { no: lines.len() + 2, text: line });
        remaining = after;
    }
}

fn is_blank_or_comment(text: &str) -> bool {
    let t = text.trim_start_matches(BLANKS);
    t.is_empty() || t.starts_with('#')
}

/// Read the `key: value` entries, with the block sequences and block
/// scalars that continue them on the following lines.
fn parse_entries<'a>(lines: &[Line<'a>]) -> Result<Vec<(String, usize, Value)>> {
    // PostgreSQL's text holds no NUL, written or escaped (see
    // `double_quoted`): a value holding one could not be stored.
    if let Some(line) = lines.iter().find(|line| line.text.contains('\0')) {
        return Err(line_error(line.no, "a NUL character (\\0) cannot be stored"));
    }
    let mut entries: Vec<(String, usize, Value)> = Vec::new();
    let mut keys: std::collections::HashSet<&'a str> = std::collections::HashSet::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        i += 1;
        if is_blank_or_comment(line.text) {
            continue;
        }
        if line.text.starts_with(BLANKS) {
            return Err(line_error(
                line.no,
                format!(
                    "unexpected indented line {} (nested mappings are not supported)",
                    quoted(line.text)
                ),
            ));
        }
        let (key, raw) = split_entry(line)?;
        let value = if let Some(header) = block_header(raw, line.no)? {
            let (text, next) = read_block_scalar(&header, lines, i);
            i = next;
            Value::Scalar(Scalar::string(text))
        } else if strip_comment(raw).trim_matches(BLANKS).is_empty() {
            let (items, next) = read_block_sequence(lines, i)?;
            i = next;
            items.map_or(Value::Scalar(Scalar::plain("")), Value::Seq)
        } else if raw.starts_with('[') {
            Value::Seq(parse_flow_sequence(raw, line.no)?)
        } else {
            Value::Scalar(parse_inline_scalar(raw, line.no)?)
        };
        if !keys.insert(key) {
            return Err(line_error(line.no, format!("duplicate key {}", quoted(key))));
        }
        entries.push((key.to_string(), line.no, value));
    }
    Ok(entries)
}

/// Split `key: value` at the first colon followed by a blank or the line
/// end; the value comes back with leading blanks removed.
fn split_entry<'a>(line: &Line<'a>) -> Result<(&'a str, &'a str)> {
    let text = line.text;
    let bad = || line_error(line.no, format!("expected \"key: value\", got {}", quoted(text)));
    let colon = text
        .char_indices()
        .find(|&(i, c)| c == ':' && (text[i + 1..].is_empty() || text[i + 1..].starts_with(BLANKS)))
        .map(|(i, _)| i)
        .ok_or_else(bad)?;
    let key = text[..colon].trim_end_matches(BLANKS);
    if key.is_empty() || key.starts_with(|c| INDICATORS.contains(c)) {
        return Err(bad());
    }
    Ok((key, text[colon + 1..].trim_start_matches(BLANKS)))
}

/// Cut a ` # comment` off a plain value (a `#` only starts a comment at the
/// start or after a blank, so `a#b` is a value).
fn strip_comment(raw: &str) -> &str {
    let mut after_blank = true;
    for (i, c) in raw.char_indices() {
        if c == '#' && after_blank {
            return &raw[..i];
        }
        after_blank = c == ' ' || c == '\t';
    }
    raw
}

/// What may follow a closing quote or bracket: nothing, or a comment.
fn check_trailing(rest: &str, no: usize) -> Result<()> {
    let t = rest.trim_start_matches(BLANKS);
    if t.is_empty() || (t.starts_with('#') && t.len() < rest.len()) {
        Ok(())
    } else {
        Err(line_error(no, format!("unexpected text {} after the value", quoted(t))))
    }
}

/// A quoted scalar at the start of `raw` and the text after it, or None
/// when `raw` does not start with a quote.
fn quoted_scalar(raw: &str, no: usize) -> Result<Option<(Scalar, &str)>> {
    let (text, rest) = match raw.chars().next() {
        Some('"') => double_quoted(raw, no)?,
        Some('\'') => single_quoted(raw, no)?,
        _ => return Ok(None),
    };
    Ok(Some((Scalar::string(text), rest)))
}

/// A scalar on the entry line (or after `- `): quoted or plain.
fn parse_inline_scalar(raw: &str, no: usize) -> Result<Scalar> {
    if let Some((scalar, rest)) = quoted_scalar(raw, no)? {
        check_trailing(rest, no)?;
        return Ok(scalar);
    }
    let text = strip_comment(raw).trim_matches(BLANKS);
    let mut chars = text.chars();
    let first = chars.next().unwrap_or(' ');
    let second_is_blank = chars.next().is_none_or(|c| c == ' ' || c == '\t');
    if "[]{}&*!@`%|>,".contains(first) || ("-?:".contains(first) && second_is_blank) {
        return Err(line_error(
            no,
            format!("unsupported YAML syntax {}; quote the value", quoted(text)),
        ));
    }
    check_plain(text, no)?;
    Ok(Scalar::plain(text))
}

/// A plain value with `: ` inside or `:` at the end would be a nested
/// mapping to a YAML reader; refuse it rather than read it differently.
fn check_plain(text: &str, no: usize) -> Result<()> {
    let nested = text.ends_with(':') || text.contains(": ") || text.contains(":\t");
    if nested {
        return Err(line_error(
            no,
            format!("plain value {} contains \": \"; quote it", quoted(text)),
        ));
    }
    Ok(())
}

/// A double-quoted scalar starting at `raw[0]`; returns it and the text
/// after the closing quote.
fn double_quoted(raw: &str, no: usize) -> Result<(String, &str)> {
    let mut out = String::new();
    let mut chars = raw.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' if out.contains('\0') => {
                // PostgreSQL's text holds no NUL: it would cut the value.
                return Err(line_error(no, "a NUL character (\\0) cannot be stored"));
            }
            '"' => return Ok((out, &raw[i + 1..])),
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                let ch = match e {
                    '0' => '\0',
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    't' | '\t' => '\t',
                    'n' => '\n',
                    'v' => '\u{b}',
                    'f' => '\u{c}',
                    'r' => '\r',
                    'e' => '\u{1b}',
                    ' ' | '"' | '/' | '\\' => e,
                    'N' => '\u{85}',
                    '_' => '\u{a0}',
                    'L' => '\u{2028}',
                    'P' => '\u{2029}',
                    'x' => hex_char(read_hex(&mut chars, 2), no)?,
                    'U' => hex_char(read_hex(&mut chars, 8), no)?,
                    'u' => utf16_escape(&mut chars, no)?,
                    _ => {
                        return Err(line_error(
                            no,
                            format!(
                                "unknown escape {} in a double-quoted value",
                                quoted(&format!("\\{e}"))
                            ),
                        ));
                    }
                };
                out.push(ch);
            }
            c => out.push(c),
        }
    }
    Err(line_error(no, "unterminated double-quoted value"))
}

/// `n` hex digits from the escape, or None when they are not all there.
fn read_hex(chars: &mut impl Iterator<Item = (usize, char)>, n: usize) -> Option<u32> {
    let mut code = 0u32;
    for _ in 0..n {
        code = code * 16 + chars.next()?.1.to_digit(16)?;
    }
    Some(code)
}

fn hex_char(code: Option<u32>, no: usize) -> Result<char> {
    code.and_then(char::from_u32)
        .ok_or_else(|| line_error(no, "bad hexadecimal escape in a double-quoted value"))
}

/// `\uXXXX`, where js-yaml writes characters outside the BMP as a UTF-16
/// surrogate pair (`\uD83D\uDE00`).
fn utf16_escape(chars: &mut impl Iterator<Item = (usize, char)>, no: usize) -> Result<char> {
    let bad = || line_error(no, "bad \\u escape in a double-quoted value");
    let high = read_hex(chars, 4).ok_or_else(bad)?;
    if !(0xD800..0xDC00).contains(&high) {
        return char::from_u32(high).ok_or_else(bad);
    }
    let next_is_u =
        matches!(chars.next(), Some((_, '\\'))) && matches!(chars.next(), Some((_, 'u')));
    let low = read_hex(chars, 4).filter(|low| next_is_u && (0xDC00..0xE000).contains(low));
    let low = low.ok_or_else(bad)?;
    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or_else(bad)
}

/// A single-quoted scalar starting at `raw[0]` (`''` is a quote).
fn single_quoted(raw: &str, no: usize) -> Result<(String, &str)> {
    let mut out = String::new();
    let mut chars = raw.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        if c != '\'' {
            out.push(c);
        } else if chars.peek().is_some_and(|&(_, n)| n == '\'') {
            chars.next();
            out.push('\'');
        } else {
            return Ok((out, &raw[i + 1..]));
        }
    }
    Err(line_error(no, "unterminated single-quoted value"))
}

/// A one-line flow sequence of scalars: `[a, "b, c", 'd']`.
fn parse_flow_sequence(raw: &str, no: usize) -> Result<Vec<Scalar>> {
    let unterminated = || line_error(no, "flow sequence is not closed by \"]\" on the same line");
    let mut items = Vec::new();
    let mut rest = &raw[1..];
    loop {
        rest = rest.trim_start_matches(BLANKS);
        if let Some(after) = rest.strip_prefix(']') {
            check_trailing(after, no)?;
            return Ok(items);
        }
        if rest.is_empty() {
            return Err(unterminated());
        }
        if rest.starts_with(',') {
            return Err(line_error(no, "empty item in a flow sequence"));
        }
        let (item, after) = match quoted_scalar(rest, no)? {
            Some(quoted) => quoted,
            None => {
                let end = rest.find([',', ']']).unwrap_or(rest.len());
                let text = rest[..end].trim_matches(BLANKS);
                if text.contains(['[', '{', '}']) {
                    return Err(line_error(no, "nested flow collections are not supported"));
                }
                check_plain(text, no)?;
                (Scalar::plain(text), &rest[end..])
            }
        };
        items.push(item);
        rest = after.trim_start_matches(BLANKS);
        if let Some(after) = rest.strip_prefix(',') {
            rest = after;
        } else if rest.is_empty() {
            return Err(unterminated());
        } else if !rest.starts_with(']') {
            return Err(line_error(no, format!("expected \",\" or \"]\" before {}", quoted(rest))));
        }
    }
}

/// The `- item` lines after a key with an empty value, all at one
/// indentation (0 or more spaces). None when there are none.
fn read_block_sequence(lines: &[Line], start: usize) -> Result<(Option<Vec<Scalar>>, usize)> {
    let mut items = Vec::new();
    let mut indent = None;
    let mut i = start;
    while i < lines.len() {
        let line = &lines[i];
        if is_blank_or_comment(line.text) {
            i += 1;
            continue;
        }
        let trimmed = line.text.trim_start_matches(' ');
        let Some(raw) = trimmed.strip_prefix('-').filter(|r| r.is_empty() || r.starts_with(BLANKS))
        else {
            break;
        };
        let this_indent = line.text.len() - trimmed.len();
        if *indent.get_or_insert(this_indent) != this_indent {
            return Err(line_error(line.no, "sequence item is not aligned with the ones before"));
        }
        let raw = raw.trim_start_matches(BLANKS);
        if raw.starts_with(['[', '|', '>']) {
            return Err(line_error(
                line.no,
                "nested collections and block scalars are not supported in a sequence",
            ));
        }
        // An empty item comes back as an empty plain scalar: null.
        items.push(parse_inline_scalar(raw, line.no)?);
        i += 1;
    }
    Ok(((!items.is_empty()).then_some(items), i))
}

#[derive(Clone, Copy, PartialEq)]
enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// `|` or `>` with optional chomping (`-`, `+`) and indentation digit, in
/// either order, as js-yaml writes them (`>-`, `|2+`).
struct BlockHeader {
    folded: bool,
    chomp: Chomp,
    indent: Option<usize>,
}

fn block_header(raw: &str, no: usize) -> Result<Option<BlockHeader>> {
    let folded = match raw.chars().next() {
        Some('|') => false,
        Some('>') => true,
        _ => return Ok(None),
    };
    let header_len = raw.find(BLANKS).unwrap_or(raw.len());
    check_trailing(&raw[header_len..], no)?;
    let header = &raw[..header_len];
    let mut chomp = None;
    let mut indent = None;
    for c in header[1..].chars() {
        match c {
            '-' if chomp.is_none() => chomp = Some(Chomp::Strip),
            '+' if chomp.is_none() => chomp = Some(Chomp::Keep),
            '1'..='9' if indent.is_none() => indent = c.to_digit(10).map(|d| d as usize),
            _ => {
                return Err(line_error(no, format!("bad block scalar header {}", quoted(header))));
            }
        }
    }
    Ok(Some(BlockHeader { folded, chomp: chomp.unwrap_or(Chomp::Clip), indent }))
}

/// The lines of a block scalar: those indented at least as much as the
/// first non-empty one (or the header's digit), plus empty lines.
fn read_block_scalar(header: &BlockHeader, lines: &[Line], start: usize) -> (String, usize) {
    let mut indent = header.indent;
    let mut content: Vec<&str> = Vec::new();
    let mut i = start;
    while i < lines.len() {
        let text = lines[i].text;
        let unindented = text.trim_start_matches(' ');
        let spaces = text.len() - unindented.len();
        if unindented.is_empty() {
            // Spaces beyond the indentation are content (js-yaml keeps them).
            content.push(match indent {
                Some(n) if spaces > n => &text[n..],
                _ => "",
            });
        } else {
            let n = *indent.get_or_insert(spaces);
            if n == 0 || spaces < n {
                break;
            }
            content.push(&text[n..]);
        }
        i += 1;
    }
    let kept = content.iter().rposition(|l| !l.is_empty()).map_or(0, |k| k + 1);
    let trailing_empty = content.len() - kept;
    let mut text = if header.folded { fold(&content[..kept]) } else { content[..kept].join("\n") };
    if kept > 0 && header.chomp != Chomp::Strip {
        text.push('\n');
    }
    if header.chomp == Chomp::Keep {
        text.push_str(&"\n".repeat(trailing_empty));
    }
    (text, i)
}

/// YAML line folding: a single break between two normal lines becomes a
/// space, empty lines become newlines, and the breaks around more-indented
/// lines are kept (so indented lists and code survive).
fn fold(lines: &[&str]) -> String {
    let mut out = String::new();
    let mut previous_more_indented: Option<bool> = None;
    let mut empty_run = 0;
    for line in lines {
        if line.is_empty() {
            empty_run += 1;
            continue;
        }
        let more_indented = line.starts_with(BLANKS);
        let breaks = match previous_more_indented {
            None => empty_run,
            Some(false) if !more_indented => empty_run,
            Some(_) => empty_run + 1,
        };
        if breaks == 0 && previous_more_indented.is_some() {
            out.push(' ');
        }
        out.push_str(&"\n".repeat(breaks));
        out.push_str(line);
        previous_more_indented = Some(more_indented);
        empty_run = 0;
    }
    out
}

/// Give the known keys their types; unknown keys are ignored.
fn interpret(entries: Vec<(String, usize, Value)>) -> Result<Frontmatter> {
    let mut fm = Frontmatter::default();
    for (key, no, value) in entries {
        match key.as_str() {
            "title" => fm.title = string_field(&key, no, value)?,
            "description" => fm.description = string_field(&key, no, value)?,
            "changeDescription" => fm.change_description = string_field(&key, no, value)?,
            "version" => fm.version = version_field(no, value)?,
            "createdAt" => fm.created_at = time_field(&key, no, value)?,
            "updatedAt" => fm.updated_at = time_field(&key, no, value)?,
            "savedAt" => fm.saved_at = time_field(&key, no, value)?,
            "refs" => fm.refs = refs_field(no, value)?,
            _ => {}
        }
    }
    Ok(fm)
}

fn is_null(s: &Scalar) -> bool {
    s.plain && matches!(s.text.as_str(), "" | "~" | "null" | "Null" | "NULL")
}

fn scalar_of(key: &str, no: usize, value: Value) -> Result<Scalar> {
    match value {
        Value::Scalar(s) => Ok(s),
        Value::Seq(_) => {
            Err(line_error(no, format!("{key} must be a single value, not a sequence")))
        }
    }
}

/// A string field: a plain `123` or `true` is still its text; null is None.
fn string_field(key: &str, no: usize, value: Value) -> Result<Option<String>> {
    let s = scalar_of(key, no, value)?;
    Ok((!is_null(&s)).then_some(s.text))
}

fn version_field(no: usize, value: Value) -> Result<Option<i32>> {
    let s = scalar_of("version", no, value)?;
    if is_null(&s) {
        return Ok(None);
    }
    let version = Some(s.text.as_str())
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|&v| (1..=versions::MOST_IMPORTED).contains(&v));
    match version {
        Some(v) => Ok(Some(v)),
        None => Err(line_error(
            no,
            format!(
                "version must be an integer from 1 to {}, got {}",
                versions::MOST_IMPORTED,
                quoted(&s.text)
            ),
        )),
    }
}

/// An unquoted number is epoch milliseconds (daycare); anything else is text.
fn time_field(key: &str, no: usize, value: Value) -> Result<Option<TimeValue>> {
    let s = scalar_of(key, no, value)?;
    if is_null(&s) {
        return Ok(None);
    }
    let number = if s.plain { parse_number(&s.text) } else { None };
    Ok(Some(match number {
        Some(n) => TimeValue::EpochMillis(n),
        None => TimeValue::Text(s.text),
    }))
}

/// A YAML integer or decimal (`-1`, `1718000000000`, `1.5e3`, `.inf`).
fn parse_number(text: &str) -> Option<f64> {
    match text.to_ascii_lowercase().as_str() {
        ".inf" | "+.inf" => return Some(f64::INFINITY),
        "-.inf" => return Some(f64::NEG_INFINITY),
        ".nan" => return Some(f64::NAN),
        _ => {}
    }
    let digits_only =
        text.chars().all(|c| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'));
    if digits_only && text.chars().any(|c| c.is_ascii_digit()) { text.parse().ok() } else { None }
}

fn refs_field(no: usize, value: Value) -> Result<Option<Vec<String>>> {
    match value {
        Value::Seq(items) => items
            .into_iter()
            .map(|item| match is_null(&item) {
                true => Err(line_error(no, "refs items must be strings, not null")),
                false => Ok(item.text),
            })
            .collect::<Result<_>>()
            .map(Some),
        Value::Scalar(s) if s.plain && s.text.is_empty() => Ok(Some(Vec::new())),
        Value::Scalar(s) if is_null(&s) => Ok(None),
        Value::Scalar(s) => Err(line_error(
            no,
            format!("refs must be a sequence of strings, got {}", quoted(&s.text)),
        )),
    }
}

/// Write a document as frontmatter and body; [`parse`] reads it back equal.
///
/// A version below 1 is written as is and refused when read back.
pub fn render(doc: &Document) -> String {
    let fm = &doc.frontmatter;
    let mut out = String::from("---\n");
    let mut field = |key: &str, value: String| {
        let _ = writeln!(out, "{key}: {value}");
    };
    if let Some(title) = &fm.title {
        field("title", scalar(title, false));
    }
    if let Some(description) = &fm.description {
        field("description", scalar(description, false));
    }
    if let Some(version) = fm.version {
        field("version", version.to_string());
    }
    if let Some(created) = &fm.created_at {
        field("createdAt", time(created));
    }
    if let Some(updated) = &fm.updated_at {
        field("updatedAt", time(updated));
    }
    if let Some(refs) = &fm.refs {
        let items: Vec<String> = refs.iter().map(|r| scalar(r, true)).collect();
        field("refs", format!("[{}]", items.join(", ")));
    }
    if let Some(change) = &fm.change_description {
        field("changeDescription", scalar(change, false));
    }
    if let Some(saved) = &fm.saved_at {
        field("savedAt", time(saved));
    }
    out.push_str("---\n");
    out.push_str(&doc.body);
    out
}

fn time(value: &TimeValue) -> String {
    match value {
        TimeValue::Text(text) => double_quote(text),
        TimeValue::EpochMillis(n) if n.is_nan() => ".nan".to_string(),
        TimeValue::EpochMillis(n) if n.is_infinite() => {
            (if *n > 0.0 { ".inf" } else { "-.inf" }).to_string()
        }
        // Display writes integers without ".0" and never uses exponents.
        TimeValue::EpochMillis(n) => format!("{n}"),
    }
}

/// A string as a plain scalar when every YAML reader takes it as that very
/// string, otherwise double-quoted. In a flow sequence `,[]{}` also force
/// quotes.
fn scalar(s: &str, in_flow: bool) -> String {
    let plain_ok = !s.is_empty()
        && !s.starts_with(char::is_whitespace)
        && !s.ends_with(char::is_whitespace)
        && !s.chars().any(needs_escape)
        && !s.starts_with(|c| INDICATORS.contains(c))
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !(in_flow && s.contains([',', '[', ']', '{', '}']))
        && !looks_typed(s);
    if plain_ok { s.to_string() } else { double_quote(s) }
}

/// Would some YAML reader take this plain text as null, a bool or a number?
/// YAML 1.1 (js-yaml's heritage) reads `yes`, `0x1f`, `1_000`, `12:30` and
/// dates as typed values, so anything that starts like a number is quoted.
fn looks_typed(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let words = ["null", "~", "true", "false", "yes", "no", "on", "off", "y", "n", "="];
    let unsigned = lower.strip_prefix('+').unwrap_or(&lower);
    let unsigned = unsigned.strip_prefix('.').unwrap_or(unsigned);
    words.contains(&lower.as_str())
        || matches!(unsigned, "inf" | "nan")
        || unsigned.starts_with(|c: char| c.is_ascii_digit())
}

/// Characters never written raw: controls (js-yaml refuses a stream with
/// them) and the separators some readers take as line breaks.
fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// A JSON-compatible double-quoted string, which YAML reads the same way.
fn double_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            // Every character needs_escape picks is in the BMP.
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_every_frontmatter_key_as_json() {
        let text = "---\nstatus: draft\npriority: 2\nscore: 1.5\npinned: true\nowner: ~\nquoted: '42'\ntags: [a, \"b c\"]\nnotes: |\n  line one\n  line two\n---\n# Body\n";
        let (meta, body) = parse_meta(text).unwrap();
        assert_eq!(
            serde_json::Value::Object(meta),
            serde_json::json!({
                "status": "draft", "priority": 2, "score": 1.5, "pinned": true, "owner": null,
                "quoted": "42", "tags": ["a", "b c"], "notes": "line one\nline two\n"
            })
        );
        assert_eq!(body, "# Body\n");
    }

    #[test]
    fn meta_of_text_without_frontmatter_is_empty() {
        let (meta, body) = parse_meta("plain text\n---\nnot: frontmatter\n").unwrap();
        assert!(meta.is_empty());
        assert_eq!(body, "plain text\n---\nnot: frontmatter\n");
        assert!(parse_meta("---\nnever: closed\n").is_err());
        assert!(parse_meta("---\nnested:\n  key: 1\n---\n").is_err());
    }
    use crate::ErrorKind;

    fn fm(text: &str) -> Frontmatter {
        parse(&format!("---\n{text}---\n")).unwrap().frontmatter
    }

    fn error_of(markdown: &str) -> Error {
        let err = parse(markdown).expect_err(markdown);
        assert_eq!(err.kind, ErrorKind::InvalidParameter, "{err}");
        err
    }

    #[rustfmt::skip]
    const TRICKY: &[&str] = &[
        "", " ", "plain", "Project Atlas", "with: colon", "a:b", "ends with:", "hash # here",
        "#start", "a#b", "\"quoted\"", "'single'", "it's", "back\\slash", "line\nbreak",
        "\ttab", "tab\tinside", "crlf\r\n", "  padded  ", "true", "no", "Yes", "null", "~",
        "NULL", "123", "1.5", "0x1f", ".inf", "-1", "+1", "- x", "-", "[a]", "{a: 1}", "a, b",
        "a [b] {c}", "---", "...", "| literal", "> folded", "%p", "@at", "`tick", "!tag",
        "&anchor", "*alias", "?q", ": colon", "café ☕ 日本語 🎉", "\u{2028}sep", "\u{feff}bom",
        "del\u{7f}", "nel\u{85}", "2024-06-10", "12:30", "=", "\\u0041",
        "\u{a0}nbsp\u{a0}",
    ];

    #[rustfmt::skip]
    const BODIES: &[&str] = &[
        "", "\n", "\nstarts with a newline\n", "# Heading\n\nText\n", "a\n---\nb\n---\n",
        "no newline at the end", "crlf\r\nbody\r\n", "---\n", "  indented\n", "\u{feff}x",
    ];

    #[test]
    fn render_then_parse_gives_the_same_document() {
        #[rustfmt::skip]
        let times = [0.0, 1718000000000.0, 1718000000000.5, -1.0, 1e21, 0.1, f64::MAX, f64::INFINITY];
        let mut docs = Vec::new();
        for body in BODIES {
            docs.push(Document { frontmatter: Frontmatter::default(), body: body.to_string() });
        }
        for (i, s) in TRICKY.iter().enumerate() {
            let frontmatter = Frontmatter {
                title: Some(s.to_string()),
                description: Some(format!("{s}{s}")),
                version: Some(i as i32 + 1),
                created_at: Some(TimeValue::Text(s.to_string())),
                updated_at: Some(TimeValue::EpochMillis(times[i % times.len()])),
                refs: Some(if i % 5 == 0 { vec![] } else { vec![s.to_string(), "x".into()] }),
                change_description: Some(s.to_string()),
                saved_at: Some(TimeValue::Text(s.to_string())),
            };
            docs.push(Document { frontmatter, body: BODIES[i % BODIES.len()].to_string() });
        }
        docs.push(Document {
            frontmatter: Frontmatter {
                refs: Some(TRICKY.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            },
            body: String::new(),
        });
        for doc in docs {
            let text = render(&doc);
            assert_eq!(parse(&text), Ok(doc), "{text}");
        }
        // A NUL is rendered escaped, and refused when read back: PostgreSQL's
        // text cannot hold it.
        let nul = Document {
            frontmatter: Frontmatter { title: Some("nul\u{0}".into()), ..Default::default() },
            body: String::new(),
        };
        let refused = parse(&render(&nul)).unwrap_err().message;
        assert!(refused.contains("a NUL character"), "{refused}");
    }

    #[test]
    fn render_writes_fields_in_order_and_quotes_only_when_needed() {
        let doc = Document {
            frontmatter: Frontmatter {
                title: Some("Project Atlas".into()),
                description: Some("true".into()),
                version: Some(3),
                created_at: Some(TimeValue::EpochMillis(1718000000000.0)),
                updated_at: Some(TimeValue::Text("2024-06-10T12:00:00Z".into())),
                refs: Some(vec!["abc".into(), "a, b".into(), "".into()]),
                change_description: Some("Re: notes".into()),
                saved_at: None,
            },
            body: "# Atlas\n".into(),
        };
        assert_eq!(
            render(&doc),
            "---\ntitle: Project Atlas\ndescription: \"true\"\nversion: 3\ncreatedAt: 1718000000000\n\
             updatedAt: \"2024-06-10T12:00:00Z\"\nrefs: [abc, \"a, b\", \"\"]\n\
             changeDescription: \"Re: notes\"\n---\n# Atlas\n"
        );
        assert_eq!(render(&Document::default()), "---\n---\n");
        assert_eq!(scalar("tab\there\u{7f}", false), "\"tab\\there\\u007f\"");
    }

    #[test]
    fn parses_a_daycare_file_written_by_js_yaml() {
        let text = "---\ntitle: Project Atlas\ndescription: >-\n  long folded\n  text\n\
                    createdAt: 1718000000000\nupdatedAt: 1718000005000\nparents:\n  - __root__\n\
                    refs:\n  - abc\n  - def\nversion: 2\npath: ~/notes/atlas.md\n---\n# Atlas\n\nBody.\n";
        let doc = parse(text).unwrap();
        assert_eq!(
            doc.frontmatter,
            Frontmatter {
                title: Some("Project Atlas".into()),
                description: Some("long folded text".into()),
                version: Some(2),
                created_at: Some(TimeValue::EpochMillis(1718000000000.0)),
                updated_at: Some(TimeValue::EpochMillis(1718000005000.0)),
                refs: Some(vec!["abc".into(), "def".into()]),
                change_description: None,
                saved_at: None,
            }
        );
        assert_eq!(doc.body, "# Atlas\n\nBody.\n");
    }

    #[test]
    fn reads_js_yaml_scalar_styles() {
        let f = fm(
            "title: '123'\ndescription: \"tab\\t\\\"q\\\" \\uD83D\\uDE00 \\xe9 \\U0001F600 \\_ \\/\"\n\
                    changeDescription: 'it''s' # comment\nversion: '7'\nrefs: [a, \"b, c\", 'd']\n\
                    createdAt: 2024-06-10T12:00:00Z\nupdatedAt: 1.5e3\n",
        );
        assert_eq!(f.title.as_deref(), Some("123"));
        assert_eq!(f.description.as_deref(), Some("tab\t\"q\" 😀 é 😀 \u{a0} /"));
        assert_eq!(f.change_description.as_deref(), Some("it's"));
        assert_eq!(f.version, Some(7));
        assert_eq!(f.refs, Some(vec!["a".into(), "b, c".into(), "d".into()]));
        assert_eq!(f.created_at, Some(TimeValue::Text("2024-06-10T12:00:00Z".into())));
        assert_eq!(f.updated_at, Some(TimeValue::EpochMillis(1500.0)));
        let f = fm("title: null\ndescription:\nchangeDescription: ~\nrefs:\ncreatedAt: '1718'\n");
        assert_eq!((f.title, f.description, f.change_description), (None, None, None));
        assert_eq!(f.refs, Some(vec![]));
        assert_eq!(f.created_at, Some(TimeValue::Text("1718".into())));
        assert_eq!(fm("title: a#b  # note\nrefs: []\n").title.as_deref(), Some("a#b"));
    }

    #[test]
    fn block_scalars_fold_and_chomp() {
        let f = fm(
            "title: |\n  a\n\n  b\n\ndescription: |-\n  a\n  b\n\nchangeDescription: |+\n  a\n\n",
        );
        assert_eq!(f.title.as_deref(), Some("a\n\nb\n"));
        assert_eq!(f.description.as_deref(), Some("a\nb"));
        assert_eq!(f.change_description.as_deref(), Some("a\n\n"));
        // YAML spec example 8.10: folding keeps more-indented lines.
        let f = fm(">\n\n folded\n line\n\n next\n line\n   * bullet\n\n   * list\n   * lines\n\n last\n line\n\n# Comment\n"
            .replace(">\n", "title: >\n").as_str());
        assert_eq!(
            f.title.as_deref(),
            Some("\nfolded line\nnext line\n  * bullet\n\n  * list\n  * lines\n\nlast line\n")
        );
        // An indentation digit, as js-yaml writes for text starting with spaces.
        assert_eq!(fm("title: |2-\n    code\n  end\n").title.as_deref(), Some("  code\nend"));
        assert_eq!(
            fm("title: >+\n  a\n  # not a comment\n").title.as_deref(),
            Some("a # not a comment\n")
        );
    }

    #[test]
    fn unknown_keys_of_any_shape_are_ignored() {
        let f = fm(
            "a: x\nb: [1, 2]\nc:\n- y\n- 'z'\nd: >-\n  folded\n  text\ne:\n# comment\n\nversion: 1\n",
        );
        assert_eq!(f, Frontmatter { version: Some(1), ..Default::default() });
    }

    #[test]
    fn without_frontmatter_the_whole_text_is_the_body() {
        for text in [
            "",
            "# Title\n",
            "---",
            " ---\nx: 1\n---\n",
            "--- \n---\n",
            "\u{feff}text",
            "text\n---\n",
        ] {
            assert_eq!(
                parse(text),
                Ok(Document { frontmatter: Frontmatter::default(), body: text.into() })
            );
        }
        let doc = parse("\u{feff}---\ntitle: x\n---").unwrap();
        assert_eq!((doc.frontmatter.title.as_deref(), doc.body.as_str()), (Some("x"), ""));
    }

    #[test]
    fn crlf_input() {
        let doc = parse("---\r\ntitle: A\r\ndescription: >-\r\n  b\r\n  c\r\nrefs:\r\n  - d\r\n--- \r\nbody\r\n").unwrap();
        assert_eq!(doc.frontmatter.title.as_deref(), Some("A"));
        assert_eq!(doc.frontmatter.description.as_deref(), Some("b c"));
        assert_eq!(doc.frontmatter.refs, Some(vec!["d".into()]));
        assert_eq!(doc.body, "body\r\n");
    }

    #[test]
    fn malformed_frontmatter_is_refused_with_the_line() {
        #[rustfmt::skip]
        let cases = [
            ("---\ntitle: x\n", "never closed"),
            ("---\ntitle: x\nwhat is this\n---\n", "line 3: expected \"key: value\""),
            ("---\ntitle: x\n  indented: y\n---\n", "line 3: unexpected indented line"),
            ("---\ntitle: x\ntitle: y\n---\n", "line 3: duplicate key \"title\""),
            ("---\ntitle: \"a\\0b\"\n---\n", "line 2: a NUL character"),
            ("---\ntitle: \"a\\x00b\"\n---\n", "line 2: a NUL character"),
            ("---\ntitle: \"a\\u0000b\"\n---\n", "line 2: a NUL character"),
            ("---\ntitle: \0\"\n---\n", "line 2: a NUL character"),
            ("---\nx: 1\n# \0\n---\n", "line 3: a NUL character"),
            ("---\nversion: 0\n---\n", "line 2: version must be an integer"),
            ("---\nversion: 1.5\n---\n", "version must be an integer"),
            ("---\nversion: 99999999999\n---\n", "version must be an integer"),
            ("---\nversion: 2147483647\n---\n", "from 1 to 1000000000"),
            ("---\ntitle: \"a\\qb\"\n---\n", "line 2: unknown escape \"\\\\q\""),
            ("---\ntitle: \"\\uD83D x\"\n---\n", "bad \\u escape"),
            ("---\ntitle: \"open\n---\n", "line 2: unterminated double-quoted"),
            ("---\ntitle: 'open\n---\n", "unterminated single-quoted"),
            ("---\nrefs: abc\n---\n", "line 2: refs must be a sequence"),
            ("---\nrefs: [a, b\n---\n", "not closed"),
            ("---\nrefs:\n  - a\n    - b\n---\n", "line 4: sequence item is not aligned"),
            ("---\ntitle: x\n  - b\n---\n", "line 3: unexpected indented line"),
            ("---\nrefs:\n  - a\n - b\n---\n", "line 4: sequence item is not aligned"),
            ("---\ntitle: [a]\n---\n", "title must be a single value"),
            ("---\ntitle: a: b\n---\n", "quote it"),
            ("---\ntitle: \"a\" b\n---\n", "unexpected text"),
            ("---\ntitle: &x a\n---\n", "unsupported YAML syntax"),
            ("---\ntitle: >x\n---\n", "bad block scalar header"),
        ];
        for (text, expected) in cases {
            let err = error_of(text);
            assert!(err.message.contains(expected), "{text:?}: {}", err.message);
        }
    }

    #[test]
    fn never_panics_on_cut_or_mangled_input() {
        let sample = "\u{feff}---\r\ntitle: \"é\\u00e9\\uD83D\\uDE00\"\ndescription: >2-\n   a\n\n  b\nrefs: ['x''y', \"z\"]\n\
                      p:\n  - é\n---\nbody 日本\n";
        let mut cuts: Vec<usize> = sample.char_indices().map(|(i, _)| i).collect();
        cuts.push(sample.len());
        for &at in &cuts {
            let _ = parse(&sample[..at]);
            let _ = parse(&sample[at..]);
            for junk in ["\\", "\"", "'", "\n", ":", "[", "é"] {
                let _ = parse(&format!("{}{junk}{}", &sample[..at], &sample[at..]));
            }
        }
    }
}
