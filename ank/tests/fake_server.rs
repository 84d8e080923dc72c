//! Runs the built `ank` binary against an in-process fake server: a tonic
//! `CommandConnection` on 127.0.0.1 port 0 that answers state and update
//! requests from a script, pushes workload states, and records everything
//! it receives.

use std::net::SocketAddr;
use std::pin::Pin;
use std::process::Output;
use std::sync::{Arc, Mutex};

use ank_common::execution_state::Pending;
use ank_common::messages::{FromServer, Request, RequestContent, Response, ResponseContent, ToServer};
use ank_common::messages::{from_server_to_proto, to_server_from_proto};
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
    /// Bumped after every received message.
    seen: Arc<tokio::sync::watch::Sender<usize>>,
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
            self.seen.send_modify(|n| *n += 1);
            let ToServer::Request(Request { request_id, content }) = msg else { continue };
            if self.script.silent {
                continue;
            }
            let (answer, pushes) = match content {
                RequestContent::CompleteState { .. } => {
                    let pushes = if updated { self.script.after_snapshot.clone() } else { vec![] };
                    // A script without a state answers an empty one, as a
                    // real server with nothing in it does.
                    let state = if self.script.state.is_null() { json!({}) } else { self.script.state.clone() };
                    let answer = match ank_common::convert::PartialCompleteState::from_json(&state) {
                        Ok(state) => ResponseContent::CompleteState(Box::new(state)),
                        Err(e) => ResponseContent::Error(e.to_string()),
                    };
                    (answer, pushes)
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
    let (addr, received, _) = start_watched(script).await;
    (addr, received)
}

/// Like [`start`], also returning a receiver woken on every received message.
async fn start_watched(script: Script) -> (SocketAddr, Arc<Mutex<Vec<ToServer>>>, tokio::sync::watch::Receiver<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (seen, seen_rx) = tokio::sync::watch::channel(0);
    let fake = Fake { script: Arc::new(script), received: Arc::new(Mutex::new(Vec::new())), seen: Arc::new(seen) };
    let received = fake.received.clone();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(CommandConnectionServer::new(fake))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (addr, received, seen_rx)
}

/// Waits (at most 20 s) until the received messages pass `check`.
async fn until_received(
    received: &Mutex<Vec<ToServer>>,
    seen: &mut tokio::sync::watch::Receiver<usize>,
    check: impl Fn(&[ToServer]) -> bool,
) {
    let wait = async {
        while !check(&received.lock().unwrap()) {
            seen.changed().await.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), wait).await.expect("the server never got it");
}

/// Starts `ank` with `args` without waiting for it.
fn spawn_ank(args: &[String]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_ank"))
        .args(args)
        .env_remove("ANK_SERVER_URL")
        .env_remove("ANK_INSECURE")
        .env_remove("ANK_NO_WAIT")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends `signal` (e.g. "TERM") to `child` and collects its output.
async fn signal_and_wait(child: std::process::Child, signal: &str) -> Output {
    let kill = std::process::Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
    assert!(kill.unwrap().success());
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap()
}

fn count_updates(messages: &[ToServer]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, ToServer::Request(Request { content: RequestContent::UpdateState { .. }, .. })))
        .count()
}

