//! Create, start again, stop and delete of containerd workloads, as
//! sequences of containerd calls:
//!
//! - create: resolve (and if needed unpack or pull) the image, prepare the
//!   container's snapshot (key = container id), write its etc files, build
//!   its OCI spec, `Containers.Create` (labels `name` and `agent`),
//!   `Tasks.Create` (stdout and stderr appended to the container's log
//!   file), attach it to the CNI bridge while it is created but not yet
//!   started, `Tasks.Start`. Whatever a failed step leaves is removed.
//! - start again (an unchanged exited workload, as `podman start`): delete
//!   the old task, create and start a new one on the same snapshot; the log
//!   goes on in the same file.
//! - delete: SIGTERM, the stop timeout, SIGKILL to every process, then the
//!   task, the network attachment, the container, its snapshot and its
//!   folder. A workload that is already gone is a success.
//!
//! The container id is the instance's short name (as podman's container
//! name) unless `--name` says otherwise.

use std::path::PathBuf;
use std::time::Duration;

use ank_common::WorkloadInstanceName;
use ank_common::workload::WorkloadSpec;
use containerd_client::services::v1::Container;
use containerd_client::services::v1::container::Runtime;
use containerd_client::types::Mount;
use containerd_client::types::v1::Status;

use super::ContainerdSettings;
use super::client::{CallError, Containerd, RUNC_V2};
use super::image::Images;
use super::image_config::ImageConfig;
use super::logs::log_path;
use super::network::{Cni, EtcFilesWriter, EtcRequest};
use super::oci_spec::{self, EtcFiles, NetNamespace, SpecInput};
use super::run_options::{self, AgentContainerd, BindMount, ContainerdRuntimeConfig, NetworkMode, RunOptions};
use crate::runtime_connectors::podman::CONTROL_INTERFACE_MOUNT;
use crate::runtime_connectors::{CreateOptions, RuntimeError, WorkloadId};

/// The type of the OCI runtime spec in a container record.
const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";

/// How long a SIGKILLed task has to be reported exited.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// The connector's operations on one containerd.
pub struct Lifecycle<'a> {
    pub cd: &'a Containerd,
    pub settings: &'a ContainerdSettings,
    pub image_cache: &'a ImageCache,
}

/// Image configs by the digest of their record's target, so that the
/// creates of many workloads of one image read its manifest and config once.
#[derive(Debug, Default)]
pub struct ImageCache {
    known: std::sync::Mutex<std::collections::HashMap<String, ImageConfig>>,
}

impl ImageCache {
    fn get(&self, digest: &str) -> Option<ImageConfig> {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).get(digest).cloned()
    }

    fn put(&self, config: ImageConfig) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        // Images come and go; a node runs few: a full cache starts over.
        if known.len() >= 64 {
            known.clear();
        }
        known.insert(config.target_digest.clone(), config);
    }

    fn forget(&self, digest: &str) {
        self.known.lock().unwrap_or_else(|p| p.into_inner()).remove(digest);
    }
}

/// The container id of `instance`: its short name when containerd takes
/// it as an id, else a name made of the workload name and the instance's hash.
pub fn container_id(instance: &WorkloadInstanceName) -> String {
    let short = instance.short_name();
    if valid_id(&short) {
        return short;
    }
    let name: String = instance.workload_name.chars().filter(char::is_ascii_alphanumeric).take(48).collect();
    let hash: String = instance.id.chars().filter(char::is_ascii_alphanumeric).take(16).collect();
    format!("{}-{hash}", if name.is_empty() { "workload" } else { &name })
}

/// Whether containerd accepts `id` as a container id: up to 76 characters,
/// alphanumeric parts joined by single `.`, `_` or `-`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 76
        && id.split(['.', '_', '-']).all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric()))
}

fn create_err(e: impl ToString) -> RuntimeError {
    RuntimeError::create(e.to_string())
}

