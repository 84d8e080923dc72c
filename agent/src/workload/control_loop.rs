//! [`WorkloadControlLoop`]: one task per workload, owning the workload's
//! current instance and its id in the runtime. It executes Create / Resume /
//! Update / Delete against the runtime connector one at a time (so a
//! workload never has two operations in flight), retries failed creates on
//! a timer, restarts exited workloads as their restart policy says (after
//! the delay of its crash-loop limits, when set: [`super::crash_loop`]), and
//! turns observations of the state watcher or checker into reported states.
//!
//! In: `WorkloadCommand`s from the `RuntimeManager` (through the
//! `WorkloadCommandSender`). Out: states, events and finished deletes to
//! the `RuntimeManager` via the `StateReporter`.
//!
//! Mechanism lives here; every decision (retry or give up, restart or not,
//! which observation is which state) is a function of [`super::policy`].

use std::path::PathBuf;
use std::sync::Arc;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::health_spec::BackoffSettings;
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

use super::crash_loop::CrashLoop;
use super::policy::{self, AfterCreateFailure, CreateRetries, RetryPolicy};
use super::retention::{self, PendingReap, Retention};
use super::{StateReporter, WorkloadCommand, WorkloadCommandSender};
use crate::control_interface::registry::ControlInterfaces;
use crate::probes::ProbeSet;
use crate::runtime_connectors::{
    CreateOptions, ListedWorkload, Observed, RuntimeConnector, RuntimeError, RuntimeEventSender, RuntimeRegistry,
    StateChecker, WorkloadId, lost_state,
};
use crate::workload::finished_store::FinishedStore;
use crate::workload::probe_runner::ProbeRunner;
use crate::workload_files;
use crate::workload_operation::Earlier;

/// How long a create holds its slot of `--max-parallel-creates`: one still
/// running after this (an image pull, a large kube play) waits on the
/// network or the disk, not on the CPU, and lets the next create start.
pub const SLOW_CREATE: std::time::Duration = std::time::Duration::from_secs(2);

// [feature K7: the reaping half of the control loop]
mod bounded;
#[cfg(test)]
mod footprint_tests;
mod reaping;
// [feature H6: the probes of a running workload]
mod probing;
#[cfg(test)]
mod probing_tests;
mod restarts;
#[cfg(test)]
mod resync_tests;
#[cfg(test)]
mod test_context;

/// The workload as it exists in the runtime.
#[derive(Debug)]
struct Current {
    id: WorkloadId,
    runtime: String,
    /// When the agent learned that the workload exists.
    known_since: Instant,
    /// When the last event about it arrived.
    last_event: Option<Instant>,
    /// Whether it was seen running: later create/init events (the event
    /// stream lags behind) must not report Pending again.
    started: bool,
    /// When the exit was read from conmon's exit file, until the event
    /// stream or a reconcile says so too; meanwhile their older Running or
    /// Starting news is dropped.
    exit_ahead: Option<Instant>,
    /// The connector's per-workload checker, if it has one; dropping stops it.
    _checker: Option<StateChecker>,
    /// The probes of the running container; dropping stops them.
    probes: Option<ProbeRunner>,
}

impl Current {
    /// A workload the agent learned of just now.
    fn new(id: WorkloadId, runtime: String, started: bool, checker: Option<StateChecker>) -> Self {
        Self {
            id,
            runtime,
            known_since: Instant::now(),
            last_event: None,
            started,
            exit_ahead: None,
            _checker: checker,
            probes: None,
        }
    }
}

/// Where an observation of the current workload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The runtime's event stream (or a connector's state checker).
    Stream,
    /// conmon's exit file, read ahead of the stream's `died` event.
    ExitFile,
}

