//! [`FakeRuntime`]: an in-memory [`RuntimeConnector`] for tests. It keeps
//! containers in a map, records every call, can be scripted to fail creates
//! and deletes, and emits state changes (`exit`, `remove_externally`) through
//! the sink given to `start_state_watcher`, like the podman event stream.
//!
//! Validates `runtimeConfig` like podman does (`PodmanRuntimeConfig::parse`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::runtime_connectors::podman::config::PodmanRuntimeConfig;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, WorkloadInstanceName};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{
    CreateOptions, ListedWorkload, LogLines, LogOptions, Observed, RuntimeConnector, RuntimeError, RuntimeEvent,
    RuntimeEventSender, WorkloadId,
};

/// A call the fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeCall {
    Create(WorkloadInstanceName),
    /// An exited container started again in place.
    Start(WorkloadInstanceName),
    Delete(WorkloadInstanceName),
    List,
}

/// One container of the fake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeContainer {
    pub instance_name: WorkloadInstanceName,
    pub state: ExecutionState,
}

#[derive(Default)]
struct Inner {
    containers: BTreeMap<WorkloadId, FakeContainer>,
    calls: Vec<FakeCall>,
    /// workload name -> error message of its creates.
    failing_creates: HashMap<String, String>,
    /// workload name -> how long its creates take.
    create_delays: HashMap<String, std::time::Duration>,
    /// How long a listing takes (a slow podman at the agent's start).
    list_delay: std::time::Duration,
    failing_deletes: Option<String>,
    /// How long each delete takes (a stop's grace period, a slow podman).
    delete_delay: std::time::Duration,
    sink: Option<RuntimeEventSender>,
    next_id: u64,
    /// The options of the last create of each instance.
    options: HashMap<WorkloadInstanceName, CreateOptions>,
    /// Log lines per instance, and the open follow streams.
    logs: HashMap<WorkloadInstanceName, Vec<String>>,
    followers: Vec<(WorkloadInstanceName, tokio::sync::mpsc::Sender<String>)>,
    log_requests: Vec<(WorkloadInstanceName, LogOptions)>,
}

/// An in-memory container runtime.
pub struct FakeRuntime {
    name: String,
    inner: Mutex<Inner>,
    /// Behave like podman: a create returns a running container and the
    /// event stream lags behind (create/start events arrive afterwards).
    like_podman: bool,
    /// Why it cannot mount workload files (like podman-kube), if it cannot.
    files_unsupported: Option<&'static str>,
    /// The scripted probes of its containers.
    probes: std::sync::Arc<crate::runtime_connectors::probe_exec::fake::FakeProbes>,
}

impl Default for FakeRuntime {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRuntime {
    /// A fake registered as `podman`.
    pub fn new() -> Self {
        Self::named("podman")
    }

