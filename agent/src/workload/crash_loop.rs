//! [`CrashLoop`]: the crash-loop limits of one workload's restarts (issue
//! 39), opt-in per workload (`restartBackoff` in the manifest) or per agent
//! (`--restart-backoff`). Off, every restart the restart policy asks for
//! happens at once and for ever, as in Ankaios.
//!
//! On, each restart waits a delay that doubles from `initialDelay` up to
//! `maxDelay`, with equal jitter (delay n lies in `d/2 ..= d` of the
//! doubled value d, so the delays still visibly grow), and starts over
//! when the workload ran `resetAfter` without exiting. With `attempts`, at
//! most that many restarts happen within a sliding window of `interval`;
//! the next exit is final: the workload stays in the state it exited with.
//!
//! Pure: it decides, the control loop keeps the timer and reports.

use std::collections::VecDeque;
use std::time::Duration;

use ank_common::duration::{format_duration, format_elapsed};
use ank_common::execution_state::Failed;
use ank_common::health_spec::{BackoffSettings, HealthSpecError, RestartBackoff};
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use crate::backoff::Backoff;

/// What to do about one restart the restart policy asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// Restart at once: the limits are off (Ankaios' behaviour).
    Now,
    /// Restart after `delay`; `reason` is the `CrashLoop` event's, e.g.
    /// "restart 3 in 3.7s (backoff)".
    After { delay: Duration, reason: String },
    /// The limit was reached just now: no restart; `reason` is the
    /// `CrashLoop` event's and goes into the state's additional info.
    LimitReached { reason: String },
    /// The limit was reached before: nothing more to do or to say.
    Stopped,
}

/// The crash-loop state of one workload.
#[derive(Debug, Clone)]
pub struct CrashLoop {
    /// The agent's settings (`--restart-backoff`), for a workload without
    /// its own `restartBackoff`; `None`: off.
    agent_default: Option<BackoffSettings>,
    /// The settings in force; `None`: off.
    settings: Option<BackoffSettings>,
    /// The exponent of the delays since the last reset.
    backoff: Backoff,
    /// When the restarts within the last `interval` were decided.
    restarts: VecDeque<Instant>,
    /// Since when the workload runs (reported Running), until it exits.
    running_since: Option<Instant>,
    /// The reason, once the limit was reached.
    limit_reached: Option<String>,
}

impl CrashLoop {
    /// The limits of a workload on an agent whose default is `agent_default`
    /// (in force until [`configure`](Self::configure) sees the spec).
    pub fn new(agent_default: Option<BackoffSettings>) -> Self {
        Self {
            agent_default,
            settings: agent_default,
            backoff: backoff_of(agent_default.as_ref()),
            restarts: VecDeque::new(),
            running_since: None,
            limit_reached: None,
        }
    }

    /// Takes the workload's own `restartBackoff` (the agent's default when
    /// it has none). Settings that differ from those in force start
    /// everything over; returns whether they did.
    pub fn configure(&mut self, own: Option<&RestartBackoff>) -> bool {
        let settings = match own.map(RestartBackoff::settings) {
            None => self.agent_default,
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                // Checked when the manifest was applied; a spec from an
                // older server may still carry one this agent refuses.
                tracing::warn!("{e}; the defaults of restartBackoff are used");
                Some(BackoffSettings::default())
            }
        };
        if settings == self.settings {
            return false;
        }
        self.settings = settings;
        self.reset();
        true
    }

    /// Starts over: no delay, no restart counted (a new spec).
    pub fn reset(&mut self) {
        self.backoff = backoff_of(self.settings.as_ref());
        self.restarts.clear();
        self.running_since = None;
        self.limit_reached = None;
    }

    /// Whether the limit was reached: the workload is not restarted again.
    pub fn limit_reached(&self) -> bool {
        self.limit_reached.is_some()
    }

    /// Notes a state the control loop reports: since when it runs, and
    /// after the limit the reason in the additional info of its final
    /// state (the state itself stays the one Ankaios shows).
    pub fn seen(&mut self, state: ExecutionState, now: Instant) -> ExecutionState {
        match (&state.kind, &self.limit_reached) {
            (StateKind::Running, _) => {
                self.running_since.get_or_insert(now);
                state
            }
            (StateKind::Succeeded | StateKind::Failed(Failed::ExecFailed), Some(reason))
                if !state.additional_info.ends_with(reason.as_str()) =>
            {
                let info = match state.additional_info.as_str() {
                    "" => reason.clone(),
                    info => format!("{info}; {reason}"),
                };
                ExecutionState::with_info(state.kind, info)
            }
            _ => state,
        }
    }

    /// Decides about a restart the restart policy asks for at `now`.
    pub fn decide(&mut self, now: Instant) -> Restart {
        let Some(settings) = self.settings else { return Restart::Now };
        if self.limit_reached.is_some() {
            return Restart::Stopped;
        }
        if self.running_since.take().is_some_and(|since| now - since >= settings.reset_after) {
            self.backoff.reset();
        }
        while self.restarts.front().is_some_and(|t| now - *t >= settings.interval) {
            self.restarts.pop_front();
        }
        if let Some(attempts) = settings.attempts
            && self.restarts.len() >= usize::try_from(attempts).unwrap_or(usize::MAX)
        {
            let reason = format!(
                "restart limit reached: {attempts} restarts within {}; not restarted again",
                format_duration(settings.interval)
            );
            self.limit_reached = Some(reason.clone());
            return Restart::LimitReached { reason };
        }
        self.restarts.push_back(now);
        let delay = self.backoff.next_delay_equal_jitter();
        let reason = format!("restart {} in {} (backoff)", self.backoff.attempts(), format_elapsed(delay));
        Restart::After { delay, reason }
    }
}

