//! [`WorkloadControlLoop`]: one task per workload, owning the workload's
//! current instance and container. It executes Create / Resume / Update /
//! Delete against the runtime connector (one operation at a time, so a
//! workload never has two operations in flight) and turns the state
//! watcher's observations into reported execution states.
//!
//! In: `WorkloadCommand`s from the `RuntimeManager`.
//! Out: `WorkloadState`s via the `StateReporter`; `LoopNotice::Deleted` to
//! the `RuntimeManager`.
//!
//! Mechanism lives in the `handle_*` fns; the decisions (which state a
//! failure or an observation becomes, whether to listen at all) are the
//! small policy fns at the bottom, where retry and restart policies go.

use std::sync::Arc;

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::{LoopNotice, StateReporter, WorkloadCommand};
use crate::runtime_connectors::{
    CreateOptions, ListedWorkload, Observed, RuntimeConnector, RuntimeError, RuntimeRegistry, WorkloadId,
};

/// The container of the current instance.
#[derive(Debug, Clone)]
struct Container {
    id: WorkloadId,
    runtime: String,
    /// When the agent learned that the container exists.
    known_since: Instant,
    /// When the last event about the container arrived.
    last_event: Option<Instant>,
    /// Whether the container was seen running: later create/init events
    /// (the event stream lags behind) must not report Pending again.
    started: bool,
}

/// Everything a control loop needs from its surroundings.
#[derive(Clone)]
pub(crate) struct LoopContext {
    pub registry: Arc<RuntimeRegistry>,
    pub reporter: StateReporter,
    pub create_permits: Arc<Semaphore>,
    pub notices: mpsc::UnboundedSender<LoopNotice>,
}

/// The control loop of one workload.
pub(crate) struct WorkloadControlLoop {
    ctx: LoopContext,
    commands: mpsc::UnboundedReceiver<WorkloadCommand>,
    spec: Option<WorkloadSpec>,
    container: Option<Container>,
    /// Set once a delete was requested: observations are ignored from then on.
    deleting: bool,
}

impl WorkloadControlLoop {
    pub fn new(ctx: LoopContext, commands: mpsc::UnboundedReceiver<WorkloadCommand>) -> Self {
        Self { ctx, commands, spec: None, container: None, deleting: false }
    }

    /// Runs until the `RuntimeManager` drops the command sender.
    pub async fn run(mut self) {
        while let Some(cmd) = self.commands.recv().await {
            match cmd {
                WorkloadCommand::Create { spec, replace } => self.handle_create(*spec, replace).await,
                WorkloadCommand::Resume { spec, workload_id, state } => {
                    self.handle_resume(*spec, workload_id, state).await
                }
                WorkloadCommand::Update(spec) => self.handle_update(*spec).await,
                WorkloadCommand::Delete => self.handle_delete().await,
                WorkloadCommand::Observed { instance_name, workload_id, observed } => {
                    self.handle_observed(&instance_name, &workload_id, observed).await
                }
                WorkloadCommand::Snapshot { runtime, taken_at, workloads } => {
                    self.handle_snapshot(&runtime, taken_at, &workloads).await
                }
            }
        }
    }

    async fn report(&self, instance: &WorkloadInstanceName, state: ExecutionState) {
        self.ctx.reporter.report(instance, state).await;
    }

    fn connector(&self, runtime: &str) -> Option<Arc<dyn RuntimeConnector>> {
        self.ctx.registry.get(runtime)
    }

