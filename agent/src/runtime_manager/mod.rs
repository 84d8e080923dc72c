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
//! update and on the scheduler's tick (`sched.rs`).
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

use ank_common::WorkloadInstanceName;
use ank_common::messages::DeletedWorkload;
use ank_common::quota::QuotaUsage;
use ank_common::workload::WorkloadSpec;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::runtime_connectors::{RuntimeEvent, RuntimeRegistry};
use crate::server_link::ServerLinkHandle;
use crate::workload::control_loop::LoopContext;
use crate::workload::finished_store::FinishedStore;
use crate::workload::object::WorkloadObject;
use crate::workload::policy::RetryPolicy;
use crate::workload::retention::Retention;
use crate::workload::{LoopReport, StateReporter};
use crate::workload_operation::{ReusableWorkloadSpec, WorkloadOperation};
use crate::workload_scheduler::{SchedulerSettings, WorkloadScheduler};
pub use instances::WorkloadCounts;
use orphans::Orphans;
use reports::Outbox;
use runtime_facade::RuntimeFacade;
use runtimes::Runtimes;
use sched::Scheduling;

use handle::Request;
pub use handle::RuntimeManagerHandle;

/// Capacity of the channel from the state watchers.
const RUNTIME_EVENT_CAPACITY: usize = 256;
/// Capacity of the channel from the control loops.
const LOOP_REPORT_CAPACITY: usize = 256;

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

mod handle;
mod hello;
mod hysteresis;
pub mod instances;
mod listing;
mod operations;
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
