//! Runtime connectors: the [`RuntimeConnector`] trait every container runtime
//! implements, the [`RuntimeRegistry`] (runtime name -> connector) and the
//! [`RuntimeEvent`]s a connector's state watcher pushes into the
//! [`RuntimeEventSender`] channel (consumed by the `RuntimeManager`).
//!
//! Out: `RuntimeEvent`s (state changes and reconcile snapshots).

pub mod podman;

#[cfg(any(test, feature = "test-fakes"))]
pub mod fake;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use ank_common::ExecutionState;
use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The runtime's id of a container (podman: the 64-hex container id).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerId(pub String);

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a runtime operation failed; the variants decide the reported state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The workload's runtimeConfig cannot be used (never worth a retry).
    #[error("{0}")]
    InvalidConfig(String),
    /// The runtime refused to create the workload (e.g. podman's stderr).
    #[error("{0}")]
    Create(String),
    /// The runtime failed to delete the workload.
    #[error("{0}")]
    Delete(String),
    /// Listing the runtime's containers failed.
    #[error("{0}")]
    List(String),
    /// The runtime binary could not be started at all.
    #[error("{0}")]
    Unavailable(String),
}

/// What a state watcher saw for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The container is in this state.
    State(ExecutionState),
    /// The container is gone (removed by someone).
    Gone,
}

/// One container of this agent as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedWorkload {
    pub instance_name: WorkloadInstanceName,
    pub container_id: ContainerId,
    pub state: ExecutionState,
}

/// A state change or a full listing, pushed by a connector's watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// A container changed state.
    Changed { instance_name: WorkloadInstanceName, container_id: ContainerId, observed: Observed },
    /// All containers of this agent in runtime `runtime`, as listed by a
    /// reconcile that started at `taken_at`.
    Snapshot { runtime: String, taken_at: Instant, workloads: Vec<ListedWorkload> },
}

/// Where watchers send their [`RuntimeEvent`]s.
pub type RuntimeEventSender = mpsc::Sender<RuntimeEvent>;

/// The operations the agent needs from a container runtime.
// [impl->swdd~functions-required-by-runtime-connector~1]
#[async_trait]
pub trait RuntimeConnector: Send + Sync {
    /// The runtime's name as written in a workload's `runtime` field.
    fn name(&self) -> &str;

    /// Whether a successful [`create`](Self::create) means the container is
    /// already running, so Running(Ok) can be reported at once instead of
    /// when the (slower) event stream says so.
    fn create_returns_running(&self) -> bool {
        false
    }

    /// Creates and starts the workload; returns its container id.
    async fn create(&self, spec: &WorkloadSpec) -> Result<ContainerId, RuntimeError>;

    /// Stops and removes a container; a container that is already gone is a success.
    async fn delete(&self, container_id: &ContainerId) -> Result<(), RuntimeError>;

    /// All containers of `agent` with their instance names and states.
    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError>;

    /// Starts watching the states of `agent`'s containers; returns once the
    /// watcher runs, so no later change is missed. Events go to `sink` until
    /// `shutdown` is cancelled.
    async fn start_state_watcher(
        &self,
        agent: &str,
        sink: RuntimeEventSender,
        shutdown: CancellationToken,
    ) -> Result<(), RuntimeError>;
}

/// Runtime name -> connector.
#[derive(Clone, Default)]
pub struct RuntimeRegistry {
    connectors: BTreeMap<String, Arc<dyn RuntimeConnector>>,
}

// [impl->swdd~agent-supports-multiple-runtime-connectors~1]
impl RuntimeRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The registry of a production agent: `podman` via the podman CLI on PATH.
    // [impl->swdd~agent-supports-podman~2]
    pub fn with_podman() -> Self {
        let mut r = Self::new();
        r.register(Arc::new(podman::PodmanRuntime::new(podman::PodmanCli::default())));
        r
    }

    /// Adds (or replaces) a connector under its name.
    pub fn register(&mut self, connector: Arc<dyn RuntimeConnector>) {
        self.connectors.insert(connector.name().to_owned(), connector);
    }

    /// The connector for `runtime`, if this agent supports it.
    pub fn get(&self, runtime: &str) -> Option<Arc<dyn RuntimeConnector>> {
        self.connectors.get(runtime).cloned()
    }

    /// All connectors.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn RuntimeConnector>> {
        self.connectors.values()
    }
}

impl fmt::Debug for RuntimeRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.connectors.keys()).finish()
    }
}
