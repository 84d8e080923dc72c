//! [`RuntimeManager`]: owns this agent's workload objects (name -> control
//! loop), one `RuntimeFacade` per runtime, the `WorkloadScheduler` and the
//! `WorkloadStateStore`. It turns `ServerHello` (the full set, resuming
//! existing workloads) and `UpdateWorkload` (deletes first, then adds; an add
//! of a known name is an update) into `WorkloadOperation`s, lets the
//! scheduler hold back those whose dependencies, the quota or an isolated
//! job do not let them start, executes the ready ones, preempts what the
//! scheduler says, and re-evaluates the queue on every workload state
//! update and on the scheduler's tick (`runtime_manager_sched.rs`).
//!
//! In: requests via [`RuntimeManagerHandle`] (from the `AgentManager`),
//! `RuntimeEvent`s from the state watchers and checkers, `LoopNotice`s,
//! the scheduler's tick. Out: commands to the control loops; waiting
//! states and events via the reporter; the quota use on a watch channel.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ank_common::conditions::RuntimeHealth;
use ank_common::execution_state::Pending;
use ank_common::messages::DeletedWorkload;
use ank_common::quota::QuotaUsage;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::finished_store::FinishedStore;
use crate::orphans::Orphans;
use crate::runtime_connectors::{ListedWorkload, RuntimeEvent, RuntimeRegistry};
use crate::runtime_facade::RuntimeFacade;
use crate::workload::control_loop::LoopContext;
use crate::workload::object::WorkloadObject;
use crate::workload::policy::RetryPolicy;
use crate::workload::retention::Retention;
use crate::workload::{LoopNotice, StateReporter};
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_scheduler::{SchedulerSettings, WorkloadScheduler};
use crate::workload_state_store::WorkloadStateStore;

/// Capacity of the channel from the state watchers.
const RUNTIME_EVENT_CAPACITY: usize = 256;

enum Request {
    ServerHello(Vec<WorkloadSpec>),
    Update { added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload> },
}

/// Cheap, cloneable handle to the [`RuntimeManager`] task.
#[derive(Debug, Clone)]
pub struct RuntimeManagerHandle {
    requests: mpsc::Sender<Request>,
    /// Unbounded: the manager reports states to the `AgentManager` while the
    /// `AgentManager` feeds states back; two bounded channels could deadlock.
    states: mpsc::UnboundedSender<Vec<WorkloadState>>,
    health: watch::Receiver<RuntimeHealth>,
}

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
        let _ = self.requests.send(Request::ServerHello(workloads)).await;
    }

    /// Workloads added and deleted since.
    // [impl->swdd~agent-handles-update-workload-requests~1]
    pub async fn update_workload(&self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>) {
        let _ = self.requests.send(Request::Update { added, deleted }).await;
    }

    /// Whether the runtimes can be reached: the first unreachable one's
    /// reason, else Reachable.
    pub fn runtime_health(&self) -> watch::Receiver<RuntimeHealth> {
        self.health.clone()
    }

    /// New execution states, of this agent's workloads or of others'.
    pub fn update_workload_states(&self, states: Vec<WorkloadState>) {
        let _ = self.states.send(states);
    }
}

/// Settings of the runtime manager.
#[derive(Debug, Clone)]
pub struct RuntimeManagerConfig {
    pub agent_name: String,
    /// How many creates may run at the same time.
    pub max_parallel_creates: usize,
    /// Retries of failed creates.
    pub retry_policy: RetryPolicy,
    /// `<run folder>/<agent>_io`, where workload files go.
    pub io_folder: std::path::PathBuf,
    /// The control interfaces of the workloads.
    pub control_interfaces: crate::control_interface::registry::ControlInterfaces,
    /// How long finished workloads are kept before they are reaped.
    pub retention: Retention,
    /// Tick, quota and preemption of the scheduler.
    pub scheduler: SchedulerSettings,
    /// Where what the workloads use of the quota is published (for the
    /// server link's load status).
    pub quota_used: watch::Sender<QuotaUsage>,
}

