//! What Ankaios' own clients see of the server on the wire: a Goodbye ends
//! the stream (the client waits for that end), a CommandConnection gets
//! only the answers to its requests, an update mask naming a path that
//! does not exist is refused, and UpdateStateSuccess names every instance.

use std::time::Duration;

use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_proto::grpc_api::command_connection_client::CommandConnectionClient;
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

const SLEEPY: &str = "apiVersion: v1\nworkloads:\n  sleepy:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: localhost/busybox:latest\n";

/// A CommandConnection client as Ankaios' `ank` and the SDK open it.
struct Plain {
    tx: mpsc::Sender<ank_proto::grpc_api::ToServer>,
    inbound: tonic::Streaming<ank_proto::grpc_api::FromServer>,
}

impl Plain {
    async fn connect(url: &str) -> Self {
        let channel = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap().connect().await.unwrap();
        let (tx, rx) = mpsc::channel(16);
        let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() };
        tx.send(to_server_to_proto(&hello)).await.unwrap();
        let inbound =
            CommandConnectionClient::new(channel).connect_command(ReceiverStream::new(rx)).await.unwrap().into_inner();
        Self { tx, inbound }
    }

    async fn send(&self, msg: &ToServer) {
        self.tx.send(to_server_to_proto(msg)).await.unwrap();
    }

    /// The next message, `None` once the stream ended.
    async fn next(&mut self) -> Option<FromServer> {
        let wire = tokio::time::timeout(Duration::from_secs(10), self.inbound.message())
            .await
            .expect("the server answers or ends the stream")
            .expect("no stream error")?;
        from_server_from_proto(wire).unwrap()
    }

    async fn request(&mut self, id: &str, content: RequestContent) -> ResponseContent {
        self.send(&ToServer::Request(Request { request_id: id.to_owned(), content })).await;
        match self.next().await {
            Some(FromServer::Response(r)) if r.request_id == id => r.content,
            other => panic!("expected the answer to '{id}' and nothing else, got {other:?}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn itest_goodbye_ends_the_stream_of_a_subscriber() {
    let s = InProcess::start().await;
    let mut plain = Plain::connect(&s.url).await;
    let subscribe =
        RequestContent::CompleteState { field_mask: vec!["desiredState".into()], subscribe_for_events: true };
    assert!(matches!(plain.request("events", subscribe).await, ResponseContent::CompleteState(_)));
    plain.send(&ToServer::Goodbye).await;
    // The request stream stays open, as Ankaios' `ank` keeps it: only the
    // goodbye ends the connection.
    assert!(plain.next().await.is_none(), "the stream ends after the goodbye");
    // The subscription went with it: a change reaches nobody and the
    // server goes on serving others.
    let mut other = Commander::connect(&s.url).await;
    assert!(matches!(other.apply(SLEEPY).await, ResponseContent::UpdateStateSuccess { .. }));
    s.stop();
}

#[tokio::test(start_paused = true)]
async fn itest_a_command_connection_gets_only_its_answers_and_ankaios_update_results() {
    let s = InProcess::start().await;
    let mut plain = Plain::connect(&s.url).await;
    let new_state: serde_json::Value = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {
        "sleepy": {"runtime": "podman", "agent": "agent_A", "runtimeConfig": "image: x"},
        "unplaced": {"runtime": "podman", "agent": "", "runtimeConfig": "image: y"},
    }}});
    let mask = vec!["desiredState.workloads.sleepy".into(), "desiredState.workloads.unplaced".into()];
    let content = RequestContent::UpdateState { new_state: ank_tests::typed_state(new_state), update_mask: mask };
    let ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, .. } =
        plain.request("update", content).await
    else {
        panic!("update refused")
    };
    assert_eq!(added_workloads.len(), 2, "{added_workloads:?}");
    assert!(added_workloads.iter().any(|n| n.starts_with("sleepy.") && n.ends_with(".agent_A")), "{added_workloads:?}");
    assert!(added_workloads.iter().any(|n| n.starts_with("unplaced.") && n.ends_with('.')), "{added_workloads:?}");
    assert!(deleted_workloads.is_empty());
    // The agent starts sleepy meanwhile; none of its states come here: the
    // next message is the answer to the next request.
    let mut other = Commander::connect(&s.url).await;
    let ran = async || {
        let tree = other.complete_state(&["workloadStates.agent_A.sleepy"]).await;
        let states = tree["workloadStates"]["agent_A"]["sleepy"].as_object().cloned().unwrap_or_default();
        states.values().any(|s| s["state"] == "Running").then_some(())
    };
    ank_tests::eventually("sleepy running", Duration::from_secs(30), ran).await;
    // A workload name with a dot: its parent does not exist.
    let content = RequestContent::UpdateState {
        new_state: ank_tests::typed_state(serde_json::json!({"desiredState": {"apiVersion": "v1"}})),
        update_mask: vec!["desiredState.workloads.my.workload".into()],
    };
    match plain.request("dotted", content).await {
        ResponseContent::Error(e) => {
            assert_eq!(e, "Update rejected: 'Could not find field desiredState.workloads.my.workload'")
        }
        other => panic!("accepted: {other:?}"),
    }
    s.stop();
}
