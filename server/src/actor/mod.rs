//! The `AnkaiosServer` actor: owns the desired state, the workload-state
//! store and the connection registry. The gRPC layer feeds it
//! [`ServerCommand`]s through a [`ServerHandle`]; it answers by queueing
//! `FromServer` messages on the streams' outbound channels. It publishes
//! its [`ServerCounts`] (for the daemon's status line) and answers liveness
//! pings (for the watchdog and `--check`).

use ank_common::convert::PartialCompleteState;
use ank_common::daemon::Pinger;
use ank_common::messages::{FromServer, Request, RequestContent, Response, ResponseContent, ToServer};
use ank_common::placement::metrics::Metrics;
use ank_common::quota::{AgentQuota, QuotaLimits, QuotaUsage};
use ank_common::workload_events::EventKind;
use ank_common::{AgentAttributes, AgentStatus, ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use std::collections::BTreeMap;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::connections::{ConnId, ConnKind, Connections};
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState, StateDiff};
use crate::jobs::{JobEngine, JobSettings};
use crate::placement::Placer;
use crate::reaper::Reaper;
use crate::requests;
use crate::sched::seq_pools::SeqTable;
use crate::state_file::StateFile;
use crate::workload_states::{Ingest, WorkloadStateStore};

mod parts;

pub(crate) use parts::{Desired, Hooks, Io, Scheduling, Streams};

use crate::connections::Outbox;
use crate::sched::SchedOptions;
use crate::workload_states::ResyncSettings;

/// What an agent's hello says besides its name and version.
struct Hello {
    tags: BTreeMap<String, String>,
    reports_conditions: bool,
    capabilities: Vec<String>,
    quota: QuotaLimits,
}

/// What the gRPC layer reports to the server.
#[derive(Debug)]
pub enum ServerCommand {
    Opened { conn: ConnId, kind: ConnKind, tx: mpsc::Sender<FromServer> },
    Message { conn: ConnId, msg: ToServer },
    Closed { conn: ConnId },
}

/// What the server's status line counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Connected agents.
    pub agents: usize,
    /// Workloads in the desired state.
    pub workloads: usize,
}

/// Cheap, cloneable handle to the server actor.
#[derive(Clone)]
pub struct ServerHandle {
    tx: mpsc::Sender<ServerCommand>,
    counts: watch::Receiver<ServerCounts>,
    pinger: Pinger,
}

impl ServerHandle {
    /// The counts, updated whenever they change.
    pub fn counts(&self) -> watch::Receiver<ServerCounts> {
        self.counts.clone()
    }

    /// Pings the actor's loop.
    pub fn pinger(&self) -> Pinger {
        self.pinger.clone()
    }

    pub async fn opened(&self, conn: ConnId, kind: ConnKind, tx: mpsc::Sender<FromServer>) {
        let _ = self.tx.send(ServerCommand::Opened { conn, kind, tx }).await;
    }
    pub async fn message(&self, conn: ConnId, msg: ToServer) {
        let _ = self.tx.send(ServerCommand::Message { conn, msg }).await;
    }
    pub async fn closed(&self, conn: ConnId) {
        let _ = self.tx.send(ServerCommand::Closed { conn }).await;
    }
}

/// The answer to an update the server refuses, worded as Ankaios words it.
pub(crate) fn rejected(reason: String) -> ResponseContent {
    tracing::warn!("Update rejected: '{reason}'");
    ResponseContent::Error(format!("Update rejected: '{reason}'"))
}

/// Whether `msg` may change the complete state (and so cause events):
/// reads, log traffic and goodbyes do not.
fn changes_state(msg: &ToServer) -> bool {
    match msg {
        ToServer::AgentHello { .. } | ToServer::UpdateWorkloadState(_) | ToServer::AgentLoadStatus { .. } => true,
        // Exhaustive: a new request kind must say whether it changes the
        // state (events and jobs follow only those that do).
        ToServer::Request(r) => match r.content {
            RequestContent::UpdateState { .. }
            | RequestContent::JobRerun { .. }
            | RequestContent::JobInterrupt { .. } => true,
            RequestContent::CompleteState { .. }
            | RequestContent::Logs(_)
            | RequestContent::LogsCancel
            | RequestContent::EventsCancel
            | RequestContent::RenderedState { .. } => false,
        },
        ToServer::CommanderHello { .. }
        | ToServer::Goodbye
        | ToServer::LogEntriesResponse { .. }
        | ToServer::LogsStopResponse { .. } => false,
    }
}

