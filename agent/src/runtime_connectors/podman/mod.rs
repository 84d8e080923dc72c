//! The `podman` runtime connector: creates workloads with `podman run --detach`
//! (labels `name=<instance>` and `agent=<agent>`), deletes them with `podman
//! stop` + `podman rm -f`, lists them with `podman ps` and watches their
//! states by reading podman's event log and conmon's exit files (see
//! [`watcher`]), with no podman process left running, and the processes of
//! its running containers with pidfds (see [`ghosts`]): a container whose
//! process and conmon were killed is reported failed, not left "running".

pub mod cli;
pub mod config;
pub mod containers_conf;
pub mod events;
pub mod exit_watcher;
pub mod ghosts;
mod pid_files;

pub mod journal;
pub mod log_tail;
pub mod logs;
pub mod memory;
pub mod probes;
pub mod ps_cache;
pub mod watcher;

use std::sync::Arc;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;
use config::PodmanRuntimeConfig;
use tokio_util::sync::CancellationToken;

pub use cli::PodmanCli;

use super::process_watch::PidFds;
use super::{
    CreateOptions, ListedWorkload, LogLines, LogOptions, RuntimeConnector, RuntimeError, RuntimeEventSender, WorkloadId,
};
use containers_conf::{EngineSettings, PodmanUser};
use ghosts::GhostWatch;
use watcher::EventWatcher;

/// The runtime name in workload specs.
pub const PODMAN: &str = "podman";

/// Where the control interface folder is mounted inside a container.
pub const CONTROL_INTERFACE_MOUNT: &str = "/run/ankaios/control_interface";

/// How often the podman connector lists its containers by default.
pub const DEFAULT_RECONCILE_INTERVAL: Duration = Duration::from_secs(30);

/// The podman runtime connector.
#[derive(Debug, Clone)]
pub struct PodmanRuntime {
    cli: PodmanCli,
    /// Period of the slow `podman ps` reconcile next to the events.
    pub reconcile_interval: Duration,
    /// podman's exit-file folder, watched for fast exit detection (`None`:
    /// rely on the events alone).
    pub exits_dir: Option<std::path::PathBuf>,
    /// podman's event log, read when its events backend is `file`.
    pub events_log: std::path::PathBuf,
    /// Use a `podman events` child even where the event log can be read.
    pub events_child: bool,
    /// The watch on the running containers' processes.
    ghosts: Arc<GhostWatch>,
}

impl PodmanRuntime {
    /// A connector using `cli`, reconciling every 30 s, with podman's paths
    /// from this host's containers.conf.
    pub fn new(cli: PodmanCli) -> Self {
        let user = PodmanUser::current();
        let settings = EngineSettings::load(&user);
        let exits = settings.tmp_dir(&user).join("exits");
        // The watch looks there even if the folder appears only later.
        let procs = PidFds { monitor: "conmon", exits_dir: Some(exits.clone()) };
        let exits_dir = exits.is_dir().then_some(exits);
        let ghosts = GhostWatch::new(Arc::new(procs), Arc::new(cli.clone()));
        Self {
            cli,
            ghosts,
            reconcile_interval: DEFAULT_RECONCILE_INTERVAL,
            exits_dir,
            events_log: settings.events_log(&user),
            events_child: false,
        }
    }

    /// The podman CLI this connector uses.
    pub fn cli(&self) -> &PodmanCli {
        &self.cli
    }

    /// Removes containers a failed `podman run` may have left behind.
    // [impl->swdd~podman-create-workload-deletes-failed-container~1]
    async fn remove_leftovers_of(&self, instance: &str) {
        if let Ok(entries) = self.cli.ps_by_label(&format!("name={instance}")).await {
            for e in entries {
                let _ = self.cli.exec(&["rm".into(), "-f".into(), e.id]).await;
            }
        }
    }
}

/// The container name of podman's "the container name \"X\" is already in
/// use" refusal: what a storage-only leftover holds.
fn name_held_by_storage(e: &cli::PodmanError) -> Option<String> {
    let cli::PodmanError::Failed { stderr, .. } = e else { return None };
    let rest = stderr.split("the container name \"").nth(1)?;
    let (name, tail) = rest.split_once('"')?;
    tail.trim_start().starts_with("is already in use").then(|| name.to_owned())
}

