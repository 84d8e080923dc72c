//! [`AgentManager`]: the agent's hub. It routes between the server link,
//! the `RuntimeManager`, the logs and the control interfaces: the server's
//! workloads and the other agents' states go to the `RuntimeManager` (which
//! owns every instance's record and alone reports states to the server),
//! responses to the control interface that asked, log requests to the logs
//! manager; a (re)connect makes the `RuntimeManager` send every state again.
//! It keeps the agent's health board up to date (link, workload counts,
//! stopping).
//!
//! In: `LinkEvent`s from the server link, the workload counts, liveness
//! pings and the request to stop every workload before the agent exits.
//! Out: requests to the `RuntimeManager` and the logs manager, responses
//! to the control interfaces, and the agent's health on its [`HealthBoard`].

use ank_common::daemon::Ping;
use ank_common::messages::FromServer;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::control_interface::registry::ControlInterfaces;
use crate::health::HealthBoard;
use crate::logs::LogsManagerHandle;
use crate::runtime_manager::RuntimeManagerHandle;
use crate::runtime_manager::WorkloadCounts;
use crate::server_link::LinkEvent;

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

/// The agent's hub task.
pub struct AgentManager {
    runtime: RuntimeManagerHandle,
    logs: LogsManagerHandle,
    control_interfaces: ControlInterfaces,
    link_events: mpsc::Receiver<LinkEvent>,
    counts: watch::Receiver<WorkloadCounts>,
    supervision: Supervision,
    shutdown: CancellationToken,
}

impl AgentManager {
    pub fn new(
        runtime: RuntimeManagerHandle,
        logs: LogsManagerHandle,
        control_interfaces: ControlInterfaces,
        link_events: mpsc::Receiver<LinkEvent>,
        supervision: Supervision,
    ) -> Self {
        let shutdown = supervision.shutdown.clone();
        let counts = runtime.workload_counts();
        Self { runtime, logs, control_interfaces, link_events, counts, supervision, shutdown }
    }

    /// Runs until shutdown.
    // [impl->swdd~agent-manager-listens-requests-from-server~1]
    pub async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                Some(ev) = self.link_events.recv() => self.handle_link_event(ev).await,
                Ok(()) = self.counts.changed() => {
                    let counts = *self.counts.borrow_and_update();
                    self.supervision.health.workloads(counts);
                }
                Some(ping) = self.supervision.pings.recv() => {
                    let _ = ping.send(());
                }
                Some(()) = self.supervision.stop_all.recv() => {
                    self.supervision.health.stopping();
                    self.runtime.stop_all().await
                }
                else => break,
            }
        }
    }

    async fn handle_link_event(&mut self, ev: LinkEvent) {
        match ev {
            LinkEvent::Connected => {
                self.supervision.health.connected();
                self.runtime.resend_all().await
            }
            LinkEvent::Message(FromServer::ServerHello(specs)) => {
                self.supervision.health.server_hello();
                self.runtime.server_hello(specs).await
            }
            LinkEvent::Message(FromServer::UpdateWorkload { added, deleted, resync: false }) => {
                self.runtime.update_workload(added, deleted).await
            }
            LinkEvent::Message(FromServer::UpdateWorkload { added, deleted, resync: true }) => {
                self.runtime.resync_workload(added, deleted).await
            }
            // [impl->swdd~agent-handles-update-workload-state-requests~1]
            LinkEvent::Message(FromServer::UpdateWorkloadState(states)) => {
                self.runtime.update_workload_states(states).await
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
}
