//! Helpers shared by the integration and end-to-end suites: a test
//! commander speaking the gRPC protocol to an in-process server, and a
//! cluster of the built binaries (`ank-server`, `ank-agent`, `ank`) with
//! real podman, cleaned up on drop, optionally on two test hosts in
//! network namespaces; workloads made on podman as Eclipse Ankaios' agent
//! makes them, for the takeover tests; a power cut of one agent's device
//! and what podman and /proc say about its containers afterwards.

pub mod adversary;
pub mod ankaios_podman;
pub mod binaries;
pub mod commander;
pub mod container_facts;
pub mod containerd;
pub mod doctest;
pub mod inprocess;
pub mod netns;
pub mod power_cut;

/// Panics with a clear message unless `podman` is on PATH: real-podman
/// tests fail, never skip, when it is missing.
pub fn require_podman() {
    let found = std::process::Command::new("podman").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(
        found,
        "podman not found or not working: run `bash tools/setup.sh` (installs podman, runc, busybox-static and the local busybox image)"
    );
}

/// Sends `SIG<name>` (e.g. "TERM") to a child process with `kill(1)`.
pub fn signal(child: &std::process::Child, name: &str) {
    let ok = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(child.id().to_string())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -{name} {} failed", child.id());
}

/// Stops `child` with SIGTERM, as systemd does, and returns how it exited;
/// panics if it is still running after `limit` (polled every 50 ms).
pub fn terminate(mut child: std::process::Child, limit: std::time::Duration) -> std::process::ExitStatus {
    signal(&child, "TERM");
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return status;
        }
        assert!(start.elapsed() < limit, "pid {} did not stop within {limit:?} after SIGTERM", child.id());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Polls `check` every 20 ms until it returns `Some`, for at most `limit`
/// (on the tokio clock); panics saying what never happened. The one way
/// the in-process suites wait for something to happen.
pub async fn eventually<T>(what: &str, limit: std::time::Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Polls `f` every 100 ms until it returns `Some`, for at most `limit`;
/// panics saying what never happened. The wait of the end-to-end tests.
pub fn poll<T>(limit: std::time::Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Polls `deviations` every 100 ms until it finds none, for at most
/// `limit`; panics with `what` and the deviations of the last poll.
pub fn poll_until_none(limit: std::time::Duration, what: &str, mut deviations: impl FnMut() -> Vec<String>) {
    let start = std::time::Instant::now();
    loop {
        let found = deviations();
        if found.is_empty() {
            return;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}; still:\n  {}", found.join("\n  "));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// The typed new state of an update request written as a JSON tree.
pub fn typed_state(tree: serde_json::Value) -> Box<ank_common::convert::PartialCompleteState> {
    Box::new(ank_common::convert::PartialCompleteState::from_json(&tree).expect("a valid state"))
}
