//! The `RuntimeManager`'s side of the WorkloadScheduler: handing it new
//! operations and states, carrying out what it decided (reports and events
//! through the outbox, operations, preemptions), its tick (armed only while some workload is quota-blocked, postponed or
//! preempted) and publishing what the workloads use of the agent's quota
//! for the server link.

use ank_common::execution_state::{Failed, Pending};
use ank_common::quota::QuotaUsage;
use ank_common::workload::WorkloadSpec;
use ank_common::{StateKind, WorkloadState};
use tokio::sync::watch;
use tokio::time::Instant;

use super::RuntimeManager;
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_scheduler::{Scheduled, WorkloadScheduler};

/// The scheduler and what goes with it.
pub(super) struct Scheduling {
    pub scheduler: WorkloadScheduler,
    /// When the scheduler's next tick is due, while it needs one.
    pub next_tick: Option<Instant>,
    /// Where what the workloads use of the agent's quota is published.
    pub quota_used: watch::Sender<QuotaUsage>,
}

/// Completes when the tick at `next` is due; never without one.
pub(super) async fn tick_due(next: Option<Instant>) {
    match next {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

impl RuntimeManager {
    /// Runs what new states (stored already) made ready.
    // [impl->swdd~agent-handles-update-workload-state-requests~1]
    pub(super) async fn observe(&mut self, states: &[WorkloadState]) {
        self.scheduling.scheduler.observe(states);
        let out = self.scheduling.scheduler.next_workload_operations(self.outbox.table.states());
        self.apply(out).await;
    }

    /// Hands new operations to the scheduler and runs the ready ones.
    // [impl->swdd~agent-handles-new-workload-operations]
    pub(super) async fn schedule(&mut self, ops: Vec<WorkloadOperation>) {
        let out = self.scheduling.scheduler.enqueue_filtered_workload_operations(ops, self.outbox.table.states());
        self.apply(out).await;
    }

    /// Reports the scheduler's states and events, preempts its victims and
    /// runs its ready operations; then arms the tick if needed and
    /// publishes the quota use.
    pub(super) async fn apply(&mut self, out: Scheduled) {
        for state in out.report {
            self.outbox.state(&state.instance_name, state.execution_state);
        }
        for ev in out.events {
            self.outbox.event(ev);
        }
        for (name, state) in out.preempt {
            self.preempt(&name, state);
        }
        for op in out.ready {
            self.execute(op).await;
        }
        let s = &mut self.scheduling;
        if s.next_tick.is_none() && s.scheduler.needs_tick() {
            s.next_tick = Some(Instant::now() + s.scheduler.settings().tick);
        }
        let used = s.scheduler.usage(self.outbox.table.states());
        s.quota_used.send_if_modified(|u| std::mem::replace(u, used) != used);
    }

    /// A workload the server wants again as it is: its control loop takes
    /// the spec (a delete waiting for its dependents is called off). When
    /// nothing of it runs (its creates gave up, or its container was lost),
    /// that loop ends and a new create goes through the scheduler instead,
    /// so that priority, quota and isolation apply to it as to any start.
    ///
    /// `resync`: the server's TTL resync sent it, which is no rerun. Creates
    /// that gave up stay given up (the resync may have crossed the report
    /// that they did); the loop reports that again.
    pub(super) fn wanted_again(&mut self, spec: WorkloadSpec, resync: bool) -> Option<WorkloadOperation> {
        let kind = self.outbox.table.states().state_of_instance(&spec.instance_name).map(|s| s.kind);
        let gave_up = kind == Some(StateKind::Pending(Pending::StartingFailed));
        if resync
            && gave_up
            && let Some(object) = self.objects.get_mut(spec.name())
        {
            object.resync(spec);
            return None;
        }
        self.scheduling.scheduler.cancel(spec.name());
        if gave_up || kind == Some(StateKind::Failed(Failed::Lost)) {
            self.objects.remove(spec.name());
            return Some(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec)));
        }
        self.scheduling.scheduler.started_outside(&spec);
        if let Some(object) = self.objects.get_mut(spec.name()) {
            if resync {
                object.resync(spec);
            } else {
                object.update(Some(spec));
            }
        }
        None
    }

    /// The scheduler's tick.
    pub(super) async fn handle_tick(&mut self) {
        let now = self.scheduling.next_tick.take().unwrap_or_else(Instant::now);
        let out = self.scheduling.scheduler.tick(self.outbox.table.states(), now);
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
