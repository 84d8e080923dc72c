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

#[tokio::test(start_paused = true)]
async fn server_update_reports_added_instances_and_initial_states() {
    let (url, shutdown) = start_server(empty()).await;
    let mut c = Commander::connect(&url).await;
    let ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, .. } = c.apply(MANIFEST).await else {
        panic!("update rejected")
    };
    // As in Ankaios, the workload without an agent is named too (`p.<id>.`).
    assert_eq!(added_workloads.len(), 2, "{added_workloads:?}");
    assert!(added_workloads[0].starts_with("a.") && added_workloads[0].ends_with(".absent"));
    assert!(added_workloads[1].starts_with("p.") && added_workloads[1].ends_with('.'));
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
    assert_eq!(deleted_workloads.len(), 2, "{deleted_workloads:?}");
    c.wait_for_state("a", "Removed").await;
    let state = c.complete_state(&["workloadStates"]).await;
    assert!(state["workloadStates"].as_object().is_none_or(|m| m.is_empty()), "{state}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
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
                new_state: ank_tests::typed_state(new_state),
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

#[tokio::test(start_paused = true)]
async fn server_sends_events_with_altered_fields_until_cancelled() {
    let (url, shutdown) = start_server(empty()).await;
    let mut watcher = Commander::connect(&url).await;
    let mut all = Commander::connect(&url).await;
    let (id, initial) = watcher.subscribe_events(&["desiredState.workloads.*.agent"]).await;
    assert_eq!(initial, serde_json::json!({"desiredState": {"apiVersion": "v1"}}));
    let (all_id, _) = all.subscribe_events(&[]).await;

    let mut changer = Commander::connect(&url).await;
    changer.apply(MANIFEST).await;
    let ResponseContent::Event { complete_state, altered_fields } = watcher.response_to(&id).await else {
        panic!("expected an event")
    };
    assert_eq!(altered_fields.added_fields, ["desiredState.workloads.a.agent", "desiredState.workloads.p.agent"]);
    assert!(altered_fields.updated_fields.is_empty() && altered_fields.removed_fields.is_empty());
    assert_eq!(
        *complete_state,
        serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"a": {"agent": "absent"}, "p": {"agent": ""}}}})
    );
    // The unfiltered subscriber also sees the workloads and their states.
    let ResponseContent::Event { altered_fields, .. } = all.response_to(&all_id).await else { panic!("event") };
    assert!(altered_fields.added_fields.contains(&"desiredState.workloads.a".to_owned()), "{altered_fields:?}");
    assert!(altered_fields.added_fields.iter().any(|f| f.starts_with("workloadStates")), "{altered_fields:?}");

    changer.delete(&["p"]).await;
    let ResponseContent::Event { altered_fields, .. } = watcher.response_to(&id).await else { panic!("event") };
    assert_eq!(altered_fields.removed_fields, ["desiredState.workloads.p.agent"]);
    let ResponseContent::Event { altered_fields, .. } = all.response_to(&all_id).await else { panic!("event") };
    assert!(altered_fields.removed_fields.contains(&"desiredState.workloads.p".to_owned()), "{altered_fields:?}");

    assert_eq!(watcher.cancel_events(&id).await, ResponseContent::EventsCancelAccepted);
    let ResponseContent::Error(e) = watcher.cancel_events(&id).await else { panic!("second cancel must fail") };
    assert!(e.contains(&id), "{e}");
    // After the cancel a change gives this commander no event, only the
    // other subscriber.
    changer.delete(&["a"]).await;
    let ResponseContent::Event { altered_fields, .. } = all.response_to(&all_id).await else { panic!("event") };
    eprintln!("DEBUG {altered_fields:?}");
    assert!(altered_fields.removed_fields.contains(&"desiredState.workloads.a".to_owned()), "{altered_fields:?}");
    let state = watcher.complete_state(&["desiredState.workloads"]).await;
    assert!(state["desiredState"]["workloads"].as_object().is_none_or(|m| m.is_empty()), "{state}");
    shutdown.cancel();
}

