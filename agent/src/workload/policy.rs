//! The control loop's decisions, apart from its mechanism: how often and
//! how fast a failed create is retried, which failures are final, when an
//! exited workload is restarted (which observation becomes which state is
//! the connectors' word: `Observed::into_state`).

use std::time::Duration;

use ank_common::execution_state::{Failed, Pending};
use ank_common::workload::{RestartPolicy, Workload, WorkloadSpec};
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::runtime_connectors::RuntimeError;

/// The start of the backoff between create retries (Ankaios: 500 ms).
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// The longest backoff between create retries (Ankaios: 5 minutes).
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// Retries of the limited mode when only its interval is given (seed 002: 20).
pub const LIMITED_RETRIES: u32 = 20;
/// Interval of the limited mode when only its count is given (seed 002: 1 s).
pub const LIMITED_INTERVAL: Duration = Duration::from_secs(1);

/// How failed creates are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// Without limit, each retry after a delay drawn uniformly from
    /// `0 ..= min(base * 2^n, cap)` (n: retries so far), as Ankaios HEAD
    /// does. The default. `seed` fixes the jitter (tests); `None` draws it
    /// from a random seed.
    // [impl->swdd~agent-workload-control-loop-exponential-backoff-retries~1]
    Backoff { base: Duration, cap: Duration, seed: Option<u64> },
    /// Seed 002's mode (`--create-retries N`): `max_retries` retries
    /// `interval` apart, then `Pending(StartingFailed)`.
    Limited {
        /// Retries after the first failed create.
        // [impl->swdd~agent-workload-control-loop-limits-retry-attempts~1]
        max_retries: u32,
        /// Delay before each retry.
        // [impl->swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1]
        interval: Duration,
    },
}

impl Default for RetryPolicy {
    /// Ankaios HEAD's backoff: from 0.5 s up to 5 minutes, without limit.
    fn default() -> Self {
        Self::Backoff { base: BACKOFF_BASE, cap: BACKOFF_CAP, seed: None }
    }
}

impl RetryPolicy {
    /// The limited mode: `max_retries` retries `interval` apart.
    pub fn limited(max_retries: u32, interval: Duration) -> Self {
        Self::Limited { max_retries, interval }
    }

    /// Ankaios' backoff with a fixed jitter seed (deterministic tests).
    pub fn backoff_seeded(seed: u64) -> Self {
        Self::Backoff { base: BACKOFF_BASE, cap: BACKOFF_CAP, seed: Some(seed) }
    }

    /// The policy the flags `--create-retries` and
    /// `--create-retry-interval-ms` select: either one selects the limited
    /// mode (the other taking seed 002's value), neither the backoff.
    pub fn from_flags(retries: Option<u32>, interval_ms: Option<u64>) -> Self {
        match (retries, interval_ms) {
            (None, None) => Self::default(),
            (retries, interval) => Self::limited(
                retries.unwrap_or(LIMITED_RETRIES),
                interval.map_or(LIMITED_INTERVAL, Duration::from_millis),
            ),
        }
    }
}

/// What to do after a failed create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterCreateFailure {
    /// Retry at `at`, reporting `report` (the limited mode only for the
    /// first failure, so that users do not see the state flicker on every
    /// attempt; the backoff mode, as Ankaios, at each failure).
    Retry { at: Instant, report: Option<ExecutionState> },
    /// Give up with this state.
    GiveUp(ExecutionState),
}

/// The retries of one workload's creates: the policy, how many were made
/// since the last create or update command, and the backoff's state.
#[derive(Debug, Clone)]
pub struct CreateRetries {
    policy: RetryPolicy,
    done: u32,
    /// The delays of the backoff mode (unused in the limited mode).
    backoff: Backoff,
}

impl CreateRetries {
    pub fn new(policy: RetryPolicy) -> Self {
        let backoff = match policy {
            RetryPolicy::Backoff { base, cap, seed: Some(seed) } => Backoff::with_seed(base, cap, seed),
            RetryPolicy::Backoff { base, cap, seed: None } => Backoff::new(base, cap),
            RetryPolicy::Limited { interval, .. } => Backoff::new(interval, interval),
        };
        Self { policy, done: 0, backoff }
    }

    /// Starts over: a new create or an update (a changed spec, a restart).
    // [impl->swdd~agent-workload-control-loop-reset-retry-attempts-on-update~1]
    // [impl->swdd~agent-workload-control-loop-reset-backoff-on-update~1]
    pub fn reset(&mut self) {
        self.done = 0;
        self.backoff.reset();
    }

    /// A retry is being made.
    pub fn count_retry(&mut self) {
        self.done = self.done.saturating_add(1);
    }

    /// Retries made since the last reset.
    pub fn done(&self) -> u32 {
        self.done
    }

