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
pub mod health;
pub mod logs;
pub mod probes;
pub mod resource_monitor;
pub mod run_folder;
pub mod runtime_connectors;
pub mod runtime_manager;
pub mod scheduler_cli;
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

use agent_manager::{AgentManager, Supervision};
use runtime_manager::{RuntimeManager, RuntimeManagerConfig};
use server_link::{LinkConfig, ServerLink};
pub use workload::policy::RetryPolicy;
pub use workload::retention::Retention;

/// The tasks always get this long to say Goodbye after the workloads.
const MIN_TASK_GRACE: Duration = Duration::from_millis(500);

/// Default of [`AgentConfig::shutdown_grace`].
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Everything the agent needs to run.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Unique agent name (`[A-Za-z0-9_-]`, not empty).
    pub name: String,
    /// Server URL, e.g. `http://127.0.0.1:25551`.
    pub server_url: String,
    /// Run folder; `<run folder>/<name>_io` is created at start.
    pub run_folder: PathBuf,
    /// Tags sent in the agent hello (the labels agent selectors match).
    pub tags: BTreeMap<String, String>,
    /// Capabilities offered to agent selectors besides the runtimes.
    pub capabilities: Vec<String>,
    /// Static metrics offered to agent selectors besides the built-ins.
    pub metrics: BTreeMap<String, f64>,
    /// How many workload creates may run at once.
    pub max_parallel_creates: usize,
    /// How failed creates are retried.
    pub retry_policy: RetryPolicy,
    /// How long finished workloads are kept before they are reaped.
    pub retention: Retention,
    /// The crash-loop delays of restarts of workloads without their own
    /// `restartBackoff` (`--restart-backoff`); `None` (the default): off,
    /// restarts happen at once as in Ankaios.
    pub restart_backoff: Option<ank_common::health_spec::BackoffSettings>,
    /// mTLS material, read at every connect; `None`: plain http.
    pub tls: Option<ank_common::tls::TlsSources>,
    /// With mTLS: the server's certificate must name the URL's host instead
    /// of `ank-server` (as Ankaios requires).
    pub tls_check_url_host: bool,
    /// With mTLS: the revocation lists the server's certificate is checked
    /// against (`--crl_pem`), read at every connect.
    pub tls_crl: Option<std::path::PathBuf>,
    /// How a dead server is noticed; `None`: only by TCP.
    pub heartbeat: Option<ank_proto::dial::Heartbeat>,
    /// The longest a shutdown may take (stopping the workloads, if asked,
    /// and then the tasks); after it the agent exits anyway.
    pub shutdown_grace: Duration,
    /// Stop and remove every workload of this node at shutdown (default:
    /// leave them running; the next agent start takes them over).
    pub stop_workloads_on_shutdown: bool,
    /// Tick, quota and preemption of the WorkloadScheduler.
    pub scheduler: workload_scheduler::SchedulerSettings,
}

impl AgentConfig {
    /// A configuration with the default run folder, no tags and 10 parallel creates.
    pub fn new(name: impl Into<String>, server_url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            server_url: server_url.into(),
            run_folder: cli::default_run_folder(),
            tags: BTreeMap::new(),
            capabilities: Vec::new(),
            metrics: BTreeMap::new(),
            max_parallel_creates: cli::default_parallel_creates(),
            retry_policy: RetryPolicy::default(),
            retention: Retention::default(),
            restart_backoff: None,
            tls: None,
            tls_check_url_host: false,
            tls_crl: None,
            heartbeat: Some(ank_proto::dial::Heartbeat::default()),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            stop_workloads_on_shutdown: false,
            scheduler: workload_scheduler::SchedulerSettings::default(),
        }
    }
}

/// The registry of a production agent (`podman` on PATH).
pub fn default_runtimes() -> RuntimeRegistry {
    RuntimeRegistry::with_podman()
}

/// What the agent advertises as capabilities: the names of its runtimes
/// and the operator's, sorted, each once.
// [feature S6: runtime names and operator-declared capabilities]
pub fn capabilities(runtimes: &RuntimeRegistry, configured: &[String]) -> Vec<String> {
    let all: std::collections::BTreeSet<String> =
        runtimes.iter().map(|c| c.name().to_owned()).chain(configured.iter().cloned()).collect();
    all.into_iter().collect()
}

/// Runs the agent until `shutdown` is cancelled: connects (and reconnects)
/// to the server, runs its workloads with `runtimes`, reports their states.
/// On shutdown it says Goodbye and leaves all workloads running (unless
/// [`AgentConfig::stop_workloads_on_shutdown`]).
pub async fn run(config: AgentConfig, runtimes: RuntimeRegistry, shutdown: CancellationToken) -> anyhow::Result<()> {
    let (health, _) = health::HealthBoard::new(&config.server_url);
    let (_pinger, pings) = ank_common::daemon::Pinger::channel();
    run_supervised(config, runtimes, shutdown, health, pings).await
}

