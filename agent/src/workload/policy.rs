//! The control loop's decisions, apart from its mechanism: how often and
//! how fast a failed create is retried, which failures are final, when an
//! exited workload is restarted (which observation becomes which state is
//! the connectors' word: `Observed::into_state`).

use std::time::Duration;

use ank_common::execution_state::{Failed, Pending};
use ank_common::workload::{RestartPolicy, Workload, WorkloadSpec};
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use crate::runtime_connectors::RuntimeError;

/// Limits of the create retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first failed create.
    // [impl->swdd~agent-workload-control-loop-limits-retry-attempts~1]
    pub max_retries: u32,
    /// Delay before each retry.
    // [impl->swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1]
    pub interval: Duration,
}

impl Default for RetryPolicy {
    /// 20 retries, one per second, as the Ankaios design says.
    fn default() -> Self {
        Self { max_retries: 20, interval: Duration::from_secs(1) }
    }
}

/// What to do after a failed create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterCreateFailure {
    /// Retry at `at`, reporting `report` (only for the first failure, so that
    /// users do not see the state flicker on every attempt).
    Retry { at: Instant, report: Option<ExecutionState> },
    /// Give up with this state.
    GiveUp(ExecutionState),
}

/// Decides about a failed create after `retries_done` retries.
// [impl->swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1]
// [impl->swdd~agent-workload-control-loop-retry-limit-set-execution-state~2]
pub fn after_create_failure(policy: &RetryPolicy, retries_done: u32, error: &RuntimeError) -> AfterCreateFailure {
    if let RuntimeError::Config(_) | RuntimeError::InvalidConfig(_) = error {
        // A configuration the runtime can never accept: retrying only delays the verdict.
        return AfterCreateFailure::GiveUp(starting_failed(error.to_string()));
    }
    if retries_done >= policy.max_retries {
        return AfterCreateFailure::GiveUp(starting_failed(format!("No more retries: {error}")));
    }
    let report = (retries_done == 0).then(|| {
        ExecutionState::with_info(
            StateKind::Pending(Pending::Starting),
            format!("Retry 1 of {}: {error}", policy.max_retries),
        )
    });
    AfterCreateFailure::Retry { at: Instant::now() + policy.interval, report }
}

fn starting_failed(info: String) -> ExecutionState {
    ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), info)
}

/// Whether a workload in `state` must be restarted under `policy`.
// [impl->swdd~agent-supports-restart-policies~1]
// [impl->swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2]
pub fn restart_needed(policy: RestartPolicy, state: &ExecutionState) -> bool {
    match policy {
        RestartPolicy::Never => false,
        RestartPolicy::OnFailure => state.kind == StateKind::Failed(Failed::ExecFailed),
        RestartPolicy::Always => matches!(state.kind, StateKind::Succeeded | StateKind::Failed(Failed::ExecFailed)),
    }
}

/// Whether `new` runs the same workload as `current`: they differ at most
/// in what only decides when and where it starts (priority, effective
/// priority, scheduling policy, agent selector, migration, ttl), which never
/// recreates a running workload.
// [feature K1: a changed priority does not restart a workload]
pub fn runs_the_same(current: &WorkloadSpec, new: &WorkloadSpec) -> bool {
    let what_runs = |s: &WorkloadSpec| Workload {
        priority: None,
        effective_priority: None,
        policy: Default::default(),
        agent_selector: None,
        migration: Default::default(),
        ttl_after_finished: None,
        ..s.workload.clone()
    };
    current.instance_name == new.instance_name && what_runs(current) == what_runs(new)
}

/// How long after an exit read from conmon's exit file a reconcile that
/// still lists the container as running is taken as stale: podman's own
/// record of the container lags until its cleanup process has run.
pub const EXIT_AHEAD_WINDOW: Duration = Duration::from_secs(10);

