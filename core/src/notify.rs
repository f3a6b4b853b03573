//! A transaction's change notifications, held until it commits.
//!
//! A transaction may change one subject (a working-memory part, a scope's
//! files, an owner's graph) any number of times; at commit it announces
//! each subject once, with the detail of its last change, in the order of
//! each subject's last change. What a rolled back subtransaction queued is
//! dropped, and a subject it changed again goes back to its earlier detail
//! and place.
//!
//! So the queue holds each subject once per open subtransaction that
//! changed it: its size follows the subjects a transaction changed, not
//! how often it changed them, and a subtransaction's end costs what that
//! subtransaction queued, not what the whole transaction did.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::rc::Rc;

/// PostgreSQL's subtransaction id: the top level is 1, and each
/// subtransaction's id is larger than its parent's.
pub type SubtransactionId = u32;

/// One subtransaction's change of a subject.
struct Change<D> {
    subtransaction: SubtransactionId,
    /// The change's place in the transaction's order of changes.
    place: u64,
    detail: D,
}

/// The notifications of one transaction; `S` is what changed, `D` the
/// detail of its last change.
pub struct PendingNotifications<S, D> {
    next_place: u64,
    /// Each subject at the place of its last change that still stands.
    order: BTreeMap<u64, Rc<S>>,
    /// Each subject's changes that still stand, one per open
    /// subtransaction that changed it, innermost last.
    changes: HashMap<Rc<S>, Vec<Change<D>>>,
    /// The open subtransactions that changed something, innermost last,
    /// with the subjects each changed.
    levels: Vec<(SubtransactionId, Vec<Rc<S>>)>,
}

impl<S: Eq + Hash, D> Default for PendingNotifications<S, D> {
    fn default() -> Self {
        PendingNotifications {
            next_place: 0,
            order: BTreeMap::new(),
            changes: HashMap::new(),
            levels: Vec::new(),
        }
    }
}

/// The subjects changed in `subtransaction`, the innermost open one.
fn level_of<S>(
    levels: &mut Vec<(SubtransactionId, Vec<Rc<S>>)>, subtransaction: SubtransactionId,
) -> &mut Vec<Rc<S>> {
    if levels.last().is_none_or(|(id, _)| *id != subtransaction) {
        levels.push((subtransaction, Vec::new()));
    }
    &mut levels.last_mut().expect("a level was just ensured").1
}

impl<S: Eq + Hash, D> PendingNotifications<S, D> {
    /// How many subjects would be announced now.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// `subject` changed, with `detail`, in `subtransaction`, the innermost
    /// open one.
    pub fn push(&mut self, subject: S, detail: D, subtransaction: SubtransactionId) {
        let place = self.next_place;
        self.next_place += 1;
        let Some(changes) = self.changes.get_mut(&subject) else {
            let subject = Rc::new(subject);
            self.order.insert(place, subject.clone());
            level_of(&mut self.levels, subtransaction).push(subject.clone());
            self.changes.insert(subject, vec![Change { subtransaction, place, detail }]);
            return;
        };
        let last = changes.last_mut().expect("a subject kept has a change");
        let subject =
            self.order.remove(&last.place).expect("the order holds each subject's last change");
        self.order.insert(place, subject.clone());
        if last.subtransaction == subtransaction {
            last.place = place;
            last.detail = detail;
        } else {
            changes.push(Change { subtransaction, place, detail });
            level_of(&mut self.levels, subtransaction).push(subject);
        }
    }

    /// Subtransaction `child` committed into `parent`: its changes become
    /// the parent's, replacing the parent's own of the same subjects.
    pub fn commit_subtransaction(&mut self, child: SubtransactionId, parent: SubtransactionId) {
        let Some(subjects) = self.take_level(child) else {
            return;
        };
        for subject in subjects {
            let changes = self.changes.get_mut(&subject).expect("a level's subjects are kept");
            let change = changes.pop().expect("a level's subjects changed in it");
            match changes.last_mut() {
                Some(below) if below.subtransaction == parent => {
                    below.place = change.place;
                    below.detail = change.detail;
                }
                _ => {
                    changes.push(Change { subtransaction: parent, ..change });
                    level_of(&mut self.levels, parent).push(subject);
                }
            }
        }
    }

    /// Subtransaction `child` rolled back: its changes are dropped, and a
    /// subject changed before it goes back to that change.
    pub fn abort_subtransaction(&mut self, child: SubtransactionId) {
        let Some(subjects) = self.take_level(child) else {
            return;
        };
        for subject in subjects {
            let changes = self.changes.get_mut(&subject).expect("a level's subjects are kept");
            let change = changes.pop().expect("a level's subjects changed in it");
            self.order.remove(&change.place);
            match changes.last() {
                Some(below) => {
                    self.order.insert(below.place, subject);
                }
                None => {
                    self.changes.remove(&subject);
                }
            }
        }
    }

