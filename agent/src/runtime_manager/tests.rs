//! Unit tests of the RuntimeManager and the workload control loops against
//! the in-memory FakeRuntime.

use std::sync::Arc;
use std::time::Duration;

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::messages::DeletedWorkload;
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadInstanceName, WorkloadName, WorkloadState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::runtime_connectors::Observed;
use crate::runtime_connectors::fake::{FakeCall, FakeRuntime};
use crate::workload::policy::RetryPolicy;

pub(super) const AGENT: &str = "agent_A";

pub(super) struct Harness {
    pub(super) fake: Arc<FakeRuntime>,
    pub(super) rm: RuntimeManagerHandle,
    pub(super) states: mpsc::Receiver<WorkloadState>,
    /// Events the control loops and the scheduler reported.
    pub(super) events: mpsc::UnboundedReceiver<crate::workload::EventReport>,
    shutdown: CancellationToken,
    /// The agent's `<run folder>/<agent>_io`.
    pub(super) io: tempfile::TempDir,
    /// What the workloads use of the agent's quota, as published.
    pub(super) quota_used: watch::Receiver<QuotaUsage>,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

pub(super) async fn harness_with(fake: FakeRuntime) -> Harness {
    harness_with_registry(Arc::new(fake), RuntimeRegistry::new(), Default::default()).await
}

/// A harness whose scheduler has `settings` (quota, preemption).
pub(super) async fn harness_with_scheduler(fake: FakeRuntime, settings: SchedulerSettings) -> Harness {
    harness_with_registry(Arc::new(fake), RuntimeRegistry::new(), settings).await
}

/// A harness with a second runtime connector next to the fake `podman`.
pub(super) async fn harness_with_extra(fake: FakeRuntime, extra: Arc<FakeRuntime>) -> Harness {
    let mut registry = RuntimeRegistry::new();
    registry.register(extra);
    harness_with_registry(Arc::new(fake), registry, Default::default()).await
}

async fn harness_with_registry(
    fake: Arc<FakeRuntime>,
    registry: RuntimeRegistry,
    scheduler: SchedulerSettings,
) -> Harness {
    let io = tempfile::tempdir().expect("temp io folder");
    harness_in(fake, registry, io, Default::default(), scheduler).await
}

/// The retry policy of these harnesses: seed 002's limited mode
/// (`--create-retries 20 --create-retry-interval-ms 1000`), whose timing
/// the tests count on; the default backoff has tests of its own
/// (`harness_with_retry`).
pub(super) fn limited_retries() -> RetryPolicy {
    RetryPolicy::limited(20, Duration::from_secs(1))
}

/// A harness on the io folder `io` (e.g. of an earlier harness, as after an
/// agent restart) with `retention`.
pub(super) async fn harness_in(
    fake: Arc<FakeRuntime>,
    registry: RuntimeRegistry,
    io: tempfile::TempDir,
    retention: crate::workload::retention::Retention,
    scheduler: SchedulerSettings,
) -> Harness {
    harness_full(fake, registry, io, retention, scheduler, limited_retries()).await
}

/// A harness whose failed creates are retried as `retry_policy` says.
pub(super) async fn harness_with_retry(fake: FakeRuntime, retry_policy: RetryPolicy) -> Harness {
    let io = tempfile::tempdir().expect("temp io folder");
    harness_full(Arc::new(fake), RuntimeRegistry::new(), io, Default::default(), Default::default(), retry_policy).await
}

/// A harness whose agent delays restarts as `restart_backoff` says
/// (`--restart-backoff`), and keeps finished workloads for `retention`.
pub(super) async fn harness_with_restart_backoff(
    fake: FakeRuntime,
    restart_backoff: Option<ank_common::health_spec::BackoffSettings>,
    retention: crate::workload::retention::Retention,
) -> Harness {
    let io = tempfile::tempdir().expect("temp io folder");
    let registry = RuntimeRegistry::new();
    harness_backoff(Arc::new(fake), registry, io, retention, Default::default(), limited_retries(), restart_backoff)
        .await
}

async fn harness_full(
    fake: Arc<FakeRuntime>,
    registry: RuntimeRegistry,
    io: tempfile::TempDir,
    retention: crate::workload::retention::Retention,
    scheduler: SchedulerSettings,
    retry_policy: RetryPolicy,
) -> Harness {
    harness_backoff(fake, registry, io, retention, scheduler, retry_policy, None).await
}

async fn harness_backoff(
    fake: Arc<FakeRuntime>,
    mut registry: RuntimeRegistry,
    io: tempfile::TempDir,
    retention: crate::workload::retention::Retention,
    scheduler: SchedulerSettings,
    retry_policy: RetryPolicy,
    restart_backoff: Option<ank_common::health_spec::BackoffSettings>,
) -> Harness {
    registry.register(fake.clone());
    let (server, to_server) = crate::server_link::ServerLinkHandle::channel();
    let (quota_tx, quota_used) = watch::channel(QuotaUsage::default());
    let shutdown = CancellationToken::new();
    let config = RuntimeManagerConfig {
        agent_name: AGENT.into(),
        max_parallel_creates: 4,
        retry_policy,
        io_folder: io.path().to_owned(),
        control_interfaces: crate::control_interface::registry::ControlInterfaces::new(
            tokio::sync::mpsc::unbounded_channel().0,
        ),
        retention,
        restart_backoff,
        scheduler,
        quota_used: quota_tx,
    };
    let (rm, _task) = RuntimeManager::start(config, registry, server, shutdown.clone()).await;
    let (states, events) = split_reports(to_server);
    Harness { fake, rm, states, events, shutdown, io, quota_used }
}

/// What the manager sends the server, split into the states (without the
/// status, and without the repeats that only carry events) and the events
/// (one per occurrence, as reported).
fn split_reports(
    mut to_server: mpsc::UnboundedReceiver<ank_common::messages::ToServer>,
) -> (mpsc::Receiver<WorkloadState>, mpsc::UnboundedReceiver<crate::workload::EventReport>) {
    let (states_tx, states) = mpsc::channel(256);
    let (events_tx, events) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut last: std::collections::HashMap<WorkloadInstanceName, ExecutionState> = Default::default();
        let mut counts: std::collections::HashMap<(WorkloadInstanceName, String), u64> = Default::default();
        while let Some(msg) = to_server.recv().await {
            let ank_common::messages::ToServer::UpdateWorkloadState(reported) = msg else { continue };
            for s in reported {
                let n = s.instance_name.clone();
                for e in &s.status.events {
                    let seen = counts.entry((n.clone(), format!("{:?}/{}", e.kind, e.reason))).or_default();
                    let new = if e.count > *seen { e.count - *seen } else { e.count };
                    *seen = e.count;
                    for _ in 0..new {
                        let report = crate::workload::EventReport {
                            instance_name: n.clone(),
                            kind: e.kind,
                            reason: e.reason.clone(),
                        };
                        let _ = events_tx.send(report);
                    }
                }
                let repeat = last.get(&n) == Some(&s.execution_state);
                if s.status.events.is_empty() || !repeat {
                    last.insert(n.clone(), s.execution_state.clone());
                    if states_tx.send(WorkloadState::new(n, s.execution_state)).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    (states, events)
}

pub(super) async fn harness() -> Harness {
    harness_with(FakeRuntime::new()).await
}

pub(super) fn spec_with(name: &str, runtime: &str, runtime_config: &str) -> WorkloadSpec {
    let wl = Workload {
        agent: AGENT.into(),
        runtime: runtime.into(),
        runtime_config: runtime_config.into(),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(AGENT).unwrap(), wl)
}

pub(super) fn spec(name: &str) -> WorkloadSpec {
    spec_with(name, "podman", &format!("image: localhost/{name}:1\n"))
}

pub(super) fn deleted(s: &WorkloadSpec) -> DeletedWorkload {
    DeletedWorkload { instance_name: s.instance_name.clone(), dependencies: Default::default() }
}

impl Harness {
    pub(super) async fn next(&mut self) -> WorkloadState {
        tokio::time::timeout(Duration::from_secs(60), self.states.recv())
            .await
            .expect("no workload state within 60 s")
            .expect("state channel closed")
    }

    /// The next state reported for `instance`, skipping other instances.
    pub(super) async fn next_of(&mut self, instance: &WorkloadInstanceName) -> ExecutionState {
        loop {
            let s = self.next().await;
            if &s.instance_name == instance {
                return s.execution_state;
            }
        }
    }

    /// Skips states of `instance` until one of `kind` arrives.
    pub(super) async fn wait_for(&mut self, instance: &WorkloadInstanceName, kind: StateKind) -> ExecutionState {
        loop {
            let s = self.next_of(instance).await;
            if s.kind == kind {
                return s;
            }
        }
    }

    pub(super) async fn assert_quiet(&mut self) {
        let r = tokio::time::timeout(Duration::from_millis(150), self.states.recv()).await;
        assert!(r.is_err(), "unexpected state {r:?}");
    }

    pub(super) async fn running(&mut self, s: &WorkloadSpec) {
        self.wait_for(&s.instance_name, StateKind::Running).await;
    }

    /// The states reported until each of `specs` was reported Running, in
    /// any order, per instance (other instances' states included).
    pub(super) async fn until_all_running(
        &mut self,
        specs: &[&WorkloadSpec],
    ) -> std::collections::HashMap<WorkloadInstanceName, Vec<ExecutionState>> {
        let mut waiting: Vec<_> = specs.iter().map(|s| s.instance_name.clone()).collect();
        let mut seen: std::collections::HashMap<_, Vec<_>> = Default::default();
        while !waiting.is_empty() {
            let s = self.next().await;
            if s.execution_state.kind == StateKind::Running {
                waiting.retain(|i| *i != s.instance_name);
            }
            seen.entry(s.instance_name).or_default().push(s.execution_state);
        }
        seen
    }
}

pub(super) fn starting() -> StateKind {
    StateKind::Pending(Pending::Starting)
}

#[tokio::test]
// [utest->swdd~agent-added-creates-workload~1]
// [utest->swdd~agent-create-workload~1]
// [utest->swdd~agent-executes-create-workload-operation~1]
// [utest->swdd~agent-stores-running-workload~1]
// [utest->swdd~workload-control-loop-sends-workload-states~2]
async fn runtime_manager_server_hello_creates_all_workloads() {
    let mut h = harness().await;
    let specs = vec![spec("a"), spec("b"), spec("c")];
    h.rm.server_hello(specs.clone()).await;
    let mut seen: std::collections::BTreeMap<WorkloadInstanceName, Vec<ExecutionState>> = Default::default();
    while seen.len() < 3 || seen.values().any(|v| v.last() != Some(&ExecutionState::running())) {
        let s = h.next().await;
        seen.entry(s.instance_name).or_default().push(s.execution_state);
    }
    for states in seen.values() {
        assert_eq!(
            states,
            &vec![ExecutionState::with_info(starting(), "Triggered at runtime."), ExecutionState::running()]
        );
    }
    let mut created = h.fake.created();
    created.sort();
    assert_eq!(created, specs.iter().map(|s| s.instance_name.clone()).collect::<Vec<_>>());
}

#[tokio::test]
// [utest->swdd~agent-handle-deleted-before-added-workloads~1]
// [utest->swdd~agent-transforms-update-workload-message-to-workload-operations~1]
// [utest->swdd~agent-handles-update-workload-requests~1]
// [utest->swdd~agent-deletes-workload~1]
async fn runtime_manager_update_processes_deletes_before_adds() {
    let mut h = harness().await;
    let (a, c) = (spec("a"), spec("c"));
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    h.rm.update_workload(vec![c.clone()], vec![deleted(&a)]).await;
    // Both loops run concurrently: the delete is triggered first, the states
    // of the two workloads may interleave.
    let (mut removed, mut running) = (false, false);
    while !(removed && running) {
        let s = h.next().await;
        removed |= s.instance_name == a.instance_name && s.execution_state.kind == StateKind::Removed;
        running |= s.instance_name == c.instance_name && s.execution_state.kind == StateKind::Running;
    }
    let calls = h.fake.calls();
    let del = calls.iter().position(|x| x == &FakeCall::Delete(a.instance_name.clone())).unwrap();
    let add = calls.iter().position(|x| x == &FakeCall::Create(c.instance_name.clone())).unwrap();
    assert!(del < add, "{calls:?}");
}

#[tokio::test]
// [utest->swdd~agent-updates-deleted-and-added-workloads~1]
// [utest->swdd~agent-executes-update-workload-operation~1]
// [utest->swdd~agent-workload-control-loop-executes-update~2]
// [utest->swdd~agent-workload-obj-update-command~1]
async fn runtime_manager_update_deletes_old_instance_then_creates_new() {
    let mut h = harness().await;
    let old = spec("a");
    let new = spec_with("a", "podman", "image: localhost/a:2\n");
    h.rm.server_hello(vec![old.clone()]).await;
    h.running(&old).await;
    h.rm.update_workload(vec![new.clone()], vec![deleted(&old)]).await;
    assert_eq!(h.next_of(&old.instance_name).await.kind, StateKind::Stopping(Stopping::RequestedAtRuntime));
    assert_eq!(h.next_of(&old.instance_name).await.kind, StateKind::Removed);
    assert_eq!(h.next_of(&new.instance_name).await.kind, starting());
    h.running(&new).await;
    assert_eq!(
        h.fake.calls(),
        vec![
            FakeCall::List,
            FakeCall::Create(old.instance_name.clone()),
            FakeCall::Delete(old.instance_name.clone()),
            FakeCall::Create(new.instance_name.clone()),
        ]
    );
    assert_eq!(h.fake.containers().len(), 1);
}

#[tokio::test]
// [utest->swdd~agent-update-on-add-known-workload~1]
async fn runtime_manager_add_of_known_name_is_an_update() {
    let mut h = harness().await;
    let old = spec("a");
    let new = spec_with("a", "podman", "image: localhost/a:3\n");
    h.rm.server_hello(vec![old.clone()]).await;
    h.running(&old).await;
    h.rm.update_workload(vec![new.clone()], vec![]).await;
    h.wait_for(&old.instance_name, StateKind::Removed).await;
    h.running(&new).await;
    assert_eq!(h.fake.deleted(), vec![old.instance_name.clone()]);
}

#[tokio::test]
// [utest->swdd~agent-skips-unknown-runtime~1]
async fn runtime_manager_unknown_runtime_is_starting_failed_naming_it() {
    let mut h = harness().await;
    let s = spec_with("x", "containerd", "image: a\n");
    h.rm.server_hello(vec![s.clone()]).await;
    let st = h.next_of(&s.instance_name).await;
    assert_eq!(st.kind, StateKind::Pending(Pending::StartingFailed));
    assert_eq!(st.additional_info, "runtime 'containerd' is not supported by this agent");
    assert!(h.fake.created().is_empty());
}

#[tokio::test]
async fn runtime_manager_invalid_runtime_config_is_starting_failed() {
    let mut h = harness().await;
    let s = spec_with("x", "podman", "commandArgs: [a]\n");
    h.rm.server_hello(vec![s.clone()]).await;
    assert_eq!(h.next_of(&s.instance_name).await.kind, starting());
    let st = h.next_of(&s.instance_name).await;
    assert_eq!(st.kind, StateKind::Pending(Pending::StartingFailed));
    assert!(st.additional_info.contains("image"), "{st}");
    assert!(h.fake.containers().is_empty());
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_runs_at_most_max_parallel_creates_and_a_slow_create_frees_its_slot() {
    // The harness allows 4 creates at once.
    let fake = FakeRuntime::new();
    for name in ["a", "b", "c", "d", "e"] {
        fake.delay_creates_of(name, Duration::from_millis(500));
    }
    for name in ["p1", "p2", "p3", "p4"] {
        fake.delay_creates_of(name, Duration::from_secs(60));
    }
    let mut h = harness_with(fake).await;
    let t0 = tokio::time::Instant::now();
    let quick: Vec<_> = ["a", "b", "c", "d", "e"].into_iter().map(spec).collect();
    h.rm.server_hello(quick.clone()).await;
    for s in &quick {
        h.running(s).await;
    }
    // Four at a time: the fifth starts when the first four are done.
    let elapsed = t0.elapsed();
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1100), "{elapsed:?}");

    // Four slow creates (pulling images) hold their slots only SLOW_CREATE long.
    let pulls: Vec<_> = ["p1", "p2", "p3", "p4"].into_iter().map(spec).collect();
    let t1 = tokio::time::Instant::now();
    let mut all = quick.clone();
    all.extend(pulls.iter().cloned());
    let late = spec("zlate"); // the hello starts creates in name order: after the pulls
    all.push(late.clone());
    h.rm.server_hello(all).await;
    h.running(&late).await;
    let elapsed = t1.elapsed();
    assert!(
        elapsed >= crate::workload::control_loop::SLOW_CREATE && elapsed < Duration::from_secs(3),
        "'zlate' should wait for the pulls' slots 2 s, not their 60 s: {elapsed:?}"
    );
    assert!(pulls.iter().all(|p| !h.fake.created().contains(&p.instance_name)), "the pulls still run");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-retries-workload-creation-on-create-failure~1]
// [utest->swdd~agent-workload-control-loop-requests-retries-on-failing-retry-attempt~1]
// [utest->swdd~agent-workload-control-loop-executes-retry~1]
// [utest->swdd~agent-workload-control-loop-limits-retry-attempts~1]
// [utest->swdd~agent-workload-control-loop-retry-limit-set-execution-state~2]
// [utest->swdd~agent-workload-control-loop-executes-create~3]
async fn runtime_manager_failed_create_is_retried_every_second_20_times_then_fails() {
    // The harness runs the limited mode: `limited_retries()`.
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: image not known");
    let mut h = harness_with(fake).await;
    let s = spec("x");
    let t0 = tokio::time::Instant::now();
    h.rm.server_hello(vec![s.clone()]).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    assert_eq!(
        h.next_of(&s.instance_name).await,
        ExecutionState::with_info(starting(), "Retry 1 of 20: Error: image not known")
    );
    // The state is kept on the failing retries: the next one is the verdict.
    let st = h.next_of(&s.instance_name).await;
    assert_eq!(
        st,
        ExecutionState::with_info(
            StateKind::Pending(Pending::StartingFailed),
            "No more retries: Error: image not known"
        )
    );
    assert_eq!(h.fake.created().len(), 21, "one create and 20 retries");
    let elapsed = t0.elapsed();
    assert!(elapsed >= Duration::from_secs(20) && elapsed < Duration::from_secs(21), "{elapsed:?}");
    h.assert_quiet().await;
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-limits-retry-attempts~1]
async fn runtime_manager_the_servers_resync_of_the_same_spec_does_not_restart_the_retries() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: image not known");
    let mut h = harness_with(fake).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    h.next_of(&s.instance_name).await;
    assert_eq!(h.next_of(&s.instance_name).await.additional_info, "Retry 1 of 20: Error: image not known");
    // The server re-sends a spec that is not Ready every 10 s (its resync).
    for _ in 0..2 {
        tokio::time::sleep(Duration::from_millis(9500)).await;
        h.rm.resync_workload(vec![s.clone()], vec![]).await;
        let again = h.next_of(&s.instance_name).await;
        assert_eq!(again.additional_info, "Retry 1 of 20: Error: image not known", "the resync gets its answer");
    }
    let st = h.wait_for(&s.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert_eq!(st.additional_info, "No more retries: Error: image not known");
    assert_eq!(h.fake.created().len(), 21, "one create and 20 retries, the resyncs counted none");
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_a_resync_after_the_creates_gave_up_is_answered_and_only_a_rerun_starts_them_over() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: image not known");
    let mut h = harness_with(fake).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    let gave_up = h.wait_for(&s.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    // The server's resync went out before that report reached it.
    h.rm.resync_workload(vec![s.clone()], vec![]).await;
    assert_eq!(h.next_of(&s.instance_name).await, gave_up, "the resync gets its answer");
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(h.fake.created().len(), 21, "the resync started nothing");
    h.assert_quiet().await;
    // `ank job rerun`: the same spec as a plain add.
    h.rm.update_workload(vec![s.clone()], vec![]).await;
    assert_eq!(h.next_of(&s.instance_name).await.additional_info, "Triggered at runtime.");
    h.wait_for(&s.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert_eq!(h.fake.created().len(), 42, "the rerun made its own create and 20 retries");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-exponential-backoff-retries~1]
async fn runtime_manager_default_backoff_never_gives_up_and_runs_a_create_that_failed_for_90_s() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: localhost/x:1: image not known");
    let mut h = harness_with_retry(fake, RetryPolicy::backoff_seeded(3)).await;
    let s = spec("x");
    let t0 = tokio::time::Instant::now();
    h.rm.server_hello(vec![s.clone()]).await;
    assert_eq!(h.next_of(&s.instance_name).await.additional_info, "Triggered at runtime.");
    // Ankaios' states while retrying: Pending(Starting) "Retry N: <error>".
    let mut n = 0;
    while t0.elapsed() < Duration::from_secs(90) {
        let st = tokio::time::timeout(Duration::from_secs(400), h.states.recv()).await.unwrap().unwrap();
        assert_eq!(st.execution_state.kind, starting(), "never StartingFailed: {st:?}");
        n += 1;
        assert_eq!(st.execution_state.additional_info, format!("Retry {n}: Error: localhost/x:1: image not known"));
    }
    let tries = h.fake.created().len();
    assert!((6..=20).contains(&tries), "{tries} creates in 90 s: a backoff, no storm");
    // The image is there now: the next retry, at most 5 minutes later, runs it.
    h.fake.clear_failures();
    let cleared = tokio::time::Instant::now();
    let running = loop {
        let st = tokio::time::timeout(Duration::from_secs(400), h.states.recv()).await.unwrap().unwrap();
        if st.execution_state.kind == StateKind::Running {
            break st;
        }
    };
    assert_eq!(running.instance_name, s.instance_name);
    assert!(cleared.elapsed() <= Duration::from_secs(300), "{:?}", cleared.elapsed());
    assert_eq!(h.fake.created().len(), tries + 1);
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_default_backoff_still_retries_after_an_hour_at_most_5_minutes_apart() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: no network");
    let mut h = harness_with_retry(fake, RetryPolicy::default()).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    h.next_of(&s.instance_name).await;
    let mut last = tokio::time::Instant::now();
    let t0 = last;
    while t0.elapsed() < Duration::from_secs(3600) {
        let st = tokio::time::timeout(Duration::from_secs(400), h.states.recv()).await.unwrap().unwrap();
        assert_eq!(st.execution_state.kind, starting(), "{st:?}");
        assert!(last.elapsed() <= Duration::from_secs(300) + Duration::from_millis(2), "{:?}", last.elapsed());
        last = tokio::time::Instant::now();
    }
    assert!(h.fake.created().len() >= 12, "{} tries in an hour", h.fake.created().len());
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_retry_succeeds_once_the_runtime_accepts() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: name in use");
    let mut h = harness_with(fake).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    h.next_of(&s.instance_name).await;
    h.next_of(&s.instance_name).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    h.fake.clear_failures();
    h.running(&s).await;
    assert_eq!(h.fake.created().len(), 4, "create, 2 failed retries, 1 good one");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-prevents-retries-on-other-workload-commands~1]
// [utest->swdd~agent-workload-control-loop-reset-retry-attempts-on-update~1]
// [utest->swdd~agent-workload-control-loop-update-create-failed-allows-retry~1]
async fn runtime_manager_update_stops_the_old_retries_and_starts_counting_again() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: boom");
    let mut h = harness_with(fake).await;
    let v1 = spec_with("x", "podman", "image: v1\n");
    let v2 = spec_with("x", "podman", "image: v2\n");
    h.rm.server_hello(vec![v1.clone()]).await;
    h.next_of(&v1.instance_name).await;
    h.next_of(&v1.instance_name).await;
    tokio::time::sleep(Duration::from_millis(5500)).await;
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    assert_eq!(h.wait_for(&v2.instance_name, starting()).await.additional_info, "Triggered at runtime.");
    assert_eq!(h.next_of(&v2.instance_name).await.additional_info, "Retry 1 of 20: Error: boom");
    let st = h.wait_for(&v2.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert_eq!(st.additional_info, "No more retries: Error: boom");
    let created = h.fake.created();
    let v1_tries = created.iter().filter(|i| **i == v1.instance_name).count();
    let v2_tries = created.iter().filter(|i| **i == v2.instance_name).count();
    assert_eq!((v1_tries, v2_tries), (6, 21), "v1 retries stop at the update; v2 counts from 0");
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_delete_stops_retries() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: boom");
    let mut h = harness_with(fake).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    h.next_of(&s.instance_name).await;
    h.next_of(&s.instance_name).await;
    h.rm.update_workload(vec![], vec![deleted(&s)]).await;
    h.wait_for(&s.instance_name, StateKind::Removed).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(h.fake.created().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_runs_at_most_max_parallel_creates_deletes_at_once() {
    // The harness allows 4 at once: 8 deletes of 500 ms take two waves, 1 s.
    let fake = FakeRuntime::new();
    let mut h = harness_with(fake).await;
    let all: Vec<_> = ["a", "b", "c", "d", "e", "f", "g", "h"].into_iter().map(spec).collect();
    h.rm.server_hello(all.clone()).await;
    for s in &all {
        h.running(s).await;
    }
    h.fake.delay_deletes(Duration::from_millis(500));
    let t0 = tokio::time::Instant::now();
    h.rm.update_workload(vec![], all.iter().map(deleted).collect()).await;
    for s in &all {
        h.wait_for(&s.instance_name, StateKind::Removed).await;
    }
    let elapsed = t0.elapsed();
    assert!(elapsed >= Duration::from_secs(1) && elapsed < Duration::from_millis(1100), "{elapsed:?}");
    assert!(h.fake.containers().is_empty());
}

#[tokio::test]
// [utest->swdd~agent-workload-control-loop-executes-delete~2]
// [utest->swdd~agent-workload-obj-delete-command~1]
async fn runtime_manager_delete_reports_stopping_then_removed() {
    let mut h = harness().await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    h.rm.update_workload(vec![], vec![deleted(&a)]).await;
    assert_eq!(
        h.next().await,
        WorkloadState::new(
            a.instance_name.clone(),
            ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime))
        )
    );
    assert_eq!(h.next().await, WorkloadState::new(a.instance_name.clone(), ExecutionState::removed()));
    // the fake's died(137) and remove events after the delete are ignored
    h.assert_quiet().await;
    assert!(h.fake.containers().is_empty());
}

#[tokio::test]
// [utest->swdd~allowed-workload-states~2]
// [utest->swdd~agent-workload-control-loop-delete-failed-allows-retry~1]
async fn runtime_manager_ignores_exits_after_a_delete_was_requested() {
    let fake = FakeRuntime::new();
    fake.fail_deletes(Some("Error: container is busy"));
    let mut h = harness_with(fake).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    h.rm.update_workload(vec![], vec![deleted(&a)]).await;
    assert_eq!(h.next_of(&a.instance_name).await.kind, StateKind::Stopping(Stopping::RequestedAtRuntime));
    let failed = h.next_of(&a.instance_name).await;
    assert_eq!(
        failed,
        ExecutionState::with_info(StateKind::Stopping(Stopping::DeleteFailed), "Error: container is busy")
    );
    h.fake.exit(&a.instance_name, 3).await;
    h.assert_quiet().await;
    // a second delete may try again
    h.fake.clear_failures();
    h.rm.update_workload(vec![], vec![deleted(&a)]).await;
    h.wait_for(&a.instance_name, StateKind::Removed).await;
    assert!(h.fake.containers().is_empty());
}

#[tokio::test]
async fn runtime_manager_reports_exit_and_external_removal() {
    let mut h = harness().await;
    let (a, b) = (spec("a"), spec("b"));
    h.rm.server_hello(vec![a.clone(), b.clone()]).await;
    h.running(&a).await;
    h.running(&b).await;
    h.fake.exit(&a.instance_name, 3).await;
    let st = h.next_of(&a.instance_name).await;
    assert_eq!(st, ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), "Exit code: '3'"));
    h.fake.remove_externally(&b.instance_name).await;
    assert_eq!(h.next_of(&b.instance_name).await.kind, StateKind::Failed(Failed::Lost));
}

#[tokio::test]
// [utest->swdd~agent-existing-workloads-resume-existing~2]
// [utest->swdd~agent-existing-workloads-delete-unneeded~1]
// [utest->swdd~agent-initial-list-existing-workloads~1]
// [utest->swdd~agent-existing-workloads-finds-list~1]
// [utest->swdd~agent-facade-forwards-list-reusable-workloads-call~1]
// [utest->swdd~agent-existing-workloads-starts-new-if-not-found~1]
// [utest->swdd~agent-resume-workload~2]
// [utest->swdd~agent-workload-control-loop-executes-resume~1]
// [utest->swdd~agent-delete-old-workload-without-sending-workload-states~1]
// [utest->swdd~agent-existing-workloads-replace-updated~2]
async fn runtime_manager_resume_keeps_matching_instance_and_deletes_leftovers() {
    let fake = FakeRuntime::new();
    let (keep, fresh) = (spec("keep"), spec("fresh"));
    let stale_hash = spec_with("moved", "podman", "image: old\n");
    let moved = spec_with("moved", "podman", "image: new\n");
    let gone = spec("gone");
    fake.insert_existing(keep.instance_name.clone(), ExecutionState::succeeded());
    fake.insert_existing(stale_hash.instance_name.clone(), ExecutionState::running());
    fake.insert_existing(gone.instance_name.clone(), ExecutionState::running());
    let keep_id = fake.workload_id_of(&keep.instance_name).unwrap();
    let mut h = harness_with(fake).await;
    h.rm.server_hello(vec![keep.clone(), fresh.clone(), moved.clone()]).await;
    let seen = h.until_all_running(&[&keep, &fresh, &moved]).await;
    // Unchanged and succeeded: its container runs again (as in Ankaios).
    assert_eq!(
        seen[&keep.instance_name],
        [ExecutionState::with_info(starting(), "Triggered at runtime."), ExecutionState::running()]
    );
    assert_eq!(h.fake.started(), vec![keep.instance_name.clone()], "started in place");
    assert_eq!(h.fake.workload_id_of(&keep.instance_name), Some(keep_id), "the same container");
    let mut created = h.fake.created();
    created.sort();
    let mut expected = vec![fresh.instance_name.clone(), moved.instance_name.clone()];
    expected.sort();
    assert_eq!(created, expected, "the matching instance must not be created again");
    tokio::time::timeout(Duration::from_secs(5), async {
        while h.fake.deleted().len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("leftovers deleted");
    let deleted = h.fake.deleted();
    assert!(deleted.contains(&gone.instance_name) && deleted.contains(&stale_hash.instance_name), "{deleted:?}");
    let calls = h.fake.calls();
    let del = calls.iter().position(|c| c == &FakeCall::Delete(stale_hash.instance_name.clone())).unwrap();
    let add = calls.iter().position(|c| c == &FakeCall::Create(moved.instance_name.clone())).unwrap();
    assert!(del < add, "old instance is removed before the new one is created: {calls:?}");
}

#[tokio::test]
async fn runtime_manager_second_hello_deletes_workloads_missing_from_it() {
    let mut h = harness().await;
    let (a, b) = (spec("a"), spec("b"));
    h.rm.server_hello(vec![a.clone(), b.clone()]).await;
    h.running(&a).await;
    h.running(&b).await;
    h.rm.server_hello(vec![a.clone()]).await;
    h.wait_for(&b.instance_name, StateKind::Removed).await;
    assert_eq!(h.fake.created().len(), 2, "a is kept, not recreated");
    assert_eq!(h.fake.deleted(), vec![b.instance_name.clone()]);
}

#[tokio::test]
async fn runtime_manager_ignores_workloads_of_other_agents() {
    let mut h = harness().await;
    let wl = Workload {
        agent: "other".into(),
        runtime: "podman".into(),
        runtime_config: "image: a\n".into(),
        ..Default::default()
    };
    let foreign = WorkloadSpec::new(&WorkloadName::new("f").unwrap(), &AgentName::new("other").unwrap(), wl);
    h.rm.server_hello(vec![foreign]).await;
    h.assert_quiet().await;
    assert!(h.fake.created().is_empty());
}

#[tokio::test]
async fn runtime_manager_reports_running_when_create_returns_and_ignores_lagging_events() {
    let mut h = harness_with(FakeRuntime::like_podman()).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
    // The lagging create/start events must not flap the state back to Pending.
    let created = h.fake.created().pop().expect("created");
    h.fake.exit(&created, 3).await;
    // A repeated Running is dropped later by the AgentManager; a Pending is a flap.
    let mut next = h.next_of(&a.instance_name).await;
    while next.kind == StateKind::Running {
        next = h.next_of(&a.instance_name).await;
    }
    assert_eq!(next.kind, StateKind::Failed(Failed::ExecFailed), "{next}");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~workload-control-loop-checks-workload-state-validity~1]
async fn runtime_manager_keeps_an_exit_read_from_the_exit_file_against_lagging_start_news() {
    let mut h = harness_with(FakeRuntime::like_podman()).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.wait_for(&a.instance_name, StateKind::Running).await;
    let id = h.fake.workload_id_of(&a.instance_name).expect("created");
    // conmon's exit file is read first ...
    h.fake.exit_file(&a.instance_name, 0).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::succeeded());
    // ... then the stream's late `start` event and a reconcile from before
    // podman's cleanup (still listing it running) must not undo it.
    h.fake.emit_for(&a.instance_name, &id, Observed::State(ExecutionState::running())).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    h.fake.reconcile(AGENT).await;
    h.assert_quiet().await;
    // The stream's own `died` confirms the exit (repeated, so not reported again).
    h.fake.exit(&a.instance_name, 0).await;
    h.assert_quiet().await;
    // From now on a start is news: the container was started again.
    h.fake.set_state(&a.instance_name, ExecutionState::running()).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
}

#[tokio::test(start_paused = true)]
// [utest->swdd~workload-control-loop-checks-workload-state-validity~1]
async fn runtime_manager_trusts_a_reconcile_again_once_the_exit_file_is_long_past() {
    let mut h = harness_with(FakeRuntime::like_podman()).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.wait_for(&a.instance_name, StateKind::Running).await;
    h.fake.exit_file(&a.instance_name, 2).await;
    assert_eq!(h.next_of(&a.instance_name).await.kind, StateKind::Failed(Failed::ExecFailed));
    // The stream never confirmed the exit; the container runs again (an
    // external `podman start`). A reconcile long after the exit file shows it.
    tokio::time::advance(crate::workload::policy::EXIT_AHEAD_WINDOW + Duration::from_secs(1)).await;
    h.fake.reconcile(AGENT).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
}

#[tokio::test(start_paused = true)]
async fn runtime_manager_exit_file_after_the_died_event_changes_nothing() {
    let mut h = harness_with(FakeRuntime::like_podman()).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.wait_for(&a.instance_name, StateKind::Running).await;
    h.fake.exit(&a.instance_name, 0).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::succeeded());
    h.fake.exit_file(&a.instance_name, 0).await;
    h.assert_quiet().await;
    // No exit is pending confirmation, so a later start is reported at once.
    h.fake.set_state(&a.instance_name, ExecutionState::running()).await;
    assert_eq!(h.next_of(&a.instance_name).await, ExecutionState::running());
}

#[tokio::test]
async fn runtime_manager_files_on_a_runtime_without_files_fail_before_any_file_is_written() {
    let mut h = harness_with(FakeRuntime::without_files()).await;
    let mut a = spec("a");
    a.workload.files = vec![ank_common::workload::File {
        mount_point: "/etc/app.conf".into(),
        content: ank_common::workload::FileContent::Data("x".into()),
    }];
    h.rm.server_hello(vec![a.clone()]).await;
    let state = h.wait_for(&a.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert!(state.additional_info.contains("files are not supported"), "{state}");
    assert!(h.fake.created().is_empty(), "nothing is created");
    let folder = h.io.path().join(a.instance_name.folder_name());
    assert!(!folder.join("files").exists(), "no files are written for it");
}
