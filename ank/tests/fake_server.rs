//! Runs the built `ank` binary against an in-process fake server: a tonic
//! `CommandConnection` on 127.0.0.1 port 0 that answers state and update
//! requests from a script, pushes workload states, and records everything
//! it receives.

use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Output;
use std::sync::{Arc, Mutex};

use ank_common::convert::{from_server_to_proto, to_server_from_proto};
use ank_common::execution_state::Pending;
use ank_common::messages::{FromServer, Request, RequestContent, Response, ResponseContent, ToServer};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use ank_proto::grpc_api as g;
use g::command_connection_server::{CommandConnection, CommandConnectionServer};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Status, Streaming};

/// What the fake server answers.
#[derive(Clone, Default)]
struct Script {
    /// Answer to every state request.
    state: Value,
    /// Answer to an update request.
    update_answer: Option<ResponseContent>,
    /// Pushed right after the update answer.
    after_update: Vec<WorkloadState>,
    /// Pushed after answering a state request that followed an update.
    after_snapshot: Vec<WorkloadState>,
    /// Never answer requests.
    silent: bool,
}

#[derive(Clone)]
struct Fake {
    script: Arc<Script>,
    received: Arc<Mutex<Vec<ToServer>>>,
}

type OutStream = Pin<Box<dyn Stream<Item = Result<g::FromServer, Status>> + Send>>;

#[tonic::async_trait]
impl CommandConnection for Fake {
    type ConnectCommandStream = OutStream;

    async fn connect_command(
        &self,
        request: tonic::Request<Streaming<g::ToServer>>,
    ) -> Result<tonic::Response<OutStream>, Status> {
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(self.clone().serve(request.into_inner(), tx));
        let out = tokio_stream::StreamExt::map(ReceiverStream::new(rx), |m: FromServer| Ok(from_server_to_proto(&m)));
        Ok(tonic::Response::new(Box::pin(out)))
    }
}

impl Fake {
    /// Answers one client until it closes its stream; dropping `tx` then
    /// ends the server's stream, as the real server does.
    async fn serve(self, mut inbound: Streaming<g::ToServer>, tx: mpsc::Sender<FromServer>) {
        let mut updated = false;
        while let Ok(Some(wire)) = inbound.message().await {
            let Ok(Some(msg)) = to_server_from_proto(wire) else { continue };
            self.received.lock().unwrap().push(msg.clone());
            let ToServer::Request(Request { request_id, content }) = msg else { continue };
            if self.script.silent {
                continue;
            }
            let (answer, pushes) = match content {
                RequestContent::CompleteState { .. } => {
                    let pushes = if updated { self.script.after_snapshot.clone() } else { vec![] };
                    (ResponseContent::CompleteState(Box::new(self.script.state.clone())), pushes)
                }
                RequestContent::UpdateState { .. } => {
                    updated = true;
                    let answer = self.script.update_answer.clone().expect("script has no update answer");
                    (answer, self.script.after_update.clone())
                }
                RequestContent::EventsCancel => (ResponseContent::EventsCancelAccepted, vec![]),
                RequestContent::Logs(_)
                | RequestContent::LogsCancel
                | RequestContent::JobRerun { .. }
                | RequestContent::JobInterrupt { .. }
                | RequestContent::RenderedState { .. } => {
                    (ResponseContent::Error("logs are not scripted".into()), vec![])
                }
            };
            let _ = tx.send(FromServer::Response(Response { request_id, content: answer })).await;
            for s in pushes {
                let _ = tx.send(FromServer::UpdateWorkloadState(vec![s])).await;
            }
        }
    }
}

/// Starts the fake server; returns its address and the received messages.
async fn start(script: Script) -> (SocketAddr, Arc<Mutex<Vec<ToServer>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = Fake { script: Arc::new(script), received: Arc::new(Mutex::new(Vec::new())) };
    let received = fake.received.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CommandConnectionServer::new(fake))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (addr, received)
}