impl Lifecycle<'_> {
    fn images(&self) -> Result<Images, RuntimeError> {
        Ok(Images::new(self.cd.channel(), self.cd.namespace())
            .map_err(create_err)?
            .with_snapshotter(&self.settings.snapshotter))
    }

    /// The config of image `reference`: from the cache when its record
    /// still points to the same target (one call), else resolved (and
    /// unpacked or pulled as needed) and kept.
    async fn image(&self, reference: &str) -> Result<ImageConfig, RuntimeError> {
        let images = self.images()?;
        if let Some(digest) = images.target_digest(reference).await.map_err(create_err)?
            && let Some(known) = self.image_cache.get(&digest)
        {
            return Ok(known);
        }
        let resolved = images.resolve(reference).await.map_err(create_err)?;
        self.image_cache.put(resolved.clone());
        Ok(resolved)
    }

    fn cni(&self) -> Cni {
        Cni::new(&self.settings.network_dir)
    }

    fn folder(&self, id: &str) -> PathBuf {
        self.settings.state_dir.join(id)
    }

    /// Creates and starts the workload; its container id.
    pub async fn create(&self, spec: &WorkloadSpec, options: &CreateOptions) -> Result<WorkloadId, RuntimeError> {
        let cfg = ContainerdRuntimeConfig::parse(&spec.workload.runtime_config).map_err(RuntimeError::from)?;
        if !self.settings.address.exists() {
            return Err(create_err(format!(
                "containerd's socket '{}' does not exist: is containerd installed and running? (the agent's \
                 --containerd-address)",
                self.settings.address.display()
            )));
        }
        let address = self.settings.address.display().to_string();
        let agent = AgentContainerd {
            namespace: self.cd.namespace(),
            address: &address,
            snapshotter: &self.settings.snapshotter,
        };
        for warning in run_options::check_general_options(&cfg.general_options, agent).map_err(RuntimeError::from)? {
            tracing::warn!("workload '{}': {warning}", spec.instance_name);
        }
        let run = cfg.run_options().map_err(RuntimeError::from)?;
        if run.network == NetworkMode::Bridge {
            self.cni().check().map_err(create_err)?;
        }
        let id = run.name.clone().unwrap_or_else(|| container_id(&spec.instance_name));
        let began = tokio::time::Instant::now();
        let image = self.image(&cfg.image).await?;
        self.remove_leftover(&id, &spec.instance_name).await?;
        tracing::debug!("containerd '{id}': image and leftover check {:?}", began.elapsed());
        let result = self.create_container(spec, options, &cfg, &run, &image, &id).await;
        if result.is_err() {
            let _ = self.remove(&id).await;
        }
        result.map(|()| WorkloadId(id))
    }

    /// A container `id` left by an earlier create of the same instance (an
    /// agent killed while creating) is removed; one of another instance is
    /// an error that names it.
    async fn remove_leftover(&self, id: &str, instance: &WorkloadInstanceName) -> Result<(), RuntimeError> {
        let Some(existing) = self.cd.container(id).await.map_err(create_err)? else { return Ok(()) };
        let name = instance.to_string();
        if existing.labels.get("name") != Some(&name) {
            return Err(create_err(format!(
                "the container name '{id}' is already in use in containerd's namespace '{}'",
                self.cd.namespace()
            )));
        }
        tracing::warn!("removing the leftover container '{id}' of '{name}' before creating it again");
        self.remove(id).await.map_err(create_err)
    }

    async fn create_container(
        &self,
        spec: &WorkloadSpec,
        options: &CreateOptions,
        cfg: &ContainerdRuntimeConfig,
        run: &RunOptions,
        image: &ImageConfig,
        id: &str,
    ) -> Result<(), RuntimeError> {
        let began = tokio::time::Instant::now();
        let snapshotter = &self.settings.snapshotter;
        let rootfs = match self.cd.prepare_snapshot(snapshotter, id, &image.chain_id).await {
            Ok(mounts) => mounts,
            // The image's snapshots were removed since it was cached:
            // unpack it again.
            Err(e) if e.is_not_found() => {
                self.image_cache.forget(&image.target_digest);
                self.images()?.resolve(&cfg.image).await.map_err(create_err)?;
                self.cd.prepare_snapshot(snapshotter, id, &image.chain_id).await.map_err(create_err)?
            }
            Err(e) => return Err(create_err(e)),
        };
        let folder = self.folder(id);
        std::fs::create_dir_all(&folder)
            .map_err(|e| create_err(format!("cannot make the folder '{}': {e}", folder.display())))?;
        let hostname = oci_spec::hostname_of(id, run);
        let etc = Some(self.etc_files(&folder, &hostname, run).await?);
        let binds = binds_of(options);
        let oci = {
            let read_rootfs = |path: &str| read_from_mounts(&rootfs, path);
            let capabilities = oci_spec::agent_capabilities();
            let input = SpecInput {
                container_id: id,
                image,
                config: cfg,
                run,
                binds: &binds,
                hostname: &hostname,
                etc_files: etc.as_ref(),
                netns: if run.network == NetworkMode::Host { NetNamespace::Host } else { NetNamespace::New },
                cgroups_path: format!("/{}/{id}", self.cd.namespace()),
                all_capabilities: &capabilities,
                rootfs_files: &read_rootfs,
            };
            oci_spec::build_json(&input).map_err(RuntimeError::from)?
        };
        let mut labels: std::collections::HashMap<String, String> = run.labels.iter().cloned().collect();
        // After the user's labels: a `-l name=...` cannot hide the workload.
        labels.insert("name".to_owned(), spec.instance_name.to_string());
        labels.insert("agent".to_owned(), spec.instance_name.agent_name.to_string());
        let container = Container {
            id: id.to_owned(),
            labels,
            image: cfg.image.clone(),
            runtime: Some(Runtime { name: RUNC_V2.to_owned(), options: None }),
            spec: Some(prost_types::Any { type_url: SPEC_TYPE_URL.to_owned(), value: oci }),
            snapshotter: snapshotter.clone(),
            snapshot_key: id.to_owned(),
            ..Default::default()
        };
        self.cd.create_container(container).await.map_err(create_err)?;
        tracing::debug!("containerd '{id}': snapshot, files, spec and Containers.Create {:?}", began.elapsed());
        self.run_task(id, rootfs, run).await
    }

    /// The container's `/etc/hosts`, `/etc/resolv.conf` and `/etc/hostname`
    /// in `folder`, without its address yet.
    async fn etc_files(
        &self,
        folder: &std::path::Path,
        hostname: &str,
        run: &RunOptions,
    ) -> Result<EtcFiles, RuntimeError> {
        let req = EtcRequest { mode: run.network, hostname, ip: None, extra_hosts: &[] };
        EtcFilesWriter::default().write(&folder.join("etc"), &req).await.map_err(create_err)
    }

    /// Creates the task on `rootfs`, attaches it to the network, starts it.
    async fn run_task(&self, id: &str, rootfs: Vec<Mount>, run: &RunOptions) -> Result<(), RuntimeError> {
        let log = log_path(&self.settings.state_dir, id);
        let began = tokio::time::Instant::now();
        let pid = self.cd.create_task(id, rootfs, &log).await.map_err(create_err)?;
        let created = began.elapsed();
        if run.network == NetworkMode::Bridge {
            let netns = PathBuf::from(format!("/proc/{pid}/ns/net"));
            let attached = self.cni().add(id, &netns, &run.ports).await.map_err(create_err)?;
            // The hosts file gets the address, written in place: the
            // container's bind mount sees it before the task starts.
            let hostname = oci_spec::hostname_of(id, run);
            let req = EtcRequest { mode: run.network, hostname: &hostname, ip: Some(attached.ip), extra_hosts: &[] };
            EtcFilesWriter::default().write(&self.folder(id).join("etc"), &req).await.map_err(create_err)?;
        }
        let attached = began.elapsed();
        self.cd.start_task(id).await.map_err(create_err)?;
        tracing::debug!(
            "containerd '{id}': Tasks.Create {created:?}, network {:?}, Tasks.Start {:?}",
            attached - created,
            began.elapsed() - attached
        );
        Ok(())
    }

    /// Runs the exited workload `id` again in its container.
    pub async fn start_again(&self, spec: &WorkloadSpec, id: &str) -> Result<(), RuntimeError> {
        let cfg = ContainerdRuntimeConfig::parse(&spec.workload.runtime_config).map_err(RuntimeError::from)?;
        let run = cfg.run_options().map_err(RuntimeError::from)?;
        self.cd.delete_task(id).await.map_err(create_err)?;
        if run.network == NetworkMode::Bridge {
            self.cni().del(id, &run.ports).await.map_err(create_err)?;
        }
        let rootfs = self.cd.snapshot_mounts(&self.settings.snapshotter, id).await.map_err(create_err)?;
        // The container's etc files may be gone with the run folder (a
        // reboot that cleared /tmp): written again, in place.
        let hostname = oci_spec::hostname_of(id, &run);
        self.etc_files(&self.folder(id), &hostname, &run).await?;
        self.run_task(id, rootfs, &run).await
    }

    /// Releases the network attachments of containers that are gone (removed
    /// behind the agent's back, e.g. with `ctr`, or while it was not
    /// running): their addresses and port rules would be held forever.
    pub async fn sweep_networks(&self) {
        let cni = self.cni();
        let attached = cni.attached();
        if attached.is_empty() {
            return;
        }
        let Ok(existing) = self.cd.containers("").await else { return };
        let existing: std::collections::HashSet<String> = existing.into_iter().map(|c| c.id).collect();
        for id in attached.iter().filter(|id| !existing.contains(*id)) {
            match cni.del(id, &[]).await {
                Ok(()) => tracing::info!("containerd: released the network of the removed container '{id}'"),
                Err(e) => tracing::warn!("containerd: cannot release the network of the removed container '{id}': {e}"),
            }
        }
    }

    /// Stops and removes the workload `id`.
    pub async fn delete(&self, id: &str) -> Result<(), RuntimeError> {
        self.stop(id).await.map_err(|e| RuntimeError::delete(e.to_string()))?;
        self.remove_stopped(id).await.map_err(|e| RuntimeError::delete(e.to_string()))
    }

    /// SIGTERM, then after the stop timeout SIGKILL to all its processes.
    async fn stop(&self, id: &str) -> Result<(), CallError> {
        let Some(task) = self.cd.task(id).await? else { return Ok(()) };
        if matches!(Status::try_from(task.status), Ok(Status::Stopped)) {
            return Ok(());
        }
        if matches!(Status::try_from(task.status), Ok(Status::Created)) {
            return self.kill(id).await;
        }
        match self.cd.kill_task(id, libc::SIGTERM as u32, false).await {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
        match tokio::time::timeout(self.settings.stop_timeout, self.cd.wait_task(id)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) if e.is_not_found() => Ok(()),
            _ => self.kill(id).await,
        }
    }

    async fn kill(&self, id: &str) -> Result<(), CallError> {
        match self.cd.kill_task(id, libc::SIGKILL as u32, true).await {
            Err(e) if !e.is_not_found() => return Err(e),
            _ => {}
        }
        let _ = tokio::time::timeout(KILL_WAIT, self.cd.wait_task(id)).await;
        Ok(())
    }

    /// Kills the task if it still runs (a failed create, a leftover), then
    /// [`remove_stopped`](Self::remove_stopped).
    async fn remove(&self, id: &str) -> Result<(), CallError> {
        let task = self.cd.task(id).await?;
        if task.is_some_and(|t| !matches!(Status::try_from(t.status), Ok(Status::Stopped))) {
            self.kill(id).await?;
        }
        self.remove_stopped(id).await
    }

    /// Removes the stopped task, the network attachment, the container,
    /// its snapshot and its folder; each is a success when already gone.
    async fn remove_stopped(&self, id: &str) -> Result<(), CallError> {
        self.cd.delete_task(id).await?;
        // The network state keeps the ports of the attachment.
        if let Err(e) = self.cni().del(id, &[]).await {
            tracing::warn!("container '{id}': releasing its network failed: {e}");
        }
        self.cd.delete_container(id).await?;
        self.cd.remove_snapshot(&self.settings.snapshotter, id).await?;
        let folder = self.folder(id);
        if let Err(e) = std::fs::remove_dir_all(&folder)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!("cannot remove '{}': {e}", folder.display());
        }
        Ok(())
    }
}

