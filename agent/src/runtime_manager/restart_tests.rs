//! Tests of what the agent does with the containers it finds at its start
//! (as Ankaios: a running one is taken over, an unchanged succeeded one is
//! started again in place, a failed or changed one is replaced), and of the
//! restart policy reusing a succeeded container, through the RuntimeManager
//! and the FakeRuntime.

use std::sync::Arc;
use std::time::Duration;

use ank_common::workload::{RestartPolicy, WorkloadSpec};
use ank_common::{ExecutionState, StateKind};

use super::RuntimeRegistry;
use super::tests::{harness_in, harness_with, spec, spec_with, starting};
use crate::runtime_connectors::fake::{FakeCall, FakeRuntime};
use crate::workload::retention::Retention;

fn with_policy(name: &str, policy: RestartPolicy) -> WorkloadSpec {
    let mut s = spec(name);
    s.workload.restart_policy = policy;
    s
}

const POLICIES: [(&str, RestartPolicy); 3] =
    [("never", RestartPolicy::Never), ("onfailure", RestartPolicy::OnFailure), ("always", RestartPolicy::Always)];

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-existing-workloads-reuse-unmodified~1]
// [utest->swdd~agent-existing-workloads-replace-updated~2]
// [utest->swdd~agent-existing-workloads-resume-existing~2]
async fn agent_start_runs_unchanged_exited_workloads_again_whatever_their_restart_policy() {
    let fake = FakeRuntime::new();
    let mut all = Vec::new();
    for (p, policy) in POLICIES {
        let (ok, bad, run) = (
            with_policy(&format!("ok-{p}"), policy),
            with_policy(&format!("bad-{p}"), policy),
            with_policy(&format!("run-{p}"), policy),
        );
        let ids = (
            fake.insert_existing(ok.instance_name.clone(), ExecutionState::succeeded()),
            fake.insert_existing(bad.instance_name.clone(), ExecutionState::failed("Exit code: '1'")),
            fake.insert_existing(run.instance_name.clone(), ExecutionState::running()),
        );
        all.push((ok, bad, run, ids));
    }
    let mut h = harness_with(fake).await;
    h.rm.server_hello(all.iter().flat_map(|(a, b, c, _)| [a.clone(), b.clone(), c.clone()]).collect()).await;
    let restarted: Vec<&WorkloadSpec> = all.iter().flat_map(|(ok, bad, _, _)| [ok, bad]).collect();
    h.until_all_running(&restarted).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (ok, bad, run, (ok_id, bad_id, run_id)) in &all {
        let p = &ok.workload.restart_policy;
        // Succeeded: `podman start` of the same container, its logs kept.
        assert_eq!(h.fake.workload_id_of(&ok.instance_name).as_ref(), Some(ok_id), "{p:?}: the same container");
        assert!(h.fake.started().contains(&ok.instance_name), "{p:?}");
        assert!(!h.fake.created().contains(&ok.instance_name), "{p:?}: not created anew");
        // Failed: removed and created anew (its file system may be broken).
        assert_ne!(h.fake.workload_id_of(&bad.instance_name).as_ref(), Some(bad_id), "{p:?}: a new container");
        assert!(h.fake.deleted().contains(&bad.instance_name), "{p:?}");
        assert!(h.fake.created().contains(&bad.instance_name), "{p:?}");
        // Running: taken over as it is.
        assert_eq!(h.fake.workload_id_of(&run.instance_name).as_ref(), Some(run_id), "{p:?}");
        let touched = |c: &FakeCall| matches!(c, FakeCall::Create(n) | FakeCall::Start(n) | FakeCall::Delete(n) if *n == run.instance_name);
        assert!(!h.fake.calls().iter().any(touched), "{p:?}: a running workload is left alone");
    }
    let bad = &all[0].1;
    let calls = h.fake.calls();
    let del = calls.iter().position(|c| *c == FakeCall::Delete(bad.instance_name.clone())).unwrap();
    let add = calls.iter().position(|c| *c == FakeCall::Create(bad.instance_name.clone())).unwrap();
    assert!(del < add, "the failed container is removed before the new one is created");
}

