//! [`SelfReports`]: the latest health each workload reported itself over
//! its control interface (the `HealthReport` extension request), by
//! workload name. The control interface records them (a workload can
//! only report its own health: the pipe it wrote to names it); a
//! `selfReport` probe reads them: the latest report within
//! `periodSeconds` is the result of a try, none is a failure.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::ProbeOutcome;

/// Longest message a workload may send with its health, in bytes.
pub const MAX_MESSAGE: usize = 1024;

/// Why a health report was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelfReportError {
    #[error("the message has {0} bytes, more than {MAX_MESSAGE}")]
    TooLong(usize),
    #[error("the message contains control characters")]
    ControlCharacters,
}

/// One report of a workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelfReport {
    pub at: Instant,
    pub healthy: bool,
    pub message: String,
}

/// The latest report of each workload (cheap to clone).
#[derive(Debug, Clone, Default)]
pub struct SelfReports(Arc<Mutex<HashMap<String, SelfReport>>>);

impl SelfReports {
    /// Checks and records a report of `workload`.
    pub fn record(&self, workload: &str, healthy: bool, message: &str) -> Result<(), SelfReportError> {
        if message.len() > MAX_MESSAGE {
            return Err(SelfReportError::TooLong(message.len()));
        }
        if message.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
            return Err(SelfReportError::ControlCharacters);
        }
        let report = SelfReport { at: Instant::now(), healthy, message: message.to_owned() };
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(workload.to_owned(), report);
        Ok(())
    }

    pub fn latest(&self, workload: &str) -> Option<SelfReport> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(workload).cloned()
    }

    /// Forgets the reports of a deleted workload.
    pub fn forget(&self, workload: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).remove(workload);
    }

    /// The result of a `selfReport` try of `workload` now, with `period`.
    pub fn outcome(&self, workload: &str, period: Duration) -> ProbeOutcome {
        match self.latest(workload) {
            Some(r) if r.at + period >= Instant::now() => {
                let message = if r.message.is_empty() { "no message".to_owned() } else { r.message };
                if r.healthy {
                    ProbeOutcome::pass(format!("reported healthy: {message}"))
                } else {
                    ProbeOutcome::fail(format!("reported unhealthy: {message}"))
                }
            }
            _ => ProbeOutcome::fail(format!("no health report for {}s", period.as_secs())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_latest_report_within_the_period_counts_and_silence_fails() {
        let reports = SelfReports::default();
        let period = Duration::from_secs(10);
        assert_eq!(reports.outcome("app", period), ProbeOutcome::fail("no health report for 10s"));
        reports.record("app", true, "db connected").unwrap();
        assert_eq!(reports.outcome("app", period), ProbeOutcome::pass("reported healthy: db connected"));
        assert!(!reports.outcome("other", period).passed, "a report is only its own workload's");
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(reports.outcome("app", period).output, "no health report for 10s");
        reports.record("app", false, "queue full").unwrap();
        assert_eq!(reports.outcome("app", period).output, "reported unhealthy: queue full");
    }

    #[test]
    fn malformed_reports_are_refused() {
        let reports = SelfReports::default();
        assert_eq!(reports.record("app", true, &"x".repeat(2000)), Err(SelfReportError::TooLong(2000)));
        assert_eq!(reports.record("app", true, "bad\u{1b}[2J"), Err(SelfReportError::ControlCharacters));
        assert_eq!(reports.latest("app"), None);
    }
}
