//! Retention of finished workloads (feature K7): how long the container
//! (podman) or pod (podman-kube) of a workload that ended and will not be
//! restarted is kept before the agent removes it, and the pending reap a
//! control loop waits for. By default it is kept for ever ([`RetainFor::Never`]),
//! as Ankaios never removes a finished workload; reaping is opt-in.
//!
//! The decisions live here as functions; the timer itself is one more
//! branch of the `WorkloadControlLoop`'s `select!` (on tokio time, so paused
//! clocks drive it in tests).

use std::time::Duration;

use ank_common::duration::format_duration;
use ank_common::execution_state::Failed;
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

/// Delay before a failed removal of a finished workload is tried again.
pub const REAP_RETRY_INTERVAL: Duration = Duration::from_secs(30);
/// How `--retain-succeeded`, `--retain-failed` and the `[retention]` keys
/// spell "keep it for ever" (their default).
pub const NEVER: &str = "never";

/// How long one kind of finished workload keeps its container: for ever
/// (Ankaios' behaviour, the default) or for a duration, then it is reaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RetainFor {
    /// Never reaped.
    #[default]
    Never,
    /// Reaped this long after the end (`0s`: at once).
    After(Duration),
}

impl RetainFor {
    /// The duration, `None` for [`RetainFor::Never`].
    pub fn duration(self) -> Option<Duration> {
        match self {
            Self::Never => None,
            Self::After(d) => Some(d),
        }
    }
}

impl std::fmt::Display for RetainFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Never => f.write_str(NEVER),
            Self::After(d) => f.write_str(&format_duration(*d)),
        }
    }
}

/// A retention that is neither `never` nor a duration; `reason` says why
/// it is no duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (or '{NEVER}' to keep finished workloads)")]
pub struct RetainForError {
    pub reason: String,
}

/// Parses `never` or a duration (`30s`, `72h`, a bare number of seconds).
pub fn parse_retain_for(text: &str) -> Result<RetainFor, RetainForError> {
    if text.trim().eq_ignore_ascii_case(NEVER) {
        return Ok(RetainFor::Never);
    }
    ank_common::duration::parse_duration(text)
        .map(RetainFor::After)
        .map_err(|e| RetainForError { reason: e.to_string() })
}

/// A config-file key holding `'never'` or a duration, for
/// `#[serde(deserialize_with = ...)]` in the `[retention]` table.
pub fn optional_retain_for<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<RetainFor>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse_retain_for(&text).map(Some).map_err(serde::de::Error::custom)
}

/// How long finished workloads are kept, per terminal state; by default
/// both for ever.
// [feature K7: retention per terminal state, opt-in]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Retention {
    /// After `Succeeded(Ok)`.
    pub succeeded: RetainFor,
    /// After `Failed(ExecFailed)` (a non-zero exit).
    pub failed: RetainFor,
}

impl Retention {
    /// Reaping switched on for both ends, after these durations.
    pub fn after(succeeded: Duration, failed: Duration) -> Self {
        Self { succeeded: RetainFor::After(succeeded), failed: RetainFor::After(failed) }
    }

    /// How long a workload that ended in `state` is kept before it is
    /// reaped, and the name of that state; `None` when it is not reaped:
    /// `state` is no end the agent reaps (it still runs, or its container
    /// is already gone) or reaping of that end is off.
    pub fn of(&self, state: &ExecutionState) -> Option<(Duration, &'static str)> {
        match state.kind {
            StateKind::Succeeded => Some((self.succeeded.duration()?, "succeeded")),
            StateKind::Failed(Failed::ExecFailed) => Some((self.failed.duration()?, "failed")),
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
        let r = Retention::after(Duration::from_secs(60), Duration::from_secs(72 * 3600));
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
        let r = Retention::after(Duration::from_secs(60), Duration::from_secs(72 * 3600));
        let lost = ExecutionState::with_info(StateKind::Failed(Failed::Lost), "container disappeared");
        assert_eq!(r.of(&lost), None);
        assert_eq!(r.of(&ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "paused")), None);
        assert_eq!(r.of(&ExecutionState::removed()), None);
        assert_eq!(r.of(&ExecutionState::succeeded()).map(|(_, s)| s), Some("succeeded"));
        assert_eq!(readable(Duration::from_secs(5)), "5s");
        assert_eq!(readable(Duration::from_millis(1500)), "1500ms");
        assert_eq!(readable(Duration::from_secs(86_400)), "24h");
    }

    #[test]
    // [test of feature K7: Ankaios never removes a finished workload; reaping is opt-in]
    fn retention_is_off_by_default_and_never_is_spelled_never() {
        let r = Retention::default();
        assert_eq!(r.of(&ExecutionState::succeeded()), None);
        assert_eq!(r.of(&ExecutionState::failed("Exit code: '3'")), None);
        assert_eq!(after_state(&r, None, &ExecutionState::succeeded()), None);
        let only_failed = Retention { failed: RetainFor::After(Duration::ZERO), ..Retention::default() };
        assert_eq!(only_failed.of(&ExecutionState::succeeded()), None);
        assert_eq!(only_failed.of(&ExecutionState::failed("x")), Some((Duration::ZERO, "failed")));
        assert_eq!(parse_retain_for("never"), Ok(RetainFor::Never));
        assert_eq!(parse_retain_for("NEVER"), Ok(RetainFor::Never));
        assert_eq!(parse_retain_for("90"), Ok(RetainFor::After(Duration::from_secs(90))));
        assert_eq!(parse_retain_for("1m"), Ok(RetainFor::After(Duration::from_secs(60))));
        let e = parse_retain_for("3x").unwrap_err().to_string();
        assert!(e.contains("unknown unit") && e.contains("'never'"), "{e}");
        assert_eq!(RetainFor::Never.to_string(), "never");
        assert_eq!(RetainFor::After(Duration::from_secs(72 * 3600)).to_string(), "3d");
    }
}
