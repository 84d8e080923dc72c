//! Tests of inter-workload dependencies and restart policies through the
//! RuntimeManager, its control loops and the FakeRuntime.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::messages::{DeleteCondition, DeletedWorkload};
use ank_common::workload::{AddCondition, RestartPolicy, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadInstanceName, WorkloadName, WorkloadState};

use super::tests::{Harness, deleted, harness, spec, spec_with, starting};

fn with_deps(mut s: WorkloadSpec, deps: &[(&str, AddCondition)]) -> WorkloadSpec {
    s.workload.dependencies = deps.iter().map(|(n, c)| (WorkloadName::new(*n).unwrap(), *c)).collect();
    s
}

fn with_policy(mut s: WorkloadSpec, policy: RestartPolicy) -> WorkloadSpec {
    s.workload.restart_policy = policy;
    s
}

fn remote(name: &str) -> WorkloadInstanceName {
    WorkloadInstanceName::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_B").unwrap(), "image: r\n")
}

fn deleted_with(s: &WorkloadSpec, dependents: &[(&str, DeleteCondition)]) -> DeletedWorkload {
    DeletedWorkload {
        instance_name: s.instance_name.clone(),
        dependencies: dependents.iter().map(|(n, c)| (n.to_string(), *c)).collect::<BTreeMap<_, _>>(),
    }
}

fn waiting_to_start() -> ExecutionState {
    ExecutionState::new(StateKind::Pending(Pending::WaitingToStart))
}

impl Harness {
    /// The number of creates of `instance` so far.
    fn creates_of(&self, instance: &WorkloadInstanceName) -> usize {
        self.fake.created().iter().filter(|c| *c == instance).count()
    }
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-enqueues-unfulfilled-create~1]
// [utest->swdd~agent-handles-workloads-with-fulfilled-dependencies~1]
// [utest->swdd~agent-handles-update-workload-state-requests~1]
async fn dependencies_create_waits_for_another_agents_workload() {
    let mut h = harness().await;
    let web = with_deps(spec("web"), &[("db", AddCondition::Succeeded)]);
    h.rm.server_hello(vec![web.clone()]).await;
    assert_eq!(h.next_of(&web.instance_name).await, waiting_to_start());
    h.assert_quiet().await;
    let db = remote("db");
    h.rm.update_workload_states(vec![WorkloadState::new(db.clone(), ExecutionState::running())]).await;
    h.assert_quiet().await;
    h.rm.update_workload_states(vec![WorkloadState::new(db, ExecutionState::succeeded())]).await;
    h.running(&web).await;
    assert_eq!(h.creates_of(&web.instance_name), 1);
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-handles-new-workload-operations]
async fn dependencies_on_the_same_agent_are_followed_through_own_states() {
    let mut h = harness().await;
    let init = spec("init");
    let app = with_deps(spec("app"), &[("init", AddCondition::Succeeded)]);
    h.rm.server_hello(vec![app.clone(), init.clone()]).await;
    assert_eq!(h.next_of(&app.instance_name).await, waiting_to_start());
    h.running(&init).await;
    assert_eq!(h.creates_of(&app.instance_name), 0);
    h.fake.exit(&init.instance_name, 0).await;
    h.running(&app).await;
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-enqueues-unfulfilled-delete~1]
// [utest->swdd~agent-executes-delete-workload-operation~1]
async fn dependencies_delete_waits_until_the_dependent_is_gone() {
    let mut h = harness().await;
    let db = spec("db");
    let web = with_deps(spec("web"), &[("db", AddCondition::Running)]);
    h.rm.server_hello(vec![db.clone(), web.clone()]).await;
    h.running(&db).await;
    h.running(&web).await;
    let del_db = deleted_with(&db, &[("web", DeleteCondition::NotPendingNorRunning)]);
    h.rm.update_workload(vec![], vec![del_db]).await;
    assert_eq!(h.next_of(&db.instance_name).await.kind, StateKind::Stopping(Stopping::WaitingToStop));
    h.assert_quiet().await;
    assert!(h.fake.deleted().is_empty());
    h.rm.update_workload(vec![], vec![deleted(&web)]).await;
    h.wait_for(&web.instance_name, StateKind::Removed).await;
    h.wait_for(&db.instance_name, StateKind::Removed).await;
    assert_eq!(h.fake.deleted(), vec![web.instance_name.clone(), db.instance_name.clone()]);
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-handles-update-with-fulfilled-delete~1]
// [utest->swdd~agent-executes-update-delete-only-workload-operation~1]
// [utest->swdd~agent-workload-control-loop-executes-update-delete-only~1]
async fn dependencies_update_deletes_the_old_instance_while_the_new_waits() {
    let mut h = harness().await;
    let v1 = spec_with("web", "podman", "image: v1\n");
    h.rm.server_hello(vec![v1.clone()]).await;
    h.running(&v1).await;
    let v2 = with_deps(spec_with("web", "podman", "image: v2\n"), &[("db", AddCondition::Running)]);
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    h.wait_for(&v1.instance_name, StateKind::Removed).await;
    assert_eq!(h.fake.containers().len(), 0, "AT_MOST_ONCE: the old one is gone first");
    h.rm.update_workload_states(vec![WorkloadState::new(remote("db"), ExecutionState::running())]).await;
    h.running(&v2).await;
    assert_eq!(h.fake.containers().len(), 1);
}