/// The control interface folder and the workload files as bind mounts.
fn binds_of(options: &CreateOptions) -> Vec<BindMount> {
    let mut binds = Vec::new();
    if let Some(folder) = &options.control_interface {
        binds.push(BindMount {
            source: folder.display().to_string(),
            destination: CONTROL_INTERFACE_MOUNT.to_owned(),
            read_only: false,
        });
    }
    for f in &options.files {
        binds.push(BindMount {
            source: f.host_path.display().to_string(),
            destination: f.mount_point.clone(),
            read_only: true,
        });
    }
    binds
}

/// Reads `path` (absolute, in the container) from the root file system
/// `mounts` would mount, without mounting it: an overlay's upper folder
/// first, then its lower folders in order; a bind's source.
pub fn read_from_mounts(mounts: &[Mount], path: &str) -> Option<Vec<u8>> {
    let rel = path.trim_start_matches('/');
    for m in mounts {
        let mut dirs: Vec<PathBuf> = Vec::new();
        match m.r#type.as_str() {
            "overlay" => {
                for o in &m.options {
                    if let Some(upper) = o.strip_prefix("upperdir=") {
                        dirs.insert(0, PathBuf::from(upper));
                    }
                }
                for o in &m.options {
                    if let Some(lower) = o.strip_prefix("lowerdir=") {
                        dirs.extend(lower.split(':').map(PathBuf::from));
                    }
                }
            }
            "bind" | "rbind" => dirs.push(PathBuf::from(&m.source)),
            _ => {}
        }
        for d in dirs {
            if let Ok(bytes) = std::fs::read(d.join(rel)) {
                return Some(bytes);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_create_without_containerd_says_where_its_socket_was_looked_for() {
        use ank_common::workload::Workload;
        use ank_common::{AgentName, WorkloadName};
        let dir = tempfile::tempdir().unwrap();
        let settings = ContainerdSettings {
            address: dir.path().join("containerd.sock"),
            namespace: "default".into(),
            snapshotter: "overlayfs".into(),
            state_dir: dir.path().join("state"),
            network_dir: dir.path().join("network"),
            reconcile_interval: Duration::from_secs(30),
            stop_timeout: Duration::from_secs(10),
        };
        let cd = Containerd::new(&settings.address, "default");
        let cache = ImageCache::default();
        let life = Lifecycle { cd: &cd, settings: &settings, image_cache: &cache };
        let wl = Workload {
            agent: "a".into(),
            runtime: "containerd".into(),
            runtime_config: "image: localhost/busybox:latest\n".into(),
            ..Default::default()
        };
        let spec = WorkloadSpec::new(&WorkloadName::new("w").unwrap(), &AgentName::new("a").unwrap(), wl);
        let err = life.create(&spec, &CreateOptions::default()).await.unwrap_err().to_string();
        assert!(err.contains("containerd's socket"), "{err}");
        assert!(err.contains(&settings.address.display().to_string()), "{err}");
        assert!(err.contains("--containerd-address"), "{err}");
    }

    #[test]
    fn container_ids_are_short_names_or_made_valid() {
        let ok = WorkloadInstanceName::parse("web.1234567890abcdef.agent_A").unwrap();
        assert_eq!(container_id(&ok), "web.1234567.agent_A");
        assert!(valid_id("a.b-c_d9"));
        assert!(!valid_id("a--b"));
        assert!(!valid_id(&"x".repeat(77)));
        assert!(!valid_id(""));
        let odd = WorkloadInstanceName::parse("we--b.1234567890abcdef.a").unwrap();
        let id = container_id(&odd);
        assert!(valid_id(&id), "{id}");
        assert_eq!(id, "web-1234567890abcdef");
    }

    #[test]
    fn files_are_read_from_the_upper_then_the_lower_folders() {
        let dir = tempfile::tempdir().unwrap();
        let (upper, low1, low2) = (dir.path().join("u"), dir.path().join("l1"), dir.path().join("l2"));
        for d in [&upper, &low1, &low2] {
            std::fs::create_dir_all(d.join("etc")).unwrap();
        }
        std::fs::write(low2.join("etc/passwd"), "low2").unwrap();
        std::fs::write(low1.join("etc/group"), "low1").unwrap();
        std::fs::write(upper.join("etc/group"), "upper").unwrap();
        let m = Mount {
            r#type: "overlay".into(),
            source: "overlay".into(),
            options: vec![
                format!("upperdir={}", upper.display()),
                format!("lowerdir={}:{}", low1.display(), low2.display()),
            ],
            ..Default::default()
        };
        assert_eq!(read_from_mounts(std::slice::from_ref(&m), "/etc/passwd").unwrap(), b"low2");
        assert_eq!(read_from_mounts(std::slice::from_ref(&m), "/etc/group").unwrap(), b"upper");
        assert_eq!(read_from_mounts(&[m], "/etc/shadow"), None);
    }
}