fn backoff_of(settings: Option<&BackoffSettings>) -> Backoff {
    match settings {
        Some(s) => Backoff::new(s.initial_delay, s.max_delay),
        None => Backoff::new(Duration::ZERO, Duration::ZERO),
    }
}

/// A `--restart-backoff` (or `restart_backoff`) that cannot be used: the
/// setting's error, naming the value without the manifest's field path,
/// and the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentBackoffError(HealthSpecError);

impl std::fmt::Display for AgentBackoffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reason = self.0.to_string().replace("field 'restartBackoff.", "'");
        write!(f, "{reason} (give INITIAL[,MAX] like '1s,5m', or 'off')")
    }
}

impl std::error::Error for AgentBackoffError {}

/// Parses the agent's `--restart-backoff`: `off` (the default), or
/// `INITIAL[,MAX]` (`1s,5m`; MAX 5m when left out). The other settings
/// take their defaults: reset after 10m, no restart limit.
pub fn parse_agent_backoff(text: &str) -> Result<Option<BackoffSettings>, AgentBackoffError> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let (initial, max) = match text.split_once(',') {
        Some((initial, max)) => (initial, Some(max.trim().to_owned())),
        None => (text, None),
    };
    let spec = RestartBackoff { initial_delay: Some(initial.trim().to_owned()), max_delay: max, ..Default::default() };
    spec.settings().map(Some).map_err(AgentBackoffError)
}

/// The config-file key `restart_backoff` (`'1s,5m'` or `'off'`).
pub fn optional_agent_backoff<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<AgentBackoff>, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse_agent_backoff(&text).map(|s| Some(AgentBackoff(s))).map_err(serde::de::Error::custom)
}

/// The value of `--restart-backoff`: the crash-loop delays of every
/// workload without its own `restartBackoff`; `None`: off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgentBackoff(pub Option<BackoffSettings>);

