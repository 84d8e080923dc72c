//! Runtime connectors: the [`RuntimeConnector`] trait every container runtime
//! implements, the [`RuntimeRegistry`] (runtime name -> connector) and the
//! [`RuntimeEvent`]s a connector's state watcher pushes into the
//! [`RuntimeEventSender`] channel (consumed by the `RuntimeManager`).
//!
//! Out: `RuntimeEvent`s (state changes and reconcile snapshots).

pub mod containerd;
mod error;
pub(crate) mod inotify;
pub mod podman;
pub mod podman_kube;
pub mod polling_checker;
pub mod probe_exec;
pub mod process_watch;
pub mod runtime_config;

pub use error::{RuntimeError, RuntimeFailure};

#[cfg(any(test, feature = "test-fakes"))]
pub mod fake;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use ank_common::ExecutionState;
use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The runtime's id of a workload, opaque to everything but its connector
/// (podman: the 64-hex container id; podman-kube: a JSON document naming the
/// pods, the manifest and the down options).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkloadId(pub String);

/// A host path bind-mounted read-only into the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMount {
    /// The file on the host (under the agent's run folder).
    pub host_path: PathBuf,
    /// Absolute path inside the container.
    pub mount_point: String,
}

/// What the `RuntimeFacade` prepared on the host for one create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// The workload's control interface folder (holding the `input` and
    /// `output` FIFOs), to mount at `/run/ankaios/control_interface`.
    pub control_interface: Option<PathBuf>,
    /// The workload's files.
    pub files: Vec<FileMount>,
}

/// Options of a log request, as in the Ankaios `LogsRequest`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep streaming new lines.
    pub follow: bool,
    /// Only the last N lines (`None`: all).
    pub tail: Option<i32>,
    /// Only lines since this timestamp or duration (podman syntax).
    pub since: Option<String>,
    /// Only lines until this timestamp or duration (podman syntax).
    pub until: Option<String>,
}

/// Lines of a workload's log; ends when the runtime's log stream ends.
pub type LogLines = mpsc::Receiver<String>;

/// A running per-workload state checker; stops when dropped.
// [impl->swdd~agent-general-state-checker-interface~1]
#[derive(Debug)]
pub struct StateChecker {
    stop: CancellationToken,
}

impl StateChecker {
    /// A checker that runs until `stop` is cancelled (or the checker dropped).
    pub fn new(stop: CancellationToken) -> Self {
        Self { stop }
    }

    /// Stops the checker.
    pub fn stop(&self) {
        self.stop.cancel();
    }
}

impl Drop for StateChecker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a state watcher saw for one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The container is in this state.
    State(ExecutionState),
    /// The container is gone (removed by someone).
    Gone,
}

impl Observed {
    /// The state a workload in this observation is reported in.
    pub fn into_state(self) -> ExecutionState {
        match self {
            Observed::State(s) => s,
            Observed::Gone => lost_state(),
        }
    }
}

/// A workload whose container disappeared behind the agent's back.
pub fn lost_state() -> ExecutionState {
    use ank_common::execution_state::Failed;
    ExecutionState::with_info(ank_common::StateKind::Failed(Failed::Lost), "container disappeared")
}

/// One container of this agent as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedWorkload {
    pub instance_name: WorkloadInstanceName,
    pub workload_id: WorkloadId,
    pub state: ExecutionState,
}

/// A state change or a full listing, pushed by a connector's watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// A container changed state.
    Changed { instance_name: WorkloadInstanceName, workload_id: WorkloadId, observed: Observed },
    /// A workload known only by its id changed state (e.g. an exit seen
    /// before the event stream names the workload).
    ChangedById { workload_id: WorkloadId, observed: Observed },
    /// All containers of this agent in runtime `runtime`, as listed by a
    /// reconcile that started at `taken_at`.
    Snapshot { runtime: String, taken_at: Instant, workloads: Vec<ListedWorkload> },
    /// Whether runtime `runtime` can be reached; sent when that changes.
    Health { runtime: String, health: ank_common::conditions::RuntimeHealth },
}

/// Where watchers send their [`RuntimeEvent`]s.
pub type RuntimeEventSender = mpsc::Sender<RuntimeEvent>;

/// The operations the agent needs from a container runtime.
// [impl->swdd~functions-required-by-runtime-connector~1]
#[async_trait]
pub trait RuntimeConnector: Send + Sync {
    /// The runtime's name as written in a workload's `runtime` field.
    fn name(&self) -> &str;

    /// The memory `spec` declares, in bytes, which the agent's `max_memory`
    /// quota counts (feature K2); 0 when it declares none. Every connector
    /// says how its workloads declare memory: there is no default that
    /// would silently switch the quota off for a new runtime.
    fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError>;

