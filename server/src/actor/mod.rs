//! The `AnkaiosServer` actor: owns the desired state, the workload-state
//! store and the connection registry. The gRPC layer feeds it
//! [`ServerCommand`]s through a [`ServerHandle`]; it answers by queueing
//! `FromServer` messages on the streams' outbound channels. It publishes
//! its [`ServerCounts`] (for the daemon's status line) and answers liveness
//! pings (for the watchdog and `--check`).

use ank_common::daemon::Pinger;
use ank_common::duration::format_duration;
use ank_common::messages::{FromServer, Request, RequestContent, Response, ResponseContent, ToServer};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

#[cfg(test)]
use crate::connections::ConnKind;
use crate::connections::{ConnId, Connections, LoadNews};
use crate::desired_state::generations::Generations;
use crate::desired_state::{self, DesiredState};
use crate::health_gate::HealthGates;
use crate::health_gate::file::GateFile;
use crate::health_gate::observe;
use crate::hooks::flow::Update;
use crate::jobs::{JobEngine, JobSettings, job_accepted};
use crate::placement::{Occasion, Placer};
use crate::reaper::Reaper;
use crate::rendering;
use crate::requests;
use crate::state_file::StateFile;
use crate::workload_states::WorkloadStateStore;

mod agents;
mod apply_jobs;
mod batch;
mod change;
mod handle;
mod hooked;
mod parts;
mod placement;
mod streams;
mod ticks;

use agents::Hello;
use change::Change;
pub use handle::{ServerCommand, ServerCounts, ServerHandle};
use ticks::Timer;

use parts::Lifecycle;
pub use parts::LifecycleOptions;
use parts::{Desired, Hooks, Io};
use streams::{Streams, Watched};

use crate::connections::Outbox;
use crate::logs::campaigns::Requester;

use crate::workload_states::ResyncSettings;

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
/// feature (see `parts.rs`); the parts are private to the actor, which
/// lends the features what they read and applies what they return.
pub struct AnkaiosServer {
    /// The commands and pings in, the counts and the outbox out.
    io: Io,
    /// The desired state, where it is saved, and the generations.
    desired: Desired,
    states: WorkloadStateStore,
    conns: Connections,
    /// Event subscriptions and log campaigns.
    streams: Streams,
    /// The apply jobs and the workloads they hold back.
    jobs: JobEngine,
    /// Placement, `${seq:N}` numbers, the reaper and the resync settings.
    lifecycle: Lifecycle,
    /// The mutating hooks and the chain running.
    hooks: Hooks,
}

impl AnkaiosServer {
    /// Creates the actor with an initial, validated desired state; with a
    /// `state_file`, every accepted change is saved there (and the
    /// `${seq:N}` numbers in `lifecycle.seq`'s file) before it is acknowledged
    /// or sent to an agent.
    pub fn new_with(
        mut initial: DesiredState,
        state_file: Option<StateFile>,
        resync: ResyncSettings,
        jobs: JobSettings,
        lifecycle: LifecycleOptions,
    ) -> (ServerHandle, Self) {
        let (tx, rx) = mpsc::channel(256);
        let (counts_tx, counts) = watch::channel(ServerCounts::default());
        let (pinger, pings) = Pinger::channel();
        let mut server = Self {
            io: Io { rx, pings, counts: counts_tx, out: Outbox::default() },
            desired: Desired {
                current: DesiredState::default(),
                file: state_file.clone(),
                generations: Generations::default(),
            },
            states: WorkloadStateStore::default(),
            conns: Connections::default(),
            streams: Streams { limits: lifecycle.stream_limits, ..Streams::default() },
            jobs: JobEngine::new(jobs),
            lifecycle: Lifecycle {
                resync,
                seq: lifecycle.seq,
                reaper: Reaper::new(lifecycle.reaper),
                placer: Placer::default(),
                gates: HealthGates::default(),
                gate_file: state_file.as_ref().map(GateFile::next_to),
            },
            hooks: Hooks { registry: lifecycle.hooks, ..Hooks::default() },
        };
        let placement = server.lifecycle.placer.pass(&server.conns, &server.desired.current, &mut server.states);
        server.io.out.append(placement.place_update(&mut initial.rendered, &[]));
        rendering::render_initial(&mut server.lifecycle.seq, &server.desired.current, &server.states, &mut initial);
        let diff = desired_state::diff(&server.desired.current.rendered, &initial.rendered);
        server.desired.generations.advance(&server.desired.current.rendered, &initial.rendered, |_| 0);
        server.desired.current = initial;
        let (current, generations) = (&server.desired.current, &server.desired.generations);
        let gate_file = server.lifecycle.gate_file.as_ref();
        observe::restore(&mut server.lifecycle.gates, gate_file, current, generations, tokio::time::Instant::now());
        rendering::record_escalations(&server.desired.current, &mut server.states, &ank_common::State::default());
        let (current, placer) = (&server.desired.current, &server.lifecycle.placer);
        let generations = &server.desired.generations;
        server.states.record_decided(&diff, &current.rendered, generations, |n| placer.not_scheduled_state(n));
        if !diff.added.is_empty() {
            // The startup manifest is the first job.
            let generations = &server.desired.generations;
            let (_, out) =
                server.jobs.open_job(&mut server.states, &ank_common::State::default(), &diff, true, generations);
            server.io.out.append(out);
            server.advance_jobs();
        }
        server.io.flush(&mut server.conns, &server.states, server.desired.current.state.workloads.len());
        if let Some(settings) = lifecycle.placement {
            tracing::info!(
                "placement: stickiness {}, reschedule after {}, agent-loss grace {}, tie-break seed {} (--scheduler-seed replays it)",
                settings.stickiness,
                format_duration(settings.reschedule_after),
                format_duration(settings.agent_loss_grace),
                settings.seed
            );
            server.lifecycle.placer.reconfigure(settings);
        }
        (ServerHandle { tx, counts, pinger }, server)
    }

