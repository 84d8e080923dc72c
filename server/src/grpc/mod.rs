//! The gRPC edge of the server: the AgentConnection, CliConnection and
//! CommandConnection services. Each stream gets a connection id; inbound
//! wire messages are converted to domain [`ToServer`] and handed to the
//! server actor, outbound domain messages are converted back. With mTLS
//! ([`tls`]) the peer's certificate names are checked against the
//! [`identity`] rules first: an agent's hello, a read-only client's writes.
//!
//! [`ToServer`]: ank_common::messages::ToServer

pub mod identity;
pub mod tls;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ank_common::convert::{from_server_to_proto, to_server_from_proto};
use ank_common::messages::{FromServer, ToServer};
use ank_proto::grpc_api as g;
use g::agent_connection_server::{AgentConnection, AgentConnectionServer};
use g::cli_connection_server::{CliConnection, CliConnectionServer};
use g::command_connection_server::{CommandConnection, CommandConnectionServer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt, wrappers::ReceiverStream};
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

use crate::connections::{ConnId, ConnKind};
use crate::server::ServerHandle;
use identity::{IdentityPolicy, refuse_write};
use tls::{PeerIdentity, ServerTls};

/// How the server listens: plain or mTLS, and the identity rules.
#[derive(Clone, Default)]
pub struct ServeOptions {
    pub tls: Option<Arc<ServerTls>>,
    pub policy: IdentityPolicy,
    /// How silently dead agents and clients are noticed; `None`: only by TCP.
    pub heartbeat: Option<ank_proto::dial::Heartbeat>,
}

/// Outbound queue length per stream; a client that falls this far behind is
/// disconnected instead of growing the server's memory.
const OUTBOUND_QUEUE: usize = 1024;
/// How long open streams get to finish after shutdown was requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

type OutStream = Pin<Box<dyn Stream<Item = Result<g::FromServer, Status>> + Send>>;

#[derive(Clone)]
struct Services {
    handle: ServerHandle,
    next_conn: Arc<AtomicU64>,
    policy: Arc<IdentityPolicy>,
}

impl Services {
    async fn connect(
        &self,
        kind: ConnKind,
        req: Request<Streaming<g::ToServer>>,
    ) -> Result<Response<OutStream>, Status> {
        let peer = req.extensions().get::<PeerIdentity>().cloned();
        let mut inbound = req.into_inner();
        let conn: ConnId = self.next_conn.fetch_add(1, Ordering::Relaxed);
        // An agent's certificate must carry the name it says hello with.
        let first = match (kind, &peer) {
            (ConnKind::Agent, Some(_)) if self.policy.check_agent_names => {
                let first = next_message(&mut inbound, conn).await.ok_or_else(|| Status::cancelled("stream ended"))?;
                if let Err(reason) = self.policy.check_agent(peer.as_ref(), &first) {
                    tracing::warn!("agent connection refused: {reason}");
                    return Err(Status::permission_denied(reason));
                }
                Some(first)
            }
            _ => None,
        };
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        self.handle.opened(conn, kind, tx.clone()).await;
        if let Some(first) = first {
            self.handle.message(conn, first).await;
        }
        let read_only = peer.filter(|p| self.policy.is_read_only(Some(p))).map(|p| (p, tx));
        tokio::spawn(forward_inbound(self.handle.clone(), conn, inbound, read_only));
        let out = ReceiverStream::new(rx).map(|m| Ok(from_server_to_proto(&m)));
        Ok(Response::new(Box::pin(out)))
    }
}

/// The next message of a stream that this version understands; `None`
/// when the stream ends or fails.
async fn next_message(inbound: &mut Streaming<g::ToServer>, conn: ConnId) -> Option<ToServer> {
    loop {
        let wire = match inbound.message().await {
            Ok(Some(wire)) => wire,
            Ok(None) => return None,
            Err(status) => {
                tracing::debug!("connection {conn}: stream error: {status}");
                return None;
            }
        };
        match to_server_from_proto(wire) {
            Ok(Some(msg)) => return Some(msg),
            Ok(None) => tracing::debug!("connection {conn}: message kind not handled by this version"),
            Err(e) => tracing::warn!("connection {conn}: {e}; message dropped"),
        }
    }
}

/// Reads a client's stream into the server until it ends. A read-only
/// client's writes are answered with a refusal on its own stream.
async fn forward_inbound(
    handle: ServerHandle,
    conn: ConnId,
    mut inbound: Streaming<g::ToServer>,
    read_only: Option<(PeerIdentity, mpsc::Sender<FromServer>)>,
) {
    while let Some(msg) = next_message(&mut inbound, conn).await {
        if let Some((peer, tx)) = &read_only
            && let Some(refusal) = refuse_write(peer, &msg)
        {
            tracing::info!("connection {conn}: write of read-only client {:?} refused", peer.names);
            let _ = tx.send(FromServer::Response(refusal)).await;
            continue;
        }
        handle.message(conn, msg).await;
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
        self.connect(ConnKind::Commander, req).await
    }
}

/// Serves the three services on `listener` until `shutdown` fires.
pub async fn serve(
    handle: ServerHandle,
    listener: TcpListener,
    options: ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let services = Services { handle, next_conn: Arc::new(AtomicU64::new(1)), policy: Arc::new(options.policy) };
    let heartbeat = options.heartbeat;
    let router = tonic::transport::Server::builder()
        .http2_keepalive_interval(heartbeat.map(|h| h.interval))
        .http2_keepalive_timeout(heartbeat.map(|h| h.timeout))
        .add_service(AgentConnectionServer::new(services.clone()))
        .add_service(CliConnectionServer::new(services.clone()))
        .add_service(CommandConnectionServer::new(services));
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
        _ = async { shutdown.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::info!("open streams did not finish within {SHUTDOWN_GRACE:?}; closing them");
        }
    }
    Ok(())
}
