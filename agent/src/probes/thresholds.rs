//! [`Thresholds`]: the verdict of a probe from its consecutive results. It
//! flips to passing after `successThreshold` passes in a row and to failing
//! after `failureThreshold` failures in a row; before either it is unknown.
//! Pure: no clock, no I/O.

/// A probe's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Unknown,
    Passing,
    Failing,
}

/// The consecutive-result counter of one probe.
#[derive(Debug, Clone)]
pub struct Thresholds {
    success: u32,
    failure: u32,
    passes: u32,
    failures: u32,
    verdict: Verdict,
}

impl Thresholds {
    /// A counter flipping after `success` passes or `failure` failures in
    /// a row (each at least 1).
    pub fn new(success: u32, failure: u32) -> Self {
        Self { success: success.max(1), failure: failure.max(1), passes: 0, failures: 0, verdict: Verdict::Unknown }
    }

    pub fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// How many failures in a row there were, up to now.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Takes one result; returns the new verdict when it flipped.
    pub fn record(&mut self, passed: bool) -> Option<Verdict> {
        let next = if passed {
            self.passes = self.passes.saturating_add(1);
            self.failures = 0;
            (self.passes >= self.success).then_some(Verdict::Passing)
        } else {
            self.failures = self.failures.saturating_add(1);
            self.passes = 0;
            (self.failures >= self.failure).then_some(Verdict::Failing)
        };
        match next {
            Some(v) if v != self.verdict => {
                self.verdict = v;
                Some(v)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_flips_after_consecutive_results_only() {
        let mut t = Thresholds::new(2, 3);
        assert_eq!(t.record(true), None, "one pass of two");
        assert_eq!(t.record(false), None);
        assert_eq!(t.record(true), None, "the run of passes started over");
        assert_eq!(t.record(true), Some(Verdict::Passing));
        assert_eq!(t.record(true), None, "no flip while it stays");
        assert_eq!((t.record(false), t.record(false)), (None, None));
        assert_eq!(t.record(true), None, "a pass resets the failures");
        assert_eq!((t.record(false), t.record(false)), (None, None));
        assert_eq!(t.record(false), Some(Verdict::Failing));
        assert_eq!(t.failures(), 3);
        assert_eq!(t.record(false), None);
        assert_eq!(t.verdict(), Verdict::Failing);
    }

    #[test]
    fn thresholds_of_one_flip_at_once_and_zero_counts_as_one() {
        let mut t = Thresholds::new(0, 0);
        assert_eq!(t.record(false), Some(Verdict::Failing));
        assert_eq!(t.record(true), Some(Verdict::Passing));
    }
}