    /// Processes commands until `shutdown` fires or every handle is gone.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut resync = tokio::time::interval(self.lifecycle.resync.tick());
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reap = tokio::time::interval(self.lifecycle.reaper.settings().tick);
        reap.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        self.hooks.start_initial(&self.desired.current.rendered);
        self.io.flush(&mut self.conns, &self.states, self.desired.current.state.workloads.len());
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = resync.tick() => self.tick(Timer::Resync, tokio::time::Instant::now()),
                _ = reap.tick() => self.tick(Timer::Reap, tokio::time::Instant::now()),
                Some(ping) = self.io.pings.recv() => {
                    let _ = ping.send(());
                }
                Some(done) = self.hooks.flow.done() => self.with_events(|s| {
                    s.hooks_done(done);
                    // The queued updates start in order until one waits
                    // for its hooks.
                    while let Some(update) = s.hooks.flow.next_queued() {
                        s.change(Change::Update(update));
                    }
                    s.advance_jobs();
                }),
                cmd = self.io.rx.recv() => match cmd {
                    Some(cmd) => self.handle_commands(cmd),
                    None => break,
                },
            }
            self.io.flush(&mut self.conns, &self.states, self.desired.current.state.workloads.len());
        }
    }

    /// Routes one command; a command that may change the state advances
    /// the jobs once, after it was handled.
    fn handle_command(&mut self, cmd: ServerCommand) {
        match cmd {
            ServerCommand::Opened { conn, kind, tx } => self.conns.open(conn, kind, tx),
            // An agent's load (every 2 s from each agent) moves no job
            // item: the jobs advance only if the placement opened one.
            ServerCommand::Message { conn, msg: msg @ ToServer::AgentLoadStatus { .. } } => self.with_events(|s| {
                s.handle_message(conn, msg);
                if s.io.out.job_pending() {
                    s.advance_jobs();
                }
            }),
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

    /// Runs `change` and sends every subscriber the events it caused. The
    /// complete state is compared only while somebody subscribed, only in
    /// the parts their masks can see, and its workload states only for the
    /// agents whose states the change touched (the snapshot keeps the
    /// others'): a state report costs the same with 10 or 200 agents.
    pub(crate) fn with_events(&mut self, change: impl FnOnce(&mut Self)) {
        let watched = Watched { desired: &self.desired.current, conns: &self.conns, jobs: &self.jobs };
        let Some(before) = self.streams.before(&watched, &mut self.states) else { return change(self) };
        change(self);
        let watched = Watched { desired: &self.desired.current, conns: &self.conns, jobs: &self.jobs };
        let events = self.streams.events_after(before, &watched, &mut self.states);
        self.io.out.append(events);
    }

    pub(crate) fn handle_message(&mut self, conn: ConnId, msg: ToServer) {
        match msg {
            ToServer::AgentHello { agent_name, protocol_version, tags, reports_conditions, capabilities, quota } => {
                let hello = Hello { tags, reports_conditions, capabilities, quota };
                self.handle_agent_hello(conn, &agent_name, &protocol_version, hello);
            }
            ToServer::CommanderHello { protocol_version } => {
                if !ank_common::is_compatible_protocol(&protocol_version) {
                    tracing::warn!("rejecting commander: protocol version '{protocol_version}' is not compatible");
                    self.conns.close(conn);
                }
            }
            ToServer::UpdateWorkloadState(reports) => {
                let (rendered, generations, jobs) =
                    (&self.desired.current.rendered, &self.desired.generations, &self.jobs);
                let canceled = |n: &_| jobs.is_canceled(n);
                let out = self.states.take_reports(&mut self.conns, conn, reports, rendered, generations, canceled);
                self.io.out.append(out);
            }
            ToServer::AgentLoadStatus { agent_name, status, metrics, quota_used } => {
                match self.conns.record_load(conn, &agent_name, status, &metrics, quota_used) {
                    Some(LoadNews::First) => self.placement_on(Occasion::Advertised(&agent_name)),
                    Some(LoadNews::Metrics) => self.placement_on(Occasion::Metrics(&agent_name)),
                    None => {}
                }
            }
            ToServer::Request(request) => self.handle_request(conn, request),
            ToServer::Goodbye => tracing::debug!("connection {conn} says goodbye"),
            ToServer::LogEntriesResponse { request_id, entries } => {
                let from = self.conns.agent_of(conn);
                self.io.out.append(self.streams.logs.entries(&request_id, from.as_deref(), entries))
            }
            ToServer::LogsStopResponse { request_id, workload_name, reason } => {
                let from = self.conns.agent_of(conn);
                self.io.out.append(self.streams.logs.stop(&request_id, from.as_deref(), workload_name, reason))
            }
        }
    }

    pub(crate) fn handle_request(&mut self, conn: ConnId, request: Request) {
        if let Err(e) = requests::check_request_masks(&request.content) {
            let content = ResponseContent::Error(e);
            return self.io.out.send(conn, FromServer::Response(Response { request_id: request.request_id, content }));
        }
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
                        let limit = if subscribe_for_events && !self.streams.events.has(conn, &request.request_id) {
                            self.streams.limits.check_subscriptions(self.streams.events.count(conn))
                        } else {
                            Ok(())
                        };
                        match limit {
                            Err(e) => ResponseContent::Error(e.to_string()),
                            Ok(()) => {
                                if subscribe_for_events {
                                    self.streams.events.add(conn, request.request_id.clone(), field_mask);
                                }
                                tree.map_or_else(ResponseContent::Error, |t| {
                                    ResponseContent::CompleteState(Box::new(t))
                                })
                            }
                        }
                    }
                    Err(e) => ResponseContent::Error(e),
                }
            }
            // Made now (and answered when committed or refused), or queued
            // behind the running chain of mutating hooks.
            RequestContent::UpdateState { new_state, update_mask } => {
                let update = Update { conn, request_id: request.request_id, new_state, update_mask };
                if let Some(update) = self.hooks.flow.submit(update) {
                    self.change(Change::Update(update));
                }
                return;
            }
            RequestContent::Logs(logs) => {
                let requester = Requester { conn, request_id: request.request_id };
                if !self.streams.logs.has(&requester)
                    && let Err(e) = self.streams.limits.check_log_requests(self.streams.logs.count(conn))
                {
                    let response =
                        Response { request_id: requester.request_id, content: ResponseContent::Error(e.to_string()) };
                    return self.io.out.send(conn, FromServer::Response(response));
                }
                let out = self.streams.logs.request(requester, logs, &self.desired.current.rendered, &self.conns);
                return self.io.out.append(out);
            }
            RequestContent::LogsCancel => {
                let requester = Requester { conn, request_id: request.request_id };
                return self.io.out.append(self.streams.logs.cancel_request(&requester));
            }
            RequestContent::EventsCancel => {
                if self.streams.events.remove(conn, &request.request_id) {
                    ResponseContent::EventsCancelAccepted
                } else {
                    ResponseContent::Error(format!("no event subscription with request id '{}'", request.request_id))
                }
            }
            // [feature L6: re-trigger without spec change]
            RequestContent::JobRerun { failed_only } => {
                let agents = self.conns.agents();
                let current = &self.desired.current;
                let id = self.jobs.rerun(failed_only, current, &self.desired.generations, &self.states, agents.keys());
                self.io.out.job_opened();
                job_accepted(id)
            }
            RequestContent::JobInterrupt { job_id } => {
                let (answer, ended) = self.jobs.interrupt_request(job_id);
                if ended {
                    self.io.out.job_opened();
                }
                answer
            }
            RequestContent::RenderedState { field_mask } => {
                rendering::rendered_state(&self.desired.current, &field_mask)
            }
        };
        self.io.out.send(conn, FromServer::Response(Response { request_id: request.request_id, content }));
    }
}

#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod job_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod placement_tests;
#[cfg(test)]
mod state_file_tests;
#[cfg(test)]
mod tests;
