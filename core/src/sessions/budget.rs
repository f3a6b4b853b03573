//! The word budget of a session's key-value memory.
//!
//! A write that would push the session over its budget evicts the oldest
//! entries (by last update) until everything fits; the keys being written are
//! never evicted. A write that cannot fit even in an empty memory is refused.

use crate::error::{Error, Result};

/// A live entry of the session, as the eviction sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held<'a> {
    pub key: &'a str,
    pub words: u64,
}

/// What a write does to the session's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Keys to delete, oldest first.
    pub evicted: Vec<String>,
    /// Words held after the write.
    pub total_words: u64,
}

/// Refuse writes that could not fit even in an empty memory; otherwise return
/// their words. Checked before anything is written.
pub fn check_fits(writes: &[(&str, u64)], budget: u64) -> Result<u64> {
    let incoming: u64 = writes.iter().map(|(_, w)| w).sum();
    if incoming > budget {
        let what = match writes {
            [(key, words)] => {
                format!("value of key {} has {words} words", crate::error::quoted(key))
            }
            _ => format!("the {} values written together have {incoming} words", writes.len()),
        };
        return Err(Error::limit(format!("{what}, over the word budget of {budget}"))
            .with_detail("Nothing was stored.")
            .with_hint("Store less text, or raise agent_memory.kv_word_budget."));
    }
    Ok(incoming)
}

/// Decide which entries to evict so that `writes` fit in `budget`.
///
/// `held` lists the session's live entries oldest first (including, possibly,
/// older versions of the keys being written: those are replaced, not kept).
pub fn plan_writes(held: &[Held<'_>], writes: &[(&str, u64)], budget: u64) -> Result<Plan> {
    let incoming = check_fits(writes, budget)?;
    let is_written = |key: &str| writes.iter().any(|(k, _)| *k == key);
    let others: Vec<&Held<'_>> = held.iter().filter(|h| !is_written(h.key)).collect();
    let mut total = incoming + others.iter().map(|h| h.words).sum::<u64>();
    let mut evicted = Vec::new();
    for entry in others {
        if total <= budget {
            break;
        }
        total -= entry.words;
        evicted.push(entry.key.to_string());
    }
    Ok(Plan { evicted, total_words: total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn held(entries: &[(&'static str, u64)]) -> Vec<Held<'static>> {
        entries.iter().map(|&(key, words)| Held { key, words }).collect()
    }

    #[test]
    fn fits_without_eviction() {
        let plan = plan_writes(&held(&[("a", 100), ("b", 200)]), &[("c", 300)], 600).unwrap();
        assert_eq!(plan.evicted, Vec::<String>::new());
        assert_eq!(plan.total_words, 600);
    }

    #[test]
    fn evicts_oldest_first_until_it_fits() {
        let plan =
            plan_writes(&held(&[("a", 100), ("b", 200), ("c", 250)]), &[("d", 300)], 600).unwrap();
        assert_eq!(plan.evicted, vec!["a", "b"]);
        assert_eq!(plan.total_words, 550);
    }

    #[test]
    fn rewriting_a_key_replaces_its_old_words_and_never_evicts_it() {
        // "a" is the oldest but is being written: its old 500 words go away.
        let plan = plan_writes(&held(&[("a", 500), ("b", 50)]), &[("a", 550)], 600).unwrap();
        assert_eq!(plan.evicted, Vec::<String>::new());
        assert_eq!(plan.total_words, 600);
        let plan = plan_writes(&held(&[("a", 500), ("b", 50)]), &[("a", 560)], 600).unwrap();
        assert_eq!(plan.evicted, vec!["b"]);
        assert_eq!(plan.total_words, 560);
    }

    #[test]
    fn a_value_over_the_budget_is_refused() {
        let err = plan_writes(&held(&[("a", 1)]), &[("big", 601)], 600).unwrap_err();
        assert_eq!(err.kind, ErrorKind::LimitExceeded);
        assert_eq!(err.message, "value of key \"big\" has 601 words, over the word budget of 600");
        let err = plan_writes(&[], &[("x", 400), ("y", 300)], 600).unwrap_err();
        assert_eq!(
            err.message,
            "the 2 values written together have 700 words, over the word budget of 600"
        );
    }

    #[test]
    fn exactly_the_budget_fits() {
        let plan = plan_writes(&held(&[("a", 1)]), &[("b", 600)], 600).unwrap();
        assert_eq!(plan.evicted, vec!["a"]);
        assert_eq!(plan.total_words, 600);
    }
}
