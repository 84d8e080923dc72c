//! The acceptance tests of the scheduler features K1 (priority), K2
//! (quota, QuotaBlocked), K4 (preemption) and K5 (isolated jobs), through
//! the RuntimeManager, its control loops and the FakeRuntime, under paused
//! time.

use std::time::Duration;

use ank_common::execution_state::Pending;
use ank_common::quota::{MIB, QuotaLimits};
use ank_common::workload::{AddCondition, RestartPolicy, WorkloadSpec};
use ank_common::workload_events::{EventKind, EventRing};
use ank_common::{StateKind, WorkloadInstanceName, WorkloadName};
use tokio::time::{Instant, sleep_until};

use super::tests::{Harness, deleted, harness_with_scheduler, spec, spec_with};
use crate::runtime_connectors::fake::FakeRuntime;
use crate::workload::EventReport;
use crate::workload_scheduler::{PreemptionSettings, SchedulerSettings};

fn quota(max_workloads: u32) -> SchedulerSettings {
    SchedulerSettings { quota: QuotaLimits { max_workloads, max_memory: 0 }, ..Default::default() }
}

fn prio(mut s: WorkloadSpec, priority: u32) -> WorkloadSpec {
    s.workload.priority = Some(priority);
    s
}

fn restart(mut s: WorkloadSpec, policy: RestartPolicy) -> WorkloadSpec {
    s.workload.restart_policy = policy;
    s
}

fn job(name: &str) -> WorkloadSpec {
    restart(spec(name), RestartPolicy::Never)
}

fn quota_blocked() -> StateKind {
    StateKind::Pending(Pending::QuotaBlocked)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

impl Harness {
    fn creates_of_instance(&self, instance: &WorkloadInstanceName) -> usize {
        self.fake.created().iter().filter(|c| *c == instance).count()
    }

    /// Reads states until each of `instances` has reached `kind`.
    async fn wait_all(&mut self, instances: &[&WorkloadInstanceName], kind: StateKind) {
        let mut missing: Vec<&WorkloadInstanceName> = instances.to_vec();
        while !missing.is_empty() {
            let s = self.next().await;
            if s.execution_state.kind == kind {
                missing.retain(|i| **i != s.instance_name);
            }
        }
    }

    /// The events reported so far.
    fn drain_events(&mut self) -> Vec<EventReport> {
        let mut out = Vec::new();
        while let Ok(ev) = self.events.try_recv() {
            out.push(ev);
        }
        out
    }
}

/// The events of `instance` merged as the AgentManager merges them.
fn ring_of(events: &[EventReport], instance: &WorkloadInstanceName) -> EventRing {
    let mut ring = EventRing::default();
    for ev in events.iter().filter(|e| &e.instance_name == instance) {
        ring.record(ev.kind, &ev.reason, "t");
    }
    ring
}

#[tokio::test(start_paused = true)]
// [test of feature K1]
async fn k1_a_freed_slot_goes_to_the_higher_priority_workload() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(1)).await;
    let third = spec("third");
    h.rm.server_hello(vec![third.clone()]).await;
    h.running(&third).await;
    let (low, high) = (prio(spec("low"), 0), prio(spec("high"), 5));
    h.rm.update_workload(vec![low.clone()], vec![]).await;
    h.wait_for(&low.instance_name, quota_blocked()).await;
    h.rm.update_workload(vec![high.clone()], vec![]).await;
    h.wait_for(&high.instance_name, quota_blocked()).await;

    h.rm.update_workload(vec![], vec![deleted(&third)]).await;
    h.running(&high).await;
    tokio::time::sleep(secs(5)).await;
    assert_eq!(h.creates_of_instance(&low.instance_name), 0, "low stays Pending(QuotaBlocked)");
    assert_eq!(h.creates_of_instance(&high.instance_name), 1);
}