/// Everything a control loop needs from its surroundings.
#[derive(Clone)]
pub(crate) struct LoopContext {
    pub registry: Arc<RuntimeRegistry>,
    pub reporter: StateReporter,
    pub create_permits: Arc<Semaphore>,
    /// Bounds the deletes as `create_permits` bounds the creates.
    pub delete_permits: Arc<Semaphore>,
    /// Where per-workload state checkers send their observations.
    pub runtime_events: RuntimeEventSender,
    pub retry_policy: RetryPolicy,
    /// `<run folder>/<agent>_io`: one folder per workload instance below it.
    pub io_folder: PathBuf,
    /// The control interfaces of this agent's workloads.
    pub control_interfaces: ControlInterfaces,
    /// How long finished workloads are kept.
    pub retention: Retention,
    /// The record of reaped workloads, kept across agent restarts.
    pub finished: Arc<FinishedStore>,
    /// The crash-loop delays of workloads without their own
    /// `restartBackoff` (`--restart-backoff`); `None`: off.
    pub restart_backoff: Option<BackoffSettings>,
}

impl LoopContext {
    /// The host folder of one workload instance, `<workload>.<id>` as in
    /// Ankaios: its `files` and its `control_interface` live there, so a
    /// container Ankaios created mounts what this agent maintains.
    pub fn workload_folder(&self, instance: &WorkloadInstanceName) -> PathBuf {
        self.io_folder.join(instance.folder_name())
    }

    /// Removes the files of a deleted instance: its `files` folder, the
    /// instance folder when nothing else is left in it, and the folder
    /// `<workload>.<id>.<agent>` that earlier versions of this agent wrote
    /// files to.
    pub async fn remove_workload_files(&self, instance: &WorkloadInstanceName) {
        workload_files::remove(&self.workload_folder(instance)).await;
        workload_files::remove_all(&self.io_folder.join(instance.to_string())).await;
    }
}

/// The control loop of one workload.
pub(crate) struct WorkloadControlLoop {
    ctx: LoopContext,
    commands: mpsc::UnboundedReceiver<WorkloadCommand>,
    spec: Option<WorkloadSpec>,
    current: Option<Current>,
    /// Set while a delete is requested or running: observations are ignored.
    deleting: bool,
    /// The create retries since the last create or update command.
    retries: CreateRetries,
    /// When the next create retry is due.
    retry_at: Option<Instant>,
    /// The state reported last, so that repeats (a reconcile, a lagging
    /// event) are not reported again.
    last_reported: Option<(WorkloadInstanceName, ExecutionState)>,
    /// When the finished workload's container is removed.
    reap: Option<PendingReap>,
    /// The workload ended and its container was removed: it is not run
    /// again while its spec stays the same.
    reaped: bool,
    /// The crash-loop limits of its restarts (off by default).
    crash_loop: CrashLoop,
    /// When a restart the crash loop delayed is due, and the state it
    /// restarts after.
    restart_at: Option<(Instant, ExecutionState)>,
    /// Commands of the loop's own probe runner (a liveness failure).
    own: WorkloadCommandSender,
    own_commands: mpsc::UnboundedReceiver<WorkloadCommand>,
}

impl WorkloadControlLoop {
    pub fn new(ctx: LoopContext, commands: mpsc::UnboundedReceiver<WorkloadCommand>) -> Self {
        let retries = CreateRetries::new(ctx.retry_policy);
        let crash_loop = CrashLoop::new(ctx.restart_backoff);
        let (own, own_commands) = WorkloadCommandSender::channel();
        Self {
            ctx,
            commands,
            spec: None,
            current: None,
            deleting: false,
            retries,
            retry_at: None,
            last_reported: None,
            reap: None,
            reaped: false,
            crash_loop,
            restart_at: None,
            own,
            own_commands,
        }
    }

    /// Runs until the `RuntimeManager` drops the command sender.
    ///
    /// The loop's state lives in a box of its own and its task holds a
    /// pointer: an `async fn` taking `self` would keep two copies of it in
    /// the task (its argument and the moved local), for every workload
    /// while idle.
    pub fn run(self) -> impl Future<Output = ()> + Send {
        let mut this = Box::new(self);
        async move { this.serve().await }
    }

