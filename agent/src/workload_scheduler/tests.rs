//! Tests of the `WorkloadScheduler` with a `WorkloadStateStore` filled by hand.

use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadName, WorkloadState};

use ank_common::workload_events::EventKind;

use super::*;

fn spec(name: &str, config: &str, deps: &[(&str, AddCondition)]) -> WorkloadSpec {
    let workload = Workload {
        runtime: "podman".into(),
        runtime_config: config.into(),
        dependencies: deps.iter().map(|(n, c)| (WorkloadName::new(*n).unwrap(), *c)).collect(),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), workload)
}

fn deleted(spec: &WorkloadSpec, dependents: &[(&str, DeleteCondition)]) -> DeletedWorkload {
    DeletedWorkload {
        instance_name: spec.instance_name.clone(),
        dependencies: dependents.iter().map(|(n, c)| (n.to_string(), *c)).collect::<BTreeMap<_, _>>(),
    }
}

fn set(store: &mut WorkloadStateStore, spec: &WorkloadSpec, state: ExecutionState) {
    store.update(&WorkloadState::new(spec.instance_name.clone(), state));
}

fn waiting_to_start() -> ExecutionState {
    ExecutionState::new(StateKind::Pending(Pending::WaitingToStart))
}

fn waiting_to_stop() -> ExecutionState {
    ExecutionState::new(StateKind::Stopping(Stopping::WaitingToStop))
}

#[test]
// [utest->swdd~agent-enqueues-unfulfilled-create~1]
// [utest->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
// [utest->swdd~workload-ready-to-create-on-fulfilled-dependencies~1]
fn scheduler_holds_a_create_until_its_dependency_runs() {
    let db = spec("db", "image: db", &[]);
    let web = spec("web", "image: web", &[("db", AddCondition::Running)]);
    let mut store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    let ops = vec![
        WorkloadOperation::Create(ReusableWorkloadSpec::new(web.clone())),
        WorkloadOperation::Create(ReusableWorkloadSpec::new(db.clone())),
    ];
    let out = scheduler.enqueue_filtered_workload_operations(ops, &store);
    assert_eq!(out.ready, vec![WorkloadOperation::Create(ReusableWorkloadSpec::new(db.clone()))]);
    assert_eq!(out.report, vec![WorkloadState::new(web.instance_name.clone(), waiting_to_start())]);
    assert!(scheduler.is_queued("web"));
    assert_eq!(scheduler.queued_create("web"), Some(&web));

    set(&mut store, &db, ExecutionState::new(StateKind::Pending(Pending::Starting)));
    assert_eq!(scheduler.next_workload_operations(&store), Scheduled::default());
    set(&mut store, &db, ExecutionState::running());
    let out = scheduler.next_workload_operations(&store);
    assert_eq!(out.ready, vec![WorkloadOperation::Create(ReusableWorkloadSpec::new(web))]);
    assert!(out.report.is_empty());
    assert!(!scheduler.is_queued("web"));
}

#[test]
// [utest->swdd~agent-keeps-workloads-with-unfulfilled-workload-dependencies-in-queue~1]
fn scheduler_reports_waiting_only_once_and_follows_other_agents_states() {
    let job = spec("job", "image: job", &[("init", AddCondition::Succeeded), ("probe", AddCondition::Failed)]);
    let init_elsewhere = WorkloadState::new(
        ank_common::WorkloadInstanceName::new(
            &WorkloadName::new("init").unwrap(),
            &AgentName::new("agent_B").unwrap(),
            "x",
        ),
        ExecutionState::succeeded(),
    );
    let probe = spec("probe", "image: p", &[]);
    let mut store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    let out = scheduler.enqueue_filtered_workload_operations(
        vec![WorkloadOperation::Create(ReusableWorkloadSpec::new(job.clone()))],
        &store,
    );
    assert_eq!(out.report.len(), 1);
    store.update(&init_elsewhere);
    assert_eq!(scheduler.next_workload_operations(&store), Scheduled::default());
    set(&mut store, &probe, ExecutionState::failed("Exit code: '1'"));
    let out = scheduler.next_workload_operations(&store);
    assert_eq!(out.ready, vec![WorkloadOperation::Create(ReusableWorkloadSpec::new(job))]);
}

