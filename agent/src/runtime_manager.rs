//! [`RuntimeManager`]: owns the map workload name -> control loop of this
//! agent. It turns `ServerHello` (the full set, with resume of existing
//! containers) and `UpdateWorkload` (deletes first, then adds; an add of a
//! known name is an update) into commands for the per-workload
//! `WorkloadControlLoop`s and routes the state watchers' events to them.
//!
//! In: requests via [`RuntimeManagerHandle`] (from the `AgentManager`),
//! `RuntimeEvent`s from the connectors' watchers, `LoopNotice`s from loops.
//! Out: `WorkloadCommand`s to the control loops.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ank_common::WorkloadInstanceName;
use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::runtime_connectors::{ListedWorkload, RuntimeEvent, RuntimeRegistry};
use crate::workload::control_loop::{LoopContext, WorkloadControlLoop};
use crate::workload::{LoopNotice, StateReporter, WorkloadCommandSender};

/// Capacity of the channel from the state watchers.
const RUNTIME_EVENT_CAPACITY: usize = 256;

enum Request {
    ServerHello(Vec<WorkloadSpec>),
    Update { added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload> },
}

/// Cheap, cloneable handle to the [`RuntimeManager`] task.
#[derive(Debug, Clone)]
pub struct RuntimeManagerHandle(mpsc::Sender<Request>);

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::ServerHello(s) => write!(f, "ServerHello({} workloads)", s.len()),
            Request::Update { added, deleted } => write!(f, "Update(+{}, -{})", added.len(), deleted.len()),
        }
    }
}

impl RuntimeManagerHandle {
    /// All workloads of this agent, as sent after every (re)connect.
    pub async fn server_hello(&self, workloads: Vec<WorkloadSpec>) {
        let _ = self.0.send(Request::ServerHello(workloads)).await;
    }

    /// Workloads added and deleted since.
    pub async fn update_workload(&self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>) {
        let _ = self.0.send(Request::Update { added, deleted }).await;
    }
}

/// Settings of the runtime manager.
#[derive(Debug, Clone)]
pub struct RuntimeManagerConfig {
    pub agent_name: String,
    /// How many creates may run at the same time.
    pub max_parallel_creates: usize,
}

struct Entry {
    instance_name: WorkloadInstanceName,
    sender: WorkloadCommandSender,
    deleting: bool,
}

/// The task owning all control loops of this agent.
pub struct RuntimeManager {
    agent_name: String,
    registry: Arc<RuntimeRegistry>,
    workloads: HashMap<String, Entry>,
    ctx: LoopContext,
    requests: mpsc::Receiver<Request>,
    runtime_events: mpsc::Receiver<RuntimeEvent>,
    notices: mpsc::UnboundedReceiver<LoopNotice>,
    shutdown: CancellationToken,
}

impl RuntimeManager {
    /// Starts every connector's state watcher (before any create, so no
    /// event is missed) and spawns the manager task.
    pub async fn start(
        config: RuntimeManagerConfig,
        registry: RuntimeRegistry,
        reporter: StateReporter,
        shutdown: CancellationToken,
    ) -> (RuntimeManagerHandle, JoinHandle<()>) {
        let (event_tx, runtime_events) = mpsc::channel(RUNTIME_EVENT_CAPACITY);
        for connector in registry.iter() {
            if let Err(e) = connector.start_state_watcher(&config.agent_name, event_tx.clone(), shutdown.clone()).await
            {
                tracing::error!("state watcher of runtime '{}' did not start: {e}", connector.name());
            }
        }
        let (tx, requests) = mpsc::channel(16);
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let registry = Arc::new(registry);
        let ctx = LoopContext {
            registry: registry.clone(),
            reporter,
            create_permits: Arc::new(Semaphore::new(config.max_parallel_creates.max(1))),
            notices: notice_tx,
        };
        let manager = RuntimeManager {
            agent_name: config.agent_name,
            registry,
            workloads: HashMap::new(),
            ctx,
            requests,
            runtime_events,
            notices,
            shutdown,
        };
        (RuntimeManagerHandle(tx), tokio::spawn(manager.run()))
    }