    async fn serve(&mut self) {
        loop {
            let retry_at = self.retry_at;
            let retry_due = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let reap_due = retention::until(self.reap.as_ref().map(|r| r.at));
            let restart_due = retention::until(self.restart_at.as_ref().map(|r| r.0));
            // The handlers' futures are boxed: inline, the largest of them
            // (a create with its runtime calls) would size every idle loop.
            tokio::select! {
                cmd = self.commands.recv() => match cmd {
                    Some(cmd) => Box::pin(self.handle(cmd)).await,
                    None => break,
                },
                Some(cmd) = self.own_commands.recv() => Box::pin(self.handle(cmd)).await,
                () = retry_due => {
                    self.retry_at = None;
                    Box::pin(self.handle_retry()).await;
                }
                () = reap_due => Box::pin(self.handle_reap()).await,
                () = restart_due => Box::pin(self.handle_restart_due()).await,
            }
        }
    }

    async fn handle(&mut self, cmd: WorkloadCommand) {
        match cmd {
            WorkloadCommand::Create { spec, earlier } => self.handle_create(*spec, earlier).await,
            WorkloadCommand::Resume { spec, workload_id, state } => self.handle_resume(*spec, workload_id, state).await,
            WorkloadCommand::Finished { spec, state } => self.handle_finished(*spec, state).await,
            WorkloadCommand::Update(spec) => self.handle_update(spec.map(|s| *s)).await,
            WorkloadCommand::Resync(spec) => self.handle_resync(*spec).await,
            WorkloadCommand::Delete => self.handle_delete().await,
            WorkloadCommand::Observed { instance_name, workload_id, observed } => {
                self.handle_observed(&instance_name, &workload_id, observed, Source::Stream).await
            }
            WorkloadCommand::ObservedById { workload_id, observed } => {
                if let Some(instance) = self.spec.as_ref().map(|s| s.instance_name.clone()) {
                    self.handle_observed(&instance, &workload_id, observed, Source::ExitFile).await;
                }
            }
            WorkloadCommand::Snapshot { runtime, taken_at, workloads } => {
                self.handle_snapshot(&runtime, taken_at, &workloads).await
            }
            WorkloadCommand::Preempt { state } => self.handle_preempt(state).await,
            WorkloadCommand::LivenessFailed { workload_id, reason } => {
                self.handle_liveness_failed(&workload_id, reason).await
            }
        }
    }

    /// Preemption is not a failure: the container goes without Stopping /
    /// Removed states and without the restart policy (no retry is used up);
    /// then the workload shows `state`. Observations are ignored from now on.
    // [feature K4: a preempted workload's container is removed]
    async fn handle_preempt(&mut self, state: ExecutionState) {
        self.retry_at = None;
        self.restart_at = None;
        self.deleting = true;
        if let Some(current) = self.current.take() {
            self.remove_silently(&current.runtime, &current.id).await;
        }
        if let Some(instance) = self.spec.as_ref().map(|s| s.instance_name.clone()) {
            self.ctx.control_interfaces.close(&instance.workload_name);
            self.report(&instance, state).await;
        }
    }

    async fn report(&mut self, instance: &WorkloadInstanceName, state: ExecutionState) {
        let state = self.crash_loop.seen(state, Instant::now());
        let latest = Some((instance.clone(), state));
        if self.last_reported == latest {
            return;
        }
        self.last_reported = latest;
        if let Some((instance, state)) = self.last_reported.clone() {
            // First, so that the readiness is known when the state arrives.
            self.follow_probes(&instance, &state).await;
            self.ctx.reporter.report(&instance, state).await;
        }
    }

    /// Reports the last state again, e.g. after a waiting delete was
    /// called off and the server shows `Stopping(WaitingToStop)`.
    async fn report_again(&self) {
        if let Some((instance, state)) = &self.last_reported {
            self.ctx.reporter.report(instance, state.clone()).await;
        }
    }

