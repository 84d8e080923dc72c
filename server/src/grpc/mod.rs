//! The gRPC edge of the server: the AgentConnection, CliConnection and
//! CommandConnection services. Each stream gets a connection id; inbound
//! wire messages are converted to domain [`ToServer`] and handed to the
//! server actor, outbound domain messages are converted back. With mTLS
//! ([`tls`]) the peer's certificate names are checked against the
//! [`identity`] rules first (an agent's hello), and every message passes
//! the stream's [`gate`]: the first must be the service's hello, later
//! hellos are ignored, a read-only client may only read.
//! Every message in either direction is limited to [`MAX_MESSAGE_BYTES`]: a
//! client that sends a larger one gets its stream ended with
//! ResourceExhausted naming the size and the limit; a response too large to
//! send is answered with an error response instead, any other message too
//! large ends the stream the same way. A Goodbye ends the connection like
//! the end of its stream. A CommandConnection gets only the answers to its
//! requests unless it asks for pushed workload states with
//! [`PUSH_STATES_HEADER`].
//!
//! [`ToServer`]: ank_common::messages::ToServer
//! [`MAX_MESSAGE_BYTES`]: ank_proto::MAX_MESSAGE_BYTES

pub mod gate;
pub mod identity;
pub mod tls;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ank_common::messages::{self, FromServer, PUSH_STATES_HEADER, ResponseContent, ToServer};
use ank_common::messages::{from_server_to_proto, to_server_from_proto};
use ank_proto::grpc_api as g;
use ank_proto::limits::{MAX_MESSAGE_BYTES, check_size, is_too_large, too_large_status};
use g::agent_connection_server::{AgentConnection, AgentConnectionServer};
use g::cli_connection_server::{CliConnection, CliConnectionServer};
use g::command_connection_server::{CommandConnection, CommandConnectionServer};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::actor::ServerHandle;
use crate::connections::{ConnId, ConnKind};
use gate::{StreamGate, Verdict};
use identity::IdentityPolicy;
use tls::{PeerIdentity, ServerTls};

/// How the server listens: plain or mTLS, and the identity rules.
#[derive(Clone)]
pub struct ServeOptions {
    pub tls: Option<Arc<ServerTls>>,
    pub policy: IdentityPolicy,
    /// How silently dead agents and clients are noticed; `None`: only by TCP.
    pub heartbeat: Option<ank_proto::dial::Heartbeat>,
    /// How long open streams get to finish after shutdown was requested.
    pub shutdown_grace: Duration,
    /// When unconfirmed specs are re-sent to agents.
    pub resync: crate::workload_states::ResyncSettings,
    /// How apply jobs behave.
    pub jobs: crate::jobs::JobSettings,
    /// When finished workloads are deleted (`ttlAfterFinished`).
    pub reaper: crate::reaper::ReaperSettings,
    /// How workloads with an agent selector are placed.
    pub placement: crate::placement::PlacementSettings,
    /// The mutating hooks run on every change of the workloads.
    pub hooks: crate::hooks::HooksRegistry,
    /// How many event subscriptions and log requests one connection may keep open.
    pub stream_limits: crate::stream_limits::StreamLimits,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            tls: None,
            policy: IdentityPolicy::default(),
            heartbeat: None,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            resync: Default::default(),
            jobs: Default::default(),
            reaper: Default::default(),
            placement: Default::default(),
            hooks: Default::default(),
            stream_limits: Default::default(),
        }
    }
}

/// Outbound queue length per stream; a client that falls this far behind is
/// disconnected instead of growing the server's memory.
const OUTBOUND_QUEUE: usize = 1024;
/// Default of [`ServeOptions::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the server sends one stream.
pub type OutStream = Pin<Box<dyn Stream<Item = Result<g::FromServer, Status>> + Send>>;

#[derive(Clone)]
struct Services {
    handle: ServerHandle,
    next_conn: Arc<AtomicU64>,
    policy: Arc<IdentityPolicy>,
    /// Ends every stream's reading at shutdown, so that the streams close
    /// at once instead of waiting for their clients.
    shutdown: CancellationToken,
}

impl Services {
    async fn connect(
        &self,
        kind: ConnKind,
        req: Request<Streaming<g::ToServer>>,
    ) -> Result<Response<OutStream>, Status> {
        let peer = req.extensions().get::<PeerIdentity>().cloned();
        let kind = match kind {
            ConnKind::Command if req.metadata().contains_key(PUSH_STATES_HEADER) => ConnKind::Commander,
            kind => kind,
        };
        let push_states = kind == ConnKind::Commander;
        let out = self.open_stream(kind, peer, req.into_inner()).await?;
        let mut response = Response::new(out);
        if push_states {
            // Tells the client that its states come pushed.
            response.metadata_mut().insert(PUSH_STATES_HEADER, tonic::metadata::MetadataValue::from_static("true"));
        }
        Ok(response)
    }

