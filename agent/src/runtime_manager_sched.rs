//! The `RuntimeManager`'s side of the WorkloadScheduler: handing it new
//! operations and states, carrying out what it decided (reports, events,
//! operations, preemptions), its tick (armed only while some workload is quota-blocked, postponed or
//! preempted) and publishing what the workloads use of the agent's quota
//! for the server link.

use ank_common::execution_state::{Failed, Pending};
use ank_common::workload::WorkloadSpec;
use ank_common::{StateKind, WorkloadState};
use tokio::time::Instant;

use super::RuntimeManager;
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_scheduler::Scheduled;

/// Completes when the tick at `next` is due; never without one.
pub(super) async fn tick_due(next: Option<Instant>) {
    match next {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl RuntimeManager {
    /// Stores new states and runs what their change made ready.
    // [impl->swdd~agent-handles-update-workload-state-requests~1]
    pub(super) async fn handle_workload_states(&mut self, states: &[WorkloadState]) {
        self.store.update_all(states);
        self.scheduler.observe(states);
        let out = self.scheduler.next_workload_operations(&self.store);
        self.apply(out).await;
    }

    /// Hands new operations to the scheduler and runs the ready ones.
    // [impl->swdd~agent-handles-new-workload-operations]
    pub(super) async fn schedule(&mut self, ops: Vec<WorkloadOperation>) {
        let out = self.scheduler.enqueue_filtered_workload_operations(ops, &self.store);
        self.apply(out).await;
    }

    /// Reports the scheduler's states and events, preempts its victims and
    /// runs its ready operations; then arms the tick if needed and
    /// publishes the quota use.
    pub(super) async fn apply(&mut self, out: Scheduled) {
        for state in out.report {
            self.reporter.report(&state.instance_name, state.execution_state).await;
        }
        for ev in out.events {
            self.reporter.event(&ev.instance_name, ev.kind, ev.reason);
        }
        for (name, state) in out.preempt {
            self.preempt(&name, state);
        }
        for op in out.ready {
            self.execute(op).await;
        }
        if self.next_tick.is_none() && self.scheduler.needs_tick() {
            self.next_tick = Some(Instant::now() + self.scheduler.settings().tick);
        }
        let used = self.scheduler.usage(&self.store);
        self.quota_used.send_if_modified(|u| std::mem::replace(u, used) != used);
    }

    /// A workload the server wants again as it is: its control loop takes
    /// the spec (a delete waiting for its dependents is called off). When
    /// nothing of it runs (its creates gave up, or its container was lost),
    /// that loop ends and a new create goes through the scheduler instead,
    /// so that priority, quota and isolation apply to it as to any start.
    pub(super) fn wanted_again(&mut self, spec: WorkloadSpec) -> Option<WorkloadOperation> {
        self.scheduler.cancel(spec.name());
        let nothing_runs = self.store.state_of_instance(&spec.instance_name).is_some_and(|s| {
            matches!(s.kind, StateKind::Pending(Pending::StartingFailed) | StateKind::Failed(Failed::Lost))
        });
        if nothing_runs {
            self.objects.remove(spec.name());
            return Some(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec)));
        }
        self.scheduler.started_outside(&spec);
        if let Some(object) = self.objects.get_mut(spec.name()) {
            object.update(Some(spec));
        }
        None
    }

    /// The scheduler's tick.
    pub(super) async fn handle_tick(&mut self) {
        let now = self.next_tick.take().unwrap_or_else(Instant::now);
        let out = self.scheduler.tick(&self.store, now);
        self.apply(out).await;
    }

    /// Stops a preempted workload: its control loop removes the container
    /// without applying the restart policy and reports `state`
    /// (`Pending(Preempted)`), then ends. The scheduler has queued the
    /// workload again; it gets a new control loop when it starts again.
    // [feature K4: preemption is not a failure; no restart, no retries used]
    fn preempt(&mut self, name: &str, state: ank_common::ExecutionState) {
        match self.objects.remove(name) {
            Some(object) => object.sender().preempt(state),
            None => tracing::warn!("cannot preempt workload '{name}': it has no control loop"),
        }
    }
}