/// Whether `state`, coming from the event stream or a reconcile after the
/// exit was already read from the exit file, is older news than that exit:
/// podman's `create`/`start` events and its database trail conmon's exit
/// file, so a short-lived container's `start` event can arrive after its exit.
pub fn predates_known_exit(state: &ExecutionState) -> bool {
    matches!(state.kind, StateKind::Running | StateKind::Pending(Pending::Starting))
}

/// A reconcile may only correct the state when it started after the
/// workload was known and after the last event about it; otherwise it may be
/// older than what the event stream already said.
// [impl->swdd~podman-state-getter-reset-cache~1]
pub fn snapshot_is_newer(known_since: Instant, last_event: Option<Instant>, taken_at: Instant) -> bool {
    taken_at >= known_since && last_event.is_none_or(|t| t < taken_at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime_connectors::lost_state;

    #[test]
    // [utest->swdd~agent-supports-restart-policies~1]
    // [utest->swdd~workload-control-loop-restarts-workload-with-enabled-restart-policy~2]
    fn restart_policy_table_matches_the_design() {
        let ok = ExecutionState::succeeded();
        let failed = ExecutionState::failed("Exit code: '1'");
        let lost = lost_state();
        let running = ExecutionState::running();
        assert!(!restart_needed(RestartPolicy::Never, &failed));
        assert!(!restart_needed(RestartPolicy::Never, &ok));
        assert!(restart_needed(RestartPolicy::OnFailure, &failed));
        assert!(!restart_needed(RestartPolicy::OnFailure, &ok));
        assert!(restart_needed(RestartPolicy::Always, &failed));
        assert!(restart_needed(RestartPolicy::Always, &ok));
        for p in [RestartPolicy::Never, RestartPolicy::OnFailure, RestartPolicy::Always] {
            assert!(!restart_needed(p, &lost));
            assert!(!restart_needed(p, &running));
        }
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-workload-control-loop-limits-retry-attempts~1]
    // [utest->swdd~agent-workload-control-loop-retry-limit-set-execution-state~2]
    async fn retry_policy_reports_first_failure_retries_within_a_second_and_gives_up_after_20() {
        let policy = RetryPolicy::default();
        let err = RuntimeError::create("name in use".to_owned());
        let AfterCreateFailure::Retry { at, report } = after_create_failure(&policy, 0, &err) else { panic!() };
        assert_eq!(at, Instant::now() + Duration::from_secs(1));
        let report = report.unwrap();
        assert_eq!(report.kind, StateKind::Pending(Pending::Starting));
        assert_eq!(report.additional_info, "Retry 1 of 20: name in use");
        assert!(matches!(after_create_failure(&policy, 19, &err), AfterCreateFailure::Retry { report: None, .. }));
        let AfterCreateFailure::GiveUp(state) = after_create_failure(&policy, 20, &err) else { panic!() };
        assert_eq!(state.kind, StateKind::Pending(Pending::StartingFailed));
        assert_eq!(state.additional_info, "No more retries: name in use");
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~podman-state-getter-reset-cache~1]
    async fn snapshot_older_than_the_workload_or_its_last_event_is_ignored() {
        let t0 = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        let known = Instant::now();
        assert!(!snapshot_is_newer(known, None, t0), "listed before the workload existed");
        assert!(snapshot_is_newer(known, None, known));
        tokio::time::advance(Duration::from_millis(10)).await;
        let event = Instant::now();
        assert!(!snapshot_is_newer(known, Some(event), known));
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(snapshot_is_newer(known, Some(event), Instant::now()));
    }

    #[test]
    fn retry_policy_does_not_retry_an_invalid_config() {
        let err = RuntimeError::InvalidConfig("runtimeConfig: missing field `image`".into());
        let AfterCreateFailure::GiveUp(state) = after_create_failure(&RetryPolicy::default(), 0, &err) else {
            panic!()
        };
        assert_eq!(state.kind, StateKind::Pending(Pending::StartingFailed));
        assert!(state.additional_info.contains("image"));
    }
}
