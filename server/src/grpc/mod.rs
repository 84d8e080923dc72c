//! The gRPC edge of the server: the AgentConnection, CliConnection and
//! CommandConnection services. Each stream gets a connection id; inbound
//! wire messages are converted to domain [`ToServer`] and handed to the
//! server actor, outbound domain messages are converted back. Nothing
//! beyond translation happens here.
//!
//! [`ToServer`]: ank_common::messages::ToServer

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ank_common::convert::{from_server_to_proto, to_server_from_proto};
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
}

impl Services {
    async fn connect(
        &self,
        kind: ConnKind,
        req: Request<Streaming<g::ToServer>>,
    ) -> Result<Response<OutStream>, Status> {
        let conn: ConnId = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        self.handle.opened(conn, kind, tx).await;
        tokio::spawn(forward_inbound(self.handle.clone(), conn, req.into_inner()));
        let out = ReceiverStream::new(rx).map(|m| Ok(from_server_to_proto(&m)));
        Ok(Response::new(Box::pin(out)))
    }
}

/// Reads a client's stream into the server until it ends.
async fn forward_inbound(handle: ServerHandle, conn: ConnId, mut inbound: Streaming<g::ToServer>) {
    loop {
        match inbound.message().await {
            Ok(Some(wire)) => match to_server_from_proto(wire) {
                Ok(Some(msg)) => handle.message(conn, msg).await,
                Ok(None) => tracing::debug!("connection {conn}: message kind not handled by this version"),
                Err(e) => tracing::warn!("connection {conn}: {e}; message dropped"),
            },
            Ok(None) => break,
            Err(status) => {
                tracing::debug!("connection {conn}: stream error: {status}");
                break;
            }
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
        self.connect(ConnKind::Commander, req).await
    }
}

/// Serves the three services on `listener` until `shutdown` fires.
pub async fn serve(handle: ServerHandle, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let services = Services { handle, next_conn: Arc::new(AtomicU64::new(1)) };
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = tonic::transport::Server::builder()
        .add_service(AgentConnectionServer::new(services.clone()))
        .add_service(CliConnectionServer::new(services.clone()))
        .add_service(CommandConnectionServer::new(services))
        .serve_with_incoming_shutdown(incoming, shutdown.clone().cancelled_owned());
    tokio::pin!(server);
    tokio::select! {
        res = &mut server => res?,
        _ = async { shutdown.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::info!("open streams did not finish within {SHUTDOWN_GRACE:?}; closing them");
        }
    }
    Ok(())
}