    fn connector(&self, runtime: &str) -> Option<Arc<dyn RuntimeConnector>> {
        self.ctx.registry.get(runtime)
    }

    // [impl->swdd~agent-workload-control-loop-executes-create~3]
    async fn handle_create(&mut self, spec: WorkloadSpec, earlier: Option<Earlier>) {
        let reuse = match earlier {
            Some(Earlier::Replace(runtime, old)) => {
                self.remove_silently(&runtime, &old).await;
                None
            }
            Some(Earlier::Reuse(runtime, id)) => Some((runtime, id)),
            None => None,
        };
        self.deleting = false;
        self.current = None;
        self.retries.reset();
        self.retry_at = None;
        self.restart_at = None;
        self.crash_loop.configure(spec.workload.restart_backoff.as_ref());
        self.reap = None;
        self.reaped = false;
        // It runs anew: an earlier reaped run of this workload is history.
        self.ctx.finished.forget(spec.name());
        let instance = spec.instance_name.clone();
        self.spec = Some(spec);
        self.report(
            &instance,
            ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Triggered at runtime."),
        )
        .await;
        match reuse {
            Some((runtime, id)) => self.try_start_again(runtime, id).await,
            None => self.try_create().await,
        }
    }

    /// Runs the exited container `id` of the current spec again in place
    /// (its logs stay). When that fails, the container is removed and the
    /// failure handled as a failed create: the retry creates it anew (as
    /// Ankaios does).
    // [impl->swdd~workload-control-loop-reuses-bundle-on-successful-restart~1]
    async fn try_start_again(&mut self, runtime: String, id: WorkloadId) {
        let Some(spec) = self.spec.clone() else { return };
        let instance = &spec.instance_name;
        let Some(connector) = self.connector(&runtime) else { return self.try_create().await };
        // The pipes survived; serve them again (a no-op when they are open).
        if let Err(e) = self.open_control_interface(&spec) {
            tracing::warn!("workload '{instance}': {e}");
        }
        match connector.start(&spec, &id).await {
            Ok(()) => {
                tracing::info!("workload '{instance}' started again in '{id}'");
                let checker = connector.start_state_checker(instance, &id, self.ctx.runtime_events.clone());
                let started = connector.create_returns_running();
                self.current = Some(Current::new(id, runtime, started, checker));
                if started {
                    self.report(instance, ExecutionState::running()).await;
                }
            }
            Err(e) => {
                tracing::warn!("starting workload '{instance}' again in '{id}' failed: {e}; it is created anew");
                self.remove_silently(&runtime, &id).await;
                self.handle_create_failure(instance, e).await;
            }
        }
    }

