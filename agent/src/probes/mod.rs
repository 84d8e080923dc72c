//! Probes (issue 39): the agent runs a workload's `startupProbe`,
//! `livenessProbe` and `readinessProbe` while it is Running.
//!
//! - [`thresholds`]: the pure verdict of consecutive results
//!   (`successThreshold` / `failureThreshold`).
//! - [`runner`]: one task per running container; it times the tries
//!   (`initialDelaySeconds`, `periodSeconds`, `timeoutSeconds`), gates
//!   liveness and readiness behind the startup probe, reports readiness
//!   verdicts and Unhealthy events, and tells its control loop when the
//!   container failed its liveness probe.
//! - [`ProbeExecutor`]: how one try of an `exec`, `httpGet` or `tcpSocket`
//!   handler is run; [`podman`] is the real one (`podman exec`, and a
//!   socket connected in the container's network namespace by [`netns`]),
//!   [`fake`] the one of the tests.
//! - [`self_report`]: the health a workload reports itself over its
//!   control interface (`selfReport`).

pub mod container;
pub mod containerd;
pub mod fake;
pub mod netns;
pub mod oci_exec;
pub mod podman;
pub mod runner;
pub mod self_report;
pub mod thresholds;

#[cfg(test)]
mod runner_tests;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ank_common::conditions::{Condition, ConditionStatus, ConditionType};
use ank_common::health_spec::{ExecAction, HttpGetAction, Probe, TcpSocketAction};
use ank_common::workload::WorkloadSpec;
use async_trait::async_trait;

use crate::runtime_connectors::WorkloadId;

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

/// The readiness of a running instance with a readiness probe, as its
/// Available condition shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// No verdict yet (or the startup probe has not passed).
    Unknown,
    Ready,
    /// The probe failed `failureThreshold` times; its last output.
    NotReady(String),
}

impl Readiness {
    /// The Available condition of a Running instance with this readiness.
    pub fn available(&self, generation: u64) -> Condition {
        let (status, reason, message) = match self {
            Readiness::Unknown => {
                (ConditionStatus::Unknown, "ReadinessProbePending", "no verdict of the readinessProbe yet")
            }
            Readiness::Ready => (ConditionStatus::True, "Running", "readinessProbe passed"),
            Readiness::NotReady(output) => (ConditionStatus::False, "ReadinessProbeFailed", output.as_str()),
        };
        Condition::new(ConditionType::Available, status, generation, reason, message)
    }
}

/// The probes of a workload spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeSet {
    pub startup: Option<Probe>,
    pub liveness: Option<Probe>,
    pub readiness: Option<Probe>,
}

impl ProbeSet {
    pub fn of(spec: &WorkloadSpec) -> Self {
        let w = &spec.workload;
        Self {
            startup: w.startup_probe.clone(),
            liveness: w.liveness_probe.clone(),
            readiness: w.readiness_probe.clone(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.startup.is_none() && self.liveness.is_none() && self.readiness.is_none()
    }

    /// Whether any probe is a `selfReport` one (the workload then gets a
    /// control interface even without allow rules).
    pub fn wants_self_report(&self) -> bool {
        [&self.startup, &self.liveness, &self.readiness].into_iter().flatten().any(|p| p.self_report.is_some())
    }
}

/// Cuts `s` to [`MAX_OUTPUT`] characters (on a char boundary), trimmed.
pub fn truncate(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(MAX_OUTPUT) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}