    fn take_level(&mut self, subtransaction: SubtransactionId) -> Option<Vec<Rc<S>>> {
        match self.levels.last() {
            Some((id, _)) if *id == subtransaction => {
                self.levels.pop().map(|(_, subjects)| subjects)
            }
            _ => None,
        }
    }

    /// The notifications to send, in order, leaving the queue empty.
    pub fn take(&mut self) -> Vec<(Rc<S>, D)> {
        let order = std::mem::take(&mut self.order);
        self.levels.clear();
        let mut changes = std::mem::take(&mut self.changes);
        self.next_place = 0;
        order
            .into_values()
            .filter_map(|subject| {
                let last = changes.remove(&subject)?.pop()?;
                Some((subject, last.detail))
            })
            .collect()
    }

    /// Forget everything (the transaction rolled back).
    pub fn clear(&mut self) {
        *self = PendingNotifications::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOP: SubtransactionId = 1;

    fn sent(queue: &mut PendingNotifications<&'static str, i32>) -> Vec<(&'static str, i32)> {
        queue.take().into_iter().map(|(subject, detail)| (*subject, detail)).collect()
    }

    #[test]
    fn a_subject_changed_often_is_announced_once_with_its_last_change() {
        let mut queue = PendingNotifications::default();
        for version in 1..=100_000 {
            queue.push("part", version, TOP);
        }
        assert_eq!(queue.len(), 1);
        assert_eq!(sent(&mut queue), vec![("part", 100_000)]);
        assert!(queue.is_empty());
    }

    #[test]
    fn subjects_come_in_the_order_of_their_last_change() {
        let mut queue = PendingNotifications::default();
        queue.push("part", 1, TOP);
        queue.push("clear", 0, TOP);
        queue.push("part", 2, TOP);
        assert_eq!(sent(&mut queue), vec![("clear", 0), ("part", 2)]);
    }

    #[test]
    fn a_rolled_back_subtransaction_restores_detail_and_place() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.push("b", 1, TOP);
        queue.push("a", 2, 2);
        queue.push("c", 1, 2);
        queue.abort_subtransaction(2);
        assert_eq!(sent(&mut queue), vec![("a", 1), ("b", 1)]);
    }

    #[test]
    fn a_committed_subtransaction_hands_its_changes_to_its_parent() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.push("b", 1, 2);
        queue.push("a", 2, 3);
        queue.commit_subtransaction(3, 2);
        queue.commit_subtransaction(2, TOP);
        assert_eq!(queue.levels.len(), 1);
        assert_eq!(queue.changes[&"a"].len(), 1);
        assert_eq!(sent(&mut queue), vec![("b", 1), ("a", 2)]);
    }

    #[test]
    fn a_committed_child_of_a_rolled_back_parent_is_dropped() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.push("a", 2, 2);
        queue.push("a", 3, 3);
        queue.push("b", 1, 3);
        queue.commit_subtransaction(3, 2);
        queue.abort_subtransaction(2);
        assert_eq!(sent(&mut queue), vec![("a", 1)]);
    }

    #[test]
    fn a_parent_that_changed_nothing_takes_its_childs_changes() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.push("a", 2, 3);
        queue.commit_subtransaction(3, 2);
        assert_eq!(queue.changes[&"a"].len(), 2);
        queue.abort_subtransaction(2);
        assert_eq!(sent(&mut queue), vec![("a", 1)]);
    }

    #[test]
    fn a_subtransaction_per_change_keeps_the_queue_flat() {
        // As a PL/pgSQL loop with an EXCEPTION block makes: each change in
        // a subtransaction of its own, committed.
        let mut queue = PendingNotifications::default();
        for n in 0..100_000u32 {
            let subtransaction = n + 2;
            queue.push(if n % 2 == 0 { "a" } else { "b" }, n as i32, subtransaction);
            queue.commit_subtransaction(subtransaction, TOP);
        }
        assert_eq!(queue.levels.len(), 1);
        assert_eq!(queue.changes.values().map(Vec::len).sum::<usize>(), 2);
        assert_eq!(sent(&mut queue), vec![("a", 99_998), ("b", 99_999)]);
    }

    #[test]
    fn an_end_of_a_subtransaction_that_changed_nothing_changes_nothing() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.commit_subtransaction(5, 4);
        queue.abort_subtransaction(6);
        assert_eq!(sent(&mut queue), vec![("a", 1)]);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut queue = PendingNotifications::default();
        queue.push("a", 1, TOP);
        queue.push("b", 1, 2);
        queue.clear();
        assert!(queue.is_empty());
        assert!(sent(&mut queue).is_empty());
    }
}