    async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                Some(req) = self.requests.recv() => match req {
                    Request::ServerHello(specs) => self.handle_server_hello(specs).await,
                    Request::Update { added, deleted } => self.handle_update(added, deleted),
                },
                Some(ev) = self.runtime_events.recv() => self.handle_runtime_event(ev),
                Some(notice) = self.notices.recv() => self.handle_notice(notice),
                else => break,
            }
        }
        // Dropping the senders ends the loops; workloads keep running.
        self.workloads.clear();
    }

    fn is_ours(&self, spec: &WorkloadSpec) -> bool {
        let ours = spec.instance_name.agent_name == self.agent_name;
        if !ours {
            tracing::warn!("ignoring workload '{}' of another agent", spec.instance_name);
        }
        ours
    }

    /// Existing containers of this agent in all runtimes, by instance name.
    // [impl->swdd~agent-initial-list-existing-workloads~1]
    async fn list_existing(&self) -> BTreeMap<WorkloadInstanceName, (String, ListedWorkload)> {
        let mut existing = BTreeMap::new();
        for connector in self.registry.iter() {
            match connector.list_workloads(&self.agent_name).await {
                Ok(list) => existing
                    .extend(list.into_iter().map(|w| (w.instance_name.clone(), (connector.name().to_owned(), w)))),
                Err(e) => tracing::warn!("listing containers of runtime '{}' failed: {e}", connector.name()),
            }
        }
        existing
    }

    // [impl->swdd~agent-handles-update-workload-requests~1]
    async fn handle_server_hello(&mut self, specs: Vec<WorkloadSpec>) {
        let desired: BTreeMap<String, WorkloadSpec> =
            specs.into_iter().filter(|s| self.is_ours(s)).map(|s| (s.name().to_owned(), s)).collect();
        let mut existing = self.list_existing().await;
        // Managed instances are the control loops' business, not leftovers.
        for entry in self.workloads.values() {
            existing.remove(&entry.instance_name);
        }
        let gone: Vec<String> = self.workloads.keys().filter(|n| !desired.contains_key(*n)).cloned().collect();
        for name in gone {
            self.delete_workload(&name);
        }
        let mut leftovers: HashMap<String, ListedWorkload> = HashMap::new();
        for spec in desired.values() {
            if let Some((runtime, found)) = existing.remove(&spec.instance_name) {
                if runtime == spec.workload.runtime && !self.workloads.contains_key(spec.name()) {
                    // [impl->swdd~agent-existing-workloads-resume-existing~2]
                    self.spawn_loop(spec).resume(spec.clone(), found.workload_id, found.state);
                    continue;
                }
                existing.insert(spec.instance_name.clone(), (runtime, found));
            }
        }
        for (instance, (runtime, found)) in existing {
            let replaces_desired = desired.get(&instance.workload_name).is_some_and(|s| s.workload.runtime == runtime);
            if replaces_desired && !self.workloads.contains_key(&instance.workload_name) {
                leftovers.insert(instance.workload_name.clone(), found);
            } else {
                // [impl->swdd~agent-existing-workloads-delete-unneeded~1]
                self.remove_leftover(runtime, found);
            }
        }
        for spec in desired.into_values() {
            self.add_workload(spec, &mut leftovers);
        }
    }

    /// Creates, updates or keeps one workload of a hello or an update.
    fn add_workload(&mut self, spec: WorkloadSpec, leftovers: &mut HashMap<String, ListedWorkload>) {
        if let Some(entry) = self.workloads.get_mut(spec.name()) {
            if entry.instance_name != spec.instance_name || entry.deleting {
                // [impl->swdd~agent-update-on-add-known-workload~1]
                entry.instance_name = spec.instance_name.clone();
                entry.deleting = false;
                entry.sender.update(spec);
            }
            return;
        }
        // [impl->swdd~agent-existing-workloads-replace-updated~2]
        let replace = leftovers.remove(spec.name());
        // [impl->swdd~agent-added-creates-workload~1]
        self.spawn_loop(&spec).create(spec, replace);
    }

    // [impl->swdd~agent-handle-deleted-before-added-workloads~1]
    fn handle_update(&mut self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>) {
        let added: Vec<WorkloadSpec> = added.into_iter().filter(|s| self.is_ours(s)).collect();
        let added_names: HashSet<&str> = added.iter().map(WorkloadSpec::name).collect();
        for d in &deleted {
            let name = &d.instance_name.workload_name;
            // [impl->swdd~agent-updates-deleted-and-added-workloads~1]
            if added_names.contains(name.as_str()) {
                continue;
            }
            match self.workloads.get(name) {
                Some(e) if e.instance_name == d.instance_name => self.delete_workload(name),
                _ => tracing::debug!("delete of unknown instance '{}' ignored", d.instance_name),
            }
        }
        let mut no_leftovers = HashMap::new();
        for spec in added {
            self.add_workload(spec, &mut no_leftovers);
        }
    }

    fn delete_workload(&mut self, name: &str) {
        if let Some(entry) = self.workloads.get_mut(name) {
            entry.deleting = true;
            entry.sender.delete();
        }
    }

    fn remove_leftover(&self, runtime: String, found: ListedWorkload) {
        let Some(connector) = self.registry.get(&runtime) else { return };
        tracing::info!("removing leftover container '{}' of '{}'", found.workload_id, found.instance_name);
        tokio::spawn(async move {
            if let Err(e) = connector.delete(&found.workload_id).await {
                tracing::warn!("removing leftover '{}' failed: {e}", found.instance_name);
            }
        });
    }

    fn spawn_loop(&mut self, spec: &WorkloadSpec) -> WorkloadCommandSender {
        let (sender, commands) = WorkloadCommandSender::channel();
        tokio::spawn(WorkloadControlLoop::new(self.ctx.clone(), commands).run());
        let entry = Entry { instance_name: spec.instance_name.clone(), sender: sender.clone(), deleting: false };
        self.workloads.insert(spec.name().to_owned(), entry);
        sender
    }

    fn handle_runtime_event(&mut self, ev: RuntimeEvent) {
        match ev {
            RuntimeEvent::Changed { instance_name, workload_id, observed } => {
                if let Some(entry) = self.workloads.get(&instance_name.workload_name) {
                    entry.sender.observed(instance_name, workload_id, observed);
                }
            }
            RuntimeEvent::Snapshot { runtime, taken_at, workloads } => {
                let workloads = Arc::new(workloads);
                for entry in self.workloads.values() {
                    entry.sender.snapshot(runtime.clone(), taken_at, workloads.clone());
                }
            }
        }
    }

    fn handle_notice(&mut self, notice: LoopNotice) {
        match notice {
            LoopNotice::Deleted { instance_name } => {
                let name = &instance_name.workload_name;
                let done = self.workloads.get(name).is_some_and(|e| e.deleting && e.instance_name == instance_name);
                if done {
                    self.workloads.remove(name);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "runtime_manager_tests.rs"]
mod tests;