/// The argument list of `podman [general] run --detach [--name] [options]
/// [--mount=...]... --label=name=.. --label=agent=.. image [args]`: Ankaios'
/// order and spelling (a failed create shows the command line to the user).
// [impl->swdd~podman-create-workload-runs-workload~1]
// [impl->swdd~podman-create-workload-creates-labels~1]
// [impl->swdd~podman-create-workload-sets-optionally-container-name~1]
pub fn run_args(spec: &WorkloadSpec, cfg: &PodmanRuntimeConfig, options: &CreateOptions) -> Vec<String> {
    let instance = &spec.instance_name;
    let mut args = cfg.general_options.clone();
    args.extend(["run".into(), "--detach".into()]);
    if !cfg.has_name_option() {
        args.extend(["--name".into(), instance.short_name()]);
    }
    args.extend(cfg.command_options.iter().cloned());
    // [impl->swdd~podman-create-workload-mounts-fifo-files~1]
    if let Some(folder) = &options.control_interface {
        args.push(format!("--mount=type=bind,source={},destination={CONTROL_INTERFACE_MOUNT}", folder.display()));
    }
    for file in &options.files {
        args.push(format!(
            "--mount=type=bind,source={},destination={},readonly=true",
            file.host_path.display(),
            file.mount_point
        ));
    }
    // After the user's options, as in Ankaios: a `--label name=...` or
    // `agent=...` among them cannot hide the workload from its agent.
    args.push(format!("--label=name={instance}"));
    args.push(format!("--label=agent={}", instance.agent_name));
    args.push(cfg.image.clone());
    args.extend(cfg.command_args.iter().cloned());
    args
}

// [impl->swdd~podman-implements-runtime-connector~1]
#[async_trait]
impl RuntimeConnector for PodmanRuntime {
    // [impl->swdd~podman-name-returns-podman~1]
    fn name(&self) -> &str {
        PODMAN
    }

    fn probe_executor(&self) -> Option<std::sync::Arc<dyn crate::runtime_connectors::probe_exec::ProbeExecutor>> {
        Some(std::sync::Arc::new(probes::PodmanProbes::new(self.cli.clone())))
    }

    fn declared_memory(&self, spec: &WorkloadSpec) -> Result<u64, RuntimeError> {
        memory::declared(&spec.workload.runtime_config)
    }

    /// `podman run --detach` returns only after the container has started.
    fn create_returns_running(&self) -> bool {
        true
    }

    async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError> {
        let cfg = PodmanRuntimeConfig::parse(&spec.workload.runtime_config)?;
        let args = run_args(spec, &cfg, options);
        let mut result = self.cli.run_detached(&args).await;
        // A `podman run` cut short (power loss, a killed podman) can leave a
        // storage-only container whose name blocks every later create of
        // the instance; podman lists it only with `ps --external`. Removing
        // it is safe: `rm --storage` refuses a container podman manages.
        if let Err(e) = &result
            && let Some(name) = name_held_by_storage(e)
            && self.cli.remove_storage_container(&name).await.is_ok()
        {
            tracing::warn!(
                "removed the storage-only leftover container '{name}' that blocked the create; trying again"
            );
            result = self.cli.run_detached(&args).await;
        }
        match result {
            Ok(id) => Ok(id),
            Err(e) => {
                self.remove_leftovers_of(&spec.instance_name.to_string()).await;
                Err(RuntimeError::create(e))
            }
        }
    }

    fn supports_start(&self) -> bool {
        true
    }

    /// `podman start` of the exited container, with the workload's general
    /// options (as Ankaios); `podman start` returns once it runs. When it
    /// fails the caller removes the container and creates it anew.
    async fn start(&self, spec: &WorkloadSpec, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        let cfg = PodmanRuntimeConfig::parse(&spec.workload.runtime_config)?;
        self.cli.start(&cfg.general_options, workload_id).await.map_err(RuntimeError::create)
    }

    // [impl->swdd~podman-get-workload-id-uses-label~1]
    async fn workload_id(&self, instance: &WorkloadInstanceName) -> Result<Option<WorkloadId>, RuntimeError> {
        let entries = self.cli.ps_by_label(&format!("name={instance}")).await.map_err(RuntimeError::list)?;
        Ok(entries.into_iter().next().map(|e| WorkloadId(e.id)))
    }

    async fn delete(&self, workload_id: &WorkloadId) -> Result<(), RuntimeError> {
        match tokio::time::timeout(self.cli.delete_budget(), self.cli.stop_and_remove(workload_id)).await {
            Ok(r) => r.map_err(RuntimeError::delete),
            Err(_) => Err(RuntimeError::delete(crate::runtime_connectors::RuntimeFailure::TimedOut {
                what: format!("deleting container '{workload_id}'"),
            })),
        }
    }

