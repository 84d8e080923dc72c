//! The `podman-kube` runtime connector: plays a workload's Kubernetes
//! manifest with `podman kube play` and tears it down with `podman kube
//! down`. Before playing, the runtimeConfig is kept in a volume (and the
//! created pods in a second one, see [`volumes`]) so that a restarted agent
//! finds its workloads again. States come from a polling checker per
//! workload over the shared container state cache ([`state_getter`]). A
//! control interface is mounted into the container named by
//! `controlInterfaceTarget` ([`control_interface_target`]).

pub mod config;
pub mod control_interface_target;
pub mod memory;
pub mod state_getter;
pub mod volumes;
pub mod workload_id;

use std::sync::Arc;

use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;
use config::PodmanKubeRuntimeConfig;
use tokio_util::sync::CancellationToken;

use super::podman::PodmanCli;
use super::podman::cli::PodmanError;
use super::podman::ps_cache::PsCache;
use super::polling_checker::{GenericPollingStateChecker, POLL_INTERVAL, RuntimeStateGetter};
use super::{
    CreateOptions, ListedWorkload, LogLines, LogOptions, RuntimeConnector, RuntimeError, RuntimeEventSender,
    StateChecker, WorkloadId,
};
use state_getter::{PodmanKubeStateGetter, combined_state};
use workload_id::KubeWorkloadId;

/// The runtime name in workload specs.
pub const PODMAN_KUBE: &str = "podman-kube";

/// The podman-kube runtime connector.
#[derive(Clone)]
pub struct PodmanKubeRuntime {
    cli: PodmanCli,
    cache: Arc<PsCache>,
}

impl PodmanKubeRuntime {
    // [impl->swdd~podman-kube-uses-podman-cli~1]
    pub fn new(cli: PodmanCli) -> Self {
        let cache = Arc::new(PsCache::new(Arc::new(cli.clone())));
        Self { cli, cache }
    }

    /// `podman [general] kube <verb> [options] -` with the manifest on stdin.
    async fn kube(
        &self,
        general: &[String],
        verb: &str,
        options: &[String],
        manifest: &str,
    ) -> Result<String, PodmanError> {
        let mut args = general.to_vec();
        args.extend(["kube".into(), verb.into()]);
        args.extend(options.iter().cloned());
        args.push("-".into());
        self.cli.exec_with_stdin(&args, manifest).await
    }

    /// Rebuilds the id of `instance` from its volumes in `volumes`.
    fn id_from_volumes(instance: &str, volumes: &[volumes::VolumeEntry]) -> Option<KubeWorkloadId> {
        let data_of = |suffix: &str| {
            volumes.iter().find(|v| v.name == format!("{instance}{suffix}")).and_then(volumes::VolumeEntry::data)
        };
        let cfg = PodmanKubeRuntimeConfig::parse(&data_of(volumes::CONFIG_SUFFIX)?).ok()?;
        let pods: Vec<String> =
            data_of(volumes::PODS_SUFFIX).and_then(|p| serde_json::from_str(&p).ok()).unwrap_or_default();
        Some(KubeWorkloadId {
            instance_name: instance.to_owned(),
            pods,
            manifest: cfg.manifest,
            down_options: cfg.down_options,
            general_options: cfg.general_options,
        })
    }

    async fn ids_of_agent(&self, agent: &str) -> Result<Vec<KubeWorkloadId>, RuntimeError> {
        let vols = volumes::list(&self.cli, agent).await.map_err(RuntimeError::list)?;
        Ok(vols
            .iter()
            .filter_map(|v| v.name.strip_suffix(volumes::CONFIG_SUFFIX))
            .filter_map(|instance| Self::id_from_volumes(instance, &vols))
            .collect())
    }
}

/// The pod ids in the output of `podman kube play` (the lines after "Pod:").
pub fn pods_from_play_output(out: &str) -> Vec<String> {
    let mut pods = Vec::new();
    let mut in_pods = false;
    for line in out.lines().map(str::trim) {
        if line.ends_with(':') {
            in_pods = line == "Pod:" || line == "Pods:";
        } else if in_pods && !line.is_empty() {
            pods.push(line.to_owned());
        }
    }
    pods
}

