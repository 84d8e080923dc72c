//! The server's reaper of finished workloads (`ttlAfterFinished`): a
//! workload that finished for good (it succeeded, or failed, and its
//! restart policy will not start it again; or a pipeline canceled it)
//! and stayed so for its ttl is deleted from the desired state. The ttl is
//! the workload's own `ttlAfterFinished`, else the server-wide default
//! (none by default: the reaper is off), counted from when the workload's
//! state became the finished one (not from the tick that first saw it, so a
//! workload goes at most one tick after its ttl ran out). This module owns
//! the settings and the finish rule; the server checks on every tick and
//! carries out the deletions.

mod tick;

pub(crate) use tick::{reaping, record_reaped};

use std::time::Duration;

use ank_common::execution_state::{Failed, Pending};
use ank_common::workload::RestartPolicy;
use ank_common::{StateKind, WorkloadName};
use tokio::time::Instant;

/// How the reaper behaves (configurable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaperSettings {
    /// How often finished workloads are checked.
    pub tick: Duration,
    /// The ttl of workloads that set none; `None`: they stay.
    pub default_ttl: Option<Duration>,
}

impl Default for ReaperSettings {
    fn default() -> Self {
        Self { tick: Self::DEFAULT_TICK, default_ttl: None }
    }
}

impl ReaperSettings {
    pub const DEFAULT_TICK: Duration = Duration::from_secs(1);
}

/// Whether an instance in state `kind` under `policy` is finished for good:
/// the agent will not start it again (the restart rules of the agent's
/// control loop: ON_FAILURE restarts Failed(ExecFailed), ALWAYS also
/// Succeeded; a lost or unknown container is never restarted).
pub fn finished_for_good(policy: RestartPolicy, kind: StateKind) -> bool {
    match kind {
        StateKind::Succeeded => policy != RestartPolicy::Always,
        StateKind::Failed(Failed::ExecFailed) => policy == RestartPolicy::Never,
        StateKind::Failed(Failed::Lost | Failed::Unknown) => true,
        StateKind::Pending(Pending::Canceled) => true,
        _ => false,
    }
}

/// Whether an instance failed for good (a pipeline stops there): failed
/// and not restarted, or its start failed for good.
pub fn failed_for_good(policy: RestartPolicy, kind: StateKind) -> bool {
    match kind {
        StateKind::Failed(_) => finished_for_good(policy, kind),
        StateKind::Pending(Pending::StartingFailed) => true,
        _ => false,
    }
}

/// One workload the reaper may delete now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub workload: String,
    /// "ttlAfterFinished 10s"
    pub reason: String,
}

/// A workload as the reaper sees it.
#[derive(Debug, Clone)]
pub struct Candidate<'a> {
    pub name: &'a WorkloadName,
    pub ttl: Option<Duration>,
    pub policy: RestartPolicy,
    /// The kind of its instance's state and since when it has that kind;
    /// `None` without a state.
    pub state: Option<(StateKind, Instant)>,
}

/// The reaper's settings and rules.
#[derive(Debug, Default)]
pub struct Reaper {
    settings: ReaperSettings,
}

impl Reaper {
    pub fn new(settings: ReaperSettings) -> Self {
        Self { settings }
    }

    pub fn settings(&self) -> ReaperSettings {
        self.settings
    }

    /// The candidates finished for good for at least their ttl at `now`.
    // [feature K7: ttlAfterFinished deletes a workload finished for good]
    pub fn check<'a>(&self, candidates: impl IntoIterator<Item = Candidate<'a>>, now: Instant) -> Vec<Due> {
        let mut due = Vec::new();
        for c in candidates {
            let Some(ttl) = c.ttl.or(self.settings.default_ttl) else { continue };
            let Some((kind, since)) = c.state else { continue };
            if finished_for_good(c.policy, kind) && now.saturating_duration_since(since) >= ttl {
                let reason = format!("ttlAfterFinished {}", ank_common::duration::format_duration(ttl));
                due.push(Due { workload: c.name.to_string(), reason });
            }
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(
        name: &WorkloadName,
        ttl: Option<u64>,
        policy: RestartPolicy,
        kind: StateKind,
        since: Instant,
    ) -> Candidate<'_> {
        Candidate { name, ttl: ttl.map(Duration::from_secs), policy, state: Some((kind, since)) }
    }

    #[test]
    fn finished_for_good_follows_the_restart_rules() {
        use RestartPolicy::*;
        assert!(finished_for_good(Never, StateKind::Succeeded));
        assert!(finished_for_good(OnFailure, StateKind::Succeeded));
        assert!(!finished_for_good(Always, StateKind::Succeeded));
        assert!(finished_for_good(Never, StateKind::Failed(Failed::ExecFailed)));
        assert!(!finished_for_good(OnFailure, StateKind::Failed(Failed::ExecFailed)));
        assert!(finished_for_good(Always, StateKind::Failed(Failed::Lost)));
        assert!(!finished_for_good(Never, StateKind::Running));
        assert!(failed_for_good(Never, StateKind::Pending(Pending::StartingFailed)));
        assert!(!failed_for_good(Never, StateKind::Succeeded));
        assert!(!failed_for_good(Always, StateKind::Failed(Failed::ExecFailed)));
    }

    // [test of feature K7]
    #[tokio::test(start_paused = true)]
    async fn reaper_counts_from_when_the_state_became_finished() {
        let r = Reaper::new(ReaperSettings::default());
        let (w, keep) = (WorkloadName::new("w").unwrap(), WorkloadName::new("keep").unwrap());
        let t0 = Instant::now();
        let finished = t0 + Duration::from_millis(300);
        let all = |kind, since| {
            vec![
                candidate(&w, Some(10), RestartPolicy::Never, kind, since),
                candidate(&keep, None, RestartPolicy::Never, StateKind::Succeeded, t0),
            ]
        };
        assert!(r.check(all(StateKind::Running, t0), t0 + Duration::from_secs(60)).is_empty(), "not finished");
        let at = |ms| t0 + Duration::from_millis(ms);
        assert!(r.check(all(StateKind::Succeeded, finished), at(10_299)).is_empty());
        let due = r.check(all(StateKind::Succeeded, finished), at(10_300));
        assert_eq!(
            due,
            vec![Due { workload: "w".into(), reason: "ttlAfterFinished 10s".into() }],
            "ttl after it finished"
        );
        // With a server-wide default, the one without a ttl goes too.
        let r = Reaper::new(ReaperSettings { default_ttl: Some(Duration::from_secs(5)), ..Default::default() });
        let due = r.check(all(StateKind::Succeeded, t0), t0 + Duration::from_secs(5));
        assert_eq!(due.iter().map(|d| d.workload.as_str()).collect::<Vec<_>>(), ["keep"]);
    }
}
