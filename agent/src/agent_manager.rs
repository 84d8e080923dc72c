//! [`AgentManager`]: the agent's hub. It dispatches messages from the server
//! to the `RuntimeManager`, keeps the latest state of every workload instance
//! of this agent (dropping duplicates) and forwards state changes to the
//! server; after every (re)connect it re-sends the full set. Every report
//! carries the generation of the spec it is about (`observedGeneration`)
//! and the Applied / Available / Health conditions; a ServerHello that
//! changes generations gets the affected states again, and the first
//! report of an instance after a workload message is passed on even when
//! it repeats the last one, so every resync of the server gets its answer.
//!
//! In: `LinkEvent`s from the server link, `WorkloadState`s from the control
//! loops, liveness pings and the request to stop every workload before the
//! agent exits. Out: requests to the `RuntimeManager`, `ToServer` to the
//! link, and the agent's health on its [`HealthBoard`].

use std::collections::{HashMap, HashSet};

use ank_common::conditions::{self, InstanceStatus, RuntimeHealth};
use ank_common::daemon::{Ping, clock};
use ank_common::messages::{FromServer, ToServer};
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::{EventRing, WorkloadEvent};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::control_interface::registry::ControlInterfaces;
use crate::health::HealthBoard;
use crate::hysteresis;
use crate::logs::LogsManagerHandle;
use crate::runtime_manager::RuntimeManagerHandle;
use crate::server_link::{LinkEvent, ServerLinkHandle};
use crate::workload::EventReport;

/// Most states batched into one `UpdateWorkloadState`.
const MAX_BATCH: usize = 64;

/// How the `AgentManager` is watched, told to stop its workloads and shut down.
#[derive(Debug)]
pub struct Supervision {
    /// Liveness pings (watchdog, `--check`), answered from the loop.
    pub pings: mpsc::Receiver<Ping>,
    /// Where the agent's health is published.
    pub health: HealthBoard,
    /// A message here stops every workload of this node; from then on the
    /// server's workload updates are ignored.
    pub stop_all: mpsc::Receiver<()>,
    /// Ends the loop.
    pub shutdown: CancellationToken,
}

/// What the control loops and the scheduler report (see
/// [`StateReporter`](crate::workload::StateReporter)).
pub struct Reports {
    pub states: mpsc::Receiver<WorkloadState>,
    pub events: mpsc::UnboundedReceiver<EventReport>,
}

/// The agent's hub task.
pub struct AgentManager {
    runtime: RuntimeManagerHandle,
    server: ServerLinkHandle,
    logs: LogsManagerHandle,
    control_interfaces: ControlInterfaces,
    link_events: mpsc::Receiver<LinkEvent>,
    workload_states: mpsc::Receiver<WorkloadState>,
    workload_events: mpsc::UnboundedReceiver<EventReport>,
    states: HashMap<WorkloadInstanceName, ExecutionState>,
    /// Each workload's events, by workload name.
    events: HashMap<String, EventRing>,
    /// Entries changed since the instance's last report, sent with the next.
    unsent_events: HashMap<WorkloadInstanceName, Vec<WorkloadEvent>>,
    /// The generation of every instance's spec, as the server said.
    generations: HashMap<WorkloadInstanceName, u64>,
    /// Instances whose next report is passed on even if it repeats.
    answer_due: HashSet<WorkloadInstanceName>,
    /// Instances deleted and not added again: their generation is
    /// forgotten once they are removed.
    retiring: HashSet<WorkloadInstanceName>,
    runtime_health: watch::Receiver<RuntimeHealth>,
    supervision: Supervision,
    stopping: bool,
    shutdown: CancellationToken,
}

impl AgentManager {
    pub fn new(
        runtime: RuntimeManagerHandle,
        server: ServerLinkHandle,
        logs: LogsManagerHandle,
        control_interfaces: ControlInterfaces,
        link_events: mpsc::Receiver<LinkEvent>,
        reports: Reports,
        supervision: Supervision,
    ) -> Self {
        let shutdown = supervision.shutdown.clone();
        let runtime_health = runtime.runtime_health();
        Self {
            runtime,
            server,
            logs,
            control_interfaces,
            link_events,
            workload_states: reports.states,
            workload_events: reports.events,
            states: HashMap::new(),
            events: HashMap::new(),
            unsent_events: HashMap::new(),
            generations: HashMap::new(),
            answer_due: HashSet::new(),
            retiring: HashSet::new(),
            runtime_health,
            supervision,
            stopping: false,
            shutdown,
        }
    }

