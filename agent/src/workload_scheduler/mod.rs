//! [`WorkloadScheduler`]: decides when this agent's workload operations
//! run. Creates wait in `Pending(WaitingToStart)` for their add conditions,
//! deletes (and the delete half of updates) in `Stopping(WaitingToStop)` for
//! their delete conditions. Creates whose dependencies hold start in
//! (start priority descending, arrival ascending) order (feature K1) as long
//! as the agent's quota has room (feature K2, else `Pending(QuotaBlocked)`)
//! and the isolated-job rule lets them (feature K5, else
//! `Pending(Postponed)`). On its tick it counts the waiting workloads'
//! events, lets preempted workloads back into the queue after their
//! postpone time and decides preemptions (feature K4).
//!
//! The queue has at most one operation per workload name; a newer
//! operation replaces a queued one. It is re-evaluated on every workload
//! state update (of this agent's workloads and of other agents') and on the
//! tick while some workload is quota-blocked, postponed or preempted.
//!
//! Owned by the `RuntimeManager`, which executes the returned operations,
//! reports the returned states and events and preempts the returned
//! workloads. Parts: [`queue`] (the ordered queue), [`slots`] (the started
//! workloads and what they use), [`quota`], [`isolation`], [`preemption`],
//! [`settings`]. The memory a workload declares is asked of its runtime's
//! connector (through the [`RuntimeRegistry`]).

pub mod dependency_state_validator;
mod isolation;
mod preemption;
mod queue;
mod quota;
pub mod settings;
mod slots;

use ank_common::execution_state::Pending;
use ank_common::messages::DeletedWorkload;
use ank_common::quota::QuotaUsage;
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind, WorkloadState};
use tokio::time::Instant;

use crate::runtime_connectors::{RuntimeError, RuntimeRegistry};
use crate::workload::EventReport;
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_state_store::WorkloadStateStore;
use dependency_state_validator::{create_fulfilled, delete_fulfilled};
use isolation::Jobs;
use preemption::Blocker;
use queue::{Entry, Hold, Queue, Queued};
use quota::Room;
pub use settings::{PreemptionSettings, SchedulerSettings};
use slots::Slots;

/// What the scheduler decided: operations to run now, states and events to
/// report, and workloads to preempt.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scheduled {
    pub ready: Vec<WorkloadOperation>,
    pub report: Vec<WorkloadState>,
    /// Events of waiting and preempted workloads.
    pub events: Vec<EventReport>,
    /// Workloads to preempt (by name): remove their containers and show
    /// them in the given state; they are queued again.
    pub preempt: Vec<(String, ExecutionState)>,
}

/// The queue of this agent's workload operations.
#[derive(Debug, Default)]
pub struct WorkloadScheduler {
    agent_name: String,
    settings: SchedulerSettings,
    queue: Queue,
    slots: Slots,
    /// The connectors, which say how much memory a workload declares.
    runtimes: RuntimeRegistry,
}

impl WorkloadScheduler {
    /// A scheduler without quota and preemption.
    pub fn new() -> Self {
        Self::default()
    }

    /// The scheduler of agent `agent_name`, whose workloads run on
    /// `runtimes`.
    pub fn with_settings(
        agent_name: impl Into<String>,
        settings: SchedulerSettings,
        runtimes: RuntimeRegistry,
    ) -> Self {
        Self { agent_name: agent_name.into(), settings, runtimes, ..Self::default() }
    }

    pub fn settings(&self) -> &SchedulerSettings {
        &self.settings
    }

    /// Whether an operation of `workload` waits in the queue.
    pub fn is_queued(&self, workload: &str) -> bool {
        self.queue.contains(workload)
    }

    /// How many operations wait.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Drops the queued operation of `workload`; true if there was one.
    pub fn cancel(&mut self, workload: &str) -> bool {
        self.queue.remove(workload).is_some()
    }

    /// The spec of a create of `workload` waiting in the queue.
    pub fn queued_create(&self, workload: &str) -> Option<&WorkloadSpec> {
        self.queue.get(workload)?.create_spec()
    }

