//! `ank-agent` as a library: the Ankaios-v1-compatible agent that runs the
//! server's workloads on one node. [`run`] wires the components, each a task
//! owning its state behind a typed handle:
//!
//! ```text
//! server ⇄ ServerLink ⇄ AgentManager → RuntimeManager → WorkloadControlLoop (one per workload)
//!                            ↑                ↑                 ↓
//!                            └── states ──────┼──────── runtime connector (podman CLI)
//!                                             └── RuntimeEvents ← state watcher (podman events)
//! ```

pub mod agent_manager;
pub mod backoff;
pub mod cli;
pub mod config_file;
pub mod control_interface;
mod hysteresis;
pub mod logs;
pub mod resource_monitor;
pub mod runtime_connectors;
mod runtime_facade;
pub mod runtime_manager;
pub mod server_link;
pub mod workload;
pub mod workload_files;
pub mod workload_operation;
pub mod workload_scheduler;
pub mod workload_state_store;

#[cfg(test)]
mod agent_tests;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

pub use runtime_connectors::RuntimeRegistry;

use agent_manager::AgentManager;
use runtime_manager::{RuntimeManager, RuntimeManagerConfig};
use server_link::{LinkConfig, ServerLink};
use workload::StateReporter;
pub use workload::policy::RetryPolicy;

/// How long [`run`] waits for its tasks after shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Everything the agent needs to run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Unique agent name (`[A-Za-z0-9_-]`, not empty).
    pub name: String,
    /// Server URL, e.g. `http://127.0.0.1:25551`.
    pub server_url: String,
    /// Run folder; `<run folder>/<name>_io` is created at start.
    pub run_folder: PathBuf,
    /// Tags sent in the agent hello.
    pub tags: BTreeMap<String, String>,
    /// How many workload creates may run at once.
    pub max_parallel_creates: usize,
    /// How failed creates are retried.
    pub retry_policy: RetryPolicy,
    /// mTLS material, read at every connect; `None`: plain http.
    pub tls: Option<ank_common::tls::TlsSources>,
    /// How a dead server is noticed; `None`: only by TCP.
    pub heartbeat: Option<ank_proto::dial::Heartbeat>,
}

impl AgentConfig {
    /// A configuration with the default run folder, no tags and 10 parallel creates.
    pub fn new(name: impl Into<String>, server_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            server_url: server_url.into(),
            run_folder: cli::default_run_folder(),
            tags: BTreeMap::new(),
            max_parallel_creates: 10,
            retry_policy: RetryPolicy::default(),
            tls: None,
            heartbeat: Some(ank_proto::dial::Heartbeat::default()),
        }
    }
}

/// The registry of a production agent (`podman` on PATH).
pub fn default_runtimes() -> RuntimeRegistry {
    RuntimeRegistry::with_podman()
}

/// Runs the agent until `shutdown` is cancelled: connects (and reconnects)
/// to the server, runs its workloads with `runtimes`, reports their states.
/// On shutdown it says Goodbye and leaves all workloads running.
// [impl->swdd~agent-shall-use-interfaces-to-server~1]
// [impl->swdd~agent-uses-async-channels~1]
pub async fn run(config: AgentConfig, runtimes: RuntimeRegistry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let name = ank_common::names::validate_agent_node_name(&config.name)?;
    tonic::transport::Endpoint::from_shared(config.server_url.clone())
        .with_context(|| format!("invalid server url '{}'", config.server_url))?;
    let io_folder = config.run_folder.join(format!("{name}_io"));
    tokio::fs::create_dir_all(&io_folder)
        .await
        .with_context(|| format!("cannot create run folder '{}'", io_folder.display()))?;

    let (reporter, workload_states) = StateReporter::channel(256);
    let link_config = LinkConfig {
        server_url: config.server_url,
        agent_name: config.name.clone(),
        tags: config.tags,
        tls: config.tls,
        heartbeat: config.heartbeat,
    };
    let (link, server, link_events) = ServerLink::new(link_config, shutdown.clone());
    let control_interfaces = control_interface::registry::ControlInterfaces::new(server.sender());
    let rm_config = RuntimeManagerConfig {
        agent_name: config.name.clone(),
        max_parallel_creates: config.max_parallel_creates,
        retry_policy: config.retry_policy,
        io_folder: io_folder.clone(),
        control_interfaces: control_interfaces.clone(),
    };
    let registry = std::sync::Arc::new(runtimes.clone());
    let (runtime, rm_task) = RuntimeManager::start(rm_config, runtimes, reporter, shutdown.clone()).await;
    let logs = logs::LogsManager::start(config.name.clone(), registry, server.sender(), shutdown.clone());
    let manager =
        AgentManager::new(runtime, server, logs, control_interfaces, link_events, workload_states, shutdown.clone());
    let am_task = tokio::spawn(manager.run());
    let link_task = tokio::spawn(link.run());
    tracing::info!("agent '{}' started", config.name);

    shutdown.cancelled().await;
    tracing::info!("agent '{}' shutting down; workloads keep running", config.name);
    let all = async {
        let _ = link_task.await;
        let _ = am_task.await;
        let _ = rm_task.await;
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
        tracing::warn!("shutdown grace period of {SHUTDOWN_GRACE:?} elapsed");
    }
    Ok(())
}
