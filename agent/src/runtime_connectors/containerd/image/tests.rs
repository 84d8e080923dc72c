//! Tests of [`Images`] against the real containerd (tools/setup.sh starts
//! it): each in a namespace of its own, with busybox imported by `ctr`,
//! the namespace removed afterwards by a guard. A containerd that does not
//! answer fails them.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{ImageError, Images};

const SOCKET: &str = "/run/containerd/containerd.sock";
const BUSYBOX_TAR: &str = "/var/tmp/ankaios-busybox.tar";
const BUSYBOX: &str = "localhost/busybox:latest";

/// Runs `ctr -n NS args…`; its stdout, or a panic with its stderr.
pub(super) fn ctr(namespace: &str, args: &[&str]) -> String {
    let output = Command::new("ctr")
        .arg("-n")
        .arg(namespace)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ctr could not be run (tools/setup.sh installs it): {e}"));
    assert!(output.status.success(), "ctr -n {namespace} {args:?} failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A namespace of this test's own, removed with all in it on drop.
pub(super) struct TestNamespace(pub(super) String);

impl TestNamespace {
    pub(super) fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("ank-test-img-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        TestNamespace(name)
    }

    pub(super) fn import_busybox(&self) {
        ctr(&self.0, &["images", "import", BUSYBOX_TAR]);
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let run = |args: &[&str]| {
            Command::new("ctr")
                .arg("-n")
                .arg(&self.0)
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let list = |args: &[&str]| -> Vec<String> {
            run(args).lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
        };
        for _ in 0..5 {
            for lease in list(&["leases", "ls", "-q"]) {
                run(&["leases", "rm", &lease]);
            }
            let images = list(&["images", "ls", "-q"]);
            if !images.is_empty() {
                let mut args = vec!["images", "rm", "--sync"];
                args.extend(images.iter().map(String::as_str));
                run(&args);
            }
            // Children before parents: the first column is the key.
            for line in list(&["snapshots", "ls"]).iter().skip(1).rev() {
                if let Some(key) = line.split_whitespace().next() {
                    run(&["snapshots", "rm", key]);
                }
            }
            for digest in list(&["content", "ls", "-q"]) {
                run(&["content", "rm", &digest]);
            }
            let removed =
                Command::new("ctr").args(["namespaces", "rm", &self.0]).output().is_ok_and(|o| o.status.success());
            let gone = !run(&[]).is_empty() || !list(&["namespaces", "ls", "-q"]).contains(&self.0);
            if removed || gone {
                return;
            }
        }
        eprintln!("namespace {} could not be removed", self.0);
    }
}

/// [`Images`] of `namespace` on the real containerd.
pub(super) async fn images(namespace: &TestNamespace) -> Images {
    let channel = containerd_client::connect(SOCKET)
        .await
        .unwrap_or_else(|e| panic!("containerd does not answer on {SOCKET} (run tools/setup.sh): {e}"));
    Images::new(channel, &namespace.0).unwrap_or_else(|e| panic!("{e}"))
}

/// What `ctr` says of busybox in `namespace`: (target digest, config JSON).
fn busybox_facts(namespace: &str) -> (String, serde_json::Value) {
    let listing = ctr(namespace, &["images", "ls"]);
    let line = listing.lines().find(|l| l.starts_with(BUSYBOX)).unwrap_or_else(|| panic!("no {BUSYBOX} in {listing}"));
    let target = line.split_whitespace().nth(2).unwrap_or_default().to_string();
    let manifest: serde_json::Value =
        serde_json::from_str(&ctr(namespace, &["content", "get", &target])).unwrap_or_default();
    let config_digest = manifest["config"]["digest"].as_str().unwrap_or_default().to_string();
    let config = serde_json::from_str(&ctr(namespace, &["content", "get", &config_digest])).unwrap_or_default();
    (target, config)
}

pub(super) fn strings(value: &serde_json::Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default()
}

pub(super) fn snapshot_keys(namespace: &str) -> Vec<String> {
    ctr(namespace, &["snapshots", "ls"])
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[tokio::test]
async fn containerd_resolves_an_imported_image() {
    let ns = TestNamespace::new();
    ns.import_busybox();
    let images = images(&ns).await;
    let (target, config) = busybox_facts(&ns.0);

    let resolved = images.resolve("localhost/busybox").await;
    let resolved = resolved.unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(resolved.target_digest, target);
    // This busybox was imported from a tarball: its config is empty
    // (tests_rich.rs has an image with every field).
    assert_eq!(resolved.env, strings(&config["config"]["Env"]));
    assert_eq!(resolved.cmd, strings(&config["config"]["Cmd"]));
    assert_eq!(resolved.entrypoint, strings(&config["config"]["Entrypoint"]));
    let diff_ids = strings(&config["rootfs"]["diff_ids"]);
    assert_eq!(resolved.chain_id, super::manifest::chain_ids(&diff_ids)[diff_ids.len() - 1]);
    // ctr's import unpacked it under the same chain id.
    assert!(snapshot_keys(&ns.0).contains(&resolved.chain_id));
    // The full name resolves the same.
    let again = images.resolve(BUSYBOX).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, resolved);
}

#[tokio::test]
async fn containerd_unpacks_an_image_whose_snapshot_was_removed() {
    let ns = TestNamespace::new();
    ns.import_busybox();
    let images = images(&ns).await;
    let chain_id = images.resolve(BUSYBOX).await.unwrap_or_else(|e| panic!("{e}")).chain_id;
    ctr(&ns.0, &["snapshots", "rm", &chain_id]);
    assert!(!snapshot_keys(&ns.0).contains(&chain_id));

    let resolved = images.resolve(BUSYBOX).await.unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(resolved.chain_id, chain_id);
    let listing = ctr(&ns.0, &["snapshots", "ls"]);
    assert!(listing.lines().any(|l| l.starts_with(&chain_id) && l.contains("Committed")), "{listing}");
    // Only the committed one: no temporary snapshot is left.
    assert_eq!(snapshot_keys(&ns.0), vec![chain_id.clone()]);
    // Its files are there: busybox's sh in a view of it.
    let mounts = ctr(&ns.0, &["snapshots", "view", "--mounts", "ank-view", &chain_id]);
    let source = serde_json::from_str::<serde_json::Value>(&mounts).unwrap_or_default()[0]["Source"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(std::path::Path::new(&source).join("bin/sh").exists(), "{mounts}");
    // ctr made the view under a lease of its own: it may be gone already.
    let _ = Command::new("ctr").args(["-n", &ns.0, "snapshots", "rm", "ank-view"]).output();
    // No lease of ours outlives the resolve.
    assert_eq!(ctr(&ns.0, &["leases", "ls", "-q"]).trim(), "");
}

#[tokio::test]
async fn containerd_resolves_the_same_image_twice_at_once() {
    let ns = TestNamespace::new();
    ns.import_busybox();
    let images = images(&ns).await;
    let chain_id = images.resolve(BUSYBOX).await.unwrap_or_else(|e| panic!("{e}")).chain_id;
    ctr(&ns.0, &["snapshots", "rm", &chain_id]);

    let (first, second) = tokio::join!(images.resolve(BUSYBOX), images.resolve("localhost/busybox"));

    let first = first.unwrap_or_else(|e| panic!("first: {e}"));
    let second = second.unwrap_or_else(|e| panic!("second: {e}"));
    assert_eq!(first, second);
    assert_eq!(snapshot_keys(&ns.0), vec![chain_id]);
}

#[tokio::test]
async fn containerd_a_missing_image_is_a_clear_error() {
    let ns = TestNamespace::new();
    let images = images(&ns).await;
    // Nothing listens on port 9 of this machine: the pull fails at once.
    let error = images.resolve("localhost:9/nope").await.err();

    let Some(error @ ImageError::NotFound { .. }) = error else {
        panic!("expected NotFound, got {error:?}");
    };
    let message = error.to_string();
    let expected = format!(
        "image 'localhost:9/nope:latest' is not in containerd's namespace '{}' and could not be pulled: ",
        ns.0
    );
    assert!(message.starts_with(&expected), "{message}");
    // Why, down to the refused connection.
    assert!(message.contains("onnection refused"), "{message}");
}
