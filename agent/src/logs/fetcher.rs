//! One log stream: finds the workload in the runtimes, streams its lines to
//! the server in batches (sized by [`framing`](super::framing)) and says
//! when the stream ended.

use std::sync::Arc;

use ank_common::WorkloadInstanceName;
use ank_common::messages::{LogEntry, ToServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::ServerSink;
use crate::runtime_connectors::{LogLines, LogOptions, RuntimeError, RuntimeRegistry};

/// Most lines in one `LogEntriesResponse`.
const MAX_BATCH: usize = 100;

/// Why a workload's logs cannot be streamed.
#[derive(Debug, thiserror::Error)]
enum NoLogs {
    /// The runtime running it refused.
    #[error("{0}")]
    Runtime(RuntimeError),
    #[error("agent '{agent}' has no container for it (a finished workload's container is removed after its retention)")]
    NoContainer { agent: String },
}

pub(super) struct Fetcher {
    pub request_id: String,
    pub instance: WorkloadInstanceName,
    pub options: LogOptions,
    pub registry: Arc<RuntimeRegistry>,
    pub server: ServerSink,
    pub stop: CancellationToken,
    pub done: mpsc::UnboundedSender<String>,
}

impl Fetcher {
    pub async fn run(self) {
        let reason = match self.open().await {
            Ok(lines) => {
                self.stream(lines).await;
                String::new()
            }
            Err(why) => {
                tracing::info!("logs of '{}' for '{}': {why}", self.instance, self.request_id);
                why.to_string()
            }
        };
        // A cancelled request gets no stop response: nobody waits for it.
        if !self.stop.is_cancelled() {
            let _ = self.server.send(ToServer::LogsStopResponse {
                request_id: self.request_id.clone(),
                workload_name: self.instance.clone(),
                reason,
            });
        }
        let _ = self.done.send(self.request_id);
    }

    /// The log lines of the workload, from whichever runtime runs it.
    async fn open(&self) -> Result<LogLines, NoLogs> {
        for connector in self.registry.iter() {
            match connector.workload_id(&self.instance).await {
                Ok(Some(id)) => return connector.logs(&id, &self.options).await.map_err(NoLogs::Runtime),
                Ok(None) => {}
                Err(e) => tracing::debug!("runtime '{}' cannot look up '{}': {e}", connector.name(), self.instance),
            }
        }
        Err(NoLogs::NoContainer { agent: self.instance.agent_name.to_string() })
    }

    async fn stream(&self, mut lines: LogLines) {
        loop {
            let first = tokio::select! {
                () = self.stop.cancelled() => return,
                line = lines.recv() => match line {
                    Some(l) => l,
                    None => return,
                },
            };
            let mut entries = vec![self.entry(first)];
            while entries.len() < MAX_BATCH {
                match lines.try_recv() {
                    Ok(l) => entries.push(self.entry(l)),
                    Err(_) => break,
                }
            }
            for entries in super::framing::frame(entries) {
                let msg = ToServer::LogEntriesResponse { request_id: self.request_id.clone(), entries };
                if self.server.send(msg).is_err() {
                    return;
                }
            }
        }
    }

    fn entry(&self, message: String) -> LogEntry {
        LogEntry { workload_name: self.instance.clone(), message }
    }
}
