//! The filter step of placement: whether one agent may run a workload, and
//! if not, the first reason why (offline, a label constraint that does not
//! match, a missing capability, no load report yet to judge the metric
//! constraints by, a metric that is missing, out of its configured range or
//! does not meet its constraint). [`summarize`] turns the reasons of all
//! excluded agents into the `Unschedulable` event text; [`awaiting`] names
//! the agents whose first load report placement waits for.

use std::collections::BTreeMap;
use std::fmt;

use ank_common::placement::constraint::{LabelConstraint, MetricConstraint};
use ank_common::workload_policy::{AgentSelector, RankTerm};

use super::MetricRange;

/// What placement sees of one agent the server knows.
#[derive(Debug, Clone, Copy)]
pub struct AgentInfo<'a> {
    pub name: &'a str,
    /// Connected now; only connected agents are candidates.
    pub connected: bool,
    pub labels: &'a BTreeMap<String, String>,
    pub capabilities: &'a [String],
    pub metrics: &'a BTreeMap<String, f64>,
    /// Its first load report came: its metrics are known (an agent's
    /// metrics come with its load reports, not with its hello).
    pub reported: bool,
}

/// An agent selector with its expressions parsed once.
#[derive(Debug, Clone)]
pub struct Constraints {
    labels: Vec<(String, LabelConstraint)>,
    metrics: Vec<(String, MetricConstraint)>,
    capabilities: Vec<String>,
    /// The ranking terms, checked at parse time.
    pub rank: Vec<RankTerm>,
}

impl Constraints {
    /// Parses `selector`; the error names the field, index and column.
    pub fn new(selector: &AgentSelector) -> Result<Self, String> {
        let parsed = selector.parse()?;
        let texts =
            |v: &[String]| v.iter().map(|t| t.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>();
        Ok(Self {
            labels: texts(&selector.labels).into_iter().zip(parsed.labels).collect(),
            metrics: texts(&selector.metrics).into_iter().zip(parsed.metrics).collect(),
            capabilities: selector.capabilities.clone(),
            rank: selector.rank.clone(),
        })
    }

    /// `Ok` if `agent` passes every constraint, else the first failure, in
    /// the order: connection, labels, capabilities, metrics (not judged
    /// before the agent's first load report).
    // [feature S1: only connected agents whose labels, capabilities and metrics match]
    pub fn check(&self, agent: &AgentInfo<'_>, ranges: &BTreeMap<String, MetricRange>) -> Result<(), Exclusion> {
        if !agent.connected {
            return Err(Exclusion::Offline);
        }
        if let Some((text, _)) = self.labels.iter().find(|(_, c)| !c.matches(agent.labels)) {
            return Err(Exclusion::Label(text.clone()));
        }
        // [feature S6: every capability must be advertised by the agent]
        if let Some(missing) = self.capabilities.iter().find(|c| !agent.capabilities.contains(c)) {
            return Err(Exclusion::MissingCapability(missing.clone()));
        }
        if !self.metrics.is_empty() && !agent.reported {
            return Err(Exclusion::NotReported);
        }
        // [feature S3: metric constraints; a value outside its range is invalid]
        for (text, c) in &self.metrics {
            let Some(value) = agent.metrics.get(&c.metric).copied() else {
                return Err(Exclusion::MetricMissing(c.metric.clone()));
            };
            if ranges.get(&c.metric).is_some_and(|r| r.normalize(value).is_none()) {
                return Err(Exclusion::MetricOutOfRange(c.metric.clone()));
            }
            if !c.matches(agent.metrics) {
                return Err(Exclusion::MetricNotMet(text.clone()));
            }
        }
        Ok(())
    }
}

/// Why an agent cannot run a workload.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exclusion {
    /// Not connected (known from earlier in this server's life).
    Offline,
    /// This label constraint does not match.
    Label(String),
    /// The agent does not advertise this capability.
    MissingCapability(String),
    /// The agent has not sent its first load report, so its metrics are
    /// not known yet: not a reason to call a workload unschedulable.
    NotReported,
    /// The agent does not advertise this metric.
    MetricMissing(String),
    /// The agent's value of this metric is outside its configured range.
    MetricOutOfRange(String),
    /// This metric constraint is not met.
    MetricNotMet(String),
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::Offline => f.write_str("offline"),
            Exclusion::Label(text) => write!(f, "label {text} mismatch"),
            Exclusion::MissingCapability(c) => write!(f, "missing capability {c}"),
            Exclusion::NotReported => f.write_str("no load report yet"),
            Exclusion::MetricMissing(m) => write!(f, "metric {m} missing"),
            Exclusion::MetricOutOfRange(m) => write!(f, "metric {m} out of range"),
            Exclusion::MetricNotMet(text) => write!(f, "metric {text} not met"),
        }
    }
}

/// How many agent names one reason lists before "and N more".
const NAMES_PER_REASON: usize = 3;

/// The reason of an `Unschedulable` event: how many agents the server
/// knows and, grouped by reason, how many were excluded and which, e.g.
/// "3 agents: 1 offline (agent_B), 1 label arch = arm64 mismatch (agent_A),
/// 1 metric free_memory_mb missing (agent_C)".
// [feature S1: the reason lists why each agent was excluded]
pub fn summarize(excluded: &[(&str, Exclusion)]) -> String {
    if excluded.is_empty() {
        return "no agent known to the server".to_owned();
    }
    let mut groups: BTreeMap<&Exclusion, Vec<&str>> = BTreeMap::new();
    for (agent, why) in excluded {
        groups.entry(why).or_default().push(agent);
    }
    let parts: Vec<String> = groups
        .into_iter()
        .map(|(why, agents)| {
            let mut names = agents.iter().take(NAMES_PER_REASON).copied().collect::<Vec<_>>().join(", ");
            if agents.len() > NAMES_PER_REASON {
                names.push_str(&format!(" and {} more", agents.len() - NAMES_PER_REASON));
            }
            format!("{} {why} ({names})", agents.len())
        })
        .collect();
    let noun = if excluded.len() == 1 { "agent" } else { "agents" };
    format!("{} {noun}: {}", excluded.len(), parts.join(", "))
}

/// Why a workload no agent passes waits as NotScheduled without being
/// unschedulable: "waiting for the first load report of agent_X" (up to
/// three names, then "and N more").
pub fn awaiting(agents: &[&str]) -> String {
    let mut names = agents.iter().take(NAMES_PER_REASON).copied().collect::<Vec<_>>().join(", ");
    if agents.len() > NAMES_PER_REASON {
        names.push_str(&format!(" and {} more", agents.len() - NAMES_PER_REASON));
    }
    format!("waiting for the first load report of {names}")
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;
