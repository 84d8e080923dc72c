//! The health extension fields of a workload (not in Eclipse Ankaios; a
//! plain Ankaios manifest never sets them, and then nothing changes):
//! probes named as Kubernetes names them (`startupProbe`, `livenessProbe`,
//! `readinessProbe`), a crash-loop limit (`restartBackoff`, after Nomad's
//! `restart` block) and a health-gated update with automatic revert
//! (`update`, after Nomad's `update` block). Each is checked when a
//! manifest is applied ([`validate`]); the agent runs the probes and the
//! backoff, the server the gate.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::duration::parse_duration;

/// A probe without exactly one handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ProbeHandlerError {
    #[error("needs one of 'exec', 'httpGet', 'tcpSocket' or 'selfReport'")]
    None,
    #[error("has more than one of 'exec', 'httpGet', 'tcpSocket' and 'selfReport'")]
    Several,
}

/// A health field of a workload that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthSpecError {
    #[error("field '{field}' {error}")]
    Handler { field: &'static str, error: ProbeHandlerError },
    #[error("field '{field}.exec.command' is empty")]
    EmptyCommand { field: &'static str },
    #[error("field '{field}.{name}' must be at least 1")]
    Zero { field: &'static str, name: &'static str },
    #[error("field '{field}.successThreshold' must be 1 (only a readinessProbe may ask for more)")]
    SuccessThreshold { field: &'static str },
    /// A duration that does not parse; `reason` says why.
    #[error("field '{block}.{name}': {reason}")]
    Duration { block: &'static str, name: &'static str, reason: String },
    #[error("field 'restartBackoff.maxDelay' is shorter than 'initialDelay'")]
    MaxBelowInitial,
    #[error("field 'restartBackoff.interval' must be longer than 0s")]
    ZeroInterval,
    #[error("field 'update.minHealthyTime' must be shorter than 'healthyDeadline'")]
    GateWithinMinTime,
}

/// One probe: exactly one handler and its timing, in Kubernetes' names and
/// defaults (period 10 s, timeout 1 s, success 1, failure 3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Probe {
    /// A command run inside the container; exit code 0 is a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// An HTTP GET in the workload's network namespace; 200-399 is a success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    /// A TCP connect in the workload's network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    /// The workload reports its own health over its control interface; no
    /// report within `periodSeconds` counts as a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_report: Option<SelfReportAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecAction {
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpGetAction {
    /// The path, `/` when empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    pub port: u16,
    /// The address inside the workload's network namespace (`127.0.0.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpSocketAction {
    pub port: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelfReportAction {}

/// Which handler a probe has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    Exec,
    HttpGet,
    TcpSocket,
    SelfReport,
}

impl Probe {
    pub const DEFAULT_PERIOD: u32 = 10;
    pub const DEFAULT_TIMEOUT: u32 = 1;
    pub const DEFAULT_SUCCESS: u32 = 1;
    pub const DEFAULT_FAILURE: u32 = 3;

    /// The handler, when exactly one is set.
    pub fn kind(&self) -> Result<ProbeKind, ProbeHandlerError> {
        let set: Vec<ProbeKind> = [
            self.exec.as_ref().map(|_| ProbeKind::Exec),
            self.http_get.as_ref().map(|_| ProbeKind::HttpGet),
            self.tcp_socket.as_ref().map(|_| ProbeKind::TcpSocket),
            self.self_report.as_ref().map(|_| ProbeKind::SelfReport),
        ]
        .into_iter()
        .flatten()
        .collect();
        match set.as_slice() {
            [one] => Ok(*one),
            [] => Err(ProbeHandlerError::None),
            _ => Err(ProbeHandlerError::Several),
        }
    }

    pub fn initial_delay(&self) -> Duration {
        Duration::from_secs(self.initial_delay_seconds.unwrap_or(0).into())
    }

    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period_seconds.unwrap_or(Self::DEFAULT_PERIOD).into())
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.unwrap_or(Self::DEFAULT_TIMEOUT).into())
    }

    pub fn success_threshold(&self) -> u32 {
        self.success_threshold.unwrap_or(Self::DEFAULT_SUCCESS)
    }

    pub fn failure_threshold(&self) -> u32 {
        self.failure_threshold.unwrap_or(Self::DEFAULT_FAILURE)
    }

    pub(crate) fn validate(&self, field: &'static str) -> Result<(), HealthSpecError> {
        let kind = self.kind().map_err(|error| HealthSpecError::Handler { field, error })?;
        if kind == ProbeKind::Exec && self.exec.as_ref().is_some_and(|e| e.command.is_empty()) {
            return Err(HealthSpecError::EmptyCommand { field });
        }
        for (name, value) in [
            ("periodSeconds", self.period_seconds),
            ("timeoutSeconds", self.timeout_seconds),
            ("successThreshold", self.success_threshold),
            ("failureThreshold", self.failure_threshold),
        ] {
            if value == Some(0) {
                return Err(HealthSpecError::Zero { field, name });
            }
        }
        if field != "readinessProbe" && self.success_threshold.is_some_and(|s| s != 1) {
            return Err(HealthSpecError::SuccessThreshold { field });
        }
        Ok(())
    }
}