    /// Serves one stream of `kind` whose client has the certificate
    /// `peer`: checks its first message, hands what the gate lets through
    /// to the server, and returns what the server sends it.
    async fn open_stream<S>(
        &self,
        kind: ConnKind,
        peer: Option<PeerIdentity>,
        mut inbound: S,
    ) -> Result<OutStream, Status>
    where
        S: Stream<Item = Result<g::ToServer, Status>> + Send + Unpin + 'static,
    {
        let conn: ConnId = self.next_conn.fetch_add(1, Ordering::Relaxed);
        // The first message is the hello: its version must be compatible,
        // an agent's certificate must allow the name it says hello with,
        // and it must be the hello of the service (as Ankaios: nothing
        // reaches the server before it).
        let first = next_message(&mut inbound, conn).await?;
        check_hello_version(first.as_ref())?;
        if kind == ConnKind::Agent
            && let Err(refusal) = self.policy.check_agent(peer.as_ref(), first.as_ref())
        {
            tracing::warn!("agent connection refused: {refusal}");
            return Err(refusal.into());
        }
        let gate = StreamGate::new(kind, peer, &self.policy);
        if let Err(refusal) = gate.first(first.as_ref()) {
            tracing::warn!("connection {conn} refused: {}", refusal.message());
            return Err(refusal);
        }
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        self.handle.opened(conn, kind, tx.clone()).await;
        if let Some(first) = first {
            self.handle.message(conn, first).await;
        }
        // Weak: the stream ends as soon as the server lets go of it (it was
        // replaced, or the server stops), whatever the client still sends.
        let refusals = tx.downgrade();
        drop(tx);
        // Why the stream ends, if the client broke it (an oversized message):
        // sent after what is queued, once the server has let go of the stream
        // (the reader sends it before it reports the stream closed).
        let (end_tx, mut end_rx) = oneshot::channel::<Status>();
        let reader = forward_inbound(self.handle.clone(), conn, inbound, (gate, refusals), end_tx);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = reader => {}
            }
        });
        let end = tokio_stream::iter([()]).filter_map(move |()| end_rx.try_recv().ok().map(Err));
        let out = ReceiverStream::new(rx).map(move |m| to_wire(conn, m)).chain(end);
        Ok(Box::pin(out))
    }
}

/// Refuses a hello whose protocol version is not compatible with ours,
/// as Ankaios does: FailedPrecondition with its text.
fn check_hello_version(first: Option<&ToServer>) -> Result<(), Status> {
    let version = match first {
        Some(ToServer::AgentHello { protocol_version, .. } | ToServer::CommanderHello { protocol_version }) => {
            protocol_version
        }
        _ => return Ok(()),
    };
    ank_common::version::check_compatibility(version).map_err(|refusal| {
        tracing::warn!("connection refused: unsupported protocol version '{version}'");
        Status::failed_precondition(refusal)
    })
}

/// The wire form of `m`, within [`MAX_MESSAGE_BYTES`]: a response too large
/// becomes an error response to the same request, so the client learns why
/// and the stream goes on; any other message too large ends the stream
/// with ResourceExhausted.
fn to_wire(conn: ConnId, m: FromServer) -> Result<g::FromServer, Status> {
    let wire = from_server_to_proto(&m);
    let Err(too_large) = check_size(&wire) else { return Ok(wire) };
    if let FromServer::Response(r) = m {
        tracing::warn!("connection {conn}: response to request '{}' not sent: {too_large}", r.request_id);
        let content = ResponseContent::Error(format!("the response cannot be sent: {too_large}"));
        let error =
            from_server_to_proto(&FromServer::Response(messages::Response { request_id: r.request_id, content }));
        if check_size(&error).is_ok() {
            return Ok(error);
        }
    } else {
        tracing::warn!("connection {conn}: closing the stream, a message for it is too large: {too_large}");
    }
    Err(too_large.into())
}

/// The next message of a stream that this version understands; `Ok(None)`
/// when the stream ends, the stream's error when it fails. An oversized
/// message fails it with ResourceExhausted naming the size and the limit.
async fn next_message<S>(inbound: &mut S, conn: ConnId) -> Result<Option<ToServer>, Status>
where
    S: Stream<Item = Result<g::ToServer, Status>> + Unpin,
{
    loop {
        let wire = match inbound.next().await {
            Some(Ok(wire)) => wire,
            None => return Ok(None),
            Some(Err(status)) if is_too_large(&status) => {
                let status = too_large_status(&status);
                tracing::warn!("connection {conn}: closing the stream: {}", status.message());
                return Err(status);
            }
            Some(Err(status)) => {
                tracing::debug!("connection {conn}: stream error: {status}");
                return Err(status);
            }
        };
        match to_server_from_proto(wire) {
            Ok(Some(msg)) => return Ok(Some(msg)),
            Ok(None) => tracing::debug!("connection {conn}: message kind not handled by this version"),
            Err(e) => tracing::warn!("connection {conn}: {e}; message dropped"),
        }
    }
}

