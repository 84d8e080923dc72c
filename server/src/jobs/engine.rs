//! The job engine (the Landscaper execution controller): every accepted
//! change of the desired state is a job with a monotonic id whose items are
//! the workloads it adds, updates or deletes. Each step classifies the items
//! (A succeeded, B failed, C in progress, D ready, E waiting), hands out the
//! ready ones (with `stop_on_failure`: while nothing failed), and moves the
//! job through its phases; with `stuck_after`, a job where nothing runs and
//! nothing can start fails as stuck after that time. By default every item
//! is handed out when its job opens (as Ankaios does: the agents wait for
//! dependencies) and the job only tracks; holding items back is opt-in
//! (`hold_dependents`). The engine owns the jobs, which items are held back
//! and the bounded history; what the workloads do it learns through a
//! [`JobView`].

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::jobs::{ItemClass, Job, JobItem, JobPhase};
use ank_common::messages::DeletedWorkload;
use ank_common::workload::{AddCondition, WorkloadSpec};
use ank_common::{StateKind, WorkloadInstanceName};
use tokio::time::Instant;

use super::classify::{classify, counts, is_deletion, settled};
use super::phase::{decide_phase, finish};

/// How jobs behave (configurable). The default is Ankaios' behaviour: every
/// workload goes to its agent at once and nothing gives up; the server-side
/// holding, stop on failure and stuck timeout are opt-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSettings {
    /// How long a job may wait with nothing running and nothing to start
    /// before it fails as stuck; `None` (default): it waits as long as it
    /// takes (a late agent still gets its workloads).
    pub stuck_after: Option<Duration>,
    /// Hold a workload of a job (not of the startup state) back at the
    /// server until its dependencies meet their add conditions, and
    /// deletions until the deleted dependents are gone. Off (default, as
    /// Ankaios): everything is handed out at once and the agents wait.
    pub hold_dependents: bool,
    /// Once an item of a job failed, hand out none of the items it still
    /// holds (only matters with `hold_dependents`). Off (default): held
    /// items go out when they are ready whatever else failed.
    pub stop_on_failure: bool,
    /// How many finished jobs are kept.
    pub history: usize,
    /// Whether held workloads show the job's progress ("job 14: waits for
    /// db ...") as the additionalInfo of their execution state. Off (as in
    /// Ankaios): held workloads show a bare Pending(WaitingToStart) /
    /// Stopping(WaitingToStop); the progress is in `ank get jobs`.
    pub progress_in_states: bool,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            stuck_after: None,
            hold_dependents: false,
            stop_on_failure: false,
            history: Self::DEFAULT_HISTORY,
            progress_in_states: false,
        }
    }
}

impl JobSettings {
    /// The stuck timeout the opt-in `--job-stuck-after-s` examples use.
    pub const EXAMPLE_STUCK_AFTER: Duration = Duration::from_secs(5 * 60);
    pub const DEFAULT_HISTORY: usize = 100;

    /// The Landscaper mode (opt-in): dependents held at the server, no
    /// more hand-outs after a failure, stuck after `stuck_after`.
    pub fn holding(stuck_after: Duration) -> Self {
        Self { stuck_after: Some(stuck_after), hold_dependents: true, stop_on_failure: true, ..Self::default() }
    }
}

/// What the engine needs to know about the workloads.
pub trait JobView {
    /// The state and observed generation of an instance, if listed.
    fn instance(&self, n: &WorkloadInstanceName) -> Option<(StateKind, u64)>;
    /// `Err(why)` unless dependency `dep` meets `condition` now, e.g.
    /// "db (Pending(Initial), agent 'B' never connected)".
    fn dependency(&self, dep: &str, condition: AddCondition) -> Result<(), String>;
    /// Why nothing can happen on `agent` now ("agent 'Z' never connected"),
    /// or `None` while it is connected.
    fn away(&self, agent: &str) -> Option<String>;
    /// Why the result of `workload` at `generation` is not known yet while
    /// its update gate is open ("update gate: Ready for 3s of 10s, 50s
    /// left"); `None` without a gate.
    fn gate(&self, _workload: &str, _generation: u64) -> Option<String> {
        None
    }
    /// Whether `workload` is under an open update gate: whatever depends on
    /// it is held at the server until the gate passes.
    fn gated(&self, _workload: &str) -> bool {
        false
    }
}

