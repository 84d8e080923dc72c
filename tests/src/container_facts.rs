//! What podman and /proc say about one agent's containers, for the
//! end-to-end tests that check what really runs: each container's id,
//! instance name, podman status, main process and start time
//! (`podman inspect`), and whether that process is alive and the
//! container's (its /proc entry exists and its cgroup names the container).

use std::process::Command;

use crate::binaries::containers_of;
use crate::power_cut::in_container_cgroup;

/// One container of an agent as `podman inspect` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerFacts {
    pub id: String,
    /// The `name` label: the workload instance name `<workload>.<id>.<agent>`.
    pub instance: String,
    pub workload: String,
    /// `State.Status`: running, exited, created, ...
    pub status: String,
    /// `State.Pid` of the main process (0 when not running).
    pub pid: i32,
    pub started_at: String,
}

impl ContainerFacts {
    /// Whether the main process lives and is this container's: a pid podman
    /// still lists after its process died (or a reused pid) is not.
    pub fn process_alive(&self) -> bool {
        self.pid > 0 && in_container_cgroup(self.pid, std::slice::from_ref(&self.id))
    }

    /// Id, pid and start time: what stays the same while a container is
    /// not restarted.
    pub fn identity(&self) -> (String, i32, String) {
        (self.id.clone(), self.pid, self.started_at.clone())
    }

    fn from_inspect(v: &serde_json::Value) -> Option<Self> {
        let instance = v["Config"]["Labels"]["name"].as_str()?.to_owned();
        Some(Self {
            id: v["Id"].as_str()?.to_owned(),
            workload: instance.split('.').next()?.to_owned(),
            instance,
            status: v["State"]["Status"].as_str().unwrap_or_default().to_owned(),
            pid: v["State"]["Pid"].as_i64().and_then(|p| i32::try_from(p).ok()).unwrap_or(0),
            started_at: v["State"]["StartedAt"].as_str().unwrap_or_default().to_owned(),
        })
    }
}

/// The containers of the agent `agent` (label `agent=<agent>`), inspected.
/// A container removed between the listing and the inspection makes
/// `podman inspect` fail: both are tried again (three times at most).
pub fn facts_of(agent: &str) -> Vec<ContainerFacts> {
    let mut facts = Vec::new();
    for _ in 0..3 {
        let ids: Vec<String> =
            containers_of(agent).iter().filter_map(|c| c["Id"].as_str().map(str::to_owned)).collect();
        if ids.is_empty() {
            return Vec::new();
        }
        let out = Command::new("podman").arg("inspect").args(&ids).output().expect("podman inspect");
        let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        facts = list.iter().filter_map(ContainerFacts::from_inspect).collect();
        if out.status.success() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    facts
}
