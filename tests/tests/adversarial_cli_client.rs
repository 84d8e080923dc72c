//! Adversarial suite, boundary "CLI client": what a holder of a client
//! certificate (or, without TLS, anyone who reaches the port) speaking raw
//! gRPC must not be able to do, and what a `--read-only-client`
//! certificate must not be able to do. Each item is one test; the server
//! runs in-process, with real mTLS where the point is about certificates.
//!
//! Must not be able to:
//! 1. send anything to the server before its CommanderHello (plain);
//! 2. write with a read-only certificate by sending the write first (TLS);
//! 3. make any writing request with a read-only certificate: UpdateState,
//!    JobRerun, JobInterrupt (TLS);
//! 4. connect as an agent with a read-only certificate (TLS);
//! 5. say a second hello that turns a commander stream into an agent (plain);
//! 6. connect as an agent with a commander's certificate, roles on (TLS);
//! 7. connect at all with a revoked certificate, `--crl_pem` given (TLS);
//! 8. open more event subscriptions than the per-connection limit (plain);
//! 9. open more log requests than the per-connection limit (plain);
//! 10. put log lines into, or end, another connection's log stream (plain).

use ank_common::WorkloadInstanceName;
use ank_common::messages::{FromServer, LogEntry, LogsRequest, Request, RequestContent, ResponseContent, ToServer};
use ank_tests::adversary::{self, Pki, RawStream, Service, agent_hello, commander_hello, update, workload_names};
use serde_json::json;

const MANIFEST: &str = "apiVersion: v1\nworkloads:\n  nginx:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: nginx\n";

/// The update that deletes every workload.
fn delete_all(request_id: &str) -> ToServer {
    update(request_id, &json!({"desiredState": {"apiVersion": "v1"}}), &["desiredState.workloads"])
}

fn delete_all_content() -> RequestContent {
    match delete_all("x") {
        ToServer::Request(r) => r.content,
        other => unreachable!("{other:?}"),
    }
}

fn read_only(viewer: &str) -> impl FnOnce(&mut ank_server::grpc::ServeOptions) {
    let viewer = viewer.to_owned();
    move |o| o.policy.read_only_clients = vec![viewer]
}

fn is_read_only_refusal(content: &ResponseContent) -> bool {
    matches!(content, ResponseContent::Error(e) if e.contains("'viewer' is read-only"))
}