    /// A fake registered under `name`.
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            inner: Mutex::new(Inner::default()),
            like_podman: false,
            files_unsupported: None,
            probes: Default::default(),
        }
    }

    /// A fake whose creates return running containers and whose events
    /// (Pending(Starting), then Running) arrive only after the create, as
    /// with podman's lagging event stream.
    pub fn like_podman() -> Self {
        Self { like_podman: true, ..Self::new() }
    }

    /// A fake that cannot mount workload files, as podman-kube cannot.
    pub fn without_files() -> Self {
        Self { files_unsupported: Some("files are not supported by this fake runtime"), ..Self::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicking test thread must not hide the fake's state from others.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The scripted probes of its containers.
    pub fn probes(&self) -> &crate::runtime_connectors::probe_exec::fake::FakeProbes {
        &self.probes
    }

    /// Every create of `workload` fails with `message` until cleared.
    pub fn fail_creates_of(&self, workload: &str, message: &str) {
        self.lock().failing_creates.insert(workload.to_owned(), message.to_owned());
    }

    /// Creates of `workload` take `delay` (an image pull, say) before they
    /// do anything.
    pub fn delay_creates_of(&self, workload: &str, delay: std::time::Duration) {
        self.lock().create_delays.insert(workload.to_owned(), delay);
    }

    /// Deletes take `delay` before they remove the container.
    pub fn delay_deletes(&self, delay: std::time::Duration) {
        self.lock().delete_delay = delay;
    }

    /// Listings take `delay` before they look at the containers.
    pub fn delay_lists(&self, delay: std::time::Duration) {
        self.lock().list_delay = delay;
    }

    /// Every delete fails with `message` (or succeeds again with `None`).
    pub fn fail_deletes(&self, message: Option<&str>) {
        self.lock().failing_deletes = message.map(str::to_owned);
    }

    /// Clears all scripted failures.
    pub fn clear_failures(&self) {
        let mut i = self.lock();
        i.failing_creates.clear();
        i.failing_deletes = None;
    }

    /// Adds a container that existed before the agent started.
    pub fn insert_existing(&self, instance_name: WorkloadInstanceName, state: ExecutionState) -> WorkloadId {
        let mut i = self.lock();
        let id = Self::new_id(&mut i);
        i.containers.insert(id.clone(), FakeContainer { instance_name, state });
        id
    }

    fn new_id(i: &mut Inner) -> WorkloadId {
        i.next_id += 1;
        WorkloadId(format!("fake-{}", i.next_id))
    }

    /// All calls so far.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.lock().calls.clone()
    }

    /// Instance names of all creates so far (as strings), in call order.
    pub fn created(&self) -> Vec<WorkloadInstanceName> {
        self.calls().into_iter().filter_map(|c| if let FakeCall::Create(n) = c { Some(n) } else { None }).collect()
    }

    /// Instance names of all starts in place so far, in call order.
    pub fn started(&self) -> Vec<WorkloadInstanceName> {
        self.calls().into_iter().filter_map(|c| if let FakeCall::Start(n) = c { Some(n) } else { None }).collect()
    }

    /// Instance names of all deletes so far, in call order.
    pub fn deleted(&self) -> Vec<WorkloadInstanceName> {
        self.calls().into_iter().filter_map(|c| if let FakeCall::Delete(n) = c { Some(n) } else { None }).collect()
    }

    /// The containers that exist now.
    pub fn containers(&self) -> Vec<FakeContainer> {
        self.lock().containers.values().cloned().collect()
    }

    /// The state of the container of `instance`, if it exists.
    pub fn state_of(&self, instance: &WorkloadInstanceName) -> Option<ExecutionState> {
        self.lock().containers.values().find(|c| &c.instance_name == instance).map(|c| c.state.clone())
    }

    /// Lets the container of `instance` exit with `code` and reports it.
    pub async fn exit(&self, instance: &WorkloadInstanceName, code: i32) {
        let state = super::podman::events::exit_state(code);
        self.set_state(instance, state).await;
    }

    /// Reports the exit of `instance`'s container as the podman exit watcher
    /// does (by id, ahead of the event stream), without touching the
    /// container's listed state: podman's record still lags behind.
    pub async fn exit_file(&self, instance: &WorkloadInstanceName, code: i32) {
        let Some(id) = self.workload_id_of(instance) else { return };
        let observed = Observed::State(super::podman::events::exit_state(code));
        let sink = self.lock().sink.clone();
        if let Some(sink) = sink {
            let _ = sink.send(RuntimeEvent::ChangedById { workload_id: id, observed }).await;
        }
    }

    /// Sets the state of the container of `instance` and reports it.
    pub async fn set_state(&self, instance: &WorkloadInstanceName, state: ExecutionState) {
        let found = {
            let mut i = self.lock();
            let found = i.containers.iter_mut().find(|(_, c)| &c.instance_name == instance);
            found.map(|(id, c)| {
                c.state = state.clone();
                id.clone()
            })
        };
        if let Some(id) = found {
            self.emit(instance.clone(), id, Observed::State(state)).await;
        }
    }

    /// Removes the container of `instance` behind the agent's back.
    pub async fn remove_externally(&self, instance: &WorkloadInstanceName) {
        let removed = {
            let mut i = self.lock();
            let id = i.containers.iter().find(|(_, c)| &c.instance_name == instance).map(|(id, _)| id.clone());
            id.inspect(|id| {
                i.containers.remove(id);
            })
        };
        if let Some(id) = removed {
            self.emit(instance.clone(), id, Observed::Gone).await;
        }
    }

    /// Appends a log line of `instance`, also to open follow streams.
    pub async fn push_log(&self, instance: &WorkloadInstanceName, line: &str) {
        let followers: Vec<_> = {
            let mut i = self.lock();
            i.logs.entry(instance.clone()).or_default().push(line.to_owned());
            i.followers.retain(|(_, tx)| !tx.is_closed());
            i.followers.iter().filter(|(n, _)| n == instance).map(|(_, tx)| tx.clone()).collect()
        };
        for tx in followers {
            let _ = tx.send(line.to_owned()).await;
        }
    }

    /// The log requests so far, with their options.
    pub fn log_requests(&self) -> Vec<(WorkloadInstanceName, LogOptions)> {
        self.lock().log_requests.clone()
    }

    /// How many follow streams are still read.
    pub fn open_log_streams(&self) -> usize {
        let mut i = self.lock();
        i.followers.retain(|(_, tx)| !tx.is_closed());
        i.followers.len()
    }

    /// The options of the last create of `instance`.
    pub fn options_of(&self, instance: &WorkloadInstanceName) -> Option<CreateOptions> {
        self.lock().options.get(instance).cloned()
    }

    /// The id of the workload of `instance`, if it exists.
    pub fn workload_id_of(&self, instance: &WorkloadInstanceName) -> Option<WorkloadId> {
        self.lock().containers.iter().find(|(_, c)| &c.instance_name == instance).map(|(id, _)| id.clone())
    }

    /// Sends an arbitrary observation, e.g. a late one about an old workload.
    pub async fn emit_for(&self, instance: &WorkloadInstanceName, id: &WorkloadId, observed: Observed) {
        self.emit(instance.clone(), id.clone(), observed).await;
    }

    /// Sends a listing of `agent`'s containers, as podman's periodic
    /// reconcile (`podman ps`) does.
    pub async fn reconcile(&self, agent: &str) {
        let taken_at = tokio::time::Instant::now();
        let workloads = self.list_workloads(agent).await.unwrap_or_default();
        let sink = self.lock().sink.clone();
        if let Some(sink) = sink {
            let _ = sink.send(RuntimeEvent::Snapshot { runtime: self.name().to_owned(), taken_at, workloads }).await;
        }
    }

    /// Makes the runtime (un)reachable, as a podman whose CLI or socket
    /// stopped answering would be.
    pub async fn set_health(&self, health: ank_common::conditions::RuntimeHealth) {
        let sink = self.lock().sink.clone();
        if let Some(sink) = sink {
            let _ = sink.send(RuntimeEvent::Health { runtime: self.name().to_owned(), health }).await;
        }
    }

    async fn emit(&self, instance_name: WorkloadInstanceName, workload_id: WorkloadId, observed: Observed) {
        let sink = self.lock().sink.clone();
        if let Some(sink) = sink {
            let _ = sink.send(RuntimeEvent::Changed { instance_name, workload_id, observed }).await;
        }
    }
}

