//! A test of [`super::Images`] against the real containerd with an image
//! made here: an OCI archive of an index (amd64 and arm64 manifests) of two
//! layers (busybox's and a gzipped one with a file of its own) and a config
//! with every field, imported by `ctr` without unpacking.

use std::path::Path;
use std::process::Command;

use sha2::{Digest, Sha256};

use super::tests::{TestNamespace, ctr, images, snapshot_keys};

const RICH: &str = "localhost/ank-rich:1";

fn digest(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

/// Writes `data` into the layout's blobs; its descriptor's JSON.
fn blob(dir: &Path, media_type: &str, data: &[u8]) -> serde_json::Value {
    let d = digest(data);
    let hex = d.trim_start_matches("sha256:");
    std::fs::write(dir.join("blobs/sha256").join(hex), data).unwrap_or_else(|e| panic!("{e}"));
    serde_json::json!({"mediaType": media_type, "digest": d, "size": data.len()})
}

fn run(command: &mut Command) {
    let status = command.status().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(status.success(), "{command:?} failed");
}

/// The archive in `dir`; the diff ids of its two layers.
fn make_archive(ns: &str, dir: &Path) -> (std::path::PathBuf, [String; 2]) {
    let layout = dir.join("layout");
    std::fs::create_dir_all(layout.join("blobs/sha256")).unwrap_or_else(|e| panic!("{e}"));
    // Layer 0: busybox's (an uncompressed tar: its digest is its diff id).
    let busybox_config: serde_json::Value =
        serde_json::from_str(&ctr(ns, &["content", "get", &busybox_config_digest(ns)])).unwrap_or_default();
    let diff0 = busybox_config["rootfs"]["diff_ids"][0].as_str().unwrap_or_default().to_string();
    let layer0_data = Command::new("ctr")
        .args(["-n", ns, "content", "get", &diff0])
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
        .stdout;
    // Layer 1: etc/ank-hello, gzipped.
    let files = dir.join("files");
    std::fs::create_dir_all(files.join("etc")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(files.join("etc/ank-hello"), "hello\n").unwrap_or_else(|e| panic!("{e}"));
    run(Command::new("tar").arg("-C").arg(&files).arg("-cf").arg(dir.join("l1.tar")).arg("etc"));
    let diff1 = digest(&std::fs::read(dir.join("l1.tar")).unwrap_or_default());
    run(Command::new("gzip").arg("-n").arg(dir.join("l1.tar")));
    let layer1_gz = std::fs::read(dir.join("l1.tar.gz")).unwrap_or_default();

    let layer0 = blob(&layout, "application/vnd.oci.image.layer.v1.tar", &layer0_data);
    let layer1 = blob(&layout, "application/vnd.oci.image.layer.v1.tar+gzip", &layer1_gz);
    let config = serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {
            "Env": ["PATH=/bin", "GREETING=hi there"],
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["cat /etc/ank-hello"],
            "User": "1000:1000",
            "WorkingDir": "/tmp",
            "Labels": {"b": "2", "a": "1"}
        },
        "rootfs": {"type": "layers", "diff_ids": [diff0, diff1]}
    });
    let config = blob(&layout, "application/vnd.oci.image.config.v1+json", config.to_string().as_bytes());
    let manifest = |arch: &str| {
        let m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": config, "layers": [layer0, layer1],
            "annotations": {"for": arch}
        });
        blob(&layout, "application/vnd.oci.image.manifest.v1+json", m.to_string().as_bytes())
    };
    let mut arm64 = manifest("arm64");
    arm64["platform"] = serde_json::json!({"os": "linux", "architecture": "arm64", "variant": "v8"});
    let mut amd64 = manifest("amd64");
    amd64["platform"] = serde_json::json!({"os": "linux", "architecture": "amd64"});
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [arm64, amd64]
    });
    let mut index = blob(&layout, "application/vnd.oci.image.index.v1+json", index.to_string().as_bytes());
    index["annotations"] =
        serde_json::json!({"io.containerd.image.name": RICH, "org.opencontainers.image.ref.name": "1"});
    let top = serde_json::json!({"schemaVersion": 2, "manifests": [index]});
    std::fs::write(layout.join("index.json"), top.to_string()).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(layout.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap_or_else(|e| panic!("{e}"));
    let archive = dir.join("rich.tar");
    run(Command::new("tar").arg("-C").arg(&layout).arg("-cf").arg(&archive).args([
        "oci-layout",
        "index.json",
        "blobs",
    ]));
    (archive, [diff0, diff1])
}

