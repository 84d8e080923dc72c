//! Fuzzes the server's gRPC stream handling as a whole: up to four streams
//! (agent, CliConnection or CommandConnection, each with or without a
//! client certificate) send interleaved sequences of messages to one
//! server, through [`StreamHarness`] (the same code the gRPC services
//! run, without the network), on a paused clock.
//!
//! Input layout: byte 0 holds the set-up flags (bit 0: every client holds
//! the read-only certificate `viewer`; bit 1: roles on, `admin` is the
//! commander; bit 2: the clients present certificates at all), byte 1 the
//! number of streams (1 to 4), then one byte per stream (bits 0-1: service,
//! bit 2: the `admin` certificate instead of `agent_A`'s), then steps of
//! three bytes: the stream, the message template, a parameter.
//!
//! Invariants checked: no panic, and no stream outlives its input (each
//! ends within a minute of virtual time after its client stops);
//! - a stream whose first message is not the hello of its service is
//!   refused (Ankaios' rule), and then nothing it sent reaches the server;
//! - with only read-only clients the desired state never changes;
//! - a stream that presents `agent_A`'s certificate (SAN `agent_A`) is
//!   never handed a workload of another agent, whatever hellos it sends;
//! - log lines reach a requester only from the agent stream of the
//!   workload they belong to.

#![no_main]

use std::sync::Arc;
use std::time::Duration;

use ank_common::messages::{
    FromServer, LogEntry, LogsRequest, Request, RequestContent, ResponseContent, ToServer, from_server_from_proto,
    to_server_to_proto,
};
use ank_common::{ExecutionState, WorkloadInstanceName, WorkloadState};
use ank_proto::grpc_api as g;
use ank_server::grpc::identity::IdentityPolicy;
use ank_server::grpc::tls::PeerIdentity;
use ank_server::grpc::{ServeOptions, StreamHarness, StreamKind};
use libfuzzer_sys::fuzz_target;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

const MANIFEST: &str = "apiVersion: v1\nworkloads:\n  a:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: a\n  b:\n    runtime: podman\n    agent: agent_B\n    runtimeConfig: |\n      image: b\n";
/// How long a stream may take to end after its client stopped sending.
const LIMIT: Duration = Duration::from_secs(60);

fuzz_target!(|data: &[u8]| {
    let Some((setup, data)) = data.split_first() else { return };
    let Some((&count, data)) = data.split_first() else { return };
    let count = usize::from(count % 4) + 1;
    if data.len() < count {
        return;
    }
    let (kinds, steps) = data.split_at(count);
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("runtime");
    runtime.block_on(run(*setup, kinds, steps));
});

/// One stream of the run: its service, its certificate, and what it sent.
struct Client {
    kind: StreamKind,
    peer: Option<PeerIdentity>,
    tx: Option<mpsc::Sender<Result<g::ToServer, tonic::Status>>>,
    /// The first message it sent, once it sent one.
    first: Option<ToServer>,
}

fn peer(name: &str, sans: &[&str]) -> PeerIdentity {
    PeerIdentity {
        addr: "10.0.0.9:4000".parse().expect("addr"),
        names: std::iter::once(name.to_owned()).chain(sans.iter().map(|s| (*s).to_owned())).collect::<Vec<_>>().into(),
        san_dns: Some(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>().into()),
        chain_len: 1,
    }
}