    /// Decides about a failed create.
    // [impl->swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1]
    // [impl->swdd~agent-workload-control-loop-retry-limit-set-execution-state~2]
    pub fn after_failure(&mut self, error: &RuntimeError) -> AfterCreateFailure {
        if let RuntimeError::Config(_) | RuntimeError::InvalidConfig(_) = error {
            // A configuration the runtime can never accept: retrying only delays the verdict.
            return AfterCreateFailure::GiveUp(starting_failed(error.to_string()));
        }
        match self.policy {
            RetryPolicy::Limited { max_retries, interval } => {
                if self.done >= max_retries {
                    return AfterCreateFailure::GiveUp(starting_failed(format!("No more retries: {error}")));
                }
                let report = (self.done == 0).then(|| retrying(format!("Retry 1 of {max_retries}: {error}")));
                AfterCreateFailure::Retry { at: Instant::now() + interval, report }
            }
            RetryPolicy::Backoff { .. } => {
                // Ankaios' words: "Retry <n>: <error>", n counting from 1.
                let report = retrying(format!("Retry {}: {error}", self.done.saturating_add(1)));
                AfterCreateFailure::Retry { at: Instant::now() + self.backoff.next_delay(), report: Some(report) }
            }
        }
    }
}

/// `Pending(Starting)` while creates are retried.
fn retrying(info: String) -> ExecutionState {
    ExecutionState::with_info(StateKind::Pending(Pending::Starting), info)
}

/// Decides about a failed create after `retries_done` retries of the
/// limited mode (a stateless view of [`CreateRetries::after_failure`]).
#[cfg(test)]
pub fn after_create_failure(policy: &RetryPolicy, retries_done: u32, error: &RuntimeError) -> AfterCreateFailure {
    let mut retries = CreateRetries::new(*policy);
    retries.done = retries_done;
    retries.after_failure(error)
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
/// priority, scheduling policy, agent selector, migration, ttl, probes,
/// restart backoff, update gate), which never recreates a running workload.
// [feature K1: a changed priority does not restart a workload]
pub fn runs_the_same(current: &WorkloadSpec, new: &WorkloadSpec) -> bool {
    let what_runs = |s: &WorkloadSpec| Workload {
        priority: None,
        effective_priority: None,
        policy: Default::default(),
        agent_selector: None,
        migration: Default::default(),
        ttl_after_finished: None,
        // Health settings change how the agent watches it, not what runs.
        startup_probe: None,
        liveness_probe: None,
        readiness_probe: None,
        restart_backoff: None,
        update: None,
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
        let policy = RetryPolicy::limited(20, Duration::from_secs(1));
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
        for policy in [RetryPolicy::default(), RetryPolicy::limited(20, Duration::from_secs(1))] {
            let AfterCreateFailure::GiveUp(state) = after_create_failure(&policy, 0, &err) else { panic!() };
            assert_eq!(state.kind, StateKind::Pending(Pending::StartingFailed));
            assert!(state.additional_info.contains("image"));
        }
    }

    #[tokio::test(start_paused = true)]
    // [utest->swdd~agent-workload-control-loop-exponential-backoff-retries~1]
    // [utest->swdd~agent-workload-control-loop-reset-backoff-on-update~1]
    async fn retry_policy_backoff_never_gives_up_draws_within_doubling_ceilings_and_resets() {
        let err = RuntimeError::create("Error: image not known".to_owned());
        let mut retries = CreateRetries::new(RetryPolicy::backoff_seeded(7));
        let mut delays = Vec::new();
        for n in 0..40u32 {
            let AfterCreateFailure::Retry { at, report } = retries.after_failure(&err) else { panic!("gave up") };
            let report = report.expect("every failure is reported, as in Ankaios");
            assert_eq!(report.kind, StateKind::Pending(Pending::Starting));
            assert_eq!(report.additional_info, format!("Retry {}: Error: image not known", n + 1));
            let delay = at - Instant::now();
            let ceiling = BACKOFF_BASE.saturating_mul(1u32 << n.min(20)).min(BACKOFF_CAP);
            assert!(delay <= ceiling, "retry {n}: {delay:?} above {ceiling:?}");
            delays.push(delay);
            retries.count_retry();
        }
        assert!(delays[30..].iter().any(|d| *d > Duration::from_secs(150)), "late delays reach toward the cap");
        // The same seed draws the same delays; a reset starts from 0.5 s again.
        let mut again = CreateRetries::new(RetryPolicy::backoff_seeded(7));
        let AfterCreateFailure::Retry { at, .. } = again.after_failure(&err) else { panic!() };
        assert_eq!(at - Instant::now(), delays[0]);
        retries.reset();
        assert_eq!(retries.done(), 0);
        let AfterCreateFailure::Retry { at, report } = retries.after_failure(&err) else { panic!() };
        assert!(at - Instant::now() <= BACKOFF_BASE);
        assert_eq!(report.unwrap().additional_info, "Retry 1: Error: image not known");
    }

    #[test]
    fn retry_policy_from_flags_selects_the_mode() {
        assert_eq!(RetryPolicy::from_flags(None, None), RetryPolicy::default());
        assert!(matches!(RetryPolicy::default(), RetryPolicy::Backoff { base, cap, seed: None }
            if base == Duration::from_millis(500) && cap == Duration::from_secs(300)));
        assert_eq!(RetryPolicy::from_flags(Some(3), None), RetryPolicy::limited(3, Duration::from_secs(1)));
        assert_eq!(RetryPolicy::from_flags(None, Some(250)), RetryPolicy::limited(20, Duration::from_millis(250)));
        assert_eq!(RetryPolicy::from_flags(Some(0), Some(5)), RetryPolicy::limited(0, Duration::from_millis(5)));
    }
}
