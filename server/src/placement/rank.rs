//! The rank step of placement, as Krake scores clusters: every rank metric
//! is normalized to [0, 1] with its configured range (flipped when lower is
//! better), and the score is the weighted mean of the normalized values and
//! the stickiness term:
//!
//! ```text
//! score = (stickiness * s + sum(value_i * weight_i)) / (stickiness + sum(weight_i))
//! ```
//!
//! where `s` is 1 on the agent the workload runs on now and 0 elsewhere.
//! An agent lacking a rank metric (not advertised, out of range, or no range
//! configured) is ranked by stickiness alone and loses to every agent that
//! has all of them. Ties among the best are broken by the seeded generator.

use std::collections::BTreeMap;

use ank_common::workload_policy::RankTerm;

use super::MetricRange;
use super::rng::SplitMix64;

/// Scores closer than this are equal (sums of floats differ in the last bits).
const TIE: f64 = 1e-9;

/// The score of one candidate agent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// Every rank metric is advertised and within its range.
    pub has_metrics: bool,
    /// The normalized weighted score in [0, 1].
    pub value: f64,
}

impl Score {
    /// Whether `self` ranks strictly above `other`: agents with metrics
    /// first, then the higher value.
    pub fn beats(&self, other: &Score) -> bool {
        match (self.has_metrics, other.has_metrics) {
            (true, false) => true,
            (false, true) => false,
            _ => self.value > other.value + TIE,
        }
    }
}

/// The score of an agent with `metrics` for the `rank` terms; `current`:
/// the workload runs there now (the stickiness term is 1).
// [feature S3: normalized weighted ranking]
// [feature S4: stickiness bonus of the current agent]
pub fn score(
    rank: &[RankTerm],
    metrics: &BTreeMap<String, f64>,
    ranges: &BTreeMap<String, MetricRange>,
    stickiness: f64,
    current: bool,
) -> Score {
    let sticky = if current { 1.0 } else { 0.0 };
    let mut sum = stickiness * sticky;
    let mut weights = stickiness;
    for term in rank {
        let normalized = metrics.get(&term.metric).and_then(|v| ranges.get(&term.metric)?.normalize(*v));
        let Some(value) = normalized else {
            // Krake: an agent whose metrics fail is ranked by stickiness alone.
            let value = if stickiness > 0.0 { sticky } else { 0.0 };
            return Score { has_metrics: false, value };
        };
        sum += value * term.weight;
        weights += term.weight;
    }
    Score { has_metrics: true, value: if weights > 0.0 { sum / weights } else { 0.0 } }
}