/// Whether a dependency in state `kind` meets an add condition.
pub fn meets(condition: AddCondition, kind: Option<StateKind>) -> bool {
    matches!(
        (condition, kind),
        (AddCondition::Running, Some(StateKind::Running))
            | (AddCondition::Succeeded, Some(StateKind::Succeeded))
            | (AddCondition::Failed, Some(StateKind::Failed(_)))
    )
}

/// Why a job cannot be interrupted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterruptError {
    #[error("no job {0}")]
    NoJob(u64),
    #[error("job {id} is already {phase}")]
    Finished { id: u64, phase: &'static str },
}

/// One workload of a new job.
#[derive(Debug, Clone, Default)]
pub struct NewItem {
    /// The workload's spec to start (stamped when triggered), if any.
    pub add: Option<WorkloadSpec>,
    /// The instance it replaces or removes, if any.
    pub delete: Option<DeletedWorkload>,
    /// For a pure deletion: instances of the same job that depended on it
    /// and must be gone first.
    pub delete_after: Vec<WorkloadInstanceName>,
    /// Handed out at once (the startup manifest, whose agents order it).
    pub triggered: bool,
    /// A workload of the change that no agent was found for: it waits
    /// until placement gives it one (a later job then rolls it out).
    pub unplaced: bool,
}

/// What to hand to an agent now.
#[derive(Debug, Clone)]
pub struct Trigger {
    pub job: u64,
    pub add: Option<WorkloadSpec>,
    pub delete: Option<DeletedWorkload>,
}

#[derive(Debug, Clone)]
pub(super) struct Item {
    pub(super) new: NewItem,
    pub(super) generation: u64,
    /// Fixed class and reason (interrupted, superseded).
    pub(super) frozen: Option<(ItemClass, String)>,
    /// Superseded items no longer count for the phase.
    pub(super) superseded: bool,
    /// Failed by its update gate: a later job (the revert) does not
    /// supersede the failure.
    pub(super) gate_failed: bool,
    pub(super) shown: JobItem,
}

#[derive(Debug)]
pub(super) struct Run {
    pub(super) job: Job,
    pub(super) items: BTreeMap<String, Item>,
    pub(super) delete_only: bool,
    pub(super) stuck_since: Option<Instant>,
}

/// All jobs, active and recent.
#[derive(Debug, Default)]
pub struct JobEngine {
    settings: JobSettings,
    last_id: u64,
    runs: BTreeMap<u64, Run>,
    /// Workload name -> the job holding its untriggered item.
    held: BTreeMap<String, u64>,
    /// Workloads a pipeline canceled: never handed out (again) until a
    /// new job takes them over; the item is what the agent would have got,
    /// with the reason.
    canceled: BTreeMap<String, (NewItem, String)>,
    /// How often the jobs were stepped (each step looks at every unfinished
    /// item): what the server's batching of state reports saves.
    steps: u64,
}

impl JobEngine {
    pub fn new(settings: JobSettings) -> Self {
        Self { settings, ..Default::default() }
    }

    /// How often the jobs were stepped so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The settings the engine was made with.
    pub fn settings(&self) -> &JobSettings {
        &self.settings
    }

    /// Opens a job over `items` (by workload name, with the generation each
    /// item's spec has). Untriggered items of the same workloads in older
    /// jobs are taken over (their pending deletion comes along); older jobs
    /// stop tracking those workloads.
    // [feature L1: every accepted change is a job with a monotonic id]
    pub fn create(&mut self, items: BTreeMap<String, (NewItem, u64)>) -> u64 {
        self.last_id += 1;
        let id = self.last_id;
        let mut run_items = BTreeMap::new();
        for (name, (mut new, generation)) in items {
            if let Some(prev) = self.take_over(&name, id)
                && new.delete.is_none()
            {
                new.delete = prev.delete;
            }
            if !new.triggered {
                self.held.insert(name.clone(), id);
            }
            let shown = JobItem { delete: is_deletion(&new), ..JobItem::default() };
            run_items
                .insert(name, Item { new, generation, frozen: None, superseded: false, gate_failed: false, shown });
        }
        let delete_only = !run_items.is_empty() && run_items.values().all(|i| is_deletion(&i.new));
        let phase = if delete_only { JobPhase::InitDelete } else { JobPhase::Init };
        let job = Job { id, phase, created_at: ank_common::daemon::clock::now_rfc3339(), ..Job::default() };
        self.runs.insert(id, Run { job, items: run_items, delete_only, stuck_since: None });
        id
    }