#[tokio::test(start_paused = true)]
// [test of feature K1]
async fn k1_ready_workloads_start_by_priority_then_apply_order() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(1)).await;
    let blocker = spec("blocker");
    h.rm.server_hello(vec![blocker.clone()]).await;
    h.running(&blocker).await;
    let order = [prio(spec("a"), 1), prio(spec("b"), 3), prio(spec("c"), 1), prio(spec("d"), 3)];
    h.rm.update_workload(order.to_vec(), vec![]).await;
    h.wait_all(&order.iter().map(|s| &s.instance_name).collect::<Vec<_>>(), quota_blocked()).await;
    h.rm.update_workload(vec![], vec![deleted(&blocker)]).await;
    // One slot: each one runs and is deleted in turn; the next takes over.
    let mut started = Vec::new();
    for _ in 0..order.len() {
        let created = loop {
            let c = h.fake.created();
            if c.len() > started.len() + 1 {
                break c.last().unwrap().clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        started.push(created.workload_name.clone());
        let s = order.iter().find(|s| s.instance_name == created).unwrap();
        h.running(s).await;
        h.rm.update_workload(vec![], vec![deleted(s)]).await;
    }
    assert_eq!(started, ["b", "d", "a", "c"]);
}

#[tokio::test(start_paused = true)]
// [test of feature K2]
async fn k2_third_workload_is_quota_blocked_counted_per_tick_and_runs_when_one_is_deleted() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(2)).await;
    let (w1, w2, w3) = (spec("w1"), spec("w2"), spec("w3"));
    h.rm.server_hello(vec![w1.clone(), w2.clone(), w3.clone()]).await;
    let blocked = h.wait_for(&w3.instance_name, quota_blocked()).await;
    assert_eq!(blocked.additional_info, "agent_A 2/2");
    h.running(&w1).await;
    h.running(&w2).await;
    tokio::time::sleep(secs(5)).await;

    let ring = ring_of(&h.drain_events(), &w3.instance_name);
    let entries = ring.to_vec();
    assert_eq!(entries.len(), 1, "one entry, not one per tick: {entries:?}");
    assert_eq!((entries[0].kind, entries[0].reason.as_str()), (EventKind::QuotaBlocked, "agent_A 2/2"));
    assert!(entries[0].count >= 5, "{entries:?}");
    assert_eq!(h.creates_of_instance(&w3.instance_name), 0, "quota-blocked attempts use no create retries");
    assert_eq!((h.quota_used.borrow().workloads, h.quota_used.borrow().memory), (2, 0));

    let t = Instant::now();
    h.rm.update_workload(vec![], vec![deleted(&w1)]).await;
    h.running(&w3).await;
    assert!(t.elapsed() < secs(1), "within one tick: {:?}", t.elapsed());
    assert_eq!(h.creates_of_instance(&w3.instance_name), 1, "the retries counter is still 0");
    h.drain_events();
    tokio::time::sleep(secs(3)).await;
    let after = ring_of(&h.drain_events(), &w3.instance_name);
    assert!(after.to_vec().iter().all(|e| e.kind != EventKind::QuotaBlocked), "stops counting once it runs");
}

#[tokio::test(start_paused = true)]
// [test of feature K2]
async fn k2_memory_quota_counts_declared_memory_and_nothing_overtakes_a_blocked_workload() {
    let settings =
        SchedulerSettings { quota: QuotaLimits { max_workloads: 0, max_memory: 2048 * MIB }, ..Default::default() };
    let mut h = harness_with_scheduler(FakeRuntime::new(), settings).await;
    let with_memory = |name: &str, mem: &str| {
        spec_with(name, "podman", &format!("image: {name}\ncommandOptions: [--memory, {mem}]\n"))
    };
    let (big, next, small) = (with_memory("big", "1536m"), with_memory("next", "1g"), with_memory("small", "256Mi"));
    h.rm.server_hello(vec![big.clone(), next.clone(), small.clone()]).await;
    let st = h.wait_for(&next.instance_name, quota_blocked()).await;
    assert_eq!(st.additional_info, "agent_A memory 1536/2048 MiB");
    let st = h.wait_for(&small.instance_name, quota_blocked()).await;
    assert_eq!(st.additional_info, "agent_A memory 1536/2048 MiB", "small would fit, but waits behind next");
    h.running(&big).await;
    assert_eq!(h.quota_used.borrow().memory, 1536 * MIB);
    h.rm.update_workload(vec![], vec![deleted(&big)]).await;
    h.running(&next).await;
    h.running(&small).await;
    assert_eq!(h.quota_used.borrow().memory, 1280 * MIB);
}

