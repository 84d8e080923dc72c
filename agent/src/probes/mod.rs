//! Probes (issue 39): the agent runs a workload's `startupProbe`,
//! `livenessProbe` and `readinessProbe` while it is Running.
//!
//! - [`thresholds`]: the pure verdict of consecutive results
//!   (`successThreshold` / `failureThreshold`).
//! - the probe runner (`workload/probe_runner.rs`, owned by the workload's
//!   control loop): one task per running container; it times the tries
//!   (`initialDelaySeconds`, `periodSeconds`, `timeoutSeconds`), gates
//!   liveness and readiness behind the startup probe, reports readiness
//!   verdicts and Unhealthy events, and tells its control loop when the
//!   container failed its liveness probe.
//! - [`ProbeExecutor`]: how one try of an `exec`, `httpGet` or `tcpSocket`
//!   handler is run, a runtime's part (`runtime_connectors/probe_exec/`;
//!   podman's in `runtime_connectors/podman/probes.rs`); [`fake`] the one
//!   of the tests (`runtime_connectors/probe_exec/fake.rs`).
//! - [`self_report`]: the health a workload reports itself over its
//!   control interface (`selfReport`).

pub use crate::runtime_connectors::probe_exec::fake;
pub mod self_report;
pub mod thresholds;

use ank_common::conditions::{Condition, ConditionStatus, ConditionType};
use ank_common::health_spec::Probe;
use ank_common::workload::WorkloadSpec;

pub use crate::runtime_connectors::probe_exec::{
    MAX_OUTPUT, ProbeAction, ProbeExecutor, ProbeOutcome, ProbeTarget, truncate,
};

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
