//! In-process tests of the whole agent ([`crate::run`]) against a scripted
//! fake gRPC server and the FakeRuntime: hello, ServerHello, state reports,
//! reconnect with full re-send, skipped bad messages, Goodbye on shutdown,
//! messages above the size limit in both directions.

use std::sync::Arc;
use std::time::Duration;

use ank_common::messages::{DeletedWorkload, FromServer, ToServer};
use ank_common::messages::{from_server_to_proto, to_server_from_proto};
use ank_common::workload::{Workload, WorkloadSpec};
use ank_common::{AgentName, ExecutionState, StateKind, WorkloadName, WorkloadState};
use ank_proto::grpc_api as g;
use ank_proto::grpc_api::agent_connection_server::{AgentConnection, AgentConnectionServer};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use crate::runtime_connectors::fake::FakeRuntime;
use crate::{AgentConfig, RuntimeRegistry};

const AGENT: &str = "agent_X";
const WAIT: Duration = Duration::from_secs(10);

/// One agent session as the fake server sees it.
struct Conn {
    from_agent: mpsc::Receiver<ToServer>,
    to_agent: mpsc::Sender<Result<g::FromServer, Status>>,
}

impl Conn {
    async fn recv(&mut self) -> Option<ToServer> {
        tokio::time::timeout(WAIT, self.from_agent.recv()).await.expect("agent message within time")
    }

    /// The next message that is not a load status.
    async fn next(&mut self) -> ToServer {
        loop {
            match self.recv().await.expect("agent stream open") {
                ToServer::AgentLoadStatus { .. } => {}
                m => return m,
            }
        }
    }

    /// Collects reported states until `done` holds for the latest one.
    async fn states_until(&mut self, done: impl Fn(&WorkloadState) -> bool) -> Vec<WorkloadState> {
        let mut all = Vec::new();
        loop {
            if let ToServer::UpdateWorkloadState(states) = self.next().await {
                let stop = states.iter().any(&done);
                all.extend(states);
                if stop {
                    return all;
                }
            }
        }
    }

    async fn send(&self, m: &FromServer) {
        self.to_agent.send(Ok(from_server_to_proto(m))).await.expect("session open");
    }
}

struct FakeServer(mpsc::Sender<Conn>);

#[tonic::async_trait]
impl AgentConnection for FakeServer {
    type ConnectAgentStream = ReceiverStream<Result<g::FromServer, Status>>;

    async fn connect_agent(
        &self,
        req: Request<Streaming<g::ToServer>>,
    ) -> Result<Response<Self::ConnectAgentStream>, Status> {
        let mut incoming = req.into_inner();
        let (in_tx, from_agent) = mpsc::channel(64);
        let (to_agent, out_rx) = mpsc::channel(64);
        tokio::spawn(async move {
            while let Ok(Some(m)) = incoming.message().await {
                if let Ok(Some(m)) = to_server_from_proto(m)
                    && in_tx.send(m).await.is_err()
                {
                    break;
                }
            }
        });
        let _ = self.0.send(Conn { from_agent, to_agent }).await;
        Ok(Response::new(ReceiverStream::new(out_rx)))
    }
}

async fn start_server() -> (String, mpsc::Receiver<Conn>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(AgentConnectionServer::new(FakeServer(tx)))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    (url, rx)
}

async fn accept(conns: &mut mpsc::Receiver<Conn>) -> Conn {
    tokio::time::timeout(WAIT, conns.recv()).await.expect("agent connects").expect("server alive")
}

/// The instance names and execution states of a state report.
fn plain(msg: ToServer) -> Vec<(ank_common::WorkloadInstanceName, ExecutionState)> {
    match msg {
        ToServer::UpdateWorkloadState(states) => {
            states.into_iter().map(|s| (s.instance_name, s.execution_state)).collect()
        }
        other => panic!("not a state report: {other:?}"),
    }
}

fn spec(name: &str) -> WorkloadSpec {
    let wl = Workload {
        agent: AGENT.into(),
        runtime: "podman".into(),
        runtime_config: "image: x\n".into(),
        ..Default::default()
    };
    WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new(AGENT).unwrap(), wl)
}

