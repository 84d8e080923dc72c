//! The placement and preemption fields of a workload (the tackle2-hub and Krake ideas):
//! its [`WorkloadPolicy`] (preemption and isolation), its
//! [`AgentSelector`] (placement by constraints instead of a fixed agent)
//! and its [`Migration`] rule, with their validation at apply time.

use serde::{Deserialize, Serialize};

use crate::placement::constraint::{LabelConstraint, MetricConstraint};

/// Preemption and isolation switches of one workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WorkloadPolicy {
    /// May preempt lower-priority workloads when quota-blocked, even if the
    /// agent's preemption is off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preempt_enabled: bool,
    /// Never preempted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub preempt_exempt: bool,
    /// A job that runs alone among the agent's jobs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub isolated: bool,
}

impl WorkloadPolicy {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// One term of the ranking: a metric and its weight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct RankTerm {
    pub metric: String,
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

// Weights are validated finite, so equality is reflexive.
impl Eq for RankTerm {}

/// Where a workload may run, instead of a fixed `agent`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct AgentSelector {
    /// Label constraints (`arch = arm64`, `ecu in (hpc1, hpc2)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Metric constraints (`free_memory_mb >= 512`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub metrics: Vec<String>,
    /// Capabilities the agent must have (`podman-kube`, `gpu`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// Metrics that rank the agents that pass the constraints.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank: Vec<RankTerm>,
}

/// The parsed constraints of an [`AgentSelector`].
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedSelector {
    pub labels: Vec<LabelConstraint>,
    pub metrics: Vec<MetricConstraint>,
}

/// An agent selector that cannot be used, naming the field, the index and
/// the expression.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    #[error("agentSelector.labels[{index}]: {error} in '{text}'")]
    Label { index: usize, error: crate::placement::constraint::ParseError, text: String },
    #[error("agentSelector.metrics[{index}]: {error} in '{text}'")]
    Metric { index: usize, error: crate::placement::constraint::ParseError, text: String },
    #[error("agentSelector.capabilities[{index}] '{capability}': a capability is one word")]
    Capability { index: usize, capability: String },
    #[error("agentSelector.rank[{0}]: field 'metric' must not be empty")]
    RankMetric(usize),
    #[error("agentSelector.rank[{index}]: weight {weight} must be a finite number >= 0")]
    RankWeight { index: usize, weight: f64 },
}

/// For callers that still report errors as text.
impl From<SelectorError> for String {
    fn from(e: SelectorError) -> Self {
        e.to_string()
    }
}

impl AgentSelector {
    /// Parses every expression; the error names the field, the index, the
    /// expression and the position, e.g.
    /// `agentSelector.labels[0]: unexpected '=', expected a value at column 8 in 'arch === x'`.
    pub fn parse(&self) -> Result<ParsedSelector, SelectorError> {
        let labels = self
            .labels
            .iter()
            .enumerate()
            .map(|(index, t)| {
                LabelConstraint::parse(t).map_err(|error| SelectorError::Label { index, error, text: t.clone() })
            })
            .collect::<Result<_, _>>()?;
        let metrics = self
            .metrics
            .iter()
            .enumerate()
            .map(|(index, t)| {
                MetricConstraint::parse(t).map_err(|error| SelectorError::Metric { index, error, text: t.clone() })
            })
            .collect::<Result<_, _>>()?;
        for (i, c) in self.capabilities.iter().enumerate() {
            if c.trim().is_empty() || c.chars().any(char::is_whitespace) {
                return Err(SelectorError::Capability { index: i, capability: c.clone() });
            }
        }
        for (i, r) in self.rank.iter().enumerate() {
            if r.metric.trim().is_empty() {
                return Err(SelectorError::RankMetric(i));
            }
            if !r.weight.is_finite() || r.weight < 0.0 {
                return Err(SelectorError::RankWeight { index: i, weight: r.weight });
            }
        }
        Ok(ParsedSelector { labels, metrics })
    }
}

/// When a placed workload may move to another agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub enum Migration {
    /// Moved only when its agent stayed away longer than the grace time.
    #[default]
    OnAgentLoss,
    /// Never moved once placed.
    Never,
    /// Also moved when another agent outscores its own by more than the
    /// stickiness, at the periodic reschedule.
    Rebalance,
}

impl Migration {
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Migration::OnAgentLoss => "onAgentLoss",
            Migration::Never => "never",
            Migration::Rebalance => "rebalance",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature S1: expressions parsed at apply, errors name field, index and column]
    #[test]
    fn selector_errors_name_the_expression_and_position() {
        let s = AgentSelector { labels: vec!["arch = arm64".into(), "arch === x".into()], ..Default::default() };
        let e = s.parse().unwrap_err().to_string();
        assert!(e.starts_with("agentSelector.labels[1]: unexpected '='"), "{e}");
        assert!(e.ends_with("at column 8 in 'arch === x'"), "{e}");
        let s = AgentSelector { metrics: vec!["free_memory_mb >>= 5".into()], ..Default::default() };
        assert!(s.parse().unwrap_err().to_string().starts_with("agentSelector.metrics[0]"));
        let s = AgentSelector { rank: vec![RankTerm { metric: "cpu".into(), weight: f64::NAN }], ..Default::default() };
        assert!(s.parse().unwrap_err().to_string().contains("rank[0]"));
        let ok = AgentSelector {
            labels: vec!["ecu in (hpc1, hpc2)".into()],
            metrics: vec!["cpu_usage < 80".into()],
            capabilities: vec!["podman-kube".into()],
            rank: vec![RankTerm { metric: "free_memory_mb".into(), weight: 1.0 }],
        };
        let parsed = ok.parse().unwrap();
        assert_eq!((parsed.labels.len(), parsed.metrics.len()), (1, 1));
    }

    #[test]
    fn migration_names_round_trip() {
        for m in [Migration::OnAgentLoss, Migration::Never, Migration::Rebalance] {
            let yaml = serde_json::to_string(&m).unwrap();
            assert_eq!(yaml, format!("\"{}\"", m.as_str()));
            assert_eq!(serde_json::from_str::<Migration>(&yaml).unwrap(), m);
        }
    }
}
