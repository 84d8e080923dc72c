//! The server's side of apply jobs: every accepted change opens a job over
//! the workloads it adds, updates or deletes; the job engine decides which
//! of them may go to their agents now (dependencies met, dependents gone,
//! nothing failed), and this module hands those out, grouped per agent, and
//! shows the held ones as Pending(WaitingToStart) / Stopping(WaitingToStop).
//! Reruns and interrupts come in as requests.

use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::{DeletedWorkload, FromServer, ResponseContent};
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{ExecutionState, State, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::time::Instant;

use crate::actor::AnkaiosServer;
use crate::connections::Connections;
use crate::desired_state::{self, StateDiff};
use crate::jobs::{JobView, NewItem, Trigger};
use crate::workload_states::WorkloadStateStore;

/// What the job engine sees of the server.
struct ServerView<'a> {
    desired: &'a State,
    states: &'a WorkloadStateStore,
    conns: &'a Connections,
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
        if crate::jobs::meets(condition, kind) {
            return Ok(());
        }
        let now = kind.map_or_else(|| "no state yet".to_owned(), |k| k.to_string());
        let away = self.away(&wl.agent).map(|a| format!(", {a}")).unwrap_or_default();
        Err(format!("{dep} ({now}, needs {}{away})", condition_name(condition)))
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

impl AnkaiosServer {
    /// Opens the job of an accepted change from rendered state `old` to the
    /// current one. `startup`: the items go out at once (the startup
    /// manifest; agents resuming their workloads order them themselves).
    // [feature L1: every accepted change is a job with a monotonic id]
    pub(crate) fn open_job(&mut self, old: &State, diff: &StateDiff, startup: bool) -> u64 {
        let mut items: BTreeMap<String, (NewItem, u64)> = BTreeMap::new();
        for spec in diff.added.values().flatten() {
            let generation = self.desired.generations.of(spec.name()).unwrap_or(0);
            let new = NewItem { add: Some(spec.clone()), triggered: startup, ..NewItem::default() };
            items.insert(spec.name().to_owned(), (new, generation));
        }
        for d in diff.deleted.values().flatten() {
            let name = d.instance_name.workload_name.to_string();
            let (item, _) = items.entry(name).or_default();
            item.delete = Some(d.clone());
            item.triggered = startup;
        }
        // A pure deletion waits for the deleted workloads that depended on it.
        // [feature L5: deletion in reverse dependency order]
        let deleting: Vec<(String, WorkloadInstanceName)> = items
            .iter()
            .filter(|(_, (i, _))| i.add.is_none())
            .filter_map(|(n, (i, _))| i.delete.as_ref().map(|d| (n.clone(), d.instance_name.clone())))
            .collect();
        for (name, (item, _)) in items.iter_mut().filter(|(_, (i, _))| i.add.is_none()) {
            item.delete_after = deleting
                .iter()
                .filter(|(other, _)| {
                    old.workloads
                        .get(other.as_str())
                        .is_some_and(|wl| wl.dependencies.keys().any(|k| k.as_str() == name))
                })
                .map(|(_, n)| n.clone())
                .collect();
        }
        // Workloads of the change that no agent was found for: the job
        // accounts for them too (they wait for placement; when it comes, the
        // placement's job takes them over).
        for name in &diff.unscheduled {
            if !items.contains_key(name.as_str()) {
                let generation = self.desired.generations.of(name.as_str()).unwrap_or(0);
                let new = NewItem { unplaced: true, triggered: true, ..NewItem::default() };
                items.insert(name.to_string(), (new, generation));
            }
        }
        self.forget_unsent(&mut items);
        self.jobs.create(items)
    }

    /// A held workload never reached its agent: a new job over it does not
    /// tell the agent to delete it, and its row goes when it is deleted or
    /// replaced by another instance.
    fn forget_unsent(&mut self, items: &mut BTreeMap<String, (NewItem, u64)>) {
        for (name, (item, _)) in items.iter_mut() {
            let Some(held) = self.jobs.held_item(name) else { continue };
            let Some(unsent) = held.add.as_ref().filter(|_| held.delete.is_none()).map(|s| s.instance_name.clone())
            else {
                continue;
            };
            if item.delete.as_ref().is_some_and(|d| d.instance_name == unsent) {
                item.delete = None;
            }
            if item.add.as_ref().is_none_or(|s| s.instance_name != unsent)
                && let Some(gone) = self.states.forget(&unsent)
            {
                self.io.out.broadcast(None, FromServer::UpdateWorkloadState(vec![gone]));
            }
            if item.add.is_none() && item.delete.is_none() {
                // Nothing was ever started: the deletion is done.
                item.triggered = true;
            }
        }
    }

    /// Steps the jobs until nothing more goes out: hands out what became
    /// ready and shows what is held. Called after every change of state.
    // [feature L2: dependency-ordered triggering (A-E)]
    pub(crate) fn advance_jobs(&mut self) {
        // Queued apart, then put where the first job not advanced opened.
        let outer = std::mem::take(&mut self.io.out);
        let now = Instant::now();
        let mut changed = self.cancel_failed_pipelines();
        for _ in 0..64 {
            let view = ServerView { desired: &self.desired.current.rendered, states: &self.states, conns: &self.conns };
            let triggers = self.jobs.step(&view, now);
            if triggers.is_empty() {
                break;
            }
            changed.extend(self.hand_out(triggers));
        }
        changed.extend(self.show_held());
        if !changed.is_empty() {
            self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        let jobs = std::mem::replace(&mut self.io.out, outer);
        self.io.out.jobs_advanced(jobs);
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
                    changed.extend(self.forget_or_wait(&agent, &d.instance_name));
                }
            }
            if let Some(spec) = t.add {
                let agent = spec.instance_name.agent_name.clone();
                per_agent.entry(agent).or_default().0.push(self.stamp(spec));
            }
        }
        for (agent, (added, deleted)) in per_agent {
            self.io.out.send_to_agent(&agent, FromServer::UpdateWorkload { added, deleted });
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

    /// Advances the jobs if a change opened one since they last did (the
    /// server's own changes, at its ticks).
    pub(crate) fn advance_jobs_if_opened(&mut self) {
        if self.io.out.job_pending() {
            self.advance_jobs();
        }
    }

    /// Every second: a job waiting with nothing to do may turn stuck.
    // [feature L4: stuck detection]
    pub(crate) fn jobs_tick(&mut self) {
        if self.jobs.waits_on_clock() {
            self.with_events(Self::advance_jobs);
        }
    }

    /// A new job over the unchanged desired state: workloads that failed
    /// to start or to stop and, unless `failed_only`, those never started.
    // [feature L6: re-trigger without spec change]
    pub(crate) fn rerun(&mut self, failed_only: bool) -> ResponseContent {
        let mut items: BTreeMap<String, (NewItem, u64)> = BTreeMap::new();
        if !failed_only {
            for (name, _, item, _) in self.jobs.held_items() {
                let generation = self.desired.generations.of(name).unwrap_or(0);
                items.insert(name.to_owned(), (NewItem { triggered: false, ..item.clone() }, generation));
            }
        }
        for (name, wl) in &self.desired.current.rendered.workloads {
            let Some(spec) = desired_state::spec_of(name, wl) else { continue };
            if items.contains_key(name.as_str()) || !failed(self.states.kind_of(&spec.instance_name)) {
                continue;
            }
            let generation = self.desired.generations.of(name.as_str()).unwrap_or(0);
            items.insert(name.to_string(), (NewItem { add: Some(spec), ..NewItem::default() }, generation));
        }
        for agent in self.conns.agents().keys() {
            for n in self.states.instances_of(agent) {
                let stop_failed = self.states.kind_of(&n) == Some(StateKind::Stopping(Stopping::DeleteFailed));
                if stop_failed && !desired_state::wants_instance(&self.desired.current.rendered, &n) {
                    let delete = DeletedWorkload { instance_name: n.clone(), dependencies: BTreeMap::new() };
                    let item = NewItem { delete: Some(delete), ..NewItem::default() };
                    items.entry(n.workload_name.to_string()).or_insert((item, 0));
                }
            }
        }
        let id = self.jobs.create(items);
        tracing::info!("job {id}: rerun{}", if failed_only { " of the failed workloads" } else { "" });
        self.io.out.job_opened();
        job_accepted(id)
    }

    /// Ends a running job.
    // [feature L7: interrupt]
    pub(crate) fn interrupt(&mut self, id: u64) -> ResponseContent {
        match self.jobs.interrupt(id) {
            Ok(()) => {
                tracing::info!("job {id} interrupted");
                self.io.out.job_opened();
                job_accepted(id)
            }
            Err(e) => ResponseContent::Error(format!("interrupt rejected: {e}")),
        }
    }
}

/// The answer to a job request: the job's id, no workload names.
fn job_accepted(job_id: u64) -> ResponseContent {
    ResponseContent::UpdateStateSuccess {
        added_workloads: Vec::new(),
        deleted_workloads: Vec::new(),
        job_id,
        hook_changes: Vec::new(),
    }
}

/// Whether a state is a failure a rerun retries.
fn failed(kind: Option<StateKind>) -> bool {
    matches!(kind, Some(StateKind::Failed(_) | StateKind::Pending(Pending::StartingFailed)))
}
