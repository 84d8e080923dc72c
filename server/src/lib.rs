//! `ank-server` as a library: the desired state, the workload states and the
//! connected agents and commanders, served over the Ankaios v1 gRPC protocol.
//! [`run`] serves on a given listener until the shutdown token fires, so
//! tests can start a server in-process on port 0.

pub mod cli;
pub mod config_file;
mod connections;
mod desired_state;
mod grpc;
mod log_campaigns;
mod requests;
mod server;
mod workload_states;

use std::path::Path;

use ank_common::State;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use server::ServerHandle;

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot read startup manifest '{path}': {source}")]
    ReadManifest { path: String, source: std::io::Error },
    #[error("invalid startup manifest: {0}")]
    InvalidManifest(String),
}

/// Reads and validates the startup manifest.
pub fn load_startup_manifest(path: &Path) -> Result<State, StartupError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| StartupError::ReadManifest { path: path.display().to_string(), source })?;
    let state = ank_common::manifest::parse_manifest(&path.display().to_string(), &text)
        .map_err(|e| StartupError::InvalidManifest(e.to_string()))?;
    desired_state::validate(&state).map_err(StartupError::InvalidManifest)?;
    Ok(state)
}

/// Serves `initial` as desired state on `listener` until `shutdown` fires.
pub async fn run(initial: State, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (handle, actor) = server::AnkaiosServer::new(initial);
    let actor_task = tokio::spawn(actor.run(shutdown.clone()));
    let result = grpc::serve(handle, listener, shutdown.clone()).await;
    shutdown.cancel();
    actor_task.await?;
    result
}