    // [impl->swdd~agent-workload-control-loop-executes-create~3]
    async fn handle_create(&mut self, spec: WorkloadSpec, replace: Option<ListedWorkload>) {
        if let Some(old) = replace {
            self.remove_silently(&spec.workload.runtime, &old.workload_id).await;
        }
        self.deleting = false;
        self.container = None;
        let instance = spec.instance_name.clone();
        let runtime = spec.workload.runtime.clone();
        self.spec = Some(spec);
        // [impl->swdd~agent-skips-unknown-runtime~1]
        let Some(connector) = self.connector(&runtime) else {
            let info = format!("runtime '{runtime}' is not supported by this agent");
            tracing::warn!("workload '{instance}': {info}");
            return self
                .report(&instance, ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info))
                .await;
        };
        self.report(
            &instance,
            ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Triggered at runtime."),
        )
        .await;
        let result = {
            // Bounds how many creates run at once; a closed semaphore only
            // happens at shutdown, when creating unbounded does no harm.
            let _permit = self.ctx.create_permits.acquire().await.ok();
            let Some(spec) = &self.spec else { return };
            connector.create(spec, &CreateOptions::default()).await
        };
        match result {
            Ok(id) => {
                tracing::info!("workload '{instance}' created as container '{id}'");
                let started = connector.create_returns_running();
                self.container =
                    Some(Container { id, runtime, known_since: Instant::now(), last_event: None, started });
                if started {
                    self.report(&instance, ExecutionState::running()).await;
                }
            }
            Err(e) => {
                tracing::warn!("creating workload '{instance}' failed: {e}");
                self.report(&instance, create_failure_state(&e)).await;
            }
        }
    }

    // [impl->swdd~agent-workload-control-loop-executes-resume~1]
    async fn handle_resume(&mut self, spec: WorkloadSpec, id: WorkloadId, state: ExecutionState) {
        tracing::info!("resuming workload '{}' in container '{id}'", spec.instance_name);
        let runtime = spec.workload.runtime.clone();
        self.deleting = false;
        self.container = Some(Container { id, runtime, known_since: Instant::now(), last_event: None, started: false });
        self.report(&spec.instance_name, state).await;
        self.spec = Some(spec);
    }

    // [impl->swdd~agent-workload-control-loop-executes-update~2]
    async fn handle_update(&mut self, spec: WorkloadSpec) {
        let unchanged = self.spec.as_ref().is_some_and(|s| s == &spec) && !self.deleting && self.container.is_some();
        if unchanged {
            tracing::debug!("workload '{}' is unchanged", spec.instance_name);
            return;
        }
        self.deleting = true;
        self.delete_current().await;
        self.handle_create(spec, None).await;
    }

    // [impl->swdd~agent-workload-control-loop-executes-delete~2]
    async fn handle_delete(&mut self) {
        self.deleting = true;
        let Some(instance_name) = self.delete_current().await else { return };
        // Only a finished delete ends the loop; after DeleteFailed a later
        // delete may try again.
        if self.spec.is_none() {
            let _ = self.ctx.notices.send(LoopNotice::Deleted { instance_name });
        }
    }

    /// Deletes the current instance, reporting Stopping(RequestedAtRuntime)
    /// and then Removed or Stopping(DeleteFailed). Returns its name.
    async fn delete_current(&mut self) -> Option<WorkloadInstanceName> {
        let instance = self.spec.as_ref()?.instance_name.clone();
        self.report(&instance, ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime))).await;
        let Some(container) = self.container.take() else {
            self.spec = None;
            self.report(&instance, ExecutionState::removed()).await;
            return Some(instance);
        };
        let result = match self.connector(&container.runtime) {
            Some(c) => c.delete(&container.id).await,
            None => {
                Err(RuntimeError::Delete(format!("runtime '{}' is not supported by this agent", container.runtime)))
            }
        };
        match result {
            Ok(()) => {
                self.spec = None;
                self.report(&instance, ExecutionState::removed()).await;
            }
            Err(e) => {
                tracing::warn!("deleting workload '{instance}' failed: {e}");
                self.report(
                    &instance,
                    ExecutionState::with_info(StateKind::Stopping(Stopping::DeleteFailed), e.to_string()),
                )
                .await;
                // Keep the container so a later delete can try again.
                self.container = Some(container);
            }
        }
        Some(instance)
    }

    /// Removes a stale container without reporting states for it.
    // [impl->swdd~agent-delete-old-workload-without-sending-workload-states~1]
    async fn remove_silently(&self, runtime: &str, id: &WorkloadId) {
        if let Some(c) = self.connector(runtime)
            && let Err(e) = c.delete(id).await
        {
            tracing::warn!("removing stale container '{id}' failed: {e}");
        }
    }

    async fn handle_observed(&mut self, instance: &WorkloadInstanceName, id: &WorkloadId, observed: Observed) {
        if !self.is_current(instance, id) {
            return;
        }
        if let Some(c) = self.container.as_mut() {
            c.last_event = Some(Instant::now());
        }
        let Some(state) = observed_state(observed) else { return };
        let Some(container) = self.container.as_mut() else { return };
        match state.kind {
            StateKind::Pending(Pending::Starting) if container.started => return,
            StateKind::Running => container.started = true,
            _ => {}
        }
        if matches!(state.kind, StateKind::Failed(Failed::Lost)) {
            self.container = None;
        }
        self.report(instance, state).await;
    }

    /// Whether an observation concerns the current container and is wanted.
    // [impl->swdd~allowed-workload-states~2]
    fn is_current(&self, instance: &WorkloadInstanceName, id: &WorkloadId) -> bool {
        let same_instance = self.spec.as_ref().is_some_and(|s| &s.instance_name == instance);
        let same_container = self.container.as_ref().is_some_and(|c| &c.id == id);
        same_instance && same_container && !self.deleting
    }

    async fn handle_snapshot(&mut self, runtime: &str, taken_at: Instant, workloads: &[ListedWorkload]) {
        let (Some(spec), Some(container)) = (&self.spec, &self.container) else { return };
        if self.deleting || container.runtime != runtime || !snapshot_is_newer(container, taken_at) {
            return;
        }
        let instance = spec.instance_name.clone();
        let state = match workloads.iter().find(|w| w.workload_id == container.id) {
            Some(listed) => listed.state.clone(),
            None => {
                self.container = None;
                lost_state()
            }
        };
        self.report(&instance, state).await;
    }
}

// ---- policy ----

/// The state a failed create leaves the workload in.
fn create_failure_state(e: &RuntimeError) -> ExecutionState {
    ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), e.to_string())
}

/// The state to report for an observation of the current container.
fn observed_state(observed: Observed) -> Option<ExecutionState> {
    match observed {
        Observed::State(s) => Some(s),
        Observed::Gone => Some(lost_state()),
    }
}

fn lost_state() -> ExecutionState {
    ExecutionState::with_info(StateKind::Failed(Failed::Lost), "container disappeared")
}

/// A reconcile may only correct the state when it started after the
/// container was known and after the last event about it; otherwise it may
/// be older than what the event stream already said.
fn snapshot_is_newer(container: &Container, taken_at: Instant) -> bool {
    taken_at >= container.known_since && container.last_event.is_none_or(|t| t < taken_at)
}
