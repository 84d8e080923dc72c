//! Tests of feature K7 through the RuntimeManager, its control loops and the
//! FakeRuntime under a paused clock: by default finished workloads keep
//! their containers for ever (as in Ankaios); with the opt-in retention of
//! 1 m / 72 h they are reaped after it, a reaped workload is not run again after an agent
//! restart unless its spec changed, and orphaned containers are removed at
//! start and at every reconcile.

use std::time::Duration;

use ank_common::execution_state::Failed;
use ank_common::workload::{RestartPolicy, WorkloadSpec};
use ank_common::workload_events::EventKind;
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadInstanceName, WorkloadName};
use tokio::time::Instant;

use super::RuntimeRegistry;
use super::tests::{Harness, harness, harness_in, spec, spec_with};
use crate::runtime_connectors::fake::FakeRuntime;
use crate::workload::EventReport;
use crate::workload::retention::RetainFor;
use crate::workload::retention::Retention;

const AGENT: &str = "agent_A";

fn job(name: &str, policy: RestartPolicy) -> WorkloadSpec {
    let mut s = spec(name);
    s.workload.restart_policy = policy;
    s
}

/// Polls `done` for up to one (paused) second; a busy loop would stop the
/// paused clock from advancing.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("{what}: not reached");
}

impl Harness {
    fn has_container(&self, s: &WorkloadSpec) -> bool {
        self.fake.workload_id_of(&s.instance_name).is_some()
    }

    /// Runs of `s`: its creates and its starts in place.
    fn runs_of(&self, s: &WorkloadSpec) -> usize {
        let starts = self.fake.started().into_iter().filter(|c| *c == s.instance_name).count();
        self.fake.created().iter().filter(|c| **c == s.instance_name).count() + starts
    }

    /// The events of `kind` reported so far.
    fn events_of(&mut self, kind: EventKind) -> Vec<EventReport> {
        std::iter::from_fn(|| self.events.try_recv().ok()).filter(|e| e.kind == kind).collect()
    }

    /// Runs `s` (NEVER restarted) until it exits with `code`; returns when
    /// the loop saw the exit, which starts the retention.
    async fn run_to_exit(&mut self, s: &WorkloadSpec, code: i32) -> Instant {
        self.running(s).await;
        self.fake.exit(&s.instance_name, code).await;
        let end = if code == 0 { StateKind::Succeeded } else { StateKind::Failed(Failed::ExecFailed) };
        self.wait_for(&s.instance_name, end).await;
        Instant::now()
    }
}

/// The io folder of `h`, taken out before `h` is dropped (the agent stops).
fn take_io(h: &mut Harness) -> tempfile::TempDir {
    std::mem::replace(&mut h.io, tempfile::tempdir().expect("temp io folder"))
}

/// The opt-in retention these tests switch on: `--retain-succeeded 1m
/// --retain-failed 72h`.
fn reaping() -> Retention {
    Retention::after(Duration::from_secs(60), Duration::from_secs(72 * 3600))
}

/// A harness whose agent reaps with [`reaping`].
async fn reaping_harness() -> Harness {
    let io = tempfile::tempdir().expect("temp io folder");
    harness_in(FakeRuntime::new().into(), RuntimeRegistry::new(), io, reaping(), Default::default()).await
}

/// A new RuntimeManager on the same fake runtime and io folder: an agent
/// restart, still reaping with [`reaping`].
async fn restart(mut h: Harness) -> Harness {
    let (fake, io) = (h.fake.clone(), take_io(&mut h));
    drop(h);
    tokio::time::sleep(Duration::from_millis(10)).await;
    harness_in(fake, RuntimeRegistry::new(), io, reaping(), Default::default()).await
}

