//! Percentiles of measured durations.

use std::time::Duration;

/// Median, p90, p99 and max of a set of round trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub median: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(mut samples: Vec<Duration>) -> Option<Self> {
        samples.sort_unstable();
        let max = *samples.last()?;
        Some(Self {
            count: samples.len(),
            median: percentile(&samples, 50),
            p90: percentile(&samples, 90),
            p99: percentile(&samples, 99),
            max,
        })
    }
}

/// Nearest rank: the smallest sample that at least `p` percent of the
/// samples do not exceed. `sorted` must not be empty.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_uses_nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).rev().map(Duration::from_millis).collect();
        let s = Summary::of(samples).unwrap();
        assert_eq!(s.count, 100);
        assert_eq!(s.median, Duration::from_millis(50));
        assert_eq!(s.p90, Duration::from_millis(90));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        let one = Summary::of(vec![Duration::from_micros(1500)]).unwrap();
        assert_eq!((one.median, one.p99), (Duration::from_micros(1500), Duration::from_micros(1500)));
        assert_eq!(ms(one.median), "1.500");
        assert!(Summary::of(Vec::new()).is_none());
    }
}