// Twin scenario update_dependency_unmet: only the dependencies change (the
// instance name stays), the new one is unmet. The old container is removed
// at once and no new one is created until the dependency holds, neither by
// the server's resync of the waiting workload nor by a reconnect's hello.
#[tokio::test(start_paused = true)]
// [utest->swdd~agent-handles-update-with-fulfilled-delete~1]
// [utest->swdd~agent-executes-update-delete-only-workload-operation~1]
// [utest->swdd~agent-enqueues-unfulfilled-create~1]
async fn dependencies_update_of_only_the_dependencies_stops_the_old_instance_and_waits() {
    let mut h = harness().await;
    let c = spec("c");
    let v1 = spec("web");
    h.rm.server_hello(vec![c.clone(), v1.clone()]).await;
    h.until_all_running(&[&c, &v1]).await;
    let v2 = with_deps(v1.clone(), &[("c", AddCondition::Succeeded)]);
    assert_eq!(v2.instance_name, v1.instance_name);
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    // Its states until all is quiet: the old container stops and goes, the
    // new instance (of the same name) ends waiting, not removed.
    let mut seen = Vec::new();
    while let Ok(Some(s)) = tokio::time::timeout(Duration::from_secs(20), h.states.recv()).await {
        if s.instance_name == v2.instance_name {
            seen.push(s.execution_state);
        }
    }
    assert_eq!(seen.last(), Some(&waiting_to_start()), "{seen:?}");
    assert!(seen.iter().any(|s| matches!(s.kind, StateKind::Stopping(_))), "{seen:?}");
    assert!(!seen.iter().any(|s| s.kind == StateKind::Removed), "{seen:?}");
    assert_eq!(h.fake.containers().len(), 1, "only c's container is left: {seen:?}");
    h.rm.resync_workload(vec![v2.clone()], vec![]).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    h.rm.server_hello(vec![c.clone(), v2.clone()]).await;
    h.rm.resync_workload(vec![v2.clone()], vec![]).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(h.creates_of(&v2.instance_name), 1, "no create while c runs: {seen:?}");
    assert_eq!(h.fake.containers().len(), 1, "only c's container is left: {seen:?}");
    h.fake.exit(&c.instance_name, 0).await;
    h.running(&v2).await;
    assert_eq!(h.creates_of(&v2.instance_name), 2);
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-enqueues-update-with-unfulfilled-delete~1]
async fn dependencies_update_waits_to_stop_while_a_dependent_runs() {
    let mut h = harness().await;
    let v1 = spec_with("db", "podman", "image: v1\n");
    let web = with_deps(spec("web"), &[("db", AddCondition::Running)]);
    h.rm.server_hello(vec![v1.clone(), web.clone()]).await;
    h.running(&v1).await;
    h.running(&web).await;
    let v2 = spec_with("db", "podman", "image: v2\n");
    let del = deleted_with(&v1, &[("web", DeleteCondition::NotPendingNorRunning)]);
    h.rm.update_workload(vec![v2.clone()], vec![del]).await;
    assert_eq!(h.next_of(&v1.instance_name).await.kind, StateKind::Stopping(Stopping::WaitingToStop));
    h.fake.exit(&web.instance_name, 0).await;
    h.wait_for(&v1.instance_name, StateKind::Removed).await;
    h.running(&v2).await;
}