#[test]
// [utest->swdd~agent-enqueues-unfulfilled-delete~1]
// [utest->swdd~workload-ready-to-delete-on-fulfilled-dependencies~1]
fn scheduler_holds_a_delete_until_its_dependents_stopped() {
    let db = spec("db", "image: db", &[]);
    let web = spec("web", "image: web", &[("db", AddCondition::Running)]);
    let mut store = WorkloadStateStore::new();
    set(&mut store, &web, ExecutionState::running());
    let mut scheduler = WorkloadScheduler::new();
    let del = deleted(&db, &[("web", DeleteCondition::NotPendingNorRunning)]);
    let out = scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Delete(del.clone())], &store);
    assert!(out.ready.is_empty());
    assert_eq!(out.report, vec![WorkloadState::new(db.instance_name.clone(), waiting_to_stop())]);
    set(&mut store, &web, ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime)));
    assert_eq!(scheduler.next_workload_operations(&store).ready, vec![WorkloadOperation::Delete(del)]);
}

#[test]
fn scheduler_deletes_a_dependency_whose_dependent_is_gone_or_waiting() {
    let db = spec("db", "image: db", &[]);
    let store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    let del = deleted(&db, &[("web", DeleteCondition::NotPendingNorRunning)]);
    let out = scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Delete(del.clone())], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::Delete(del)]);

    let web = spec("web", "image: web", &[]);
    let mut store = WorkloadStateStore::new();
    set(&mut store, &web, waiting_to_start());
    let del = deleted(&db, &[("web", DeleteCondition::Running)]);
    let out = scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Delete(del.clone())], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::Delete(del)]);
}

#[test]
// [utest->swdd~agent-handles-update-with-fulfilled-delete~1]
// [utest->swdd~agent-shall-not-enqueue-update-delete-only-workload-operation~1]
fn scheduler_update_with_free_delete_but_waiting_create_deletes_first() {
    let old = spec("web", "image: v1", &[]);
    let new = spec("web", "image: v2", &[("db", AddCondition::Running)]);
    let store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    let del = deleted(&old, &[]);
    let out = scheduler
        .enqueue_filtered_workload_operations(vec![WorkloadOperation::Update(new.clone(), del.clone())], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::UpdateDeleteOnly(del.clone())]);
    assert_eq!(out.report, vec![WorkloadState::new(new.instance_name.clone(), waiting_to_start())]);
    assert_eq!(scheduler.queued_create("web"), Some(&new));

    // A delete-only operation is never queued.
    let out =
        scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::UpdateDeleteOnly(del.clone())], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::UpdateDeleteOnly(del)]);
}

#[test]
fn scheduler_update_with_everything_fulfilled_is_ready_at_once() {
    let old = spec("web", "image: v1", &[]);
    let new = spec("web", "image: v2", &[]);
    let mut scheduler = WorkloadScheduler::new();
    let op = WorkloadOperation::Update(new, deleted(&old, &[]));
    let out = scheduler.enqueue_filtered_workload_operations(vec![op.clone()], &WorkloadStateStore::new());
    assert_eq!(out.ready, vec![op]);
    assert!(out.report.is_empty());
}

