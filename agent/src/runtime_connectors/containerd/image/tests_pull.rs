//! A test of pulling against a real registry on this machine: the registry
//! v2 server of Debian's `docker-registry` package on a loopback port
//! (plain http, as [`super::pull`] allows for local registries), busybox
//! pushed into it by podman, pulled and unpacked by [`super::Images`] into
//! the real containerd.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use super::tests::{TestNamespace, ctr, images, snapshot_keys};

/// A registry of this test's own, stopped on drop.
struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free port: {e}"));
        let config = format!(
            "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry could not be started (tools/setup.sh installs it): {e}"));
        let registry = Registry { child, port, _dir: dir };
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(address).is_err() {
            assert!(Instant::now() < deadline, "docker-registry does not listen on {address}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        registry
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn containerd_pulls_an_image_from_a_local_registry() {
    let registry = Registry::start().await;
    let remote = format!("localhost:{}/ank/busybox", registry.port);
    let status = Command::new("podman")
        .args(["push", "--quiet", "--tls-verify=false", "localhost/busybox:latest"])
        .arg(format!("{remote}:latest"))
        .status()
        .unwrap_or_else(|e| panic!("podman could not be run: {e}"));
    assert!(status.success(), "podman push to {remote} failed");
    let ns = TestNamespace::new();
    let images = images(&ns).await;

    let resolved = images.resolve(&remote).await.unwrap_or_else(|e| panic!("{e}"));

    let name = format!("{remote}:latest");
    check_pulled(&ns.0, &name, &resolved.target_digest, &resolved.chain_id, 3);
    // Resolving again finds it (the registry is gone by then).
    drop(registry);
    let again = images.resolve(&remote).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, resolved);
}

/// The image record `name` targets `target`; the blobs (`blobs` of them)
/// and the snapshot `chain_id` are kept by their labels through a
/// synchronous garbage collection; no lease is left.
fn check_pulled(ns: &str, name: &str, target: &str, chain_id: &str, blobs: usize) {
    let listing = ctr(ns, &["images", "ls"]);
    let listed = listing.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(2));
    assert_eq!(listed, Some(target), "{listing}");
    assert_eq!(snapshot_keys(ns), vec![chain_id.to_string()]);
    let content = ctr(ns, &["content", "ls"]);
    assert!(content.contains("containerd.io/gc.ref.content.config=sha256:"), "{content}");
    assert!(content.contains("containerd.io/gc.ref.content.l.0=sha256:"), "{content}");
    let snapshot_label = format!("containerd.io/gc.ref.snapshot.overlayfs={chain_id}");
    assert!(content.contains(&snapshot_label), "{content}");
    assert_eq!(ctr(ns, &["leases", "ls", "-q"]).trim(), "");
    let lease = ctr(ns, &["leases", "create"]);
    ctr(ns, &["leases", "rm", "--sync", lease.trim()]);
    assert_eq!(ctr(ns, &["content", "ls", "-q"]).lines().count(), blobs, "{content}");
    assert_eq!(snapshot_keys(ns), vec![chain_id.to_string()]);
}

#[tokio::test]
async fn containerd_pulls_an_index_from_a_local_registry() {
    let registry = Registry::start().await;
    let remote = format!("localhost:{}/ank/list:1", registry.port);
    // An OCI index with busybox's manifest, made and pushed by podman.
    let list = format!("localhost/ank-test-list-{}", std::process::id());
    let podman =
        |args: &[&str]| Command::new("podman").args(args).stdout(Stdio::null()).status().is_ok_and(|s| s.success());
    let pushed = podman(&["manifest", "create", &list])
        && podman(&["manifest", "add", &list, "containers-storage:localhost/busybox:latest"])
        && podman(&["manifest", "push", "--all", "--tls-verify=false", &list, &format!("docker://{remote}")]);
    podman(&["manifest", "rm", &list]);
    assert!(pushed, "podman could not push an index to {remote}");
    let ns = TestNamespace::new();
    let images = images(&ns).await;

    let resolved = images.resolve(&remote).await.unwrap_or_else(|e| panic!("{e}"));

    let listing = ctr(&ns.0, &["images", "ls"]);
    assert!(listing.contains("application/vnd.oci.image.index.v1+json"), "{listing}");
    let content = ctr(&ns.0, &["content", "ls"]);
    assert!(content.contains("containerd.io/gc.ref.content.m.0=sha256:"), "{content}");
    // Index, manifest, config, layer.
    check_pulled(&ns.0, &remote, &resolved.target_digest, &resolved.chain_id, 4);
}
