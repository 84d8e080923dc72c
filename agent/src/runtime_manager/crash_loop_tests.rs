//! Tests of the crash-loop limits (issue 39) through the RuntimeManager,
//! its control loops and the FakeRuntime, on virtual time: delayed
//! restarts with growing delays, the restart limit, and what cancels or
//! starts them over. Without `restartBackoff` (and without the agent's
//! `--restart-backoff`) restarts stay immediate: `restart_tests`.

use std::time::Duration;

use ank_common::execution_state::Failed;
use ank_common::health_spec::RestartBackoff;
use ank_common::workload::{RestartPolicy, WorkloadSpec};
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind};
use tokio::time::Instant;

use super::tests::{Harness, deleted, harness_with, harness_with_restart_backoff, spec, spec_with};
use crate::runtime_connectors::fake::FakeRuntime;
use crate::workload::crash_loop::parse_agent_backoff;

const S: Duration = Duration::from_secs(1);

fn crashing(name: &str, backoff: Option<&str>) -> WorkloadSpec {
    let mut s = spec(name);
    s.workload.restart_policy = RestartPolicy::Always;
    s.workload.restart_backoff = backoff.map(|b| serde_saphyr::from_str::<RestartBackoff>(b).unwrap());
    s
}

fn failed() -> StateKind {
    StateKind::Failed(Failed::ExecFailed)
}

impl Harness {
    /// The reason of the next event of `kind` (others are skipped).
    async fn next_event(&mut self, kind: EventKind) -> String {
        loop {
            let e = tokio::time::timeout(Duration::from_secs(3600), self.events.recv())
                .await
                .expect("no event within an hour")
                .expect("event channel closed");
            if e.kind == kind {
                return e.reason;
            }
        }
    }

