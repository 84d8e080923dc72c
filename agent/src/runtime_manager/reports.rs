//! The `RuntimeManager`'s reporting: what the control loops report (states,
//! events, finished deletes) and what the manager and its scheduler decide
//! themselves goes through the [`InstanceTable`] (hysteresis, generation,
//! conditions, events) to the server, in batches; the workload counts are
//! published for the agent's health; and a passed state lets the scheduler
//! start what waited for it.
//!
//! The manager's own reports are queued and taken in order after the
//! message at hand, as the loops' are: one path for every state.

use ank_common::daemon::clock;
use ank_common::messages::ToServer;
use ank_common::{ExecutionState, WorkloadInstanceName, WorkloadState};
use tokio::sync::watch;

use super::RuntimeManager;
use super::instances::{InstanceTable, MAX_BATCH, WorkloadCounts};
use crate::server_link::ServerLinkHandle;
use crate::workload::{EventReport, LoopReport};

/// Where the states of this agent's workloads go: the table that stamps
/// them, the server, and the counts for the agent's health.
pub(super) struct Outbox {
    pub table: InstanceTable,
    server: ServerLinkHandle,
    counts: watch::Sender<WorkloadCounts>,
    /// Reports of the manager itself, taken after the message at hand.
    queued: Vec<LoopReport>,
}

impl Outbox {
    pub fn new(agent_name: &str, server: ServerLinkHandle) -> Self {
        let (counts, _) = watch::channel(WorkloadCounts::default());
        Self { table: InstanceTable::new(agent_name), server, counts, queued: Vec::new() }
    }

    /// Follows the workload counts.
    pub fn counts(&self) -> watch::Receiver<WorkloadCounts> {
        self.counts.subscribe()
    }

    /// Queues a state the manager itself decided.
    pub fn state(&mut self, instance_name: &WorkloadInstanceName, state: ExecutionState) {
        tracing::debug!("workload '{instance_name}' is {state}");
        self.queued.push(LoopReport::State(WorkloadState::new(instance_name.clone(), state)));
    }

    /// Queues an event the manager's scheduler decided.
    pub fn event(&mut self, event: EventReport) {
        self.queued.push(LoopReport::Event(event));
    }

    /// Sends reports to the server, in batches.
    pub fn send(&self, reports: &[WorkloadState]) {
        for chunk in reports.chunks(MAX_BATCH) {
            self.server.send(ToServer::UpdateWorkloadState(chunk.to_vec()));
        }
    }

    /// Sends the current states of `instances` (with their unsent events).
    pub fn send_current(
        &mut self,
        instances: Vec<WorkloadInstanceName>,
        health: &ank_common::conditions::RuntimeHealth,
    ) {
        let reports = self.table.reports(instances, health);
        self.send(&reports);
    }

    fn publish_counts(&self) {
        let now = self.table.counts();
        self.counts.send_if_modified(|c| std::mem::replace(c, now) != now);
    }
}

impl RuntimeManager {
    /// A loop's report and those queued behind it, up to a batch.
    pub(super) async fn handle_report(&mut self, first: LoopReport) {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match self.inbox.reports.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        self.take_reports(batch).await;
        self.take_queued().await;
    }

    /// Takes the manager's own reports until none are left (a report can
    /// make the scheduler decide more).
    pub(super) async fn take_queued(&mut self) {
        while !self.outbox.queued.is_empty() {
            let batch = std::mem::take(&mut self.outbox.queued);
            self.take_reports(batch).await;
        }
    }

    /// Passes reports through the table to the server; the states that
    /// passed go to the scheduler.
    // [impl->swdd~agent-manager-receives-workload-states-of-its-workloads~1]
    // [impl->swdd~agent-sends-workload-states-of-its-workloads-to-server~2]
    async fn take_reports(&mut self, batch: Vec<LoopReport>) {
        let health = self.runtimes.health();
        let at = clock::now_rfc3339();
        let (mut passed, mut touched) = (Vec::new(), Vec::new());
        for report in batch {
            match report {
                LoopReport::State(state) => {
                    let state = self.waiting_instead_of_removed(state);
                    passed.extend(self.outbox.table.accept(state, &health))
                }
                LoopReport::Event(event) => {
                    if let Some(n) = self.outbox.table.event(event, &at)
                        && !touched.contains(&n)
                    {
                        touched.push(n);
                    }
                }
                LoopReport::Deleted(instance_name) => self.loop_deleted(&instance_name),
                LoopReport::Readiness(instance_name, readiness) => {
                    if let Some(n) = self.outbox.table.readiness(&instance_name, readiness)
                        && !touched.contains(&n)
                    {
                        touched.push(n);
                    }
                }
            }
        }
        if !passed.is_empty() {
            self.outbox.publish_counts();
            self.outbox.send(&passed);
        }
        // Events (and readiness) whose instance's state went out above went along with it.
        touched.retain(|n| self.outbox.table.has_unsent(n));
        if !touched.is_empty() {
            self.outbox.send_current(touched, &health);
        }
        if !passed.is_empty() {
            self.observe(&passed).await;
        }
    }

    /// An update that changed only what the instance name does not cover
    /// (its dependencies, say) removed the old container while the new
    /// instance, of the same name, waits in the queue: its removal shows
    /// as that wait, not as a workload that is gone.
    // [impl->swdd~agent-handles-update-with-fulfilled-delete~1]
    fn waiting_instead_of_removed(&self, state: WorkloadState) -> WorkloadState {
        if state.execution_state.kind != ank_common::StateKind::Removed {
            return state;
        }
        match self.scheduling.scheduler.queued_create_state(&state.instance_name) {
            Some(waiting) => {
                tracing::debug!("workload '{}' removed; its update waits: {waiting}", state.instance_name);
                WorkloadState::new(state.instance_name, waiting)
            }
            None => state,
        }
    }

    /// The explicit delete of `instance_name` finished: its object goes.
    fn loop_deleted(&mut self, instance_name: &WorkloadInstanceName) {
        let name = &instance_name.workload_name;
        let done = self.objects.get(name).is_some_and(|o| o.deleting && &o.instance_name == instance_name);
        if done {
            self.objects.remove(name);
        }
    }
}