#[tokio::test(start_paused = true)]
async fn cli_client_cannot_send_anything_before_its_commander_hello() {
    let (url, shutdown) = adversary::start_server(None, adversary::state(MANIFEST), |_| {}).await;
    for service in [Service::Cli, Service::Command] {
        let refused = RawStream::open(&url, None, service, &[delete_all("w1"), commander_hello()]).await.err();
        let status = refused.expect("a stream without a hello first is refused");
        assert_eq!((status.code(), status.message()), (tonic::Code::InvalidArgument, "No CommanderHello received."));
    }
    let status = RawStream::open(&url, None, Service::Command, &[ToServer::Goodbye]).await.err().expect("refused");
    assert_eq!(status.message(), "No CommanderHello received.");
    let mut admin = RawStream::commander(&url, None).await;
    assert_eq!(workload_names(&admin.complete_state(&["desiredState.workloads"]).await), ["nginx"]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn read_only_client_cannot_write_by_sending_the_write_first() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), read_only("viewer")).await;
    let viewer = pki.client("viewer", &[]);
    for service in [Service::Cli, Service::Command] {
        let status = RawStream::open(&url, Some(&viewer), service, &[delete_all("w1")]).await.err().expect("refused");
        assert_eq!((status.code(), status.message()), (tonic::Code::InvalidArgument, "No CommanderHello received."));
    }
    let admin = pki.client("admin", &[]);
    let mut admin = RawStream::commander(&url, Some(&admin)).await;
    assert_eq!(workload_names(&admin.complete_state(&["desiredState.workloads"]).await), ["nginx"]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn read_only_client_cannot_make_any_writing_request() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), read_only("viewer")).await;
    let viewer = pki.client("viewer", &[]);
    for service in [Service::Cli, Service::Command] {
        let mut s = RawStream::open(&url, Some(&viewer), service, &[commander_hello()]).await.expect("stream");
        let writes = [
            delete_all_content(),
            RequestContent::JobRerun { failed_only: false },
            RequestContent::JobRerun { failed_only: true },
            RequestContent::JobInterrupt { job_id: 1 },
        ];
        for write in writes {
            let (answer, _) = s.request(write.clone()).await;
            assert!(is_read_only_refusal(&answer), "{write:?} answered {answer:?}");
        }
        // Reading still works on the same stream.
        assert_eq!(workload_names(&s.complete_state(&["desiredState.workloads"]).await), ["nginx"]);
    }
    // No job was made by the refused reruns: only the startup manifest's.
    let admin = pki.client("admin", &[]);
    let mut admin = RawStream::commander(&url, Some(&admin)).await;
    let jobs = admin.complete_state(&["jobs"]).await;
    let ids: Vec<&String> = jobs["jobs"].as_object().expect("jobs").keys().collect();
    assert_eq!(ids, ["1"], "{jobs}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn read_only_client_cannot_connect_as_an_agent() {
    let pki = Pki::new();
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), read_only("viewer")).await;
    // Its SAN admits the agent name, so only the read-only rule refuses it.
    let viewer = pki.client("viewer", &["*"]);
    let status = RawStream::agent(&url, Some(&viewer), "agent_A").await.err().expect("refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    let admin = pki.client("admin", &[]);
    let mut admin = RawStream::commander(&url, Some(&admin)).await;
    let agents = admin.complete_state(&["agents"]).await;
    assert!(agents["agents"].get("agent_A").is_none(), "{agents}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn cli_client_cannot_become_an_agent_with_a_later_hello() {
    let (url, shutdown) = adversary::start_server(None, adversary::state(MANIFEST), |_| {}).await;
    let mut s = RawStream::commander(&url, None).await;
    assert!(s.send(&agent_hello("agent_A")).await);
    // Whatever came before the answer: no ServerHello with agent_A's workloads.
    let (_, before) =
        s.request(RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false }).await;
    assert!(before.iter().all(|m| !matches!(m, ank_common::messages::FromServer::ServerHello(_))), "{before:?}");
    let agents = s.complete_state(&["agents"]).await;
    assert!(agents["agents"].get("agent_A").is_none(), "{agents}");
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn commander_certificate_cannot_be_an_agent_with_roles_on() {
    let pki = Pki::new();
    let roles = |o: &mut ank_server::grpc::ServeOptions| o.policy.commander_clients = vec!["admin".into()];
    let (url, shutdown) = adversary::start_server(Some(&pki), adversary::state(MANIFEST), roles).await;
    let admin = pki.client("admin", &["*"]);
    let status = RawStream::agent(&url, Some(&admin), "agent_A").await.err().expect("refused");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("'admin' is a commander's"), "{}", status.message());
    // It is still a commander.
    let mut admin = RawStream::commander(&url, Some(&admin)).await;
    assert_eq!(workload_names(&admin.complete_state(&["desiredState.workloads"]).await), ["nginx"]);
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn revoked_client_certificate_cannot_connect() {
    let pki = Pki::new();
    let revoked = pki.client("admin", &[]);
    let crl = pki.revoke(&[&revoked]);
    let (url, shutdown) =
        adversary::start_server_with_crl(Some(&pki), Some(crl), adversary::state(MANIFEST), |_| {}).await;
    for service in [Service::Cli, Service::Command] {
        let refused = RawStream::open(&url, Some(&revoked), service, &[commander_hello()]).await;
        assert!(refused.is_err(), "a revoked certificate was served on {service:?}");
    }
    assert!(RawStream::agent(&url, Some(&revoked), "agent_A").await.is_err());
    // A certificate the list does not name still connects.
    let other = pki.client("other", &[]);
    let mut other = RawStream::commander(&url, Some(&other)).await;
    assert_eq!(workload_names(&other.complete_state(&["desiredState.workloads"]).await), ["nginx"]);
    shutdown.cancel();
}

fn subscribe() -> RequestContent {
    RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: true }
}

