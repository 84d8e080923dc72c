//! [`Slots`]: the workloads the scheduler let start on this agent (or
//! found running at startup), one per workload name, from their start until
//! their instance is `Removed`. Whether a slot uses quota follows from the
//! state of its instance in the `WorkloadStateStore` (feature K2): starting,
//! running, stopping, or ended but about to be restarted by its restart
//! policy. A preempted workload's slot is *releasing* until its control loop
//! reports `Pending(Preempted)`, i.e. until its container is gone.

use std::collections::BTreeMap;

use ank_common::execution_state::Pending;
use ank_common::quota::QuotaUsage;
use ank_common::workload::{RestartPolicy, WorkloadSpec};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};

use crate::workload::policy::restart_needed;
use crate::workload_state_store::WorkloadStateStore;

/// One started workload.
#[derive(Debug, Clone)]
pub struct Slot {
    pub spec: WorkloadSpec,
    /// Declared memory in bytes.
    pub memory: u64,
    /// Start order; later starts are "newer" for preemption.
    pub started: u64,
}

impl Slot {
    pub fn instance(&self) -> &WorkloadInstanceName {
        &self.spec.instance_name
    }

    pub fn priority(&self) -> u32 {
        self.spec.workload.start_priority()
    }

    /// A job: a workload that is not restarted (feature K5).
    pub fn is_job(&self) -> bool {
        is_job(&self.spec)
    }

    /// The state of its instance, if reported.
    fn state<'a>(&self, store: &'a WorkloadStateStore) -> Option<&'a ExecutionState> {
        store.state_of_instance(self.instance())
    }

    /// Whether the workload uses quota in the state the store has.
    pub fn occupies(&self, store: &WorkloadStateStore) -> bool {
        let Some(state) = self.state(store) else {
            return true; // started, nothing reported yet
        };
        match state.kind {
            // A waiting state reported before it was started.
            StateKind::Pending(Pending::WaitingToStart | Pending::QuotaBlocked | Pending::Postponed) => true,
            StateKind::Pending(Pending::Initial | Pending::Starting) | StateKind::Running | StateKind::Stopping(_) => {
                true
            }
            StateKind::Succeeded | StateKind::Failed(_) => restart_needed(self.spec.workload.restart_policy, state),
            _ => false,
        }
    }

    /// Whether it runs (`Running`), so that it may be preempted.
    pub fn is_running(&self, store: &WorkloadStateStore) -> bool {
        self.state(store).is_some_and(|s| s.kind == StateKind::Running)
    }
}

/// A workload that is not restarted after it ends.
pub fn is_job(spec: &WorkloadSpec) -> bool {
    spec.workload.restart_policy == RestartPolicy::Never
}

/// The started workloads of this agent.
#[derive(Debug, Default)]
pub struct Slots {
    by_name: BTreeMap<String, Slot>,
    /// Preempted workloads whose container is being removed.
    releasing: Vec<Slot>,
    started: u64,
}

impl Slots {
    /// Records that `spec` starts now (replacing the slot of an earlier instance).
    pub fn start(&mut self, spec: WorkloadSpec, memory: u64) {
        self.started += 1;
        let slot = Slot { spec, memory, started: self.started };
        self.by_name.insert(slot.spec.name().to_owned(), slot);
    }

    /// A workload's spec changed without a new instance (priority, policy).
    pub fn refresh(&mut self, spec: &WorkloadSpec, memory: u64) {
        if let Some(slot) = self.by_name.get_mut(spec.name())
            && slot.instance() == &spec.instance_name
        {
            slot.spec = spec.clone();
            slot.memory = memory;
        }
    }

    /// Forgets the slot of `instance`: it waits in the queue again and
    /// nothing of it runs (its old control loop gave up or was lost).
    pub fn forget(&mut self, instance: &WorkloadInstanceName) {
        self.by_name.retain(|_, slot| slot.instance() != instance);
    }

    /// The slot of `name`.
    pub fn get(&self, name: &str) -> Option<&Slot> {
        self.by_name.get(name)
    }

    /// Moves the slot of `name` to the releasing ones (it was preempted).
    pub fn release(&mut self, name: &str) -> Option<Slot> {
        let slot = self.by_name.remove(name)?;
        self.releasing.push(slot.clone());
        Some(slot)
    }

    /// Forgets slots whose instance is gone, and releasing slots whose
    /// container is gone (their loop reported `Pending(Preempted)`).
    pub fn observe(&mut self, states: &[WorkloadState]) {
        for s in states {
            let gone = s.execution_state.kind == StateKind::Removed;
            let preempted = s.execution_state.kind == StateKind::Pending(Pending::Preempted);
            if gone {
                self.by_name.retain(|_, slot| slot.instance() != &s.instance_name);
            }
            if gone || preempted {
                self.releasing.retain(|slot| slot.instance() != &s.instance_name);
            }
        }
    }

    /// The started workloads (not the releasing ones).
    pub fn iter(&self) -> impl Iterator<Item = &Slot> {
        self.by_name.values()
    }

    /// What the occupying slots use, releasing ones included.
    pub fn usage(&self, store: &WorkloadStateStore) -> QuotaUsage {
        let mut usage = QuotaUsage::default();
        for slot in self.by_name.values().chain(&self.releasing).filter(|s| s.occupies(store)) {
            usage.workloads += 1;
            usage.memory = usage.memory.saturating_add(slot.memory);
        }
        usage
    }

    /// What the releasing slots still use: freed once their containers are gone.
    pub fn releasing_usage(&self, store: &WorkloadStateStore) -> QuotaUsage {
        let mut usage = QuotaUsage::default();
        for slot in self.releasing.iter().filter(|s| s.occupies(store)) {
            usage.workloads += 1;
            usage.memory = usage.memory.saturating_add(slot.memory);
        }
        usage
    }
}
