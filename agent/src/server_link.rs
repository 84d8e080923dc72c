//! [`ServerLink`]: the agent's gRPC connection to the server (tonic client
//! of `AgentConnection/ConnectAgent`). It is the only place that knows the
//! wire types: it converts `ToServer` / `FromServer` at this edge, logs and
//! skips messages that do not convert, reconnects with [`Backoff`] (first
//! retry within ~50 ms, cap 2 s, reset after a successful connection), sends
//! `AgentHello` (with the agent's quota) on every connect and `AgentLoadStatus`
//! (with what its workloads use of the quota) every 2 s. Messages
//! are limited to [`MAX_MESSAGE_BYTES`] both ways: one too large to send is
//! dropped with a warning (a workload's request is answered with an error
//! instead), one too large from the server ends the session with a warning
//! and the link reconnects.
//!
//! In: `ToServer` via [`ServerLinkHandle`] (from the `AgentManager`).
//! Out: `LinkEvent`s (connected, messages) to the `AgentManager`.
//!
//! [`MAX_MESSAGE_BYTES`]: ank_proto::MAX_MESSAGE_BYTES

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::messages::{FromServer, Response, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_proto::grpc_api;
use ank_proto::grpc_api::agent_connection_client::AgentConnectionClient;
use ank_proto::limits::{MAX_MESSAGE_BYTES, MessageTooLarge, check_size, is_too_large};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::resource_monitor::ResourceMonitor;

/// Period of `AgentLoadStatus` messages.
const LOAD_STATUS_PERIOD: Duration = Duration::from_secs(2);
/// How long a TCP connect to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long to wait for the server to close the stream after Goodbye.
const GOODBYE_GRACE: Duration = Duration::from_millis(300);

/// What the link tells the `AgentManager`.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    /// A session started: the hello is sent; the full state set is due.
    Connected,
    /// A message from the server.
    Message(FromServer),
    /// The session ended (the link reconnects on its own).
    Disconnected,
}

/// Cheap handle to queue messages for the server. While disconnected,
/// queued messages are dropped: the full state set is re-sent on connect.
#[derive(Debug, Clone)]
pub struct ServerLinkHandle(mpsc::UnboundedSender<ToServer>);

impl ServerLinkHandle {
    /// The raw queue, for components that send on their own (log streams).
    pub fn sender(&self) -> mpsc::UnboundedSender<ToServer> {
        self.0.clone()
    }
}

impl ServerLinkHandle {
    /// A handle and the queue behind it, without a link (for tests).
    #[cfg(test)]
    pub(crate) fn channel() -> (Self, mpsc::UnboundedReceiver<ToServer>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Queues `msg` for the server.
    pub fn send(&self, msg: ToServer) {
        let _ = self.0.send(msg);
    }
}

/// Identity and address of this agent's link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    pub server_url: String,
    pub agent_name: String,
    pub tags: BTreeMap<String, String>,
    /// Capabilities sent in the hello (runtimes and configured ones).
    pub capabilities: Vec<String>,
    /// Static metrics sent with every load status.
    pub metrics: BTreeMap<String, f64>,
    /// mTLS material, read at every connect; `None`: plain http.
    pub tls: Option<ank_common::tls::TlsSources>,
    /// The server's certificate must name the URL's host, not `ank-server`.
    pub tls_check_url_host: bool,
    /// The revocation lists for the server's certificate (`--crl_pem`).
    pub tls_crl: Option<std::path::PathBuf>,
    /// How a dead server is noticed; `None`: only by TCP.
    pub heartbeat: Option<ank_proto::dial::Heartbeat>,
    /// The agent's workload quota, announced in the hello.
    pub quota: ank_common::quota::QuotaLimits,
    /// What the workloads use of it, sent with the load status.
    pub quota_used: tokio::sync::watch::Receiver<ank_common::quota::QuotaUsage>,
}

/// Why a session ended.
enum SessionEnd {
    Shutdown,
    Lost(String),
}

