//! [`LogsManager`]: serves the server's log requests for this agent's
//! workloads. Each request ("campaign") gets one fetcher per named workload
//! of this agent; a fetcher streams the runtime's log lines to the server
//! as `LogEntriesResponse`s (of at most 2 MiB each, a longer line cut, as
//! Ankaios does) and ends with a `LogsStopResponse`. Campaigns
//! end on `LogsCancelRequest`, when the server link is lost and at shutdown.
//!
//! In: commands via [`LogsManagerHandle`] (from the `AgentManager`).
//! Out: `ToServer` log messages through the server link.

mod fetcher;
mod framing;

use std::collections::HashMap;
use std::sync::Arc;

use ank_common::messages::{LogsRequest, ToServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::runtime_connectors::{LogOptions, RuntimeRegistry};
use fetcher::Fetcher;

/// Where the log manager sends its messages (the server link, or a test).
pub type ServerSink = mpsc::UnboundedSender<ToServer>;

enum Command {
    Start { request_id: String, request: LogsRequest },
    Cancel { request_id: String },
    CancelAll,
}

/// Cheap, cloneable handle to the [`LogsManager`] task.
#[derive(Debug, Clone)]
pub struct LogsManagerHandle(mpsc::UnboundedSender<Command>);

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::Start { request_id, .. } => write!(f, "Start({request_id})"),
            Command::Cancel { request_id } => write!(f, "Cancel({request_id})"),
            Command::CancelAll => f.write_str("CancelAll"),
        }
    }
}

impl LogsManagerHandle {
    /// Starts the log streams of a request (replacing one with the same id).
    pub fn start(&self, request_id: String, request: LogsRequest) {
        let _ = self.0.send(Command::Start { request_id, request });
    }

    /// Stops the log streams of a request.
    pub fn cancel(&self, request_id: String) {
        let _ = self.0.send(Command::Cancel { request_id });
    }

    /// Stops every log stream (the server went away).
    pub fn cancel_all(&self) {
        let _ = self.0.send(Command::CancelAll);
    }
}

/// One log request being served.
struct Campaign {
    stop: CancellationToken,
    running: usize,
}

/// The task serving log requests.
pub struct LogsManager {
    agent_name: String,
    registry: Arc<RuntimeRegistry>,
    server: ServerSink,
    campaigns: HashMap<String, Campaign>,
    commands: mpsc::UnboundedReceiver<Command>,
    done_tx: mpsc::UnboundedSender<String>,
    done: mpsc::UnboundedReceiver<String>,
    shutdown: CancellationToken,
}

impl LogsManager {
    /// Spawns the manager; it runs until `shutdown`.
    pub fn start(
        agent_name: String,
        registry: Arc<RuntimeRegistry>,
        server: ServerSink,
        shutdown: CancellationToken,
    ) -> LogsManagerHandle {
        let (tx, commands) = mpsc::unbounded_channel();
        let (done_tx, done) = mpsc::unbounded_channel();
        let manager =
            LogsManager { agent_name, registry, server, campaigns: HashMap::new(), commands, done_tx, done, shutdown };
        tokio::spawn(manager.run());
        LogsManagerHandle(tx)
    }

    async fn run(mut self) {
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => break,
                Some(cmd) = self.commands.recv() => match cmd {
                    Command::Start { request_id, request } => self.handle_start(request_id, request),
                    Command::Cancel { request_id } => self.handle_cancel(&request_id),
                    Command::CancelAll => self.handle_cancel_all(),
                },
                Some(request_id) = self.done.recv() => self.handle_done(&request_id),
                else => break,
            }
        }
        self.handle_cancel_all();
    }

    fn handle_start(&mut self, request_id: String, request: LogsRequest) {
        self.handle_cancel(&request_id);
        let options = LogOptions {
            follow: request.follow,
            tail: (request.tail >= 0).then_some(request.tail),
            since: request.since,
            until: request.until,
        };
        let stop = self.shutdown.child_token();
        let mut running = 0;
        for name in request.workload_names.into_iter().filter(|n| n.agent_name == self.agent_name) {
            let fetcher = Fetcher {
                request_id: request_id.clone(),
                instance: name,
                options: options.clone(),
                registry: self.registry.clone(),
                server: self.server.clone(),
                stop: stop.clone(),
                done: self.done_tx.clone(),
            };
            tokio::spawn(fetcher.run());
            running += 1;
        }
        tracing::debug!("log request '{request_id}': {running} workloads of this agent");
        if running > 0 {
            self.campaigns.insert(request_id, Campaign { stop, running });
        }
    }

    fn handle_cancel(&mut self, request_id: &str) {
        if let Some(c) = self.campaigns.remove(request_id) {
            c.stop.cancel();
        }
    }

    fn handle_cancel_all(&mut self) {
        for (_, c) in self.campaigns.drain() {
            c.stop.cancel();
        }
    }

    fn handle_done(&mut self, request_id: &str) {
        if let Some(c) = self.campaigns.get_mut(request_id) {
            c.running = c.running.saturating_sub(1);
            if c.running == 0 {
                self.campaigns.remove(request_id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
