//! A minimal commander for in-process tests: connects to a server over
//! CommandConnection, sends requests and collects pushed workload states.

use std::time::Duration;

use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::messages::{from_server_from_proto, to_server_to_proto};
use ank_common::{ExecutionState, WorkloadState};
use ank_proto::grpc_api::command_connection_client::CommandConnectionClient;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// A connected test commander.
pub struct Commander {
    tx: mpsc::Sender<ank_proto::grpc_api::ToServer>,
    inbound: tonic::Streaming<ank_proto::grpc_api::FromServer>,
    next_id: u64,
    /// Every workload state pushed by the server so far.
    pub states: Vec<WorkloadState>,
}

impl Commander {
    /// Connects to `url` (e.g. `http://127.0.0.1:1234`) and says hello.
    pub async fn connect(url: &str) -> Self {
        let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
            .expect("valid url")
            .connect()
            .await
            .expect("connect to server");
        let (tx, rx) = mpsc::channel(16);
        let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.to_owned() };
        tx.send(to_server_to_proto(&hello)).await.expect("queue hello");
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        request
            .metadata_mut()
            .insert(ank_common::messages::PUSH_STATES_HEADER, tonic::metadata::MetadataValue::from_static("true"));
        let inbound = CommandConnectionClient::new(channel)
            .connect_command(request)
            .await
            .expect("open command stream")
            .into_inner();
        Self { tx, inbound, next_id: 0, states: Vec::new() }
    }

    /// Sends a request and returns the response content; pushed states that
    /// arrive meanwhile are collected.
    pub async fn request(&mut self, content: RequestContent) -> ResponseContent {
        self.next_id += 1;
        let id = format!("test-{}", self.next_id);
        let req = ToServer::Request(Request { request_id: id.clone(), content });
        self.tx.send(to_server_to_proto(&req)).await.expect("send request");
        loop {
            match self.next().await {
                FromServer::Response(r) if r.request_id == id => return r.content,
                _ => {}
            }
        }
    }

    /// Sends a request without waiting for its answer; returns its id
    /// (see [`Self::response_to`]).
    pub async fn send_request(&mut self, content: RequestContent) -> String {
        self.next_id += 1;
        let id = format!("test-{}", self.next_id);
        let req = ToServer::Request(Request { request_id: id.clone(), content });
        self.tx.send(to_server_to_proto(&req)).await.expect("send request");
        id
    }

    /// Opens an event subscription; returns its request id and the first
    /// answer (the current state under the masks).
    pub async fn subscribe_events(&mut self, masks: &[&str]) -> (String, serde_json::Value) {
        self.next_id += 1;
        let id = format!("events-{}", self.next_id);
        let field_mask = masks.iter().map(|s| (*s).to_owned()).collect();
        let content = RequestContent::CompleteState { field_mask, subscribe_for_events: true };
        self.tx
            .send(to_server_to_proto(&ToServer::Request(Request { request_id: id.clone(), content })))
            .await
            .expect("send");
        match self.response_to(&id).await {
            ResponseContent::CompleteState(v) => (id, v.to_json().expect("a JSON tree")),
            other => panic!("expected the current state, got {other:?}"),
        }
    }

    /// The next response under `request_id` (events of a subscription).
    pub async fn response_to(&mut self, request_id: &str) -> ResponseContent {
        loop {
            if let FromServer::Response(r) = self.next().await
                && r.request_id == request_id
            {
                return r.content;
            }
        }
    }

    /// Sends an EventsCancelRequest for `request_id`; returns the answer.
    pub async fn cancel_events(&mut self, request_id: &str) -> ResponseContent {
        let req =
            ToServer::Request(Request { request_id: request_id.to_owned(), content: RequestContent::EventsCancel });
        self.tx.send(to_server_to_proto(&req)).await.expect("send");
        self.response_to(request_id).await
    }

    /// Waits (bounded by 10 s) for the next message of the server; state
    /// updates land in `states`.
    pub async fn next_update(&mut self) -> FromServer {
        self.next().await
    }

    async fn next(&mut self) -> FromServer {
        let wire = tokio::time::timeout(Duration::from_secs(10), self.inbound.message())
            .await
            .expect("server answers within 10 s")
            .expect("stream ok")
            .expect("stream open");
        let msg = from_server_from_proto(wire).expect("valid message").expect("known message");
        if let FromServer::UpdateWorkloadState(s) = &msg {
            self.states.extend(s.iter().cloned());
        }
        msg
    }

    /// Applies a manifest text: one update with a mask per workload, per
    /// config item and per group.
    pub async fn apply(&mut self, manifest: &str) -> ResponseContent {
        let state = ank_common::manifest::parse_manifest("test", manifest).expect("valid manifest");
        let masks = state
            .workloads
            .keys()
            .map(|n| format!("desiredState.workloads.{n}"))
            .chain(state.configs.keys().map(|n| format!("desiredState.configs.{n}")))
            .chain(state.groups.keys().map(|n| format!("desiredState.groups.{n}")))
            .collect();
        let new_state = serde_json::json!({ "desiredState": state });
        let new_state = ank_common::convert::PartialCompleteState::from_json(&new_state).expect("a valid state");
        self.request(RequestContent::UpdateState { new_state: Box::new(new_state), update_mask: masks }).await
    }

    /// Deletes workloads by name.
    pub async fn delete(&mut self, names: &[&str]) -> ResponseContent {
        let masks = names.iter().map(|n| format!("desiredState.workloads.{n}")).collect();
        let new_state = serde_json::json!({"desiredState": {"apiVersion": "v1"}});
        let new_state = ank_common::convert::PartialCompleteState::from_json(&new_state).expect("a valid state");
        self.request(RequestContent::UpdateState { new_state: Box::new(new_state), update_mask: masks }).await
    }

    /// The complete state as a JSON tree.
    pub async fn complete_state(&mut self, masks: &[&str]) -> serde_json::Value {
        let field_mask = masks.iter().map(|s| (*s).to_owned()).collect();
        match self.request(RequestContent::CompleteState { field_mask, subscribe_for_events: false }).await {
            ResponseContent::CompleteState(v) => v.to_json().expect("a JSON tree"),
            other => panic!("expected a complete state, got {other:?}"),
        }
    }

    /// Waits (bounded by 10 s) until workload `name` is reported in `state`
    /// (display form, e.g. `Running(Ok)`); returns that state.
    pub async fn wait_for_state(&mut self, name: &str, state: &str) -> ExecutionState {
        loop {
            if let Some(s) = self
                .states
                .iter()
                .rev()
                .find(|s| s.instance_name.workload_name == name)
                .filter(|s| s.execution_state.kind.to_string() == state)
            {
                return s.execution_state.clone();
            }
            self.next().await;
        }
    }
}
