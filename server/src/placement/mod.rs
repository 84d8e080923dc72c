//! Placement by constraints (the Krake scheduler): which connected agent
//! runs a workload that names an `agentSelector` instead of an `agent`.
//! [`decide`] filters the known agents ([`filter`]: offline, labels,
//! capabilities, metrics, each exclusion with its reason), ranks the
//! candidates ([`rank`]: normalized weighted metrics plus stickiness) and
//! breaks ties with a seeded [`SplitMix64`]. A workload no agent passes
//! while some agent's metrics are not known yet (no load report since its
//! hello) awaits that report instead of being unschedulable. [`Placer`] keeps what placement
//! remembers between decisions (the generator, the next rebalance pass per
//! workload, since when an agent is gone, the last Unschedulable reason).
//! The server writes the chosen agent into its rendered desired state.

pub mod config;
pub mod filter;
mod passes;
mod placer;
pub mod rank;
mod rng;

use std::collections::BTreeMap;
use std::time::Duration;

pub use filter::{AgentInfo, Constraints, Exclusion};
pub(crate) use passes::{Occasion, Placement};
pub use placer::Placer;
pub use rng::SplitMix64;

/// The range of one metric: values are normalized to [0, 1] within it; a
/// value outside makes the agent's metric invalid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricRange {
    pub min: f64,
    pub max: f64,
    /// Higher values are better (default); else lower ones are.
    pub higher_is_better: bool,
}

impl MetricRange {
    /// A range, checked: finite bounds with `min < max`.
    pub fn new(min: f64, max: f64, higher_is_better: bool) -> Result<Self, String> {
        if !(min.is_finite() && max.is_finite() && min < max) {
            return Err(format!("metric range {min}..{max}: min and max must be numbers with min < max"));
        }
        Ok(Self { min, max, higher_is_better })
    }

    /// `value` normalized to [0, 1] (1 is best), `None` outside the range.
    pub fn normalize(&self, value: f64) -> Option<f64> {
        if !(self.min..=self.max).contains(&value) || self.max <= self.min {
            return None;
        }
        let x = (value - self.min) / (self.max - self.min);
        Some(if self.higher_is_better { x } else { 1.0 - x })
    }
}

/// How placement behaves (server config `scheduler` and `metrics`).
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementSettings {
    /// Weight of the bonus the current agent gets (Krake: 0.1).
    pub stickiness: f64,
    /// Period of the rebalance pass of `migration: rebalance` workloads.
    pub reschedule_after: Duration,
    /// How long an agent must stay away before its workloads move.
    pub agent_loss_grace: Duration,
    /// Seed of the tie-break generator.
    pub seed: u64,
    /// Ranges of the metrics ranking may use.
    pub metrics: BTreeMap<String, MetricRange>,
}

impl PlacementSettings {
    pub const DEFAULT_STICKINESS: f64 = 0.1;
    pub const DEFAULT_RESCHEDULE_AFTER: Duration = Duration::from_secs(60);
    pub const DEFAULT_AGENT_LOSS_GRACE: Duration = Duration::from_secs(5 * 60);

    /// The built-in metric ranges: `cpu_usage` 0..100 (lower is better),
    /// `free_memory_mb` 0..65536 (higher is better).
    pub fn default_metrics() -> BTreeMap<String, MetricRange> {
        BTreeMap::from([
            (
                ank_common::placement::metrics::CPU_USAGE.to_owned(),
                MetricRange { min: 0.0, max: 100.0, higher_is_better: false },
            ),
            (
                ank_common::placement::metrics::FREE_MEMORY_MB.to_owned(),
                MetricRange { min: 0.0, max: 65536.0, higher_is_better: true },
            ),
        ])
    }
}

impl Default for PlacementSettings {
    fn default() -> Self {
        Self {
            stickiness: Self::DEFAULT_STICKINESS,
            reschedule_after: Self::DEFAULT_RESCHEDULE_AFTER,
            agent_loss_grace: Self::DEFAULT_AGENT_LOSS_GRACE,
            seed: clock_seed(),
            metrics: Self::default_metrics(),
        }
    }
}

/// A seed from the wall clock, for a server started without one.
pub fn clock_seed() -> u64 {
    ank_common::daemon::clock::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// The outcome of placing one workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The best candidate.
    Placed {
        agent: String,
        score: f64,
        /// How many agents passed the filter.
        candidates: usize,
        /// The current agent's score, if it passed the filter.
        current_score: Option<f64>,
        /// Why the current agent did not pass, if there is one and it did not.
        current_excluded: Option<Exclusion>,
    },
    /// No agent passed; the reason lists why each was excluded.
    Unschedulable { reason: String },
    /// No agent passed, but some would be judged by metrics that their
    /// first load report brings: not unschedulable (yet); the reason names
    /// them.
    AwaitingReport { reason: String },
}

impl Decision {
    /// The `Scheduled` event text: "agent_B score 0.83 of 3 candidates".
    pub fn scheduled_reason(&self) -> Option<String> {
        let Decision::Placed { agent, score, candidates, .. } = self else { return None };
        let noun = if *candidates == 1 { "candidate" } else { "candidates" };
        Some(format!("{agent} score {score:.2} of {candidates} {noun}"))
    }
}

/// Places a workload with `constraints` on one of `agents`; `current` is
/// the agent it runs on now (stickiness, and a tie keeps it there).
// [feature S1: filter, rank and pick among the connected agents]
pub fn decide(
    constraints: &Constraints,
    current: Option<&str>,
    agents: &[AgentInfo<'_>],
    settings: &PlacementSettings,
    rng: &mut SplitMix64,
) -> Decision {
    let mut names = Vec::new();
    let mut scores = Vec::new();
    let mut excluded = Vec::new();
    let mut current_excluded = None;
    for agent in agents {
        match constraints.check(agent, &settings.metrics) {
            Ok(()) => {
                let is_current = current == Some(agent.name);
                names.push(agent.name);
                scores.push(rank::score(
                    &constraints.rank,
                    agent.metrics,
                    &settings.metrics,
                    settings.stickiness,
                    is_current,
                ));
            }
            Err(why) => {
                if current == Some(agent.name) {
                    current_excluded = Some(why.clone());
                }
                excluded.push((agent.name, why));
            }
        }
    }
    let current_index = current.and_then(|c| names.iter().position(|n| *n == c));
    let Some(best) = rank::choose(&scores, current_index, rng) else {
        let awaited: Vec<&str> =
            excluded.iter().filter(|(_, why)| *why == Exclusion::NotReported).map(|(agent, _)| *agent).collect();
        if !awaited.is_empty() {
            return Decision::AwaitingReport { reason: filter::awaiting(&awaited) };
        }
        return Decision::Unschedulable { reason: filter::summarize(&excluded) };
    };
    Decision::Placed {
        agent: names[best].to_owned(),
        score: scores[best].value,
        candidates: names.len(),
        current_score: current_index.map(|i| scores[i].value),
        current_excluded,
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
