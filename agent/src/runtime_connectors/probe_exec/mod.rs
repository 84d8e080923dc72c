//! How a runtime runs one try of a probe's handler inside a container:
//! the [`ProbeExecutor`] trait a connector implements (podman's in
//! `podman/probes.rs`, containerd's in `containerd/probes.rs`), what it is
//! given ([`ProbeTarget`], [`ProbeAction`]) and returns ([`ProbeOutcome`]),
//! and the pieces the real ones share: reaching a container through its OCI
//! runtime ([`oci_exec`]) or its network namespace ([`netns`],
//! [`container`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ank_common::health_spec::{ExecAction, HttpGetAction, TcpSocketAction};
use async_trait::async_trait;

use super::WorkloadId;

pub mod container;
pub mod fake;
pub mod netns;
pub mod oci_exec;

/// Longest probe output kept in an event or a condition message.
pub const MAX_OUTPUT: usize = 200;

/// The container a probe tries, with what the executor caches about it
/// (its pid, for the network namespace) for as long as the runner lives.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub workload_id: WorkloadId,
    pub pid: Arc<Mutex<Option<u32>>>,
    /// How `exec` probes reach the container, once looked up: through its
    /// OCI runtime (`Some`), or `podman exec` (`None`).
    pub oci: Arc<Mutex<Option<Option<oci_exec::OciRuntime>>>>,
}

impl ProbeTarget {
    pub fn new(workload_id: WorkloadId) -> Self {
        Self { workload_id, pid: Arc::default(), oci: Arc::default() }
    }
}

/// The handler of one try the [`ProbeExecutor`] runs (`selfReport` is not
/// run: the runner reads the workload's last report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAction {
    Exec(ExecAction),
    HttpGet(HttpGetAction),
    TcpSocket(TcpSocketAction),
}

/// The result of one try: passed or not, and what it said (an exit code
/// and its output, an HTTP status, an error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutcome {
    pub passed: bool,
    pub output: String,
}

impl ProbeOutcome {
    pub fn pass(output: impl Into<String>) -> Self {
        Self { passed: true, output: truncate(&output.into()) }
    }

    pub fn fail(output: impl Into<String>) -> Self {
        Self { passed: false, output: truncate(&output.into()) }
    }
}

/// Runs one try of a probe against a container, within `timeout` (the
/// runner also cuts it off there).
#[async_trait]
pub trait ProbeExecutor: Send + Sync {
    async fn probe(&self, target: &ProbeTarget, action: &ProbeAction, timeout: Duration) -> ProbeOutcome;
}

/// Cuts `s` to [`MAX_OUTPUT`] characters (on a char boundary), trimmed.
pub fn truncate(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_OUTPUT) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}