async fn run(setup: u8, kinds: &[u8], steps: &[u8]) {
    let (read_only, roles, tls) = (setup & 1 != 0, setup & 2 != 0, setup & 4 != 0);
    let policy = IdentityPolicy {
        read_only_clients: if read_only { vec!["viewer".into()] } else { Vec::new() },
        commander_clients: if roles { vec!["admin".into()] } else { Vec::new() },
        ..IdentityPolicy::default()
    };
    let initial = ank_common::manifest::parse_manifest("fuzz", MANIFEST).expect("manifest");
    let shutdown = CancellationToken::new();
    let (handle, actor) =
        ank_server::start_actor(initial, None, &ServeOptions::default(), shutdown.clone()).expect("actor");
    let harness = Arc::new(StreamHarness::new(handle, policy, shutdown.clone()));
    let before = probe(&harness).await;
    let instances = instances(&before);

    let mut clients: Vec<Client> = kinds
        .iter()
        .map(|k| {
            let kind = match k & 3 {
                0 | 3 => StreamKind::Agent,
                1 => StreamKind::Commander,
                _ => StreamKind::Command,
            };
            let peer = match (tls, read_only, k & 4 != 0) {
                (false, _, _) => None,
                (true, true, _) => Some(peer("viewer", &["viewer"])),
                (true, false, true) => Some(peer("admin", &[])),
                (true, false, false) => Some(peer("agent_A", &["agent_A"])),
            };
            Client { kind, peer, tx: None, first: None }
        })
        .collect();
    let mut tasks = Vec::new();
    for c in &mut clients {
        let (tx, rx) = mpsc::channel(256);
        c.tx = Some(tx);
        let (harness, kind, peer) = (harness.clone(), c.kind, c.peer.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = harness.open(kind, peer, ReceiverStream::new(rx)).await?;
            let mut received = Vec::new();
            while let Some(m) = out.next().await {
                match m {
                    Ok(wire) => received.extend(from_server_from_proto(wire).ok().flatten()),
                    Err(_) => break,
                }
            }
            Ok::<_, tonic::Status>(received)
        }));
    }
    for step in steps.chunks_exact(3) {
        let s = usize::from(step[0]) % clients.len();
        let msg = message(step[1], step[2], s, &instances);
        let c = &mut clients[s];
        if c.first.is_none() {
            c.first = Some(msg.clone());
        }
        if let Some(tx) = &c.tx
            && tx.send(Ok(to_server_to_proto(&msg))).await.is_err()
        {
            c.tx = None;
        }
        tokio::task::yield_now().await;
    }
    for c in &mut clients {
        c.tx = None;
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        let outcome = tokio::time::timeout(LIMIT, task).await.expect("a stream outlived its input").expect("task");
        outcomes.push(outcome);
    }
    let after = probe(&harness).await;
    shutdown.cancel();
    let _ = actor.await;

    for (c, outcome) in clients.iter().zip(&outcomes) {
        let hello_first = match (&c.first, c.kind) {
            (Some(ToServer::AgentHello { .. }), StreamKind::Agent) => true,
            (Some(ToServer::CommanderHello { .. }), StreamKind::Commander | StreamKind::Command) => true,
            _ => false,
        };
        if !hello_first {
            assert!(outcome.is_err(), "a stream starting with {:?} on {:?} was served", c.first, c.kind);
        }
        let Ok(received) = outcome else { continue };
        if c.peer.as_ref().is_some_and(|p| p.names.first().is_some_and(|n| n == "agent_A")) {
            for m in received {
                let specs = match m {
                    FromServer::ServerHello(specs) => specs.clone(),
                    FromServer::UpdateWorkload { added, .. } => added.clone(),
                    _ => Vec::new(),
                };
                for spec in specs {
                    assert_eq!(spec.instance_name.agent_name, "agent_A", "agent_A's certificate was handed {spec:?}");
                }
            }
        }
        for m in received {
            let FromServer::Response(r) = m else { continue };
            let ResponseContent::LogEntries(entries) = &r.content else { continue };
            for e in entries {
                let from: usize = e.message.strip_prefix("from-stream-").and_then(|n| n.parse().ok()).expect("tagged");
                let sender = &clients[from];
                let said = match &sender.first {
                    Some(ToServer::AgentHello { agent_name, .. }) => agent_name.as_str(),
                    _ => "",
                };
                assert!(
                    sender.kind == StreamKind::Agent && said == e.workload_name.agent_name,
                    "a log line of {} came from stream {from} ({:?}, hello {said:?})",
                    e.workload_name,
                    sender.kind
                );
            }
        }
    }
    if read_only && tls {
        assert_eq!(before["desiredState"], after["desiredState"], "read-only clients changed the desired state");
    }
}

/// The complete state, read on a fresh commander stream without a certificate.
async fn probe(harness: &StreamHarness) -> serde_json::Value {
    let (tx, rx) = mpsc::channel(4);
    let hello = ToServer::CommanderHello { protocol_version: ank_common::PROTOCOL_VERSION.into() };
    let read = ToServer::Request(Request {
        request_id: "probe".into(),
        content: RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false },
    });
    tx.send(Ok(to_server_to_proto(&hello))).await.expect("queue");
    tx.send(Ok(to_server_to_proto(&read))).await.expect("queue");
    let mut out = harness.open(StreamKind::Command, None, ReceiverStream::new(rx)).await.expect("probe stream");
    loop {
        let wire = out.next().await.expect("an answer").expect("no error");
        if let Some(FromServer::Response(r)) = from_server_from_proto(wire).ok().flatten()
            && r.request_id == "probe"
            && let ResponseContent::CompleteState(tree) = r.content
        {
            return tree.to_json().expect("a JSON tree");
        }
    }
}

