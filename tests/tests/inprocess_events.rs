//! In-process server + agent with the FakeRuntime: workload events travel
//! from the agent's control loop through the AgentManager to the server's
//! per-workload ring and back out in the complete state.

use std::time::Duration;

use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

const FLAKY: &str = "apiVersion: v1\nworkloads:\n  flaky:\n    runtime: podman\n    agent: agent_A\n    restartPolicy: ALWAYS\n    runtimeConfig: |\n      image: localhost/busybox:latest\n";

/// Polls the complete state until `check` accepts the events of `workload`.
async fn events_until(
    c: &mut Commander,
    workload: &str,
    check: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let state = c.complete_state(&["workloadStates"]).await;
        let events = state["workloadStates"]["agent_A"][workload]
            .as_object()
            .and_then(|ids| ids.values().next())
            .and_then(|s| s["events"].as_array().cloned())
            .unwrap_or_default();
        if check(&events) {
            return events;
        }
        assert!(tokio::time::Instant::now() < deadline, "events of '{workload}' never matched: {events:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// [itest of feature K8: six restarts are one Restarted event with count 6 in the server's state]
#[tokio::test(start_paused = true)]
async fn itest_restarts_show_as_one_counted_event() {
    let s = InProcess::start().await;
    let (url, fake) = (s.url.clone(), s.fake.clone());
    let mut c = Commander::connect(&url).await;
    c.apply(FLAKY).await;
    c.wait_for_state("flaky", "Running(Ok)").await;
    for round in 1..=6 {
        let instance = fake.created().into_iter().last().expect("created");
        fake.exit(&instance, 1).await;
        // The restart is a new create of the same instance.
        let restarted = async || (fake.created().len() > round).then_some(());
        ank_tests::eventually(&format!("restart {round}"), Duration::from_secs(30), restarted).await;
        c.wait_for_state("flaky", "Running(Ok)").await;
    }
    let events = events_until(&mut c, "flaky", |e| e.iter().any(|e| e["count"] == 6)).await;
    let restarted: Vec<_> = events.iter().filter(|e| e["kind"] == "Restarted").collect();
    assert_eq!(restarted.len(), 1, "{events:?}");
    assert_eq!(restarted[0]["count"], 6);
    assert_eq!(restarted[0]["reason"], "restartPolicy Always after Failed(ExecFailed)");
    assert!(restarted[0]["firstSeen"].as_str().unwrap() <= restarted[0]["last"].as_str().unwrap());
    s.stop();
}
