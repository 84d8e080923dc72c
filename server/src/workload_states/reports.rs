//! The agents' reports of their workloads' states: which the store takes
//! in ([`WorkloadStateStore::ingest`], one report), and which it drops (another agent's instances, canceled members,
//! instances the server neither wants nor lists, stale or invalid reports).

use ank_common::conditions::{self, ConditionType, RuntimeHealth};
use ank_common::daemon::clock::now_rfc3339;
use ank_common::messages::FromServer;
use ank_common::{State, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::time::Instant;

use super::WorkloadStateStore;
use crate::connections::{ConnId, Connections, Outbox};
use crate::desired_state;
use crate::desired_state::generations::Generations;

/// The outcome of one agent report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ingest {
    /// Stored; `true` if anything visible changed.
    Accepted(bool),
    /// observedGeneration below the one already accepted: dropped.
    Stale,
    /// observedGeneration above the workload's generation: dropped.
    Future,
    /// A condition the agent must report is missing: dropped.
    Invalid(ConditionType),
}

/// What a batch of reports changed: the states to push, and how many
/// reports were dropped as stale or from the future.
pub(crate) struct Ingested {
    pub(crate) changed: Vec<WorkloadState>,
    pub(crate) stale: u64,
}

impl WorkloadStateStore {
    /// Takes in an agent's report. `generation` is the workload's current
    /// generation when the desired state still has this instance. Reports
    /// from the future or older than the last accepted one are dropped, as
    /// are reports lacking one of Applied / Available / Health; a report
    /// without any (an Ankaios agent) gets conditions derived from its state.
    /// Removed is always taken.
    // [feature H2: generation-guarded status ingestion]
    pub fn ingest(&mut self, report: &WorkloadState, generation: Option<u64>) -> Ingest {
        let n = &report.instance_name;
        let r = &report.status;
        if let Some(missing) = r.missing_agent_condition() {
            return Ingest::Invalid(missing);
        }
        let observed = r.observed_generation;
        // A removal is final whatever the generation: an agent confirming
        // the deletion of an instance it never knew cannot name one.
        let removed = report.execution_state.kind == StateKind::Removed;
        if r.is_extended() && !removed {
            if generation.is_some_and(|g| observed > g) {
                return Ingest::Future;
            }
            if self.entry(n).is_some_and(|e| observed < e.status.observed_generation) {
                return Ingest::Stale;
            }
        }
        if removed {
            return Ingest::Accepted(self.remove(n));
        }
        let mut changed = self.put(&WorkloadState::new(n.clone(), report.execution_state.clone()));
        changed |= self.merge_events(&n.workload_name, &r.events);
        let now = now_rfc3339();
        let Some(entry) = self.entry_mut(n) else { return Ingest::Accepted(changed) };
        if let Some(g) = generation
            && entry.status.generation != g
        {
            entry.status.generation = g;
            changed = true;
        }
        let reported = if r.is_extended() {
            if entry.status.observed_generation != observed {
                entry.status.observed_generation = observed;
                changed = true;
            }
            r.conditions.clone()
        } else {
            let at = entry.status.generation;
            conditions::agent_conditions(&report.execution_state, at, &RuntimeHealth::Reachable)
        };
        let mut confirmed = false;
        for c in reported.into_iter().filter(|c| c.kind != ConditionType::Ready) {
            let kind = c.kind;
            let merged = conditions::merge(&mut entry.status.conditions, c, &now);
            confirmed |= merged && kind == ConditionType::Available;
            changed |= merged;
        }
        if confirmed && let Some(t) = self.timing.get_mut(n) {
            t.confirmed = Instant::now();
        }
        Ingest::Accepted(changed | self.refresh_ready(n))
    }

    /// The reports that came on stream `conn`: taken in for its agent
    /// (see [`Self::ingest_reports`]), its stale reports counted on the
    /// agent, and what changed pushed to everyone but the agent. Reports
    /// from a stream that is no agent are ignored.
    pub(crate) fn take_reports(
        &mut self,
        conns: &mut Connections,
        conn: ConnId,
        reports: Vec<WorkloadState>,
        rendered: &State,
        generations: &Generations,
        canceled: impl Fn(&WorkloadInstanceName) -> bool,
    ) -> Outbox {
        let mut out = Outbox::default();
        let Some(agent) = conns.agent_of(conn) else {
            tracing::warn!("connection {conn}: workload states from a stream that is no agent ignored");
            return out;
        };
        let ingested = self.ingest_reports(&agent, reports, rendered, generations, canceled);
        if ingested.stale > 0
            && let Some(attrs) = conns.agent_attributes_mut(&agent)
        {
            attrs.dropped_stale_reports += ingested.stale;
        }
        if !ingested.changed.is_empty() {
            out.broadcast(Some(&agent), FromServer::UpdateWorkloadState(ingested.changed));
        }
        out
    }

    /// Takes in `agent`'s reports against the rendered desired state
    /// `rendered` (whose workloads have `generations`); `canceled`: the
    /// instances a pipeline canceled, which stay Pending(Canceled).
    pub(crate) fn ingest_reports(
        &mut self,
        agent: &str,
        reports: Vec<WorkloadState>,
        rendered: &State,
        generations: &Generations,
        canceled: impl Fn(&WorkloadInstanceName) -> bool,
    ) -> Ingested {
        // An agent speaks only for its own workloads, and only for those the
        // server wants or still lists: after a partition or a server restart
        // the agent re-sends states of workloads deleted meanwhile, which it
        // is about to remove; they must not come back as ghost rows.
        let mut ingested = Ingested { changed: Vec::new(), stale: 0 };
        for s in reports.into_iter().filter(|s| s.instance_name.agent_name == agent) {
            let n = &s.instance_name;
            if canceled(n) {
                // A canceled member stays Pending(Canceled) whatever its agent says.
                continue;
            }
            let wanted = desired_state::wants_instance(rendered, n);
            // An instance being deleted only goes its way out: a report of
            // it running that the agent sent before it learnt of the
            // deletion (a full set after a reconnect) is not news.
            // An unwanted instance shown Stopping or (deleted while its
            // agent was away) AgentDisconnected is on its way out.
            let leaving = matches!(s.execution_state.kind, StateKind::Stopping(_) | StateKind::Removed);
            let known = match self.kind_of(n) {
                None => false,
                Some(kind) => leaving || !matches!(kind, StateKind::Stopping(_) | StateKind::AgentDisconnected),
            };
            if !wanted && !known {
                continue;
            }
            let generation = wanted.then(|| generations.of(&n.workload_name)).flatten();
            match self.ingest(&s, generation) {
                Ingest::Accepted(true) => ingested.changed.push(self.state_of(n)),
                Ingest::Accepted(false) => {}
                Ingest::Stale | Ingest::Future => {
                    tracing::debug!(
                        "report of '{n}' at generation {} dropped (current {generation:?})",
                        s.status.observed_generation
                    );
                    ingested.stale += 1;
                }
                Ingest::Invalid(missing) => tracing::warn!(
                    "agent '{agent}': report of '{n}' without the {} condition ignored",
                    missing.as_str()
                ),
            }
        }
        ingested
    }
}