/// Starts a server that saves its desired state in `file`.
async fn start_saving_server(file: &std::path::Path) -> (String, CancellationToken) {
    let state_file = ank_server::state_file::StateFile::new(file);
    let (initial, _) = ank_server::initial_state(Some(&state_file), None).expect("initial state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let options = ank_server::grpc::ServeOptions::default();
    tokio::spawn(ank_server::run_with(initial, Some(state_file), listener, options, shutdown.clone()));
    (url, shutdown)
}

#[tokio::test(start_paused = true)]
async fn server_saves_every_accepted_state_and_a_restart_serves_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state.json");
    let (url, shutdown) = start_saving_server(&file).await;
    let mut c = Commander::connect(&url).await;
    assert!(matches!(c.apply(MANIFEST).await, ResponseContent::UpdateStateSuccess { .. }));
    let before = c.complete_state(&["desiredState"]).await;
    shutdown.cancel();

    let (url, shutdown) = start_saving_server(&file).await;
    let mut c = Commander::connect(&url).await;
    assert_eq!(c.complete_state(&["desiredState"]).await, before, "same desired state after the restart");
    let states = c.complete_state(&["workloadStates.absent.a"]).await;
    let instance = states["workloadStates"]["absent"]["a"].as_object().expect("a state for 'a'");
    let s = instance.values().next().unwrap();
    assert_eq!(
        (&s["state"], &s["subState"]),
        (&serde_json::json!("Pending"), &serde_json::json!("Initial")),
        "{states}"
    );
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn server_refuses_an_update_it_cannot_save_and_keeps_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (url, shutdown) = start_saving_server(&sub.join("state.json")).await;
    let mut c = Commander::connect(&url).await;
    std::fs::remove_dir_all(&sub).unwrap();
    let ResponseContent::Error(e) = c.apply(MANIFEST).await else { panic!("an unsaved update was accepted") };
    assert!(e.starts_with("Update rejected: 'cannot write state file") && e.contains("sub/state.json"), "{e}");
    let state = c.complete_state(&["desiredState.workloads"]).await;
    assert!(
        state["desiredState"].get("workloads").is_none_or(|w| w.as_object().is_some_and(|m| m.is_empty())),
        "{state}"
    );
    shutdown.cancel();
}

/// Opens an agent stream for `name` and says hello; returns the stream
/// (kept open by holding the sender) after the ServerHello arrived.
async fn agent_stream(
    url: &str,
    name: &str,
) -> (tokio::sync::mpsc::Sender<ank_proto::grpc_api::ToServer>, tonic::Streaming<ank_proto::grpc_api::FromServer>) {
    use ank_common::messages::{FromServer, ToServer};
    use ank_common::messages::{from_server_from_proto, to_server_to_proto};
    use ank_proto::grpc_api::agent_connection_client::AgentConnectionClient;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    let hello = ToServer::AgentHello {
        agent_name: name.into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: false,
        capabilities: Vec::new(),
        quota: Default::default(),
    };
    tx.send(to_server_to_proto(&hello)).await.unwrap();
    let mut client = AgentConnectionClient::connect(url.to_owned()).await.unwrap();
    let mut inbound = client.connect_agent(tokio_stream::wrappers::ReceiverStream::new(rx)).await.unwrap().into_inner();
    let first = inbound.message().await.unwrap().expect("a ServerHello");
    assert!(matches!(from_server_from_proto(first), Ok(Some(FromServer::ServerHello(_)))));
    (tx, inbound)
}

#[tokio::test(start_paused = true)]
async fn a_replaced_agent_stream_ends_so_that_its_agent_notices() {
    let (url, shutdown) = start_server(empty()).await;
    let (_keep_first, mut first) = agent_stream(&url, "twice").await;
    let (_keep_second, mut second) = agent_stream(&url, "twice").await;
    // The first stream ends although its client still holds it open.
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), first.message()).await;
    assert!(matches!(ended, Ok(Ok(None)) | Ok(Err(_))), "the replaced stream must end, got {ended:?}");
    // The server stops: the remaining stream ends at once, not after a grace period.
    shutdown.cancel();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(1), second.message()).await;
    assert!(matches!(ended, Ok(Ok(None)) | Ok(Err(_))), "streams end at shutdown, got {ended:?}");
}

#[tokio::test(start_paused = true)]
async fn an_agent_without_our_extensions_shows_what_it_does_not_report() {
    use ank_agent::RuntimeRegistry;
    use ank_agent::runtime_connectors::fake::FakeRuntime;
    let (url, shutdown) = start_server(empty()).await;
    // An Eclipse Ankaios agent says hello without our extensions.
    let (_keep, _stream) = agent_stream(&url, "ankaios_agent").await;
    // Our own agent announces them.
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(std::sync::Arc::new(FakeRuntime::new()));
    let run_folder = tempfile::tempdir().expect("run folder");
    let config = ank_agent::AgentConfig {
        run_folder: run_folder.path().to_path_buf(),
        ..ank_agent::AgentConfig::new("our_agent", url.clone())
    };
    let agent_stop = CancellationToken::new();
    let agent = tokio::spawn(ank_agent::run(config, runtimes, agent_stop.clone()));
    let mut c = Commander::connect(&url).await;
    let connected = async || {
        let state = c.complete_state(&["agents"]).await;
        state["agents"].get("our_agent").map(|_| state["agents"].clone())
    };
    let agents = ank_tests::eventually("our agent connected", std::time::Duration::from_secs(10), connected).await;
    assert_eq!(agents["ankaios_agent"]["notReported"], serde_json::json!(["generations", "conditions", "quota"]));
    assert!(agents["our_agent"].get("notReported").is_none(), "{agents}");
    agent_stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), agent).await;
    shutdown.cancel();
}
