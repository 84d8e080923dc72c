//! The `containerd` runtime connector: drives containerd over its own gRPC
//! API (no nerdctl, no child process per operation). Ankaios' third
//! runtime; `runtimeConfig` takes Ankaios' containerd shape (`image`,
//! `commandOptions`, `commandArgs`, `generalOptions`) with a documented
//! subset of `nerdctl run` options.
//!
//! Parts: [`client`] (the gRPC calls), [`run_options`] (the runtimeConfig
//! and its options), [`oci_spec`] (the OCI runtime spec of a container),
//! [`image`] (image config, unpack, pull), [`network`] (CNI bridge, ports,
//! hosts and resolv.conf), [`lifecycle`] (create, start, stop, delete),
//! [`watcher`] and [`states`] (events and listings to execution states),
//! [`logs`] (the log file of each container).

pub mod client;
pub mod image;
pub mod image_config;
pub mod lifecycle;
pub mod listing;
pub mod log_clock;
pub mod logs;
pub mod network;
pub mod oci_spec;
pub mod probes;
pub mod run_options;
pub mod states;
pub mod watcher;

use std::path::PathBuf;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{
    CreateOptions, ListedWorkload, LogLines, LogOptions, RuntimeConnector, RuntimeError, RuntimeEventSender, WorkloadId,
};
use client::Containerd;

/// The runtime name in workload specs.
pub const CONTAINERD: &str = "containerd";

/// Where the network state of each namespace's containers is kept
/// (`<this>/<namespace>/network`).
pub const NETWORK_STATE_ROOT: &str = "/var/lib/ank-agent/containerd";

/// The network state folder of the containers of `namespace`.
pub fn network_dir(namespace: &str) -> PathBuf {
    PathBuf::from(NETWORK_STATE_ROOT).join(namespace).join("network")
}

/// Where and how the connector works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdSettings {
    /// containerd's socket.
    pub address: PathBuf,
    /// The namespace of the agent's containers.
    pub namespace: String,
    /// The snapshotter of their root file systems.
    pub snapshotter: String,
    /// The folder of each container's log and etc files.
    pub state_dir: PathBuf,
    /// The network attachments' state (what their release needs): kept
    /// across reboots and apart from the run folder, so that an address
    /// can be released whatever became of the run folder.
    pub network_dir: PathBuf,
    /// How often the containers are listed besides the events.
    pub reconcile_interval: Duration,
    /// How long a stopped workload has to exit before it is killed.
    pub stop_timeout: Duration,
}

/// The containerd runtime connector.
#[derive(Debug, Clone)]
pub struct ContainerdRuntime {
    cd: Containerd,
    settings: ContainerdSettings,
    image_cache: std::sync::Arc<lifecycle::ImageCache>,
}

impl ContainerdRuntime {
    /// A connector as `settings` say; it connects when first used.
    pub fn new(settings: ContainerdSettings) -> Self {
        let cd = Containerd::new(&settings.address, &settings.namespace);
        Self { cd, settings, image_cache: Default::default() }
    }

    fn lifecycle(&self) -> lifecycle::Lifecycle<'_> {
        lifecycle::Lifecycle { cd: &self.cd, settings: &self.settings, image_cache: &self.image_cache }
    }
}

#[async_trait]
impl RuntimeConnector for ContainerdRuntime {
    fn name(&self) -> &str {
        CONTAINERD
    }

    fn probe_executor(&self) -> Option<std::sync::Arc<dyn crate::runtime_connectors::probe_exec::ProbeExecutor>> {
        Some(std::sync::Arc::new(probes::ContainerdProbes::new(self.cd.clone())))
    }

    fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        run_options::declared_memory(&spec.workload.runtime_config)
    }

    /// The task has started when `create` returns.
    fn create_returns_running(&self) -> bool {
        true
    }

    async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError> {
        self.lifecycle().create(spec, options).await
    }

    fn supports_start(&self) -> bool {
        true
    }

    async fn start(&self, spec: &WorkloadSpec, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        self.lifecycle().start_again(spec, &workload_id.0).await
    }

    async fn workload_id(&self, instance: &WorkloadInstanceName) -> Result<Option<WorkloadId>, RuntimeError> {
        let filter = listing::label_filter("name", &instance.to_string());
        let found = self.cd.containers(&filter).await.map_err(|e| RuntimeError::list(e.to_string()))?;
        Ok(found.into_iter().next().map(|c| WorkloadId(c.id)))
    }

    async fn delete(&self, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        self.lifecycle().delete(&workload_id.0).await
    }

    async fn logs(&self, workload_id: &WorkloadId, options: &LogOptions) -> Result<LogLines, RuntimeError> {
        let path = logs::log_path(&self.settings.state_dir, &workload_id.0);
        logs::stream(self.cd.clone(), workload_id.0.clone(), path, options)
    }

    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        match listing::list(&self.cd, agent).await {
            Ok(list) => Ok(list),
            // No containerd on this node: it has none of the agent's containers.
            Err(_) if !self.settings.address.exists() => Ok(Vec::new()),
            Err(e) => Err(RuntimeError::list(e.to_string())),
        }
    }

    async fn start_state_watcher(
        &self,
        agent: &str,
        sink: RuntimeEventSender,
        shutdown: CancellationToken,
    ) -> Result<(), RuntimeError> {
        if let Err(e) = log_clock::start(self.settings.state_dir.clone(), shutdown.clone()) {
            tracing::warn!(
                "containerd: cannot watch '{}' ({e}): `ank logs --since/--until` will count all output as new",
                self.settings.state_dir.display()
            );
        }
        let mut watcher =
            watcher::Watcher::new(self.cd.clone(), CONTAINERD, agent, sink, shutdown, self.settings.reconcile_interval);
        let me = self.clone();
        watcher.sweep = Some(Box::new(move || {
            let me = me.clone();
            Box::pin(async move { me.lifecycle().sweep_networks().await })
        }));
        watcher.start().await;
        Ok(())
    }
}
