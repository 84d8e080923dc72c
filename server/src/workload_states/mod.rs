//! The store of reported execution states: agent -> workload -> instance id
//! -> state with its generation and conditions, the transitions the server
//! itself decides (Pending(Initial) on add, AgentDisconnected on a lost
//! agent, removal after Removed), and the generation guard for agent
//! reports (see [`WorkloadStateStore::ingest`]). It also remembers, per
//! instance, when its availability was last confirmed and last re-sent,
//! which the TTL resync reads.

mod decided;
mod reports;
mod resync;
mod timing;
mod touched;

#[cfg(test)]
use reports::Ingest;
pub(crate) use resync::HeldBack;
pub use resync::ResyncSettings;
pub use timing::Timing;
pub use touched::Touched;

use std::collections::{BTreeSet, HashMap};

use ank_common::conditions::{
    self, Condition, ConditionStatus, ConditionType, InstanceStatus, RevertMark, RuntimeHealth,
};
use ank_common::daemon::clock::now_rfc3339;
use ank_common::execution_state::Pending;
use ank_common::workload_events::{EventKind, EventRing, WorkloadEvent};
use ank_common::{ExecutionState, InstanceEntry, StateKind, WorkloadInstanceName, WorkloadState, WorkloadStatesMap};

/// One agent's states: workload -> instance id -> entry.
pub type AgentStatesMap = std::collections::BTreeMap<String, std::collections::BTreeMap<String, InstanceEntry>>;
use tokio::time::Instant;

/// How the Health condition's message of an instance deleted while its
/// agent is away begins (the state is AgentDisconnected, as in Ankaios).
pub const DELETED_WHILE_AWAY: &str = "deleted; removed once agent";

/// Reported states of all workload instances.
#[derive(Debug, Default)]
pub struct WorkloadStateStore {
    map: WorkloadStatesMap,
    timing: HashMap<WorkloadInstanceName, Timing>,
    /// Each workload's events, by workload name (they outlive instances:
    /// a rescheduled workload keeps its history).
    events: HashMap<String, EventRing>,
    /// The workloads whose gated update failed, by workload name (shown on
    /// each of their instances until their spec changes again).
    reverted: HashMap<String, RevertMark>,
    /// The agents whose part of the map changed since last taken.
    touched: Touched,
}

impl WorkloadStateStore {
    /// Records a state the server decides (the instance's generation and
    /// conditions stay); `Removed` deletes the entry. A new entry inherits
    /// the availability of another instance of the same workload (the one
    /// it replaces), so an update never makes a working workload look
    /// broken. Returns whether anything changed.
    pub fn record(&mut self, s: &WorkloadState) -> bool {
        if s.execution_state.kind == StateKind::Removed {
            return self.remove(&s.instance_name);
        }
        let mut changed = self.put(s);
        if s.execution_state.kind == StateKind::NotScheduled {
            changed |= self.set_server_conditions(&s.instance_name);
        }
        changed | self.refresh_ready(&s.instance_name)
    }

    /// The Applied and Available conditions of a state the server sets
    /// itself (NotScheduled), which no agent reports: those an agent would
    /// report for it.
    fn set_server_conditions(&mut self, n: &WorkloadInstanceName) -> bool {
        let Some(entry) = self.entry_mut(n) else { return false };
        let now = now_rfc3339();
        let implied = conditions::agent_conditions(&entry.state, entry.status.generation, &RuntimeHealth::Reachable);
        let mut changed = false;
        for c in implied.into_iter().filter(|c| matches!(c.kind, ConditionType::Applied | ConditionType::Available)) {
            changed |= conditions::set(&mut entry.status.conditions, c, &now);
        }
        changed
    }

    /// Stores the state and a generation it names, creating the entry (and
    /// its timing) if needed; Ready is left to the caller.
    fn put(&mut self, s: &WorkloadState) -> bool {
        let n = &s.instance_name;
        let inherited = (!self.contains(n)).then(|| self.inherited_availability(n)).flatten();
        let slot = self.slot(n);
        let mut changed = slot.state != s.execution_state;
        let kind_changed = slot.state.kind != s.execution_state.kind;
        slot.state = s.execution_state.clone();
        if s.status.generation != 0 && slot.status.generation != s.status.generation {
            slot.status.generation = s.status.generation;
            changed = true;
        }
        if let Some(available) = inherited {
            slot.status.conditions.push(available);
            changed = true;
        }
        let now = Instant::now();
        let timing = self.timing.entry(n.clone()).or_insert_with(|| Timing::new(now));
        if kind_changed {
            timing.state_since = now;
        }
        changed
    }

