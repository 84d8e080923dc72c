//! The actor's handle: what the gRPC layer and the daemon hold of it.

use ank_common::daemon::Pinger;
use ank_common::messages::{FromServer, ToServer};
use tokio::sync::{mpsc, watch};

use crate::connections::{ConnId, ConnKind};

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
    pub(super) tx: mpsc::Sender<ServerCommand>,
    pub(super) counts: watch::Receiver<ServerCounts>,
    pub(super) pinger: Pinger,
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