    /// Whether a successful [`create`](Self::create) means the container is
    /// already running, so Running(Ok) can be reported at once instead of
    /// when the (slower) event stream says so.
    fn create_returns_running(&self) -> bool {
        false
    }

    /// Why this runtime cannot mount workload files, if it cannot: such a
    /// workload fails before any of its files are written (as in Ankaios).
    fn files_unsupported(&self) -> Option<&'static str> {
        None
    }

    /// Creates and starts the workload with the host resources of `options`;
    /// returns its id.
    async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError>;

    /// Whether [`start`](Self::start) can run an exited workload again in
    /// place; without it the agent removes the workload and creates it anew.
    fn supports_start(&self) -> bool {
        false
    }

    /// Starts the existing, exited workload `workload_id` of `spec` again:
    /// the same container, whose logs are kept (`podman start`). Ankaios
    /// does so for an unchanged workload that succeeded, at the agent's
    /// start and when its restart policy restarts it.
    async fn start(&self, spec: &WorkloadSpec, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        let _ = (spec, workload_id);
        Err(RuntimeError::create(format!("runtime '{}' cannot start an existing workload again", self.name())))
    }

    /// The id of the workload of `instance`, if it exists.
    async fn workload_id(&self, instance: &WorkloadInstanceName) -> Result<Option<WorkloadId>, RuntimeError>;

    /// Stops and removes a workload; one that is already gone is a success.
    async fn delete(&self, workload_id: &WorkloadId) -> Result<(), RuntimeError>;

    /// What runs the `exec`, `httpGet` and `tcpSocket` probes of this
    /// runtime's workloads; `None`: it cannot (each try fails).
    fn probe_executor(&self) -> Option<Arc<dyn crate::runtime_connectors::probe_exec::ProbeExecutor>> {
        None
    }

    /// Starts a per-workload state checker that sends `RuntimeEvent::Changed`
    /// for `instance` to `sink`. Connectors whose agent-wide watcher (see
    /// [`start_state_watcher`](Self::start_state_watcher)) already covers the
    /// workload return `None`.
    fn start_state_checker(
        &self,
        _instance: &WorkloadInstanceName,
        _workload_id: &WorkloadId,
        _sink: RuntimeEventSender,
    ) -> Option<StateChecker> {
        None
    }

    /// Streams the workload's log lines.
    async fn logs(&self, _workload_id: &WorkloadId, _options: &LogOptions) -> Result<LogLines, RuntimeError> {
        Err(RuntimeError::unavailable(format!("runtime '{}' does not provide logs", self.name())))
    }

    /// All containers of `agent` with their instance names and states.
    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError>;

    /// [`list_workloads`](Self::list_workloads) for the listing of the
    /// agent's start, right after [`start_state_watcher`](Self::start_state_watcher):
    /// it may come from a listing taken at any time since the watcher
    /// started (one the watcher needed itself, say), because every change
    /// after that arrives as an event.
    async fn list_workloads_at_start(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        self.list_workloads(agent).await
    }

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

/// None of the runtimes the agent was told to use is one it has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("No valid runtimes configured. Supported runtimes: {supported:?}")]
pub struct NoValidRuntime {
    pub supported: Vec<String>,
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
        Self::with_podman_runtime(podman::PodmanRuntime::new(podman::PodmanCli::default()))
    }

    /// The same with `podman` as the podman runtime (podman-kube uses the
    /// podman CLI on PATH).
    pub fn with_podman_runtime(podman: podman::PodmanRuntime) -> Self {
        let mut r = Self::new();
        r.register(Arc::new(podman));
        // [impl->swdd~agent-supports-podman-kube-runtime~1]
        r.register(Arc::new(podman_kube::PodmanKubeRuntime::new(podman::PodmanCli::default())));
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

    /// The memory `spec` declares, asked of its runtime's connector. A
    /// workload of a runtime this agent does not have never runs here, so
    /// it uses nothing.
    pub fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        self.connectors.get(&spec.workload.runtime).map_or(Ok(0), |c| c.declared_memory(spec))
    }

    /// All connectors.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn RuntimeConnector>> {
        self.connectors.values()
    }

    /// Keeps only the runtimes named in `wanted` (Ankaios' `runtimes` config
    /// key). Returns the wanted names this agent does not have; an error
    /// when none of `wanted` is available.
    pub fn select(&mut self, wanted: &[String]) -> Result<Vec<String>, NoValidRuntime> {
        let unsupported: Vec<String> = wanted.iter().filter(|w| !self.connectors.contains_key(*w)).cloned().collect();
        if unsupported.len() == wanted.len() {
            return Err(NoValidRuntime { supported: self.connectors.keys().cloned().collect() });
        }
        self.connectors.retain(|name, _| wanted.contains(name));
        Ok(unsupported)
    }
}

impl fmt::Debug for RuntimeRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.connectors.keys()).finish()
    }
}
