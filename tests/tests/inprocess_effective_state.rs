//! In-process server with test commanders: the effective state (Ankaios
//! 1.1's `CompleteState.effectiveState`) is the rendered state the agents
//! get, reachable with masks, reported in events and never written.

use ank_common::messages::{RequestContent, ResponseContent};
use ank_tests::commander::Commander;
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn start_server() -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let empty = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(empty, listener, shutdown.clone()));
    (url, shutdown)
}

/// A workload whose runtimeConfig is a template over a config item.
const TEMPLATED: &str = "apiVersion: v1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    configs:\n      port: web_port\n    runtimeConfig: |\n      image: nginx\n      port: {{port}}\nconfigs:\n  web_port: \"8080\"\n";

#[tokio::test(start_paused = true)]
async fn effective_state_is_the_rendered_state_without_configs() {
    let (url, shutdown) = start_server().await;
    let mut c = Commander::connect(&url).await;
    assert!(matches!(c.apply(TEMPLATED).await, ResponseContent::UpdateStateSuccess { .. }));

    let all = c.complete_state(&[]).await;
    let effective = &all["effectiveState"];
    assert_eq!(effective["apiVersion"], "v1", "{all}");
    assert_eq!(effective["workloads"]["nginx"]["runtimeConfig"], "image: nginx\nport: 8080", "rendered: {all}");
    assert!(effective["configs"].as_object().is_none_or(|m| m.is_empty()), "no configs: {all}");
    // As in Ankaios, each rendered workload drops its config aliases too.
    let nginx = &effective["workloads"]["nginx"];
    assert!(nginx["configs"].as_object().is_none_or(|m| m.is_empty()), "no workload configs: {nginx}");
    assert_eq!(all["desiredState"]["workloads"]["nginx"]["configs"]["port"], "web_port");
    assert_eq!(all["desiredState"]["workloads"]["nginx"]["runtimeConfig"], "image: nginx\nport: {{port}}");
    assert_eq!(all["desiredState"]["configs"]["web_port"], "8080");

    // A mask into it selects its apiVersion too, as for the desired state.
    let masked = c.complete_state(&["effectiveState.workloads.nginx.runtimeConfig"]).await;
    assert_eq!(
        masked,
        json!({"effectiveState": {"apiVersion": "v1", "workloads": {"nginx": {"runtimeConfig": "image: nginx\nport: 8080"}}}})
    );
    // A desired-state mask does not bring it along.
    let desired = c.complete_state(&["desiredState.workloads.nginx.agent"]).await;
    assert!(desired.get("effectiveState").is_none(), "{desired}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn effective_state_follows_a_config_change_in_events() {
    let (url, shutdown) = start_server().await;
    let mut c = Commander::connect(&url).await;
    c.apply(TEMPLATED).await;
    let mut watcher = Commander::connect(&url).await;
    let (id, first) = watcher.subscribe_events(&["effectiveState.workloads"]).await;
    assert_eq!(first["effectiveState"]["workloads"]["nginx"]["agent"], "agent_A", "{first}");

    // Only the config item changes; the rendered workload changes with it.
    let new_state = json!({"desiredState": {"apiVersion": "v1", "configs": {"web_port": "9090"}}});
    let update = RequestContent::UpdateState {
        new_state: ank_tests::typed_state(new_state),
        update_mask: vec!["desiredState.configs.web_port".into()],
    };
    assert!(matches!(c.request(update).await, ResponseContent::UpdateStateSuccess { .. }));
    let ResponseContent::Event { complete_state, altered_fields } = watcher.response_to(&id).await else {
        panic!("expected an event")
    };
    assert_eq!(altered_fields.updated_fields, ["effectiveState.workloads.nginx.runtimeConfig"], "{altered_fields:?}");
    assert_eq!(
        complete_state["effectiveState"]["workloads"]["nginx"]["runtimeConfig"], "image: nginx\nport: 9090",
        "{complete_state}"
    );
    assert_eq!(complete_state["effectiveState"]["apiVersion"], "v1");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn effective_state_cannot_be_written_and_is_ignored_in_a_new_state() {
    let (url, shutdown) = start_server().await;
    let mut c = Commander::connect(&url).await;
    c.apply(TEMPLATED).await;
    let before = c.complete_state(&[]).await;

    let write = RequestContent::UpdateState {
        new_state: ank_tests::typed_state(json!({"effectiveState": {"apiVersion": "v1", "workloads": {}}})),
        update_mask: vec!["effectiveState.workloads.nginx".into()],
    };
    let ResponseContent::Error(message) = c.request(write).await else { panic!("a write must be refused") };
    assert!(message.contains("'effectiveState.workloads.nginx' is read-only"), "{message}");
    assert!(message.contains("update 'desiredState' instead"), "{message}");

    // A whole new state that carries an effectiveState (e.g. one read back
    // and sent again) is taken for its desired state; the rest is ignored.
    let mut resent = before.clone();
    resent["effectiveState"]["workloads"] = json!({});
    resent["desiredState"]["workloads"]["nginx"]["tags"] = json!({"owner": "me"});
    let update = RequestContent::UpdateState { new_state: ank_tests::typed_state(resent), update_mask: vec![] };
    assert!(matches!(c.request(update).await, ResponseContent::UpdateStateSuccess { .. }));
    let after = c.complete_state(&["effectiveState.workloads.nginx.tags"]).await;
    assert_eq!(after["effectiveState"]["workloads"]["nginx"]["tags"], json!({"owner": "me"}), "{after}");
    shutdown.cancel();
}