/// The instance names of the workload states in `tree`.
fn instances(tree: &serde_json::Value) -> Vec<WorkloadInstanceName> {
    let mut names = Vec::new();
    for (agent, workloads) in tree["workloadStates"].as_object().into_iter().flatten() {
        for (workload, ids) in workloads.as_object().into_iter().flatten() {
            for id in ids.as_object().into_iter().flatten().map(|(id, _)| id) {
                names.push(WorkloadInstanceName {
                    workload_name: workload.clone(),
                    agent_name: agent.clone(),
                    id: id.clone(),
                });
            }
        }
    }
    names
}

/// The message of template `template` with parameter `p`, sent by stream `s`.
fn message(template: u8, p: u8, s: usize, instances: &[WorkloadInstanceName]) -> ToServer {
    let agent = ["agent_A", "agent_B", "agent_C", ""][usize::from(p % 4)];
    let instance = instances.get(usize::from(p) % instances.len().max(1)).cloned().unwrap_or(WorkloadInstanceName {
        workload_name: "a".into(),
        agent_name: "agent_A".into(),
        id: "x".into(),
    });
    let request = |content| ToServer::Request(Request { request_id: format!("r{}", p % 4), content });
    match template % 16 {
        0 => ToServer::AgentHello {
            agent_name: agent.into(),
            protocol_version: ank_common::PROTOCOL_VERSION.into(),
            tags: Default::default(),
            reports_conditions: p & 0x10 != 0,
            capabilities: Vec::new(),
            quota: Default::default(),
        },
        1 => ToServer::CommanderHello {
            protocol_version: if p & 1 == 0 { ank_common::PROTOCOL_VERSION.into() } else { "0.1.0".into() },
        },
        2 => request(RequestContent::UpdateState {
            new_state: Box::new(
                ank_common::convert::PartialCompleteState::from_json(
                    &serde_json::json!({"desiredState": {"apiVersion": "v1"}}),
                )
                .expect("state"),
            ),
            update_mask: vec!["desiredState.workloads".into()],
        }),
        3 => {
            let tree = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {
                format!("w{}", p % 3): {"runtime": "podman", "agent": agent, "runtimeConfig": "image: x\n"}
            }}});
            match ank_common::convert::PartialCompleteState::from_json(&tree) {
                Ok(state) => request(RequestContent::UpdateState {
                    new_state: Box::new(state),
                    update_mask: vec![format!("desiredState.workloads.w{}", p % 3)],
                }),
                Err(_) => ToServer::Goodbye,
            }
        }
        4 => request(RequestContent::CompleteState {
            field_mask: if p & 2 == 0 { vec![] } else { vec!["desiredState.workloads".into()] },
            subscribe_for_events: p & 1 != 0,
        }),
        5 => request(RequestContent::Logs(LogsRequest {
            workload_names: vec![instance],
            follow: p & 1 != 0,
            tail: -1,
            ..Default::default()
        })),
        6 => request(RequestContent::LogsCancel),
        7 => request(RequestContent::EventsCancel),
        8 => request(RequestContent::JobRerun { failed_only: p & 1 != 0 }),
        9 => request(RequestContent::JobInterrupt { job_id: u64::from(p % 4) }),
        10 => ToServer::UpdateWorkloadState(vec![WorkloadState::new(instance, ExecutionState::running())]),
        11 => ToServer::AgentLoadStatus {
            agent_name: agent.into(),
            status: Default::default(),
            metrics: Default::default(),
            quota_used: Default::default(),
        },
        12 => ToServer::LogEntriesResponse {
            request_id: format!("{}@r{}", p % 8, (p >> 3) % 4),
            entries: vec![LogEntry { workload_name: instance, message: format!("from-stream-{s}") }],
        },
        13 => ToServer::LogsStopResponse {
            request_id: format!("{}@r{}", p % 8, (p >> 3) % 4),
            workload_name: instance,
            reason: String::new(),
        },
        14 => ToServer::Goodbye,
        _ => request(RequestContent::RenderedState { field_mask: vec![] }),
    }
}