fn count_state_requests(messages: &[ToServer]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, ToServer::Request(Request { content: RequestContent::CompleteState { .. }, .. })))
        .count()
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
                Some((new_state.to_json().expect("a state as JSON"), update_mask.clone()))
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
    // Exactly Ankaios' table: its five columns, cells padded, trailing spaces kept.
    let expected = [
        "WORKLOAD NAME   AGENT     RUNTIME   EXECUTION STATE           ADDITIONAL INFO\n".to_owned(),
        format!("db              agent_B             Pending(StartingFailed)   no podman{}\n", " ".repeat(6)),
        format!("web             agent_A   podman    Running(Ok){}\n", " ".repeat(12 + 3 + 15)),
    ]
    .concat();
    assert_eq!(text, expected);
    let wide = stdout(&ank(args(addr, &["get", "workloads", "-o", "wide"])).await);
    assert!(wide.lines().next().unwrap().contains("   READY   AVAILABLE   ADDITIONAL INFO"), "{wide}");

    let received = received.lock().unwrap().clone();
    assert!(
        matches!(&received[0], ToServer::CommanderHello { protocol_version } if protocol_version == ank_common::PROTOCOL_VERSION)
    );
    let ToServer::Request(Request { content: RequestContent::CompleteState { field_mask, .. }, .. }) = &received[1]
    else {
        panic!("second message is no state request: {received:?}")
    };
    assert_eq!(field_mask, &vec!["desiredState.workloads".to_owned(), "workloadStates".to_owned()]);
    assert_eq!(received[2], ToServer::Goodbye);
    assert_eq!(received.last(), Some(&ToServer::Goodbye));
    assert_eq!(received.len(), 6, "per call one hello, one request, one goodbye: {received:?}");
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
            hook_changes: vec![],
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
    assert_eq!(stderr(&out), "", "no job id, no warning");
    let text = stdout(&out);
    // As Ankaios on a pipe: the message, then the table after every update
    // and spinner step, each followed by a blank line.
    let waiting = "Successfully applied the manifest(s).\nWaiting for workload(s) to reach desired states (press Ctrl+C to interrupt).\n\n";
    assert!(text.starts_with(waiting), "{text}");
    let tables: Vec<&str> = text[waiting.len()..].split_terminator("\n\n").collect();
    assert!(tables.len() >= 2, "{text}");
    for table in &tables {
        assert!(table.starts_with("WORKLOAD NAME   AGENT     RUNTIME     EXECUTION STATE"), "{table}");
    }
    let first_row = tables[0].lines().nth(1).unwrap();
    assert!(first_row.starts_with("web             agent_A   podman    | Pending(Initial)"), "{text}");
    let last_row = tables.last().unwrap().lines().nth(1).unwrap();
    assert!(last_row.starts_with("web             agent_A   podman      Running(Ok)"), "{text}");
    assert!(tables.iter().any(|t| t.contains("Pending(Starting)")), "every state shows: {text}");

    let updates = updates(&received);
    assert_eq!(updates.len(), 1);
    let (new_state, masks) = &updates[0];
    assert_eq!(masks, &vec!["desiredState.workloads.web".to_owned()]);
    assert_eq!(new_state["desiredState"]["workloads"]["web"]["runtimeConfig"], "image: nginx");
}