/// The crash-loop limit: a delay before each restart under the restart
/// policy, doubling from `initialDelay` up to `maxDelay` with jitter, reset
/// after the workload ran `resetAfter`; optionally at most `attempts`
/// restarts within `interval`, after which it stays failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestartBackoff {
    /// The first delay (`1s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay: Option<String>,
    /// The longest delay (`5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<String>,
    /// How long a run must last to start the delays over (`10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_after: Option<String>,
    /// At most this many restarts within `interval` (no limit when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// The window `attempts` counts in (`30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// [`RestartBackoff`] with its durations parsed and defaults filled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffSettings {
    pub initial_delay: Duration,
    pub max_delay: Duration,
    pub reset_after: Duration,
    pub attempts: Option<u32>,
    pub interval: Duration,
}

impl Default for BackoffSettings {
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
            attempts: None,
            interval: Duration::from_secs(1800),
        }
    }
}

impl RestartBackoff {
    /// The settings, each duration parsed (the defaults where absent).
    pub fn settings(&self) -> Result<BackoffSettings, HealthSpecError> {
        let d = BackoffSettings::default();
        let parse = |name: &'static str, v: &Option<String>, default: Duration| {
            field_duration("restartBackoff", name, v, default)
        };
        let s = BackoffSettings {
            initial_delay: parse("initialDelay", &self.initial_delay, d.initial_delay)?,
            max_delay: parse("maxDelay", &self.max_delay, d.max_delay)?,
            reset_after: parse("resetAfter", &self.reset_after, d.reset_after)?,
            attempts: self.attempts,
            interval: parse("interval", &self.interval, d.interval)?,
        };
        if s.max_delay < s.initial_delay {
            return Err(HealthSpecError::MaxBelowInitial);
        }
        if s.interval.is_zero() {
            return Err(HealthSpecError::ZeroInterval);
        }
        Ok(s)
    }
}

/// A health-gated update: after a change of the spec, the new instance must
/// become Ready within `healthyDeadline` and stay so for `minHealthyTime`;
/// with `autoRevert` the last spec that was Ready is put back otherwise.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateGate {
    /// The time the new instance has to become healthy (`5m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_deadline: Option<String>,
    /// How long it must stay Ready to count as healthy (`10s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_healthy_time: Option<String>,
    /// Put the last healthy spec back when the deadline passes (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_revert: Option<bool>,
}

/// [`UpdateGate`] parsed, with defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateSettings {
    pub healthy_deadline: Duration,
    pub min_healthy_time: Duration,
    pub auto_revert: bool,
}

