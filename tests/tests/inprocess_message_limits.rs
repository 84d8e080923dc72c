//! The gRPC message limit (`ank_proto::MAX_MESSAGE_BYTES`) against an
//! in-process server: a client that sends a larger message gets its stream
//! ended with ResourceExhausted naming the size and the limit, while the
//! server keeps serving others; updates that together would grow the
//! desired state beyond what one message carries are refused, so the state
//! can always be read whole and handed to an agent in one ServerHello.

use std::sync::Arc;
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_common::messages::to_server_to_proto;
use ank_common::messages::{Request, RequestContent, ResponseContent, ToServer};
use ank_proto::MAX_MESSAGE_BYTES;
use ank_proto::grpc_api::command_connection_client::CommandConnectionClient;
use ank_tests::commander::Commander;
use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(10);

async fn start_server() -> (String, CancellationToken) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let shutdown = CancellationToken::new();
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(initial, listener, shutdown.clone()));
    (url, shutdown)
}

/// An update that adds workload `name` on `agent` with a runtime config of
/// `size` bytes.
fn add_workload(name: &str, agent: &str, size: usize) -> RequestContent {
    let config = format!("image: x\ncommandArgs: [\"{}\"]\n", "a".repeat(size));
    let new_state = json!({"desiredState": {"apiVersion": "v1", "workloads": {
        name: {"runtime": "podman", "agent": agent, "runtimeConfig": config}
    }}});
    RequestContent::UpdateState {
        new_state: ank_tests::typed_state(new_state),
        update_mask: vec![format!("desiredState.workloads.{name}")],
    }
}

#[tokio::test(start_paused = true)]
async fn message_limit_oversized_request_ends_only_its_own_stream() {
    let (url, shutdown) = start_server().await;
    let mut bystander = Commander::connect(&url).await;

    // A client without a send limit of its own, as a foreign or broken
    // client could be.
    let channel = tonic::transport::Endpoint::from_shared(url.clone()).unwrap().connect().await.expect("connect");
    let (tx, rx) = mpsc::channel(4);
    let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() };
    tx.send(to_server_to_proto(&hello)).await.unwrap();
    let mut inbound = CommandConnectionClient::new(channel)
        .connect_command(ReceiverStream::new(rx))
        .await
        .expect("stream")
        .into_inner();
    let request = ToServer::Request(Request { request_id: "big".into(), content: add_workload("big", "A", 5 << 20) });
    let wire = to_server_to_proto(&request);
    let size = prost::Message::encoded_len(&wire);
    assert!(size > MAX_MESSAGE_BYTES);
    // The server stops reading after the header: the send may or may not
    // complete, the answer comes either way.
    let _ = tx.try_send(wire);
    let status = loop {
        match tokio::time::timeout(WAIT, inbound.message()).await.expect("an answer within 10 s") {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the stream ended without saying why"),
            Err(status) => break status,
        }
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains(&format!("found {size} bytes")), "{status:?}");
    assert!(status.message().contains(&format!("the limit is: {MAX_MESSAGE_BYTES} bytes")), "{status:?}");

    // Nothing was applied; the other client and a new one are served.
    let state = bystander.complete_state(&["desiredState.workloads"]).await;
    assert_eq!(state, json!({"desiredState": {"apiVersion": "v1", "workloads": {}}}));
    let mut fresh = Commander::connect(&url).await;
    let answer = fresh.request(add_workload("small", "A", 100)).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn message_limit_updates_that_would_grow_the_state_beyond_it_are_refused() {
    let (url, shutdown) = start_server().await;
    let mut c = Commander::connect(&url).await;
    // Each update fits in a message; together they would not fit in one
    // complete-state answer, which carries each workload twice (in the
    // desired and in the effective state).
    for name in ["one", "two"] {
        let answer = c.request(add_workload(name, "", MAX_MESSAGE_BYTES / 7)).await;
        assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    }
    let answer = c.request(add_workload("three", "", MAX_MESSAGE_BYTES / 7)).await;
    let ResponseContent::Error(e) = answer else { panic!("a state beyond the limit was accepted: {answer:?}") };
    assert!(e.starts_with("Update rejected: 'the desired state would take "), "{e}");
    assert!(e.contains("more than the 3145728 bytes allowed (3/4 of the 4194304 byte message limit)"), "{e}");
    // The state is as before, and it can still be read whole.
    let ResponseContent::CompleteState(state) =
        c.request(RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false }).await
    else {
        panic!("the whole state cannot be read")
    };
    let state = state.to_json().unwrap();
    let names: Vec<&String> = state["desiredState"]["workloads"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["one", "two"]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn message_limit_an_agent_gets_the_largest_allowed_state_in_its_hello() {
    let (url, server_stop) = start_server().await;
    let mut c = Commander::connect(&url).await;
    for name in ["one", "two"] {
        // Each workload counts twice (desired and effective state): 2 x 2 x 18% <= 75%.
        let answer = c.request(add_workload(name, "agent_A", MAX_MESSAGE_BYTES * 18 / 100)).await;
        assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    }
    let fake = Arc::new(FakeRuntime::new());
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(fake.clone());
    let run_folder = tempfile::tempdir().expect("run folder");
    let config =
        AgentConfig { run_folder: run_folder.path().to_path_buf(), ..AgentConfig::new("agent_A", url.clone()) };
    let agent_stop = CancellationToken::new();
    let agent = tokio::spawn(ank_agent::run(config, runtimes, agent_stop.clone()));

    c.wait_for_state("one", "Running(Ok)").await;
    c.wait_for_state("two", "Running(Ok)").await;
    assert_eq!(fake.created().len(), 2);
    agent_stop.cancel();
    tokio::time::timeout(WAIT, agent).await.expect("agent stops").expect("no panic").expect("clean stop");
    server_stop.cancel();
}