    /// The state last shown for the queued create of `instance` (its hold),
    /// `None` when no create of that instance waits.
    pub fn queued_create_state(&self, instance: &ank_common::WorkloadInstanceName) -> Option<ExecutionState> {
        let entry = self.queue.get(&instance.workload_name)?;
        entry.create_spec().filter(|s| s.instance_name == *instance)?;
        Some(entry.shown.clone().unwrap_or(Hold::WaitingToStart).state())
    }

    /// The instances of the queued creates.
    pub fn queued_creates(&self) -> Vec<ank_common::WorkloadInstanceName> {
        self.queue
            .creates_in_order()
            .iter()
            .filter_map(|n| self.queued_create(n))
            .map(|s| s.instance_name.clone())
            .collect()
    }

    /// Whether the tick is needed: some workload is quota-blocked,
    /// postponed or preempted.
    pub fn needs_tick(&self) -> bool {
        self.queue.needs_tick()
    }

    /// What this agent's workloads use of its quota.
    pub fn usage(&self, store: &WorkloadStateStore) -> QuotaUsage {
        self.slots.usage(store)
    }

    /// `spec` runs without the queue: taken over at startup, or its spec
    /// changed without a new instance. It counts against the quota.
    pub fn started_outside(&mut self, spec: &WorkloadSpec) {
        let memory = self.memory_of(spec).unwrap_or(0);
        match self.slots.get(spec.name()) {
            Some(slot) if slot.instance() == &spec.instance_name => self.slots.refresh(spec, memory),
            _ => self.slots.start(spec.clone(), memory),
        }
    }

    /// Learns of new states of this agent's workloads (slots of removed
    /// instances end).
    pub fn observe(&mut self, states: &[WorkloadState]) {
        self.slots.observe(states);
    }

    /// The declared memory of `spec`; only read when memory is limited.
    fn memory_of(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        if self.settings.quota.max_memory == 0 {
            return Ok(0);
        }
        self.runtimes.declared_memory(spec)
    }

    /// Takes new operations: returns those ready now, queues the others.
    // [impl->swdd~agent-handles-new-workload-operations]
    pub fn enqueue_filtered_workload_operations(
        &mut self,
        operations: Vec<WorkloadOperation>,
        store: &WorkloadStateStore,
    ) -> Scheduled {
        let now = Instant::now();
        let mut out = Scheduled::default();
        for op in operations {
            let replaced = self.queue.remove(op.workload_name());
            let replaced_create = replaced.as_ref().is_some_and(|e| e.create_spec().is_some());
            match op {
                WorkloadOperation::Create(r) => {
                    // A create is only asked for what does not run (any more).
                    self.slots.forget(&r.spec.instance_name);
                    let memory = self.memory_of(&r.spec);
                    self.queue.insert_create(r, memory, replaced);
                }
                WorkloadOperation::Update(spec, deleted) => {
                    self.schedule_update(spec, deleted, replaced, store, &mut out);
                }
                // A create that never started has nothing to wait for.
                WorkloadOperation::Delete(deleted) if replaced_create => {
                    out.ready.push(WorkloadOperation::Delete(deleted))
                }
                WorkloadOperation::Delete(deleted) => self.schedule_delete(deleted, store, &mut out),
                // [impl->swdd~agent-shall-not-enqueue-update-delete-only-workload-operation~1]
                op @ WorkloadOperation::UpdateDeleteOnly(_) => out.ready.push(op),
            }
        }
        self.admit(store, now, false, &mut out);
        out
    }

    /// Re-evaluates the queue after state changes: returns the operations
    /// that may run now; the others stay queued (reported when why they
    /// wait changed).
    // [impl->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
    // [impl->swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1]
    pub fn next_workload_operations(&mut self, store: &WorkloadStateStore) -> Scheduled {
        self.evaluate(store, Instant::now(), false)
    }

    /// The scheduler tick at `now`: re-evaluates the queue, counts the
    /// events of waiting workloads once more and preempts.
    // [feature K2: the quota is checked again every tick]
    pub fn tick(&mut self, store: &WorkloadStateStore, now: Instant) -> Scheduled {
        self.evaluate(store, now, true)
    }

