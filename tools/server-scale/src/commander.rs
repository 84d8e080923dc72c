//! [`Commander`]: the command connection that applies the manifests (the
//! `UpdateState` request `ank apply` sends) and asks which agents are
//! connected, as an Ankaios client (no pushed workload states).

use ank_cli::connection::{Connection, ConnectionError};
use ank_common::messages::{RequestContent, ResponseContent};

use crate::error::{Result, ScaleError};
use crate::subscriber::RESPONSE_TIMEOUT;

/// An open command connection.
pub struct Commander {
    conn: Connection,
}

impl Commander {
    /// Connects to `url`.
    pub async fn connect(url: &str) -> Result<Self> {
        let conn = Connection::connect_asking_pushes(url, None, RESPONSE_TIMEOUT, false, false)
            .await
            .map_err(failed("connecting"))?;
        Ok(Self { conn })
    }

    /// Sends an `UpdateState` request; the server must accept it.
    pub async fn apply(&mut self, request: RequestContent) -> Result<()> {
        match self.conn.request(request).await.map_err(failed("applying"))? {
            ResponseContent::UpdateStateSuccess { .. } => Ok(()),
            other => Err(ScaleError::Rejected { doing: "the apply", answer: format!("{other:?}") }),
        }
    }

    /// How many agents the server lists as connected.
    pub async fn connected_agents(&mut self) -> Result<usize> {
        let request = RequestContent::CompleteState { field_mask: vec!["agents".into()], subscribe_for_events: false };
        match self.conn.request(request).await.map_err(failed("asking for the agents"))? {
            ResponseContent::CompleteState(state) => Ok(state.agents.as_ref().map_or(0, |a| a.len())),
            other => Err(ScaleError::Rejected { doing: "the agents request", answer: format!("{other:?}") }),
        }
    }

    /// Says goodbye.
    pub async fn close(self) {
        self.conn.goodbye().await;
    }
}

fn failed(doing: &'static str) -> impl Fn(ConnectionError) -> ScaleError {
    move |source| ScaleError::Connection { doing, source }
}
