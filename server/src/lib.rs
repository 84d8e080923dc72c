//! `ank-server` as a library: the desired state, the workload states and the
//! connected agents and commanders, served over the Ankaios v1 gRPC protocol.
//! [`run`] serves on a given listener until the shutdown token fires, so
//! tests can start a server in-process on port 0.

pub mod cli;
pub mod config_file;
mod connections;
pub mod desired_state;
mod events;
pub mod grpc;
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
    let (state, warnings) = ank_common::manifest::parse_manifest_with_warnings(&path.display().to_string(), &text)
        .map_err(|e| StartupError::InvalidManifest(e.to_string()))?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    // Validated and rendered here so that a bad template stops the start.
    desired_state::DesiredState::new(state.clone()).map_err(StartupError::InvalidManifest)?;
    Ok(state)
}

/// Serves `initial` as desired state on `listener` until `shutdown` fires.
pub async fn run(initial: State, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    run_with(initial, listener, grpc::ServeOptions::default(), shutdown).await
}

/// Like [`run`], listening with `options` (mTLS and identity rules).
pub async fn run_with(
    initial: State,
    listener: TcpListener,
    options: grpc::ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let initial =
        desired_state::DesiredState::new(initial).map_err(|e| anyhow::anyhow!("invalid desired state: {e}"))?;
    let (handle, actor) = server::AnkaiosServer::new(initial);
    let actor_task = tokio::spawn(actor.run(shutdown.clone()));
    let result = grpc::serve(handle, listener, options, shutdown.clone()).await;
    shutdown.cancel();
    actor_task.await?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_manifest_with_a_bad_template_or_missing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    configs:\n      c: missing\n    runtimeConfig: \"{{c.x}}\"\n",
        )
        .unwrap();
        let e = load_startup_manifest(&path).unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid startup manifest: workload 'w': config alias 'c' refers to config item 'missing', which does not exist"
        );
        let e = load_startup_manifest(&dir.path().join("nope.yaml")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read startup manifest") && e.contains("nope.yaml"), "{e}");
    }
}
