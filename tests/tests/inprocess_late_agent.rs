//! In-process server + agents with the FakeRuntime on a paused clock: by
//! default (as in Ankaios) the server hands a dependent to its agent at once
//! and the agent waits for the dependency, however late the dependency's
//! agent comes; a workload on an absent agent stays `Pending(Initial)`.

use std::time::Duration;

use ank_common::messages::ResponseContent;
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

/// `a` on `agent_Z` (not started yet); `b` on `agent_A` and `c` on
/// `agent_Z`, both needing `a` running.
const MANIFEST: &str = "apiVersion: v1
workloads:
  a:
    runtime: podman
    agent: agent_Z
    runtimeConfig: |
      image: localhost/busybox:latest
  b:
    runtime: podman
    agent: agent_A
    dependencies:
      a: ADD_COND_RUNNING
    runtimeConfig: |
      image: localhost/busybox:latest
  c:
    runtime: podman
    agent: agent_Z
    dependencies:
      a: ADD_COND_RUNNING
    runtimeConfig: |
      image: localhost/busybox:latest
";

/// The execution state of workload `name` as the server holds it.
async fn state_of(c: &mut Commander, agent: &str, name: &str) -> String {
    let tree = c.complete_state(&["workloadStates"]).await;
    let by_id = tree["workloadStates"][agent][name].as_object().unwrap_or_else(|| panic!("{name}: {tree}")).clone();
    let (_, s) = by_id.into_iter().next().expect("one instance");
    format!("{}({})", s["state"].as_str().unwrap_or_default(), s["subState"].as_str().unwrap_or_default())
}

#[tokio::test(start_paused = true)]
async fn a_dependent_goes_to_its_agent_at_once_and_starts_when_a_late_agent_runs_its_dependency() {
    let s = InProcess::start().await;
    let mut c = Commander::connect(&s.url).await;
    let ResponseContent::UpdateStateSuccess { job_id, .. } = c.apply(MANIFEST).await else { panic!("apply rejected") };

    // b went to agent_A at once; its agent, not the server, holds it back.
    c.wait_for_state("b", "Pending(WaitingToStart)").await;
    assert!(s.fake.created().is_empty(), "nothing starts before a runs");
    // a and c have no agent yet: Pending(Initial), as Ankaios shows them.
    assert_eq!(state_of(&mut c, "agent_Z", "a").await, "Pending(Initial)");
    assert_eq!(state_of(&mut c, "agent_Z", "c").await, "Pending(Initial)");

    // Longer than the old stuck timeout (300 s): nothing gives up.
    tokio::time::sleep(Duration::from_secs(6 * 60)).await;
    let jobs = c.complete_state(&["jobs"]).await;
    assert_eq!(jobs["jobs"][job_id.to_string()]["phase"], "Progressing", "{jobs}");
    assert_eq!(state_of(&mut c, "agent_Z", "c").await, "Pending(Initial)");

    // The late agent comes: a runs there, then c there and b on agent_A.
    let late = s.spawn_agent("agent_Z");
    c.wait_for_state("a", "Running(Ok)").await;
    c.wait_for_state("b", "Running(Ok)").await;
    c.wait_for_state("c", "Running(Ok)").await;
    assert_eq!(s.fake.created().iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["b"]);
    let jobs = c.complete_state(&["jobs"]).await;
    assert_eq!(jobs["jobs"][job_id.to_string()]["phase"], "Succeeded", "{jobs}");
    late.stop.cancel();
    s.agent_stop.cancel();
    s.server_stop.cancel();
}