    /// Marks the item of `name` in every unfinished older job superseded;
    /// returns it if it was still held.
    fn take_over(&mut self, name: &str, by: u64) -> Option<NewItem> {
        let held_by = self.held.remove(name);
        let mut taken = self.canceled.remove(name).map(|(item, _)| item);
        for (id, run) in self.runs.iter_mut().filter(|(id, _)| **id != by) {
            let Some(item) = run.items.get_mut(name) else { continue };
            if item.gate_failed {
                continue;
            }
            if Some(*id) == held_by {
                taken = Some(item.new.clone());
            }
            if !run.job.phase.is_final() || Some(*id) == held_by {
                item.superseded = true;
                let class = if Some(*id) == held_by { ItemClass::Waiting } else { item.shown.class };
                let reason = format!("superseded by job {by}");
                item.shown.class = class;
                item.shown.reason.clone_from(&reason);
                item.frozen = Some((class, reason));
            }
        }
        taken
    }

    /// Whether the workload's spec or deletion is held back by a job (or
    /// for good, canceled).
    pub fn is_held(&self, name: &str) -> bool {
        self.held.contains_key(name) || self.canceled.contains_key(name)
    }

    /// Cancels a workload for good (a pipeline member after a failure):
    /// the item holding it fails as canceled, and it is held back until a
    /// new job takes it over. Returns whether it was held (never handed
    /// out).
    // [feature K6: canceled members are never handed to an agent]
    pub fn cancel(&mut self, spec: WorkloadSpec, reason: &str) -> bool {
        let name = spec.name().to_owned();
        let held = self.held.remove(&name);
        if let Some(item) = held.and_then(|id| self.runs.get_mut(&id)).and_then(|r| r.items.get_mut(&name)) {
            let why = format!("canceled: {reason}");
            item.shown.class = ItemClass::Failed;
            item.shown.reason.clone_from(&why);
            item.frozen = Some((ItemClass::Failed, why));
        }
        self.canceled.insert(name, (NewItem { add: Some(spec), ..NewItem::default() }, reason.to_owned()));
        held.is_some()
    }

    /// Fails the item that handed out `workload` at `generation` in every
    /// unfinished job: its update gate failed with `reason`.
    // [feature: issue 39 the job of a gated update fails with the gate]
    pub fn fail_gated(&mut self, workload: &str, generation: u64, reason: &str) {
        for run in self.runs.values_mut().filter(|r| !r.job.phase.is_final()) {
            let Some(item) = run.items.get_mut(workload) else { continue };
            if item.superseded || item.generation != generation || item.new.add.is_none() {
                continue;
            }
            item.gate_failed = true;
            item.shown.class = ItemClass::Failed;
            item.shown.reason = reason.to_owned();
            item.frozen = Some((ItemClass::Failed, reason.to_owned()));
        }
    }

    /// Whether `n` is the instance of a canceled workload.
    pub fn is_canceled(&self, n: &WorkloadInstanceName) -> bool {
        self.canceled
            .get(n.workload_name.as_str())
            .and_then(|(item, _)| item.add.as_ref())
            .is_some_and(|s| s.instance_name == *n)
    }

    /// The canceled instances and why.
    pub fn canceled(&self) -> impl Iterator<Item = (&WorkloadInstanceName, &str)> {
        self.canceled.values().filter_map(|(item, reason)| Some((&item.add.as_ref()?.instance_name, reason.as_str())))
    }