/// The task owning all workload objects of this agent.
pub struct RuntimeManager {
    agent_name: String,
    facades: BTreeMap<String, RuntimeFacade>,
    objects: HashMap<String, WorkloadObject>,
    /// Workloads whose runtime this agent does not have, by name.
    unsupported: HashMap<String, WorkloadInstanceName>,
    scheduler: WorkloadScheduler,
    /// When the scheduler's next tick is due, while it needs one.
    next_tick: Option<Instant>,
    quota_used: watch::Sender<QuotaUsage>,
    store: WorkloadStateStore,
    reporter: StateReporter,
    requests: mpsc::Receiver<Request>,
    states: mpsc::UnboundedReceiver<Vec<WorkloadState>>,
    runtime_events: mpsc::Receiver<RuntimeEvent>,
    notices: mpsc::UnboundedReceiver<LoopNotice>,
    /// Runtimes that could not be reached, with the reason.
    unreachable: BTreeMap<String, String>,
    health: watch::Sender<RuntimeHealth>,
    shutdown: CancellationToken,
    /// Workloads that ended and were reaped, across agent restarts.
    finished: Arc<FinishedStore>,
    orphans: Orphans,
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
        let mut unreachable = BTreeMap::new();
        for connector in registry.iter() {
            if let Err(e) = connector.start_state_watcher(&config.agent_name, event_tx.clone(), shutdown.clone()).await
            {
                tracing::error!("state watcher of runtime '{}' did not start: {e}", connector.name());
                unreachable.insert(connector.name().to_owned(), e.to_string());
            }
        }
        let (tx, requests) = mpsc::channel(16);
        let (states_tx, states) = mpsc::unbounded_channel();
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let (health_tx, health) = watch::channel(overall_health(&unreachable));
        let registry = Arc::new(registry);
        let finished = Arc::new(FinishedStore::open(&config.io_folder));
        let ctx = LoopContext {
            registry: registry.clone(),
            reporter: reporter.clone(),
            create_permits: Arc::new(Semaphore::new(config.max_parallel_creates.max(1))),
            notices: notice_tx,
            runtime_events: event_tx,
            retry_policy: config.retry_policy,
            io_folder: config.io_folder.clone(),
            control_interfaces: config.control_interfaces.clone(),
            retention: config.retention,
            finished: finished.clone(),
        };
        // [impl->swdd~agent-supports-multiple-runtime-connectors~1]
        let facades =
            registry.iter().map(|c| (c.name().to_owned(), RuntimeFacade::new(c.clone(), ctx.clone()))).collect();
        let manager = RuntimeManager {
            agent_name: config.agent_name.clone(),
            facades,
            objects: HashMap::new(),
            unsupported: HashMap::new(),
            scheduler: WorkloadScheduler::with_settings(
                config.agent_name.clone(),
                config.scheduler,
                (*registry).clone(),
            ),
            next_tick: None,
            quota_used: config.quota_used,
            store: WorkloadStateStore::new(),
            reporter,
            requests,
            states,
            runtime_events,
            notices,
            unreachable,
            health: health_tx,
            shutdown,
            finished,
            orphans: Orphans::new(),
        };
        let handle = RuntimeManagerHandle { requests: tx, states: states_tx, health };
        (handle, tokio::spawn(manager.run()))
    }

    async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                () = sched::tick_due(self.next_tick) => self.handle_tick().await,
                Some(req) = self.requests.recv() => match req {
                    Request::ServerHello(specs) => self.handle_server_hello(specs).await,
                    Request::Update { added, deleted } => self.handle_update(added, deleted).await,
                },
                Some(states) = self.states.recv() => self.handle_workload_states(&states).await,
                Some(ev) = self.runtime_events.recv() => self.handle_runtime_event(ev),
                Some(notice) = self.notices.recv() => self.handle_notice(notice),
                else => break,
            }
        }
        // Dropping the senders ends the loops; workloads keep running.
        self.objects.clear();
    }

    fn is_ours(&self, spec: &WorkloadSpec) -> bool {
        let ours = spec.instance_name.agent_name == self.agent_name;
        if !ours {
            tracing::warn!("ignoring workload '{}' of another agent", spec.instance_name);
        }
        ours
    }

    /// Existing workloads of this agent in all runtimes, by instance name.
    // [impl->swdd~agent-existing-workloads-finds-list~1]
    async fn list_existing(&self) -> BTreeMap<WorkloadInstanceName, (String, ListedWorkload)> {
        let mut existing = BTreeMap::new();
        for facade in self.facades.values() {
            match facade.list_reusable_workloads(&self.agent_name).await {
                Ok(list) => {
                    existing.extend(list.into_iter().map(|w| (w.instance_name.clone(), (facade.name().to_owned(), w))))
                }
                Err(e) => tracing::warn!("listing workloads of runtime '{}' failed: {e}", facade.name()),
            }
        }
        existing
    }

    /// The full set of this agent's workloads, after every (re)connect.
    // [impl->swdd~agent-initial-list-existing-workloads~1]
    async fn handle_server_hello(&mut self, specs: Vec<WorkloadSpec>) {
        let desired: BTreeMap<String, WorkloadSpec> =
            specs.into_iter().filter(|s| self.is_ours(s)).map(|s| (s.name().to_owned(), s)).collect();
        let mut existing = self.list_existing().await;
        for object in self.objects.values() {
            existing.remove(&object.instance_name);
        }
        let mut ops = Vec::new();
        for (name, object) in &self.objects {
            if !desired.contains_key(name) {
                ops.push(WorkloadOperation::Delete(no_dependents(&object.instance_name)));
            }
        }
        // Waiting ones (for quota, say) that are no longer wanted never start.
        for instance in self.scheduler.queued_creates() {
            if !desired.contains_key(&instance.workload_name) {
                ops.push(WorkloadOperation::Delete(no_dependents(&instance)));
            }
        }
        self.unsupported.retain(|name, _| desired.contains_key(name));
        // [feature K7: a workload deleted while the agent was away forgets that it finished]
        self.finished.retain(|name| desired.contains_key(name));
        for spec in desired.into_values() {
            if let Some(op) = self.hello_operation(spec, &mut existing) {
                ops.push(op);
            }
        }
        for (_, (runtime, found)) in existing {
            // [impl->swdd~agent-existing-workloads-delete-unneeded~1]
            if let Some(facade) = self.facades.get(&runtime) {
                self.orphans.remove(facade.connector(), found);
            }
        }
        self.orphans.arm();
        self.schedule(ops).await;
    }

    /// What to do with one desired workload of a hello; resumes it at once
    /// when it still runs unchanged.
    fn hello_operation(
        &mut self,
        spec: WorkloadSpec,
        existing: &mut BTreeMap<WorkloadInstanceName, (String, ListedWorkload)>,
    ) -> Option<WorkloadOperation> {
        if let Some(object) = self.objects.get_mut(spec.name()) {
            if object.instance_name == spec.instance_name && !object.deleting {
                // Wanted as it is: a delete waiting for its dependents is
                // called off; the loop reports its state again when nothing
                // changed, or finishes an update whose delete failed before.
                return self.wanted_again(spec);
            }
            return Some(WorkloadOperation::Update(spec, no_dependents(&object.instance_name)));
        }
        if self.scheduler.queued_create(spec.name()) == Some(&spec) {
            return None;
        }
        // [impl->swdd~agent-existing-workloads-starts-new-if-not-found~1]
        let Some((runtime, found)) = existing.remove(&spec.instance_name) else {
            // [feature K7: a reaped workload is not re-run after an agent restart]
            if let Some(state) = self.finished.final_state(&spec)
                && let Some(facade) = self.facades.get(&spec.workload.runtime)
            {
                let object = facade.finished_workload(spec.clone(), state);
                self.objects.insert(spec.name().to_owned(), object);
                return None;
            }
            // An earlier instance of the same workload is replaced: removed
            // right before the create, so both never run together.
            let earlier = existing
                .iter()
                .find(|(i, (rt, _))| i.workload_name == spec.name() && *rt == spec.workload.runtime)
                .map(|(i, _)| i.clone());
            let replace = earlier.and_then(|i| existing.remove(&i));
            return Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, replace }));
        };
        if runtime == spec.workload.runtime && resumable(&found.state) {
            // [impl->swdd~agent-existing-workloads-resume-existing~2]
            // [impl->swdd~agent-stores-running-workload~1]
            let facade = self.facades.get(&runtime)?;
            self.scheduler.started_outside(&spec);
            let object = facade.resume_workload(spec.clone(), found);
            self.objects.insert(spec.name().to_owned(), object);
            return None;
        }
        // [impl->swdd~agent-existing-workloads-replace-updated~2]
        Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, replace: Some((runtime, found)) }))
    }

    /// Turns an UpdateWorkload into operations: deletes first, an instance
    /// both deleted and added is an update.
    // [impl->swdd~agent-handle-deleted-before-added-workloads~1]
    async fn handle_update(&mut self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>) {
        let mut added: Vec<Option<WorkloadSpec>> = added.into_iter().filter(|s| self.is_ours(s)).map(Some).collect();
        let mut ops = Vec::new();
        for d in deleted {
            let again =
                added.iter_mut().find(|s| s.as_ref().is_some_and(|s| s.name() == d.instance_name.workload_name));
            match again.and_then(Option::take) {
                // [impl->swdd~agent-updates-deleted-and-added-workloads~1]
                Some(spec) => ops.push(WorkloadOperation::Update(spec, d)),
                // [impl->swdd~agent-deletes-workload~1]
                None => ops.push(WorkloadOperation::Delete(d)),
            }
        }
        for spec in added.into_iter().flatten() {
            match self.objects.get_mut(spec.name()) {
                Some(o) if o.instance_name == spec.instance_name && !o.deleting => {
                    ops.extend(self.wanted_again(spec));
                }
                // [impl->swdd~agent-update-on-add-known-workload~1]
                Some(o) => {
                    let old = no_dependents(&o.instance_name);
                    ops.push(WorkloadOperation::Update(spec, old));
                }
                // [impl->swdd~agent-added-creates-workload~1]
                None => ops.push(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec))),
            }
        }
        self.schedule(ops).await;
    }

    async fn execute(&mut self, op: WorkloadOperation) {
        match op {
            WorkloadOperation::Create(r) => self.execute_create(r).await,
            WorkloadOperation::Update(spec, deleted) => self.execute_update(spec, deleted).await,
            WorkloadOperation::UpdateDeleteOnly(deleted) => self.execute_update_delete_only(&deleted).await,
            WorkloadOperation::Delete(deleted) => self.execute_delete(deleted).await,
        }
    }

    // [impl->swdd~agent-executes-create-workload-operation~1]
    async fn execute_create(&mut self, r: ReusableWorkloadSpec) {
        let name = r.spec.name().to_owned();
        self.unsupported.remove(&name);
        let Some(facade) = self.facades.get(&r.spec.workload.runtime) else {
            return self.skip_unknown_runtime(r.spec).await;
        };
        if let Some(object) = self.objects.get_mut(&name) {
            // The object of an update whose delete ran before its create.
            object.update(Some(r.spec));
            return;
        }
        // [impl->swdd~agent-stores-running-workload~1]
        let object = facade.create_workload(r);
        self.objects.insert(name, object);
    }

    // [impl->swdd~agent-executes-update-workload-operation~1]
    async fn execute_update(&mut self, spec: WorkloadSpec, _deleted: DeletedWorkload) {
        let known_runtime = self.facades.contains_key(&spec.workload.runtime);
        match self.objects.get_mut(spec.name()) {
            Some(object) if known_runtime => object.update(Some(spec)),
            Some(object) => {
                object.delete();
                self.skip_unknown_runtime(spec).await;
            }
            // [impl->swdd~agent-add-on-update-missing-workload~1]
            None => self.execute_create(ReusableWorkloadSpec::new(spec)).await,
        }
    }

    // [impl->swdd~agent-executes-update-delete-only-workload-operation~1]
    async fn execute_update_delete_only(&mut self, deleted: &DeletedWorkload) {
        let name = &deleted.instance_name.workload_name;
        match self.objects.get_mut(name) {
            Some(object) if object.instance_name == deleted.instance_name => object.update(None),
            Some(_) => {}
            // Nothing of the old instance runs (it waited, or was
            // preempted): it is gone, unless the new one is the same.
            None => {
                let requeued = self.scheduler.queued_create(name).map(|s| &s.instance_name);
                if requeued != Some(&deleted.instance_name) {
                    self.reporter.report(&deleted.instance_name, ExecutionState::removed()).await;
                }
            }
        }
    }

    // [impl->swdd~agent-executes-delete-workload-operation~1]
    async fn execute_delete(&mut self, deleted: DeletedWorkload) {
        let instance = deleted.instance_name;
        let name = &instance.workload_name;
        match self.objects.get_mut(name) {
            Some(object) if object.instance_name == instance => object.delete(),
            _ => {
                // Nothing of this instance runs here (never created, an
                // unsupported runtime, or already replaced): it is gone.
                if self.unsupported.get(name) == Some(&instance) {
                    self.unsupported.remove(name);
                }
                self.reporter.report(&instance, ExecutionState::removed()).await;
            }
        }
    }

    /// A workload whose runtime this agent does not have is not run; it
    /// stays `Pending(StartingFailed)` naming the runtime.
    // [impl->swdd~agent-skips-unknown-runtime~1]
    // [impl->swdd~agent-uses-specified-runtime~1]
    async fn skip_unknown_runtime(&mut self, spec: WorkloadSpec) {
        let runtime = &spec.workload.runtime;
        let info = format!("runtime '{runtime}' is not supported by this agent");
        tracing::warn!("workload '{}': {info}", spec.instance_name);
        self.reporter
            .report(&spec.instance_name, ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info))
            .await;
        self.unsupported.insert(spec.name().to_owned(), spec.instance_name);
    }

    fn handle_runtime_event(&mut self, ev: RuntimeEvent) {
        match ev {
            RuntimeEvent::Changed { instance_name, workload_id, observed } => {
                if let Some(object) = self.objects.get(&instance_name.workload_name) {
                    object.sender().observed(instance_name, workload_id, observed);
                }
            }
            RuntimeEvent::ChangedById { workload_id, observed } => {
                for object in self.objects.values() {
                    object.sender().observed_by_id(workload_id.clone(), observed.clone());
                }
            }
            RuntimeEvent::Snapshot { runtime, taken_at, workloads } => {
                // [feature K7: orphans are removed on each reconcile]
                if let Some(facade) = self.facades.get(&runtime) {
                    let (objects, unsupported, scheduler) = (&self.objects, &self.unsupported, &self.scheduler);
                    let known =
                        |n: &str| objects.contains_key(n) || unsupported.contains_key(n) || scheduler.is_queued(n);
                    self.orphans.sweep(facade.connector(), &workloads, known);
                }
                let workloads = Arc::new(workloads);
                for object in self.objects.values() {
                    object.sender().snapshot(runtime.clone(), taken_at, workloads.clone());
                }
            }
            // [feature H4: the agent's Health condition]
            RuntimeEvent::Health { runtime, health } => {
                match health {
                    RuntimeHealth::Reachable => self.unreachable.remove(&runtime),
                    RuntimeHealth::Unreachable(why) => self.unreachable.insert(runtime, why),
                };
                let now = overall_health(&self.unreachable);
                self.health.send_if_modified(|h| std::mem::replace(h, now.clone()) != now);
            }
        }
    }

    fn handle_notice(&mut self, notice: LoopNotice) {
        match notice {
            LoopNotice::Deleted { instance_name } => {
                let name = &instance_name.workload_name;
                let done = self.objects.get(name).is_some_and(|o| o.deleting && o.instance_name == instance_name);
                if done {
                    self.objects.remove(name);
                }
            }
        }
    }
}