/// The server's state and its command loop: each part is owned by its
/// feature (see `parts.rs`).
pub struct AnkaiosServer {
    /// The commands and pings in, the counts and the outbox out.
    pub(crate) io: Io,
    /// The desired state, where it is saved, and the generations.
    pub(crate) desired: Desired,
    pub(crate) states: WorkloadStateStore,
    pub(crate) conns: Connections,
    /// Event subscriptions and log campaigns.
    pub(crate) streams: Streams,
    /// The apply jobs and the workloads they hold back.
    pub(crate) jobs: JobEngine,
    /// Placement, `${seq:N}` numbers, the reaper and the resync settings.
    pub(crate) sched: Scheduling,
    /// The mutating hooks and the chain running.
    pub(crate) hooks: Hooks,
}

/// A new desired state ready to be committed, with the `${seq:N}` numbers
/// it took.
pub(crate) struct Prepared {
    pub(crate) next: DesiredState,
    pub(crate) table: SeqTable,
}

impl AnkaiosServer {
    /// Creates the actor with an initial, validated desired state; with a
    /// `state_file`, every accepted change is saved there before it is
    /// acknowledged or sent to an agent. The `${seq:N}` pools live in
    /// memory and the reaper has its defaults (tests).
    #[cfg(test)]
    pub fn new(
        initial: DesiredState,
        state_file: Option<StateFile>,
        resync: ResyncSettings,
        jobs: JobSettings,
    ) -> (ServerHandle, Self) {
        Self::new_with(initial, state_file, resync, jobs, SchedOptions::default())
    }

    /// Creates the actor with an initial, validated desired state; with a
    /// `state_file`, every accepted change is saved there (and the
    /// `${seq:N}` numbers in `sched.seq`'s file) before it is acknowledged
    /// or sent to an agent.
    pub fn new_with(
        mut initial: DesiredState,
        state_file: Option<StateFile>,
        resync: ResyncSettings,
        jobs: JobSettings,
        sched: SchedOptions,
    ) -> (ServerHandle, Self) {
        let (tx, rx) = mpsc::channel(256);
        let (counts_tx, counts) = watch::channel(ServerCounts::default());
        let (pinger, pings) = Pinger::channel();
        let mut server = Self {
            io: Io { rx, pings, counts: counts_tx, out: Outbox::default() },
            desired: Desired {
                current: DesiredState::default(),
                file: state_file,
                generations: Generations::default(),
            },
            states: WorkloadStateStore::default(),
            conns: Connections::default(),
            streams: Streams::default(),
            jobs: JobEngine::new(jobs),
            sched: Scheduling { resync, seq: sched.seq, reaper: Reaper::new(sched.reaper), placer: Placer::default() },
            hooks: Hooks::default(),
        };
        server.place_update(&mut initial.rendered, &[]);
        server.render_initial(&mut initial);
        let diff = desired_state::diff(&server.desired.current.rendered, &initial.rendered);
        server.desired.generations.advance(&server.desired.current.rendered, &initial.rendered, |_| 0);
        server.desired.current = initial;
        server.record_escalations(&ank_common::State::default());
        server.record_initial_states(&diff);
        if !diff.added.is_empty() {
            // The startup manifest is the first job.
            server.open_job(&ank_common::State::default(), &diff, true);
            server.advance_jobs();
        }
        server.flush();
        (ServerHandle { tx, counts, pinger }, server)
    }

