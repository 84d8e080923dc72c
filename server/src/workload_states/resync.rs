//! The server's side of keeping agents in step (the HyperFleet sentinel):
//! specs stamped with their generation, deletions kept visible until the
//! agent confirms them, and the TTL resync that re-sends an instance's spec
//! (or its deletion) when the last report confirming it is too old: 10 s
//! while it is not Ready, 30 min while it is (both configurable); never
//! one whose creates gave up (`Pending(StartingFailed)`). [`Resync`]
//! borrows the parts it reads and writes and returns the messages to send.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::conditions::{ConditionStatus, ConditionType};
use ank_common::execution_state::Pending;
use ank_common::messages::{DeletedWorkload, FromServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{StateKind, WorkloadInstanceName, WorkloadName, WorkloadState};
use tokio::time::Instant;

use crate::connections::{ConnId, Connections, Outbox};
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState};
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
    /// The resync with these settings over the parts it reads and writes.
    pub(crate) fn over<'a>(
        self,
        states: &'a mut WorkloadStateStore,
        conns: &'a Connections,
        held: &'a dyn HeldBack,
        current: &'a DesiredState,
        generations: &'a Generations,
    ) -> Resync<'a> {
        Resync { states, conns, held, current, generations, settings: self }
    }

    pub const DEFAULT_READY: Duration = Duration::from_secs(30 * 60);
    pub const DEFAULT_NOT_READY: Duration = Duration::from_secs(10);

    /// How often the server looks for due instances: every second, or
    /// more often when a TTL is shorter.
    pub fn tick(&self) -> Duration {
        Duration::from_secs(1).min(self.not_ready).min(self.ready).max(Duration::from_millis(10))
    }
}

/// Which workloads the apply jobs hold back: the agent is not to know of
/// them yet.
pub(crate) trait HeldBack {
    fn is_held(&self, workload: &str) -> bool;
}

/// What the TTL resync and the deletions after a hello read and write.
pub(crate) struct Resync<'a> {
    pub(crate) states: &'a mut WorkloadStateStore,
    pub(crate) conns: &'a Connections,
    /// Which workloads a job holds back (their specs are not re-sent).
    pub(crate) held: &'a dyn HeldBack,
    /// The desired state in force and the generations of its workloads.
    pub(crate) current: &'a DesiredState,
    pub(crate) generations: &'a Generations,
    pub(crate) settings: ResyncSettings,
}

/// The instances whose TTL ran out, by agent: (n, its spec if wanted).
pub(crate) type Due = BTreeMap<String, Vec<(WorkloadInstanceName, Option<WorkloadSpec>)>>;

impl Resync<'_> {
    /// After a ServerHello: the instances of `agent` still listed that the
    /// desired state no longer has are deleted explicitly, so the agent
    /// confirms each (an Ankaios agent removes them silently: they go).
    pub(crate) fn finish_deletions_after_hello(self, conn: ConnId, agent: &str, reports_conditions: bool) -> Outbox {
        let mut out = Outbox::default();
        let leftovers: Vec<WorkloadInstanceName> = self
            .states
            .instances_of(agent)
            .into_iter()
            .filter(|n| !desired_state::wants_instance(&self.current.rendered, n))
            .collect();
        if leftovers.is_empty() {
            return out;
        }
        if !reports_conditions {
            let gone: Vec<WorkloadState> = leftovers.iter().filter_map(|n| self.states.forget(n)).collect();
            if !gone.is_empty() {
                out.broadcast(None, FromServer::UpdateWorkloadState(gone));
            }
            return out;
        }
        let deleted = leftovers.into_iter().map(|n| self.deletion(n)).collect();
        out.send(conn, FromServer::UpdateWorkload { added: Vec::new(), deleted, resync: false });
        out
    }

    /// The instances on a connected agent whose last confirmation is older
    /// than their TTL, by agent. Subscribers get events only when something
    /// was due (comparing states costs): the caller resends these, with
    /// [`resend`](Self::resend), only then.
    // [feature H6: TTL-based resync]
    pub(crate) fn due(&self, now: Instant) -> Due {
        let agents: Vec<String> = self
            .conns
            .seen()
            .iter()
            .filter(|(a, kind)| **kind && self.conns.is_connected(a))
            .map(|(a, _)| a.clone())
            .collect();
        let mut due: Due = BTreeMap::new();
        for agent in agents {
            for n in self.states.instances_of(&agent) {
                // A job holds it back: the agent is not to know yet.
                if self.held.is_held(&n.workload_name) {
                    continue;
                }
                let (Some(timing), Some(status)) = (self.states.timing(&n), self.states.status(&n)) else { continue };
                let ttl = if status.status_of(ConditionType::Ready) == ConditionStatus::True {
                    self.settings.ready
                } else {
                    self.settings.not_ready
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

    /// Re-sends each agent its due specs and deletions, and notes when.
    pub(crate) fn resend(self, due: Due, now: Instant) -> Outbox {
        let mut out = Outbox::default();
        let mut changed = Vec::new();
        for (agent, instances) in due {
            tracing::debug!("resync of {} instances on agent '{agent}'", instances.len());
            let (mut added, mut deleted) = (Vec::new(), Vec::new());
            for (n, spec) in instances {
                self.states.note_resync(&n, now);
                changed.push(self.states.state_of(&n));
                match spec {
                    Some(spec) => added.push(spec),
                    None => deleted.push(self.deletion(n)),
                }
            }
            out.send_to_agent(&agent, FromServer::UpdateWorkload { added, deleted, resync: true });
        }
        if !changed.is_empty() {
            out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        out
    }

    /// The deletion of `n` sent again, with the delete conditions of the
    /// current desired state: a dependency still waiting for a running
    /// dependent keeps waiting (a deletion without them went at once).
    fn deletion(&self, n: WorkloadInstanceName) -> DeletedWorkload {
        let dependencies = WorkloadName::new(&n.workload_name)
            .map(|name| desired_state::delete_conditions(&self.current.rendered, &name))
            .unwrap_or_default();
        DeletedWorkload { instance_name: n, dependencies }
    }

    /// The stamped spec of `n` if the desired state wants exactly it.
    fn wanted_spec(&self, n: &WorkloadInstanceName) -> Option<WorkloadSpec> {
        let (name, wl) = self.current.rendered.workloads.get_key_value(n.workload_name.as_str())?;
        let spec = desired_state::spec_of(name, wl).filter(|s| s.instance_name == *n)?;
        Some(self.generations.stamp(spec))
    }
}

impl WorkloadStateStore {
    /// An instance deleted while its agent is away. An agent of this
    /// orchestrator that was connected before confirms the removal when it
    /// is back: until then the instance stays, shown AgentDisconnected
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
        self.mark_deleted_while_away(n, agent).then(|| self.state_of(n))
    }
}