#[tokio::test]
async fn fake_server_delete_waits_for_removal_and_names_unknown_names_only_when_verbose() {
    let script = Script {
        state: json!({"workloadStates": {"agent_A": {"web": {"abc": {"state": "Stopping", "subState": "RequestedAtRuntime"}}}}, "agents": {"agent_A": {}}}),
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec![],
            deleted_workloads: vec!["web.abc.agent_A".into()],
            job_id: 0,
            hook_changes: vec![],
        }),
        after_snapshot: vec![state_of("web.abc.agent_A", ExecutionState::removed())],
        ..Default::default()
    };
    let (addr, received) = start(script).await;
    let out = ank(args(addr, &["delete", "workloads", "web", "ghost"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "Ankaios says nothing about unknown names");
    let text = stdout(&out);
    assert!(text.starts_with("Successfully applied the manifest(s).\n"), "{text}");
    let last_row = text.trim_end().lines().last().unwrap_or_default();
    assert!(last_row.starts_with("web ") && last_row.contains("  Removed"), "{text}");
    let out = ank(args(addr, &["-v", "delete", "workloads", "web", "ghost"])).await;
    assert!(stderr(&out).contains("'ghost' does not exist"), "-v names it: {}", stderr(&out));
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
    let expected = "error: Failed to run workloads: 'Command failed: 'SetState failed with: 'dependency cycle'''\n";
    assert_eq!(stderr(&out), expected);
}

#[tokio::test]
async fn fake_server_silent_server_times_out_with_exit_1() {
    let (addr, _) = start(Script { silent: true, ..Default::default() }).await;
    let out = ank(args(addr, &["--response-timeout", "300", "get", "state"])).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("timed out after 300 ms"), "{}", stderr(&out));
    let run = ["run", "workload", "w", "--runtime", "podman", "--agent", "a", "--config", "c"];
    let out = ank(args(addr, &[&["--response-timeout", "300"][..], &run].concat())).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let expected = "error: Failed to run workloads: 'Command failed: 'Command timed out after '300ms'''\n";
    assert_eq!(stderr(&out), expected);
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
    // An unknown field is refused with --strict (by default it is ignored
    // with a warning, as Ankaios ignores it).
    let out = ank(args(addr, &["apply", "--strict", &name])).await;
    assert_eq!(out.status.code(), Some(1));
    let expected =
        ank_common::manifest::parse_manifest_checked(&name, text, ank_common::manifest::UnknownFields::Reject)
            .unwrap_err()
            .to_string();
    assert_eq!(stderr(&out).trim_end(), format!("error: Command failed: '{expected}'"));
    assert!(
        expected.ends_with("line 5: unknown field 'workloads.web.colour' (unknown fields are refused in strict mode)")
    );
    let broken = text.replace("    colour: red\n", "    restartPolicy: Sometimes\n");
    std::fs::write(&file, &broken).unwrap();
    let out = ank(args(addr, &["apply", &name])).await;
    assert_eq!(out.status.code(), Some(1));
    // An unknown enum value is refused by the schema check, in Ankaios' words.
    let err = stderr(&out);
    assert!(
        err.starts_with(
            "error: Command failed: 'Manifest schema validation failed:\n\
             '/workloads/web/restartPolicy': \"NEVER\" was expected\n"
        ),
        "{err}"
    );
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
    std::fs::write(&file, "desiredState:\n  apiVersion: v1\n  workloads:\n    w:\n      restartPolicy: SOMETIMES\n")
        .unwrap();
    let script = Script {
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec![],
            deleted_workloads: vec![],
            job_id: 0,
            hook_changes: vec![],
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
async fn fake_server_apply_ignores_unknown_fields_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    let text = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    colour: red\n    runtimeConfig: \"image: nginx\"\n";
    std::fs::write(&file, text).unwrap();
    let script = Script {
        update_answer: Some(ResponseContent::UpdateStateSuccess {
            added_workloads: vec!["web.abc.agent_A".into()],
            deleted_workloads: vec![],
            job_id: 0,
            hook_changes: vec![],
        }),
        ..Default::default()
    };
    let (addr, received) = start(script).await;
    let name = file.display().to_string();
    let out = ank(args(addr, &["--no-wait", "apply", &name])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("warning: {name}: line 6: unknown field 'workloads.web.colour' is ignored")),
        "{}",
        stderr(&out)
    );
    assert_eq!(updates(&received).len(), 1);
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

fn success(added: &[&str], deleted: &[&str], job_id: u64) -> Option<ResponseContent> {
    Some(ResponseContent::UpdateStateSuccess {
        added_workloads: added.iter().map(|s| s.to_string()).collect(),
        deleted_workloads: deleted.iter().map(|s| s.to_string()).collect(),
        job_id,
        hook_changes: vec![],
    })
}

#[tokio::test]
async fn fake_server_apply_of_a_workload_without_agent_is_refused_unless_agent_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(&file, "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    runtimeConfig: \"image: x\"\n")
        .unwrap();
    let name = file.display().to_string();
    let (addr, received) = start(Script { update_answer: success(&[], &[], 0), ..Default::default() }).await;
    let out = ank(args(addr, &["apply", &name])).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "error: Command failed: 'No agent name specified -> use '--agent' option to specify!'\n");
    assert!(updates(&received).is_empty(), "nothing is sent");
    // Deleting needs no agent; --agent supplies one.
    let out = ank(args(addr, &["--no-wait", "apply", "-d", &name])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let out = ank(args(addr, &["--no-wait", "apply", "--agent", "agent_B", &name])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let updates = updates(&received);
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[1].0["desiredState"]["workloads"]["web"]["agent"], "agent_B");
}

#[tokio::test]
async fn fake_server_write_commands_print_what_ankaios_prints_and_the_job_only_on_request() {
    let (addr, received) = start(Script { update_answer: success(&[], &[], 7), ..Default::default() }).await;
    let run = ["run", "workload", "w", "--runtime", "podman", "--agent", "a", "--config", "image: x"];
    let out = ank(args(addr, &run)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Apply successful. No workloads updated.\n");
    assert_eq!(stderr(&out), "", "no job id by default");
    let out = ank(args(addr, &[&["--no-wait"][..], &run].concat())).await;
    assert_eq!((stdout(&out).as_str(), stderr(&out).as_str()), ("", ""), "--no-wait prints nothing");
    let out = ank(args(addr, &[&["-v", "--no-wait"][..], &run].concat())).await;
    assert!(stderr(&out).contains("job 7 accepted"), "-v shows the job: {}", stderr(&out));
    let out = ank(args(addr, &[&["-q"][..], &run].concat())).await;
    assert_eq!(stdout(&out), "", "quiet");

    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "apiVersion: v1\n").unwrap();
    let out = ank(args(addr, &["apply", &empty.display().to_string()])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Nothing to update.\n");
    let missing = dir.path().join("missing.yaml").display().to_string();
    let out = ank(args(addr, &["apply", &missing])).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), format!("error: Command failed: 'File '{missing}' not found!'\n"));
    assert_eq!(updates(&received).len(), 4, "the four runs; not the empty or missing manifests");
}