    // [impl->swdd~agent-existing-workloads-finds-list~1]
    async fn list_workloads(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        let taken_at = tokio::time::Instant::now();
        let entries = self.cli.ps_by_label(&EventWatcher::label(agent)).await.map_err(RuntimeError::list)?;
        Ok(self.ghosts.checked(events::listed_from_ps(&entries, agent), Some(taken_at)).await)
    }

    /// Takes the watcher's first `ps` (see [`cli::FirstListing`]).
    async fn list_workloads_at_start(&self, agent: &str) -> Result<Vec<ListedWorkload>, RuntimeError> {
        let entries = self.cli.ps_for_listing(&EventWatcher::label(agent)).await.map_err(RuntimeError::list)?;
        // [impl->swdd~agent-existing-workloads-resume-existing~2]
        // A dead container podman lists as running is listed failed: replaced, not resumed.
        // It may be older than this call (the watcher's first ps): it forgets nothing.
        Ok(self.ghosts.checked(events::listed_from_ps(&entries, agent), None).await)
    }

    // [impl->swdd~podman-start-checker-starts-podman-state-checker~1]
    async fn logs(&self, workload_id: &WorkloadId, options: &LogOptions) -> Result<LogLines, RuntimeError> {
        let mut args = vec!["logs".to_owned()];
        args.extend(logs::log_args(options));
        args.push(workload_id.0.clone());
        logs::stream(&self.cli, args)
    }

