//! `ank-server` as a library: the desired state, the workload states and the
//! connected agents and commanders, served over the Ankaios v1 gRPC protocol.
//! [`run`] serves on a given listener until the shutdown token fires, so
//! tests can start a server in-process on port 0.

mod actor;
pub mod cli;
pub mod config_file;
mod connections;
pub mod desired_state;
mod events;
pub mod grpc;
pub mod health;
pub mod health_gate;
pub mod hooks;
pub mod jobs;
mod logs;
pub mod placement;
pub mod priorities;
pub mod reaper;
pub(crate) mod rendering;
mod requests;
pub mod seq_pools;
pub mod state_file;
pub mod stream_limits;
#[cfg(test)]
mod test_support;
mod workload_states;

use std::path::Path;

use ank_common::State;
pub use ank_common::manifest::UnknownFields;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use actor::LifecycleOptions;
pub use actor::{ServerCounts, ServerHandle};
use state_file::{StateFile, StateFileError};
pub use workload_states::ResyncSettings;

/// Errors that stop the server from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("cannot read startup manifest '{path}': {source}")]
    ReadManifest { path: String, source: std::io::Error },
    #[error("invalid startup manifest: {0}")]
    InvalidManifest(String),
    #[error(transparent)]
    StateFile(#[from] StateFileError),
}

/// Where the initial desired state came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialSource {
    /// The state file of an earlier run.
    StateFile,
    /// The startup manifest.
    StartupManifest,
    /// Neither: an empty state.
    Empty,
}

/// The initial desired state: the state file when it exists (the startup
/// manifest only seeds a server that has no saved state yet), else the
/// startup manifest, else nothing. A new state file is written at once, so
/// that the state a server starts with is the one a restart finds.
pub fn initial_state(
    state_file: Option<&StateFile>,
    startup_manifest: Option<&Path>,
) -> Result<(State, InitialSource), StartupError> {
    initial_state_with(state_file, startup_manifest, UnknownFields::Warn)
}

/// Like [`initial_state`], with unknown fields of the startup manifest
/// handled as `unknown` says (`--strict-manifest` refuses them).
pub fn initial_state_with(
    state_file: Option<&StateFile>,
    startup_manifest: Option<&Path>,
    unknown: UnknownFields,
) -> Result<(State, InitialSource), StartupError> {
    if let Some(file) = state_file
        && let Some(saved) = file.load()?
    {
        return Ok((saved.state, InitialSource::StateFile));
    }
    let (state, source) = match startup_manifest {
        Some(path) => (load_startup_manifest_checked(path, unknown)?, InitialSource::StartupManifest),
        None => (State { api_version: ank_common::API_VERSION.to_owned(), ..Default::default() }, InitialSource::Empty),
    };
    if let Some(file) = state_file {
        file.save(&state)?;
    }
    Ok((state, source))
}

/// Reads and validates the startup manifest (unknown fields are ignored
/// with a warning).
pub fn load_startup_manifest(path: &Path) -> Result<State, StartupError> {
    load_startup_manifest_checked(path, UnknownFields::Warn)
}

/// Like [`load_startup_manifest`], with unknown fields handled as `unknown` says.
pub fn load_startup_manifest_checked(path: &Path, unknown: UnknownFields) -> Result<State, StartupError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| StartupError::ReadManifest { path: path.display().to_string(), source })?;
    let (state, warnings) = ank_common::manifest::parse_manifest_checked(&path.display().to_string(), &text, unknown)
        .map_err(|e| StartupError::InvalidManifest(e.to_string()))?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    // Validated and rendered here so that a bad template stops the start.
    desired_state::DesiredState::new(state.clone()).map_err(|e| StartupError::InvalidManifest(e.to_string()))?;
    Ok(state)
}

/// Serves `initial` as desired state on `listener` until `shutdown` fires.
pub async fn run(initial: State, listener: TcpListener, shutdown: CancellationToken) -> anyhow::Result<()> {
    run_with(initial, None, listener, grpc::ServeOptions::default(), shutdown).await
}