    fn slot(&mut self, n: &WorkloadInstanceName) -> &mut InstanceEntry {
        self.touched.agent(&n.agent_name);
        self.map
            .entry(n.agent_name.clone())
            .or_default()
            .entry(n.workload_name.clone())
            .or_default()
            .entry(n.id.clone())
            .or_insert_with(|| ExecutionState::new(StateKind::Removed).into())
    }

    fn entry(&self, n: &WorkloadInstanceName) -> Option<&InstanceEntry> {
        self.map.get(&n.agent_name)?.get(&n.workload_name)?.get(&n.id)
    }

    fn entry_mut(&mut self, n: &WorkloadInstanceName) -> Option<&mut InstanceEntry> {
        self.touched.agent(&n.agent_name);
        self.map.get_mut(&n.agent_name)?.get_mut(&n.workload_name)?.get_mut(&n.id)
    }

    /// The Available condition of another instance of `n`'s workload.
    fn inherited_availability(&self, n: &WorkloadInstanceName) -> Option<Condition> {
        self.map
            .values()
            .filter_map(|by_name| by_name.get(&n.workload_name))
            .flat_map(|by_id| by_id.values())
            .find_map(|e| e.status.condition(ConditionType::Available).cloned())
    }

    /// Recomputes an instance's Ready condition from its Available one and
    /// its generation; returns whether it changed.
    pub fn refresh_ready(&mut self, n: &WorkloadInstanceName) -> bool {
        let Some(entry) = self.entry_mut(n) else { return false };
        let generation = entry.status.generation;
        let info = entry.state.additional_info.clone();
        let not_ready =
            |reason| Condition::new(ConditionType::Ready, ConditionStatus::False, generation, reason, info.trim());
        // An instance without a container is not Ready, whatever an older
        // report said of its availability.
        let ready = match entry.state.kind {
            StateKind::AgentDisconnected => not_ready("AgentDisconnected"),
            StateKind::Stopping(_) => not_ready("Deleting"),
            StateKind::NotScheduled => not_ready("NotScheduled"),
            StateKind::Removed => not_ready("Removed"),
            StateKind::Pending(Pending::Preempted) => not_ready("Preempted"),
            StateKind::Pending(Pending::QuotaBlocked) => not_ready("QuotaBlocked"),
            StateKind::Pending(Pending::Postponed) => not_ready("Postponed"),
            StateKind::Pending(Pending::Canceled) => not_ready("Canceled"),
            _ => conditions::ready(&entry.status, generation),
        };
        conditions::set(&mut entry.status.conditions, ready, &now_rfc3339())
    }

    /// Sets an instance's generation and its Ready; returns whether it changed.
    #[cfg(test)]
    pub fn set_generation(&mut self, n: &WorkloadInstanceName, generation: u64) -> bool {
        let Some(entry) = self.entry_mut(n) else { return false };
        if entry.status.generation == generation {
            return false;
        }
        entry.status.generation = generation;
        self.refresh_ready(n);
        true
    }

    /// Whether the instance has an entry.
    pub fn contains(&self, n: &WorkloadInstanceName) -> bool {
        self.entry(n).is_some()
    }

    /// The highest generation any instance of `workload` was at.
    pub fn max_generation(&self, workload: &str) -> u64 {
        self.map
            .values()
            .filter_map(|by_name| by_name.get(workload))
            .flat_map(|by_id| by_id.values())
            .map(|e| e.status.generation)
            .max()
            .unwrap_or(0)
    }

    /// Drops an instance's entry; returns its Removed state if it existed.
    pub fn forget(&mut self, n: &WorkloadInstanceName) -> Option<WorkloadState> {
        self.remove(n).then(|| WorkloadState::new(n.clone(), ExecutionState::removed()))
    }

    /// The execution state kind of an instance, if it has an entry.
    pub fn kind_of(&self, n: &WorkloadInstanceName) -> Option<StateKind> {
        self.entry(n).map(|e| e.state.kind)
    }

