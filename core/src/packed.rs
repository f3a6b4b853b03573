//! Many short strings in one allocation: a million node ids or titles cost
//! one growing buffer instead of a million small ones.

use std::ops::Range;

/// Where a string sits in a [`Packed`].
pub type Span = Range<usize>;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packed {
    text: String,
}

impl Packed {
    pub fn with_capacity(bytes: usize) -> Packed {
        Packed { text: String::with_capacity(bytes) }
    }

    /// Store `value`; its span gives it back.
    pub fn push(&mut self, value: &str) -> Span {
        let start = self.text.len();
        self.text.push_str(value);
        start..self.text.len()
    }

    /// The string at `span` (a span this buffer gave).
    pub fn get(&self, span: &Span) -> &str {
        self.text.get(span.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_come_back_by_span() {
        let mut packed = Packed::with_capacity(4);
        let a = packed.push("node é");
        let b = packed.push("");
        let c = packed.push("n2");
        assert_eq!(packed.get(&a), "node é");
        assert_eq!(packed.get(&b), "");
        assert_eq!(packed.get(&c), "n2");
        assert_eq!(packed.get(&(0..100)), "");
    }
}
