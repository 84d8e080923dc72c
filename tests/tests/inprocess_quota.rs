//! In-process server + agent with the FakeRuntime and an agent quota of two
//! workloads (feature K2): the third workload waits in
//! `Pending(QuotaBlocked)` in the server's complete state with one
//! `QuotaBlocked` event whose count grows every tick, the server shows the
//! agent's quota and its use, and a delete lets the third one run.

use std::time::Duration;

use ank_agent::workload_scheduler::SchedulerSettings;
use ank_common::quota::QuotaLimits;
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;

const TICK: Duration = Duration::from_millis(100);

async fn setup(max_workloads: u32) -> InProcess {
    InProcess::start_with(|config| {
        config.scheduler =
            SchedulerSettings { tick: TICK, quota: QuotaLimits { max_workloads, max_memory: 0 }, ..Default::default() };
    })
    .await
}

fn manifest(names: &[&str]) -> String {
    let mut m = String::from("apiVersion: v1\nworkloads:\n");
    for name in names {
        m.push_str(&format!(
            "  {name}:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [sleep, \"1000\"]\n"
        ));
    }
    m
}

/// The QuotaBlocked events of `workload` in the server's complete state.
async fn quota_blocked_events(c: &mut Commander, workload: &str) -> Vec<serde_json::Value> {
    let state = c.complete_state(&["workloadStates"]).await;
    let by_id = state["workloadStates"]["agent_A"][workload].as_object().cloned().unwrap_or_default();
    by_id
        .values()
        .flat_map(|entry| entry["events"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["kind"] == "QuotaBlocked")
        .collect()
}

#[tokio::test(start_paused = true)]
// [itest of feature K2]
async fn itest_third_workload_is_quota_blocked_with_a_growing_event_until_one_is_deleted() {
    let s = setup(2).await;
    let mut c = Commander::connect(&s.url).await;
    c.apply(&manifest(&["w1", "w2", "w3"])).await;
    c.wait_for_state("w1", "Running(Ok)").await;
    c.wait_for_state("w2", "Running(Ok)").await;
    let blocked = c.wait_for_state("w3", "Pending(QuotaBlocked)").await;
    assert_eq!(blocked.additional_info, "agent_A 2/2");

    let first = ank_tests::eventually("the quota", Duration::from_secs(5), async || {
        let events = quota_blocked_events(&mut c, "w3").await;
        events.first().and_then(|e| e["count"].as_u64()).filter(|n| *n >= 2).map(|n| (n, events.len()))
    })
    .await;
    assert_eq!(first.1, 1, "one entry, not one per tick");
    let grown = ank_tests::eventually("the quota", Duration::from_secs(5), async || {
        let events = quota_blocked_events(&mut c, "w3").await;
        events.first().and_then(|e| e["count"].as_u64()).filter(|n| *n >= first.0 + 5)
    })
    .await;
    assert!(grown >= first.0 + 5);
    assert_eq!(quota_blocked_events(&mut c, "w3").await[0]["reason"], "agent_A 2/2");

    // The server shows the quota and its use (from the load status, every 2 s).
    let quota = ank_tests::eventually("the quota", Duration::from_secs(5), async || {
        let agents = c.complete_state(&["agents"]).await;
        let quota = agents["agents"]["agent_A"]["quota"].clone();
        (quota["usedWorkloads"] == 2).then_some(quota)
    })
    .await;
    assert_eq!(quota, serde_json::json!({"maxWorkloads": 2, "maxMemory": 0, "usedWorkloads": 2, "usedMemory": 0}));

    c.delete(&["w1"]).await;
    c.wait_for_state("w3", "Running(Ok)").await;
    let creates_of_w3 = s.fake.created().iter().filter(|i| i.workload_name == "w3").count();
    assert_eq!(creates_of_w3, 1, "waiting for quota used no create retries");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}