#[test]
// [utest->swdd~agent-enqueues-update-with-unfulfilled-delete~1]
fn scheduler_update_with_held_delete_waits_to_stop_as_a_whole() {
    let old = spec("db", "image: v1", &[]);
    let new = spec("db", "image: v2", &[]);
    let web = spec("web", "image: web", &[]);
    let mut store = WorkloadStateStore::new();
    set(&mut store, &web, ExecutionState::running());
    let mut scheduler = WorkloadScheduler::new();
    let del = deleted(&old, &[("web", DeleteCondition::NotPendingNorRunning)]);
    let out = scheduler
        .enqueue_filtered_workload_operations(vec![WorkloadOperation::Update(new.clone(), del.clone())], &store);
    assert!(out.ready.is_empty());
    assert_eq!(out.report, vec![WorkloadState::new(old.instance_name.clone(), waiting_to_stop())]);
    set(&mut store, &web, ExecutionState::succeeded());
    assert_eq!(scheduler.next_workload_operations(&store).ready, vec![WorkloadOperation::Update(new, del)]);
}

#[test]
fn scheduler_replaces_a_queued_operation_and_drops_a_never_started_create_on_delete() {
    let web = spec("web", "image: web", &[("db", AddCondition::Running)]);
    let store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    scheduler.enqueue_filtered_workload_operations(
        vec![WorkloadOperation::Create(ReusableWorkloadSpec::new(web.clone()))],
        &store,
    );
    let del = deleted(&web, &[("other", DeleteCondition::Running)]);
    let out = scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Delete(del.clone())], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::Delete(del)]);
    assert!(!scheduler.is_queued("web"));
}

fn quota(max_workloads: u32) -> WorkloadScheduler {
    let settings = SchedulerSettings {
        quota: ank_common::quota::QuotaLimits { max_workloads, max_memory: 0 },
        ..Default::default()
    };
    WorkloadScheduler::with_settings("agent_A", settings, RuntimeRegistry::with_podman())
}

fn create(s: &WorkloadSpec) -> WorkloadOperation {
    WorkloadOperation::Create(ReusableWorkloadSpec::new(s.clone()))
}

fn with_priority(mut s: WorkloadSpec, priority: u32) -> WorkloadSpec {
    s.workload.priority = Some(priority);
    s
}

fn quota_blocked(info: &str) -> ExecutionState {
    ExecutionState::with_info(StateKind::Pending(Pending::QuotaBlocked), info)
}

#[test]
// [test of feature K1]
fn scheduler_starts_ready_creates_by_priority_then_arrival() {
    let (a, b, c, d) = (
        with_priority(spec("a", "image: a", &[]), 0),
        with_priority(spec("b", "image: b", &[]), 5),
        with_priority(spec("c", "image: c", &[]), 5),
        with_priority(spec("d", "image: d", &[]), 1),
    );
    let store = WorkloadStateStore::new();
    let mut scheduler = quota(2);
    let out =
        scheduler.enqueue_filtered_workload_operations(vec![create(&a), create(&b), create(&c), create(&d)], &store);
    assert_eq!(out.ready, vec![create(&b), create(&c)]);
    assert_eq!(
        out.report,
        vec![
            WorkloadState::new(d.instance_name.clone(), quota_blocked("agent_A 2/2")),
            WorkloadState::new(a.instance_name.clone(), quota_blocked("agent_A 2/2")),
        ]
    );
    assert_eq!(out.events.len(), 2, "one QuotaBlocked event each when they begin to wait");
    // The effective priority (set by the server) is what counts.
    let mut escalated = spec("e", "image: e", &[]);
    escalated.workload.effective_priority = Some(3);
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&escalated)], &store);
    assert_eq!(out.report, vec![WorkloadState::new(escalated.instance_name.clone(), quota_blocked("agent_A 2/2"))]);
    assert_eq!(scheduler.queue.creates_in_order(), ["e", "d", "a"]);
}

