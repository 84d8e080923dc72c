//! Adversarial suite, boundary "agent": what the holder of one agent's
//! certificate, speaking raw gRPC on AgentConnection, must not be able to
//! do. Each item is one test; the server runs in-process with real mTLS
//! (each agent certificate names only its own agent).
//!
//! Must not be able to:
//! 1. send anything before its AgentHello;
//! 2. say hello under a name its certificate does not carry;
//! 3. take over another agent's name with a later hello on its own stream:
//!    neither receive that agent's workloads nor disconnect it;
//! 4. open a commander stream, roles on (`--commander-client`); with roles
//!    off (the default, as Ankaios) it can, which a test shows too;
//! 5. put log lines into a log stream that asked another agent, or lines
//!    of another agent's workload into one that asked it.

use ank_common::messages::{FromServer, LogEntry, LogsRequest, RequestContent, ResponseContent, ToServer};
use ank_tests::adversary::{self, Pki, RawStream, Service, agent_hello};

const MANIFEST: &str = "apiVersion: v1\nworkloads:\n  secret_b:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: |\n      image: db\n      commandArgs: [\"--password\", \"hunter2\"]\n";

/// The names of the workloads a ServerHello or UpdateWorkload hands out.
fn handed_out(messages: &[FromServer]) -> Vec<String> {
    messages
        .iter()
        .flat_map(|m| match m {
            FromServer::ServerHello(specs) => specs.iter().map(|s| s.name().to_owned()).collect(),
            FromServer::UpdateWorkload { added, .. } => added.iter().map(|s| s.name().to_owned()).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The first message of a fresh agent stream.
async fn server_hello(s: &mut RawStream) -> Vec<String> {
    let first = s.recv().await.expect("no error").expect("a message");
    handed_out(&[first])
}

fn read() -> RequestContent {
    RequestContent::CompleteState { field_mask: vec!["agents".into()], subscribe_for_events: false }
}

#[tokio::test(start_paused = true)]
async fn agent_cannot_send_anything_before_its_agent_hello() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), |_| {}).await;
    let pem = pki.client("agent_A", &["agent_A"]);
    let states = ToServer::UpdateWorkloadState(Vec::new());
    let status = RawStream::open(&url, Some(&pem), Service::Agent, &[states, agent_hello("agent_A")]).await.err();
    let status = status.expect("refused");
    assert_eq!((status.code(), status.message()), (tonic::Code::InvalidArgument, "No AgentHello received."));
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn agent_cannot_say_hello_under_a_name_its_certificate_does_not_carry() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), |_| {}).await;
    let pem = pki.client("agent_A", &["agent_A"]);
    let status = RawStream::agent(&url, Some(&pem), "agent_B").await.err().expect("refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn agent_cannot_take_another_agents_name_with_a_later_hello() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), |_| {}).await;
    let mut b = RawStream::agent(&url, Some(&pki.client("agent_B", &["agent_B"])), "agent_B").await.expect("agent_B");
    assert_eq!(server_hello(&mut b).await, ["secret_b"]);
    let mut a = RawStream::agent(&url, Some(&pki.client("agent_A", &["agent_A"])), "agent_A").await.expect("agent_A");
    assert!(server_hello(&mut a).await.is_empty());
    assert!(a.send(&agent_hello("agent_B")).await);
    // Everything agent_A is sent up to the answer of a later request: none of agent_B's workloads.
    let (_, before) = a.request(read()).await;
    assert!(handed_out(&before).is_empty(), "agent_A was handed {:?}", handed_out(&before));
    // The real agent_B is still connected on its own stream.
    let (_, _) = b.request(read()).await;
    let agents = b.complete_state(&["agents"]).await;
    let names: Vec<&String> = agents["agents"].as_object().expect("agents").keys().collect();
    assert_eq!(names, ["agent_A", "agent_B"], "{agents}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn agent_certificate_cannot_be_a_commander_with_roles_on() {
    let pki = Pki::new();
    let roles = |o: &mut ank_server::grpc::ServeOptions| o.policy.commander_clients = vec!["admin".into()];
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), roles).await;
    let agent_a = pki.client("agent_A", &["agent_A"]);
    for service in [Service::Cli, Service::Command] {
        let status = RawStream::open(&url, Some(&agent_a), service, &[adversary::commander_hello()]).await.err();
        let status = status.expect("refused");
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
        assert!(status.message().contains("'agent_A' is an agent's"), "{}", status.message());
    }
    // It is still an agent.
    let mut a = RawStream::agent(&url, Some(&agent_a), "agent_A").await.expect("agent_A");
    assert!(server_hello(&mut a).await.is_empty());
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn roles_are_off_by_default_so_an_agent_certificate_may_be_a_commander_as_in_ankaios() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), |_| {}).await;
    let agent_a = pki.client("agent_A", &["agent_A"]);
    let mut c = RawStream::commander(&url, Some(&agent_a)).await;
    let state = c.complete_state(&["desiredState.workloads"]).await;
    assert_eq!(adversary::workload_names(&state), ["secret_b"]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn agent_cannot_inject_into_a_log_stream_it_was_not_asked_for() {
    const TWO: &str = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: a\n  b:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: |\n      image: b\n";
    let (url, shutdown) = adversary::start_server(None, adversary::state(TWO), |_| {}).await;
    let instance = async |s: &mut RawStream| {
        s.recv_until(|m| match m {
            FromServer::ServerHello(specs) => specs.into_iter().next().map(|s| s.instance_name),
            _ => None,
        })
        .await
    };
    let mut a = RawStream::agent(&url, None, "agent_A").await.expect("agent_A");
    let a_name = instance(&mut a).await;
    let mut b = RawStream::agent(&url, None, "agent_B").await.expect("agent_B");
    let b_name = instance(&mut b).await;
    let mut victim = RawStream::commander(&url, None).await;
    let logs = LogsRequest { workload_names: vec![a_name.clone()], follow: true, tail: -1, ..Default::default() };
    assert!(matches!(victim.request(RequestContent::Logs(logs)).await.0, ResponseContent::LogsRequestAccepted(_)));
    let key = a
        .recv_until(|m| match m {
            FromServer::LogsRequest { request_id, .. } => Some(request_id),
            _ => None,
        })
        .await;
    let line = |name: &ank_common::WorkloadInstanceName, message: &str| LogEntry {
        workload_name: name.clone(),
        message: message.into(),
    };
    // agent_B forges a line of agent_A's workload, and one of its own, under the key.
    let forged = vec![line(&a_name, "forged by B"), line(&b_name, "B's own")];
    assert!(b.send(&ToServer::LogEntriesResponse { request_id: key.clone(), entries: forged }).await);
    let stop =
        ToServer::LogsStopResponse { request_id: key.clone(), workload_name: a_name.clone(), reason: "x".into() };
    assert!(b.send(&stop).await);
    b.request(read()).await;
    // agent_A itself cannot add lines of agent_B's workload either.
    let mixed = vec![line(&b_name, "not asked"), line(&a_name, "genuine")];
    assert!(a.send(&ToServer::LogEntriesResponse { request_id: key, entries: mixed }).await);
    let first = victim
        .recv_until(|m| match m {
            FromServer::Response(r) => match r.content {
                ResponseContent::LogEntries(entries) => Some(entries),
                ResponseContent::LogsStop { .. } => panic!("agent_B ended the log of agent_A's workload"),
                _ => None,
            },
            _ => None,
        })
        .await;
    assert_eq!(first, vec![line(&a_name, "genuine")]);
    shutdown.cancel();
}
