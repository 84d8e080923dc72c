//! End to end with the built binaries and real podman: a node that Eclipse
//! Ankaios ran is switched to ank with zero restarts. The workloads are made
//! exactly as Ankaios' agent makes them ([`ank_tests::ankaios_podman`]):
//! plain podman ones, one with dependencies, one with files, one with
//! controlInterfaceAccess (its FIFOs in Ankaios' place) and a podman-kube
//! one. Then `ank-server` starts with the same manifest and `ank-agent` with
//! the same name and run folder: every workload is adopted (same container
//! ids and StartedAt, no lifecycle event in `podman events`, the FIFOs and
//! files untouched) and reported `Running(Ok)`. See docs/migration.md.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ank_tests::ankaios_podman::{AnkaiosNode, PodmanWorkload};
use ank_tests::binaries::{Cluster, ClusterOptions};

const IMAGE: &str = "localhost/busybox:latest";
const SLEEP: &[&str] = &["sleep", "100000"];

/// Events that mean a container, pod or volume was (re)made or stopped.
const LIFECYCLE: &[&str] =
    &["create", "init", "start", "restart", "stop", "kill", "died", "cleanup", "remove", "pause", "unpause"];

/// Removes what the "Ankaios" side made: its containers (also when the test
/// fails before the cluster, whose drop removes them too, exists), the kube
/// pod and its volumes.
struct AnkaiosLeftovers {
    agent: String,
    pod: String,
    volumes: [String; 2],
}

impl Drop for AnkaiosLeftovers {
    fn drop(&mut self) {
        let label = format!("label=agent={}", self.agent);
        let out = Command::new("podman").args(["ps", "--all", "--quiet", "--filter", &label]).output();
        let ids: Vec<String> = out
            .map(|o| String::from_utf8_lossy(&o.stdout).split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        if !ids.is_empty() {
            let _ = Command::new("podman").args(["rm", "-f", "-t", "0"]).args(&ids).output();
        }
        let _ = Command::new("podman").args(["pod", "rm", "-f", "-t", "0", &self.pod]).output();
        let _ = Command::new("podman").args(["volume", "rm", "-f"]).args(&self.volumes).output();
    }
}

fn podman_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new("podman").args(args).output().expect("podman");
    assert!(out.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("podman {args:?} json: {e}"))
}

/// Container id -> (name, State.StartedAt, State.Running) of `ids`; a
/// container that is gone shows as `("<gone>", "", false)`.
fn inspect(ids: &[String]) -> BTreeMap<String, (String, String, bool)> {
    ids.iter()
        .map(|id| {
            let out = Command::new("podman").args(["container", "inspect", id]).output().expect("podman inspect");
            let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            let c = &list[0];
            let name = c["Name"].as_str().unwrap_or("<gone>").to_owned();
            let started = c["State"]["StartedAt"].as_str().unwrap_or_default().to_owned();
            (id.clone(), (name, started, c["State"]["Running"].as_bool().unwrap_or(false)))
        })
        .collect()
}

/// The ids of the containers of `pod` (its infra container too).
fn pod_containers(pod: &str) -> Vec<String> {
    let list = podman_json(&["ps", "--all", "--format", "json", "--filter", &format!("pod={pod}")]);
    list.as_array().expect("ps list").iter().filter_map(|c| c["Id"].as_str().map(str::to_owned)).collect()
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

/// `podman events` from `since` to now, as (type, status, id, name).
fn events_since(since: u64) -> Vec<(String, String, String, String)> {
    let out = Command::new("podman")
        // `--stream=false`, not `--until`: with `--until` this podman (file
        // event logger) printed nothing at all.
        .args(["events", "--format", "json", "--since", &since.to_string(), "--stream=false"])
        .output()
        .expect("podman events");
    assert!(out.status.success(), "podman events: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (s("Type"), s("Status"), s("ID"), s("Name"))
        })
        .collect()
}

fn inode(path: &std::path::Path) -> u64 {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).ino()
}

fn block(text: &str, indent: usize) -> String {
    text.lines().map(|l| format!("{:indent$}{l}\n", "")).collect()
}

