//! End to end of the MQTT fleet tier with the built binaries: the soak tool
//! (`tests/harness/fleet-soak.py`) in its short version, three vehicles. Each
//! vehicle is a network namespace with its own `ank-server`, `ank-agent`
//! and the `ank-fleet-connector` workload (image built by
//! `tools/build-fleet-image.sh` from the binary under test), behind a
//! mosquitto broker with TLS and an ACL in a namespace of its own. The tool
//! checks the broker's ACL, rolls out v1, sees a broken rollout halt without
//! changing anything, rolls out v2 in three waves while the broker restarts,
//! three links are cut and one connector is killed, and then that every
//! vehicle runs v2 and is Ready, no rollout was applied twice and the
//! fleet's view equals each vehicle's own state. It cleans up after itself.
//!
//! Fails (never skips) when root, podman, mosquitto, mosquitto-clients or a
//! binary is missing, naming what to install or build.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The soak's own checks that must pass.
const CHECKS: [&str; 14] = [
    "acl-positive-publish",
    "acl-positive-read",
    "acl-cross-publish-refused",
    "acl-cross-read-refused",
    "acl-own-desired-write-refused",
    "vehicles-visible",
    "rollout-v1",
    "halted-wave",
    "rollout-v2",
    "connector-restarted",
    "all-on-v2-ready",
    "no-duplicate-apply",
    "no-lost-status",
    "unhealthy-wave-halted",
];

/// Longest run before the tool is stopped (it cleans up on SIGTERM); the
/// quick version takes about two minutes.
const LIMIT: Duration = Duration::from_secs(330);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("repository root").to_path_buf()
}

fn require_tools() {
    ank_tests::require_podman();
    for (tool, package) in [
        ("/usr/sbin/mosquitto", "mosquitto"),
        ("/usr/bin/mosquitto_pub", "mosquitto-clients"),
        ("/usr/bin/mosquitto_sub", "mosquitto-clients"),
    ] {
        assert!(Path::new(tool).exists(), "{tool} not found: install {package} with `bash tools/setup.sh`");
    }
    let python = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(python, "python3 not found: the soak tool tests/harness/fleet-soak.py needs it");
    let root = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    assert!(root.unwrap_or(false), "the fleet soak makes network namespaces: run the tests as root");
}

#[test]
fn e2e_fleet_soak_with_three_vehicles_passes_every_check() {
    require_tools();
    // Panics with a build hint when a binary is missing.
    for name in ["ank-server", "ank-agent", "ank", "ank-certs", "ank-fleet", "ank-fleet-connector"] {
        ank_tests::binaries::bin(name);
    }
    let bin_dir = ank_tests::binaries::bin_dir();
    let out = tempfile::NamedTempFile::new().expect("temporary output file");
    let mut child = Command::new("python3")
        .arg(repo_root().join("tests/harness/fleet-soak.py"))
        .args(["--vehicles", "3", "--quick", "--bin-dir"])
        .arg(&bin_dir)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stdout(out.reopen().expect("output file"))
        .stderr(out.reopen().expect("output file"))
        .spawn()
        .expect("start python3 tests/harness/fleet-soak.py");
    let start = Instant::now();
    let mut stopped = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the soak") {
            break status;
        }
        if !stopped && start.elapsed() > LIMIT {
            ank_tests::signal(&child, "TERM");
            stopped = true;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let text = std::fs::read_to_string(out.path()).expect("soak output");
    eprintln!("{text}");
    assert!(!stopped, "the soak did not finish within {LIMIT:?} and was stopped");
    let failed: Vec<&str> = text.lines().filter(|l| l.starts_with("FAIL ")).collect();
    assert!(failed.is_empty(), "failed checks:\n{}", failed.join("\n"));
    for check in CHECKS {
        let prefix = format!("PASS {check}:");
        assert!(text.lines().any(|l| l.starts_with(&prefix)), "no '{prefix}' line in the soak's output");
    }
    assert!(status.success(), "fleet-soak.py exited {status}");
    eprintln!("fleet soak (3 vehicles, quick) took {:?}", start.elapsed());
}