    fn evaluate(&mut self, store: &WorkloadStateStore, now: Instant, tick: bool) -> Scheduled {
        let mut out = Scheduled::default();
        for name in self.queue.waiting_to_stop() {
            let Some(entry) = self.queue.remove(&name) else { continue };
            match entry.op {
                Queued::Delete(deleted) if delete_fulfilled(&deleted, store) => {
                    out.ready.push(WorkloadOperation::Delete(deleted))
                }
                Queued::Update(spec, deleted) if delete_fulfilled(&deleted, store) => {
                    self.schedule_update(spec, deleted, None, store, &mut out)
                }
                op => self.queue.insert_waiting(name, op, Hold::WaitingToStop),
            }
        }
        self.admit(store, now, tick, &mut out);
        if tick {
            self.preempt(store, now, &mut out);
        }
        out
    }

    fn schedule_update(
        &mut self,
        spec: WorkloadSpec,
        deleted: DeletedWorkload,
        previous: Option<Entry>,
        store: &WorkloadStateStore,
        out: &mut Scheduled,
    ) {
        let name = spec.name().to_owned();
        if !delete_fulfilled(&deleted, store) {
            // [impl->swdd~agent-enqueues-update-with-unfulfilled-delete~1]
            out.report.push(WorkloadState::new(deleted.instance_name.clone(), Hold::WaitingToStop.state()));
            self.queue.insert_waiting(name, Queued::Update(spec, deleted), Hold::WaitingToStop);
            return;
        }
        let memory = self.memory_of(&spec);
        if create_fulfilled(&spec, store) && self.update_fits(&spec, &memory, store) {
            out.ready.push(WorkloadOperation::Update(spec.clone(), deleted));
            self.slots.start(spec, memory.unwrap_or(0));
            return;
        }
        // The new instance waits in the queue (its hold is reported by the
        // pass that follows); the old one goes now.
        // [impl->swdd~agent-handles-update-with-fulfilled-delete~1]
        out.ready.push(WorkloadOperation::UpdateDeleteOnly(deleted));
        let previous = previous.filter(|p| p.create_spec().is_some());
        self.queue.insert_create(ReusableWorkloadSpec::new(spec), memory, previous);
    }

    /// Whether an update may replace the running instance at once: the new
    /// instance fits once the old one's share is given back.
    fn update_fits(&self, spec: &WorkloadSpec, memory: &Result<u64, RuntimeError>, store: &WorkloadStateStore) -> bool {
        let Ok(memory) = memory else { return false };
        let mut room = Room::new(&self.agent_name, self.settings.quota, self.slots.usage(store));
        if let Some(old) = self.slots.get(spec.name()).filter(|s| s.occupies(store)) {
            room.give_back(1, old.memory);
        }
        room.fits(*memory).is_ok() && Jobs::active_in(&self.slots, store).hold(spec).is_none()
    }

    // [impl->swdd~agent-enqueues-unfulfilled-delete~1]
    fn schedule_delete(&mut self, deleted: DeletedWorkload, store: &WorkloadStateStore, out: &mut Scheduled) {
        if delete_fulfilled(&deleted, store) {
            out.ready.push(WorkloadOperation::Delete(deleted));
            return;
        }
        out.report.push(WorkloadState::new(deleted.instance_name.clone(), Hold::WaitingToStop.state()));
        let name = deleted.instance_name.workload_name.clone();
        self.queue.insert_waiting(name, Queued::Delete(deleted), Hold::WaitingToStop);
    }

    /// Why a queued create waits now, or `None` when it may start.
    fn hold_of(
        &self,
        entry: &Entry,
        spec: &WorkloadSpec,
        room: &Room<'_>,
        jobs: &Jobs,
        store: &WorkloadStateStore,
        now: Instant,
    ) -> Option<Hold> {
        if entry.preempted_until.is_some_and(|until| now < until) {
            return Some(Hold::Preempted);
        }
        // [impl->swdd~agent-enqueues-unfulfilled-create~1]
        if !create_fulfilled(spec, store) {
            return Some(Hold::WaitingToStart);
        }
        let memory = match &entry.memory {
            Ok(memory) => *memory,
            Err(e) => return Some(Hold::Invalid(format!("declared memory: {e}"))),
        };
        if let Some(reason) = jobs.hold(spec) {
            return Some(Hold::Postponed(reason));
        }
        room.fits(memory).err().map(|e| Hold::QuotaBlocked(e.to_string()))
    }

