//! How the cleanup worker sizes its batches.

/// The number of rows the cleanup worker's next batch takes.
///
/// A batch that runs past its time limit is undone, and the next one takes
/// half as many rows, down to one: a slow stretch of rows (a session that
/// owns many, a slow trigger) costs a few smaller batches, not the run.
/// The size that stood after a timeout is kept while the stretch lasts:
/// growing straight back to the size that timed out would undo every
/// other batch. Only after STANDS_BEFORE_GROWING batches of it stand does
/// the size double again, up to the configured one. A single row that is
/// still too slow is passed over for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    configured: i32,
    current: i32,
    /// The most rows a batch takes now: halved by a timeout, the configured
    /// size otherwise.
    most: i32,
    /// Batches that stood in a row at `most` below the configured size.
    stood_at_most: u32,
}

/// How many batches at a size kept after a timeout stand before the size
/// grows again: one timeout at most for this many batches that stand,
/// while rows stay as slow.
pub const STANDS_BEFORE_GROWING: u32 = 8;

/// What follows a batch that ran past its time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterTimeout {
    /// Try again from the same place with fewer rows.
    Retry,
    /// The batch held one row: pass over it.
    PassOver,
}

impl BatchSize {
    /// Start at the configured size (at least one row).
    pub fn new(configured: i32) -> Self {
        let configured = configured.max(1);
        BatchSize { configured, current: configured, most: configured, stood_at_most: 0 }
    }

    /// Rows the next batch takes.
    pub fn rows(self) -> i32 {
        self.current
    }

    /// A batch stood.
    pub fn stood(&mut self) {
        if self.current == self.most && self.most < self.configured {
            self.stood_at_most += 1;
            if self.stood_at_most >= STANDS_BEFORE_GROWING {
                self.stood_at_most = 0;
                self.most = self.most.saturating_mul(2).min(self.configured);
            }
        }
        self.current = self.current.saturating_mul(2).min(self.most);
    }

    /// A batch ran past its time limit.
    pub fn timed_out(&mut self) -> AfterTimeout {
        self.stood_at_most = 0;
        if self.current == 1 {
            // The one row is passed over; the rows after it start afresh.
            self.current = self.configured;
            self.most = self.configured;
            AfterTimeout::PassOver
        } else {
            self.current /= 2;
            self.most = self.current;
            AfterTimeout::Retry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_halves_the_batch_down_to_one_row() {
        let mut size = BatchSize::new(1000);
        let mut seen = vec![size.rows()];
        while size.timed_out() == AfterTimeout::Retry {
            seen.push(size.rows());
        }
        assert_eq!(seen, [1000, 500, 250, 125, 62, 31, 15, 7, 3, 1], "each timeout halves");
        assert_eq!(size.rows(), 1000, "after passing over a row");
    }

    #[test]
    fn the_size_that_stood_is_kept_before_it_doubles_back() {
        let mut size = BatchSize::new(100);
        for _ in 0..4 {
            size.timed_out();
        }
        assert_eq!(size.rows(), 6);
        for _ in 1..STANDS_BEFORE_GROWING {
            size.stood();
            assert_eq!(size.rows(), 6, "kept while the stretch may last");
        }
        size.stood();
        assert_eq!(size.rows(), 12);
        // Each size grown to is kept as long again.
        let mut stands = 0;
        while size.rows() < 100 {
            size.stood();
            stands += 1;
        }
        assert_eq!(stands, 4 * STANDS_BEFORE_GROWING, "12, 24, 48 and 96, then 100");
        for _ in 0..10 {
            size.stood();
        }
        assert_eq!(size.rows(), 100, "never past the configured size");
    }

    #[test]
    fn rows_as_slow_cost_one_timeout_in_so_many_batches() {
        // Every batch of more than 14 rows runs past its limit.
        let mut size = BatchSize::new(1000);
        let (mut stood, mut undone) = (0, 0);
        while stood < 100 {
            if size.rows() > 14 {
                undone += 1;
                assert_eq!(size.timed_out(), AfterTimeout::Retry);
            } else {
                stood += 1;
                size.stood();
            }
        }
        // Seven to get down from 1000 to 7; then, once 7 and 14 have stood
        // their turns, one each time 28 is tried.
        assert!(undone <= 7 + 100 / STANDS_BEFORE_GROWING, "{undone} undone");
    }

    #[test]
    fn one_row_batches_pass_over_at_once() {
        let mut size = BatchSize::new(1);
        assert_eq!(size.timed_out(), AfterTimeout::PassOver);
        assert_eq!(size.rows(), 1);
        assert_eq!(BatchSize::new(0).rows(), 1, "at least one row");
        assert_eq!(BatchSize::new(i32::MAX).timed_out(), AfterTimeout::Retry);
    }
}
