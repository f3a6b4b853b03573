//! How the cleanup worker sizes its batches.

/// The number of rows the cleanup worker's next batch takes.
///
/// A batch that runs past its time limit is undone, and the next one takes
/// half as many rows, down to one: a slow stretch of rows (a session that
/// owns many, a slow trigger) costs a few smaller batches, not the run.
/// Each batch that stands doubles the size again, up to the configured one.
/// A single row that is still too slow is passed over for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    configured: i32,
    current: i32,
}

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
        BatchSize {
            configured,
            current: configured,
        }
    }

    /// Rows the next batch takes.
    pub fn rows(self) -> i32 {
        self.current
    }

    /// A batch stood.
    pub fn stood(&mut self) {
        self.current = self.current.saturating_mul(2).min(self.configured);
    }

    /// A batch ran past its time limit.
    pub fn timed_out(&mut self) -> AfterTimeout {
        if self.current == 1 {
            // The one row is passed over; the rows after it start afresh.
            self.current = self.configured;
            AfterTimeout::PassOver
        } else {
            self.current /= 2;
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
        assert_eq!(
            seen,
            [1000, 500, 250, 125, 62, 31, 15, 7, 3, 1],
            "each timeout halves"
        );
        assert_eq!(size.rows(), 1000, "after passing over a row");
    }

    #[test]
    fn a_batch_that_stands_doubles_it_back_to_the_configured_size() {
        let mut size = BatchSize::new(100);
        for _ in 0..4 {
            size.timed_out();
        }
        assert_eq!(size.rows(), 6);
        size.stood();
        assert_eq!(size.rows(), 12);
        for _ in 0..10 {
            size.stood();
        }
        assert_eq!(size.rows(), 100, "never past the configured size");
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
