//! Per-workload vocabulary: the commands a [`control_loop::WorkloadControlLoop`]
//! takes (through its typed [`WorkloadCommandSender`]) and the
//! [`StateReporter`] it reports states, events and finished deletes with
//! (to the `RuntimeManager`).

pub mod control_loop;
pub mod crash_loop;
pub mod finished_store;
pub mod object;
pub mod policy;
pub mod probe_runner;
#[cfg(test)]
mod probe_runner_tests;
pub mod retention;

use std::sync::Arc;

use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, WorkloadInstanceName, WorkloadState};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::probes::Readiness;
use crate::runtime_connectors::{ListedWorkload, Observed, WorkloadId};
use crate::workload_operation::Earlier;

/// What a control loop is asked to do.
#[derive(Debug)]
pub(crate) enum WorkloadCommand {
    /// Create the workload; first remove a stale workload found at startup
    /// (without reporting its states), or start the unchanged one found
    /// there again instead of creating it.
    Create { spec: Box<WorkloadSpec>, earlier: Option<Earlier> },
    /// Take over a running container found at startup.
    Resume { spec: Box<WorkloadSpec>, workload_id: WorkloadId, state: ExecutionState },
    /// Take over a workload that ended in `state` and was reaped before the
    /// agent restarted: run nothing, report `state`.
    Finished { spec: Box<WorkloadSpec>, state: ExecutionState },
    /// Replace the current instance by a new one (delete + create); `None`
    /// only deletes (the create waits for its dependencies).
    Update(Option<Box<WorkloadSpec>>),
    /// The server's TTL resync sent the spec again: an update, except that
    /// creates which gave up stay given up (it is no rerun).
    Resync(Box<WorkloadSpec>),
    /// Delete the current instance.
    Delete,
    /// The state watcher saw a change of some container of this workload.
    Observed { instance_name: WorkloadInstanceName, workload_id: WorkloadId, observed: Observed },
    /// Some workload with this id changed state (the loop checks whether it is its own).
    ObservedById { workload_id: WorkloadId, observed: Observed },
    /// A reconcile listed all containers of `runtime`.
    Snapshot { runtime: String, taken_at: Instant, workloads: Arc<Vec<ListedWorkload>> },
    /// The scheduler preempted the workload: remove its container without
    /// applying the restart policy and report `state` (`Pending(Preempted)`).
    Preempt { state: ExecutionState },
    /// The container `workload_id` failed its liveness (or startup) probe
    /// (from the loop's own probe runner): a failure under the restart policy.
    LivenessFailed { workload_id: WorkloadId, reason: String },
}

/// Typed sender to one workload's control loop.
#[derive(Debug, Clone)]
pub(crate) struct WorkloadCommandSender(mpsc::UnboundedSender<WorkloadCommand>);