/// The K4 timeline: `a` (prio 1, t=0) and `b` (prio 1, t=10) run in two
/// slots; `c` (prio 9, preemptEnabled) comes at t=20. Returns the harness
/// and the three specs after c is quota-blocked.
async fn k4_setup(a: WorkloadSpec, b: WorkloadSpec) -> (Harness, Instant, WorkloadSpec, WorkloadSpec, WorkloadSpec) {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(2)).await;
    let t0 = Instant::now();
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    sleep_until(t0 + secs(10)).await;
    h.rm.update_workload(vec![b.clone()], vec![]).await;
    h.running(&b).await;
    sleep_until(t0 + secs(20)).await;
    let mut c = prio(spec("c"), 9);
    c.workload.policy.preempt_enabled = true;
    h.rm.update_workload(vec![c.clone()], vec![]).await;
    h.wait_for(&c.instance_name, quota_blocked()).await;
    // Nothing is stopped before t=80.
    sleep_until(t0 + Duration::from_millis(79_900)).await;
    assert!(h.fake.deleted().is_empty(), "{:?}", h.fake.deleted());
    assert_eq!(h.creates_of_instance(&c.instance_name), 0);
    (h, t0, a, b, c)
}

#[tokio::test(start_paused = true)]
// [test of feature K4]
async fn k4_preemption_timeline_stops_the_newest_lower_priority_workload_at_the_delay() {
    let a = prio(spec("a"), 1);
    let b = restart(prio(spec("b"), 1), RestartPolicy::Always);
    let (mut h, t0, a, b, c) = k4_setup(a, b).await;

    let st = h.wait_for(&b.instance_name, StateKind::Pending(Pending::Preempted)).await;
    assert_eq!(t0.elapsed(), secs(80), "preempted at t=80");
    assert_eq!(st.additional_info, "by c (prio 9)");
    h.running(&c).await;
    assert_eq!(t0.elapsed(), secs(80), "c runs at t=80");
    assert_eq!(h.fake.deleted(), vec![b.instance_name.clone()], "a untouched");
    assert!(h.fake.state_of(&a.instance_name).is_some());

    // Preemption is no failure: no restart (restartPolicy ALWAYS), no retry.
    sleep_until(t0 + Duration::from_millis(139_900)).await;
    assert_eq!(h.creates_of_instance(&b.instance_name), 1);
    let st = h.wait_for(&b.instance_name, quota_blocked()).await;
    assert_eq!(t0.elapsed(), secs(140), "eligible again after the postpone, at t=140");
    assert_eq!(st.additional_info, "agent_A 2/2", "no slot for it");
    assert_eq!(h.creates_of_instance(&b.instance_name), 1);
    let events = h.drain_events();
    let b_events = ring_of(&events, &b.instance_name).to_vec();
    assert!(b_events.iter().any(|e| e.kind == EventKind::Preempted && e.reason == "by c (prio 9)"), "{b_events:?}");
    assert!(b_events.iter().all(|e| e.kind != EventKind::Restarted), "{b_events:?}");
    assert!(ring_of(&events, &a.instance_name).is_empty());

    // Room again: b starts as any create, its retries counted from 0.
    h.rm.update_workload(vec![], vec![deleted(&c)]).await;
    let st = h.wait_for(&b.instance_name, StateKind::Pending(Pending::Starting)).await;
    assert_eq!(st.additional_info, "Triggered at runtime.");
    h.running(&b).await;
    assert_eq!(h.creates_of_instance(&b.instance_name), 2);
}