    /// Runs until shutdown.
    // [impl->swdd~agent-manager-listens-requests-from-server~1]
    pub async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                Some(ev) = self.link_events.recv() => self.handle_link_event(ev).await,
                Some(state) = self.workload_states.recv() => self.handle_workload_state(state),
                Some(event) = self.workload_events.recv() => self.handle_event(event),
                Ok(()) = self.runtime_health.changed() => self.send_all(),
                Some(ping) = self.supervision.pings.recv() => {
                    let _ = ping.send(());
                }
                Some(()) = self.supervision.stop_all.recv(), if !self.stopping => self.stop_all_workloads().await,
                else => break,
            }
        }
    }

    async fn handle_link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Connected => {
                self.supervision.health.connected();
                self.send_all()
            }
            LinkEvent::Message(FromServer::ServerHello(specs)) => {
                self.supervision.health.server_hello();
                let listed: HashSet<&WorkloadInstanceName> = specs.iter().map(|s| &s.instance_name).collect();
                let states = &self.states;
                self.generations.retain(|n, _| listed.contains(n) || states.contains_key(n));
                // The full set went out at the connect; what the hello
                // renumbered goes again.
                let renumbered = self.note_generations(&specs);
                self.send_states(renumbered);
                if self.stopping {
                    tracing::info!("stopping: the server's {} workloads are not started again", specs.len());
                } else {
                    self.runtime.server_hello(specs).await
                }
            }
            LinkEvent::Message(FromServer::UpdateWorkload { .. }) if self.stopping => {
                tracing::info!("stopping: a workload update of the server is ignored")
            }
            LinkEvent::Message(FromServer::UpdateWorkload { added, deleted }) => {
                for d in &deleted {
                    self.answer_due.insert(d.instance_name.clone());
                    self.retiring.insert(d.instance_name.clone());
                }
                // New states of the added ones follow from their loops.
                let _ = self.note_generations(&added);
                self.runtime.update_workload(added, deleted).await
            }
            // [impl->swdd~agent-handles-update-workload-state-requests~1]
            // [impl->swdd~agent-manager-stores-all-workload-states~1]
            LinkEvent::Message(FromServer::UpdateWorkloadState(states)) => {
                tracing::debug!("{} workload states of other agents received", states.len());
                self.runtime.update_workload_states(states);
            }
            LinkEvent::Message(FromServer::Response(r)) => {
                if !self.control_interfaces.deliver(&r) {
                    tracing::debug!("response '{}' without a control interface to deliver it to", r.request_id);
                }
            }
            LinkEvent::Message(FromServer::LogsRequest { request_id, request }) => self.logs.start(request_id, request),
            LinkEvent::Message(FromServer::LogsCancelRequest { request_id }) => self.logs.cancel(request_id),
            LinkEvent::Disconnected => {
                self.supervision.health.disconnected();
                self.logs.cancel_all()
            }
        }
    }

    /// Stops and removes every workload of this node, as a ServerHello
    /// without workloads would; their states still go to the server.
    async fn stop_all_workloads(&mut self) {
        self.stopping = true;
        self.supervision.health.stopping();
        tracing::info!("stopping all {} workloads of this agent before it exits", self.states.len());
        self.runtime.server_hello(Vec::new()).await;
    }

    /// Remembers the generations of `specs`; their next reports answer.
    /// Returns the known instances whose generation changed.
    fn note_generations(&mut self, specs: &[WorkloadSpec]) -> Vec<WorkloadInstanceName> {
        let mut changed = Vec::new();
        for s in specs {
            let n = &s.instance_name;
            if self.generations.insert(n.clone(), s.generation) != Some(s.generation) && self.states.contains_key(n) {
                changed.push(n.clone());
            }
            self.answer_due.insert(n.clone());
            self.retiring.remove(n);
        }
        changed
    }

    /// Sends the full set of current states (after a (re)connect, or when
    /// the runtime's health changed).
    fn send_all(&mut self) {
        let all: Vec<WorkloadInstanceName> = self.states.keys().cloned().collect();
        // A server that restarted knows no events: each instance brings its
        // workload's whole ring.
        for n in &all {
            if let Some(ring) = self.events.get(&n.workload_name) {
                self.unsent_events.insert(n.clone(), ring.to_vec());
            }
        }
        self.send_states(all);
    }

    /// Sends the current states of `instances`, in batches.
    fn send_states(&mut self, instances: Vec<WorkloadInstanceName>) {
        let reports: Vec<WorkloadState> = instances
            .into_iter()
            .filter_map(|n| {
                let state = self.states.get(&n)?.clone();
                Some(self.reported(WorkloadState::new(n, state)))
            })
            .collect();
        for chunk in reports.chunks(MAX_BATCH) {
            self.server.send(ToServer::UpdateWorkloadState(chunk.to_vec()));
        }
    }

    /// A state as the server gets it: with the generation of its spec and
    /// the conditions it implies.
    // [feature H4: an agent reports Applied, Available and Health]
    fn reported(&mut self, state: WorkloadState) -> WorkloadState {
        let generation = self.generations.get(&state.instance_name).copied().unwrap_or(0);
        let conditions =
            conditions::agent_conditions(&state.execution_state, generation, &self.runtime_health.borrow());
        let events = self.unsent_events.remove(&state.instance_name).unwrap_or_default();
        state.with_status(InstanceStatus { observed_generation: generation, conditions, events, ..Default::default() })
    }

    /// Merges an event into its workload's ring; the changed entry goes to
    /// the server with the instance's current state, at once if it has one.
    fn handle_event(&mut self, first: EventReport) {
        let at = clock::now_rfc3339();
        // Events queued behind the first (a scheduler tick reports one per
        // waiting workload) go out together, in batches.
        let mut touched: Vec<WorkloadInstanceName> = Vec::new();
        let mut next = Some(first);
        while let Some(ev) = next.take() {
            let ring = self.events.entry(ev.instance_name.workload_name.clone()).or_default();
            let entry = ring.record(ev.kind, &ev.reason, &at).clone();
            let unsent = self.unsent_events.entry(ev.instance_name.clone()).or_default();
            unsent.retain(|e| !(e.kind == entry.kind && e.reason == entry.reason));
            unsent.push(entry);
            if self.states.contains_key(&ev.instance_name) && !touched.contains(&ev.instance_name) {
                touched.push(ev.instance_name);
            }
            if touched.len() < MAX_BATCH {
                next = self.workload_events.try_recv().ok();
            }
        }
        self.send_states(touched);
    }

    /// Passes states of this agent's workloads (and any queued behind the
    /// first) through the hysteresis, to the server and to the
    /// `RuntimeManager` (for inter-workload dependencies on this agent).
    // [impl->swdd~agent-manager-receives-workload-states-of-its-workloads~1]
    // [impl->swdd~agent-sends-workload-states-of-its-workloads-to-server~2]
    fn handle_workload_state(&mut self, first: WorkloadState) {
        let mut batch = Vec::new();
        let mut next = Some(first);
        while let Some(state) = next.take() {
            if let Some(state) = self.store(state) {
                batch.push(state);
            }
            if batch.len() < MAX_BATCH {
                next = self.workload_states.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            self.supervision.health.workloads(&self.states);
            self.runtime.update_workload_states(batch.clone());
            self.server.send(ToServer::UpdateWorkloadState(batch));
        }
    }

    /// Stores a state after the hysteresis and returns it as reported
    /// (with generation and conditions); `None` when it is dropped.
    // [impl->swdd~agent-stores-workload-states-of-its-workloads~1]
    fn store(&mut self, state: WorkloadState) -> Option<WorkloadState> {
        let answer = self.answer_due.remove(&state.instance_name);
        let passed = match hysteresis::transition(self.states.get(&state.instance_name), &state.execution_state) {
            Some(passed) => passed,
            // A repeat that answers a workload message of the server.
            None if answer && self.states.get(&state.instance_name) == Some(&state.execution_state) => {
                state.execution_state.clone()
            }
            None => return None,
        };
        // Stamped before a removal forgets the generation.
        let reported = self.reported(WorkloadState::new(state.instance_name.clone(), passed.clone()));
        if passed.kind == StateKind::Removed {
            self.states.remove(&state.instance_name);
            self.unsent_events.remove(&state.instance_name);
            if self.retiring.remove(&state.instance_name) {
                self.generations.remove(&state.instance_name);
                // A workload deleted from this agent takes its events along.
                let name = &state.instance_name.workload_name;
                if !self.generations.keys().any(|n| &n.workload_name == name) {
                    self.events.remove(name);
                }
            }
        } else {
            self.states.insert(state.instance_name, passed);
        }
        Some(reported)
    }
}