#[tokio::test(start_paused = true)]
async fn cli_client_cannot_open_more_event_subscriptions_than_the_limit() {
    let limit = |o: &mut ank_server::grpc::ServeOptions| o.stream_limits.event_subscriptions = 2;
    let (url, shutdown) = adversary::start_server(None, adversary::state(MANIFEST), limit).await;
    let mut c = RawStream::commander(&url, None).await;
    for _ in 0..2 {
        assert!(matches!(c.request(subscribe()).await.0, ResponseContent::CompleteState(_)));
    }
    let (third, _) = c.request(subscribe()).await;
    assert!(
        matches!(&third, ResponseContent::Error(e) if e.contains("limit is 2") && e.contains("--max-subscriptions-per-connection")),
        "{third:?}"
    );
    // Another connection has its own allowance.
    let mut other = RawStream::commander(&url, None).await;
    assert!(matches!(other.request(subscribe()).await.0, ResponseContent::CompleteState(_)));
    // Ending one subscription makes room for another.
    assert!(
        c.send(&ToServer::Request(Request { request_id: "adv-1".into(), content: RequestContent::EventsCancel })).await
    );
    c.recv_until(|m| match m {
        FromServer::Response(r) if r.request_id == "adv-1" => Some(()),
        _ => None,
    })
    .await;
    assert!(matches!(c.request(subscribe()).await.0, ResponseContent::CompleteState(_)));
    shutdown.cancel();
}

/// Connects a raw agent_A and returns it with the instance names it was handed.
async fn raw_agent_a(url: &str) -> (RawStream, Vec<WorkloadInstanceName>) {
    let mut agent = RawStream::agent(url, None, "agent_A").await.expect("agent_A");
    let names = agent
        .recv_until(|m| match m {
            FromServer::ServerHello(specs) => Some(specs.into_iter().map(|s| s.instance_name).collect::<Vec<_>>()),
            _ => None,
        })
        .await;
    assert_eq!(names.len(), 1);
    (agent, names)
}

fn logs_of(names: &[WorkloadInstanceName]) -> RequestContent {
    RequestContent::Logs(LogsRequest { workload_names: names.to_vec(), follow: true, tail: -1, ..Default::default() })
}

#[tokio::test(start_paused = true)]
async fn cli_client_cannot_open_more_log_requests_than_the_limit() {
    let limit = |o: &mut ank_server::grpc::ServeOptions| o.stream_limits.log_requests = 1;
    let (url, shutdown) = adversary::start_server(None, adversary::state(MANIFEST), limit).await;
    let (_agent, names) = raw_agent_a(&url).await;
    let mut c = RawStream::commander(&url, None).await;
    assert!(matches!(c.request(logs_of(&names)).await.0, ResponseContent::LogsRequestAccepted(n) if n == names));
    let (second, _) = c.request(logs_of(&names)).await;
    assert!(
        matches!(&second, ResponseContent::Error(e) if e.contains("limit is 1") && e.contains("--max-log-requests-per-connection")),
        "{second:?}"
    );
    let mut other = RawStream::commander(&url, None).await;
    assert!(matches!(other.request(logs_of(&names)).await.0, ResponseContent::LogsRequestAccepted(_)));
    shutdown.cancel();
}

#[tokio::test(start_paused = true)]
async fn cli_client_cannot_inject_into_another_connections_log_stream() {
    let (url, shutdown) = adversary::start_server(None, adversary::state(MANIFEST), |_| {}).await;
    let (mut agent, names) = raw_agent_a(&url).await;
    let mut victim = RawStream::commander(&url, None).await;
    assert!(matches!(victim.request(logs_of(&names)).await.0, ResponseContent::LogsRequestAccepted(_)));
    let key = agent
        .recv_until(|m| match m {
            FromServer::LogsRequest { request_id, .. } => Some(request_id),
            _ => None,
        })
        .await;
    let line = |message: &str| LogEntry { workload_name: names[0].clone(), message: message.into() };
    // The attacker knows the key (connection ids are easy to guess) and forges lines and the end.
    let mut attacker = RawStream::commander(&url, None).await;
    assert!(
        attacker.send(&ToServer::LogEntriesResponse { request_id: key.clone(), entries: vec![line("forged")] }).await
    );
    let stop =
        ToServer::LogsStopResponse { request_id: key.clone(), workload_name: names[0].clone(), reason: "x".into() };
    assert!(attacker.send(&stop).await);
    attacker.request(RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false }).await;
    // The real agent's line is the first the victim sees, and its stream was not ended.
    assert!(agent.send(&ToServer::LogEntriesResponse { request_id: key, entries: vec![line("genuine")] }).await);
    let first = victim
        .recv_until(|m| match m {
            FromServer::Response(r) => match r.content {
                ResponseContent::LogEntries(entries) => Some(entries),
                ResponseContent::LogsStop { .. } => panic!("the attacker ended the victim's log stream"),
                _ => None,
            },
            _ => None,
        })
        .await;
    assert_eq!(first, vec![line("genuine")]);
    shutdown.cancel();
}