#[tokio::test(start_paused = true)]
// [utest->swdd~workload-control-loop-handles-workload-restarts~2]
// [utest->swdd~workload-control-loop-restarts-workloads-using-update~1]
// [utest->swdd~workload-control-loop-receives-workload-states~1]
async fn restart_policy_always_restarts_after_success_and_failure() {
    let mut h = harness().await;
    let s = with_policy(spec("svc"), RestartPolicy::Always);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.fake.exit(&s.instance_name, 0).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::succeeded());
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::running());
    h.fake.exit(&s.instance_name, 2).await;
    assert_eq!(h.next_of(&s.instance_name).await.kind, StateKind::Failed(Failed::ExecFailed));
    h.running(&s).await;
    // After the success the container ran again in place, as in Ankaios;
    // after the failure it was replaced.
    assert_eq!(h.creates_of(&s.instance_name), 2);
    assert_eq!(h.fake.started(), vec![s.instance_name.clone()]);
    assert_eq!(h.fake.containers().len(), 1, "the failed container is removed before the new one starts");
    assert_eq!(h.fake.deleted().len(), 1);
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-supports-restart-policies~1]
async fn restart_policy_on_failure_restarts_only_failures_and_never_restarts_nothing() {
    let mut h = harness().await;
    let a = with_policy(spec("a"), RestartPolicy::OnFailure);
    let b = with_policy(spec("b"), RestartPolicy::OnFailure);
    let c = spec("c");
    h.rm.server_hello(vec![a.clone(), b.clone(), c.clone()]).await;
    for s in [&a, &b, &c] {
        h.running(s).await;
    }
    h.fake.exit(&a.instance_name, 0).await;
    h.fake.exit(&b.instance_name, 1).await;
    h.fake.exit(&c.instance_name, 1).await;
    h.running(&b).await;
    h.assert_quiet().await;
    assert_eq!(h.creates_of(&a.instance_name), 1);
    assert_eq!(h.creates_of(&b.instance_name), 2);
    assert_eq!(h.creates_of(&c.instance_name), 1);
}

#[tokio::test(start_paused = true)]
async fn restart_policy_never_applies_after_an_explicit_delete() {
    let mut h = harness().await;
    let s = with_policy(spec("svc"), RestartPolicy::Always);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    h.rm.update_workload(vec![], vec![deleted(&s)]).await;
    h.wait_for(&s.instance_name, StateKind::Removed).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    h.assert_quiet().await;
    assert_eq!(h.creates_of(&s.instance_name), 1);
    assert!(h.fake.containers().is_empty());
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-skips-unknown-runtime~1]
// [utest->swdd~agent-uses-specified-runtime~1]
async fn unknown_runtime_is_skipped_and_its_delete_reports_removed() {
    let mut h = harness().await;
    let s = spec_with("x", "nope", "image: a\n");
    h.rm.server_hello(vec![s.clone()]).await;
    let st = h.next_of(&s.instance_name).await;
    assert_eq!(st.kind, StateKind::Pending(Pending::StartingFailed));
    assert_eq!(st.additional_info, "runtime 'nope' is not supported by this agent");
    h.rm.update_workload(vec![], vec![deleted(&s)]).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::removed());
    assert!(h.fake.calls().iter().all(|c| matches!(c, crate::runtime_connectors::fake::FakeCall::List)));
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-add-on-update-missing-workload~1]
async fn update_of_a_workload_this_agent_does_not_run_adds_it() {
    let mut h = harness().await;
    let v1 = spec_with("x", "podman", "image: v1\n");
    let v2 = spec_with("x", "podman", "image: v2\n");
    h.rm.server_hello(vec![]).await;
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    h.running(&v2).await;
    assert_eq!(h.fake.created(), vec![v2.instance_name.clone()]);
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-update-broken-allowed~1]
// [utest->swdd~agent-workload-control-loop-delete-broken-allowed~1]
async fn update_and_delete_of_a_vanished_workload_carry_on() {
    let mut h = harness().await;
    let v1 = spec_with("x", "podman", "image: v1\n");
    let v2 = spec_with("x", "podman", "image: v2\n");
    h.rm.server_hello(vec![v1.clone()]).await;
    h.running(&v1).await;
    h.fake.remove_externally(&v1.instance_name).await;
    assert_eq!(h.next_of(&v1.instance_name).await.kind, StateKind::Failed(Failed::Lost));
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    h.wait_for(&v1.instance_name, StateKind::Removed).await;
    h.running(&v2).await;
    h.fake.remove_externally(&v2.instance_name).await;
    h.wait_for(&v2.instance_name, StateKind::Failed(Failed::Lost)).await;
    h.rm.update_workload(vec![], vec![deleted(&v2)]).await;
    h.wait_for(&v2.instance_name, StateKind::Removed).await;
    assert!(h.fake.deleted().is_empty(), "nothing left to delete in the runtime");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-workload-control-loop-update-delete-failed-allows-retry~1]