#[tokio::test(start_paused = true)]
// [test of feature K4]
async fn k4_an_exempt_workload_is_not_preempted_the_next_candidate_is() {
    let a = prio(spec("a"), 1);
    let mut b = prio(spec("b"), 1);
    b.workload.policy.preempt_exempt = true;
    let (mut h, t0, a, b, c) = k4_setup(a, b).await;
    h.wait_for(&a.instance_name, StateKind::Pending(Pending::Preempted)).await;
    assert_eq!(t0.elapsed(), secs(80));
    h.running(&c).await;
    assert_eq!(h.fake.deleted(), vec![a.instance_name.clone()], "b is exempt");
    assert!(h.fake.state_of(&b.instance_name).is_some());
}

#[tokio::test(start_paused = true)]
// [test of feature K4]
async fn k4_a_dependency_of_a_running_workload_is_implicitly_exempt() {
    // x would be the first victim (lowest priority), but y runs on it.
    let x = prio(spec("x"), 0);
    let mut y = prio(spec("y"), 2);
    y.workload.dependencies = [(WorkloadName::new("x").unwrap(), AddCondition::Running)].into();
    let (mut h, t0, x, y, c) = k4_setup(x, y).await;
    h.wait_for(&y.instance_name, StateKind::Pending(Pending::Preempted)).await;
    assert_eq!(t0.elapsed(), secs(80));
    h.running(&c).await;
    assert_eq!(h.fake.deleted(), vec![y.instance_name.clone()], "x is needed by y");
    assert!(h.fake.state_of(&x.instance_name).is_some());
}

#[tokio::test(start_paused = true)]
// [test of feature K4]
async fn k4_without_preemption_a_blocked_workload_waits_and_a_rate_caps_the_victims_per_tick() {
    // Preemption disabled: c (prio 9, no policy) waits for good.
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(1)).await;
    let (a, c) = (spec("a"), prio(spec("c"), 9));
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    h.rm.update_workload(vec![c.clone()], vec![]).await;
    h.wait_for(&c.instance_name, quota_blocked()).await;
    tokio::time::sleep(secs(300)).await;
    assert!(h.fake.deleted().is_empty());
    drop(h);

    // Enabled for all, rate 50 %: four candidates, the blocker needs the
    // memory of three: two victims in the first tick, one in the next.
    let settings = SchedulerSettings {
        quota: QuotaLimits { max_workloads: 0, max_memory: 1024 * MIB },
        preemption: PreemptionSettings { enabled: true, delay: secs(5), rate: 50, ..Default::default() },
        ..Default::default()
    };
    let mut h = harness_with_scheduler(FakeRuntime::new(), settings).await;
    let mem = |name: &str, m: &str| spec_with(name, "podman", &format!("image: {name}\ncommandOptions: [-m, {m}]\n"));
    let small: Vec<WorkloadSpec> = ["s1", "s2", "s3", "s4"].iter().map(|n| mem(n, "256m")).collect();
    h.rm.server_hello(small.clone()).await;
    for s in &small {
        h.running(s).await;
    }
    let t0 = Instant::now();
    let big = prio(mem("big", "768m"), 5);
    h.rm.update_workload(vec![big.clone()], vec![]).await;
    h.wait_for(&big.instance_name, quota_blocked()).await;
    sleep_until(t0 + Duration::from_millis(5_500)).await;
    let first: Vec<String> = h.fake.deleted().iter().map(|i| i.workload_name.clone()).collect();
    assert_eq!(first, ["s4", "s3"], "newest first, two per tick");
    h.running(&big).await;
    assert_eq!(t0.elapsed(), secs(6));
    let all: Vec<String> = h.fake.deleted().iter().map(|i| i.workload_name.clone()).collect();
    assert_eq!(all, ["s4", "s3", "s2"]);
}