/// The agent's runtime health: the first unreachable runtime, if any.
fn overall_health(unreachable: &BTreeMap<String, String>) -> RuntimeHealth {
    match unreachable.iter().next() {
        Some((runtime, why)) => RuntimeHealth::Unreachable(format!("runtime '{runtime}': {why}")),
        None => RuntimeHealth::Reachable,
    }
}

/// A deletion of `instance` that no other workload waits for.
fn no_dependents(instance: &WorkloadInstanceName) -> DeletedWorkload {
    DeletedWorkload { instance_name: instance.clone(), dependencies: BTreeMap::new() }
}

/// Whether an existing workload found at startup can be taken over as it
/// is: it runs or has run to its end (its restart policy then applies).
fn resumable(state: &ExecutionState) -> bool {
    matches!(state.kind, StateKind::Running | StateKind::Succeeded | StateKind::Failed(_))
        && state.kind != StateKind::Failed(ank_common::execution_state::Failed::Unknown)
}

#[path = "runtime_manager_sched.rs"]
mod sched;

#[cfg(test)]
#[path = "runtime_manager_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "runtime_manager_policy_tests.rs"]
mod policy_tests;

#[cfg(test)]
#[path = "runtime_manager_retention_tests.rs"]
mod retention_tests;
#[cfg(test)]
#[path = "runtime_manager_scheduling_tests.rs"]
mod scheduling_tests;
