//! Which workload states the server forwards to which agent: an agent of
//! this orchestrator (its hello says it reports conditions) gets only the
//! states its workloads' dependencies need, the current ones first when a
//! workload starts to need them; an Ankaios agent gets every state, as from
//! Ankaios. Dependencies across agents work both ways: a dependent starts
//! on its dependency's state, and a dependency's deletion waits while its
//! dependent on another agent runs.

use std::time::Duration;

use ank_common::messages::{FromServer, RequestContent, ToServer};
use ank_common::{ExecutionState, WorkloadState};
use ank_tests::adversary::{self, RawStream, Service, agent_hello};
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

/// `a` on agent_A; `r` on agent_R; `k` on agent_K; nothing depends on anything.
const START: &str = "apiVersion: v1
workloads:
  a:
    runtime: podman
    agent: agent_A
    runtimeConfig: |
      image: a
  r:
    runtime: podman
    agent: agent_R
    runtimeConfig: |
      image: r
  k:
    runtime: podman
    agent: agent_K
    runtimeConfig: |
      image: k
";

/// `r2` on agent_R (applied to START's workloads), which needs `a` running.
const WITH_DEPENDENT: &str = "apiVersion: v1
workloads:
  r2:
    runtime: podman
    agent: agent_R
    dependencies:
      a: ADD_COND_RUNNING
    runtimeConfig: |
      image: r2
";

/// The workload names of the states messages among `messages`.
fn forwarded(messages: &[FromServer]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| match m {
            FromServer::UpdateWorkloadState(s) => s.iter().map(|s| s.instance_name.workload_name.clone()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

fn read() -> RequestContent {
    RequestContent::CompleteState { field_mask: vec!["agents".into()], subscribe_for_events: false }
}

#[tokio::test(start_paused = true)]
async fn an_agent_of_ours_is_sent_only_the_states_it_needs_and_an_ankaios_agent_all() {
    let (url, shutdown) = adversary::start_server(None, adversary::state(START), |_| {}).await;
    let mut a = RawStream::agent(&url, None, "agent_A").await.expect("agent_A");
    let mut r = RawStream::agent(&url, None, "agent_R").await.expect("agent_R");
    // Ankaios' own agent does not report conditions.
    let ankaios_hello = match agent_hello("agent_K") {
        ToServer::AgentHello { agent_name, protocol_version, tags, capabilities, quota, .. } => {
            ToServer::AgentHello { agent_name, protocol_version, tags, reports_conditions: false, capabilities, quota }
        }
        other => unreachable!("{other:?}"),
    };
    let mut k = RawStream::open(&url, None, Service::Agent, &[ankaios_hello]).await.expect("agent_K");
    let a_spec = a
        .recv_until(|m| match m {
            FromServer::ServerHello(specs) => specs.into_iter().next(),
            _ => None,
        })
        .await;
    r.recv_until(|m| matches!(m, FromServer::ServerHello(_)).then_some(())).await;
    k.recv_until(|m| matches!(m, FromServer::ServerHello(_)).then_some(())).await;

    // agent_A reports `a` running: the Ankaios agent gets it ...
    let running = WorkloadState::new(a_spec.instance_name.clone(), ExecutionState::running());
    assert!(a.send(&ToServer::UpdateWorkloadState(vec![running.clone()])).await);
    k.recv_until(|m| match m {
        FromServer::UpdateWorkloadState(s) => s
            .into_iter()
            .find(|s| s.instance_name == running.instance_name && s.execution_state == running.execution_state),
        _ => None,
    })
    .await;
    // ... agent_R, which nothing of needs `a`, does not (everything it is
    // sent up to the answer of a later request).
    let (_, before) = r.request(read()).await;
    assert!(forwarded(&before).is_empty(), "agent_R was sent the states of {:?}", forwarded(&before));

    // r2 on agent_R needs `a`: a's current state comes before r2.
    let mut c = Commander::connect(&url).await;
    c.apply(WITH_DEPENDENT).await;
    let mut before = Vec::new();
    loop {
        match r.recv().await.expect("no error").expect("a message") {
            FromServer::UpdateWorkload { added, .. } if added.iter().any(|s| s.name() == "r2") => break,
            m => before.push(m),
        }
    }
    assert_eq!(forwarded(&before), ["a"], "a's current state before r2: {before:?}");
    // From now on a's changes reach agent_R, and only those.
    let succeeded = WorkloadState::new(a_spec.instance_name.clone(), ExecutionState::succeeded());
    assert!(a.send(&ToServer::UpdateWorkloadState(vec![succeeded])).await);
    let got = r
        .recv_until(|m| match m {
            FromServer::UpdateWorkloadState(s) => Some(s),
            _ => None,
        })
        .await;
    assert_eq!(got.iter().map(|s| s.instance_name.workload_name.as_str()).collect::<Vec<_>>(), ["a"]);
    assert_eq!(got[0].execution_state, ExecutionState::succeeded());
    shutdown.cancel();
}

/// `a` on agent_Z.
const DEPENDENCY: &str = "apiVersion: v1
workloads:
  a:
    runtime: podman
    agent: agent_Z
    runtimeConfig: |
      image: localhost/busybox:latest
";

/// `b` on agent_A, which needs `a` running.
const DEPENDENT: &str = "apiVersion: v1
workloads:
  b:
    runtime: podman
    agent: agent_A
    dependencies:
      a: ADD_COND_RUNNING
    runtimeConfig: |
      image: localhost/busybox:latest
";

#[tokio::test(start_paused = true)]
async fn dependencies_across_agents_hold_both_ways_with_only_the_needed_states_forwarded() {
    let s = InProcess::start().await;
    let agent_z = s.spawn_agent("agent_Z");
    let z = &agent_z.fake;
    let mut c = Commander::connect(&s.url).await;

    // `a` runs before anything needs it: agent_A is not sent its state ...
    c.apply(DEPENDENCY).await;
    c.wait_for_state("a", "Running(Ok)").await;
    // ... and gets it with `b`, which starts on it.
    c.apply(DEPENDENT).await;
    c.wait_for_state("b", "Running(Ok)").await;
    assert_eq!(s.fake.created().iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["b"]);

    // `a` deleted while `b` runs: agent_Z, sent b's current state with the
    // deletion, holds `a` ...
    c.delete(&["a"]).await;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(z.deleted().is_empty(), "a deleted while b still runs: {}", c.complete_state(&["workloadStates"]).await);
    // (30 s: longer than the TTL resync, which sends the deletion again
    // with the same conditions) ... until b's states say it is gone.
    c.delete(&["b"]).await;
    c.wait_for_state("a", "Removed").await;
    assert_eq!(s.fake.deleted().iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["b"]);
    assert_eq!(z.deleted().iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["a"]);
    agent_z.stop.cancel();
    s.stop();
}