#[test]
// [test of feature K2]
fn scheduler_counts_starting_running_stopping_and_restarting_workloads_but_not_finished_ones() {
    let mut scheduler = quota(2);
    let mut store = WorkloadStateStore::new();
    let (job, svc, next) = (spec("job", "image: j", &[]), spec("svc", "image: s", &[]), spec("next", "image: n", &[]));
    let mut job = job;
    job.workload.restart_policy = ank_common::RestartPolicy::Never;
    let mut svc = svc;
    svc.workload.restart_policy = ank_common::RestartPolicy::Always;
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&job), create(&svc), create(&next)], &store);
    assert_eq!(out.ready.len(), 2, "fresh starts count before any state");
    assert_eq!(scheduler.usage(&store).workloads, 2);
    set(&mut store, &svc, ExecutionState::failed("Exit code: '1'"));
    set(&mut store, &job, ExecutionState::new(StateKind::Stopping(Stopping::RequestedAtRuntime)));
    assert!(
        scheduler.next_workload_operations(&store).ready.is_empty(),
        "a restarting service and a stopping job count"
    );
    set(&mut store, &job, ExecutionState::succeeded());
    assert_eq!(scheduler.next_workload_operations(&store).ready, vec![create(&next)], "a finished job frees its slot");
    let removed = WorkloadState::new(svc.instance_name.clone(), ExecutionState::removed());
    store.update(&removed);
    scheduler.observe(&[removed]);
    assert_eq!(scheduler.usage(&store).workloads, 1, "next only");
}

#[test]
// [test of feature K2]
fn scheduler_tick_counts_the_quota_blocked_event_once_per_tick_and_keeps_the_place_on_a_change() {
    let mut scheduler = quota(1);
    let store = WorkloadStateStore::new();
    let (a, b, c) = (spec("a", "image: a", &[]), spec("b", "image: b", &[]), spec("c", "image: c", &[]));
    scheduler.enqueue_filtered_workload_operations(vec![create(&a), create(&b), create(&c)], &store);
    assert!(scheduler.needs_tick());
    let now = tokio::time::Instant::now();
    for i in 1..=3 {
        let out = scheduler.tick(&store, now + std::time::Duration::from_secs(i));
        assert!(out.report.is_empty(), "the state is reported once");
        let kinds: Vec<_> = out.events.iter().map(|e| (e.instance_name.workload_name.as_str(), e.kind)).collect();
        assert_eq!(kinds, [("b", EventKind::QuotaBlocked), ("c", EventKind::QuotaBlocked)]);
        assert!(out.events.iter().all(|e| e.reason == "agent_A 1/1"));
    }
    // A changed spec of b keeps its place ahead of c.
    let b2 = with_priority(b.clone(), 0);
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&b2)], &store);
    assert_eq!(out.report, vec![WorkloadState::new(b2.instance_name.clone(), quota_blocked("agent_A 1/1"))]);
    assert_eq!(scheduler.queue.creates_in_order(), ["b", "c"]);
}

#[test]
// [test of feature K2]
fn scheduler_update_of_a_running_workload_keeps_its_slot_under_a_full_quota() {
    let mut scheduler = quota(1);
    let mut store = WorkloadStateStore::new();
    let (v1, other) = (spec("web", "image: v1", &[]), spec("other", "image: o", &[]));
    scheduler.enqueue_filtered_workload_operations(vec![create(&v1), create(&other)], &store);
    set(&mut store, &v1, ExecutionState::running());
    let v2 = spec("web", "image: v2", &[]);
    let update = WorkloadOperation::Update(v2.clone(), deleted(&v1, &[]));
    let out = scheduler.enqueue_filtered_workload_operations(vec![update.clone()], &store);
    assert_eq!(out.ready, vec![update]);
    // Where it does not fit, the old one goes and the new one waits.
    let mut scheduler = quota(1);
    let mut store = WorkloadStateStore::new();
    scheduler.enqueue_filtered_workload_operations(vec![create(&other)], &store);
    set(&mut store, &other, ExecutionState::running());
    let mut finished = spec("job", "image: v1", &[]);
    finished.workload.restart_policy = ank_common::RestartPolicy::Never;
    let update = WorkloadOperation::Update(v2.clone(), deleted(&finished, &[]));
    let out = scheduler.enqueue_filtered_workload_operations(vec![update], &store);
    assert_eq!(out.ready, vec![WorkloadOperation::UpdateDeleteOnly(deleted(&finished, &[]))]);
    assert_eq!(out.report, vec![WorkloadState::new(v2.instance_name.clone(), quota_blocked("agent_A 1/1"))]);
}

