//! One advance of the jobs over the current state: the members of failed
//! pipelines are canceled (`pipelines.rs`), the engine is stepped until
//! nothing more goes out, the triggered items are handed to their agents
//! (one `UpdateWorkload` per agent) and the held ones are shown as
//! Pending(WaitingToStart) / Stopping(WaitingToStop). It borrows what it
//! reads and writes and returns the messages to send.

use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::{DeletedWorkload, FromServer};
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{ExecutionState, State, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::time::Instant;

use super::{JobEngine, JobView, Trigger};
use crate::connections::{Connections, Outbox};
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState};
use crate::health_gate::HealthGates;
use crate::workload_states::WorkloadStateStore;

/// What one advance reads and writes.
pub(crate) struct Advance<'a> {
    pub(crate) jobs: &'a mut JobEngine,
    pub(crate) states: &'a mut WorkloadStateStore,
    pub(crate) conns: &'a Connections,
    /// The desired state in force and the generations of its workloads.
    pub(crate) current: &'a DesiredState,
    pub(crate) generations: &'a Generations,
    pub(crate) gates: &'a HealthGates,
    pub(crate) out: Outbox,
}

/// What the job engine sees of the server.
struct ServerView<'a> {
    desired: &'a State,
    states: &'a WorkloadStateStore,
    conns: &'a Connections,
    gates: &'a HealthGates,
}

impl JobView for ServerView<'_> {
    fn instance(&self, n: &WorkloadInstanceName) -> Option<(StateKind, u64)> {
        let kind = self.states.kind_of(n)?;
        Some((kind, self.states.status(n).map_or(0, |s| s.observed_generation)))
    }

    fn dependency(&self, dep: &str, condition: AddCondition) -> Result<(), String> {
        let Some((name, wl)) = self.desired.workloads.get_key_value(dep) else {
            return Err(format!("{dep} (not in the desired state)"));
        };
        let Some(spec) = desired_state::spec_of(name, wl) else { return Err(format!("{dep} (not scheduled)")) };
        let kind = self.states.kind_of(&spec.instance_name);
        if self.gates.is_open(dep) {
            return Err(format!("{dep} (update gate open)"));
        }
        if crate::jobs::meets(condition, kind) {
            return Ok(());
        }
        let now = kind.map_or_else(|| "no state yet".to_owned(), |k| k.to_string());
        let away = self.away(&wl.agent).map(|a| format!(", {a}")).unwrap_or_default();
        Err(format!("{dep} ({now}, needs {}{away})", condition_name(condition)))
    }

    fn gate(&self, workload: &str, generation: u64) -> Option<String> {
        self.gates.open_for(workload, generation)
    }

    fn gated(&self, workload: &str) -> bool {
        self.gates.is_open(workload)
    }

    fn away(&self, agent: &str) -> Option<String> {
        if self.conns.is_connected(agent) {
            None
        } else if self.conns.seen().contains_key(agent) {
            Some(format!("agent '{agent}' not connected"))
        } else {
            Some(format!("agent '{agent}' never connected"))
        }
    }
}

fn condition_name(c: AddCondition) -> &'static str {
    match c {
        AddCondition::Running => "Running",
        AddCondition::Succeeded => "Succeeded",
        AddCondition::Failed => "Failed",
    }
}

impl Advance<'_> {
    /// Steps the jobs until nothing more goes out: hands out what became
    /// ready and shows what is held. Called after every change of state.
    // [feature L2: dependency-ordered triggering (A-E)]
    pub(crate) fn run(mut self, now: Instant) -> Outbox {
        let mut changed = self.cancel_failed_pipelines();
        for _ in 0..64 {
            let view = ServerView {
                desired: &self.current.rendered,
                states: self.states,
                conns: self.conns,
                gates: self.gates,
            };
            let triggers = self.jobs.step(&view, now);
            if triggers.is_empty() {
                break;
            }
            changed.extend(self.hand_out(triggers));
        }
        changed.extend(self.show_held());
        if !changed.is_empty() {
            self.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        self.out
    }

    /// Sends the triggered items to their agents, one message per agent.
    fn hand_out(&mut self, triggers: Vec<Trigger>) -> Vec<WorkloadState> {
        let mut changed = Vec::new();
        let mut per_agent: BTreeMap<String, (Vec<WorkloadSpec>, Vec<DeletedWorkload>)> = BTreeMap::new();
        for t in triggers {
            tracing::debug!("job {}: handing out {:?}", t.job, t.add.as_ref().map(|s| s.name().to_owned()));
            // Held, or failed before and handed out again (a rerun): the
            // agent starts over.
            if let Some(spec) = &t.add
                && (failed(self.states.kind_of(&spec.instance_name))
                    || self.states.kind_of(&spec.instance_name) == Some(StateKind::Pending(Pending::WaitingToStart)))
                && self.states.mark_held(&spec.instance_name, ExecutionState::pending_initial())
            {
                changed.push(self.states.state_of(&spec.instance_name));
            }
            if let Some(d) = t.delete {
                let agent = d.instance_name.agent_name.clone();
                if self.conns.is_connected(&agent) {
                    per_agent.entry(agent).or_default().1.push(d);
                } else if t.add.as_ref().is_none_or(|s| s.instance_name != d.instance_name) {
                    changed.extend(self.states.forget_or_wait(self.conns.seen(), &agent, &d.instance_name));
                }
            }
            if let Some(spec) = t.add {
                let agent = spec.instance_name.agent_name.clone();
                per_agent.entry(agent).or_default().0.push(self.generations.stamp(spec));
            }
        }
        for (agent, (added, deleted)) in per_agent {
            self.out.send_to_agent(&agent, FromServer::UpdateWorkload { added, deleted, resync: false });
        }
        changed
    }

    /// Held additions show as Pending(WaitingToStart), held deletions as
    /// Stopping(WaitingToStop), as an Ankaios agent shows what waits for
    /// its dependencies; with `progress_in_states`, each with what it waits
    /// for.
    fn show_held(&mut self) -> Vec<WorkloadState> {
        let progress = self.jobs.settings().progress_in_states;
        let marks: Vec<(WorkloadInstanceName, ExecutionState)> = self
            .jobs
            .held_items()
            .filter_map(|(_, job, item, reason)| {
                let info = match (progress, reason.is_empty()) {
                    (false, _) => String::new(),
                    (true, true) => format!("held by job {job}"),
                    (true, false) => format!("job {job}: {reason}"),
                };
                let (n, kind) = match (&item.add, &item.delete) {
                    (Some(spec), _) => (&spec.instance_name, StateKind::Pending(Pending::WaitingToStart)),
                    (None, Some(d)) => (&d.instance_name, StateKind::Stopping(Stopping::WaitingToStop)),
                    (None, None) => return None,
                };
                Some((n.clone(), ExecutionState::with_info(kind, info)))
            })
            .collect();
        let mut changed = Vec::new();
        for (n, state) in marks {
            if self.states.mark_held(&n, state) {
                changed.push(self.states.state_of(&n));
            }
        }
        changed
    }
}

/// Whether a state is a failure a rerun retries.
pub(super) fn failed(kind: Option<StateKind>) -> bool {
    matches!(kind, Some(StateKind::Failed(_) | StateKind::Pending(Pending::StartingFailed)))
}