impl UpdateGate {
    pub fn settings(&self) -> Result<GateSettings, HealthSpecError> {
        let parse =
            |name: &'static str, v: &Option<String>, default: Duration| field_duration("update", name, v, default);
        let s = GateSettings {
            healthy_deadline: parse("healthyDeadline", &self.healthy_deadline, Duration::from_secs(300))?,
            min_healthy_time: parse("minHealthyTime", &self.min_healthy_time, Duration::from_secs(10))?,
            auto_revert: self.auto_revert.unwrap_or(false),
        };
        if s.min_healthy_time >= s.healthy_deadline {
            return Err(HealthSpecError::GateWithinMinTime);
        }
        Ok(s)
    }
}

/// The duration `block.name` as written, or `default` when absent; an
/// error names the field.
fn field_duration(
    block: &'static str,
    name: &'static str,
    value: &Option<String>,
    default: Duration,
) -> Result<Duration, HealthSpecError> {
    match value.as_deref() {
        Some(text) => {
            parse_duration(text).map_err(|e| HealthSpecError::Duration { block, name, reason: e.to_string() })
        }
        None => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(yaml: &str) -> Probe {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn a_probe_needs_exactly_one_handler_and_positive_timing() {
        assert_eq!(probe("httpGet: {path: /ready, port: 8080}").kind(), Ok(ProbeKind::HttpGet));
        assert!(probe("periodSeconds: 2").kind().unwrap_err().to_string().contains("needs one of"));
        let two = probe("exec: {command: [true]}\ntcpSocket: {port: 1}");
        assert!(two.validate("livenessProbe").unwrap_err().to_string().contains("more than one"));
        let zero = probe("tcpSocket: {port: 1}\nperiodSeconds: 0");
        assert_eq!(
            zero.validate("livenessProbe").unwrap_err().to_string(),
            "field 'livenessProbe.periodSeconds' must be at least 1"
        );
        let empty = probe("exec: {command: []}");
        assert!(empty.validate("startupProbe").unwrap_err().to_string().contains("exec.command' is empty"));
        let many = probe("tcpSocket: {port: 1}\nsuccessThreshold: 2");
        assert!(many.validate("readinessProbe").is_ok());
        assert!(many.validate("livenessProbe").is_err());
        let p = probe("selfReport: {}");
        assert_eq!(
            (p.period(), p.timeout(), p.failure_threshold()),
            (Duration::from_secs(10), Duration::from_secs(1), 3)
        );
    }

    #[test]
    fn unknown_probe_fields_are_refused_by_name() {
        let e = serde_saphyr::from_str::<Probe>("httpGet: {port: 1}\nperiod: 2").unwrap_err().to_string();
        assert!(e.contains("period"), "{e}");
    }

    #[test]
    fn backoff_and_gate_settings_parse_with_defaults() {
        let b: RestartBackoff = serde_saphyr::from_str("initialDelay: 2s\nattempts: 5").unwrap();
        let s = b.settings().unwrap();
        assert_eq!(
            (s.initial_delay, s.max_delay, s.attempts),
            (Duration::from_secs(2), Duration::from_secs(300), Some(5))
        );
        let bad: RestartBackoff = serde_saphyr::from_str("maxDelay: soon").unwrap();
        assert!(bad.settings().unwrap_err().to_string().contains("restartBackoff.maxDelay"));
        let g: UpdateGate = serde_saphyr::from_str("healthyDeadline: 30s\nautoRevert: true").unwrap();
        let s = g.settings().unwrap();
        assert_eq!(
            (s.healthy_deadline, s.min_healthy_time, s.auto_revert),
            (Duration::from_secs(30), Duration::from_secs(10), true)
        );
        let bad: UpdateGate = serde_saphyr::from_str("healthyDeadline: 5s").unwrap();
        assert!(bad.settings().unwrap_err().to_string().contains("minHealthyTime"));
    }
}
