//! The gRPC message limit (`ank_proto::MAX_MESSAGE_BYTES`) against an
//! in-process server: a client that sends a larger message gets its stream
//! ended with ResourceExhausted naming the size and the limit, while the
//! server keeps serving others; a response too large to send becomes an
//! error response; an agent whose ServerHello would be too large is
//! refused and is served again once the state is small enough.

use std::sync::Arc;
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_common::convert::to_server_to_proto;
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
        new_state: Box::new(new_state),
        update_mask: vec![format!("desiredState.workloads.{name}")],
    }
}

#[tokio::test]
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

#[tokio::test]
async fn message_limit_response_too_large_is_answered_with_an_error() {
    let (url, shutdown) = start_server().await;
    let mut c = Commander::connect(&url).await;
    // Two updates within the limit make a state beyond it.
    for name in ["one", "two", "three"] {
        let answer = c.request(add_workload(name, "", MAX_MESSAGE_BYTES / 3)).await;
        assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    }
    let answer = c.request(RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false }).await;
    let ResponseContent::Error(e) = answer else { panic!("expected an error, got a response of its own") };
    assert!(e.contains(&format!("exceeds the limit of {MAX_MESSAGE_BYTES} bytes")), "{e}");
    // The same stream goes on.
    let state = c.complete_state(&["desiredState.workloads.one.agent"]).await;
    assert_eq!(state, json!({"desiredState": {"apiVersion": "v1", "workloads": {"one": {"agent": ""}}}}));
    shutdown.cancel();
}

#[tokio::test]
async fn message_limit_agent_with_a_too_large_server_hello_is_served_once_it_fits() {
    let (url, server_stop) = start_server().await;
    let mut c = Commander::connect(&url).await;
    for name in ["one", "two"] {
        let answer = c.request(add_workload(name, "agent_A", MAX_MESSAGE_BYTES * 2 / 3)).await;
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

    // The agent's hello is answered by the end of its stream; it retries.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(fake.created().is_empty());
    assert!(!agent.is_finished(), "the agent keeps running");

    c.delete(&["two"]).await;
    c.wait_for_state("one", "Running(Ok)").await;
    assert_eq!(fake.created().len(), 1);
    agent_stop.cancel();
    tokio::time::timeout(WAIT, agent).await.expect("agent stops").expect("no panic").expect("clean stop");
    server_stop.cancel();
}