#[test]
fn e2e_takeover_from_ankaios_adopts_every_workload_without_restarting_it() {
    ank_tests::require_podman();
    let pid = std::process::id();
    let agent = format!("e2e_takeover_{pid}");
    let run_folder = tempfile::tempdir().expect("run folder");
    let node = AnkaiosNode::new(&agent, run_folder.path());

    let plain: Vec<String> = (0..3).map(|i| format!("plain{i}")).collect();
    let mut podman_workloads: Vec<PodmanWorkload<'_>> = plain
        .iter()
        .map(|n| PodmanWorkload { name: n, image: IMAGE, command_args: SLEEP, files: &[], control_interface: false })
        .collect();
    podman_workloads.push(PodmanWorkload {
        name: "withdeps",
        image: IMAGE,
        command_args: &["sleep", "100001"],
        files: &[],
        control_interface: false,
    });
    podman_workloads.push(PodmanWorkload {
        name: "withfiles",
        image: IMAGE,
        command_args: &["sleep", "100002"],
        files: &[("/etc/greeting", "hello from ankaios\n")],
        control_interface: false,
    });
    podman_workloads.push(PodmanWorkload {
        name: "withci",
        image: IMAGE,
        command_args: &["sleep", "100003"],
        files: &[],
        control_interface: true,
    });
    let pod = format!("e2etakeover-{pid}");
    let kube_manifest = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {pod}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: {IMAGE}\n    imagePullPolicy: Never\n    command: [\"/bin/sh\", \"-c\", \"sleep 100000\"]\n"
    );
    let kube_config = format!("manifest: |\n{}", block(&kube_manifest, 2));
    let _leftovers =
        AnkaiosLeftovers { agent: agent.clone(), pod: pod.clone(), volumes: node.kube_volumes("kube", &kube_config) };

    // The manifest both sides run: the runtimeConfigs are the exact strings
    // the instance names hash.
    let mut manifest = String::from("apiVersion: v1\nworkloads:\n");
    for w in &podman_workloads {
        manifest += &format!("  {}:\n    runtime: podman\n    agent: {agent}\n", w.name);
        if w.name == "withdeps" {
            manifest += "    dependencies:\n      plain0: ADD_COND_RUNNING\n";
        }
        if !w.files.is_empty() {
            manifest += "    files:\n";
            for (mount_point, data) in w.files {
                manifest += &format!("      - mountPoint: {mount_point}\n        data: {data:?}\n");
            }
        }
        if w.control_interface {
            manifest += "    controlInterfaceAccess:\n      allowRules:\n        - type: StateRule\n          operation: Read\n          filterMasks: [\"desiredState.workloads\"]\n";
        }
        manifest += &format!("    runtimeConfig: |\n{}", block(&w.runtime_config(), 6));
    }
    manifest += &format!(
        "  kube:\n    runtime: podman-kube\n    agent: {agent}\n    runtimeConfig: |\n{}",
        block(&kube_config, 6)
    );
    let manifest_file = run_folder.path().join("startup.yaml");
    std::fs::write(&manifest_file, &manifest).expect("write manifest");

    // What Ankaios' agent leaves running when it stops.
    let setup_since = unix_now();
    let mut ids: Vec<String> = podman_workloads.iter().map(|w| node.run_podman(w)).collect();
    let pods = node.play_kube("kube", &kube_config, &kube_manifest);
    assert_eq!(pods.len(), 1, "kube play made one pod: {pods:?}");
    ids.extend(pod_containers(&pods[0]));
    let before = inspect(&ids);
    assert!(before.values().all(|(_, _, running)| *running), "all running before: {before:?}");
    let ci = node.instance_folder("withci", &podman_workloads[5].runtime_config()).join("control_interface");
    let file = node.instance_folder("withfiles", &podman_workloads[4].runtime_config()).join("files/etc/greeting");
    let inodes_before = [inode(&ci.join("input")), inode(&ci.join("output")), inode(&file)];
    let volumes = node.kube_volumes("kube", &kube_config);

    // The takeover: our server and agent, same manifest, name and run folder.
    std::thread::sleep(Duration::from_millis(1100));
    let since = unix_now();
    let start = Instant::now();
    let c = Cluster::start_opts(
        &agent,
        ClusterOptions { manifest: Some(&manifest_file), run_folder: Some(run_folder), ..Default::default() },
    );
    let names: Vec<String> = podman_workloads.iter().map(|w| w.name.to_owned()).chain(["kube".to_owned()]).collect();
    let all_running = |c: &Cluster| {
        let rows = c.workload_rows();
        names.iter().all(|n| rows.iter().any(|(r, s)| r == n && s == "Running(Ok)"))
    };
    c.wait_until(Duration::from_secs(60), all_running);
    let took = start.elapsed();
    println!(
        "takeover: all {} workloads Running(Ok) {took:?} after ank-server and ank-agent were started",
        names.len()
    );

    // Give a late replace or restart time to show, then compare.
    std::thread::sleep(Duration::from_secs(3));
    assert!(all_running(&c), "still all Running(Ok): {:?}", c.workload_rows());
    assert_eq!(c.workload_rows().len(), names.len(), "each workload listed once: {:?}", c.workload_rows());
    assert_eq!(inspect(&ids), before, "same containers, same StartedAt, all running");
    let ours = |id: &str, name: &str| {
        ids.iter().any(|i| i == id) || pods.iter().any(|p| p == id) || volumes.iter().any(|v| v == name)
    };
    let touched: Vec<_> = events_since(since)
        .into_iter()
        .filter(|(_, status, id, name)| LIFECYCLE.contains(&status.as_str()) && ours(id, name))
        .collect();
    assert!(touched.is_empty(), "lifecycle events for adopted workloads during the takeover: {touched:?}");
    // The event query itself works: it shows the creates of the setup.
    let created =
        events_since(setup_since).into_iter().filter(|(_, s, id, _)| s == "create" && ids.contains(id)).count();
    assert_eq!(created, ids.len(), "podman events shows the setup's creates");
    let inodes_after = [inode(&ci.join("input")), inode(&ci.join("output")), inode(&file)];
    assert_eq!(inodes_after, inodes_before, "the FIFOs and the workload file are the ones the containers mount");
    let only_ours = c.containers().len();
    assert_eq!(only_ours, podman_workloads.len(), "no container was added: {only_ours}");
}