/// Reads a client's stream into the server until it ends. What the gate
/// refuses is answered on the client's own stream; what it ignores is
/// dropped. When the client broke the stream with an oversized message,
/// `end` gets the status that tells it so.
async fn forward_inbound<S>(
    handle: ServerHandle,
    conn: ConnId,
    mut inbound: S,
    (gate, refusals): (StreamGate, mpsc::WeakSender<FromServer>),
    end: oneshot::Sender<Status>,
) where
    S: Stream<Item = Result<g::ToServer, Status>> + Unpin,
{
    loop {
        let msg = match next_message(&mut inbound, conn).await {
            Ok(Some(msg)) => msg,
            Ok(None) => break,
            Err(status) => {
                if status.code() == tonic::Code::ResourceExhausted {
                    let _ = end.send(status);
                }
                break;
            }
        };
        // As in Ankaios, a goodbye ends the connection: the server forgets
        // it (its log campaigns and event subscriptions end) and so ends
        // the response stream, which the client waits for.
        if matches!(msg, ToServer::Goodbye) {
            tracing::debug!("connection {conn} says goodbye");
            break;
        }
        match gate.next(&msg) {
            Verdict::Forward => handle.message(conn, msg).await,
            Verdict::Refuse(refusal) => {
                tracing::info!("connection {conn}: request '{}' refused", refusal.request_id);
                let Some(tx) = refusals.upgrade() else { break };
                let _ = tx.send(FromServer::Response(refusal)).await;
            }
            Verdict::Ignore(what) => tracing::warn!("connection {conn}: {what} ignored"),
        }
    }
    handle.closed(conn).await;
}

#[tonic::async_trait]
impl AgentConnection for Services {
    type ConnectAgentStream = OutStream;
    async fn connect_agent(&self, req: Request<Streaming<g::ToServer>>) -> Result<Response<OutStream>, Status> {
        self.connect(ConnKind::Agent, req).await
    }
}

#[tonic::async_trait]
impl CliConnection for Services {
    type ConnectCliStream = OutStream;
    async fn connect_cli(&self, req: Request<Streaming<g::ToServer>>) -> Result<Response<OutStream>, Status> {
        self.connect(ConnKind::Commander, req).await
    }
}

#[tonic::async_trait]
impl CommandConnection for Services {
    type ConnectCommandStream = OutStream;
    async fn connect_command(&self, req: Request<Streaming<g::ToServer>>) -> Result<Response<OutStream>, Status> {
        self.connect(ConnKind::Command, req).await
    }
}

/// The server's stream handling without the network: streams of any
/// messages, in any order, as the gRPC services would hand them over
/// (the fuzz target `grpc_stream_sequences` drives it).
pub struct StreamHarness {
    services: Services,
}

/// The services a harness stream stands for.
pub use crate::connections::ConnKind as StreamKind;

impl StreamHarness {
    /// Serves streams for the server behind `handle` under `policy`.
    pub fn new(handle: ServerHandle, policy: IdentityPolicy, shutdown: CancellationToken) -> Self {
        let services = Services { handle, next_conn: Arc::new(AtomicU64::new(1)), policy: Arc::new(policy), shutdown };
        Self { services }
    }

    /// Opens a stream of `kind` for a client with the certificate `peer`
    /// that sends `inbound`: what the server sends back, or the status the
    /// stream is refused with.
    pub async fn open<S>(&self, kind: StreamKind, peer: Option<PeerIdentity>, inbound: S) -> Result<OutStream, Status>
    where
        S: Stream<Item = Result<g::ToServer, Status>> + Send + Unpin + 'static,
    {
        self.services.open_stream(kind, peer, inbound).await
    }
}

/// Serves the three services on `listener` until `shutdown` fires.
pub async fn serve(
    handle: ServerHandle,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let services = Services {
        handle,
        next_conn: Arc::new(AtomicU64::new(1)),
        policy: Arc::new(options.policy),
        shutdown: shutdown.clone(),
    };
    let heartbeat = options.heartbeat;
    let grace = options.shutdown_grace;
    let router = tonic::transport::Server::builder()
        .http2_keepalive_interval(heartbeat.map(|h| h.interval))
        .http2_keepalive_timeout(heartbeat.map(|h| h.timeout))
        .add_service(
            AgentConnectionServer::new(services.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            CliConnectionServer::new(services.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        )
        .add_service(
            CommandConnectionServer::new(services)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
        );
    let server = match options.tls {
        Some(tls) => {
            let incoming = tls::incoming(listener, tls, shutdown.clone());
            Box::pin(router.serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned()))
                as Pin<Box<dyn std::future::Future<Output = Result<(), tonic::transport::Error>> + Send>>
        }
        None => {
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            Box::pin(router.serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned()))
        }
    };
    tokio::pin!(server);
    tokio::select! {
        res = &mut server => res?,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(grace).await } => {
            tracing::info!("open streams did not finish within the shutdown grace of {grace:?}; closing them");
        }
    }
    Ok(())
}