    async fn start_state_watcher(
        &self,
        agent: &str,
        sink: RuntimeEventSender,
        shutdown: CancellationToken,
    ) -> Result<(), RuntimeError> {
        // Opened at its end now, so that nothing written from here on is
        // missed; whether it is used is decided in the watcher's task.
        let log = (!self.events_child).then(|| log_tail::LogTail::from_end(&self.events_log));
        let started = ank_common::daemon::clock::now();
        if let Some(dir) = &self.exits_dir
            && let Err(e) = exit_watcher::start(dir, sink.clone(), shutdown.clone())
        {
            tracing::info!("not watching podman exit files in '{}' ({e}); exits come from events", dir.display());
        }
        self.ghosts.attach(sink.clone(), shutdown.clone());
        let watcher = EventWatcher {
            ghosts: self.ghosts.clone(),
            cli: self.cli.clone(),
            runtime: PODMAN.to_owned(),
            agent: agent.to_owned(),
            sink,
            shutdown,
            reconcile_interval: self.reconcile_interval,
            reachable: true.into(),
        };
        tokio::spawn(watcher.run(log, started));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::runtime_connectors::FileMount;
    use ank_common::workload::Workload;
    use ank_common::{AgentName, WorkloadName};

    use super::*;

    fn spec(runtime_config: &str) -> WorkloadSpec {
        let wl = Workload { runtime: PODMAN.into(), runtime_config: runtime_config.into(), ..Default::default() };
        WorkloadSpec::new(&WorkloadName::new("web").unwrap(), &AgentName::new("agent_A").unwrap(), wl)
    }

    #[test]
    fn the_name_a_storage_leftover_holds_is_read_from_podmans_refusal() {
        let e = cli::PodmanError::Failed {
            command: "run".into(),
            stderr: "Error: creating container storage: the container name \"simple.2a4039e.agent_A\" is already in use by 23dea0ed. You have to remove that container to be able to reuse that name: that name is already in use".into(),
        };
        assert_eq!(name_held_by_storage(&e).as_deref(), Some("simple.2a4039e.agent_A"));
        let other = cli::PodmanError::Failed { command: "run".into(), stderr: "Error: no such image".into() };
        assert_eq!(name_held_by_storage(&other), None);
    }

    #[tokio::test]
    async fn a_storage_leftover_blocking_the_name_is_removed_and_the_create_tried_again() {
        // A stand-in podman: the first `run` is refused as after a cut-short
        // create, `rm --storage NAME` clears the name, the next `run` works.
        let dir = tempfile::tempdir().unwrap();
        let calls = dir.path().join("calls");
        let cleared = dir.path().join("cleared");
        let script = dir.path().join("podman");
        let body = format!(
            "#!/bin/sh\necho \"$*\" >> '{calls}'\ncase \"$1\" in\n  run) if [ -e '{cleared}' ]; then echo c0ffee; exit 0; fi\n       echo 'Error: creating container storage: the container name \"web.'\"$(echo x)\"'\" is already in use by 23de.' >&2; exit 125;;\n  rm) touch '{cleared}'; exit 0;;\n  *) echo '[]'; exit 0;;\nesac\n",
            calls = calls.display(),
            cleared = cleared.display(),
        );
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let runtime = PodmanRuntime::new(PodmanCli { binary: script, ..PodmanCli::default() });
        let id = runtime.create(&spec("image: img"), &CreateOptions::default()).await.unwrap();
        assert_eq!(id, WorkloadId("c0ffee".into()));
        let calls = std::fs::read_to_string(&calls).unwrap();
        let lines: Vec<&str> = calls.lines().collect();
        assert!(lines[0].starts_with("run --detach"), "{calls}");
        assert_eq!(lines[1], "rm --storage web.x", "{calls}");
        assert!(lines[2].starts_with("run --detach"), "{calls}");
        assert_eq!(lines.len(), 3, "{calls}");
    }

    #[test]
    // [utest->swdd~podman-create-workload-creates-labels~1]
    fn podman_run_args_have_labels_short_name_and_user_parts_in_order() {
        let s = spec(
            "generalOptions: [--log-level, info]\nimage: img\ncommandOptions: [-p, '8080:80']\ncommandArgs: [sleep, '9']\n",
        );
        let cfg = PodmanRuntimeConfig::parse(&s.workload.runtime_config).unwrap();
        let args = run_args(&s, &cfg, &CreateOptions::default());
        let expected: Vec<String> = [
            "--log-level",
            "info",
            "run",
            "--detach",
            "--name",
            &s.instance_name.short_name(),
            "-p",
            "8080:80",
            &format!("--label=name={}", s.instance_name),
            "--label=agent=agent_A",
            "img",
            "sleep",
            "9",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        assert_eq!(args, expected);
    }

    #[test]
    // [utest->swdd~podman-create-workload-sets-optionally-container-name~1]
    fn podman_run_args_keep_the_users_name() {
        let s = spec("image: img\ncommandOptions: ['--name=mine']\n");
        let cfg = PodmanRuntimeConfig::parse(&s.workload.runtime_config).unwrap();
        let args = run_args(&s, &cfg, &CreateOptions::default());
        assert!(!args.contains(&"--name".to_owned()));
        assert!(args.contains(&"--name=mine".to_owned()));
    }

    #[test]
    // [utest->swdd~podman-create-workload-mounts-fifo-files~1]
    fn podman_run_args_mount_files_read_only_and_the_control_interface() {
        let s = spec("image: img\n");
        let cfg = PodmanRuntimeConfig::parse(&s.workload.runtime_config).unwrap();
        let options = CreateOptions {
            control_interface: Some("/run/ank/a_io/w.1.a/control_interface".into()),
            files: vec![FileMount {
                host_path: "/run/ank/a_io/w.1.a/files/etc/c".into(),
                mount_point: "/etc/c".into(),
            }],
        };
        let args = run_args(&s, &cfg, &options);
        let mounts: Vec<&str> = args.iter().filter(|a| a.starts_with("--mount")).map(String::as_str).collect();
        assert_eq!(
            mounts,
            [
                "--mount=type=bind,source=/run/ank/a_io/w.1.a/control_interface,destination=/run/ankaios/control_interface",
                "--mount=type=bind,source=/run/ank/a_io/w.1.a/files/etc/c,destination=/etc/c,readonly=true",
            ]
        );
        assert_eq!(args.last().map(String::as_str), Some("img"), "mounts come before the image");
    }

    #[test]
    // [utest->swdd~podman-name-returns-podman~1]
    fn podman_runtime_is_named_podman_and_uses_the_cli_binary() {
        let rt = PodmanRuntime::new(PodmanCli::default());
        assert_eq!(rt.name(), "podman");
        assert_eq!(rt.cli().binary, std::path::PathBuf::from("podman"));
    }

    #[tokio::test]
    async fn podman_create_with_invalid_config_fails_before_calling_podman() {
        let rt = PodmanRuntime::new(PodmanCli {
            binary: "/nonexistent/podman".into(),
            stop_timeout_secs: 1,
            ..PodmanCli::default()
        });
        let err = rt.create(&spec("commandArgs: [a]\n"), &CreateOptions::default()).await.unwrap_err();
        assert!(matches!(err, RuntimeError::Config(_)), "{err:?}");
        assert_eq!(err.to_string(), "invalid podman runtimeConfig: error: line 1 column 1: missing field `image`");
    }
}
