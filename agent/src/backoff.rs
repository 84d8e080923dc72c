//! [`Backoff`]: exponential backoff with jitter, a cap and a reset. Used
//! by the server link's reconnect and the podman events watcher's restart
//! (full jitter), and by the crash-loop delay of restarts (equal jitter,
//! [`Backoff::next_delay_equal_jitter`]). Pure: it only computes delays;
//! callers sleep with `tokio::time`.

use std::time::Duration;

/// Exponential backoff with full jitter: the n-th delay (from 0) is drawn
/// uniformly from `0 ..= min(base * 2^n, cap)`.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
    rng: fastrand::Rng,
}

impl Backoff {
    /// A backoff starting at `base` and doubling up to `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self { base, cap, attempt: 0, rng: fastrand::Rng::new() }
    }

    /// The same with a seeded random generator (deterministic tests).
    pub fn with_seed(base: Duration, cap: Duration, seed: u64) -> Self {
        Self { base, cap, attempt: 0, rng: fastrand::Rng::with_seed(seed) }
    }

    /// The agent's reconnect policy: first retry within 50 ms, cap 2 s.
    pub fn reconnect() -> Self {
        Self::new(Duration::from_millis(50), Duration::from_secs(2))
    }

    /// The upper bound of the next delay, without drawing it.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// Draws the next delay and advances the exponent.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.u64(0..=nanos))
    }

    /// Draws the next delay with "equal jitter" and advances the exponent:
    /// half of the ceiling `d` is fixed, the other half random, so the
    /// delay lies in `d/2 ..= d`. Unlike full jitter the delays still
    /// visibly grow from one to the next (each ceiling doubles), which a
    /// user reading restart times expects of a backoff.
    pub fn next_delay_equal_jitter(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.attempt = self.attempt.saturating_add(1);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        let half = nanos / 2;
        Duration::from_nanos(half + self.rng.u64(0..=nanos - half))
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// How many delays were drawn since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn backoff_ceilings_double_up_to_the_cap() {
        let mut b = Backoff::with_seed(50 * MS, 2000 * MS, 7);
        let mut ceilings = Vec::new();
        for _ in 0..8 {
            ceilings.push(b.ceiling());
            let d = b.next_delay();
            assert!(d <= *ceilings.last().unwrap(), "{d:?} above its ceiling");
        }
        let expected: Vec<Duration> = [50u32, 100, 200, 400, 800, 1600, 2000, 2000].iter().map(|m| *m * MS).collect();
        assert_eq!(ceilings, expected);
    }

    #[test]
    fn backoff_reset_starts_over_and_many_attempts_do_not_overflow() {
        let mut b = Backoff::with_seed(50 * MS, 2000 * MS, 1);
        for _ in 0..200 {
            assert!(b.next_delay() <= 2000 * MS);
        }
        assert_eq!(b.ceiling(), 2000 * MS);
        b.reset();
        assert_eq!(b.attempts(), 0);
        assert_eq!(b.ceiling(), 50 * MS);
        assert!(b.next_delay() <= 50 * MS);
    }

    #[test]
    fn backoff_jitter_spreads_delays() {
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20 {
            let mut b = Backoff::with_seed(50 * MS, 2000 * MS, seed);
            seen.insert(b.next_delay());
        }
        assert!(seen.len() > 10, "full jitter should give distinct delays: {seen:?}");
    }

    #[test]
    fn backoff_equal_jitter_keeps_each_delay_in_the_upper_half_of_its_ceiling() {
        for seed in 0..50 {
            let mut b = Backoff::with_seed(1000 * MS, 8000 * MS, seed);
            for _ in 0..6 {
                let ceiling = b.ceiling();
                let d = b.next_delay_equal_jitter();
                assert!(d >= ceiling / 2 && d <= ceiling, "seed {seed}: {d:?} outside half of {ceiling:?}");
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..20 {
            seen.insert(Backoff::with_seed(1000 * MS, 8000 * MS, seed).next_delay_equal_jitter());
        }
        assert!(seen.len() > 10, "the random half spreads the delays: {seen:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_retries_fit_in_the_cap_on_virtual_time() {
        let start = tokio::time::Instant::now();
        let mut b = Backoff::reconnect();
        for _ in 0..10 {
            tokio::time::sleep(b.next_delay()).await;
        }
        // 50+100+200+400+800+1600+4*2000 ms at most.
        assert!(start.elapsed() <= 11_150 * MS, "{:?}", start.elapsed());
        b.reset();
        let t = tokio::time::Instant::now();
        tokio::time::sleep(b.next_delay()).await;
        assert!(t.elapsed() <= 50 * MS);
    }
}