async fn update_whose_delete_fails_can_be_tried_again() {
    let mut h = harness().await;
    let v1 = spec_with("x", "podman", "image: v1\n");
    let v2 = spec_with("x", "podman", "image: v2\n");
    h.rm.server_hello(vec![v1.clone()]).await;
    h.running(&v1).await;
    h.fake.fail_deletes(Some("Error: busy"));
    h.rm.update_workload(vec![v2.clone()], vec![deleted(&v1)]).await;
    h.wait_for(&v1.instance_name, StateKind::Stopping(Stopping::DeleteFailed)).await;
    h.assert_quiet().await;
    assert_eq!(h.creates_of(&v2.instance_name), 0, "no create while the old one may still run");
    h.fake.clear_failures();
    h.rm.update_workload(vec![v2.clone()], vec![]).await;
    h.wait_for(&v1.instance_name, StateKind::Removed).await;
    h.running(&v2).await;
}

#[tokio::test(start_paused = true)]
// [utest->swdd~workload-control-loop-checks-workload-state-validity~1]
async fn states_of_a_replaced_instance_are_ignored() {
    let mut h = harness().await;
    let s = with_policy(spec("svc"), RestartPolicy::Always);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    let old_id = h.fake.workload_id_of(&s.instance_name).unwrap();
    h.fake.exit(&s.instance_name, 1).await;
    h.wait_for(&s.instance_name, StateKind::Running).await;
    // A late event about the first container must not touch the new one.
    h.fake.emit_for(&s.instance_name, &old_id, crate::runtime_connectors::Observed::Gone).await;
    h.assert_quiet().await;
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-supports-multiple-runtime-connectors~1]
async fn each_workload_runs_on_the_runtime_it_names() {
    use std::sync::Arc;

    use crate::runtime_connectors::fake::FakeRuntime;

    let other = Arc::new(FakeRuntime::named("other"));
    let mut h = super::tests::harness_with_extra(FakeRuntime::new(), other.clone()).await;
    let a = spec("a");
    let b = spec_with("b", "other", "image: b\n");
    h.rm.server_hello(vec![a.clone(), b.clone()]).await;
    h.running(&a).await;
    h.running(&b).await;
    assert_eq!(h.fake.created(), vec![a.instance_name.clone()]);
    assert_eq!(other.created(), vec![b.instance_name.clone()]);
}

#[tokio::test]
async fn workload_files_are_written_mounted_and_removed_with_the_workload() {
    use ank_common::workload::{File, FileContent};

    let mut h = harness().await;
    let mut s = spec("web");
    s.workload.files = vec![
        File { mount_point: "/etc/web/index.html".into(), content: FileContent::Data("<h1>hi</h1>".into()) },
        File { mount_point: "/bin/tool".into(), content: FileContent::BinaryData("AAEC".into()) },
    ];
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    let options = h.fake.options_of(&s.instance_name).unwrap();
    // Ankaios' folder `<workload>.<id>` (no agent part), next to the pipes.
    let instance = &s.instance_name;
    let folder = h.io.path().join(instance.folder_name()).join("files");
    assert_eq!(options.files.len(), 2);
    assert_eq!(options.files[0].host_path, folder.join("etc/web/index.html"));
    assert_eq!(options.files[0].mount_point, "/etc/web/index.html");
    assert_eq!(std::fs::read_to_string(&options.files[0].host_path).unwrap(), "<h1>hi</h1>");
    assert_eq!(std::fs::read(&options.files[1].host_path).unwrap(), vec![0, 1, 2]);
    // Where earlier versions of this agent wrote them: removed as well.
    let legacy = h.io.path().join(instance.to_string()).join("files/etc/x");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::write(&legacy, "old").unwrap();
    h.rm.update_workload(vec![], vec![deleted(&s)]).await;
    h.wait_for(&s.instance_name, StateKind::Removed).await;
    assert!(!folder.exists(), "files are removed with the workload");
    assert!(!h.io.path().join(instance.to_string()).exists(), "the folder of earlier versions too");
}