#[tokio::test]
// [utest->swdd~agent-sends-hello~1]
// [utest->swdd~agent-sends-workload-states-of-its-workloads-to-server~2]
// [itest->swdd~agent-shall-use-interfaces-to-server~1]
// [itest->swdd~agent-manager-listens-requests-from-server~1]
// [itest->swdd~communication-to-from-agent-middleware~1]
// [itest->swdd~agent-default-communication-grpc~1]
// [utest->swdd~agent-uses-async-channels~1]
// [utest->swdd~agent-manager-receives-workload-states-of-its-workloads~1]
// [utest->swdd~agent-stores-workload-states-of-its-workloads~1]
async fn agent_connects_runs_workloads_reconnects_and_says_goodbye() {
    let (url, mut conns) = start_server().await;
    let run_folder = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeRuntime::new());
    let mut registry = RuntimeRegistry::new();
    registry.register(fake.clone());
    let mut config = AgentConfig::new(AGENT, url);
    config.run_folder = run_folder.path().to_owned();
    config.tags.insert("zone".into(), "a".into());
    config.capabilities = vec!["gpu".into()];
    config.metrics.insert("speed".into(), 2.5);
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(crate::run(config, registry, shutdown.clone()));

    let mut conn = accept(&mut conns).await;
    let hello = conn.next().await;
    let tags = [("zone".to_owned(), "a".to_owned())].into_iter().collect();
    assert_eq!(
        hello,
        ToServer::AgentHello {
            agent_name: AGENT.into(),
            protocol_version: ank_common::PROTOCOL_VERSION.into(),
            tags,
            reports_conditions: true,
            // [test of feature S1: the runtimes and the configured capabilities are advertised]
            capabilities: vec!["gpu".into(), "podman".into()],
            quota: Default::default(),
        }
    );
    assert!(run_folder.path().join(format!("{AGENT}_io")).is_dir());
    let load = conn.recv().await.unwrap();
    assert!(matches!(load, ToServer::AgentLoadStatus { ref status, .. } if status.free_memory > 0), "{load:?}");
    assert!(matches!(load, ToServer::AgentLoadStatus { ref metrics, .. } if metrics.get("speed") == Some(&2.5)));

    let a = spec("a");
    conn.send(&FromServer::ServerHello(vec![a.clone()])).await;
    let states = conn.states_until(|s| s.execution_state == ExecutionState::running()).await;
    assert_eq!(states[0].execution_state.kind, StateKind::Pending(ank_common::execution_state::Pending::Starting));

    // The server drops the session: the agent reconnects and re-sends the full set.
    drop(conn);
    let mut conn = accept(&mut conns).await;
    assert!(matches!(conn.next().await, ToServer::AgentHello { .. }));
    let resent = conn.next().await;
    assert_eq!(plain(resent), vec![(a.instance_name.clone(), ExecutionState::running())]);

    // A message that does not convert is skipped; the session goes on.
    conn.to_agent.send(Ok(g::FromServer { from_server_enum: None })).await.unwrap();
    let b = spec("b");
    conn.send(&FromServer::UpdateWorkload {
        added: vec![b.clone()],
        deleted: vec![DeletedWorkload { instance_name: a.instance_name.clone(), dependencies: Default::default() }],
        resync: false,
    })
    .await;
    let states = conn
        .states_until(|s| s.instance_name == b.instance_name && s.execution_state == ExecutionState::running())
        .await;
    assert!(
        states.iter().any(|s| s.instance_name == a.instance_name && s.execution_state.kind == StateKind::Removed),
        "{states:?}"
    );

    shutdown.cancel();
    assert_eq!(conn.next().await, ToServer::Goodbye);
    tokio::time::timeout(WAIT, agent).await.expect("agent stops").unwrap().unwrap();
    assert_eq!(fake.containers().len(), 1, "workloads keep running after the agent stops");
}

#[tokio::test]
async fn agent_survives_oversized_messages_both_ways() {
    let (url, mut conns) = start_server().await;
    let run_folder = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeRuntime::new());
    let mut registry = RuntimeRegistry::new();
    registry.register(fake.clone());
    let mut config = AgentConfig::new(AGENT, url);
    config.run_folder = run_folder.path().to_owned();
    let shutdown = CancellationToken::new();
    let agent = tokio::spawn(crate::run(config, registry, shutdown.clone()));

    let mut conn = accept(&mut conns).await;
    assert!(matches!(conn.next().await, ToServer::AgentHello { .. }));
    let a = spec("a");
    conn.send(&FromServer::ServerHello(vec![a.clone()])).await;
    conn.states_until(|s| s.execution_state == ExecutionState::running()).await;

    // A log line too large for one message is cut to fit 2 MiB and
    // followed by a note, as Ankaios does; the stop response still arrives.
    fake.push_log(&a.instance_name, &"x".repeat(ank_proto::MAX_MESSAGE_BYTES + 1)).await;
    let request = ank_common::messages::LogsRequest {
        workload_names: vec![a.instance_name.clone()],
        follow: false,
        tail: -1,
        since: None,
        until: None,
    };
    conn.send(&FromServer::LogsRequest { request_id: "r1".into(), request }).await;
    let ToServer::LogEntriesResponse { request_id, entries } = conn.next().await else { panic!("no log entries") };
    assert_eq!(request_id, "r1");
    let messages: Vec<&str> = entries.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages.len(), 2);
    assert!(messages[0].ends_with("x [truncated]") && messages[0].len() < 2 * 1024 * 1024, "{}", messages[0].len());
    assert_eq!(messages[1], "The previous message was truncated due to exceeding the maximum 2 MB size.");
    let next = conn.next().await;
    assert!(matches!(next, ToServer::LogsStopResponse { ref request_id, .. } if request_id == "r1"), "{next:?}");

    // A message from the server above the limit ends the session; the agent
    // reconnects and re-sends its states.
    let mut big = spec("big");
    big.workload.runtime_config = "x".repeat(ank_proto::MAX_MESSAGE_BYTES + 1);
    conn.send(&FromServer::UpdateWorkload { added: vec![big], deleted: vec![], resync: false }).await;
    let mut conn = accept(&mut conns).await;
    assert!(matches!(conn.next().await, ToServer::AgentHello { .. }));
    assert_eq!(plain(conn.next().await), vec![(a.instance_name.clone(), ExecutionState::running())]);
    assert_eq!(fake.created(), vec![a.instance_name.clone()], "the oversized workload was never read");

    shutdown.cancel();
    assert_eq!(conn.next().await, ToServer::Goodbye);
    tokio::time::timeout(WAIT, agent).await.expect("agent stops").unwrap().unwrap();
}