    /// Processes commands until `shutdown` fires or every handle is gone.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut resync = tokio::time::interval(self.sched.resync.tick());
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reap = tokio::time::interval(self.sched.reaper.settings().tick);
        reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.start_initial_hooks();
        self.flush();
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = resync.tick() => {
                    self.resync_tick(tokio::time::Instant::now());
                    self.jobs_tick();
                    self.placement_tick(tokio::time::Instant::now());
                }
                _ = reap.tick() => self.reaper_tick(),
                Some(ping) = self.io.pings.recv() => {
                    let _ = ping.send(());
                }
                Some(done) = self.hooks.flow.done() => self.with_events(|s| {
                    s.hooks_done(done);
                    s.start_queued();
                    s.advance_jobs();
                }),
                cmd = self.io.rx.recv() => match cmd {
                    Some(cmd) => self.handle_command(cmd),
                    None => break,
                },
            }
            self.flush();
        }
    }

    /// Routes one command; a command that may change the state advances
    /// the jobs once, after it was handled.
    fn handle_command(&mut self, cmd: ServerCommand) {
        match cmd {
            ServerCommand::Opened { conn, kind, tx } => self.conns.open(conn, kind, tx),
            ServerCommand::Message { conn, msg } if changes_state(&msg) => self.with_events(|s| {
                s.handle_message(conn, msg);
                s.advance_jobs();
            }),
            ServerCommand::Message { conn, msg } => self.handle_message(conn, msg),
            ServerCommand::Closed { conn } => self.with_events(|s| {
                s.handle_closed(conn);
                s.advance_jobs();
            }),
        }
    }

    /// Sends what the command queued, and publishes the counts.
    fn flush(&mut self) {
        let out = self.io.out.take();
        self.conns.deliver(out);
        self.publish_counts();
    }

    pub(crate) fn publish_counts(&self) {
        let now =
            ServerCounts { agents: self.conns.agent_count(), workloads: self.desired.current.state.workloads.len() };
        self.io.counts.send_if_modified(|old| std::mem::replace(old, now) != now);
    }

    /// Runs `change` and sends every subscriber the events it caused. The
    /// complete state is compared only while somebody subscribed.
    pub(crate) fn with_events(&mut self, change: impl FnOnce(&mut Self)) {
        if self.streams.events.is_empty() {
            return change(self);
        }
        let before = self.comparable_tree(&self.complete_state_tree());
        change(self);
        let current = self.complete_state_tree();
        let after = self.comparable_tree(&current);
        for event in self.streams.events.events(&before, &after, &current) {
            let content = ResponseContent::Event {
                complete_state: Box::new(event.complete_state),
                altered_fields: event.altered_fields,
            };
            self.io.out.send(event.conn, FromServer::Response(Response { request_id: event.request_id, content }));
        }
    }

    /// `tree` as Ankaios compares complete states for events.
    pub(crate) fn comparable_tree(&self, tree: &serde_json::Value) -> serde_json::Value {
        crate::events::state_diff::comparable(tree, |agent| self.conns.status_reported(agent))
    }

    pub(crate) fn complete_state_tree(&self) -> serde_json::Value {
        requests::complete_state(&self.desired.current, &self.states, &self.conns, &self.jobs, &[]).unwrap_or_default()
    }

    pub(crate) fn handle_message(&mut self, conn: ConnId, msg: ToServer) {
        match msg {
            ToServer::AgentHello { agent_name, protocol_version, tags, reports_conditions, capabilities, quota } => {
                let hello = Hello { tags, reports_conditions, capabilities, quota };
                self.handle_agent_hello(conn, &agent_name, &protocol_version, hello);
            }
            ToServer::CommanderHello { protocol_version } => self.handle_commander_hello(conn, &protocol_version),
            ToServer::UpdateWorkloadState(states) => self.handle_workload_states(conn, states),
            ToServer::AgentLoadStatus { agent_name, status, metrics, quota_used } => {
                self.handle_load_status(conn, &agent_name, status, &metrics, quota_used)
            }
            ToServer::Request(request) => self.handle_request(conn, request),
            ToServer::Goodbye => tracing::debug!("connection {conn} says goodbye"),
            ToServer::LogEntriesResponse { request_id, entries } => self.handle_log_entries(&request_id, entries),
            ToServer::LogsStopResponse { request_id, workload_name, reason } => {
                self.handle_logs_stop(&request_id, workload_name, reason)
            }
        }
    }

    // [impl->swdd~agent-sends-hello~1]
    fn handle_agent_hello(&mut self, conn: ConnId, agent: &str, version: &str, hello: Hello) {
        let Hello { tags, reports_conditions, capabilities, quota } = hello;
        if self.conns.kind(conn) != Some(ConnKind::Agent) {
            tracing::warn!("connection {conn}: AgentHello on a non-agent stream ignored");
            return;
        }
        if let Err(e) = ank_common::names::validate_agent_node_name(agent) {
            tracing::warn!("rejecting agent: {e}");
            self.conns.close(conn);
            return;
        }
        if !ank_common::is_compatible_protocol(version) {
            tracing::warn!("rejecting agent '{agent}': protocol version '{version}' is not compatible");
            self.conns.close(conn);
            return;
        }
        tracing::info!("agent '{agent}' connected");
        // [feature K2: the server keeps each agent's quota (none: unlimited)]
        // An agent without our extensions (Eclipse Ankaios' own) reports no
        // generations, conditions or quota: shown as "not reported".
        let not_reported = if reports_conditions {
            Vec::new()
        } else {
            ank_common::complete_state::NOT_REPORTED_BY_ANKAIOS_AGENTS.iter().map(|s| (*s).to_owned()).collect()
        };
        let attributes = AgentAttributes {
            tags,
            capabilities,
            quota: AgentQuota::of(quota),
            not_reported,
            ..AgentAttributes::default()
        };
        self.conns.register_agent(conn, agent, attributes);
        self.conns.note_seen(agent, reports_conditions);
        // Specs a job holds back go out when the job hands them out.
        let mut specs = desired_state::specs_for_agent(&self.desired.current.rendered, agent);
        specs.retain(|s| !self.jobs.is_held(s.name()));
        let specs = self.stamped(specs);
        self.io.out.send(conn, FromServer::ServerHello(specs));
        // Before the leftovers are deleted: an instance placed here again
        // is no leftover.
        self.placement_agent_joined(agent);
        self.finish_deletions_after_hello(conn, agent, reports_conditions);
        let others = self.states.all_except(Some(agent));
        if !others.is_empty() {
            self.io.out.send(conn, FromServer::UpdateWorkloadState(others));
        }
    }

    pub(crate) fn handle_commander_hello(&mut self, conn: ConnId, version: &str) {
        if !ank_common::is_compatible_protocol(version) {
            tracing::warn!("rejecting commander: protocol version '{version}' is not compatible");
            self.conns.close(conn);
        }
    }

    pub(crate) fn handle_workload_states(&mut self, conn: ConnId, states: Vec<WorkloadState>) {
        let Some(agent) = self.conns.agent_of(conn) else {
            tracing::warn!("connection {conn}: workload states from a stream that is no agent ignored");
            return;
        };
        // An agent speaks only for its own workloads, and only for those the
        // server wants or still lists: after a partition or a server restart
        // the agent re-sends states of workloads deleted meanwhile, which it
        // is about to remove; they must not come back as ghost rows.
        let mut changed = Vec::new();
        for s in states.into_iter().filter(|s| s.instance_name.agent_name == agent) {
            let n = &s.instance_name;
            if self.jobs.is_canceled(n) {
                // A canceled member stays Pending(Canceled) whatever its agent says.
                continue;
            }
            let wanted = desired_state::wants_instance(&self.desired.current.rendered, n);
            // An instance being deleted only goes its way out: a report of
            // it running that the agent sent before it learnt of the
            // deletion (a full set after a reconnect) is not news.
            let leaving = matches!(s.execution_state.kind, StateKind::Stopping(_) | StateKind::Removed);
            let known = match self.states.kind_of(n) {
                None => false,
                Some(kind) => leaving || !matches!(kind, StateKind::Stopping(_)),
            };
            if !wanted && !known {
                continue;
            }
            let generation = wanted.then(|| self.desired.generations.of(&n.workload_name)).flatten();
            match self.states.ingest(&s, generation) {
                Ingest::Accepted(true) => changed.push(self.states.state_of(n)),
                Ingest::Accepted(false) => {}
                Ingest::Stale | Ingest::Future => {
                    tracing::debug!(
                        "report of '{n}' at generation {} dropped (current {generation:?})",
                        s.status.observed_generation
                    );
                    if let Some(attrs) = self.conns.agent_attributes_mut(&agent) {
                        attrs.dropped_stale_reports += 1;
                    }
                }
                Ingest::Invalid(missing) => tracing::warn!(
                    "agent '{agent}': report of '{n}' without the {} condition ignored",
                    missing.as_str()
                ),
            }
        }
        if !changed.is_empty() {
            self.io.out.broadcast(Some(&agent), FromServer::UpdateWorkloadState(changed));
        }
    }

    pub(crate) fn handle_load_status(
        &mut self,
        conn: ConnId,
        agent: &str,
        status: AgentStatus,
        extra: &BTreeMap<String, f64>,
        used: QuotaUsage,
    ) {
        if self.conns.agent_of(conn).as_deref() != Some(agent) {
            return;
        }
        let first = !self.conns.status_reported(agent);
        self.conns.mark_status_reported(agent);
        let Some(attrs) = self.conns.agent_attributes_mut(agent) else { return };
        let metrics = Metrics::from_load(&status, extra);
        attrs.status = status;
        // [feature K2: the server shows what an agent uses of its quota]
        if let Some(quota) = attrs.quota.as_mut() {
            quota.used_workloads = used.workloads;
            quota.used_memory = used.memory;
        }
        if attrs.metrics != metrics || first {
            attrs.metrics = metrics;
            if first {
                // Its metrics are known from now on.
                self.placement_agent_changed(agent);
            } else {
                self.placement_metrics_changed(agent);
            }
        }
    }

    pub(crate) fn handle_closed(&mut self, conn: ConnId) {
        self.streams.events.remove_where(conn, |_| true);
        let agent = self.conns.close(conn);
        self.logs_connection_closed(conn, agent.as_deref());
        if let Some(agent) = agent {
            tracing::info!("agent '{agent}' disconnected");
            self.placement_agent_left(&agent);
            let desired = &self.desired.current.rendered;
            let mut changed =
                self.states.mark_agent_disconnected(&agent, |n| desired_state::wants_instance(desired, n));
            for spec in desired_state::specs_for_agent(desired, &agent) {
                self.states.record_event(
                    spec.name(),
                    EventKind::AgentDisconnected,
                    &format!("agent '{agent}' disconnected"),
                );
            }
            // Workloads the server still wants whose rows went with the
            // agent (it removed them, e.g. stopping at its shutdown) are
            // shown as AgentDisconnected too, never as gone.
            for spec in desired_state::specs_for_agent(&self.desired.current.rendered, &agent) {
                if !self.states.contains(&spec.instance_name) {
                    let state =
                        WorkloadState::new(spec.instance_name, ExecutionState::new(StateKind::AgentDisconnected));
                    self.states.record(&state);
                    changed.push(state);
                }
            }
            if !changed.is_empty() {
                self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
            }
        }
    }

    pub(crate) fn handle_request(&mut self, conn: ConnId, request: Request) {
        let content = match request.content {
            RequestContent::CompleteState { field_mask, subscribe_for_events } => {
                match requests::complete_state(
                    &self.desired.current,
                    &self.states,
                    &self.conns,
                    &self.jobs,
                    &field_mask,
                ) {
                    Ok(tree) => {
                        if subscribe_for_events {
                            self.streams.events.add(conn, request.request_id.clone(), field_mask);
                        }
                        ResponseContent::CompleteState(Box::new(tree))
                    }
                    Err(e) => ResponseContent::Error(e),
                }
            }
            RequestContent::UpdateState { new_state, update_mask } if !self.hooks.registry.is_empty() => {
                return self.hooked_update(conn, request.request_id, new_state, update_mask);
            }
            RequestContent::UpdateState { new_state, update_mask } => self.update_state(&new_state, &update_mask),
            RequestContent::Logs(logs) => return self.handle_logs_request(conn, request.request_id, logs),
            RequestContent::LogsCancel => return self.handle_logs_cancel(conn, request.request_id),
            RequestContent::EventsCancel => {
                if self.streams.events.remove(conn, &request.request_id) {
                    ResponseContent::EventsCancelAccepted
                } else {
                    ResponseContent::Error(format!("no event subscription with request id '{}'", request.request_id))
                }
            }
            RequestContent::JobRerun { failed_only } => self.rerun(failed_only),
            RequestContent::JobInterrupt { job_id } => self.interrupt(job_id),
            RequestContent::RenderedState { field_mask } => self.rendered_state(&field_mask),
        };
        self.io.out.send(conn, FromServer::Response(Response { request_id: request.request_id, content }));
    }

    pub(crate) fn update_state(&mut self, new_state: &PartialCompleteState, update_mask: &[String]) -> ResponseContent {
        let next = match self.prepare_update(new_state, update_mask) {
            Ok(next) => next,
            Err(answer) => return answer,
        };
        let result = self.accept(next);
        self.update_answer(new_state, update_mask, result)
    }

    /// The new desired state an update asks for, or the refusal.
    pub(crate) fn prepare_update(
        &self,
        new_state: &PartialCompleteState,
        update_mask: &[String],
    ) -> Result<DesiredState, ResponseContent> {
        // The effective state is computed, never written; an effectiveState
        // part of a new state without such a mask is ignored, as in Ankaios.
        if let Some(mask) = update_mask.iter().find(|m| m.split('.').next() == Some("effectiveState")) {
            return Err(rejected(format!(
                "'{mask}' is read-only: the effective state is computed from the desired state; update 'desiredState' instead"
            )));
        }
        if let Err(mask) = requests::check_update_masks(&self.desired.current, &self.conns, new_state, update_mask) {
            return Err(rejected(format!("Could not find field {mask}")));
        }
        desired_state::apply_update(&self.desired.current, new_state, update_mask).map_err(|e| rejected(e.to_string()))
    }

    /// The answer to an update whose new state was accepted or not.
    pub(crate) fn update_answer(
        &mut self,
        new_state: &PartialCompleteState,
        update_mask: &[String],
        result: Result<(StateDiff, u64), String>,
    ) -> ResponseContent {
        match result {
            Ok((diff, job_id)) => {
                // Agents whose labels changed may now take NotScheduled
                // workloads, or no longer match theirs.
                for agent in requests::update_agent_tags(&mut self.conns, new_state, update_mask) {
                    self.placement_agent_changed(&agent);
                }
                ResponseContent::UpdateStateSuccess {
                    added_workloads: diff.added_instance_names(),
                    deleted_workloads: diff.deleted_instance_names(),
                    job_id,
                    hook_changes: Vec::new(),
                }
            }
            Err(e) => ResponseContent::Error(format!("Update rejected: '{e}'")),
        }
    }

    /// Makes `next` the desired state: finishes its rendering, saves it
    /// (the `${seq:N}` numbers first, then the state file; not saved means
    /// not accepted: a restart must not lose it) and opens its job.
    pub(crate) fn accept(&mut self, next: DesiredState) -> Result<(StateDiff, u64), String> {
        self.accept_moving(next, &[])
    }

    /// [`accept`](Self::accept), with `moves` (workload, agent) overriding
    /// where placement would keep selector workloads.
    pub(crate) fn accept_moving(
        &mut self,
        next: DesiredState,
        moves: &[(String, String)],
    ) -> Result<(StateDiff, u64), String> {
        // With hooks configured, changes go through `hooked_update` and
        // `hooked_server_change` instead.
        debug_assert!(self.hooks.registry.is_empty(), "a change bypassed the mutating hooks");
        let prepared = self.prepare_accept(next, moves)?;
        self.commit(prepared)
    }

    /// The rendering of `next` finished for the agents: placed, `moves`
    /// applied, `${seq:N}` numbers planned.
    pub(crate) fn prepare_accept(
        &mut self,
        mut next: DesiredState,
        moves: &[(String, String)],
    ) -> Result<Prepared, String> {
        // Placement first: the ${seq:N} pools are per agent.
        self.place_update(&mut next.rendered, moves);
        let table = self.render_for_agents(&mut next).inspect_err(|e| tracing::warn!("update rejected: {e}"))?;
        Ok(Prepared { next, table })
    }

    /// Saves and applies a prepared state (the `${seq:N}` numbers first,
    /// then the state file; not saved means not accepted) and opens its job.
    pub(crate) fn commit(&mut self, prepared: Prepared) -> Result<(StateDiff, u64), String> {
        let Prepared { next, table } = prepared;
        self.sched
            .seq
            .save(&table)
            .map_err(|e| e.to_string())
            .inspect_err(|e| tracing::error!("update rejected: {e}"))?;
        if next.state != self.desired.current.state
            && let Some(file) = &self.desired.file
            && let Err(e) = file.save(&next.state)
        {
            tracing::error!("update rejected: {e}");
            return Err(e.to_string());
        }
        self.sched.seq.commit(table);
        Ok(self.switch_to(next))
    }

    /// Makes `next` (saved already) the current state and opens its job.
    pub(crate) fn switch_to(&mut self, next: DesiredState) -> (StateDiff, u64) {
        if self.io.out.job_pending() {
            // A second change in one command (a queued update after a hook
            // chain, a placement move after a label change): the jobs step
            // over the first change before the second one's job opens, so
            // that the new job sees what went out.
            self.advance_jobs();
        }
        let diff = desired_state::diff(&self.desired.current.rendered, &next.rendered);
        let states = &self.states;
        self.desired
            .generations
            .advance(&self.desired.current.rendered, &next.rendered, |name| states.max_generation(name));
        let old = std::mem::replace(&mut self.desired.current, next);
        let workloads = &self.desired.current.state.workloads;
        self.states.retain_events(|name| workloads.contains_key(name));
        self.record_escalations(&old.rendered);
        let job_id = self.dispatch(&old.rendered, &diff);
        (diff, job_id)
    }

    /// Records the states the server decides for a diff and opens its job,
    /// which hands the changes to the agents in dependency order.
    pub(crate) fn dispatch(&mut self, old: &ank_common::State, diff: &StateDiff) -> u64 {
        let changed = self.record_initial_states(diff);
        if !changed.is_empty() {
            self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        let id = self.open_job(old, diff, false);
        tracing::info!(
            "job {id}: {} workloads to add, {} to delete",
            diff.added.values().map(Vec::len).sum::<usize>(),
            diff.deleted.values().map(Vec::len).sum::<usize>()
        );
        // The jobs advance once the command was handled; what they hand
        // out goes here, before the answer to the change.
        self.io.out.job_opened();
        id
    }

    /// Pending(Initial) for added workloads, NotScheduled for unscheduled
    /// ones, removal of unscheduled workloads that went away.
    pub(crate) fn record_initial_states(&mut self, diff: &StateDiff) -> Vec<WorkloadState> {
        let mut changed = Vec::new();
        for spec in diff.added.values().flatten() {
            let mut s = WorkloadState::new(spec.instance_name.clone(), ExecutionState::pending_initial());
            s.status.generation = self.desired.generations.of(spec.name()).unwrap_or(0);
            if self.states.record(&s) {
                changed.push(self.states.state_of(&spec.instance_name));
            }
        }
        // Gone first: a changed unscheduled workload is both gone and new.
        for name in &diff.unscheduled_gone {
            let unscheduled = self.states.instances_of("");
            for n in unscheduled.iter().filter(|n| n.workload_name == name.as_str()) {
                changed.extend(self.states.forget(n));
            }
        }
        for name in &diff.unscheduled {
            let Some(wl) = self.desired.current.rendered.workloads.get(name) else { continue };
            let n = WorkloadInstanceName::new(name, &ank_common::AgentName::unscheduled(), &wl.runtime_config);
            let mut s = WorkloadState::new(n, self.not_scheduled_state(name.as_str()));
            // Generations start at 1: a NotScheduled instance shows its workload's.
            s.status.generation = self.desired.generations.of(name.as_str()).unwrap_or(0);
            if self.states.record(&s) {
                changed.push(s);
            }
        }
        changed
    }
}

#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod placement_tests;
#[cfg(test)]
mod sched_tests;
#[cfg(test)]
mod tests;
