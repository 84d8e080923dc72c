//! Tests of one control loop on its own: the server's TTL resync of a spec
//! whose creates gave up (limited mode), as the loop sees it when the
//! manager has not yet taken the report that they did (the two crossed),
//! and a resync during the backoff of the default mode.

use std::sync::Arc;
use std::time::Duration;

use ank_common::execution_state::Pending;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadName};
use tokio::sync::mpsc;

use crate::runtime_connectors::RuntimeRegistry;
use crate::runtime_connectors::fake::FakeRuntime;
use crate::runtime_manager::runtime_facade::RuntimeFacade;
use crate::workload::control_loop::LoopContext;
use crate::workload::object::WorkloadObject;
use crate::workload::policy::RetryPolicy;
use crate::workload::{LoopReport, StateReporter};
use crate::workload_operation::ReusableWorkloadSpec;

struct OneLoop {
    fake: Arc<FakeRuntime>,
    reports: mpsc::Receiver<LoopReport>,
    _io: tempfile::TempDir,
}

impl OneLoop {
    /// A loop in seed 002's limited mode: 2 retries, 1 s apart.
    fn new(fake: FakeRuntime) -> (Self, RuntimeFacade) {
        Self::with_policy(fake, RetryPolicy::limited(2, Duration::from_secs(1)))
    }

    fn with_policy(fake: FakeRuntime, retry_policy: RetryPolicy) -> (Self, RuntimeFacade) {
        let fake = Arc::new(fake);
        let mut registry = RuntimeRegistry::new();
        registry.register(fake.clone());
        let io = tempfile::tempdir().expect("temp io folder");
        let (reporter, reports) = StateReporter::channel(64);
        let ctx = LoopContext::for_tests(registry, reporter, io.path(), retry_policy);
        let facade = RuntimeFacade::new(fake.clone(), ctx);
        (Self { fake, reports, _io: io }, facade)
    }

    /// The next state the loop reports (events are skipped).
    async fn next_state(&mut self) -> ExecutionState {
        loop {
            let report = tokio::time::timeout(Duration::from_secs(600), self.reports.recv())
                .await
                .expect("no report within 600 s")
                .expect("the loop's reporter is gone");
            if let LoopReport::State(s) = report {
                return s.execution_state;
            }
        }
    }

    async fn until_given_up(&mut self) -> ExecutionState {
        loop {
            let state = self.next_state().await;
            if state.kind == StateKind::Pending(Pending::StartingFailed) {
                return state;
            }
        }
    }
}

fn spec(name: &str) -> WorkloadSpec {
    let wl = Workload {
        agent: "agent_A".into(),
        runtime: "podman".into(),
        runtime_config: format!("image: localhost/{name}:1\n"),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), wl)
}

fn start(facade: &RuntimeFacade, s: &WorkloadSpec) -> WorkloadObject {
    facade.create_workload(ReusableWorkloadSpec::new(s.clone()))
}

#[tokio::test(start_paused = true)]
async fn a_resync_after_the_creates_gave_up_reports_that_again_and_a_rerun_starts_them_over() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::new(fake);
    let s = spec("api");
    let mut object = start(&facade, &s);
    let gave_up = one.until_given_up().await;
    assert_eq!(gave_up.additional_info, "No more retries: Error: image not known");
    assert_eq!(one.fake.created().len(), 3, "one create and 2 retries");

    // The resync crossed that report: the loop answers with it, creates nothing.
    object.resync(s.clone());
    assert_eq!(one.next_state().await, gave_up, "the resync gets the given-up state as its answer");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(one.fake.created().len(), 3, "a resync is no rerun");
    assert!(one.reports.try_recv().is_err(), "nothing else was reported");

    // `ank job rerun` sends the same spec as a plain add: the creates start over.
    object.update(Some(s.clone()));
    let again = one.next_state().await;
    assert_eq!(again, ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Triggered at runtime."));
    assert_eq!(one.until_given_up().await, gave_up);
    assert_eq!(one.fake.created().len(), 6, "the rerun made one create and 2 retries of its own");
}

#[tokio::test(start_paused = true)]
async fn a_resync_while_the_creates_are_retried_keeps_counting() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::new(fake);
    let s = spec("api");
    let mut object = start(&facade, &s);
    one.next_state().await;
    assert_eq!(one.next_state().await.additional_info, "Retry 1 of 2: Error: image not known");
    object.resync(s.clone());
    assert_eq!(one.next_state().await.additional_info, "Retry 1 of 2: Error: image not known");
    one.until_given_up().await;
    assert_eq!(one.fake.created().len(), 3, "the resync did not reset the retries");
}

/// The times (from `t0`) at which a loop with `RetryPolicy::backoff_seeded(seed)`
/// makes its retries: each one a delay of the same seeded backoff later.
fn backoff_schedule(seed: u64, retries: usize) -> Vec<Duration> {
    let mut b = crate::backoff::Backoff::with_seed(
        crate::workload::policy::BACKOFF_BASE,
        crate::workload::policy::BACKOFF_CAP,
        seed,
    );
    let mut at = Duration::ZERO;
    (0..retries)
        .map(|_| {
            at += b.next_delay();
            at
        })
        .collect()
}

