//! [`RuntimeManager`]: owns this agent's workload objects (name -> control
//! loop), one `RuntimeFacade` per runtime, the `WorkloadScheduler` and the
//! [`InstanceTable`](crate::runtime_manager::instances::InstanceTable), the one record of
//! every instance (state, generation, events), from which it alone reports
//! states to the server. It turns `ServerHello` (the full set, resuming
//! existing workloads) and `UpdateWorkload` (deletes first, then adds; an add
//! of a known name is an update) into `WorkloadOperation`s, lets the
//! scheduler hold back those whose dependencies, the quota or an isolated
//! job do not let them start, executes the ready ones, preempts what the
//! scheduler says, and re-evaluates the queue on every workload state
//! update and on the scheduler's tick (`runtime_manager_sched.rs`).
//!
//! In: requests via [`RuntimeManagerHandle`] (from the `AgentManager`: the
//! server's workloads and the other agents' states, a reconnect, the stop
//! before the agent exits), `RuntimeEvent`s from the state watchers and
//! checkers, the control loops' `LoopReport`s, the scheduler's tick. Out:
//! commands to the control loops (unbounded: the manager never waits for a
//! loop, while a loop waits for the manager when it is behind); states to
//! the server link; the quota use and the workload counts on watch channels.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ank_common::execution_state::Pending;
use ank_common::messages::DeletedWorkload;
use ank_common::quota::QuotaUsage;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::runtime_connectors::{ListedWorkload, RuntimeEvent, RuntimeRegistry};
use crate::server_link::ServerLinkHandle;
use crate::workload::control_loop::LoopContext;
use crate::workload::finished_store::FinishedStore;
use crate::workload::object::WorkloadObject;
use crate::workload::policy::RetryPolicy;
use crate::workload::retention::Retention;
use crate::workload::{LoopReport, StateReporter};
use crate::workload_operation::{Earlier, ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_scheduler::{SchedulerSettings, WorkloadScheduler};
pub use instances::WorkloadCounts;
use orphans::Orphans;
use reports::Outbox;
use runtime_facade::RuntimeFacade;
use runtimes::Runtimes;
use sched::Scheduling;

/// Capacity of the channel from the state watchers.
const RUNTIME_EVENT_CAPACITY: usize = 256;
/// Capacity of the channel from the control loops.
const LOOP_REPORT_CAPACITY: usize = 256;

enum Request {
    ServerHello(Vec<WorkloadSpec>),
    Update {
        added: Vec<WorkloadSpec>,
        deleted: Vec<DeletedWorkload>,
        /// Sent again by the server's TTL resync.
        resync: bool,
    },
    /// States of other agents' workloads.
    States(Vec<WorkloadState>),
    /// The link (re)connected: the server gets every state again.
    ResendAll,
    /// Stop every workload; ignore the server's workloads from now on.
    StopAll,
}

/// Cheap, cloneable handle to the [`RuntimeManager`] task.
#[derive(Debug, Clone)]
pub struct RuntimeManagerHandle {
    requests: mpsc::Sender<Request>,
    counts: watch::Receiver<WorkloadCounts>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::ServerHello(s) => write!(f, "ServerHello({} workloads)", s.len()),
            Request::Update { added, deleted, resync } => {
                write!(f, "Update(+{}, -{}{})", added.len(), deleted.len(), if *resync { ", resync" } else { "" })
            }
            Request::States(s) => write!(f, "States({})", s.len()),
            Request::ResendAll => write!(f, "ResendAll"),
            Request::StopAll => write!(f, "StopAll"),
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
        let _ = self.requests.send(Request::Update { added, deleted, resync: false }).await;
    }

    /// Workloads the server's TTL resync sent again: as an update, except
    /// that creates which gave up are not started over.
    pub async fn resync_workload(&self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>) {
        let _ = self.requests.send(Request::Update { added, deleted, resync: true }).await;
    }

    /// How many workloads of this agent there are, and how many run.
    pub fn workload_counts(&self) -> watch::Receiver<WorkloadCounts> {
        self.counts.clone()
    }

    /// New execution states of other agents' workloads.
    pub async fn update_workload_states(&self, states: Vec<WorkloadState>) {
        let _ = self.requests.send(Request::States(states)).await;
    }

    /// The link (re)connected: every state goes to the server again.
    pub async fn resend_all(&self) {
        let _ = self.requests.send(Request::ResendAll).await;
    }

    /// Stops and removes every workload of this node, as a ServerHello
    /// without workloads would; from then on the server's workloads are
    /// ignored.
    pub async fn stop_all(&self) {
        let _ = self.requests.send(Request::StopAll).await;
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
    /// The crash-loop delays of workloads without their own
    /// `restartBackoff`; `None`: off.
    pub restart_backoff: Option<ank_common::health_spec::BackoffSettings>,
    /// Tick, quota and preemption of the scheduler.
    pub scheduler: SchedulerSettings,
    /// Where what the workloads use of the quota is published (for the
    /// server link's load status).
    pub quota_used: watch::Sender<QuotaUsage>,
}

/// What the manager's loop waits for.
struct Inbox {
    requests: mpsc::Receiver<Request>,
    reports: mpsc::Receiver<LoopReport>,
    runtime_events: mpsc::Receiver<RuntimeEvent>,
    shutdown: CancellationToken,
}

/// What ended or was left behind.
struct Leftovers {
    /// Workloads that ended and were reaped, across agent restarts.
    finished: Arc<FinishedStore>,
    /// How long finished workloads are kept (by default for ever).
    retention: Retention,
    /// Workloads of this agent found in a runtime that nobody wants.
    orphans: Orphans,
}

/// The task owning all workload objects of this agent.
pub struct RuntimeManager {
    agent_name: String,
    runtimes: Runtimes,
    objects: HashMap<String, WorkloadObject>,
    scheduling: Scheduling,
    outbox: Outbox,
    inbox: Inbox,
    leftovers: Leftovers,
    /// Stopping every workload before the agent exits.
    stopping: bool,
    /// The listing of the agent's start, for the first hello.
    start_listing: Option<listing::StartListing>,
}

impl RuntimeManager {
    /// Starts every connector's state watcher (before any create, so no
    /// event is missed) and spawns the manager task.
    pub async fn start(
        config: RuntimeManagerConfig,
        registry: RuntimeRegistry,
        server: ServerLinkHandle,
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
        let (reporter, reports) = StateReporter::channel(LOOP_REPORT_CAPACITY);
        let registry = Arc::new(registry);
        let finished = Arc::new(FinishedStore::open(&config.io_folder));
        let ctx = LoopContext {
            registry: registry.clone(),
            reporter: reporter.clone(),
            create_permits: Arc::new(Semaphore::new(config.max_parallel_creates.max(1))),
            delete_permits: Arc::new(Semaphore::new(config.max_parallel_creates.max(1))),
            runtime_events: event_tx,
            retry_policy: config.retry_policy,
            io_folder: config.io_folder.clone(),
            control_interfaces: config.control_interfaces.clone(),
            retention: config.retention,
            finished: finished.clone(),
            restart_backoff: config.restart_backoff,
        };
        // [impl->swdd~agent-supports-multiple-runtime-connectors~1]
        let facades =
            registry.iter().map(|c| (c.name().to_owned(), RuntimeFacade::new(c.clone(), ctx.clone()))).collect();
        let scheduler =
            WorkloadScheduler::with_settings(config.agent_name.clone(), config.scheduler, (*registry).clone());
        let mut manager = RuntimeManager {
            agent_name: config.agent_name.clone(),
            runtimes: Runtimes::new(facades, unreachable),
            objects: HashMap::new(),
            scheduling: Scheduling { scheduler, next_tick: None, quota_used: config.quota_used },
            outbox: Outbox::new(&config.agent_name, server),
            inbox: Inbox { requests, reports, runtime_events, shutdown },
            leftovers: Leftovers { finished, retention: config.retention, orphans: Orphans::new() },
            stopping: false,
            start_listing: None,
        };
        let facades = manager.runtimes.iter().cloned().collect();
        manager.start_listing = Some(listing::StartListing::start(facades, config.agent_name.clone()));
        let handle = RuntimeManagerHandle { requests: tx, counts: manager.outbox.counts() };
        (handle, tokio::spawn(manager.run()))
    }

    async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.inbox.shutdown.cancelled() => break,
                () = sched::tick_due(self.scheduling.next_tick) => self.handle_tick().await,
                Some(req) = self.inbox.requests.recv() => self.handle_request(req).await,
                Some(report) = self.inbox.reports.recv() => self.handle_report(report).await,
                Some(ev) = self.inbox.runtime_events.recv() => self.handle_runtime_event(ev),
                else => break,
            }
            self.take_queued().await;
        }
        // Dropping the senders ends the loops; workloads keep running.
        self.objects.clear();
    }

    // [impl->swdd~agent-manager-listens-requests-from-server~1]
    async fn handle_request(&mut self, req: Request) {
        let health = self.runtimes.health();
        match req {
            Request::ServerHello(specs) => {
                // The full set went out at the connect; what the hello
                // renumbered goes again.
                let renumbered = self.outbox.table.hello(&specs);
                self.outbox.send_current(renumbered, &health);
                if self.stopping {
                    tracing::info!("stopping: the server's {} workloads are not started again", specs.len());
                } else {
                    self.handle_server_hello(specs).await
                }
            }
            Request::Update { .. } if self.stopping => {
                tracing::info!("stopping: a workload update of the server is ignored")
            }
            Request::Update { added, deleted, resync } => {
                tracing::debug!(
                    "workload {} from the server: {} added, {} deleted",
                    if resync { "resync" } else { "update" },
                    added.len(),
                    deleted.len()
                );
                self.outbox.table.deleted(deleted.iter().map(|d| d.instance_name.clone()));
                // New states of the added ones follow from their loops.
                let _ = self.outbox.table.added(&added);
                self.handle_update(added, deleted, resync).await
            }
            // [impl->swdd~agent-handles-update-workload-state-requests~1]
            Request::States(states) => {
                tracing::debug!("{} workload states of other agents received", states.len());
                self.outbox.table.others(&states);
                self.observe(&states).await
            }
            Request::ResendAll => {
                let all = self.outbox.table.all();
                self.outbox.send_current(all, &health);
            }
            Request::StopAll => {
                self.stopping = true;
                let count = self.outbox.table.counts().workloads;
                tracing::info!("stopping all {count} workloads of this agent before it exits");
                self.handle_server_hello(Vec::new()).await
            }
        }
    }

    fn is_ours(&self, spec: &WorkloadSpec) -> bool {
        let ours = spec.instance_name.agent_name == self.agent_name;
        if !ours {
            tracing::warn!("ignoring workload '{}' of another agent", spec.instance_name);
        }
        ours
    }

    /// Existing workloads of this agent in all runtimes, by instance name.
    async fn list_existing(&self) -> listing::Existing {
        listing::list_existing(self.runtimes.iter().cloned().collect(), self.agent_name.clone(), false).await
    }

    /// What exists in the runtimes for a hello: the listing of the agent's
    /// start when it is still valid (the first hello), else a new one; with
    /// which of the two it is.
    async fn existing_for_hello(&mut self) -> (listing::Existing, &'static str) {
        if self.start_listing.is_some() {
            // Events already sent count before the hello: one of them
            // makes the start listing out of date.
            while let Ok(ev) = self.inbox.runtime_events.try_recv() {
                self.handle_runtime_event(ev);
            }
        }
        if let Some(start) = self.start_listing.take()
            && let Some(existing) = start.take().await
        {
            return (existing, "from the listing of the agent's start");
        }
        (self.list_existing().await, "listed")
    }

    /// The full set of this agent's workloads, after every (re)connect.
    // [impl->swdd~agent-initial-list-existing-workloads~1]
    async fn handle_server_hello(&mut self, specs: Vec<WorkloadSpec>) {
        let desired: BTreeMap<String, WorkloadSpec> =
            specs.into_iter().filter(|s| self.is_ours(s)).map(|s| (s.name().to_owned(), s)).collect();
        let began = tokio::time::Instant::now();
        let (mut existing, source) = self.existing_for_hello().await;
        tracing::debug!(
            "server hello with {} workloads; {} existing ones {source}, in {:.1} ms",
            desired.len(),
            existing.len(),
            began.elapsed().as_secs_f64() * 1e3
        );
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
        for instance in self.scheduling.scheduler.queued_creates() {
            if !desired.contains_key(&instance.workload_name) {
                ops.push(WorkloadOperation::Delete(no_dependents(&instance)));
            }
        }
        self.runtimes.unsupported.retain(|name, _| desired.contains_key(name));
        // [feature K7: a workload deleted while the agent was away forgets that it finished]
        self.leftovers.finished.retain(|name| desired.contains_key(name));
        for spec in desired.into_values() {
            if let Some(op) = self.hello_operation(spec, &mut existing) {
                ops.push(op);
            }
        }
        for (_, (runtime, found)) in existing {
            // [impl->swdd~agent-existing-workloads-delete-unneeded~1]
            if let Some(facade) = self.runtimes.get(&runtime) {
                self.leftovers.orphans.remove(facade.connector(), found);
            }
        }
        self.leftovers.orphans.arm();
        self.schedule(ops).await;
    }

    /// What to do with one desired workload of a hello; resumes it at once
    /// when it still runs unchanged.
    fn hello_operation(
        &mut self,
        spec: WorkloadSpec,
        existing: &mut BTreeMap<WorkloadInstanceName, (String, ListedWorkload)>,
    ) -> Option<WorkloadOperation> {
        // Already waiting in the queue (after an update whose old instance
        // went first, its loop is still there): it waits there.
        match self.scheduling.scheduler.queued_create(spec.name()) {
            Some(queued) if *queued == spec => return None,
            Some(_) if self.objects.contains_key(spec.name()) => {
                return Some(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec)));
            }
            _ => {}
        }
        if let Some(object) = self.objects.get_mut(spec.name()) {
            if object.instance_name == spec.instance_name && !object.deleting {
                // Wanted as it is: a delete waiting for its dependents is
                // called off; the loop reports its state again when nothing
                // changed, or finishes an update whose delete failed before.
                return self.wanted_again(spec, false);
            }
            return Some(WorkloadOperation::Update(spec, no_dependents(&object.instance_name)));
        }
        // [impl->swdd~agent-existing-workloads-starts-new-if-not-found~1]
        let Some((runtime, found)) = existing.remove(&spec.instance_name) else {
            // [feature K7: a reaped workload is not re-run after an agent restart]
            if let Some(state) = self.leftovers.finished.final_state(&spec)
                && let Some(facade) = self.runtimes.get(&spec.workload.runtime)
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
            let earlier = earlier.and_then(|i| existing.remove(&i)).map(|(rt, w)| Earlier::Replace(rt, w.workload_id));
            return Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }));
        };
        let facade = self.runtimes.get(&runtime).filter(|_| runtime == spec.workload.runtime);
        match facade.map(|f| (f, self.found_unchanged(&found.state, f))) {
            Some((facade, Found::Resume)) => {
                // [impl->swdd~agent-existing-workloads-resume-existing~2]
                // [impl->swdd~agent-stores-running-workload~1]
                self.scheduling.scheduler.started_outside(&spec);
                let object = facade.resume_workload(spec.clone(), found);
                self.objects.insert(spec.name().to_owned(), object);
                None
            }
            Some((_, Found::StartAgain)) => {
                // [impl->swdd~agent-existing-workloads-reuse-unmodified~1]
                let earlier = Some(Earlier::Reuse(runtime, found.workload_id));
                Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }))
            }
            Some((_, Found::Replace)) | None => {
                // [impl->swdd~agent-existing-workloads-replace-updated~2]
                let earlier = Some(Earlier::Replace(runtime, found.workload_id));
                Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }))
            }
        }
    }

    /// What the agent does with an unchanged workload of its desired state
    /// that it finds at its start (or a reconnect) in `state`, as Ankaios
    /// does whatever the restart policy: a running one is taken over; one
    /// that succeeded is started again in place (its logs stay); any other
    /// (failed, created but never started, paused) is removed and created
    /// anew. With the opt-in retention of its end (`--retain-succeeded`,
    /// `--retain-failed`), a finished one is taken over instead and stays
    /// finished until it is reaped, as a reaped one is not run again.
    fn found_unchanged(&self, state: &ExecutionState, facade: &RuntimeFacade) -> Found {
        match state.kind {
            StateKind::Running => Found::Resume,
            _ if self.leftovers.retention.of(state).is_some() => Found::Resume,
            StateKind::Succeeded if facade.connector().supports_start() => Found::StartAgain,
            _ => Found::Replace,
        }
    }

    /// Turns an UpdateWorkload into operations: deletes first, an instance
    /// both deleted and added is an update.
    // [impl->swdd~agent-handle-deleted-before-added-workloads~1]
    async fn handle_update(&mut self, added: Vec<WorkloadSpec>, deleted: Vec<DeletedWorkload>, resync: bool) {
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
            // The new instance of an update waits in the queue (its old one
            // was removed, or is being): the spec goes there, not to the
            // old instance's loop, which would start it at once.
            if self.scheduling.scheduler.queued_create(spec.name()).is_some() {
                ops.push(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec)));
                continue;
            }
            match self.objects.get_mut(spec.name()) {
                Some(o) if o.instance_name == spec.instance_name && !o.deleting => {
                    ops.extend(self.wanted_again(spec, resync));
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
        self.runtimes.unsupported.remove(&name);
        let Some(facade) = self.runtimes.get(&r.spec.workload.runtime) else {
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
        let known_runtime = self.runtimes.contains(&spec.workload.runtime);
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
                let requeued = self.scheduling.scheduler.queued_create(name).map(|s| &s.instance_name);
                if requeued != Some(&deleted.instance_name) {
                    self.outbox.state(&deleted.instance_name, ExecutionState::removed());
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
                if self.runtimes.unsupported.get(name) == Some(&instance) {
                    self.runtimes.unsupported.remove(name);
                }
                self.outbox.state(&instance, ExecutionState::removed());
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
        let state = ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info);
        self.outbox.state(&spec.instance_name, state);
        self.runtimes.unsupported.insert(spec.name().to_owned(), spec.instance_name);
    }

    fn handle_runtime_event(&mut self, ev: RuntimeEvent) {
        if !matches!(ev, RuntimeEvent::Health { .. })
            && let Some(start) = self.start_listing.take()
        {
            start.discard();
        }
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
                if let Some(facade) = self.runtimes.get(&runtime) {
                    let (objects, unsupported) = (&self.objects, &self.runtimes.unsupported);
                    let scheduler = &self.scheduling.scheduler;
                    let known =
                        |n: &str| objects.contains_key(n) || unsupported.contains_key(n) || scheduler.is_queued(n);
                    self.leftovers.orphans.sweep(facade.connector(), &workloads, known);
                }
                let workloads = Arc::new(workloads);
                for object in self.objects.values() {
                    object.sender().snapshot(runtime.clone(), taken_at, workloads.clone());
                }
            }
            // [feature H4: the agent's Health condition]
            // The conditions of every state change with it.
            RuntimeEvent::Health { runtime, health } => {
                if self.runtimes.set(runtime, health) {
                    let all = self.outbox.table.all();
                    self.outbox.send_current(all, &self.runtimes.health());
                }
            }
        }
    }
}

/// A deletion of `instance` that no other workload waits for.
fn no_dependents(instance: &WorkloadInstanceName) -> DeletedWorkload {
    DeletedWorkload { instance_name: instance.clone(), dependencies: BTreeMap::new() }
}

/// What becomes of an unchanged workload found at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Taken over as it is.
    Resume,
    /// Its container is started again (`podman start`).
    StartAgain,
    /// Removed, then created anew.
    Replace,
}

mod hysteresis;
pub mod instances;
mod listing;
mod orphans;
mod reports;
pub(crate) mod runtime_facade;
mod runtimes;
mod sched;

#[cfg(test)]
mod crash_loop_tests;
#[cfg(test)]
mod listing_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod retention_tests;
#[cfg(test)]
mod scheduling_tests;
#[cfg(test)]
mod tests;
