//! In-process server with test commanders (no agent): desired-state updates,
//! initial states, validation errors and the state seen by a second
//! commander.

use ank_common::messages::ResponseContent;
use ank_tests::commander::Commander;
use tokio_util::sync::CancellationToken;

async fn start_server(initial: ank_common::State) -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    tokio::spawn(ank_server::run(initial, listener, shutdown.clone()));
    (url, shutdown)
}

fn empty() -> ank_common::State {
    ank_common::State { api_version: "v1".into(), ..Default::default() }
}

const MANIFEST: &str = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: absent\n    runtimeConfig: |\n      image: x\n  p:\n    runtime: podman\n    agent: \"\"\n    runtimeConfig: |\n      image: y\n";

#[tokio::test]
async fn server_update_reports_added_instances_and_initial_states() {
    let (url, shutdown) = start_server(empty()).await;
    let mut c = Commander::connect(&url).await;
    let ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads } = c.apply(MANIFEST).await else {
        panic!("update rejected")
    };
    assert_eq!(added_workloads.len(), 1);
    assert!(added_workloads[0].starts_with("a.") && added_workloads[0].ends_with(".absent"));
    assert!(deleted_workloads.is_empty());
    c.wait_for_state("a", "Pending(Initial)").await;
    c.wait_for_state("p", "NotScheduled").await;

    let state = c.complete_state(&["desiredState.workloads.a.agent"]).await;
    assert_eq!(
        state,
        serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "absent"}}}})
    );

    // The agent is not connected, so the server removes the state itself.
    let ResponseContent::UpdateStateSuccess { deleted_workloads, .. } = c.delete(&["a", "p"]).await else {
        panic!("delete rejected")
    };
    assert_eq!(deleted_workloads.len(), 1);
    c.wait_for_state("a", "Removed").await;
    let state = c.complete_state(&["workloadStates"]).await;
    assert!(state["workloadStates"].as_object().is_none_or(|m| m.is_empty()), "{state}");
    shutdown.cancel();
}

#[tokio::test]
async fn server_rejects_invalid_updates_and_keeps_serving() {
    let (url, shutdown) = start_server(empty()).await;
    let mut c = Commander::connect(&url).await;
    c.apply(MANIFEST).await;
    let before = c.complete_state(&["desiredState"]).await;
    let bad_agent = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"b": {"runtime": "podman", "agent": "no good", "runtimeConfig": ""}}}});
    let bad_version = serde_json::json!({"desiredState": {"apiVersion": "v0.9"}});
    for (new_state, mask, needle) in
        [(bad_agent, vec!["desiredState.workloads.b".to_owned()], "no good"), (bad_version, vec![], "v0.9")]
    {
        let r = c
            .request(ank_common::messages::RequestContent::UpdateState {
                new_state: Box::new(new_state),
                update_mask: mask,
            })
            .await;
        let ResponseContent::Error(e) = r else { panic!("expected an error, got {r:?}") };
        assert!(e.contains(needle), "{e}");
    }
    assert_eq!(c.complete_state(&["desiredState"]).await, before);
    // A second commander sees the same state.
    let mut other = Commander::connect(&url).await;
    assert_eq!(other.complete_state(&["desiredState"]).await, before);
    shutdown.cancel();
}
