//! In-process server + agent with the in-memory FakeRuntime: a pipeline
//! group runs its members one after the other, and a failed step cancels
//! the rest, which the runtime never sees; a batch group's defaults reach
//! the agent.

use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_common::messages::{RequestContent, ResponseContent};
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

async fn setup() -> InProcess {
    InProcess::start().await
}

const PIPELINE: &str = "apiVersion: v1
workloads:
  s1:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [true]
  s2:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [false]
  s3:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [echo, never]
groups:
  upd:
    mode: pipeline
    members: [s1, s2, s3]
";

/// The instance the fake runtime created for `name`, waiting up to 5 s.
async fn created(fake: &FakeRuntime, name: &str) -> ank_common::WorkloadInstanceName {
    let found = async || fake.created().into_iter().find(|n| n.workload_name == name);
    ank_tests::eventually(&format!("'{name}' created"), Duration::from_secs(5), found).await
}

// [itest of feature K6]
#[tokio::test(start_paused = true)]
async fn itest_a_pipeline_runs_in_order_and_a_failed_step_cancels_the_rest() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let answer = c.apply(PIPELINE).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");

    let s1 = created(&s.fake, "s1").await;
    c.wait_for_state("s1", "Running(Ok)").await;
    assert_eq!(s.fake.created().len(), 1, "s2 waits for s1 to succeed");
    s.fake.exit(&s1, 0).await;
    c.wait_for_state("s1", "Succeeded(Ok)").await;

    let s2 = created(&s.fake, "s2").await;
    c.wait_for_state("s2", "Running(Ok)").await;
    s.fake.exit(&s2, 1).await;
    c.wait_for_state("s2", "Failed(ExecFailed)").await;
    let canceled = c.wait_for_state("s3", "Pending(Canceled)").await;
    assert_eq!(canceled.additional_info, "pipeline upd: s2 failed");

    // Give the agent time it would need to start s3: it never does.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(s.fake.created().iter().all(|n| n.workload_name != "s3"), "{:?}", s.fake.created());
    let state = c.complete_state(&["workloadStates", "desiredState.groups"]).await;
    let s3 = state["workloadStates"]["agent_A"]["s3"].as_object().expect("s3 row").values().next().unwrap().clone();
    assert_eq!(s3["subState"], "Canceled", "{state}");
    let event = s3["events"].as_array().and_then(|e| e.iter().find(|e| e["kind"] == "Canceled")).cloned();
    assert_eq!(event.expect("Canceled event")["reason"], "pipeline upd: s2 failed");
    assert_eq!(state["desiredState"]["groups"]["upd"]["mode"], "pipeline");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}

// [itest of feature K6]
// [itest of feature K9]
#[tokio::test(start_paused = true)]
async fn itest_batch_defaults_and_seq_numbers_reach_the_agent() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let batch = "apiVersion: v1
workloads:
  m1:
    runtime: podman
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [sleep, \"${seq:8000}\"]
  m2:
    runtime: podman
    priority: 2
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [sleep, \"${seq:8000}\"]
groups:
  nightly:
    priority: 7
    agent: agent_A
    members: [m1, m2]
";
    let answer = c.apply(batch).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    c.wait_for_state("m1", "Running(Ok)").await;
    c.wait_for_state("m2", "Running(Ok)").await;
    let ResponseContent::CompleteState(rendered) =
        c.request(RequestContent::RenderedState { field_mask: vec!["desiredState.workloads".into()] }).await
    else {
        panic!("no rendered state")
    };
    let rendered = rendered.to_json().unwrap();
    let workloads = &rendered["desiredState"]["workloads"];
    assert_eq!(
        (workloads["m1"]["effectivePriority"].as_u64(), workloads["m2"]["effectivePriority"].as_u64()),
        (Some(7), Some(2))
    );
    assert_eq!(workloads["m1"]["agent"], "agent_A");
    let rc = |n: &str| workloads[n]["runtimeConfig"].as_str().unwrap().to_owned();
    assert!(rc("m1").contains("\"8000\"") && rc("m2").contains("\"8001\""), "{rendered}");
    let m1 = created(&s.fake, "m1").await;
    let want = ank_common::WorkloadInstanceName::new(
        &ank_common::WorkloadName::new("m1").unwrap(),
        &ank_common::AgentName::new("agent_A").unwrap(),
        &rc("m1"),
    );
    assert_eq!(m1, want, "the agent runs the rendered spec");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}