fn busybox_config_digest(ns: &str) -> String {
    let listing = ctr(ns, &["images", "ls"]);
    let target = listing
        .lines()
        .find(|l| l.starts_with("localhost/busybox:latest"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_default()
        .to_string();
    let manifest: serde_json::Value = serde_json::from_str(&ctr(ns, &["content", "get", &target])).unwrap_or_default();
    manifest["config"]["digest"].as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn containerd_resolves_and_unpacks_an_index_of_two_layers() {
    let ns = TestNamespace::new();
    ns.import_busybox();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (archive, [diff0, diff1]) = make_archive(&ns.0, dir.path());
    // No snapshot at all: the busybox one goes, the archive is not unpacked.
    for key in snapshot_keys(&ns.0) {
        ctr(&ns.0, &["snapshots", "rm", &key]);
    }
    let archive = archive.to_string_lossy().into_owned();
    ctr(&ns.0, &["images", "import", "--no-unpack", "--all-platforms", &archive]);
    let images = images(&ns).await;

    let resolved = images.resolve(RICH).await.unwrap_or_else(|e| panic!("{e}"));

    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(resolved.env, strings(&["PATH=/bin", "GREETING=hi there"]));
    assert_eq!(resolved.entrypoint, strings(&["/bin/sh", "-c"]));
    assert_eq!(resolved.cmd, strings(&["cat /etc/ank-hello"]));
    assert_eq!(resolved.user, "1000:1000");
    assert_eq!(resolved.working_dir, "/tmp");
    let labels = [("a", "1"), ("b", "2")].map(|(k, v)| (k.to_string(), v.to_string()));
    assert_eq!(resolved.labels, labels.to_vec());
    // The chain id as the OCI image spec defines it, computed here.
    let chain1 = digest(format!("{diff0} {diff1}").as_bytes());
    assert_eq!(resolved.chain_id, chain1);
    let listing = ctr(&ns.0, &["images", "ls"]);
    let target = listing.lines().find(|l| l.starts_with(RICH)).and_then(|l| l.split_whitespace().nth(2));
    assert_eq!(Some(resolved.target_digest.as_str()), target, "{listing}");
    // Both layers unpacked, the second on the first.
    let snapshots = ctr(&ns.0, &["snapshots", "ls"]);
    assert!(snapshots.lines().any(|l| l.starts_with(&diff0)), "{snapshots}");
    assert!(
        snapshots.lines().any(|l| l.starts_with(&chain1) && l.contains(&diff0) && l.contains("Committed")),
        "{snapshots}"
    );
    assert_eq!(snapshot_keys(&ns.0).len(), 2, "{snapshots}");
    // The config keeps the top snapshot from the garbage collector.
    let content = ctr(&ns.0, &["content", "ls"]);
    assert!(content.contains(&format!("containerd.io/gc.ref.snapshot.overlayfs={chain1}")), "{content}");
    // The second layer's file is in the top snapshot.
    let mounts = ctr(&ns.0, &["snapshots", "view", "--mounts", "ank-view", &chain1]);
    let view: serde_json::Value = serde_json::from_str(&mounts).unwrap_or_default();
    let options = view[0]["Options"].to_string();
    // ctr made the view under a lease of its own: it may be gone already.
    let _ = Command::new("ctr").args(["-n", &ns.0, "snapshots", "rm", "ank-view"]).output();
    let lowers = options.split("lowerdir=").nth(1).unwrap_or_default();
    let upper_of_layer1 = lowers.split([':', '"']).next().unwrap_or_default();
    assert!(Path::new(upper_of_layer1).join("etc/ank-hello").exists(), "{mounts}");
}