fn is_no_such_pod(message: &str) -> bool {
    message.contains("no such pod") || message.contains("no pod with name or ID")
}

// [impl->swdd~podman-kube-implements-runtime-connector~1]
// [impl->swdd~agent-supports-podman-kube-runtime~1]
#[async_trait]
impl RuntimeConnector for PodmanKubeRuntime {
    // [impl->swdd~podman-kube-name-returns-podman-kube~1]
    fn name(&self) -> &str {
        PODMAN_KUBE
    }

    fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        memory::declared(&spec.workload.runtime_config)
    }

    fn files_unsupported(&self) -> Option<&'static str> {
        Some("files are not supported by the podman-kube runtime")
    }

    // [impl->swdd~podman-kube-create-workload-apply-manifest~1]
    // [impl->swdd~podman-kube-create-workload-returns-workload-id~1]
    async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError> {
        let cfg = PodmanKubeRuntimeConfig::parse(&spec.workload.runtime_config)?;
        if !options.files.is_empty() {
            return Err(RuntimeError::InvalidConfig("files are not supported by the podman-kube runtime".into()));
        }
        // The stored config keeps the original manifest: `kube down` needs
        // only the pod names, which the injection does not change.
        let played = match &options.control_interface {
            Some(folder) => {
                control_interface_target::inject(&cfg.manifest, cfg.control_interface_target.as_deref(), folder)
                    .map_err(|e| RuntimeError::InvalidConfig(e.to_string()))?
            }
            None => cfg.manifest.clone(),
        };
        let instance = spec.instance_name.to_string();
        let agent = &spec.instance_name.agent_name;
        let config_volume = format!("{instance}{}", volumes::CONFIG_SUFFIX);
        // [impl->swdd~podman-kube-create-workload-creates-config-volume~1]
        // [impl->swdd~podman-kube-create-continues-if-cannot-create-volume~1]
        if let Err(e) = volumes::store(&self.cli, &config_volume, agent, &spec.workload.runtime_config).await {
            tracing::warn!("workload '{instance}': cannot keep its config for an agent restart: {e}");
        }
        let out = match self.kube(&cfg.general_options, "play", &cfg.play_options, &played).await {
            Ok(out) => out,
            Err(e) => {
                let _ = self.kube(&cfg.general_options, "down", &cfg.down_options, &cfg.manifest).await;
                let _ = volumes::remove(&self.cli, &instance).await;
                return Err(RuntimeError::create(e.message()));
            }
        };
        let pods = pods_from_play_output(&out);
        // [impl->swdd~podman-kube-create-workload-creates-pods-volume~1]
        let pods_json = serde_json::to_string(&pods).unwrap_or_default();
        let pods_volume = format!("{instance}{}", volumes::PODS_SUFFIX);
        if let Err(e) = volumes::store(&self.cli, &pods_volume, agent, &pods_json).await {
            tracing::warn!("workload '{instance}': cannot keep its pods for an agent restart: {e}");
        }
        let id = KubeWorkloadId {
            instance_name: instance,
            pods,
            manifest: cfg.manifest,
            down_options: cfg.down_options,
            general_options: cfg.general_options,
        };
        Ok(id.to_workload_id())
    }

    // [impl->swdd~podman-kube-get-workload-id-uses-volumes~1]
    async fn workload_id(&self, instance: &WorkloadInstanceName) -> Result<Option<WorkloadId>, RuntimeError> {
        let ids = self.ids_of_agent(&instance.agent_name).await?;
        let wanted = instance.to_string();
        Ok(ids.into_iter().find(|id| id.instance_name == wanted).map(|id| id.to_workload_id()))
    }

    // [impl->swdd~podman-kube-delete-workload-downs-manifest-file~1]
    // [impl->swdd~podman-kube-delete-removes-volumes~1]
    async fn delete(&self, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        let id = KubeWorkloadId::parse(workload_id)?;
        match self.kube(&id.general_options, "down", &id.down_options, &id.manifest).await {
            Ok(_) => {}
            // `kube down` gives up at the first missing pod and leaves the
            // others running: remove the pods of the id one by one.
            Err(e) if is_no_such_pod(&e.message()) => {
                let mut args = id.general_options.clone();
                args.extend(["pod", "rm", "--force", "--ignore"].map(str::to_owned));
                args.extend(id.pods.iter().cloned());
                if !id.pods.is_empty() {
                    self.cli.exec(&args).await.map_err(RuntimeError::delete)?;
                }
            }
            Err(e) => return Err(RuntimeError::delete(e.message())),
        }
        if let Err(e) = volumes::remove(&self.cli, &id.instance_name).await {
            tracing::warn!("workload '{}': cannot remove its volumes: {e}", id.instance_name);
        }
        Ok(())
    }

    // [impl->swdd~podman-kube-list-existing-workloads-using-config-volumes~1]
    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        let ids = self.ids_of_agent(agent).await?;
        if ids.is_empty() {
            // No pod to look up: no `podman ps` at an agent's first start.
            return Ok(Vec::new());
        }
        let containers = self.cache.containers().await.map_err(RuntimeError::list)?;
        Ok(ids
            .into_iter()
            .filter_map(|id| {
                let instance_name = id.instance()?;
                let state = combined_state(&id.pods, &containers).into_state();
                Some(ListedWorkload { instance_name, workload_id: id.to_workload_id(), state })
            })
            .collect())
    }

    /// `podman pod logs` of the workload's pods (one after the other).
    async fn logs(&self, workload_id: &WorkloadId, options: &LogOptions) -> Result<LogLines, RuntimeError> {
        let id = KubeWorkloadId::parse(workload_id)?;
        let Some(pod) = id.pods.first() else {
            return Err(RuntimeError::unavailable(format!("workload '{}' has no pod", id.instance_name)));
        };
        if id.pods.len() > 1 {
            tracing::info!("logs of '{}': only its first pod '{pod}' is streamed", id.instance_name);
        }
        let mut args = id.general_options.clone();
        args.extend(["pod".to_owned(), "logs".to_owned()]);
        args.extend(super::podman::logs::log_args(options));
        args.push(pod.clone());
        super::podman::logs::stream(&self.cli, args)
    }

    /// Pods carry none of our labels: each workload has its own checker.
    async fn start_state_watcher(
        &self,
        _agent: &str,
        _sink: RuntimeEventSender,
        _shutdown: CancellationToken,
    ) -> Result<(), RuntimeError> {
        Ok(())
    }

    // [impl->swdd~podman-kube-create-starts-podman-kube-state-getter~1]
    fn start_state_checker(
        &self,
        instance: &WorkloadInstanceName,
        workload_id: &WorkloadId,
        sink: RuntimeEventSender,
    ) -> Option<StateChecker> {
        let cache = self.cache.clone();
        let (instance, id) = (instance.clone(), workload_id.clone());
        let stop = CancellationToken::new();
        let checker = StateChecker::new(stop.clone());
        tokio::spawn(async move {
            let getter: Arc<dyn RuntimeStateGetter> = Arc::new(PodmanKubeStateGetter::new(cache).await);
            let inner = GenericPollingStateChecker::start(getter, instance, id, sink, POLL_INTERVAL);
            stop.cancelled().await;
            inner.stop();
        });
        Some(checker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn podman_kube_play_output_lists_the_pods() {
        let out = "Pod:\ne98e\nContainer:\n05f1\n\n";
        assert_eq!(pods_from_play_output(out), ["e98e"]);
        let two = "Pods:\na1\nb2\nContainers:\nc\nd\n";
        assert_eq!(pods_from_play_output(two), ["a1", "b2"]);
        assert!(pods_from_play_output("").is_empty());
    }

    #[test]
    // [utest->swdd~podman-kube-name-returns-podman-kube~1]
    fn podman_kube_runtime_is_named_podman_kube() {
        assert_eq!(PodmanKubeRuntime::new(PodmanCli::default()).name(), "podman-kube");
    }

    #[test]
    // [utest->swdd~podman-kube-get-workload-id-uses-volumes~1]
    fn podman_kube_id_is_rebuilt_from_the_volumes() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let vol = |name: &str, data: &str| volumes::VolumeEntry {
            name: name.into(),
            labels: Some([("data".to_owned(), b64(data))].into_iter().collect()),
        };
        let vols =
            [vol("k.h.a.config", "manifest: 'kind: Pod'\ndownOptions: [--force]\n"), vol("k.h.a.pods", "[\"p1\"]")];
        let id = PodmanKubeRuntime::id_from_volumes("k.h.a", &vols).unwrap();
        assert_eq!(id.pods, ["p1"]);
        assert_eq!(id.manifest, "kind: Pod");
        assert_eq!(id.down_options, ["--force"]);
        assert!(PodmanKubeRuntime::id_from_volumes("other.h.a", &vols).is_none());
    }

    #[tokio::test]
    async fn podman_kube_rejects_bad_config_and_files_before_calling_podman() {
        use crate::runtime_connectors::FileMount;
        use ank_common::workload::{File, FileContent, Workload};
        use ank_common::{AgentName, WorkloadName};

        let rt = PodmanKubeRuntime::new(PodmanCli {
            binary: "/nonexistent/podman".into(),
            stop_timeout_secs: 1,
            ..PodmanCli::default()
        });
        let wl = |cfg: &str| Workload { runtime: PODMAN_KUBE.into(), runtime_config: cfg.into(), ..Default::default() };
        let spec =
            |cfg: &str| WorkloadSpec::new(&WorkloadName::new("k").unwrap(), &AgentName::new("a").unwrap(), wl(cfg));
        let err = rt.create(&spec("playOptions: []\n"), &CreateOptions::default()).await.unwrap_err();
        assert!(matches!(&err, RuntimeError::Config(_)), "{err:?}");
        assert!(err.to_string().starts_with("invalid podman-kube runtimeConfig: "), "{err}");
        assert!(err.to_string().contains("manifest"), "{err}");
        let mut with_files = spec("manifest: 'kind: Pod'\n");
        with_files.workload.files = vec![File { mount_point: "/a".into(), content: FileContent::Data("x".into()) }];
        let options = CreateOptions {
            control_interface: None,
            files: vec![FileMount { host_path: "/tmp/a".into(), mount_point: "/a".into() }],
        };
        let err = rt.create(&with_files, &options).await.unwrap_err();
        assert!(matches!(&err, RuntimeError::InvalidConfig(m) if m.contains("files are not supported")), "{err:?}");
    }

    #[tokio::test]
    async fn podman_kube_control_interface_target_errors_come_before_calling_podman() {
        use ank_common::workload::Workload;
        use ank_common::{AgentName, WorkloadName};

        let rt = PodmanKubeRuntime::new(PodmanCli {
            binary: "/nonexistent/podman".into(),
            stop_timeout_secs: 1,
            ..PodmanCli::default()
        });
        let spec = |cfg: &str| {
            let wl = Workload { runtime: PODMAN_KUBE.into(), runtime_config: cfg.into(), ..Default::default() };
            WorkloadSpec::new(&WorkloadName::new("k").unwrap(), &AgentName::new("a").unwrap(), wl)
        };
        let manifest = "manifest: |\n  kind: Pod\n  metadata: {name: web}\n  spec: {containers: [{name: main}]}\n";
        let with_ci = CreateOptions { control_interface: Some("/tmp/ci".into()), files: vec![] };
        let err = rt.create(&spec(manifest), &with_ci).await.unwrap_err();
        assert!(
            matches!(&err, RuntimeError::InvalidConfig(m) if m.contains("needs 'controlInterfaceTarget")),
            "{err:?}"
        );
        let wrong = format!("{manifest}controlInterfaceTarget: web/x\n");
        let err = rt.create(&spec(&wrong), &with_ci).await.unwrap_err();
        let want = "controlInterfaceTarget 'web/x': the pod 'web' has no container 'x' (containers: main)";
        assert!(matches!(&err, RuntimeError::InvalidConfig(m) if m == want), "{err:?}");
        // Without a control interface the target is not looked at: podman is called (and missing here).
        let err = rt.create(&spec(&wrong), &CreateOptions::default()).await.unwrap_err();
        assert!(matches!(&err, RuntimeError::Create(_)), "{err:?}");
    }
}