#[tokio::test]
async fn fake_server_sigterm_while_apply_waits_says_goodbye() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: x\n",
    )
    .unwrap();
    // The workload never settles: ank keeps waiting.
    let script = Script {
        state: json!({
            "workloadStates": {"agent_A": {"web": {"abc": {"state": "Pending", "subState": "Initial"}}}},
            "agents": {"agent_A": {}},
        }),
        update_answer: success(&["web.abc.agent_A"], &[], 0),
        ..Default::default()
    };
    let (addr, received, mut seen) = start_watched(script).await;
    let child = spawn_ank(&args(addr, &["apply", &file.display().to_string()]));
    // The snapshot after the update: ank is in its wait loop.
    until_received(&received, &mut seen, |m| count_updates(m) == 1 && count_state_requests(m) == 1).await;
    let out = signal_and_wait(child, "TERM").await;
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    until_received(&received, &mut seen, |m| m.last() == Some(&ToServer::Goodbye)).await;
}

#[tokio::test]
async fn fake_server_ctrl_c_of_get_workloads_watch_says_goodbye() {
    let state = json!({"workloadStates": {"agent_A": {"web": {"abc": {"state": "Running", "subState": "Ok"}}}}});
    let (addr, received, mut seen) = start_watched(Script { state, ..Default::default() }).await;
    let child = spawn_ank(&args(addr, &["get", "workloads", "--watch"]));
    until_received(&received, &mut seen, |m| count_state_requests(m) == 1).await;
    let out = signal_and_wait(child, "INT").await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    until_received(&received, &mut seen, |m| m.last() == Some(&ToServer::Goodbye)).await;
    let text = stdout(&out);
    assert!(text.starts_with("WORKLOAD NAME   AGENT     RUNTIME   EXECUTION STATE   ADDITIONAL INFO\n"), "{text}");
    assert!(text.ends_with("\n\n"), "a blank line after each table, as Ankaios: {text:?}");
}