#[tokio::test]
async fn workload_files_that_are_invalid_fail_the_create_naming_the_cause() {
    use ank_common::workload::{File, FileContent};

    let mut h = harness().await;
    let mut bad_b64 = spec("a");
    bad_b64.workload.files = vec![File { mount_point: "/x".into(), content: FileContent::BinaryData("%%%".into()) }];
    let mut bad_mount = spec("b");
    bad_mount.workload.files = vec![File { mount_point: "rel/x".into(), content: FileContent::Data("1".into()) }];
    let good = spec("c");
    h.rm.server_hello(vec![bad_b64.clone(), bad_mount.clone(), good.clone()]).await;
    let st = h.wait_for(&bad_b64.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert!(st.additional_info.contains("'/x'") && st.additional_info.contains("base64"), "{st}");
    let st = h.wait_for(&bad_mount.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    assert!(st.additional_info.contains("'rel/x'"), "{st}");
    h.running(&good).await;
    assert_eq!(h.fake.created(), vec![good.instance_name.clone()], "bad workloads never reach the runtime");
}

#[tokio::test(start_paused = true)]
async fn a_resent_workload_whose_creates_gave_up_is_tried_again_without_a_removed_flicker() {
    let fake = crate::runtime_connectors::fake::FakeRuntime::new();
    fake.fail_creates_of("x", "Error: boom");
    let mut h = super::tests::harness_with(fake).await;
    let s = spec("x");
    h.rm.server_hello(vec![s.clone()]).await;
    h.wait_for(&s.instance_name, StateKind::Pending(Pending::StartingFailed)).await;
    h.fake.clear_failures();
    // After a reconnect the server sends the same workload again.
    h.rm.server_hello(vec![s.clone()]).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::running());
}

#[tokio::test(start_paused = true)]
async fn dependencies_a_waiting_delete_is_called_off_when_the_workload_is_added_again() {
    let mut h = harness().await;
    let db = spec("db");
    let web = with_deps(spec("web"), &[("db", AddCondition::Running)]);
    h.rm.server_hello(vec![db.clone(), web.clone()]).await;
    h.running(&db).await;
    h.running(&web).await;
    let del_db = deleted_with(&db, &[("web", DeleteCondition::NotPendingNorRunning)]);
    h.rm.update_workload(vec![], vec![del_db]).await;
    assert_eq!(h.next_of(&db.instance_name).await.kind, StateKind::Stopping(Stopping::WaitingToStop));
    h.rm.update_workload(vec![db.clone()], vec![]).await;
    assert_eq!(h.next_of(&db.instance_name).await, ExecutionState::running(), "back to its real state");
    h.rm.update_workload(vec![], vec![deleted(&web)]).await;
    h.wait_for(&web.instance_name, StateKind::Removed).await;
    h.assert_quiet().await;
    assert_eq!(h.fake.deleted(), vec![web.instance_name.clone()], "db is kept");
}

#[tokio::test(start_paused = true)]
// [test of feature K8: six restarts are one Restarted entry with count 6]
async fn every_restart_is_reported_as_the_same_restarted_event() {
    use ank_common::workload_events::{EventKind, EventRing};
    let mut h = harness().await;
    let s = with_policy(spec("flaky"), RestartPolicy::Always);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    for _ in 0..6 {
        h.fake.exit(&s.instance_name, 1).await;
        assert_eq!(h.next_of(&s.instance_name).await.kind, StateKind::Failed(Failed::ExecFailed));
        h.running(&s).await;
    }
    let mut ring = EventRing::default();
    while let Ok(ev) = h.events.try_recv() {
        assert_eq!(ev.instance_name, s.instance_name);
        ring.record(ev.kind, &ev.reason, "t");
    }
    assert_eq!(ring.len(), 1);
    let e = ring.iter().next().unwrap();
    assert_eq!((e.kind, e.count), (EventKind::Restarted, 6));
    assert_eq!(e.reason, "restartPolicy Always after Failed(ExecFailed)");
}