/// The flag's value parser.
pub fn parse_agent_backoff_flag(text: &str) -> Result<AgentBackoff, AgentBackoffError> {
    parse_agent_backoff(text).map(AgentBackoff)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn settings(yaml: &str) -> RestartBackoff {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn on(yaml: &str) -> CrashLoop {
        let mut c = CrashLoop::new(None);
        assert!(c.configure(Some(&settings(yaml))));
        c
    }

    fn delay(r: Restart) -> Duration {
        match r {
            Restart::After { delay, .. } => delay,
            other => panic!("no delay: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_off_restarts_at_once_for_ever() {
        let mut c = CrashLoop::new(None);
        assert!(!c.configure(None));
        for _ in 0..100 {
            assert_eq!(c.decide(Instant::now()), Restart::Now);
        }
        assert!(!c.limit_reached());
        assert_eq!(c.seen(ExecutionState::failed("x"), Instant::now()), ExecutionState::failed("x"));
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_delays_double_within_equal_jitter_up_to_the_max() {
        for _ in 0..20 {
            let mut c = on("initialDelay: 1s\nmaxDelay: 8s");
            let mut ceilings = Vec::new();
            for n in 0..7u32 {
                let ceiling = (S * 2u32.pow(n)).min(8 * S);
                let Restart::After { delay, reason } = c.decide(Instant::now()) else { panic!() };
                assert!(delay >= ceiling / 2 && delay <= ceiling, "restart {n}: {delay:?} vs {ceiling:?}");
                assert!(reason.starts_with(&format!("restart {} in ", n + 1)), "{reason}");
                assert!(reason.ends_with("s (backoff)"), "{reason}");
                ceilings.push(ceiling);
                tokio::time::advance(delay).await;
            }
        }
        // Equal jitter: each delay at least half its ceiling, so the 4th
        // (4..8 s) is always longer than the 1st (0.5..1 s).
        let mut c = on("initialDelay: 1s\nmaxDelay: 8s");
        let first = delay(c.decide(Instant::now()));
        let _ = (c.decide(Instant::now()), c.decide(Instant::now()));
        assert!(delay(c.decide(Instant::now())) > first);
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_starts_over_after_running_reset_after_but_not_after_a_short_run() {
        let mut c = on("initialDelay: 1s\nmaxDelay: 1m\nresetAfter: 10m");
        for _ in 0..4 {
            c.decide(Instant::now());
        }
        // A run of 9 minutes is not long enough: the delays go on doubling.
        c.seen(ExecutionState::running(), Instant::now());
        tokio::time::advance(9 * 60 * S).await;
        assert!(delay(c.decide(Instant::now())) >= 8 * S);
        // Running repeats keep the first time; 10 minutes start over.
        c.seen(ExecutionState::running(), Instant::now());
        tokio::time::advance(5 * 60 * S).await;
        c.seen(ExecutionState::running(), Instant::now());
        tokio::time::advance(5 * 60 * S).await;
        let Restart::After { delay, reason } = c.decide(Instant::now()) else { panic!() };
        assert!(delay <= S, "{delay:?}");
        assert!(reason.starts_with("restart 1 in "), "{reason}");
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_limit_stops_restarts_within_the_interval_and_the_window_slides() {
        let mut c = on("initialDelay: 1s\nmaxDelay: 8s\nattempts: 3\ninterval: 10m");
        for _ in 0..3 {
            let d = delay(c.decide(Instant::now()));
            tokio::time::advance(d).await;
        }
        let reason = "restart limit reached: 3 restarts within 10m; not restarted again";
        assert_eq!(c.decide(Instant::now()), Restart::LimitReached { reason: reason.into() });
        assert!(c.limit_reached());
        assert_eq!(c.decide(Instant::now()), Restart::Stopped, "said once");
        tokio::time::advance(60 * 60 * S).await;
        assert_eq!(c.decide(Instant::now()), Restart::Stopped, "final: time does not undo it");
        let failed = c.seen(ExecutionState::failed("Exit code: '1'"), Instant::now());
        assert_eq!(failed, ExecutionState::failed(format!("Exit code: '1'; {reason}")));
        assert_eq!(c.seen(failed.clone(), Instant::now()), failed, "annotated once");
        assert_eq!(c.seen(ExecutionState::succeeded(), Instant::now()).additional_info, reason);

        // Restarts spread wider than the interval never reach the limit.
        let mut c = on("initialDelay: 1s\nmaxDelay: 1s\nattempts: 2\ninterval: 1m");
        for _ in 0..10 {
            assert!(matches!(c.decide(Instant::now()), Restart::After { .. }));
            tokio::time::advance(31 * S).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_a_new_spec_or_new_settings_start_over() {
        let mut c = on("initialDelay: 1s\nmaxDelay: 8s\nattempts: 1");
        c.decide(Instant::now());
        assert!(matches!(c.decide(Instant::now()), Restart::LimitReached { .. }));
        assert!(!c.configure(Some(&settings("initialDelay: 1s\nmaxDelay: 8s\nattempts: 1"))), "the same");
        assert!(c.limit_reached());
        c.reset();
        assert!(!c.limit_reached());
        assert!(delay(c.decide(Instant::now())) <= S, "the delays start over too");
        assert!(matches!(c.decide(Instant::now()), Restart::LimitReached { .. }));
        assert!(c.configure(Some(&settings("initialDelay: 1s\nmaxDelay: 8s\nattempts: 2"))));
        assert!(!c.limit_reached(), "other settings start over");
        assert!(c.configure(None), "without its own: the agent's (off)");
        assert_eq!(c.decide(Instant::now()), Restart::Now);
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_agent_default_applies_to_workloads_without_their_own() {
        let agent = parse_agent_backoff("2s,4s").unwrap();
        assert_eq!(agent.map(|s| (s.initial_delay, s.max_delay, s.attempts)), Some((2 * S, 4 * S, None)));
        let mut c = CrashLoop::new(agent);
        assert!(!c.configure(None));
        let d = delay(c.decide(Instant::now()));
        assert!(d >= S && d <= 2 * S, "{d:?}");
        assert!(c.configure(Some(&settings("initialDelay: 10s\nmaxDelay: 10s"))), "its own wins");
        assert!(delay(c.decide(Instant::now())) >= 5 * S);
    }

    #[tokio::test(start_paused = true)]
    async fn crash_loop_zero_delays_restart_at_once_with_events() {
        let mut c = on("initialDelay: 0s\nmaxDelay: 0s");
        for n in 1..=3 {
            let reason = format!("restart {n} in 0ms (backoff)");
            assert_eq!(c.decide(Instant::now()), Restart::After { delay: Duration::ZERO, reason });
        }
    }

    #[test]
    fn crash_loop_agent_flag_parses_initial_max_and_off() {
        assert_eq!(parse_agent_backoff("off"), Ok(None));
        assert_eq!(parse_agent_backoff("1s").unwrap().unwrap().max_delay, Duration::from_secs(300));
        let s = parse_agent_backoff(" 500ms , 1m ").unwrap().unwrap();
        assert_eq!((s.initial_delay, s.max_delay), (Duration::from_millis(500), 60 * S));
        let e = parse_agent_backoff("5m,1s").unwrap_err().to_string();
        assert_eq!(e, "'maxDelay' is shorter than 'initialDelay' (give INITIAL[,MAX] like '1s,5m', or 'off')");
        assert!(parse_agent_backoff("soon").unwrap_err().to_string().contains("'initialDelay'"));
    }
}