    /// Drops an instance's entry; returns whether it existed.
    pub fn remove(&mut self, n: &WorkloadInstanceName) -> bool {
        self.timing.remove(n);
        self.touched.agent(&n.agent_name);
        let Some(by_name) = self.map.get_mut(&n.agent_name) else { return false };
        let Some(by_id) = by_name.get_mut(&n.workload_name) else { return false };
        let existed = by_id.remove(&n.id).is_some();
        if by_id.is_empty() {
            by_name.remove(&n.workload_name);
        }
        if by_name.is_empty() {
            self.map.remove(&n.agent_name);
        }
        existed
    }

    /// Marks every instance of `agent` AgentDisconnected, those `wanted`
    /// says are being deleted included (they stay until the agent confirms
    /// their removal); Health becomes Unknown. Returns the changes.
    // [feature H7: finalized before forget]
    pub fn mark_agent_disconnected(
        &mut self,
        agent: &str,
        wanted: impl Fn(&WorkloadInstanceName) -> bool,
    ) -> Vec<WorkloadState> {
        let mut changed = Vec::new();
        for n in self.instances_of(agent) {
            let marked = if wanted(&n) {
                self.mark(&n, ExecutionState::agent_disconnected())
            } else {
                self.mark_deleted_while_away(&n, agent)
            };
            if marked {
                changed.push(self.state_of(&n));
            }
        }
        changed
    }

    /// Sets a state the server decides and Health=Unknown with the reason.
    fn mark(&mut self, n: &WorkloadInstanceName, state: ExecutionState) -> bool {
        self.mark_with(n, state, "")
    }

    /// [`Self::mark`] with a message on the Health condition.
    fn mark_with(&mut self, n: &WorkloadInstanceName, state: ExecutionState, message: &str) -> bool {
        let Some(entry) = self.entry_mut(n) else { return false };
        let mut changed = entry.state != state;
        entry.state = state;
        let health = Condition::new(ConditionType::Health, ConditionStatus::Unknown, 0, "AgentDisconnected", message);
        changed |= conditions::set(&mut entry.status.conditions, health, &now_rfc3339());
        changed | self.refresh_ready(n)
    }

    /// Sets the state of an instance a job holds back (not handed to its
    /// agent yet, or not told to stop yet); its conditions stay.
    pub fn mark_held(&mut self, n: &WorkloadInstanceName, state: ExecutionState) -> bool {
        let Some(entry) = self.entry_mut(n) else { return false };
        let changed = entry.state != state;
        entry.state = state;
        changed
    }

    /// Marks an instance being deleted while its agent is away. It stays
    /// until the agent is back and confirms its removal, and shows
    /// `AgentDisconnected` meanwhile, as Ankaios shows it; our Health
    /// condition's message says that it was deleted.
    pub fn mark_deleted_while_away(&mut self, n: &WorkloadInstanceName, agent: &str) -> bool {
        let message = format!("{DELETED_WHILE_AWAY} '{agent}' is back and confirms");
        self.mark_with(n, ExecutionState::agent_disconnected(), &message)
    }

    /// One instance as a state message.
    pub fn state_of(&self, n: &WorkloadInstanceName) -> WorkloadState {
        match self.entry(n) {
            Some(e) => WorkloadState::new(n.clone(), e.state.clone()).with_status(e.status.clone()),
            None => WorkloadState::new(n.clone(), ExecutionState::removed()),
        }
    }

    /// The status (generation, conditions) of an instance.
    pub fn status(&self, n: &WorkloadInstanceName) -> Option<&InstanceStatus> {
        self.entry(n).map(|e| &e.status)
    }

    /// When an instance was last confirmed and re-sent.
    pub fn timing(&self, n: &WorkloadInstanceName) -> Option<Timing> {
        self.timing.get(n).copied()
    }

    /// Notes a resync of the instance.
    pub fn note_resync(&mut self, n: &WorkloadInstanceName, at: Instant) {
        if let Some(t) = self.timing.get_mut(n) {
            t.resent = Some(at);
        }
        if let Some(e) = self.entry_mut(n) {
            e.status.resyncs += 1;
        }
    }

    /// All states, optionally excluding one agent's.
    pub fn all_except(&self, agent: Option<&str>) -> Vec<WorkloadState> {
        let cs = ank_common::CompleteState { workload_states: self.map.clone(), ..Default::default() };
        cs.workload_state_list().into_iter().filter(|s| Some(s.instance_name.agent_name.as_str()) != agent).collect()
    }