/// Like [`run`], listening with `options` (mTLS and identity rules) and
/// saving every accepted desired state in `state_file`.
pub async fn run_with(
    initial: State,
    state_file: Option<StateFile>,
    listener: TcpListener,
    options: grpc::ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let (_handle, serving) = start(initial, state_file, listener, options, shutdown)?;
    serving.await
}

/// Starts the server actor on `initial` and returns its handle (for the
/// daemon's status and liveness pings) and the future that serves on
/// `listener` until `shutdown` fires: one shutdown path, the gRPC streams
/// get [`grpc::ServeOptions::shutdown_grace`] to end, then the actor stops.
pub fn start(
    initial: State,
    state_file: Option<StateFile>,
    listener: TcpListener,
    options: grpc::ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<(ServerHandle, impl std::future::Future<Output = anyhow::Result<()>>)> {
    let (handle, actor_task) = start_actor(initial, state_file, &options, shutdown.clone())?;
    let grpc_handle = handle.clone();
    let serving = async move {
        let result = grpc::serve(grpc_handle, listener, options, shutdown.clone()).await;
        shutdown.cancel();
        actor_task.await?;
        result
    };
    Ok((handle, serving))
}

/// Starts the server actor alone on `initial` (no listener): its handle
/// and its task, which ends when `shutdown` fires. [`start`] serves it;
/// [`grpc::StreamHarness`] feeds it streams without the network.
pub fn start_actor(
    initial: State,
    state_file: Option<StateFile>,
    options: &grpc::ServeOptions,
    shutdown: CancellationToken,
) -> anyhow::Result<(ServerHandle, tokio::task::JoinHandle<()>)> {
    let initial =
        desired_state::DesiredState::new(initial).map_err(|e| anyhow::anyhow!("invalid desired state: {e}"))?;
    let seq = match &state_file {
        Some(file) => seq_pools::SeqPools::open(file.seq_path())?,
        None => seq_pools::SeqPools::in_memory(),
    };
    let lifecycle = LifecycleOptions {
        seq,
        reaper: options.reaper,
        placement: Some(options.placement.clone()),
        hooks: options.hooks.clone(),
        stream_limits: options.stream_limits,
    };
    let (handle, actor) = actor::AnkaiosServer::new_with(initial, state_file, options.resync, options.jobs, lifecycle);
    Ok((handle, tokio::spawn(actor.run(shutdown))))
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

    #[test]
    fn startup_manifest_unknown_fields_are_ignored_unless_strict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    colour: red\n    runtimeConfig: 'image: x'\n",
        )
        .unwrap();
        let state = load_startup_manifest(&path).unwrap();
        assert_eq!(state.workloads.len(), 1);
        let e = initial_state_with(None, Some(&path), UnknownFields::Reject).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "invalid startup manifest: {}: line 6: unknown field 'workloads.w.colour' (unknown fields are refused in strict mode)",
                path.display()
            )
        );
    }

    #[test]
    fn the_state_file_wins_over_the_startup_manifest_and_is_seeded_by_it() {
        let dir = tempfile::tempdir().unwrap();
        let manifest = dir.path().join("m.yaml");
        std::fs::write(
            &manifest,
            "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    runtimeConfig: \"image: x\"\n",
        )
        .unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        let (first, source) = initial_state(Some(&file), Some(&manifest)).unwrap();
        assert_eq!(source, InitialSource::StartupManifest);
        assert!(first.workloads.contains_key("w"));
        assert_eq!(file.load().unwrap().unwrap().state, first, "seeded at once");

        let saved = State { api_version: "v1".into(), ..Default::default() };
        file.save(&saved).unwrap();
        let (again, source) = initial_state(Some(&file), Some(&manifest)).unwrap();
        assert_eq!((again, source), (saved, InitialSource::StateFile));

        std::fs::write(file.path(), "not json").unwrap();
        let e = initial_state(Some(&file), Some(&manifest)).unwrap_err().to_string();
        assert!(e.contains("is not a valid saved state"), "{e}");
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "not json", "a broken file is never overwritten");

        let (_, source) = initial_state(None, None).unwrap();
        assert_eq!(source, InitialSource::Empty);
    }
}