#[tokio::test(start_paused = true)]
// [test of feature K7: by default nothing is reaped, as in Ankaios]
async fn retention_default_keeps_a_succeeded_and_a_failed_workload_for_ever() {
    let mut h = harness().await;
    let (ok, bad) = (job("ok", RestartPolicy::Never), job("bad", RestartPolicy::Never));
    h.rm.server_hello(vec![ok.clone()]).await;
    let ended = h.run_to_exit(&ok, 0).await;
    h.rm.update_workload(vec![bad.clone()], vec![]).await;
    h.run_to_exit(&bad, 3).await;
    tokio::time::sleep_until(ended + Duration::from_secs(120)).await;
    assert!(h.has_container(&ok) && h.has_container(&bad), "both kept after 2 minutes");
    tokio::time::sleep_until(ended + Duration::from_secs(73 * 3600)).await;
    assert!(h.has_container(&ok), "the succeeded one is kept after 73 h");
    assert!(h.has_container(&bad), "the failed one is kept after 73 h");
    assert_eq!(h.fake.state_of(&bad.instance_name), Some(ExecutionState::failed("Exit code: '3'")));
    assert!(h.fake.deleted().is_empty(), "nothing removed");
    assert!(h.events_of(EventKind::Reaped).is_empty());
    h.assert_quiet().await;
    assert_eq!((h.runs_of(&ok), h.runs_of(&bad)), (1, 1));
}