    /// The instance names of one agent.
    pub fn instances_of(&self, agent: &str) -> Vec<WorkloadInstanceName> {
        let Some(by_name) = self.map.get(agent) else { return Vec::new() };
        by_name
            .iter()
            .flat_map(|(wl, by_id)| {
                by_id.keys().map(|id| WorkloadInstanceName {
                    workload_name: wl.clone(),
                    agent_name: agent.to_owned(),
                    id: id.clone(),
                })
            })
            .collect()
    }

    /// The states with every instance carrying its workload's events, as
    /// the complete state shows them.
    pub fn map_with_events(&self) -> WorkloadStatesMap {
        self.map.iter().map(|(agent, by_name)| (agent.clone(), self.with_events(by_name))).collect()
    }

    /// The agents with states.
    pub fn agent_names(&self) -> Vec<String> {
        self.map.keys().cloned().collect()
    }

    /// One agent's part of [`Self::map_with_events`], if it has any.
    pub fn agent_map_with_events(&self, agent: &str) -> Option<AgentStatesMap> {
        self.map.get(agent).map(|by_name| self.with_events(by_name))
    }

    fn with_events(&self, by_name: &AgentStatesMap) -> AgentStatesMap {
        let mut by_name = by_name.clone();
        for (name, by_id) in by_name.iter_mut() {
            let mark = self.reverted.get(name);
            let ring = self.events.get(name);
            for entry in by_id.values_mut() {
                if let Some(ring) = ring {
                    entry.status.events = ring.to_vec();
                }
                entry.status.reverted = mark.cloned();
            }
        }
        by_name
    }

    /// The agents whose part of [`Self::map_with_events`] may have changed
    /// since the last call.
    pub fn take_touched(&mut self) -> Touched {
        self.touched.take()
    }

    /// Marks the agents running an instance of `workload` touched (its
    /// events or revert mark changed).
    fn touch_workload(&mut self, workload: &str) {
        for (agent, by_name) in &self.map {
            if by_name.contains_key(workload) {
                self.touched.agent(agent);
            }
        }
    }

    /// Records an event the server observed about `workload`, now.
    // [feature K8: one entry per (kind, reason), count and last bumped]
    pub fn record_event(&mut self, workload: &str, kind: EventKind, reason: &str) -> WorkloadEvent {
        let at = now_rfc3339();
        self.touch_workload(workload);
        self.events.entry(workload.to_owned()).or_default().record(kind, reason, &at).clone()
    }

    /// Takes over the entries an agent merged; returns whether any came.
    pub fn merge_events(&mut self, workload: &str, events: &[WorkloadEvent]) -> bool {
        if events.is_empty() {
            return false;
        }
        self.touch_workload(workload);
        let ring = self.events.entry(workload.to_owned()).or_default();
        for e in events {
            ring.merge(e.clone());
        }
        true
    }

    /// Drops the events (and revert marks) of workloads `keep` says are gone.
    pub fn retain_events(&mut self, keep: impl Fn(&str) -> bool) {
        self.touched.all();
        self.events.retain(|name, _| keep(name));
        self.reverted.retain(|name, _| keep(name));
    }

    /// Marks `workload`: its gated update failed.
    pub fn set_reverted(&mut self, workload: &str, mark: RevertMark) {
        self.touch_workload(workload);
        self.reverted.insert(workload.to_owned(), mark);
    }

    /// Drops the revert mark of `workload` (its spec changed again).
    pub fn clear_reverted(&mut self, workload: &str) -> bool {
        self.touch_workload(workload);
        self.reverted.remove(workload).is_some()
    }
}

#[cfg(test)]
mod tests;

impl crate::connections::CurrentStates for WorkloadStateStore {
    /// The states of every instance of the named workloads, except those
    /// of `except_agent`.
    fn current_states(&self, workloads: &BTreeSet<String>, except_agent: &str) -> Vec<WorkloadState> {
        let mut out = Vec::new();
        for (agent, by_name) in self.map.iter().filter(|(a, _)| a.as_str() != except_agent) {
            for name in workloads {
                for (id, e) in by_name.get(name).into_iter().flatten() {
                    let n =
                        WorkloadInstanceName { workload_name: name.clone(), agent_name: agent.clone(), id: id.clone() };
                    out.push(WorkloadState::new(n, e.state.clone()).with_status(e.status.clone()));
                }
            }
        }
        out
    }
}
