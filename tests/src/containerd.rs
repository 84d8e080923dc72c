//! A containerd namespace of one test: the local busybox image imported
//! into it, `ctr` run in it, and everything in it (tasks, containers,
//! snapshots, images) removed with the namespace on drop. containerd must
//! answer on its socket: a test fails with a clear message otherwise.

use std::process::{Command, Output};

/// The local image the tests run (imported from podman by `tools/setup.sh`).
pub const IMAGE: &str = "localhost/busybox:latest";

/// Where `tools/setup.sh` saved the image for `ctr images import`.
pub const IMAGE_TAR: &str = "/var/tmp/ankaios-busybox.tar";

/// Panics with a clear message unless containerd answers.
pub fn require_containerd() {
    let ok = Command::new("ctr").arg("version").output().is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "containerd not reachable at /run/containerd/containerd.sock (or `ctr` missing): run `bash tools/setup.sh`, \
         which installs and starts it"
    );
}

/// Releases the CNI attachments (addresses, port rules) of containers of
/// `namespace` that a killed agent left: a test's containers are removed
/// with `ctr`, which knows nothing of them.
pub fn release_networks(namespace: &str) {
    use ank_agent::runtime_connectors::containerd::{network::Cni, network_dir};
    let dir = network_dir(namespace);
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    let cni = Cni::new(&dir);
    for id in cni.attached() {
        let _ = rt.block_on(cni.del(&id, &[]));
    }
    let _ = std::fs::remove_dir_all(dir.parent().unwrap_or(&dir));
}

/// A containerd namespace for one test.
pub struct Namespace {
    pub name: String,
}

impl Namespace {
    /// The namespace `ank-test-<test>-<pid>` with busybox imported.
    pub fn new(test: &str) -> Self {
        require_containerd();
        assert!(std::path::Path::new(IMAGE_TAR).exists(), "{IMAGE_TAR} missing: run `bash tools/setup.sh`");
        let ns = Self { name: format!("ank-test-{test}-{}", std::process::id()) };
        let o = ns.ctr(&["images", "import", IMAGE_TAR]);
        assert!(o.status.success(), "ctr images import: {}", String::from_utf8_lossy(&o.stderr));
        ns
    }

    /// `ctr -n <namespace> args...`.
    pub fn ctr(&self, args: &[&str]) -> Output {
        Command::new("ctr").arg("-n").arg(&self.name).args(args).output().expect("run ctr")
    }

    /// The first column of `ctr -n NS <what> ls -q` (or of `ls` for tasks).
    pub fn ids(&self, what: &str) -> Vec<String> {
        let o = if what == "tasks" { self.ctr(&["tasks", "ls"]) } else { self.ctr(&[what, "ls", "-q"]) };
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let skip = usize::from(what == "tasks");
        text.lines().skip(skip).filter_map(|l| l.split_whitespace().next().map(str::to_owned)).collect()
    }

    /// `ctr tasks ls` as (id, pid, status).
    pub fn tasks(&self) -> Vec<(String, u32, String)> {
        let o = self.ctr(&["tasks", "ls"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((f.first()?.to_string(), f.get(1)?.parse().ok()?, f.get(2)?.to_string()))
            })
            .collect()
    }

    /// Removes every task, container, snapshot and image of the namespace.
    pub fn clear(&self) {
        for id in self.ids("tasks") {
            let _ = self.ctr(&["tasks", "kill", "-a", "-s", "SIGKILL", &id]);
            for _ in 0..50 {
                if self.ctr(&["tasks", "rm", &id]).status.success() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
        for id in self.ids("containers") {
            let _ = self.ctr(&["containers", "rm", &id]);
        }
        for id in self.ids("snapshots") {
            let _ = self.ctr(&["snapshots", "rm", &id]);
        }
        for id in self.ids("images") {
            let _ = self.ctr(&["images", "rm", &id]);
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        release_networks(&self.name);
        self.clear();
        // Layer snapshots of the image have parents: remove leaves first.
        for _ in 0..5 {
            if self.ids("snapshots").is_empty() {
                break;
            }
            for id in self.ids("snapshots") {
                let _ = self.ctr(&["snapshots", "rm", &id]);
            }
        }
        for blob in self.ids("content") {
            let _ = self.ctr(&["content", "rm", &blob]);
        }
        let _ = Command::new("ctr").args(["namespaces", "rm", &self.name]).output();
    }
}