#[tokio::test(start_paused = true)]
// [test of feature K7: each switch reaps its own end only]
async fn retention_each_switch_reaps_only_its_end() {
    let io = tempfile::tempdir().expect("temp io folder");
    let only_failed = Retention { failed: RetainFor::After(Duration::from_secs(5)), ..Retention::default() };
    let mut h =
        harness_in(FakeRuntime::new().into(), RuntimeRegistry::new(), io, only_failed, Default::default()).await;
    let (ok, bad) = (job("ok", RestartPolicy::Never), job("bad", RestartPolicy::Never));
    h.rm.server_hello(vec![ok.clone()]).await;
    let ended = h.run_to_exit(&ok, 0).await;
    h.rm.update_workload(vec![bad.clone()], vec![]).await;
    h.run_to_exit(&bad, 1).await;
    tokio::time::sleep_until(ended + Duration::from_secs(6)).await;
    eventually("the failed one reaped", || !h.has_container(&bad)).await;
    tokio::time::sleep_until(ended + Duration::from_secs(73 * 3600)).await;
    assert!(h.has_container(&ok), "--retain-succeeded never keeps the succeeded one");
    let reaped = h.events_of(EventKind::Reaped);
    assert_eq!(reaped.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(), ["retention failed 5s"]);
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_job_exit_0_container_exists_at_59s_and_is_gone_at_61s() {
    let mut h = reaping_harness().await;
    let j = job("job", RestartPolicy::Never);
    h.rm.server_hello(vec![j.clone()]).await;
    let ended = h.run_to_exit(&j, 0).await;
    tokio::time::sleep_until(ended + Duration::from_secs(59)).await;
    assert!(h.has_container(&j), "kept for its retention of 1 minute");
    assert!(h.events_of(EventKind::Reaped).is_empty());
    tokio::time::sleep_until(ended + Duration::from_secs(61)).await;
    assert!(!h.has_container(&j), "removed after its retention");
    let reaped = h.events_of(EventKind::Reaped);
    assert_eq!(reaped.len(), 1, "{reaped:?}");
    assert_eq!(
        (reaped[0].instance_name.clone(), reaped[0].reason.as_str()),
        (j.instance_name.clone(), "retention succeeded 1m")
    );
    // The state stays Succeeded: no Stopping, no Removed.
    h.assert_quiet().await;
    // A repeated hello (a reconnect) with the same spec runs nothing again.
    h.rm.server_hello(vec![j.clone()]).await;
    assert_eq!(h.next_of(&j.instance_name).await, ExecutionState::succeeded());
    h.assert_quiet().await;
    assert_eq!(h.runs_of(&j), 1);
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_failed_job_container_is_still_present_after_an_hour() {
    let mut h = reaping_harness().await;
    let j = job("job", RestartPolicy::Never);
    h.rm.server_hello(vec![j.clone()]).await;
    let ended = h.run_to_exit(&j, 3).await;
    tokio::time::sleep_until(ended + Duration::from_secs(3600)).await;
    assert!(h.has_container(&j), "a failed workload is kept for 72 h");
    assert_eq!(h.fake.state_of(&j.instance_name), Some(ExecutionState::failed("Exit code: '3'")));
    tokio::time::sleep_until(ended + Duration::from_secs(72 * 3600 + 1)).await;
    eventually("reaped after 72 h", || !h.has_container(&j)).await;
    let reaped = h.events_of(EventKind::Reaped);
    assert_eq!(reaped.iter().map(|e| e.reason.as_str()).collect::<Vec<_>>(), ["retention failed 72h"]);
    h.assert_quiet().await;
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_always_restarting_workload_is_never_reaped() {
    let mut h = reaping_harness().await;
    let w = job("svc", RestartPolicy::Always);
    h.rm.server_hello(vec![w.clone()]).await;
    h.running(&w).await;
    for _ in 0..3 {
        h.fake.exit(&w.instance_name, 0).await;
        h.running(&w).await;
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(h.has_container(&w), "restarted, not reaped");
    }
    assert_eq!(h.runs_of(&w), 4);
    assert!(h.events_of(EventKind::Reaped).is_empty());
    // ON_FAILURE after a success ends for good and is reaped.
    let once = job("once", RestartPolicy::OnFailure);
    h.rm.update_workload(vec![once.clone()], vec![]).await;
    let ended = h.run_to_exit(&once, 0).await;
    tokio::time::sleep_until(ended + Duration::from_secs(61)).await;
    eventually("ON_FAILURE job reaped after success", || !h.has_container(&once)).await;
    assert!(h.has_container(&w));
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_update_and_delete_cancel_a_pending_reap() {
    let mut h = reaping_harness().await;
    let (a, b) = (job("a", RestartPolicy::Never), job("b", RestartPolicy::Never));
    h.rm.server_hello(vec![a.clone()]).await;
    h.run_to_exit(&a, 0).await;
    h.rm.update_workload(vec![b.clone()], vec![]).await;
    h.run_to_exit(&b, 0).await;
    let a2 = spec_with("a", "podman", "image: localhost/a:2\n");
    h.rm.update_workload(vec![a2.clone()], vec![super::tests::deleted(&a)]).await;
    h.wait_for(&a.instance_name, StateKind::Removed).await;
    h.running(&a2).await;
    h.rm.update_workload(vec![], vec![super::tests::deleted(&b)]).await;
    h.wait_for(&b.instance_name, StateKind::Removed).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(h.has_container(&a2), "the new instance runs");
    assert!(h.events_of(EventKind::Reaped).is_empty(), "no reap of replaced or deleted workloads");
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_agent_restart_after_reaping_does_not_run_the_job_again() {
    let mut h = reaping_harness().await;
    let j = job("job", RestartPolicy::Never);
    let failing = job("bad", RestartPolicy::Never);
    h.rm.server_hello(vec![j.clone()]).await;
    let ended = h.run_to_exit(&j, 0).await;
    h.rm.update_workload(vec![failing.clone()], vec![]).await;
    h.run_to_exit(&failing, 2).await;
    tokio::time::sleep_until(ended + Duration::from_secs(61)).await;
    eventually("reaped", || !h.has_container(&j)).await;

    let mut h = restart(h).await;
    h.rm.server_hello(vec![j.clone(), failing.clone()]).await;
    assert_eq!(h.next_of(&j.instance_name).await, ExecutionState::succeeded(), "the final state it had");
    // The failed one is still in its retention: its container is taken over.
    assert!(h.has_container(&failing));
    tokio::time::sleep(Duration::from_secs(120)).await;
    assert_eq!(h.runs_of(&j), 1, "not started again");
    assert_eq!(h.runs_of(&failing), 1, "not started again");
    assert!(!h.has_container(&j));
    // Once more, after the failed one is reaped too.
    tokio::time::sleep(Duration::from_secs(72 * 3600)).await;
    eventually("failed job reaped", || !h.has_container(&failing)).await;
    let mut h = restart(h).await;
    h.rm.server_hello(vec![j.clone(), failing.clone()]).await;
    let mut seen = [h.next().await, h.next().await];
    seen.sort_by(|x, y| x.instance_name.cmp(&y.instance_name));
    assert_eq!(seen[0].execution_state, ExecutionState::failed("Exit code: '2'"));
    assert_eq!(seen[1].execution_state, ExecutionState::succeeded());
    h.assert_quiet().await;
    assert_eq!(h.fake.created().len(), 2, "nothing started again");
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn retention_changed_or_deleted_spec_runs_again_after_restart() {
    let mut h = reaping_harness().await;
    let (a, b) = (job("a", RestartPolicy::Never), job("b", RestartPolicy::Never));
    h.rm.server_hello(vec![a.clone()]).await;
    let ended = h.run_to_exit(&a, 0).await;
    h.rm.update_workload(vec![b.clone()], vec![]).await;
    h.run_to_exit(&b, 0).await;
    tokio::time::sleep_until(ended + Duration::from_secs(61)).await;
    eventually("both reaped", || !h.has_container(&a) && !h.has_container(&b)).await;

    // a: another runtimeConfig (a new instance); b: the same instance with
    // another restart policy (the spec changed all the same).
    let a2 = spec_with("a", "podman", "image: localhost/a:2\n");
    let b2 = job("b", RestartPolicy::OnFailure);
    assert_eq!(b2.instance_name, b.instance_name);
    let mut h = restart(h).await;
    h.rm.server_hello(vec![a2.clone(), b2.clone()]).await;
    eventually("both run again", || h.has_container(&a2) && h.has_container(&b2)).await;
    assert_eq!(h.runs_of(&b2), 2, "b ran again");

    // A workload deleted while the agent was away forgets that it finished.
    let c = job("c", RestartPolicy::Never);
    h.rm.update_workload(vec![c.clone()], vec![]).await;
    let ended = h.run_to_exit(&c, 0).await;
    tokio::time::sleep_until(ended + Duration::from_secs(61)).await;
    eventually("c reaped", || !h.has_container(&c)).await;
    let h = restart(h).await;
    h.rm.server_hello(vec![a2.clone(), b2.clone()]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!((h.runs_of(&a2), h.runs_of(&b2)), (1, 2), "running workloads are taken over");
    let mut h = restart(h).await;
    h.rm.server_hello(vec![a2.clone(), b2.clone(), c.clone()]).await;
    h.running(&c).await;
    assert_eq!(h.runs_of(&c), 2, "c ran again");
}

fn instance_of(agent: &str, name: &str) -> WorkloadInstanceName {
    WorkloadInstanceName::new(&WorkloadName::new(name).unwrap(), &AgentName::new(agent).unwrap(), "image: x\n")
}

#[tokio::test(start_paused = true)]
// [test of feature K7]
async fn orphans_are_removed_at_start_and_at_the_next_reconcile_but_not_others() {
    let fake = FakeRuntime::new();
    let at_start = instance_of(AGENT, "stray");
    let foreign = instance_of("agent_B", "theirs");
    fake.insert_existing(at_start.clone(), ExecutionState::running());
    fake.insert_existing(foreign.clone(), ExecutionState::running());
    let mut h = super::tests::harness_with(fake).await;
    // Before the first ServerHello nothing is an orphan: the agent does not
    // know yet what is desired.
    h.fake.reconcile(AGENT).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(h.fake.deleted().is_empty());

    let (svc, j) = (spec("svc"), job("job", RestartPolicy::Never));
    h.rm.server_hello(vec![svc.clone()]).await;
    h.running(&svc).await;
    h.rm.update_workload(vec![j.clone()], vec![]).await;
    h.run_to_exit(&j, 0).await;
    eventually("orphan removed at start", || h.fake.workload_id_of(&at_start).is_none()).await;

    let later = instance_of(AGENT, "later");
    h.fake.insert_existing(later.clone(), ExecutionState::running());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(h.fake.workload_id_of(&later).is_some(), "removed at a reconcile, not before");
    h.fake.reconcile(AGENT).await;
    eventually("orphan removed at the reconcile", || h.fake.workload_id_of(&later).is_none()).await;
    assert!(h.has_container(&svc), "a running workload of the desired state stays");
    assert!(h.has_container(&j), "a finished workload kept for its retention stays");
    assert!(h.fake.workload_id_of(&foreign).is_some(), "another agent's container stays");
    let mut deleted = h.fake.deleted();
    deleted.sort();
    assert_eq!(deleted, vec![later, at_start]);
}
