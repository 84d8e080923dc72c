//! Retention of finished workloads (feature K7): how long the container
//! (podman) or pod (podman-kube) of a workload that ended and will not be
//! restarted is kept before the agent removes it, and the pending reap a
//! control loop waits for.
//!
//! The decisions live here as functions; the timer itself is one more
//! branch of the `WorkloadControlLoop`'s `select!` (on tokio time, so paused
//! clocks drive it in tests).

use std::time::Duration;

use ank_common::duration::format_duration;
use ank_common::execution_state::Failed;
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

/// Default time a succeeded workload is kept (as in tackle2-hub).
pub const DEFAULT_RETAIN_SUCCEEDED: Duration = Duration::from_secs(60);
/// Default time a failed workload is kept, for post-mortems (as in tackle2-hub).
pub const DEFAULT_RETAIN_FAILED: Duration = Duration::from_secs(72 * 3600);
/// Delay before a failed removal of a finished workload is tried again.
pub const REAP_RETRY_INTERVAL: Duration = Duration::from_secs(30);

/// How long finished workloads are kept, per terminal state.
// [feature K7: retention per terminal state]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// After `Succeeded(Ok)`.
    pub succeeded: Duration,
    /// After `Failed(ExecFailed)` (a non-zero exit).
    pub failed: Duration,
}

impl Default for Retention {
    /// 1 minute after success, 72 hours after a failure.
    fn default() -> Self {
        Self { succeeded: DEFAULT_RETAIN_SUCCEEDED, failed: DEFAULT_RETAIN_FAILED }
    }
}

impl Retention {
    /// How long a workload that ended in `state` is kept, and the name of
    /// that state; `None` when `state` is no end the agent reaps (it still
    /// runs, or its container is already gone).
    pub fn of(&self, state: &ExecutionState) -> Option<(Duration, &'static str)> {
        match state.kind {
            StateKind::Succeeded => Some((self.succeeded, "succeeded")),
            StateKind::Failed(Failed::ExecFailed) => Some((self.failed, "failed")),
            _ => None,
        }
    }
}

/// A removal of a finished workload the control loop waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingReap {
    /// When the container is removed.
    pub at: Instant,
    /// The reason of the `Reaped` event, e.g. "retention succeeded 1m".
    pub reason: String,
}

/// The pending reap after the control loop reported `state` and did not
/// restart the workload: a final state keeps an earlier pending reap (a
/// reconcile repeating the state does not postpone it) or starts one; any
/// other state calls it off (the workload runs again, or it is gone).
// [feature K7: the retention timer starts when a workload ends for good]
pub fn after_state(retention: &Retention, pending: Option<PendingReap>, state: &ExecutionState) -> Option<PendingReap> {
    let (keep_for, end) = retention.of(state)?;
    Some(pending.unwrap_or_else(|| PendingReap {
        at: Instant::now() + keep_for,
        reason: format!("retention {end} {}", readable(keep_for)),
    }))
}

/// Sleeps until `at`; forever without one (a `select!` branch that never fires).
pub async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A duration as written in the config: whole days as hours ("72h").
fn readable(d: Duration) -> String {
    let text = format_duration(d);
    match text.strip_suffix('d').and_then(|days| days.parse::<u64>().ok()) {
        Some(days) => format!("{}h", days * 24),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::execution_state::Pending;

    #[tokio::test(start_paused = true)]
    // [test of feature K7]
    async fn retention_starts_at_a_final_state_keeps_the_first_deadline_and_stops_when_it_runs_again() {
        let r = Retention::default();
        let first = after_state(&r, None, &ExecutionState::succeeded()).expect("a reap after success");
        assert_eq!(first.at, Instant::now() + Duration::from_secs(60));
        assert_eq!(first.reason, "retention succeeded 1m");
        tokio::time::advance(Duration::from_secs(30)).await;
        let again = after_state(&r, Some(first.clone()), &ExecutionState::succeeded());
        assert_eq!(again, Some(first.clone()), "a repeated state does not postpone the reap");
        assert_eq!(after_state(&r, Some(first.clone()), &ExecutionState::running()), None);
        let starting = ExecutionState::new(StateKind::Pending(Pending::Starting));
        assert_eq!(after_state(&r, Some(first), &starting), None);
        let failed = after_state(&r, None, &ExecutionState::failed("Exit code: '3'")).expect("a reap after failure");
        assert_eq!(failed.at, Instant::now() + Duration::from_secs(72 * 3600));
        assert_eq!(failed.reason, "retention failed 72h");
    }

    #[test]
    // [test of feature K7]
    fn retention_does_not_reap_lost_or_unknown_workloads() {
        let r = Retention::default();
        let lost = ExecutionState::with_info(StateKind::Failed(Failed::Lost), "container disappeared");
        assert_eq!(r.of(&lost), None);
        assert_eq!(r.of(&ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "paused")), None);
        assert_eq!(r.of(&ExecutionState::removed()), None);
        let custom = Retention { succeeded: Duration::from_secs(5), failed: Duration::from_millis(1500) };
        assert_eq!(r.of(&ExecutionState::succeeded()).map(|(_, s)| s), Some("succeeded"));
        assert_eq!(readable(custom.succeeded), "5s");
        assert_eq!(readable(custom.failed), "1500ms");
        assert_eq!(readable(Duration::from_secs(86_400)), "24h");
    }
}