#[tokio::test]
async fn fake_server_completion_offers_the_servers_workload_names() {
    let state = json!({"desiredState": {"apiVersion": "v1", "workloads": {
        "web": {"agent": "agent_A", "runtime": "podman", "runtimeConfig": ""},
        "db": {"agent": "agent_A", "runtime": "podman", "runtimeConfig": ""},
    }}});
    let (addr, _) = start(Script { state, ..Default::default() }).await;
    // What bash runs on `ank delete workload w<TAB>` (clap_complete's protocol).
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_ank"))
            .env("COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", "3")
            .env("_CLAP_COMPLETE_COMP_TYPE", "9")
            .env("_CLAP_COMPLETE_SPACE", "true")
            .env("_CLAP_IFS", "\n")
            .env("ANK_SERVER_URL", format!("http://{addr}"))
            .env("ANK_INSECURE", "true")
            .args(["--", "ank", "delete", "workload", "w"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(stdout(&out).trim(), "web", "{}", stderr(&out));
}

#[tokio::test]
async fn fake_server_get_state_and_agents_print_what_ankaios_prints() {
    let state = json!({
        "desiredState": {"apiVersion": "v1", "configs": {}, "workloads": {
            "web": {"agent": "agent_A", "restartPolicy": "NEVER", "runtime": "podman", "runtimeConfig": "image: nginx\nx: 1", "tags": {}},
        }},
        "workloadStates": {"agent_A": {"web": {"abc": {"state": "Running", "subState": "Ok"}}}},
        "agents": {"agent_A": {"status": {"cpuUsage": 5, "freeMemory": 1024}, "capabilities": ["podman"]}},
        "jobs": {"1": {"id": 1}},
    });
    let (addr, _) = start(Script { state, ..Default::default() }).await;
    let out = ank(args(addr, &["get", "state"])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = "desiredState:
  apiVersion: v1
  workloads:
    web:
      agent: agent_A
      restartPolicy: NEVER
      runtime: podman
      runtimeConfig: |-
        image: nginx
        x: 1
workloadStates:
  agent_A:
    web:
      abc:
        additionalInfo: ''
        state: Running
        subState: Ok
agents:
  agent_A:
    status:
      cpuUsage: 5
      freeMemory: 1024

";
    assert_eq!(stdout(&out), expected);
    let out = ank(args(addr, &["get", "state", "--extensions", "-o", "json"])).await;
    let text = stdout(&out);
    assert!(text.contains("\"jobs\"") && text.contains("\"capabilities\""), "{text}");
    assert!(
        text.find("\"desiredState\"") < text.find("\"workloadStates\"")
            && text.find("\"workloadStates\"") < text.find("\"agents\"")
    );
    let out = ank(args(addr, &["get", "agents"])).await;
    assert_eq!(
        stdout(&out),
        "NAME      WORKLOADS   CPU USAGE   FREE MEMORY\nagent_A   1           5%          1024B      \n"
    );
}

#[tokio::test]
async fn fake_server_updates_read_the_workload_states_first_as_ankaios_does() {
    let (addr, received) = start(Script { update_answer: success(&[], &[], 0), ..Default::default() }).await;
    let run = ["--no-wait", "run", "workload", "w", "--runtime", "podman", "--agent", "a", "--config", "image: x"];
    let out = ank(args(addr, &run)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let requests: Vec<RequestContent> = received
        .lock()
        .unwrap()
        .iter()
        .filter_map(|m| match m {
            ToServer::Request(Request { content, .. }) => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        requests[0],
        RequestContent::CompleteState { field_mask: vec!["workloadStates".to_owned()], subscribe_for_events: false }
    );
    assert!(matches!(requests[1], RequestContent::UpdateState { .. }), "{requests:?}");
}

#[tokio::test]
async fn fake_server_apply_verbose_reports_the_hooks_that_changed_workloads_and_plain_apply_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    let text = "apiVersion: v1\nworkloads:\n  web:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: \"image: nginx\"\n";
    std::fs::write(&file, text).unwrap();
    let answer = ResponseContent::UpdateStateSuccess {
        added_workloads: vec!["web.abc.agent_A".into()],
        deleted_workloads: vec![],
        job_id: 0,
        hook_changes: vec![ank_common::messages::HookChange { hook: "owner".into(), workloads: vec!["web".into()] }],
    };
    let name = file.display().to_string();
    let script = Script { update_answer: Some(answer.clone()), ..Default::default() };
    let (addr, _) = start(script).await;
    let out = ank(args(addr, &["--no-wait", "-v", "apply", &name])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("mutating hook 'owner' changed: web"), "{}", stderr(&out));

    let script = Script { update_answer: Some(answer), ..Default::default() };
    let (addr, _) = start(script).await;
    let out = ank(args(addr, &["--no-wait", "apply", &name])).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("mutating hook"), "as Ankaios' ank by default: {}", stderr(&out));
}

/// `ank apply` against a server that pushes no states (Ankaios' server to a
/// commander: `ank` polls a snapshot every second) of one workload without
/// an agent (NotScheduled) and one on an agent that disconnected (the
/// server's Pending(Initial), no report will come): the wait ends after the
/// away grace instead of hanging, as Ankaios' `ank` ends it.
#[tokio::test]
async fn fake_server_apply_of_unscheduled_and_disconnected_workloads_against_a_polled_server_ends() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nworkloads:\n  u:\n    runtime: podman\n    agent: \"\"\n    runtimeConfig: \"image: x\"\n  \
         d:\n    runtime: podman\n    agent: agent_gone\n    runtimeConfig: \"image: x\"\n",
    )
    .unwrap();
    let script = Script {
        state: json!({
            "workloadStates": {
                "": {"u": {"1": {"state": "NotScheduled", "subState": "", "additionalInfo": ""}}},
                "agent_gone": {
                    "d": {"2": {"state": "Pending", "subState": "Initial", "additionalInfo": ""}},
                    "old": {"3": {"state": "AgentDisconnected", "subState": "", "additionalInfo": ""}},
                },
            },
            "agents": {"agent_A": {}},
        }),
        update_answer: success(&["u.1.", "d.2.agent_gone"], &[], 0),
        ..Default::default()
    };
    let (addr, _) = start(script).await;
    let mut child = spawn_ank(&args(addr, &["apply", &file.display().to_string()]));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if tokio::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("ank apply still waits after 20 s");
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let last = text.split_terminator("\n\n").last().unwrap();
    assert!(last.contains("NotScheduled") && last.contains("Pending(Initial)"), "{text}");
}