    /// Advances every unfinished job: classifies its items, hands out the
    /// ready ones (none once one failed), and sets the phase. Returns what
    /// to hand out; call again after acting on it until nothing comes.
    // [feature L2: dependency-ordered triggering (A-E)]
    pub fn step(&mut self, view: &dyn JobView, now: Instant) -> Vec<Trigger> {
        self.steps += 1;
        let mut out = Vec::new();
        let mut finished = false;
        for (id, run) in self.runs.iter_mut().filter(|(_, r)| !r.job.phase.is_final()) {
            // A handed-out item that finished stays finished (as in the
            // Landscaper); only the others are looked at again.
            for item in run.items.values_mut().filter(|i| !settled(i)) {
                item.shown = classify(item, view, self.settings.hold_dependents);
            }
            let failed = run.items.values().any(|i| counts(i) && i.shown.class == ItemClass::Failed);
            if !(failed && self.settings.stop_on_failure) {
                for (name, item) in run.items.iter_mut().filter(|(_, i)| counts(i) && i.shown.class == ItemClass::Ready)
                {
                    item.new.triggered = true;
                    item.shown.class = ItemClass::InProgress;
                    item.shown.reason.clear();
                    self.held.remove(name);
                    out.push(Trigger { job: *id, add: item.new.add.clone(), delete: item.new.delete.clone() });
                }
            }
            decide_phase(run, &self.settings, now);
            finished |= run.job.phase.is_final();
        }
        if finished {
            self.trim_history();
        }
        out
    }

    /// Ends a running job: its unfinished items count as failed.
    // [feature L7: interrupt]
    pub fn interrupt(&mut self, id: u64) -> Result<(), InterruptError> {
        let run = self.runs.get_mut(&id).ok_or(InterruptError::NoJob(id))?;
        if run.job.phase.is_final() {
            return Err(InterruptError::Finished { id, phase: run.job.phase.as_str() });
        }
        for item in run.items.values_mut().filter(|i| !i.superseded) {
            if matches!(item.shown.class, ItemClass::InProgress | ItemClass::Ready | ItemClass::Waiting) {
                item.frozen = Some((ItemClass::Failed, "interrupted".to_owned()));
                item.shown.class = ItemClass::Failed;
                item.shown.reason = "interrupted".to_owned();
            }
        }
        finish(run, if run.delete_only { JobPhase::DeleteFailed } else { JobPhase::Failed }, "interrupted".to_owned());
        Ok(())
    }

    /// The untriggered item of a held (or canceled) workload, if any.
    pub fn held_item(&self, name: &str) -> Option<&NewItem> {
        if let Some((item, _)) = self.canceled.get(name) {
            return Some(item);
        }
        let id = self.held.get(name)?;
        self.runs.get(id)?.items.get(name).map(|i| &i.new)
    }

    /// Every held workload: its name, the job holding it, its untriggered
    /// item and why it waits (as its job last classified it).
    pub fn held_items(&self) -> impl Iterator<Item = (&str, u64, &NewItem, &str)> {
        self.held.iter().filter_map(|(name, id)| {
            let item = self.runs.get(id)?.items.get(name)?;
            Some((name.as_str(), *id, &item.new, item.shown.reason.as_str()))
        })
    }

    /// Whether an unfinished job waits with nothing to do (the clock may
    /// make it stuck).
    pub fn waits_on_clock(&self) -> bool {
        self.settings.stuck_after.is_some()
            && self.runs.values().any(|r| r.stuck_since.is_some() && !r.job.phase.is_final())
    }

    /// The jobs as shown in the complete state.
    pub fn jobs(&self) -> BTreeMap<String, Job> {
        self.runs
            .iter()
            .map(|(id, run)| {
                let mut job = run.job.clone();
                job.workloads = run.items.iter().map(|(n, i)| (n.clone(), i.shown.clone())).collect();
                (id.to_string(), job)
            })
            .collect()
    }

    /// Drops the oldest finished jobs beyond the history size; a finished
    /// job that still holds workloads is kept (rerun needs it).
    fn trim_history(&mut self) {
        let finished: Vec<u64> = self.runs.iter().filter(|(_, r)| r.job.phase.is_final()).map(|(id, _)| *id).collect();
        let excess = finished.len().saturating_sub(self.settings.history);
        let holding: std::collections::BTreeSet<u64> = self.held.values().copied().collect();
        for id in finished.into_iter().filter(|id| !holding.contains(id)).take(excess) {
            self.runs.remove(&id);
        }
    }
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
