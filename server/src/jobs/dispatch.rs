//! The actor's side of apply jobs: every accepted change opens a job over
//! the workloads it adds, updates or deletes (`open_job`); the jobs advance
//! once per command that may change the state (`advance_jobs`, carried out
//! by [`Advance`](super::advance::Advance)). Reruns and interrupts come in
//! as requests and open jobs too.

use std::collections::BTreeMap;

use ank_common::execution_state::Stopping;
use ank_common::messages::{DeletedWorkload, FromServer, ResponseContent};
use ank_common::{State, StateKind, WorkloadInstanceName};
use tokio::time::Instant;

use super::advance::{Advance, failed};
use crate::actor::AnkaiosServer;
use crate::connections::Outbox;
use crate::desired_state::{self, StateDiff};
use crate::jobs::NewItem;

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
    /// ready and shows what is held. Runs once per command that may change
    /// the state; what it sends goes where the first job not advanced yet
    /// opened.
    pub(crate) fn advance_jobs(&mut self) {
        let advance = Advance {
            jobs: &mut self.jobs,
            states: &mut self.states,
            conns: &self.conns,
            desired: &self.desired,
            gates: &self.sched.gates,
            out: Outbox::default(),
        };
        let out = advance.run(Instant::now());
        self.io.out.jobs_advanced(out);
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
