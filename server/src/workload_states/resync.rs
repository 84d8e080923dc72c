//! The server's side of keeping agents in step (the HyperFleet sentinel):
//! specs stamped with their generation, deletions kept visible until the
//! agent confirms them, and the TTL resync that re-sends an instance's spec
//! (or its deletion) when the last report confirming it is too old: 10 s
//! while it is not Ready, 30 min while it is (both configurable); never
//! one whose creates gave up (`Pending(StartingFailed)`).

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::conditions::{ConditionStatus, ConditionType};
use ank_common::execution_state::Pending;
use ank_common::messages::{DeletedWorkload, FromServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{StateKind, WorkloadInstanceName, WorkloadState};
use tokio::time::Instant;

use crate::actor::AnkaiosServer;
use crate::connections::ConnId;
use crate::desired_state;
use crate::workload_states::WorkloadStateStore;

/// When the server re-sends a spec nobody confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResyncSettings {
    /// Age of the last confirmation after which a Ready instance is re-sent.
    pub ready: Duration,
    /// The same for an instance that is not Ready.
    pub not_ready: Duration,
}

impl Default for ResyncSettings {
    fn default() -> Self {
        Self { ready: Self::DEFAULT_READY, not_ready: Self::DEFAULT_NOT_READY }
    }
}

impl ResyncSettings {
    pub const DEFAULT_READY: Duration = Duration::from_secs(30 * 60);
    pub const DEFAULT_NOT_READY: Duration = Duration::from_secs(10);

    /// How often the server looks for due instances: every second, or
    /// more often when a TTL is shorter.
    pub fn tick(&self) -> Duration {
        Duration::from_secs(1).min(self.not_ready).min(self.ready).max(Duration::from_millis(10))
    }
}

impl AnkaiosServer {
    /// The spec with its workload's current generation.
    pub(crate) fn stamp(&self, spec: WorkloadSpec) -> WorkloadSpec {
        self.desired.generations.stamp(spec)
    }

    /// The specs with their workloads' current generations.
    pub(crate) fn stamped(&self, specs: Vec<WorkloadSpec>) -> Vec<WorkloadSpec> {
        specs.into_iter().map(|s| self.stamp(s)).collect()
    }

    /// After a ServerHello: the instances of `agent` still listed that the
    /// desired state no longer has are deleted explicitly, so the agent
    /// confirms each (an Ankaios agent removes them silently: they go).
    pub(crate) fn finish_deletions_after_hello(&mut self, conn: ConnId, agent: &str, reports_conditions: bool) {
        let leftovers: Vec<WorkloadInstanceName> = self
            .states
            .instances_of(agent)
            .into_iter()
            .filter(|n| !desired_state::wants_instance(&self.desired.current.rendered, n))
            .collect();
        if leftovers.is_empty() {
            return;
        }
        if !reports_conditions {
            let gone: Vec<WorkloadState> = leftovers.iter().filter_map(|n| self.states.forget(n)).collect();
            if !gone.is_empty() {
                self.io.out.broadcast(None, FromServer::UpdateWorkloadState(gone));
            }
            return;
        }
        let deleted = leftovers.into_iter().map(|n| deletion(&n)).collect();
        self.io.out.send(conn, FromServer::UpdateWorkload { added: Vec::new(), deleted });
    }

    /// Re-sends the spec (or the deletion) of every instance on a connected
    /// agent whose last confirmation is older than its TTL. Subscribers get
    /// events only when something was due (comparing states costs).
    // [feature H6: TTL-based resync]
    pub(crate) fn resync_tick(&mut self, now: Instant) {
        let due = self.due_for_resync(now);
        if !due.is_empty() {
            self.with_events(|s| s.resync(due, now));
        }
    }

    /// The instances whose TTL ran out, by agent: (n, its spec if wanted).
    fn due_for_resync(&self, now: Instant) -> BTreeMap<String, Vec<(WorkloadInstanceName, Option<WorkloadSpec>)>> {
        let agents: Vec<String> = self
            .conns
            .seen()
            .iter()
            .filter(|(a, kind)| **kind && self.conns.is_connected(a))
            .map(|(a, _)| a.clone())
            .collect();
        let mut due: BTreeMap<String, Vec<(WorkloadInstanceName, Option<WorkloadSpec>)>> = BTreeMap::new();
        for agent in agents {
            for n in self.states.instances_of(&agent) {
                // A job holds it back: the agent is not to know yet.
                if self.jobs.is_held(&n.workload_name) {
                    continue;
                }
                let (Some(timing), Some(status)) = (self.states.timing(&n), self.states.status(&n)) else { continue };
                let ttl = if status.status_of(ConditionType::Ready) == ConditionStatus::True {
                    self.sched.resync.ready
                } else {
                    self.sched.resync.not_ready
                };
                if now.saturating_duration_since(timing.last_activity()) < ttl {
                    continue;
                }
                // Its creates gave up: the agent has the spec, and a resync
                // would start its retries again. Final until the spec changes
                // (or `ank job rerun` sends it again).
                if self.states.state_of(&n).execution_state.kind == StateKind::Pending(Pending::StartingFailed) {
                    continue;
                }
                let spec = self.wanted_spec(&n);
                due.entry(agent.clone()).or_default().push((n, spec));
            }
        }
        due
    }

    /// Sends each agent its due specs and deletions.
    fn resync(&mut self, due: BTreeMap<String, Vec<(WorkloadInstanceName, Option<WorkloadSpec>)>>, now: Instant) {
        let mut changed = Vec::new();
        for (agent, instances) in due {
            tracing::debug!("resync of {} instances on agent '{agent}'", instances.len());
            let (mut added, mut deleted) = (Vec::new(), Vec::new());
            for (n, spec) in instances {
                self.states.note_resync(&n, now);
                changed.push(self.states.state_of(&n));
                match spec {
                    Some(spec) => added.push(spec),
                    None => deleted.push(deletion(&n)),
                }
            }
            self.io.out.send_to_agent(&agent, FromServer::UpdateWorkload { added, deleted });
        }
        if !changed.is_empty() {
            self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
    }

    /// The stamped spec of `n` if the desired state wants exactly it.
    fn wanted_spec(&self, n: &WorkloadInstanceName) -> Option<WorkloadSpec> {
        let (name, wl) = self.desired.current.rendered.workloads.get_key_value(n.workload_name.as_str())?;
        let spec = desired_state::spec_of(name, wl).filter(|s| s.instance_name == *n)?;
        Some(self.stamp(spec))
    }
}

/// A deletion nothing waits for.
fn deletion(n: &WorkloadInstanceName) -> DeletedWorkload {
    DeletedWorkload { instance_name: n.clone(), dependencies: BTreeMap::new() }
}

impl WorkloadStateStore {
    /// An instance deleted while its agent is away. An agent of this
    /// orchestrator that was connected before confirms the removal when it
    /// is back: until then the instance stays as Stopping(WaitingToStop)
    /// (ankaios#388). An Ankaios agent would never confirm, and an agent
    /// never seen since the server started may not exist at all (a typo):
    /// their instances go at once (an agent that shows up later removes
    /// what its ServerHello no longer lists). `seen`: the agents seen and
    /// whether they confirm. Returns the changed state.
    // [feature H7: finalized before forget]
    pub(crate) fn forget_or_wait(
        &mut self,
        seen: &BTreeMap<String, bool>,
        agent: &str,
        n: &WorkloadInstanceName,
    ) -> Option<WorkloadState> {
        if seen.get(agent) != Some(&true) {
            return self.forget(n);
        }
        self.mark_waiting_to_stop(n, agent).then(|| self.state_of(n))
    }
}