#[tokio::test(start_paused = true)]
// [test of feature K5]
async fn k5_an_isolated_job_runs_alone_among_jobs_and_services_keep_running() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), SchedulerSettings::default()).await;
    let svc = restart(spec("svc"), RestartPolicy::Always);
    let (j1, j2) = (job("j1"), job("j2"));
    let mut iso = job("iso");
    iso.workload.policy.isolated = true;
    h.rm.server_hello(vec![svc.clone()]).await;
    // Applied at the same moment, in this order (the workloads of one
    // manifest arrive in name order).
    for s in [&j1, &iso, &j2] {
        h.rm.update_workload(vec![s.clone()], vec![]).await;
    }
    let postponed = StateKind::Pending(Pending::Postponed);
    assert_eq!(h.wait_for(&iso.instance_name, postponed).await.additional_info, "isolated: waiting for j1");
    assert_eq!(h.wait_for(&j2.instance_name, postponed).await.additional_info, "isolated: iso");
    h.running(&svc).await;
    h.running(&j1).await;

    tokio::time::sleep(secs(10)).await;
    h.fake.exit(&j1.instance_name, 0).await;
    h.running(&iso).await;
    tokio::time::sleep(secs(3)).await;
    assert_eq!(h.creates_of_instance(&j2.instance_name), 0, "j2 waits while iso runs");
    h.fake.exit(&iso.instance_name, 0).await;
    h.running(&j2).await;

    assert_eq!(h.creates_of_instance(&svc.instance_name), 1);
    assert!(h.fake.deleted().is_empty(), "the service kept running throughout");
    let j2_events = ring_of(&h.drain_events(), &j2.instance_name).to_vec();
    assert!(j2_events.iter().any(|e| e.kind == EventKind::Postponed && e.reason == "isolated: iso"), "{j2_events:?}");
}

#[tokio::test(start_paused = true)]
// [test of feature K1]
async fn k1_a_changed_priority_reorders_but_never_restarts_a_running_workload() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(1)).await;
    let a = spec("a");
    h.rm.server_hello(vec![a.clone()]).await;
    h.running(&a).await;
    // The server raises a's (effective) priority, as an update or as an add.
    let mut raised = prio(a.clone(), 5);
    raised.workload.effective_priority = Some(7);
    h.rm.update_workload(vec![raised.clone()], vec![deleted(&a)]).await;
    h.rm.update_workload(vec![prio(a.clone(), 6)], vec![]).await;
    tokio::time::sleep(secs(2)).await;
    assert!(h.fake.deleted().is_empty(), "{:?}", h.fake.deleted());
    assert_eq!(h.creates_of_instance(&a.instance_name), 1);
    assert_eq!(h.quota_used.borrow().workloads, 1);
}

#[tokio::test(start_paused = true)]
// [test of feature K2]
async fn k2_a_waiting_workload_the_server_no_longer_wants_never_starts() {
    let mut h = harness_with_scheduler(FakeRuntime::new(), quota(1)).await;
    let (a, b) = (spec("a"), spec("b"));
    h.rm.server_hello(vec![a.clone(), b.clone()]).await;
    h.wait_for(&b.instance_name, quota_blocked()).await;
    // A reconnect whose hello lacks b (or the agent stopping all workloads).
    h.rm.server_hello(vec![]).await;
    h.wait_all(&[&a.instance_name, &b.instance_name], StateKind::Removed).await;
    tokio::time::sleep(secs(3)).await;
    assert_eq!(h.creates_of_instance(&b.instance_name), 0, "the freed slot must not start b");
}

#[tokio::test(start_paused = true)]
// [test of feature K2]
async fn k2_a_workload_that_gave_up_and_is_sent_again_waits_for_room_like_any_start() {
    let fake = FakeRuntime::new();
    fake.fail_creates_of("x", "Error: image not known");
    let mut h = harness_with_scheduler(fake, quota(1)).await;
    let x = spec("x");
    h.rm.server_hello(vec![x.clone()]).await;
    h.wait_for(&x.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    let other = spec("other");
    h.rm.update_workload(vec![other.clone()], vec![]).await;
    h.running(&other).await;
    // The server sends x again unchanged (say after a reconnect): no room.
    h.fake.clear_failures();
    let tries = h.creates_of_instance(&x.instance_name);
    h.rm.server_hello(vec![x.clone(), other.clone()]).await;
    h.wait_for(&x.instance_name, quota_blocked()).await;
    assert_eq!(h.creates_of_instance(&x.instance_name), tries);
    h.rm.update_workload(vec![], vec![deleted(&other)]).await;
    h.running(&x).await;
}