    /// Lets `s` exit with code 1 and returns how long until it runs again.
    async fn exit_and_time_the_restart(&mut self, s: &WorkloadSpec) -> Duration {
        self.fake.exit(&s.instance_name, 1).await;
        let exited = Instant::now();
        self.running(s).await;
        exited.elapsed()
    }
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: restarts wait growing delays and stop at the limit]
async fn crash_loop_restarts_wait_doubling_delays_then_stop_at_the_limit_with_the_reason() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("crashy", Some("{initialDelay: 1s, maxDelay: 8s, attempts: 4, interval: 10m}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    for n in 0..4u32 {
        let ceiling = (S * 2u32.pow(n)).min(8 * S);
        let waited = h.exit_and_time_the_restart(&s).await;
        assert!(waited >= ceiling / 2 && waited <= ceiling, "restart {}: {waited:?} vs {ceiling:?}", n + 1);
        let reason = h.next_event(EventKind::CrashLoop).await;
        assert!(reason.starts_with(&format!("restart {} in ", n + 1)) && reason.ends_with("(backoff)"), "{reason}");
        assert_eq!(h.next_event(EventKind::Restarted).await, "restartPolicy Always after Failed(ExecFailed)");
    }
    // The 5th exit within 10 minutes is final.
    h.fake.exit(&s.instance_name, 1).await;
    let limit = "restart limit reached: 4 restarts within 10m; not restarted again";
    assert_eq!(h.next_event(EventKind::CrashLoop).await, limit);
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::failed("Exit code: '1'"));
    let with_reason = h.next_of(&s.instance_name).await;
    assert_eq!(with_reason, ExecutionState::failed(format!("Exit code: '1'; {limit}")), "Ankaios' state, our reason");
    tokio::time::sleep(3600 * S).await;
    assert_eq!(h.fake.created().len(), 5, "one create and 4 restarts");
    // A reconcile repeating the exit changes nothing.
    h.fake.reconcile(super::tests::AGENT).await;
    h.assert_quiet().await;
    assert_eq!(h.fake.created().len(), 5);
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: while it waits, the workload shows its exit]
async fn crash_loop_waiting_workload_shows_its_exit_and_is_not_running() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("waiter", Some("{initialDelay: 20s, maxDelay: 20s}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 3).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::failed("Exit code: '3'"));
    tokio::time::sleep(9 * S).await;
    h.assert_quiet().await;
    assert_eq!(h.fake.created().len(), 1, "still waiting (at least 10 s)");
    assert_eq!(h.fake.state_of(&s.instance_name).map(|st| st.kind), Some(failed()));
    h.running(&s).await;
    assert_eq!(h.fake.created().len(), 2);
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: a delete during the wait cancels the restart]
async fn crash_loop_delete_during_the_wait_cancels_the_pending_restart() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("gone", Some("{initialDelay: 30s, maxDelay: 30s}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 1).await;
    h.next_event(EventKind::CrashLoop).await;
    h.rm.update_workload(vec![], vec![deleted(&s)]).await;
    h.wait_for(&s.instance_name, StateKind::Removed).await;
    tokio::time::sleep(600 * S).await;
    assert_eq!(h.fake.created().len(), 1, "not restarted after its delete");
    assert!(h.fake.containers().is_empty());
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: an update cancels the wait and starts the limit over]
async fn crash_loop_update_cancels_the_wait_and_a_new_spec_starts_the_limit_over() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let backoff = Some("{initialDelay: 30s, maxDelay: 30s, attempts: 1, interval: 1h}");
    let old = crashing("upd", backoff);
    h.rm.server_hello(vec![old.clone()]).await;
    h.running(&old).await;
    // The one restart allowed, then the limit.
    assert!(h.exit_and_time_the_restart(&old).await >= 15 * S);
    h.fake.exit(&old.instance_name, 1).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart 1 in "));
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart limit reached"));
    // A new spec runs at once, and may be restarted again.
    let mut new = spec_with("upd", "podman", "image: localhost/upd:2\n");
    new.workload.restart_policy = RestartPolicy::Always;
    new.workload.restart_backoff = old.workload.restart_backoff.clone();
    h.rm.update_workload(vec![new.clone()], vec![deleted(&old)]).await;
    h.running(&new).await;
    h.fake.exit(&new.instance_name, 1).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart 1 in "), "the limit starts over");
    // An update while that restart waits: the new spec starts at once,
    // the old restart never happens.
    let mut newer = spec_with("upd", "podman", "image: localhost/upd:3\n");
    newer.workload.restart_policy = RestartPolicy::Always;
    h.rm.update_workload(vec![newer.clone()], vec![deleted(&new)]).await;
    h.running(&newer).await;
    tokio::time::sleep(600 * S).await;
    let created = h.fake.created();
    assert_eq!(created.iter().filter(|i| **i == new.instance_name).count(), 1, "{created:?}");
    assert_eq!(created.iter().filter(|i| **i == newer.instance_name).count(), 1, "{created:?}");
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: a change of only restartBackoff starts the limit over]
async fn crash_loop_changed_restart_backoff_alone_starts_a_stopped_workload_again() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("tune", Some("{initialDelay: 1s, maxDelay: 1s, attempts: 0}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 1).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart limit reached: 0 restarts"));
    // The same spec again (a resync, an add, a reconnect's hello) leaves it stopped.
    h.rm.resync_workload(vec![s.clone()], vec![]).await;
    h.rm.update_workload(vec![s.clone()], vec![]).await;
    h.rm.server_hello(vec![s.clone()]).await;
    tokio::time::sleep(60 * S).await;
    assert_eq!(h.fake.created().len(), 1);
    let looser = crashing("tune", Some("{initialDelay: 1s, maxDelay: 1s, attempts: 5}"));
    assert_eq!(looser.instance_name, s.instance_name, "the same instance: only restartBackoff changed");
    h.rm.update_workload(vec![looser.clone()], vec![]).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart 1 in "));
    h.running(&s).await;
    assert_eq!(h.fake.created().len(), 2);
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: a long run starts the delays over]
async fn crash_loop_delays_start_over_after_running_reset_after() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("flaky", Some("{initialDelay: 2s, maxDelay: 1m, resetAfter: 5m}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    for _ in 0..4 {
        h.exit_and_time_the_restart(&s).await;
    }
    let fifth = h.exit_and_time_the_restart(&s).await;
    assert!(fifth >= 16 * S, "doubled four times: {fifth:?}");
    tokio::time::sleep(5 * 60 * S).await;
    let after_a_long_run = h.exit_and_time_the_restart(&s).await;
    assert!(after_a_long_run <= 2 * S, "started over: {after_a_long_run:?}");
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: the agent's --restart-backoff for workloads without their own]
async fn crash_loop_agent_default_delays_workloads_without_their_own() {
    let agent = parse_agent_backoff("10s,10s").unwrap();
    let mut h = harness_with_restart_backoff(FakeRuntime::new(), agent, Default::default()).await;
    let (plain, own) = (crashing("plain", None), crashing("own", Some("{initialDelay: 1m, maxDelay: 1m}")));
    h.rm.server_hello(vec![plain.clone(), own.clone()]).await;
    h.until_all_running(&[&plain, &own]).await;
    let waited = h.exit_and_time_the_restart(&plain).await;
    assert!(waited >= 5 * S && waited <= 10 * S, "the agent's delay: {waited:?}");
    let waited = h.exit_and_time_the_restart(&own).await;
    assert!(waited >= 30 * S && waited <= 60 * S, "its own delay: {waited:?}");
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: off by default, restarts happen at once as in Ankaios]
async fn crash_loop_off_by_default_restarts_at_once_without_crash_loop_events() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("plain", None);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    for _ in 0..30 {
        assert_eq!(h.exit_and_time_the_restart(&s).await, Duration::ZERO);
    }
    assert_eq!(h.fake.created().len(), 31);
    while let Ok(e) = h.events.try_recv() {
        assert_ne!(e.kind, EventKind::CrashLoop, "{e:?}");
    }
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: the server's resync of a changed spec starts the limit over]
async fn crash_loop_a_resync_of_a_changed_spec_starts_the_limit_over() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("resynced", Some("{attempts: 0}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 1).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart limit reached: 0 restarts"));
    let mut changed = crashing("resynced", Some("{attempts: 0}"));
    changed.workload.restart_policy = RestartPolicy::OnFailure;
    h.rm.resync_workload(vec![changed.clone()], vec![]).await;
    h.running(&changed).await;
    assert_eq!(h.fake.created().len(), 2, "the changed spec runs at once");
    h.fake.exit(&changed.instance_name, 1).await;
    assert!(h.next_event(EventKind::CrashLoop).await.starts_with("restart limit reached"), "0 restarts again");
    assert_eq!(h.fake.created().len(), 2);
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: a workload lost while its restart waits is not restarted]
async fn crash_loop_a_container_lost_during_the_wait_is_not_restarted() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("lost", Some("{initialDelay: 30s, maxDelay: 30s}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 1).await;
    h.next_event(EventKind::CrashLoop).await;
    h.fake.remove_externally(&s.instance_name).await;
    assert_eq!(
        h.wait_for(&s.instance_name, StateKind::Failed(Failed::Lost)).await.kind,
        StateKind::Failed(Failed::Lost)
    );
    tokio::time::sleep(600 * S).await;
    assert_eq!(h.fake.created().len(), 1, "as Ankaios: a lost workload is not restarted");
}

#[tokio::test(start_paused = true)]
// [test of feature issue 39: after a success the delayed restart still starts the same container]
async fn crash_loop_a_delayed_restart_after_success_starts_the_same_container_again() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = crashing("job", Some("{initialDelay: 4s, maxDelay: 4s}"));
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    let first = h.fake.workload_id_of(&s.instance_name);
    h.fake.exit(&s.instance_name, 0).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::succeeded(), "shown while it waits");
    let exited = Instant::now();
    h.running(&s).await;
    assert!(exited.elapsed() >= 2 * S, "{:?}", exited.elapsed());
    assert_eq!(h.fake.workload_id_of(&s.instance_name), first, "started again in place, its logs kept");
    assert_eq!((h.fake.started().len(), h.fake.created().len()), (1, 1));
}
