//! The OCI runtime spec of a containerd container: the `config.json` that
//! containerd's `Containers.Create` takes as its `spec` (an `Any` of type
//! `types.containerd.io/opencontainers/runtime-spec/1/Spec` whose value is
//! these JSON bytes), built as `nerdctl run` would build it from an image,
//! a runtimeConfig and the connector's mounts, cgroup and network namespace.
//!
//! Crate decision: the spec is written with the small serde types of
//! [`model`] (only the fields this agent sets), not with the `oci-spec`
//! crate. `oci-spec` 0.10 (runtime feature) would add nine crates to the
//! agent, four of them proc-macro crates (getset, strum_macros, …), and its
//! builders (one fallible `build()` per struct) make the code longer than
//! the types it replaces; our types keep the names typed all the same, and
//! runc is the judge of the result.
//!
//! Not done as nerdctl does: no seccomp or AppArmor profile (containerd's
//! bare defaults), no host device nodes for `--privileged` (its device
//! cgroup allows all), no `/run` tmpfs (an image's `/run` stays visible).

mod defaults;
pub mod model;
#[cfg(test)]
mod tests;
mod user;

use std::path::PathBuf;

use super::image_config::ImageConfig;
use super::run_options::{BindMount, ContainerdRuntimeConfig, RunOptions};
use crate::runtime_connectors::RuntimeError;

pub use defaults::{ALL_CAPABILITIES, agent_capabilities};
pub use user::RootfsFiles;

/// The OCI version containerd 1.6 writes.
pub const OCI_VERSION: &str = "1.0.2-dev";

/// The CFS period `--cpus` is a share of, in microseconds.
pub const CPU_PERIOD: u64 = 100_000;

/// Host files bound over the image's `/etc/hosts`, `/etc/resolv.conf` and
/// `/etc/hostname`, written by the connector's network part.
pub use super::network::EtcFiles;

/// The network namespace of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetNamespace {
    /// The host's (`--net host`): no network namespace in the spec.
    Host,
    /// A new one runc creates (only loopback; `--net none`).
    New,
    /// One prepared by the connector (the CNI bridge), joined by path.
    Path(PathBuf),
}

/// What a container's spec is built from.
pub struct SpecInput<'a> {
    /// The containerd container id.
    pub container_id: &'a str,
    pub image: &'a ImageConfig,
    pub config: &'a ContainerdRuntimeConfig,
    pub run: &'a RunOptions,
    /// The connector's binds (control interface, workload files), mounted
    /// before the user's `-v`/`--mount` ones.
    pub binds: &'a [BindMount],
    /// The container's host name, see [`hostname_of`].
    pub hostname: &'a str,
    pub etc_files: Option<&'a EtcFiles>,
    pub netns: NetNamespace,
    /// The cgroup (`/ankaios/<id>`, or `slice:prefix:name` for systemd).
    pub cgroups_path: String,
    /// What `--privileged` and `--cap-add ALL` grant: the agent's own
    /// capabilities, see [`agent_capabilities`] (as containerd does).
    pub all_capabilities: &'a [&'a str],
    /// Reads a file of the image's root file system (for `/etc/passwd`
    /// and `/etc/group`).
    pub rootfs_files: RootfsFiles<'a>,
}

/// Why a container's spec cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Neither the image nor the runtimeConfig gives a command.
    #[error(
        "no command for image '{image}': it has no Entrypoint or Cmd, and neither commandArgs nor --entrypoint give one"
    )]
    NoCommand { image: String },
    /// A user name the image's `/etc/passwd` does not have.
    #[error("user '{user}' is not in the image's /etc/passwd")]
    UnknownUser { user: String },
    /// A group name the image's `/etc/group` does not have.
    #[error("group '{group}' is not in the image's /etc/group")]
    UnknownGroup { group: String },
}

impl From<SpecError> for RuntimeError {
    fn from(error: SpecError) -> Self {
        RuntimeError::InvalidConfig(error.to_string())
    }
}

/// nerdctl's host name rule: `--hostname`, else the first 12 characters
/// of the container id.
pub fn hostname_of(container_id: &str, run: &RunOptions) -> String {
    if let Some(h) = &run.hostname {
        return h.clone();
    }
    // An id is a short name here, not nerdctl's hex: its first 12
    // characters may end in a dot or hold an `_`, which no host name may.
    let cut: String = container_id
        .chars()
        .take(12)
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
        .collect();
    let name = cut.trim_end_matches(['.', '-']).trim_start_matches(['.', '-']);
    if name.is_empty() { "ankaios".to_owned() } else { name.to_owned() }
}

/// Builds the runtime spec as JSON bytes: the `value` of the `Any` that
/// `Containers.Create` takes.
pub fn build_json(input: &SpecInput<'_>) -> Result<Vec<u8>, SpecError> {
    let spec = build_spec(input)?;
    // Plain structs of strings, numbers and bools always serialize.
    Ok(serde_json::to_vec(&spec).unwrap_or_default())
}