/// The index of the best score: `current` if it is among the best (a tie
/// never moves a workload), else one of the best picked uniformly with
/// `rng` (drawn only when there is more than one). `None` if empty.
// [feature S5: random tie-break, reproducible with a seed]
pub fn choose(scores: &[Score], current: Option<usize>, rng: &mut SplitMix64) -> Option<usize> {
    let top = scores.iter().copied().reduce(|best, s| if s.beats(&best) { s } else { best })?;
    let best: Vec<usize> = (0..scores.len()).filter(|&i| !top.beats(&scores[i])).collect();
    if let Some(c) = current.filter(|c| best.contains(c)) {
        return Some(c);
    }
    match best.len() {
        1 => Some(best[0]),
        n => Some(best[rng.below(n)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges() -> BTreeMap<String, MetricRange> {
        BTreeMap::from([
            ("free_memory_mb".to_owned(), MetricRange { min: 0.0, max: 8192.0, higher_is_better: true }),
            ("cpu_usage".to_owned(), MetricRange { min: 0.0, max: 100.0, higher_is_better: false }),
            ("load".to_owned(), MetricRange { min: 0.0, max: 1.0, higher_is_better: true }),
        ])
    }

    fn metrics(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn term(metric: &str, weight: f64) -> RankTerm {
        RankTerm { metric: metric.into(), weight }
    }

    // [test of feature S3]
    #[test]
    fn free_memory_1024_vs_4096_normalizes_to_an_eighth_and_a_half() {
        let rank = [term("free_memory_mb", 1.0)];
        let a = score(&rank, &metrics(&[("free_memory_mb", 1024.0)]), &ranges(), 0.0, false);
        let b = score(&rank, &metrics(&[("free_memory_mb", 4096.0)]), &ranges(), 0.0, false);
        assert_eq!((a.value, b.value), (0.125, 0.5), "before stickiness");
        assert!(b.beats(&a));
        let mut rng = SplitMix64::new(1);
        assert_eq!(choose(&[a, b], None, &mut rng), Some(1));
        // With the default stickiness and neither current, the order stays.
        let a = score(&rank, &metrics(&[("free_memory_mb", 1024.0)]), &ranges(), 0.1, false);
        let b = score(&rank, &metrics(&[("free_memory_mb", 4096.0)]), &ranges(), 0.1, false);
        assert!((a.value - 0.125 / 1.1).abs() < 1e-12 && (b.value - 0.5 / 1.1).abs() < 1e-12);
    }

    // [test of feature S4]
    #[test]
    fn stickiness_keeps_the_current_agent_until_another_outscores_it() {
        let rank = [term("load", 1.0)];
        let current = score(&rank, &metrics(&[("load", 0.50)]), &ranges(), 0.1, true);
        assert!((current.value - 0.6 / 1.1).abs() < 1e-12, "0.545: {}", current.value);
        let close = score(&rank, &metrics(&[("load", 0.58)]), &ranges(), 0.1, false);
        assert!((close.value - 0.58 / 1.1).abs() < 1e-12, "0.527");
        let mut rng = SplitMix64::new(1);
        assert_eq!(choose(&[current, close], Some(0), &mut rng), Some(0), "0.527 < 0.545: no move");
        let far = score(&rank, &metrics(&[("load", 0.80)]), &ranges(), 0.1, false);
        assert!((far.value - 0.8 / 1.1).abs() < 1e-12, "0.727");
        assert_eq!(choose(&[current, far], Some(0), &mut rng), Some(1), "0.727 > 0.545: moved");
    }

    #[test]
    fn lower_is_better_flips_and_weights_mix_terms() {
        let rank = [term("cpu_usage", 1.0), term("free_memory_mb", 3.0)];
        let s = score(&rank, &metrics(&[("cpu_usage", 25.0), ("free_memory_mb", 8192.0)]), &ranges(), 0.0, false);
        assert!((s.value - (0.75 + 3.0) / 4.0).abs() < 1e-12, "{}", s.value);
    }

    #[test]
    fn agents_with_metrics_beat_agents_without_whatever_the_stickiness() {
        let rank = [term("free_memory_mb", 1.0)];
        let out_of_range = score(&rank, &metrics(&[("free_memory_mb", 9000.0)]), &ranges(), 0.1, true);
        let missing = score(&rank, &metrics(&[]), &ranges(), 0.1, false);
        let unranged = score(&[term("speed", 1.0)], &metrics(&[("speed", 1.0)]), &ranges(), 0.1, false);
        assert_eq!(out_of_range, Score { has_metrics: false, value: 1.0 }, "stickiness alone");
        assert_eq!((missing.has_metrics, unranged.has_metrics), (false, false));
        let poor = score(&rank, &metrics(&[("free_memory_mb", 0.0)]), &ranges(), 0.1, false);
        assert!(poor.beats(&out_of_range) && !out_of_range.beats(&poor));
        let mut rng = SplitMix64::new(1);
        assert_eq!(choose(&[out_of_range, poor], Some(0), &mut rng), Some(1));
        assert_eq!(choose(&[], None, &mut rng), None);
    }

    // [test of feature S5]
    #[test]
    fn ties_prefer_the_current_agent_and_otherwise_draw() {
        let even = Score { has_metrics: true, value: 0.5 };
        let mut rng = SplitMix64::new(3);
        assert_eq!(choose(&[even, even, even], Some(2), &mut rng), Some(2));
        let before = rng.clone();
        assert_eq!(choose(&[even], None, &mut rng), Some(0));
        assert_eq!(rng, before, "no draw without a tie");
    }
}