    /// One create attempt of the current spec.
    async fn try_create(&mut self) {
        let Some(spec) = self.spec.clone() else { return };
        let instance = &spec.instance_name;
        let runtime = spec.workload.runtime.clone();
        // [impl->swdd~agent-skips-unknown-runtime~1]
        let Some(connector) = self.connector(&runtime) else {
            let info = format!("runtime '{runtime}' is not supported by this agent");
            tracing::warn!("workload '{instance}': {info}");
            return self
                .report(instance, ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info))
                .await;
        };
        if !spec.workload.files.is_empty()
            && let Some(why) = connector.files_unsupported()
        {
            return self.handle_create_failure(instance, RuntimeError::InvalidConfig(why.to_owned())).await;
        }
        let options = match self.create_options(&spec).await {
            Ok(options) => options,
            Err(e) => return self.handle_create_failure(instance, e).await,
        };
        // Bounds how many creates run at once (parallel `podman run`s beyond
        // a few per core only contend for podman's locks, the CPU and the
        // memory); see `bounded`.
        let what = format!("workload '{instance}': create");
        let result =
            bounded::run(&self.ctx.create_permits, SLOW_CREATE, &what, connector.create(&spec, &options)).await;
        match result {
            Ok(id) => {
                tracing::info!("workload '{instance}' created as '{id}'");
                let checker = connector.start_state_checker(instance, &id, self.ctx.runtime_events.clone());
                let started = connector.create_returns_running();
                self.current = Some(Current::new(id, runtime, started, checker));
                if started {
                    self.report(instance, ExecutionState::running()).await;
                }
            }
            Err(e) => self.handle_create_failure(instance, e).await,
        }
    }

    /// What the runtime gets from the host for a create: the workload's
    /// files and its control-interface folder.
    async fn create_options(&self, spec: &WorkloadSpec) -> Result<CreateOptions, RuntimeError> {
        let control_interface = self.open_control_interface(spec)?;
        if spec.workload.files.is_empty() {
            return Ok(CreateOptions { control_interface, files: Vec::new() });
        }
        let folder = self.ctx.workload_folder(&spec.instance_name);
        let files = workload_files::prepare(&folder, &spec.workload.files)
            .await
            .map_err(|e| RuntimeError::InvalidConfig(e.to_string()))?;
        Ok(CreateOptions { control_interface, files })
    }

    /// Starts (or keeps) the workload's control interface if it has allow
    /// rules or a `selfReport` probe.
    fn open_control_interface(&self, spec: &WorkloadSpec) -> Result<Option<PathBuf>, RuntimeError> {
        let access = &spec.workload.control_interface_access;
        self.ctx
            .control_interfaces
            .open_for(&self.ctx.io_folder, &spec.instance_name, access, ProbeSet::of(spec).wants_self_report())
            .map_err(|e| RuntimeError::InvalidConfig(format!("cannot create the control interface pipes: {e}")))
    }

    async fn handle_create_failure(&mut self, instance: &WorkloadInstanceName, e: RuntimeError) {
        tracing::warn!("creating workload '{instance}' failed (retry {}): {e}", self.retries.done());
        match self.retries.after_failure(&e) {
            AfterCreateFailure::Retry { at, report } => {
                self.retry_at = Some(at);
                if let Some(state) = report {
                    self.report(instance, state).await;
                }
            }
            AfterCreateFailure::GiveUp(state) => self.report(instance, state).await,
        }
    }

    // [impl->swdd~agent-workload-control-loop-executes-retry~1]
    async fn handle_retry(&mut self) {
        if self.deleting || self.current.is_some() {
            return;
        }
        self.retries.count_retry();
        self.try_create().await;
    }

    // [impl->swdd~agent-workload-control-loop-executes-resume~1]
    async fn handle_resume(&mut self, spec: WorkloadSpec, id: WorkloadId, state: ExecutionState) {
        tracing::info!("resuming workload '{}' in '{id}'", spec.instance_name);
        let runtime = spec.workload.runtime.clone();
        let checker = self
            .connector(&runtime)
            .and_then(|c| c.start_state_checker(&spec.instance_name, &id, self.ctx.runtime_events.clone()));
        self.deleting = false;
        self.reap = None;
        self.reaped = false;
        // The pipes survived the agent's restart; serve them again.
        if let Err(e) = self.open_control_interface(&spec) {
            tracing::warn!("workload '{}': {e}", spec.instance_name);
        }
        let started = state.kind == StateKind::Running;
        self.crash_loop.configure(spec.workload.restart_backoff.as_ref());
        self.current = Some(Current::new(id, runtime, started, checker));
        let instance = spec.instance_name.clone();
        self.spec = Some(spec);
        self.report(&instance, state.clone()).await;
        self.apply_restart_policy(&state).await;
    }

    // [impl->swdd~agent-workload-control-loop-executes-update~2]
    // [impl->swdd~agent-workload-control-loop-executes-update-delete-only~1]
    // [impl->swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~1]
    // [impl->swdd~agent-workload-control-loop-reset-retry-attempts-on-update~1]
    async fn handle_update(&mut self, spec: Option<WorkloadSpec>) {
        let unchanged = |s: &&WorkloadSpec| self.spec.as_ref().is_some_and(|cur| policy::runs_the_same(cur, s));
        if let Some(same) = spec.as_ref().filter(unchanged).filter(|_| !self.deleting) {
            // [feature K7: a reaped workload is not run again while its spec stays]
            // The same spec again while its creates are retried (the server's
            // resync of an instance that is not Ready) is no update: the
            // retries go on where they are (the limit still comes; the
            // backoff is neither reset nor doubled by a parallel create).
            if self.current.is_some() || self.reaped || self.retry_at.is_some() {
                tracing::debug!("workload '{}' is unchanged", same.instance_name);
                let old = self.spec.replace(same.clone());
                self.probes_changed(old.as_ref()).await;
                self.restart_backoff_changed().await;
                return self.report_again().await;
            }
            // Same spec, but nothing runs (its creates gave up, or it was
            // lost): create it again, without a delete in between.
            let same = same.clone();
            return self.handle_create(same, None).await;
        }
        self.retry_at = None;
        self.retries.reset();
        // A new spec starts the crash-loop limits over.
        self.restart_at = None;
        self.crash_loop.reset();
        self.deleting = true;
        if !self.delete_current().await {
            // [impl->swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1]
            return;
        }
        // [impl->swdd~agent-workload-control-loop-update-create-failed-allows-retry~1]
        if let Some(spec) = spec {
            self.handle_create(spec, None).await;
        }
    }

    /// The server's TTL resync sent the spec again. It may have crossed the
    /// report that the creates gave up: that stays so, and is reported
    /// again (only a changed spec or a rerun starts them over). Otherwise
    /// it is an update.
    async fn handle_resync(&mut self, spec: WorkloadSpec) {
        let gave_up = self.last_reported.as_ref().is_some_and(|(instance, state)| {
            *instance == spec.instance_name && state.kind == StateKind::Pending(Pending::StartingFailed)
        });
        let same = self.spec.as_ref().is_some_and(|cur| policy::runs_the_same(cur, &spec));
        if gave_up && same && !self.deleting {
            tracing::debug!("workload '{}': a resync does not start its given-up creates over", spec.instance_name);
            self.spec = Some(spec);
            return self.report_again().await;
        }
        self.handle_update(Some(spec)).await
    }

    // [impl->swdd~agent-workload-control-loop-executes-delete~2]
    async fn handle_delete(&mut self) {
        self.retry_at = None;
        self.restart_at = None;
        self.reap = None;
        self.deleting = true;
        let instance = self.spec.as_ref().map(|s| s.instance_name.clone());
        // [impl->swdd~agent-workload-control-loop-delete-failed-allows-retry~1]
        if !self.delete_current().await {
            return;
        }
        // [impl->swdd~agent-workload-control-loop-delete-broken-allowed~1]
        self.reaped = false;
        if let Some(instance_name) = instance {
            // A deleted workload forgets that it finished.
            self.ctx.finished.forget(&instance_name.workload_name);
            self.ctx.control_interfaces.close(&instance_name.workload_name);
            self.ctx.reporter.deleted(instance_name).await;
        }
    }

    /// Deletes the current instance, reporting Stopping(RequestedAtRuntime)
    /// and then Removed or Stopping(DeleteFailed). True unless the delete
    /// failed; nothing to delete counts as done.
    async fn delete_current(&mut self) -> bool {
        let Some(instance) = self.spec.as_ref().map(|s| s.instance_name.clone()) else { return true };
        self.report(&instance, ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime))).await;
        let Some(current) = self.current.take() else {
            // [impl->swdd~agent-workload-control-loop-update-broken-allowed~1]
            self.spec = None;
            self.report(&instance, ExecutionState::removed()).await;
            return true;
        };
        let result = self.bounded_delete(&current.runtime, &current.id).await;
        match result {
            Ok(()) => {
                if self.spec.take().is_some_and(|s| !s.workload.files.is_empty()) {
                    self.ctx.remove_workload_files(&instance).await;
                }
                self.report(&instance, ExecutionState::removed()).await;
                true
            }
            Err(e) => {
                tracing::warn!("deleting workload '{instance}' failed: {e}");
                let failed = ExecutionState::with_info(StateKind::Stopping(Stopping::DeleteFailed), e.to_string());
                self.report(&instance, failed).await;
                // Keep it so that a later delete or update can try again.
                self.current = Some(current);
                false
            }
        }
    }

    /// Removes a workload without reporting states for it.
    // [impl->swdd~agent-delete-old-workload-without-sending-workload-states~1]
    async fn remove_silently(&self, runtime: &str, id: &WorkloadId) {
        if let Err(e) = self.bounded_delete(runtime, id).await {
            tracing::warn!("removing stale workload '{id}' failed: {e}");
        }
    }

    /// Deletes `id` holding a delete permit (see `bounded`).
    pub(super) async fn bounded_delete(&self, runtime: &str, id: &WorkloadId) -> Result<(), RuntimeError> {
        let Some(c) = self.connector(runtime) else {
            return Err(RuntimeError::delete(crate::runtime_connectors::RuntimeFailure::NotSupported(
                runtime.to_owned(),
            )));
        };
        let what = format!("deleting '{id}'");
        bounded::run(&self.ctx.delete_permits, SLOW_CREATE, &what, c.delete(id)).await
    }

    // [impl->swdd~workload-control-loop-receives-workload-states~1]
    async fn handle_observed(
        &mut self,
        instance: &WorkloadInstanceName,
        id: &WorkloadId,
        observed: Observed,
        source: Source,
    ) {
        if !self.is_current(instance, id) {
            return;
        }
        let already_reported = self.last_reported.as_ref().map(|(_, s)| s);
        let Some(current) = self.current.as_mut() else { return };
        current.last_event = Some(Instant::now());
        let state = observed.into_state();
        match source {
            // An exit the stream already reported needs no confirmation.
            Source::ExitFile if already_reported != Some(&state) => {
                current.exit_ahead.get_or_insert_with(Instant::now);
            }
            Source::ExitFile => {}
            Source::Stream if current.exit_ahead.is_some() && policy::predates_known_exit(&state) => return,
            Source::Stream => current.exit_ahead = None,
        }
        match state.kind {
            StateKind::Pending(Pending::Starting) if current.started => return,
            StateKind::Running => current.started = true,
            _ => {}
        }
        if state == lost_state() {
            self.current = None;
        }
        self.report(instance, state.clone()).await;
        self.apply_restart_policy(&state).await;
    }

    /// Whether an observation concerns the current instance and is wanted.
    // [impl->swdd~workload-control-loop-checks-workload-state-validity~1]
    // [impl->swdd~allowed-workload-states~2]
    fn is_current(&self, instance: &WorkloadInstanceName, id: &WorkloadId) -> bool {
        let same_instance = self.spec.as_ref().is_some_and(|s| &s.instance_name == instance);
        let same_workload = self.current.as_ref().is_some_and(|c| &c.id == id);
        same_instance && same_workload && !self.deleting
    }

    async fn handle_snapshot(&mut self, runtime: &str, taken_at: Instant, workloads: &[ListedWorkload]) {
        let (Some(spec), Some(current)) = (&self.spec, &mut self.current) else { return };
        if self.deleting
            || current.runtime != runtime
            || !policy::snapshot_is_newer(current.known_since, current.last_event, taken_at)
        {
            return;
        }
        let instance = spec.instance_name.clone();
        let state = match workloads.iter().find(|w| w.workload_id == current.id) {
            Some(listed) => {
                if let Some(exit_read_at) = current.exit_ahead {
                    let stale = taken_at < exit_read_at + policy::EXIT_AHEAD_WINDOW;
                    if stale && policy::predates_known_exit(&listed.state) {
                        return;
                    }
                    current.exit_ahead = None;
                }
                listed.state.clone()
            }
            None => {
                self.current = None;
                lost_state()
            }
        };
        self.report(&instance, state.clone()).await;
        self.apply_restart_policy(&state).await;
    }
}
