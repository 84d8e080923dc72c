//! The WorkloadScheduler's settings: its tick, the agent's quota (feature
//! K2) and the preemption rules (feature K4), with their defaults. Set by
//! the agent's config file, environment and flags (see `crate::cli`).

use std::time::Duration;

use ank_common::quota::QuotaLimits;

/// Default of [`SchedulerSettings::tick`].
pub const DEFAULT_TICK: Duration = Duration::from_secs(1);
/// Default of [`PreemptionSettings::delay`].
pub const DEFAULT_PREEMPTION_DELAY: Duration = Duration::from_secs(60);
/// Default of [`PreemptionSettings::postpone`].
pub const DEFAULT_PREEMPTION_POSTPONE: Duration = Duration::from_secs(60);
/// Default of [`PreemptionSettings::rate`].
pub const DEFAULT_PREEMPTION_RATE: u8 = 10;

/// How the scheduler orders, limits and preempts this agent's workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// How often waiting workloads are checked again while some are
    /// quota-blocked, postponed or preempted (their events count once per
    /// tick; preemption delay and postpone are measured against it).
    pub tick: Duration,
    /// The agent's quota; 0 is unlimited.
    pub quota: QuotaLimits,
    pub preemption: PreemptionSettings,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self { tick: DEFAULT_TICK, quota: QuotaLimits::default(), preemption: PreemptionSettings::default() }
    }
}

/// When a quota-blocked workload may stop lower-priority ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreemptionSettings {
    /// Preemption for every workload; without it only workloads with
    /// `policy.preemptEnabled` preempt.
    pub enabled: bool,
    /// How long a workload must be quota-blocked before it preempts.
    pub delay: Duration,
    /// How long a preempted workload is kept from starting again.
    pub postpone: Duration,
    /// Percent of the candidates that one tick may stop (at least one); 0..=100.
    pub rate: u8,
}

impl Default for PreemptionSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            delay: DEFAULT_PREEMPTION_DELAY,
            postpone: DEFAULT_PREEMPTION_POSTPONE,
            rate: DEFAULT_PREEMPTION_RATE,
        }
    }
}

impl PreemptionSettings {
    /// How many victims one tick may stop out of `candidates`:
    /// `max(1, ceil(rate % x candidates))`, never more than there are.
    pub fn victims_per_tick(&self, candidates: usize) -> usize {
        let rate = usize::from(self.rate.min(100));
        (candidates * rate).div_ceil(100).max(1).min(candidates)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // [test of feature K4]
    fn preemption_rate_allows_at_least_one_victim_per_tick() {
        let p = PreemptionSettings::default();
        assert_eq!(p.victims_per_tick(0), 0);
        assert_eq!(p.victims_per_tick(2), 1, "ceil(10 % x 2) = 1");
        assert_eq!(p.victims_per_tick(10), 1);
        assert_eq!(p.victims_per_tick(11), 2);
        let half = PreemptionSettings { rate: 50, ..p };
        assert_eq!(half.victims_per_tick(5), 3);
        let all = PreemptionSettings { rate: 100, ..p };
        assert_eq!(all.victims_per_tick(4), 4);
        let none = PreemptionSettings { rate: 0, ..p };
        assert_eq!(none.victims_per_tick(4), 1, "max(1, ...)");
    }
}