    /// One pass over the queued creates in start order: starts those that
    /// may start, shows why the others wait. No workload overtakes a
    /// quota-blocked one: a smaller one behind it waits as well, so that
    /// the room it waits for is not taken away bit by bit.
    fn admit(&mut self, store: &WorkloadStateStore, now: Instant, tick: bool, out: &mut Scheduled) {
        let mut room = Room::new(&self.agent_name, self.settings.quota, self.slots.usage(store));
        let mut jobs = Jobs::active_in(&self.slots, store);
        let mut blocked_ahead: Option<String> = None;
        for name in self.queue.creates_in_order() {
            let Some(entry) = self.queue.get(&name) else { continue };
            let Some(spec) = entry.create_spec() else { continue };
            let hold = self.hold_of(entry, spec, &room, &jobs, store, now);
            let hold = match (hold, &blocked_ahead) {
                (None, Some(reason)) => Some(Hold::QuotaBlocked(reason.clone())),
                (hold, _) => hold,
            };
            if let (Some(Hold::QuotaBlocked(reason)), None) = (&hold, &blocked_ahead) {
                blocked_ahead = Some(reason.clone());
            }
            let Some(hold) = hold else {
                let memory = entry.memory.clone().unwrap_or(0);
                if let Some(Entry { op: Queued::Create(r), .. }) = self.queue.remove(&name) {
                    room.take(memory);
                    jobs.started(&r.spec);
                    self.slots.start(r.spec.clone(), memory);
                    out.ready.push(WorkloadOperation::Create(r));
                }
                continue;
            };
            if !matches!(hold, Hold::WaitingToStart | Hold::Preempted) {
                jobs.held(spec);
            }
            let instance = spec.instance_name.clone();
            let Some(entry) = self.queue.get_mut(&name) else { continue };
            let changed = entry.shown.as_ref() != Some(&hold);
            if changed && hold != Hold::Preempted {
                out.report.push(WorkloadState::new(instance.clone(), hold.state()));
            }
            // [feature K2: one QuotaBlocked entry whose count grows once per tick]
            if let Some((kind, reason)) = hold.event().filter(|_| changed || tick) {
                out.events.push(EventReport { instance_name: instance, kind, reason: reason.to_owned() });
            }
            entry.blocked_since = match hold {
                Hold::QuotaBlocked(_) => entry.blocked_since.or(Some(now)),
                _ => None,
            };
            if hold != Hold::Preempted {
                entry.preempted_until = None;
            }
            entry.shown = Some(hold);
        }
    }

    /// Decides and applies this tick's preemptions.
    // [feature K4: quota-blocked workloads preempt lower-priority ones]
    fn preempt(&mut self, store: &WorkloadStateStore, now: Instant, out: &mut Scheduled) {
        let settings = self.settings.preemption;
        let blockers: Vec<Blocker> = self
            .queue
            .creates_in_order()
            .into_iter()
            .filter_map(|name| {
                let entry = self.queue.get(&name)?;
                let spec = entry.create_spec()?;
                let blocked_long_enough = entry.blocked_since.is_some_and(|since| now >= since + settings.delay);
                let may = settings.enabled || spec.workload.policy.preempt_enabled;
                (blocked_long_enough && may).then(|| Blocker {
                    priority: spec.workload.start_priority(),
                    memory: entry.memory.clone().unwrap_or(0),
                    name,
                })
            })
            .collect();
        if blockers.is_empty() {
            return;
        }
        let room = Room::new(&self.agent_name, self.settings.quota, self.slots.usage(store));
        let releasing = self.slots.releasing_usage(store);
        let busy = |name: &str| self.queue.contains(name);
        let plan = preemption::plan(
            &blockers,
            &self.slots,
            store,
            &room,
            (releasing.workloads, releasing.memory),
            &settings,
            busy,
        );
        for p in plan {
            let Some(slot) = self.slots.release(&p.victim) else { continue };
            let reason = p.reason();
            tracing::info!("preempting workload '{}' {reason}", slot.instance());
            let state = ExecutionState::with_info(StateKind::Pending(Pending::Preempted), reason.clone());
            out.events.push(EventReport { instance_name: slot.instance().clone(), kind: EventKind::Preempted, reason });
            out.preempt.push((p.victim, state));
            self.queue.insert_preempted(slot.spec, slot.memory, now + settings.postpone);
        }
    }
}

#[cfg(test)]
mod tests;