#[test]
// [test of feature K2]
fn scheduler_workload_whose_declared_memory_does_not_read_is_starting_failed_under_a_memory_quota() {
    let settings = SchedulerSettings {
        quota: ank_common::quota::QuotaLimits { max_workloads: 0, max_memory: 1 << 30 },
        ..Default::default()
    };
    let mut scheduler = WorkloadScheduler::with_settings("agent_A", settings, RuntimeRegistry::with_podman());
    let bad = spec("bad", "image: b\ncommandOptions: [--memory, lots]\n", &[]);
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&bad)], &WorkloadStateStore::new());
    assert!(out.ready.is_empty());
    assert_eq!(out.report[0].execution_state.kind, StateKind::Pending(Pending::StartingFailed));
    assert!(out.report[0].execution_state.additional_info.contains("'lots'"), "{:?}", out.report);
    // A runtime this agent does not have declares nothing (it never runs here).
    let mut other = bad.clone();
    other.workload.runtime = "containerd".into();
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&other)], &WorkloadStateStore::new());
    assert_eq!(out.ready, vec![create(&other)]);
    // Without a memory quota the declaration is not read.
    let mut scheduler = WorkloadScheduler::new();
    let out = scheduler.enqueue_filtered_workload_operations(vec![create(&bad)], &WorkloadStateStore::new());
    assert_eq!(out.ready, vec![create(&bad)]);
}

#[test]
// [utest->swdd~agent-existing-workloads-replace-updated~2]
fn scheduler_keeps_the_earlier_container_of_a_waiting_create_when_a_resync_sends_it_again() {
    // After a power cut: `web` waits for `db`, and its dead container of
    // the earlier run is to be removed right before its create. The
    // server's resync sends `web` again (a plain create) meanwhile.
    use crate::runtime_connectors::WorkloadId;
    use crate::workload_operation::Earlier;
    let db = spec("db", "image: db", &[]);
    let web = spec("web", "image: web", &[("db", AddCondition::Running)]);
    let mut store = WorkloadStateStore::new();
    let mut scheduler = WorkloadScheduler::new();
    let dead = Earlier::Replace("podman".into(), WorkloadId("dead".into()));
    let first = ReusableWorkloadSpec { spec: web.clone(), earlier: Some(dead.clone()) };
    scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Create(first.clone())], &store);
    scheduler.enqueue_filtered_workload_operations(vec![create(&web)], &store);
    set(&mut store, &db, ExecutionState::running());
    let out = scheduler.next_workload_operations(&store);
    assert_eq!(out.ready, vec![WorkloadOperation::Create(first)], "the dead container is still removed first");

    // An exited container kept for a start in place is replaced instead
    // when the workload changed while it waited.
    let exited = Earlier::Reuse("podman".into(), WorkloadId("exited".into()));
    let changed = spec("web", "image: web2", &[("db", AddCondition::Running)]);
    set(&mut store, &db, waiting_to_start());
    let reuse = ReusableWorkloadSpec { spec: web.clone(), earlier: Some(exited) };
    scheduler.enqueue_filtered_workload_operations(vec![WorkloadOperation::Create(reuse)], &store);
    scheduler.enqueue_filtered_workload_operations(vec![create(&changed)], &store);
    set(&mut store, &db, ExecutionState::running());
    let out = scheduler.next_workload_operations(&store);
    let replaced = Earlier::Replace("podman".into(), WorkloadId("exited".into()));
    assert_eq!(
        out.ready,
        vec![WorkloadOperation::Create(ReusableWorkloadSpec { spec: changed, earlier: Some(replaced) })]
    );
}
