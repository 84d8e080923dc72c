//! [`RuntimeManagerHandle`]: the typed, cloneable handle to the
//! `RuntimeManager` task, and the [`Request`]s it sends the task (the
//! server's workloads, the other agents' states, a reconnect, the stop
//! before the agent exits).

use ank_common::WorkloadState;
use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use tokio::sync::{mpsc, watch};

use super::WorkloadCounts;

pub(super) enum Request {
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
    pub(super) requests: mpsc::Sender<Request>,
    pub(super) counts: watch::Receiver<WorkloadCounts>,
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
