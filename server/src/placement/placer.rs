//! [`Placer`]: what placement remembers between decisions, owned by the
//! server actor: the settings, the tie-break generator (one sequence for
//! the server's life, so a seed replays every choice), the next rebalance
//! pass of each placed workload, since when each lost agent is gone, and
//! the last `Unschedulable` reason of each workload (an event is recorded
//! only when it changes, not at every re-evaluation) or what it awaits.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::workload_policy::AgentSelector;
use tokio::time::Instant;

use super::{AgentInfo, Constraints, Decision, Placement, PlacementSettings, SplitMix64};
use crate::connections::Connections;
use crate::desired_state::DesiredState;
use crate::workload_states::WorkloadStateStore;

/// Placement state of the server.
#[derive(Debug)]
pub struct Placer {
    settings: PlacementSettings,
    rng: SplitMix64,
    next_pass: BTreeMap<String, Instant>,
    lost: BTreeMap<String, Instant>,
    reasons: BTreeMap<String, String>,
}

impl Default for Placer {
    fn default() -> Self {
        Self::new(PlacementSettings::default())
    }
}

impl Placer {
    pub fn new(settings: PlacementSettings) -> Self {
        let rng = SplitMix64::new(settings.seed);
        Self { settings, rng, next_pass: BTreeMap::new(), lost: BTreeMap::new(), reasons: BTreeMap::new() }
    }

    /// New settings; the generator restarts from their seed, what was
    /// remembered stays.
    /// A pass of this placer over the parts it reads and writes.
    pub(crate) fn pass<'a>(
        &'a mut self,
        conns: &'a Connections,
        current: &'a DesiredState,
        states: &'a mut WorkloadStateStore,
    ) -> Placement<'a> {
        Placement { placer: self, conns, current, states }
    }

    pub fn reconfigure(&mut self, settings: PlacementSettings) {
        self.rng = SplitMix64::new(settings.seed);
        self.settings = settings;
    }

    pub fn settings(&self) -> &PlacementSettings {
        &self.settings
    }

    /// Places a workload with `selector`; a selector that does not parse
    /// (only possible for a state saved by an older version) makes it
    /// unschedulable with the parse error.
    pub fn decide(&mut self, selector: &AgentSelector, current: Option<&str>, agents: &[AgentInfo<'_>]) -> Decision {
        match Constraints::new(selector) {
            Ok(c) => super::decide(&c, current, agents, &self.settings, &mut self.rng),
            Err(reason) => Decision::Unschedulable { reason },
        }
    }

    /// `workload` was placed now: its first rebalance pass is one
    /// `reschedule_after` away, its Unschedulable reason is over.
    pub fn placed(&mut self, workload: &str, now: Instant) {
        self.reasons.remove(workload);
        self.next_pass.insert(workload.to_owned(), now + self.settings.reschedule_after);
    }

    /// Notes that `workload` cannot be placed for `reason`; true if the
    /// reason is new (then an event is due).
    pub fn unschedulable(&mut self, workload: &str, reason: &str) -> bool {
        self.next_pass.remove(workload);
        if self.reasons.get(workload).is_some_and(|r| r == reason) {
            return false;
        }
        self.reasons.insert(workload.to_owned(), reason.to_owned());
        true
    }

    /// Notes that `workload` awaits an agent's first load report (`reason`
    /// names it); true if the reason is new (its NotScheduled row shows it,
    /// but it is no Unschedulable event).
    pub fn awaiting(&mut self, workload: &str, reason: &str) -> bool {
        self.unschedulable(workload, reason)
    }

    /// The last reason (Unschedulable or awaiting) of `workload`, if it is not placed.
    pub fn reason(&self, workload: &str) -> Option<&str> {
        self.reasons.get(workload).map(String::as_str)
    }

    /// `agent` disconnected at `now`.
    pub fn agent_lost(&mut self, agent: &str, now: Instant) {
        self.lost.insert(agent.to_owned(), now);
    }

    /// `agent` is connected again.
    pub fn agent_back(&mut self, agent: &str) {
        self.lost.remove(agent);
    }

    /// How long `agent` is gone, if at least the agent-loss grace.
    pub fn lost_beyond_grace(&self, agent: &str, now: Instant) -> Option<Duration> {
        let gone = now.saturating_duration_since(*self.lost.get(agent)?);
        (gone >= self.settings.agent_loss_grace).then_some(gone)
    }

    /// Whether any agent is gone longer than the grace.
    pub fn any_lost_beyond_grace(&self, now: Instant) -> bool {
        self.lost.keys().any(|a| self.lost_beyond_grace(a, now).is_some())
    }

    /// Whether the rebalance pass of `workload` is due at `now`; if so the
    /// next one is scheduled `reschedule_after` later. A workload without a
    /// pass yet (it became `rebalance` later) gets its first one scheduled.
    pub fn rebalance_due(&mut self, workload: &str, now: Instant) -> bool {
        let after = self.settings.reschedule_after;
        let next = self.next_pass.entry(workload.to_owned()).or_insert(now + after);
        if now < *next {
            return false;
        }
        *next = now + after;
        true
    }

    /// Forgets the workloads `keep` rejects.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.next_pass.retain(|w, _| keep(w));
        self.reasons.retain(|w, _| keep(w));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature S4: reschedule interval and agent-loss grace]
    #[tokio::test(start_paused = true)]
    async fn passes_come_every_reschedule_after_and_loss_counts_after_the_grace() {
        let settings = PlacementSettings { seed: 1, ..PlacementSettings::default() };
        let mut p = Placer::new(settings);
        let t0 = Instant::now();
        p.placed("w", t0);
        assert!(!p.rebalance_due("w", t0 + Duration::from_secs(59)));
        assert!(p.rebalance_due("w", t0 + Duration::from_secs(60)));
        assert!(!p.rebalance_due("w", t0 + Duration::from_secs(61)), "the next one is 60 s later");
        assert!(p.rebalance_due("w", t0 + Duration::from_secs(120)));

        p.agent_lost("A", t0);
        assert_eq!(p.lost_beyond_grace("A", t0 + Duration::from_secs(299)), None);
        assert!(!p.any_lost_beyond_grace(t0 + Duration::from_secs(299)));
        assert_eq!(p.lost_beyond_grace("A", t0 + Duration::from_secs(300)), Some(Duration::from_secs(300)));
        p.agent_back("A");
        assert!(!p.any_lost_beyond_grace(t0 + Duration::from_secs(900)));
    }

    #[test]
    fn an_unschedulable_reason_is_news_only_when_it_changes() {
        let mut p = Placer::new(PlacementSettings { seed: 1, ..PlacementSettings::default() });
        assert!(p.unschedulable("w", "0 agents"));
        assert!(!p.unschedulable("w", "0 agents"));
        assert_eq!(p.reason("w"), Some("0 agents"));
        assert!(p.unschedulable("w", "1 agent: 1 offline (A)"));
        p.retain(|w| w != "w");
        assert_eq!(p.reason("w"), None);
    }
}