/// Builds the runtime spec, typed.
pub fn build_spec(input: &SpecInput<'_>) -> Result<model::Spec, SpecError> {
    let run = input.run;
    let user_spec = run.user.as_deref().unwrap_or(&input.image.user);
    let process = model::Process {
        terminal: false,
        user: user::resolve(user_spec, input.rootfs_files)?,
        args: args(input)?,
        env: env(input.image, run, input.hostname),
        cwd: run
            .workdir
            .clone()
            .or_else(|| Some(input.image.working_dir.clone()).filter(|w| !w.is_empty()))
            .unwrap_or_else(|| "/".into()),
        capabilities: capabilities(run, input.all_capabilities),
        rlimits: defaults::rlimits(),
        no_new_privileges: false,
    };
    let (masked, readonly) = match run.privileged {
        true => (Vec::new(), Vec::new()),
        false => (owned(defaults::MASKED_PATHS), owned(defaults::READONLY_PATHS)),
    };
    Ok(model::Spec {
        oci_version: OCI_VERSION.into(),
        process,
        root: model::Root { path: "rootfs".into(), readonly: run.read_only },
        hostname: input.hostname.to_owned(),
        mounts: mounts(input),
        linux: model::Linux {
            resources: resources(run),
            cgroups_path: input.cgroups_path.clone(),
            namespaces: namespaces(&input.netns),
            masked_paths: masked,
            readonly_paths: readonly,
        },
    })
}

fn owned(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Docker's rule: the entrypoint (`--entrypoint`, else the image's), then
/// `commandArgs`, else the image's `Cmd` unless `--entrypoint` was given.
fn args(input: &SpecInput<'_>) -> Result<Vec<String>, SpecError> {
    let (entrypoint, cmd) = match &input.run.entrypoint {
        Some(e) if e.is_empty() => (Vec::new(), Vec::new()),
        Some(e) => (vec![e.clone()], Vec::new()),
        None => (input.image.entrypoint.clone(), input.image.cmd.clone()),
    };
    let command = if input.config.command_args.is_empty() { cmd } else { input.config.command_args.clone() };
    let args: Vec<String> = entrypoint.into_iter().chain(command).collect();
    if args.is_empty() {
        return Err(SpecError::NoCommand { image: input.config.image.clone() });
    }
    Ok(args)
}

/// `PATH` (if the image has none), the image's `Env`, `HOSTNAME`, then the
/// user's `-e`/`--env-file`; a later one replaces an earlier one of the
/// same key in place.
fn env(image: &ImageConfig, run: &RunOptions, hostname: &str) -> Vec<String> {
    let key = |e: &str| e.split_once('=').map_or(e, |(k, _)| k).to_owned();
    let has_path = image.env.iter().any(|e| key(e) == "PATH");
    let defaults = (!has_path).then(|| defaults::DEFAULT_PATH.to_owned());
    let hostname = format!("HOSTNAME={hostname}");
    let mut merged: Vec<String> = Vec::new();
    for entry in defaults.into_iter().chain(image.env.iter().cloned()).chain([hostname]).chain(run.env.iter().cloned())
    {
        match merged.iter_mut().find(|e| key(e) == key(&entry)) {
            Some(slot) => *slot = entry,
            None => merged.push(entry),
        }
    }
    merged
}

/// containerd's default set, or `all` when privileged; then `--cap-add`
/// and `--cap-drop` (`ALL` in either), a drop winning over an add.
fn capabilities(run: &RunOptions, all: &[&str]) -> model::Capabilities {
    let mut caps: Vec<String> = match run.privileged || run.cap_add.iter().any(|c| c == "ALL") {
        true => owned(all),
        false => owned(defaults::DEFAULT_CAPABILITIES),
    };
    for cap in run.cap_add.iter().filter(|c| *c != "ALL") {
        if !caps.contains(cap) {
            caps.push(cap.clone());
        }
    }
    if run.cap_drop.iter().any(|c| c == "ALL") {
        caps.clear();
        // docker: `--cap-drop ALL --cap-add X` keeps X.
        caps.extend(run.cap_add.iter().filter(|c| *c != "ALL").cloned());
    }
    caps.retain(|c| !run.cap_drop.contains(c));
    model::Capabilities { bounding: caps.clone(), effective: caps.clone(), permitted: caps }
}

fn bind(destination: &str, source: String, read_only: bool) -> model::Mount {
    model::Mount {
        destination: destination.to_owned(),
        kind: "bind".into(),
        source,
        options: vec!["rbind".into(), "rprivate".into(), if read_only { "ro" } else { "rw" }.into()],
    }
}

/// The system mounts, the `/etc` files, the connector's binds, the user's.
fn mounts(input: &SpecInput<'_>) -> Vec<model::Mount> {
    let mut mounts = defaults::system_mounts(input.run.privileged);
    if let Some(etc) = input.etc_files {
        let ro = input.run.read_only;
        for (destination, source) in
            [("/etc/hosts", &etc.hosts), ("/etc/resolv.conf", &etc.resolv_conf), ("/etc/hostname", &etc.hostname)]
        {
            mounts.push(bind(destination, source.display().to_string(), ro));
        }
    }
    for b in input.binds.iter().chain(&input.run.binds) {
        mounts.push(bind(&b.destination, b.source.clone(), b.read_only));
    }
    mounts
}

fn resources(run: &RunOptions) -> model::Resources {
    model::Resources {
        devices: defaults::device_rules(run.privileged),
        memory: run.memory.map(|bytes| model::Memory { limit: i64::try_from(bytes).unwrap_or(i64::MAX) }),
        cpu: run.cpus.map(|cpus| model::Cpu { quota: (cpus * CPU_PERIOD as f64).round() as i64, period: CPU_PERIOD }),
    }
}

fn namespaces(netns: &NetNamespace) -> Vec<model::Namespace> {
    let ns = |kind: &str, path: Option<String>| model::Namespace { kind: kind.into(), path };
    let mut list = vec![ns("pid", None), ns("ipc", None), ns("uts", None), ns("mount", None)];
    match netns {
        NetNamespace::Host => {}
        NetNamespace::New => list.push(ns("network", None)),
        NetNamespace::Path(path) => list.push(ns("network", Some(path.display().to_string()))),
    }
    list
}
