//! Opening jobs: every accepted change opens a job over the workloads it
//! adds, updates or deletes ([`JobEngine::open_change`]); reruns open a job
//! over the unchanged desired state ([`JobEngine::rerun`]). The engine
//! returns what the server must do besides: the states of held workloads
//! that never reached their agent, to be forgotten and pushed. The jobs
//! advance once per command that may change the state (carried out by
//! [`Advance`](super::advance::Advance)).

use std::collections::BTreeMap;

use ank_common::execution_state::Stopping;
use ank_common::messages::{DeletedWorkload, FromServer, ResponseContent};
use ank_common::{State, StateKind, WorkloadInstanceName};

use super::advance::failed;
use crate::connections::Outbox;
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState, StateDiff};
use crate::jobs::{JobEngine, NewItem};
use crate::workload_states::WorkloadStateStore;

/// A job opened for a change, and the instances whose states the server
/// must forget (held workloads that never reached their agent and that
/// the new job replaces or deletes).
pub(crate) struct Opened {
    pub(crate) id: u64,
    pub(crate) forget: Vec<WorkloadInstanceName>,
}

impl JobEngine {
    /// Opens the job of an accepted change from rendered state `old` to the
    /// current one. `startup`: the items go out at once (the startup
    /// manifest; agents resuming their workloads order them themselves).
    /// Opens the job of an accepted change from rendered state `old` to
    /// the current one (`startup`: the items go out at once), and forgets
    /// the states of the held workloads it replaces that never reached
    /// their agent: its id, and the messages that say they are gone.
    pub(crate) fn open_job(
        &mut self,
        states: &mut WorkloadStateStore,
        old: &State,
        diff: &StateDiff,
        startup: bool,
        generations: &Generations,
    ) -> (u64, Outbox) {
        let opened = self.open_change(old, diff, startup, generations);
        let mut out = Outbox::default();
        for n in &opened.forget {
            if let Some(gone) = states.forget(n) {
                out.broadcast(None, FromServer::UpdateWorkloadState(vec![gone]));
            }
        }
        (opened.id, out)
    }

    // [feature L1: every accepted change is a job with a monotonic id]
    pub(crate) fn open_change(
        &mut self,
        old: &State,
        diff: &StateDiff,
        startup: bool,
        generations: &Generations,
    ) -> Opened {
        let mut items: BTreeMap<String, (NewItem, u64)> = BTreeMap::new();
        for spec in diff.added.values().flatten() {
            let generation = generations.of(spec.name()).unwrap_or(0);
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
                let generation = generations.of(name.as_str()).unwrap_or(0);
                let new = NewItem { unplaced: true, triggered: true, ..NewItem::default() };
                items.insert(name.to_string(), (new, generation));
            }
        }
        let forget = self.forget_unsent(&mut items);
        Opened { id: self.create(items), forget }
    }

    /// A held workload never reached its agent: a new job over it does not
    /// tell the agent to delete it, and its row goes (returned) when it is
    /// deleted or replaced by another instance.
    fn forget_unsent(&self, items: &mut BTreeMap<String, (NewItem, u64)>) -> Vec<WorkloadInstanceName> {
        let mut forget = Vec::new();
        for (name, (item, _)) in items.iter_mut() {
            let Some(held) = self.held_item(name) else { continue };
            let Some(unsent) = held.add.as_ref().filter(|_| held.delete.is_none()).map(|s| s.instance_name.clone())
            else {
                continue;
            };
            if item.delete.as_ref().is_some_and(|d| d.instance_name == unsent) {
                item.delete = None;
            }
            if item.add.as_ref().is_none_or(|s| s.instance_name != unsent) {
                forget.push(unsent);
            }
            if item.add.is_none() && item.delete.is_none() {
                // Nothing was ever started: the deletion is done.
                item.triggered = true;
            }
        }
        forget
    }

    /// A new job over the unchanged desired state: workloads that failed
    /// to start or to stop and, unless `failed_only`, those never started;
    /// `agents`: the connected agents, whose failed deletions are retried.
    // [feature L6: re-trigger without spec change]
    pub(crate) fn rerun<'a>(
        &mut self,
        failed_only: bool,
        current: &DesiredState,
        generations: &Generations,
        states: &WorkloadStateStore,
        agents: impl Iterator<Item = &'a String>,
    ) -> u64 {
        let mut items: BTreeMap<String, (NewItem, u64)> = BTreeMap::new();
        if !failed_only {
            for (name, _, item, _) in self.held_items() {
                let generation = generations.of(name).unwrap_or(0);
                items.insert(name.to_owned(), (NewItem { triggered: false, ..item.clone() }, generation));
            }
        }
        for (name, wl) in &current.rendered.workloads {
            let Some(spec) = desired_state::spec_of(name, wl) else { continue };
            if items.contains_key(name.as_str()) || !failed(states.kind_of(&spec.instance_name)) {
                continue;
            }
            let generation = generations.of(name.as_str()).unwrap_or(0);
            items.insert(name.to_string(), (NewItem { add: Some(spec), ..NewItem::default() }, generation));
        }
        for agent in agents {
            for n in states.instances_of(agent) {
                let stop_failed = states.kind_of(&n) == Some(StateKind::Stopping(Stopping::DeleteFailed));
                if stop_failed && !desired_state::wants_instance(&current.rendered, &n) {
                    let delete = DeletedWorkload { instance_name: n.clone(), dependencies: BTreeMap::new() };
                    let item = NewItem { delete: Some(delete), ..NewItem::default() };
                    items.entry(n.workload_name.to_string()).or_insert((item, 0));
                }
            }
        }
        let id = self.create(items);
        tracing::info!("job {id}: rerun{}", if failed_only { " of the failed workloads" } else { "" });
        id
    }
}

impl JobEngine {
    /// Ends job `id` at a user's request: the answer, and whether the job
    /// ended (the jobs advance then).
    // [feature L7: interrupt]
    pub(crate) fn interrupt_request(&mut self, id: u64) -> (ResponseContent, bool) {
        match self.interrupt(id) {
            Ok(()) => {
                tracing::info!("job {id} interrupted");
                (job_accepted(id), true)
            }
            Err(e) => (ResponseContent::Error(format!("interrupt rejected: {e}")), false),
        }
    }
}

/// The answer to a job request: the job's id, no workload names.
pub(crate) fn job_accepted(job_id: u64) -> ResponseContent {
    ResponseContent::UpdateStateSuccess {
        added_workloads: Vec::new(),
        deleted_workloads: Vec::new(),
        job_id,
        hook_changes: Vec::new(),
    }
}