/// Runs `ank` with `args` (and `stdin` as its standard input).
async fn ank(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ank"))
            .args(&args)
            .env_remove("ANK_SERVER_URL")
            .env_remove("ANK_INSECURE")
            .env_remove("ANK_NO_WAIT")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

fn args(addr: SocketAddr, rest: &[&str]) -> Vec<String> {
    let mut v = vec!["-k".to_owned(), "-s".to_owned(), format!("http://{addr}")];
    v.extend(rest.iter().map(|s| s.to_string()));
    v
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn state_of(instance: &str, state: ExecutionState) -> WorkloadState {
    WorkloadState::new(WorkloadInstanceName::parse(instance).unwrap(), state)
}

fn updates(received: &Mutex<Vec<ToServer>>) -> Vec<(Value, Vec<String>)> {
    received
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            ToServer::Request(Request { content: RequestContent::UpdateState { new_state, update_mask }, .. }) => {
                Some(((**new_state).clone(), update_mask.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn fake_server_get_workloads_prints_table_and_says_hello_and_goodbye() {
    let state = json!({
        "desiredState": {"apiVersion": "v1", "workloads": {
            "web": {"agent": "agent_A", "runtime": "podman", "runtimeConfig": "image: nginx"},
        }},
        "workloadStates": {
            "agent_A": {"web": {"abc": {"state": "Running", "subState": "Ok"}}},
            "agent_B": {"db": {"def": {"state": "Pending", "subState": "StartingFailed", "additionalInfo": "no podman"}}},
        },
    });
    let (addr, received) = start(Script { state, ..Default::default() }).await;
    let out = ank(args(addr, &["get", "workloads"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].starts_with("WORKLOAD NAME"), "{text}");
    assert!(
        lines[1].starts_with("db ") && lines[1].contains("Pending(StartingFailed)") && lines[1].ends_with("no podman")
    );
    assert!(lines[2].starts_with("web ") && lines[2].contains("agent_A") && lines[2].contains("podman"));
    assert!(lines[2].contains("Running(Ok)"), "{text}");

    let received = received.lock().unwrap().clone();
    assert!(
        matches!(&received[0], ToServer::CommanderHello { protocol_version } if protocol_version == ank_common::PROTOCOL_VERSION)
    );
    let ToServer::Request(Request { content: RequestContent::CompleteState { field_mask, .. }, .. }) = &received[1]
    else {
        panic!("second message is no state request: {received:?}")
    };
    assert_eq!(field_mask, &vec!["desiredState.workloads".to_owned(), "workloadStates".to_owned()]);
    assert_eq!(received.last(), Some(&ToServer::Goodbye));
    assert_eq!(received.len(), 3, "one hello, one request, one goodbye: {received:?}");
}

#[tokio::test]
async fn fake_server_apply_waits_for_running_across_pushed_updates() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: nginx\"\n").unwrap();
    let script = Script {
        // The snapshot (newer than the first push) still says Pending(Initial).
        state: json!({
            "workloadStates": {"agent_A": {"web": {"abc": {"state": "Pending", "subState": "Initial"}}}},
            "agents": {"agent_A": {}},
        }),
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec!["web.abc.agent_A".into()],
            deleted_workloads: vec![],
            job_id: 0,
        }),
        after_update: vec![state_of("web.abc.agent_A", ExecutionState::pending_initial())],
        after_snapshot: vec![
            state_of("web.abc.agent_A", ExecutionState::new(StateKind::Pending(Pending::Starting))),
            state_of("web.abc.agent_A", ExecutionState::running()),
        ],
        ..Default::default()
    };
    let (addr, received) = start(script).await;
    let out = ank(args(addr, &["apply", &file.display().to_string()])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let row = text.lines().nth(1).unwrap_or_default();
    assert!(row.starts_with("web ") && row.contains("Running(Ok)") && row.contains("podman"), "{text}");

    let updates = updates(&received);
    assert_eq!(updates.len(), 1);
    let (new_state, masks) = &updates[0];
    assert_eq!(masks, &vec!["desiredState.workloads.web".to_owned()]);
    assert_eq!(new_state["desiredState"]["workloads"]["web"]["runtimeConfig"], "image: nginx");
}

#[tokio::test]
async fn fake_server_delete_warns_about_unknown_names_and_waits_for_removal() {
    let script = Script {
        state: json!({"workloadStates": {"agent_A": {"web": {"abc": {"state": "Stopping", "subState": "RequestedAtRuntime"}}}}, "agents": {"agent_A": {}}}),
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec![],
            deleted_workloads: vec!["web.abc.agent_A".into()],
            job_id: 0,
        }),
        after_snapshot: vec![state_of("web.abc.agent_A", ExecutionState::removed())],
        ..Default::default()
    };
    let (addr, received) = start(script).await;
    let out = ank(args(addr, &["delete", "workloads", "web", "ghost"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("'ghost' does not exist"), "{}", stderr(&out));
    assert!(
        stdout(&out).lines().nth(1).is_some_and(|l| l.starts_with("web ") && l.contains("Removed")),
        "{}",
        stdout(&out)
    );
    let updates = updates(&received);
    assert_eq!(updates[0].1, vec!["desiredState.workloads.ghost".to_owned(), "desiredState.workloads.web".to_owned()]);
    assert_eq!(updates[0].0, json!({"desiredState": {"apiVersion": "v1"}}));
}

#[tokio::test]
async fn fake_server_rejected_update_exits_1_with_the_servers_message() {
    let script =
        Script { update_answer: Some(ResponseContent::Error("dependency cycle".into())), ..Default::default() };
    let (addr, _) = start(script).await;
    let out =
        ank(args(addr, &["run", "workload", "w", "--runtime", "podman", "--agent", "a", "--config", "image: x"])).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("rejected the request: dependency cycle"), "{}", stderr(&out));
}

#[tokio::test]
async fn fake_server_silent_server_times_out_with_exit_3() {
    let (addr, _) = start(Script { silent: true, ..Default::default() }).await;
    let out = ank(args(addr, &["--response-timeout", "300", "get", "state"])).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("timed out after 300 ms"), "{}", stderr(&out));
}

#[tokio::test]
async fn fake_server_get_state_prints_json() {
    let state = json!({"desiredState": {"apiVersion": "v1"}});
    let (addr, _) = start(Script { state, ..Default::default() }).await;
    let out = ank(args(addr, &["get", "state", "-o", "json", "desiredState.apiVersion"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap(), json!({"desiredState": {"apiVersion": "v1"}}));
}

#[tokio::test]
async fn fake_server_invalid_manifest_is_reported_without_contacting_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    let text = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    colour: red\n    runtimeConfig: x\n";
    std::fs::write(&file, text).unwrap();
    let (addr, received) = start(Script::default()).await;
    let name = file.display().to_string();
    let out = ank(args(addr, &["apply", &name])).await;
    assert_eq!(out.status.code(), Some(1));
    let expected = ank_common::manifest::parse_manifest(&name, text).unwrap_err().to_string();
    assert_eq!(stderr(&out).trim_end(), expected);
    assert!(received.lock().unwrap().is_empty());
}

#[tokio::test]
async fn fake_server_unreachable_server_and_missing_insecure_are_clear_errors() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let out = ank(args(addr, &["get", "agents"])).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(&format!("cannot connect to the server at http://{addr}")), "{}", stderr(&out));

    let out = ank(vec!["get".into(), "agents".into()]).await;
    assert_eq!(out.status.code(), Some(1), "a settings error exits 1, as in Ankaios");
    assert!(stderr(&out).contains("error: Missing certificate files: Either provide mTLS config"), "{}", stderr(&out));
}

#[tokio::test]
async fn fake_server_set_state_with_an_invalid_value_fails_naming_it_and_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.yaml");
    std::fs::write(&file, "desiredState:\n  workloads:\n    w:\n      restartPolicy: SOMETIMES\n").unwrap();
    let script = Script {
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec![],
            deleted_workloads: vec![],
            job_id: 0,
        }),
        ..Default::default()
    };
    let (addr, received) = start(script).await;
    let out = ank(args(addr, &["--no-wait", "set", "state", "desiredState.workloads.w", file.to_str().unwrap()])).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("SOMETIMES") || stderr.contains("restartPolicy"), "{stderr}");
    let sent_updates = received
        .lock()
        .unwrap()
        .iter()
        .filter(|m| matches!(m, ToServer::Request(Request { content: RequestContent::UpdateState { .. }, .. })))
        .count();
    assert_eq!(sent_updates, 0, "nothing reaches the server");
}

#[tokio::test]
async fn fake_server_apply_of_a_manifest_above_the_message_limit_names_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.yaml");
    let config = "a".repeat(ank_proto::MAX_MESSAGE_BYTES);
    std::fs::write(
        &file,
        format!("apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"{config}\"\n"),
    )
    .unwrap();
    let (addr, received) = start(Script::default()).await;
    let out = ank(args(addr, &["--no-wait", "apply", &file.display().to_string()])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("exceeds the limit of {} bytes", ank_proto::MAX_MESSAGE_BYTES)), "{err}");
    assert!(updates(&received).is_empty(), "nothing above the limit reaches the server");
}
