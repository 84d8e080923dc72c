//! Workloads made on podman exactly as Eclipse Ankaios' agent (1.1.0-pre,
//! commit 084dcc0a) makes them, without any agent, for the takeover tests:
//! what an Ankaios node leaves behind when its agent stops.
//!
//! The facts copied here are interface facts of the reference:
//! - instance name `<workload>.<id>.<agent>`, `id` = lowercase hex SHA-256 of
//!   the rendered `runtimeConfig` string without its leading and trailing
//!   whitespace (`trim_string` on deserializing; a `|` block loses its last
//!   line break); container name
//!   `<workload>.<first 7 of id>.<agent>` (`short_workload_name`);
//! - `podman [generalOptions] run --detach --name <short> [commandOptions]
//!   [--mount=type=bind,source=<ci folder>,destination=/run/ankaios/control_interface]
//!   [--mount=type=bind,source=<file>,destination=<mountPoint>,readonly=true]...
//!   --label=name=<instance> --label=agent=<agent> <image> [commandArgs]`
//!   (`podman_cli.rs`, `podman_run`);
//! - the instance folder `<run folder>/<agent>_io/<workload>.<id>` (no agent
//!   part, `pipes_folder_name`) holding `control_interface/{input,output}`
//!   (FIFOs) and `files/<mountPoint without the leading />`;
//! - podman-kube: volume `<instance>.config` with label `data=` the
//!   runtimeConfig and `<instance>.pods` with `data=` the JSON list of the pod
//!   ids `podman kube play --quiet -` printed, both base64 without padding,
//!   no other label (`podman_kube_runtime.rs`, `store_data_as_volume`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine;
use sha2::{Digest, Sha256};

/// Where Ankaios mounts the control interface folder in a container.
pub const CONTROL_INTERFACE_MOUNT: &str = "/run/ankaios/control_interface";

/// The id part of an instance name: hex SHA-256 of the rendered runtimeConfig
/// as Ankaios keeps it (trimmed).
pub fn config_id(runtime_config: &str) -> String {
    Sha256::digest(runtime_config.trim().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A podman workload as a manifest states it.
pub struct PodmanWorkload<'a> {
    pub name: &'a str,
    pub image: &'a str,
    pub command_args: &'a [&'a str],
    /// (mountPoint, text data) of each workload file.
    pub files: &'a [(&'a str, &'a str)],
    /// Whether it has controlInterfaceAccess rules (gets the FIFOs).
    pub control_interface: bool,
}

impl PodmanWorkload<'_> {
    /// Its runtimeConfig, exactly as it appears in the manifest's block.
    pub fn runtime_config(&self) -> String {
        let args: Vec<String> = self.command_args.iter().map(|a| format!("\"{a}\"")).collect();
        format!("image: {}\ncommandArgs: [{}]\n", self.image, args.join(", "))
    }
}

/// One node of an Ankaios cluster: an agent name and its run folder.
pub struct AnkaiosNode {
    pub agent: String,
    pub run_folder: PathBuf,
}

fn podman(args: &[String]) -> String {
    let out = Command::new("podman").args(args).stdin(Stdio::null()).output().expect("run podman");
    assert!(out.status.success(), "podman {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn podman_with_stdin(args: &[&str], stdin: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("podman")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn podman");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write podman stdin");
    let out = child.wait_with_output().expect("podman output");
    assert!(out.status.success(), "podman {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl AnkaiosNode {
    pub fn new(agent: &str, run_folder: &Path) -> Self {
        Self { agent: agent.to_owned(), run_folder: run_folder.to_owned() }
    }

    /// `<workload>.<id>.<agent>`.
    pub fn instance_name(&self, workload: &str, runtime_config: &str) -> String {
        format!("{workload}.{}.{}", config_id(runtime_config), self.agent)
    }

    /// `<run folder>/<agent>_io/<workload>.<id>`.
    pub fn instance_folder(&self, workload: &str, runtime_config: &str) -> PathBuf {
        self.run_folder.join(format!("{}_io", self.agent)).join(format!("{workload}.{}", config_id(runtime_config)))
    }

    /// Creates the workload as Ankaios' agent does (files, FIFOs, `podman
    /// run`); returns the container id.
    pub fn run_podman(&self, w: &PodmanWorkload<'_>) -> String {
        let cfg = w.runtime_config();
        let id = config_id(&cfg);
        let folder = self.instance_folder(w.name, &cfg);
        let mut args: Vec<String> = vec!["run".into(), "--detach".into()];
        args.extend(["--name".into(), format!("{}.{}.{}", w.name, &id[..7], self.agent)]);
        if w.control_interface {
            let ci = folder.join("control_interface");
            std::fs::create_dir_all(&ci).expect("control interface folder");
            for pipe in ["input", "output"] {
                nix::unistd::mkfifo(&ci.join(pipe), nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
            }
            args.push(format!("--mount=type=bind,source={},destination={CONTROL_INTERFACE_MOUNT}", ci.display()));
        }
        for (mount_point, data) in w.files {
            let host = folder.join("files").join(mount_point.trim_start_matches('/'));
            std::fs::create_dir_all(host.parent().expect("parent")).expect("files folder");
            std::fs::write(&host, data).expect("write workload file");
            args.push(format!("--mount=type=bind,source={},destination={mount_point},readonly=true", host.display()));
        }
        args.push(format!("--label=name={}", self.instance_name(w.name, &cfg)));
        args.push(format!("--label=agent={}", self.agent));
        args.push(w.image.to_owned());
        args.extend(w.command_args.iter().map(|a| a.to_string()));
        podman(&args)
    }

    /// Plays a podman-kube workload as Ankaios' agent does (config volume,
    /// `kube play --quiet -`, pods volume); returns the pod ids.
    pub fn play_kube(&self, workload: &str, runtime_config: &str, manifest: &str) -> Vec<String> {
        let instance = self.instance_name(workload, runtime_config);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD_NO_PAD.encode(s);
        podman(&[
            "volume".into(),
            "create".into(),
            format!("--label=data={}", b64(runtime_config.trim())),
            format!("{instance}.config"),
        ]);
        let out = podman_with_stdin(&["kube", "play", "--quiet", "-"], manifest);
        let mut pods = Vec::new();
        let mut in_pods = false;
        for line in out.lines().map(str::trim) {
            if line == "Pod:" {
                in_pods = true;
            } else if line.ends_with(':') {
                in_pods = false;
            } else if in_pods && !line.is_empty() {
                pods.push(line.to_owned());
            }
        }
        let json = serde_json::to_string(&pods).expect("pods as json");
        podman(&["volume".into(), "create".into(), format!("--label=data={}", b64(&json)), format!("{instance}.pods")]);
        pods
    }

    /// Volume names of a kube workload.
    pub fn kube_volumes(&self, workload: &str, runtime_config: &str) -> [String; 2] {
        let instance = self.instance_name(workload, runtime_config);
        [format!("{instance}.config"), format!("{instance}.pods")]
    }
}
