//! Tests of the `WorkloadScheduler` with a `WorkloadStateStore` filled by hand.

use std::collections::BTreeMap;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadName, WorkloadState};

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