impl WorkloadCommandSender {
    pub fn channel() -> (Self, mpsc::UnboundedReceiver<WorkloadCommand>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    fn send(&self, cmd: WorkloadCommand) {
        if self.0.send(cmd).is_err() {
            tracing::debug!("control loop already ended; command dropped");
        }
    }

    pub fn create(&self, spec: WorkloadSpec, earlier: Option<Earlier>) {
        self.send(WorkloadCommand::Create { spec: Box::new(spec), earlier });
    }

    pub fn resume(&self, spec: WorkloadSpec, workload_id: WorkloadId, state: ExecutionState) {
        self.send(WorkloadCommand::Resume { spec: Box::new(spec), workload_id, state });
    }

    pub fn finished(&self, spec: WorkloadSpec, state: ExecutionState) {
        self.send(WorkloadCommand::Finished { spec: Box::new(spec), state });
    }

    pub fn update(&self, spec: Option<WorkloadSpec>) {
        self.send(WorkloadCommand::Update(spec.map(Box::new)));
    }

    pub fn resync(&self, spec: WorkloadSpec) {
        self.send(WorkloadCommand::Resync(Box::new(spec)));
    }

    pub fn delete(&self) {
        self.send(WorkloadCommand::Delete);
    }

    pub fn observed(&self, instance_name: WorkloadInstanceName, workload_id: WorkloadId, observed: Observed) {
        self.send(WorkloadCommand::Observed { instance_name, workload_id, observed });
    }

    pub fn observed_by_id(&self, workload_id: WorkloadId, observed: Observed) {
        self.send(WorkloadCommand::ObservedById { workload_id, observed });
    }

    pub fn snapshot(&self, runtime: String, taken_at: Instant, workloads: Arc<Vec<ListedWorkload>>) {
        self.send(WorkloadCommand::Snapshot { runtime, taken_at, workloads });
    }

    pub fn preempt(&self, state: ExecutionState) {
        self.send(WorkloadCommand::Preempt { state });
    }

    pub fn liveness_failed(&self, workload_id: WorkloadId, reason: String) {
        self.send(WorkloadCommand::LivenessFailed { workload_id, reason });
    }
}

/// An event of one of this agent's workloads (see [`StateReporter::event`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventReport {
    pub instance_name: WorkloadInstanceName,
    pub kind: EventKind,
    pub reason: String,
}

/// What the control loops (and the scheduler) tell the `RuntimeManager`,
/// in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoopReport {
    /// A new execution state of an instance.
    State(WorkloadState),
    /// Something happened to an instance (see [`StateReporter::event`]).
    Event(EventReport),
    /// The explicit delete of the instance finished (successfully or not).
    Deleted(WorkloadInstanceName),
    /// The readiness of a running instance changed (see
    /// [`StateReporter::readiness`]).
    Readiness(WorkloadInstanceName, Option<Readiness>),
}

/// Reports execution states, events and finished deletes of this agent's
/// workloads to the `RuntimeManager`, through one bounded channel: a loop
/// waits while the manager is behind. The manager itself never waits for a
/// loop (its commands to them are unbounded), so this cannot deadlock.
#[derive(Debug, Clone)]
pub struct StateReporter(mpsc::Sender<LoopReport>);

impl StateReporter {
    /// A reporter and the receiving end for the `RuntimeManager`.
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<LoopReport>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self(tx), rx)
    }

    async fn send(&self, report: LoopReport) {
        if self.0.send(report).await.is_err() {
            tracing::debug!("runtime manager gone; report dropped");
        }
    }

    /// Reports that `kind` happened to `instance_name` for `reason`; it is
    /// merged into the workload's events (same kind and reason: the count
    /// goes up) and the entry passed to the server.
    // [feature K8: agents report events, merged by (kind, reason)]
    pub async fn event(&self, instance_name: &WorkloadInstanceName, kind: EventKind, reason: impl Into<String>) {
        let report = EventReport { instance_name: instance_name.clone(), kind, reason: reason.into() };
        self.send(LoopReport::Event(report)).await
    }

    /// Reports `state` of `instance_name`.
    // [impl->swdd~workload-control-loop-sends-workload-states~2]
    pub async fn report(&self, instance_name: &WorkloadInstanceName, state: ExecutionState) {
        tracing::debug!("workload '{instance_name}' is {state}");
        self.send(LoopReport::State(WorkloadState::new(instance_name.clone(), state))).await
    }

    /// Reports the readiness of `instance_name` by its readiness probe:
    /// `Some` makes the Available condition of the instance follow it
    /// while it runs, `None` (no readiness probe) leaves it to the state.
    pub async fn readiness(&self, instance_name: &WorkloadInstanceName, readiness: Option<Readiness>) {
        tracing::debug!("workload '{instance_name}' readiness: {readiness:?}");
        self.send(LoopReport::Readiness(instance_name.clone(), readiness)).await
    }

    /// Reports that the explicit delete of `instance_name` finished.
    pub async fn deleted(&self, instance_name: WorkloadInstanceName) {
        self.send(LoopReport::Deleted(instance_name)).await
    }
}