/// Whether `got` is `want` up to the timer's rounding to whole milliseconds,
/// which adds up over the retries.
fn about(got: Duration, want: Duration) -> bool {
    got >= want && got <= want + Duration::from_millis(20)
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-exponential-backoff-retries~1]
async fn backoff_mode_retries_at_the_jittered_delays_and_never_gives_up() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::with_policy(fake, RetryPolicy::backoff_seeded(42));
    let s = spec("api");
    let t0 = tokio::time::Instant::now();
    let _object = start(&facade, &s);
    assert_eq!(one.next_state().await.additional_info, "Triggered at runtime.");
    assert_eq!(
        one.next_state().await,
        ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Retry 1: Error: image not known")
    );
    let schedule = backoff_schedule(42, 14);
    for (n, want) in schedule.iter().enumerate() {
        let state = one.next_state().await;
        assert_eq!(state.kind, StateKind::Pending(Pending::Starting), "never StartingFailed");
        assert_eq!(state.additional_info, format!("Retry {}: Error: image not known", n + 2));
        assert!(about(t0.elapsed(), *want), "retry {}: at {:?}, want {want:?}", n + 1, t0.elapsed());
    }
    assert_eq!(one.fake.created().len(), 15, "one create and 14 retries, one at a time");
    assert!(t0.elapsed() > Duration::from_secs(300), "{:?}: the delays grow toward 5 min", t0.elapsed());
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-exponential-backoff-retries~1]
async fn backoff_mode_a_resync_during_the_backoff_neither_resets_it_nor_creates_in_parallel() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::with_policy(fake, RetryPolicy::backoff_seeded(5));
    let s = spec("api");
    let t0 = tokio::time::Instant::now();
    let mut object = start(&facade, &s);
    one.next_state().await;
    let schedule = backoff_schedule(5, 10);
    let mut last = one.next_state().await; // Retry 1
    for _ in 1..7 {
        last = one.next_state().await; // Retry 2 .. Retry 7
    }
    assert_eq!(last.additional_info, "Retry 7: Error: image not known");
    assert_eq!(one.fake.created().len(), 7);
    // The server's resync every 10 s while the 7th retry waits (up to 32 s).
    let mut resyncs = 0;
    while t0.elapsed() + Duration::from_secs(10) < schedule[6] {
        tokio::time::sleep(Duration::from_secs(10)).await;
        object.resync(s.clone());
        assert_eq!(one.next_state().await, last, "a resync is answered with the state as it is");
        resyncs += 1;
    }
    assert!(resyncs > 0, "the seed must leave room for a resync");
    assert_eq!(one.fake.created().len(), 7, "{resyncs} resyncs started no create");
    let next = one.next_state().await;
    assert_eq!(next.additional_info, "Retry 8: Error: image not known", "the count goes on");
    assert!(about(t0.elapsed(), schedule[6]), "at {:?}, want {:?}: the backoff was kept", t0.elapsed(), schedule[6]);
    assert_eq!(one.fake.created().len(), 8);
    // The image appears: the next retry creates it, after the kept backoff,
    // and no retry follows.
    one.fake.clear_failures();
    tokio::time::sleep_until(t0 + schedule[7] - Duration::from_millis(1)).await;
    assert_eq!(one.fake.created().len(), 8, "not before its time");
    tokio::time::sleep(Duration::from_millis(25)).await;
    assert_eq!(one.fake.created().len(), 9);
    assert_eq!(one.fake.containers().len(), 1, "created");
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(one.fake.created().len(), 9, "no create after the good one");
    assert!(one.reports.try_recv().is_err(), "no further retry reported");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-reset-backoff-on-update~1]
async fn backoff_mode_an_update_resets_the_backoff() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("api", "Error: image not known");
    let (mut one, facade) = OneLoop::with_policy(fake, RetryPolicy::backoff_seeded(9));
    let v1 = spec("api");
    let mut object = start(&facade, &v1);
    one.next_state().await;
    for _ in 0..9 {
        one.next_state().await; // Retry 1 .. Retry 9: the ceiling is now 128 s
    }
    let mut v2 = v1.clone();
    v2.workload.runtime_config = "image: localhost/api:2\n".into();
    let v2 = WorkloadSpec::new(&WorkloadName::new("api").unwrap(), &AgentName::new("agent_A").unwrap(), v2.workload);
    let t1 = tokio::time::Instant::now();
    object.update(Some(v2.clone()));
    let mut seen = Vec::new();
    while seen.last().is_none_or(|s: &ExecutionState| s.additional_info != "Retry 2: Error: image not known") {
        seen.push(one.next_state().await);
    }
    assert!(seen.iter().any(|s| s.additional_info == "Retry 1: Error: image not known"), "{seen:?}");
    // Counted anew: the first retry of v2 within 0.5 s, as for a new workload.
    assert!(t1.elapsed() <= Duration::from_millis(502), "{:?}", t1.elapsed());
}