#[async_trait]
impl RuntimeConnector for FakeRuntime {
    fn name(&self) -> &str {
        &self.name
    }

    /// As podman declares it (the fake stands in for podman in the quota
    /// tests), whatever the fake is named.
    fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        super::podman::memory::declared(&spec.workload.runtime_config)
    }

    fn create_returns_running(&self) -> bool {
        self.like_podman
    }

    fn probe_executor(&self) -> Option<std::sync::Arc<dyn crate::runtime_connectors::probe_exec::ProbeExecutor>> {
        Some(self.probes.clone())
    }

    fn files_unsupported(&self) -> Option<&'static str> {
        self.files_unsupported
    }

    async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError> {
        let instance = spec.instance_name.clone();
        let delay = self.lock().create_delays.get(spec.name()).copied();
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let id = {
            let mut i = self.lock();
            i.calls.push(FakeCall::Create(instance.clone()));
            i.options.insert(instance.clone(), options.clone());
            PodmanRuntimeConfig::parse(&spec.workload.runtime_config)?;
            if let Some(msg) = i.failing_creates.get(spec.name()) {
                return Err(RuntimeError::create(msg.clone()));
            }
            let id = Self::new_id(&mut i);
            let container = FakeContainer { instance_name: instance.clone(), state: ExecutionState::running() };
            i.containers.insert(id.clone(), container);
            id
        };
        if self.like_podman {
            let starting =
                ExecutionState::new(ank_common::StateKind::Pending(ank_common::execution_state::Pending::Starting));
            self.emit(instance.clone(), id.clone(), Observed::State(starting)).await;
        }
        self.emit(instance, id.clone(), Observed::State(ExecutionState::running())).await;
        Ok(id)
    }

    fn supports_start(&self) -> bool {
        true
    }

    /// Runs the container `workload_id` again (its logs stay); fails for a
    /// container that does not exist, or while creates of the workload fail.
    async fn start(&self, spec: &WorkloadSpec, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        let instance = {
            let mut i = self.lock();
            i.calls.push(FakeCall::Start(spec.instance_name.clone()));
            if let Some(msg) = i.failing_creates.get(spec.name()) {
                return Err(RuntimeError::create(msg.clone()));
            }
            let Some(c) = i.containers.get_mut(workload_id) else {
                return Err(RuntimeError::create(format!(
                    "Error: no container with name or ID \"{workload_id}\" found"
                )));
            };
            c.state = ExecutionState::running();
            c.instance_name.clone()
        };
        self.emit(instance, workload_id.clone(), Observed::State(ExecutionState::running())).await;
        Ok(())
    }

    async fn workload_id(&self, instance: &WorkloadInstanceName) -> Result<Option<WorkloadId>, RuntimeError> {
        let i = self.lock();
        Ok(i.containers.iter().find(|(_, c)| &c.instance_name == instance).map(|(id, _)| id.clone()))
    }

    async fn logs(&self, workload_id: &WorkloadId, options: &LogOptions) -> Result<LogLines, RuntimeError> {
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let mut i = self.lock();
        let instance = i
            .containers
            .get(workload_id)
            .map(|c| c.instance_name.clone())
            .ok_or_else(|| RuntimeError::unavailable(format!("no container '{workload_id}'")))?;
        i.log_requests.push((instance.clone(), options.clone()));
        let lines = i.logs.get(&instance).cloned().unwrap_or_default();
        let skip = match options.tail {
            Some(n) if n >= 0 => lines.len().saturating_sub(n as usize),
            _ => 0,
        };
        for line in lines.into_iter().skip(skip) {
            let _ = tx.try_send(line);
        }
        if options.follow {
            i.followers.push((instance, tx));
        }
        Ok(rx)
    }

    async fn delete(&self, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        let delay = self.lock().delete_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let removed = {
            let mut i = self.lock();
            let instance = i.containers.get(workload_id).map(|c| c.instance_name.clone());
            if let Some(n) = &instance {
                i.calls.push(FakeCall::Delete(n.clone()));
            }
            if let Some(msg) = &i.failing_deletes {
                return Err(RuntimeError::delete(msg.clone()));
            }
            i.containers.remove(workload_id);
            instance
        };
        if let Some(instance) = removed {
            // Like podman: the stopped container dies (SIGKILL) and is removed.
            let died = Observed::State(super::podman::events::exit_state(137));
            self.emit(instance.clone(), workload_id.clone(), died).await;
            self.emit(instance, workload_id.clone(), Observed::Gone).await;
        }
        Ok(())
    }

    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        let delay = self.lock().list_delay;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let mut i = self.lock();
        i.calls.push(FakeCall::List);
        Ok(i.containers
            .iter()
            .filter(|(_, c)| c.instance_name.agent_name == agent)
            .map(|(id, c)| ListedWorkload {
                instance_name: c.instance_name.clone(),
                workload_id: id.clone(),
                state: c.state.clone(),
            })
            .collect())
    }

    async fn start_state_watcher(
        &self,
        _agent: &str,
        sink: RuntimeEventSender,
        _shutdown: CancellationToken,
    ) -> Result<(), RuntimeError> {
        self.lock().sink = Some(sink);
        Ok(())
    }
}