#[tokio::test(start_paused = true)]
// [utest->swdd~agent-existing-workloads-replace-updated~2]
async fn agent_start_replaces_a_changed_exited_workload() {
    let fake = FakeRuntime::new();
    let old = spec_with("job", "podman", "image: localhost/job:1\n");
    let new = spec_with("job", "podman", "image: localhost/job:2\n");
    fake.insert_existing(old.instance_name.clone(), ExecutionState::succeeded());
    let mut h = harness_with(fake).await;
    h.rm.server_hello(vec![new.clone()]).await;
    h.running(&new).await;
    assert_eq!(h.fake.deleted(), vec![old.instance_name.clone()]);
    assert_eq!(h.fake.created(), vec![new.instance_name.clone()]);
    assert!(h.fake.started().is_empty());
}

#[tokio::test(start_paused = true)]
// [test of feature K7: with reaping switched on, finished workloads stay finished across agent restarts]
async fn agent_start_with_reaping_on_takes_finished_workloads_over() {
    let fake = Arc::new(FakeRuntime::new());
    let (ok, bad) = (spec("ok"), spec("bad"));
    fake.insert_existing(ok.instance_name.clone(), ExecutionState::succeeded());
    fake.insert_existing(bad.instance_name.clone(), ExecutionState::failed("Exit code: '4'"));
    let io = tempfile::tempdir().expect("temp io folder");
    let reaping = Retention::after(Duration::from_secs(60), Duration::from_secs(3600));
    let mut h = harness_in(fake, RuntimeRegistry::new(), io, reaping, Default::default()).await;
    h.rm.server_hello(vec![ok.clone(), bad.clone()]).await;
    let mut seen = [h.next().await, h.next().await];
    seen.sort_by(|x, y| x.instance_name.cmp(&y.instance_name));
    assert_eq!(seen[0].execution_state, ExecutionState::failed("Exit code: '4'"));
    assert_eq!(seen[1].execution_state, ExecutionState::succeeded());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(h.fake.created().is_empty() && h.fake.started().is_empty(), "{:?}", h.fake.calls());
}

#[tokio::test(start_paused = true)]
async fn a_start_again_that_fails_removes_the_container_and_the_retry_creates_it_anew() {
    let fake = FakeRuntime::new();
    let job = spec("job");
    let old_id = fake.insert_existing(job.instance_name.clone(), ExecutionState::succeeded());
    fake.fail_creates_of("job", "Error: image not known");
    let mut h = harness_with(fake).await;
    h.rm.server_hello(vec![job.clone()]).await;
    assert_eq!(h.next_of(&job.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    // The harness runs the limited retry mode.
    assert_eq!(
        h.next_of(&job.instance_name).await,
        ExecutionState::with_info(starting(), "Retry 1 of 20: Error: image not known")
    );
    assert_eq!(h.fake.started(), vec![job.instance_name.clone()]);
    assert_eq!(h.fake.deleted(), vec![job.instance_name.clone()], "the container that did not start is removed");
    h.fake.clear_failures();
    h.running(&job).await;
    assert_eq!(h.fake.created(), vec![job.instance_name.clone()], "the retry created it anew");
    assert_ne!(h.fake.workload_id_of(&job.instance_name), Some(old_id));
}

#[tokio::test(start_paused = true)]
// [utest->swdd~workload-control-loop-reuses-bundle-on-successful-restart~1]
// [utest->swdd~workload-control-loop-restarts-workloads-using-update~1]
async fn restart_policy_always_reuses_a_succeeded_container_and_replaces_a_failed_one() {
    let mut h = harness_with(FakeRuntime::new()).await;
    let s = with_policy("svc", RestartPolicy::Always);
    h.rm.server_hello(vec![s.clone()]).await;
    h.running(&s).await;
    let first = h.fake.workload_id_of(&s.instance_name).unwrap();
    h.fake.exit(&s.instance_name, 0).await;
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::succeeded());
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::with_info(starting(), "Triggered at runtime."));
    assert_eq!(h.next_of(&s.instance_name).await, ExecutionState::running());
    assert_eq!(h.fake.workload_id_of(&s.instance_name), Some(first.clone()), "the same container runs again");
    assert_eq!((h.fake.started().len(), h.fake.deleted().len()), (1, 0));
    h.fake.exit(&s.instance_name, 2).await;
    assert_eq!(
        h.next_of(&s.instance_name).await.kind,
        StateKind::Failed(ank_common::execution_state::Failed::ExecFailed)
    );
    h.running(&s).await;
    assert_ne!(h.fake.workload_id_of(&s.instance_name), Some(first), "a failed container is replaced");
    assert_eq!(h.fake.deleted(), vec![s.instance_name.clone()]);
    assert_eq!(h.fake.created().len(), 2);
    assert_eq!(h.fake.containers().len(), 1);
}