/// Like [`run`], publishing the agent's health on `health` and answering
/// liveness pings from `pings` (the daemon's watchdog and `--check`).
///
/// One shutdown path: when `shutdown` fires, the workloads are stopped
/// first if the config says so, then every task is cancelled (the link
/// says Goodbye) and awaited, all within [`AgentConfig::shutdown_grace`].
// [impl->swdd~agent-shall-use-interfaces-to-server~1]
// [impl->swdd~agent-uses-async-channels~1]
pub async fn run_supervised(
    config: AgentConfig,
    runtimes: RuntimeRegistry,
    shutdown: CancellationToken,
    health: health::HealthBoard,
    pings: tokio::sync::mpsc::Receiver<ank_common::daemon::Ping>,
) -> anyhow::Result<()> {
    let name = ank_common::names::validate_agent_node_name(&config.name)?;
    tonic::transport::Endpoint::from_shared(config.server_url.clone())
        .with_context(|| format!("invalid server url '{}'", config.server_url))?;
    let io_folder = run_folder::prepare(&config.run_folder, &name)?;

    // The tasks stop on `tasks`, which fires only after the optional stop of
    // the workloads, so that their last states still reach the server.
    let tasks = CancellationToken::new();
    let (quota_used_tx, quota_used) = tokio::sync::watch::channel(ank_common::quota::QuotaUsage::default());
    let link_config = LinkConfig {
        server_url: config.server_url,
        agent_name: config.name.clone(),
        tags: config.tags,
        capabilities: capabilities(&runtimes, &config.capabilities),
        metrics: config.metrics,
        tls: config.tls,
        tls_check_url_host: config.tls_check_url_host,
        tls_crl: config.tls_crl,
        heartbeat: config.heartbeat,
        quota: config.scheduler.quota,
        quota_used,
    };
    let (link, server, link_events) = ServerLink::new(link_config, tasks.clone());
    let control_interfaces = control_interface::registry::ControlInterfaces::new(server.sender());
    let rm_config = RuntimeManagerConfig {
        agent_name: config.name.clone(),
        max_parallel_creates: config.max_parallel_creates,
        retry_policy: config.retry_policy,
        io_folder: io_folder.clone(),
        control_interfaces: control_interfaces.clone(),
        retention: config.retention,
        restart_backoff: config.restart_backoff,
        scheduler: config.scheduler,
        quota_used: quota_used_tx,
    };
    let registry = std::sync::Arc::new(runtimes.clone());
    let (runtime, rm_task) = RuntimeManager::start(rm_config, runtimes, server.clone(), tasks.clone()).await;
    let logs = logs::LogsManager::start(config.name.clone(), registry, server.sender(), tasks.clone());
    let (stop_all, stop_all_rx) = tokio::sync::mpsc::channel(1);
    let mut health_rx = health.subscribe();
    let supervision = Supervision { pings, health, stop_all: stop_all_rx, shutdown: tasks.clone() };
    let manager = AgentManager::new(runtime, logs, control_interfaces, link_events, supervision);
    let am_task = tokio::spawn(manager.run());
    let link_task = tokio::spawn(link.run());
    tracing::info!(
        "agent '{}' started; at most {} creates at a time (--max-parallel-creates)",
        config.name,
        config.max_parallel_creates.max(1)
    );

    shutdown.cancelled().await;
    let deadline = tokio::time::Instant::now() + config.shutdown_grace;
    if config.stop_workloads_on_shutdown {
        let _ = stop_all.send(()).await;
        let all_gone = health_rx.wait_for(|h| h.workloads == 0);
        match tokio::time::timeout_at(deadline, all_gone).await {
            Ok(_) => tracing::info!("agent '{}': all workloads stopped", config.name),
            Err(_) => tracing::warn!(
                "agent '{}': shutdown grace of {:?} elapsed before all workloads stopped",
                config.name,
                config.shutdown_grace
            ),
        }
    } else {
        tracing::info!("agent '{}' shutting down; workloads keep running", config.name);
    }
    tasks.cancel();
    let all = async {
        let _ = link_task.await;
        let _ = am_task.await;
        let _ = rm_task.await;
    };
    if tokio::time::timeout_at(deadline.max(tokio::time::Instant::now() + MIN_TASK_GRACE), all).await.is_err() {
        tracing::warn!(
            "shutdown grace of {:?} elapsed; exiting without waiting for the remaining tasks",
            config.shutdown_grace
        );
    }
    Ok(())
}