/// The link task.
// [impl->swdd~communication-to-from-agent-middleware~1]
pub struct ServerLink {
    config: LinkConfig,
    outbound: mpsc::UnboundedReceiver<ToServer>,
    events: mpsc::Sender<LinkEvent>,
    monitor: ResourceMonitor,
    shutdown: CancellationToken,
}

impl ServerLink {
    /// A link, its handle and the receiver of its events.
    pub fn new(config: LinkConfig, shutdown: CancellationToken) -> (Self, ServerLinkHandle, mpsc::Receiver<LinkEvent>) {
        let (tx, outbound) = mpsc::unbounded_channel();
        let (events, events_rx) = mpsc::channel(64);
        let link = Self { config, outbound, events, monitor: ResourceMonitor::default(), shutdown };
        (link, ServerLinkHandle(tx), events_rx)
    }

    /// Connects and reconnects until shutdown.
    // [impl->swdd~agent-default-communication-grpc~1]
    pub async fn run(mut self) {
        let mut backoff = Backoff::reconnect();
        loop {
            match self.session(&mut backoff).await {
                SessionEnd::Shutdown => return,
                SessionEnd::Lost(reason) => {
                    let first_failure = backoff.attempts() == 0;
                    if first_failure {
                        let _ = self.events.send(LinkEvent::Disconnected).await;
                    }
                    let delay = backoff.next_delay();
                    if first_failure {
                        tracing::warn!("no connection to server '{}': {reason}; retrying", self.config.server_url);
                    } else {
                        tracing::debug!("still no connection: {reason}; retry in {delay:?}");
                    }
                    tokio::select! {
                        () = self.shutdown.cancelled() => return,
                        () = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    fn discard_queued(&mut self) {
        while self.outbound.try_recv().is_ok() {}
    }

    async fn connect(&self) -> Result<AgentConnectionClient<tonic::transport::Channel>, ConnectError> {
        // [impl->swdd~agent-establishes-insecure-communication-based-on-provided-insecure-cli-argument~1]
        // [impl->swdd~agent-provides-file-paths-to-communication-middleware~1]
        // The PEM files are read at every connect: renewed certificates are
        // used from the next connection on.
        let mut pem = self.config.tls.as_ref().map(|t| t.client_pem(self.config.tls_check_url_host)).transpose()?;
        if let (Some(pem), Some(crl)) = (pem.as_mut(), &self.config.tls_crl) {
            pem.crl = Some(std::fs::read(crl).map_err(|cause| ConnectError::Crl { path: crl.clone(), cause })?);
        }
        let endpoint =
            ank_proto::dial::endpoint(&self.config.server_url, pem.as_ref(), CONNECT_TIMEOUT, self.config.heartbeat)?;
        let channel = ank_proto::dial::connect(&endpoint, pem.as_ref()).await.map_err(ConnectError::Connect)?;
        Ok(AgentConnectionClient::new(channel)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    async fn session(&mut self, backoff: &mut Backoff) -> SessionEnd {
        self.discard_queued();
        let mut client = tokio::select! {
            () = self.shutdown.cancelled() => return SessionEnd::Shutdown,
            c = self.connect() => match c { Ok(c) => c, Err(e) => return SessionEnd::Lost(e.to_string()) },
        };
        let (tx, rx) = mpsc::channel::<grpc_api::ToServer>(64);
        // [impl->swdd~agent-sends-hello~1]
        let hello = ToServer::AgentHello {
            agent_name: self.config.agent_name.clone(),
            protocol_version: ank_common::PROTOCOL_VERSION.to_owned(),
            tags: self.config.tags.clone(),
            reports_conditions: true,
            capabilities: self.config.capabilities.clone(),
            // [feature K2: the agent announces its quota]
            quota: self.config.quota,
        };
        let _ = tx.send(to_server_to_proto(&hello)).await;
        let mut inbound = tokio::select! {
            () = self.shutdown.cancelled() => return SessionEnd::Shutdown,
            r = client.connect_agent(ReceiverStream::new(rx)) => match r {
                Ok(r) => r.into_inner(),
                Err(status) => return SessionEnd::Lost(error_chain(&status)),
            },
        };
        tracing::info!("connected to server '{}'", self.config.server_url);
        backoff.reset();
        if self.events.send(LinkEvent::Connected).await.is_err() {
            return SessionEnd::Shutdown;
        }
        let mut load = tokio::time::interval(LOAD_STATUS_PERIOD);
        load.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    let _ = tx.send(to_server_to_proto(&ToServer::Goodbye)).await;
                    drop(tx);
                    let _ = tokio::time::timeout(GOODBYE_GRACE, async { while let Ok(Some(_)) = inbound.message().await {} }).await;
                    return SessionEnd::Shutdown;
                }
                Some(msg) = self.outbound.recv() => {
                    let wire = to_server_to_proto(&msg);
                    if let Err(too_large) = check_size(&wire) {
                        self.refuse_oversized(msg, too_large).await;
                        continue;
                    }
                    if tx.send(wire).await.is_err() {
                        return SessionEnd::Lost("request stream closed".into());
                    }
                }
                msg = inbound.message() => match msg {
                    Ok(Some(m)) => self.forward(m).await,
                    Ok(None) => return SessionEnd::Lost("server closed the stream".into()),
                    Err(status) if is_too_large(&status) => {
                        tracing::warn!("a message from the server is too large, reconnecting: {}", status.message());
                        return SessionEnd::Lost(format!("message too large: {}", status.message()));
                    }
                    Err(status) => return SessionEnd::Lost(format!("stream error: {}", error_chain(&status))),
                },
                _ = load.tick() => {
                    let status = self.monitor.sample();
                    let quota_used = *self.config.quota_used.borrow();
                    let msg = ToServer::AgentLoadStatus {
                        agent_name: self.config.agent_name.clone(),
                        status,
                        metrics: self.config.metrics.clone(),
                        quota_used,
                    };
                    let _ = tx.send(to_server_to_proto(&msg)).await;
                }
            }
        }
    }

    /// A message too large for the server is not sent: tonic would end the
    /// whole session on it. A workload's request gets an error response
    /// through the usual way back to its control interface.
    async fn refuse_oversized(&self, msg: ToServer, too_large: MessageTooLarge) {
        let ToServer::Request(request) = msg else {
            tracing::warn!("a message to the server was dropped: {too_large}");
            return;
        };
        tracing::warn!("request '{}' not sent to the server: {too_large}", request.request_id);
        let content = ResponseContent::Error(format!("the request cannot be sent to the server: {too_large}"));
        let response = FromServer::Response(Response { request_id: request.request_id, content });
        let _ = self.events.send(LinkEvent::Message(response)).await;
    }

    /// Converts one wire message; bad ones are logged and skipped.
    async fn forward(&self, m: grpc_api::FromServer) {
        match from_server_from_proto(m) {
            Ok(Some(msg)) => {
                let _ = self.events.send(LinkEvent::Message(msg)).await;
            }
            Ok(None) => tracing::debug!("ignoring a message kind this agent does not handle yet"),
            Err(e) => tracing::warn!("skipping a message from the server: {e}"),
        }
    }
}

/// The innermost cause of an error (tonic's own message is generic).
/// Every level of an error chain ("transport error: ... : received fatal
/// alert: UnknownCA"), levels that repeat the one before left out.
/// Why no connection to the server was made.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error(transparent)]
    Tls(#[from] ank_common::tls::TlsError),
    #[error("crl_pem '{}': {cause}", path.display())]
    Crl { path: std::path::PathBuf, cause: std::io::Error },
    #[error(transparent)]
    Dial(#[from] ank_proto::dial::DialError),
    /// The connection failed: the error with its causes.
    #[error("{}", error_chain(.0))]
    Connect(tonic::transport::Error),
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = vec![e.to_string()];
    let mut cur = e;
    while let Some(source) = cur.source() {
        let text = source.to_string();
        if !text.is_empty() && !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = source;
    }
    parts.join(": ")
}
