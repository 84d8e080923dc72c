//! Dead-peer detection: an agent whose link is cut silently (a proxy that
//! stops forwarding but keeps both sockets open: no FIN, no RST) is marked
//! disconnected by the server's heartbeats, not after TCP's minutes. The
//! agent keeps its workload and comes back when the link does, and changes
//! made while it was away are applied then (ankaios#358), without ghost
//! rows for the workloads deleted meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_common::StateKind;
use ank_proto::dial::Heartbeat;
use ank_tests::commander::Commander;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Forwards every accepted connection to `target` until `cut` is set, then
/// silently stops forwarding in both directions (sockets stay open).
async fn silent_proxy(target: String, cut: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = TcpStream::connect(&target).await else { continue };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw, cut.clone()));
            tokio::spawn(pump(sr, cw, cut.clone()));
        }
    });
    format!("http://{addr}")
}

async fn pump(mut from: tokio::net::tcp::OwnedReadHalf, mut to: tokio::net::tcp::OwnedWriteHalf, cut: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if cut.load(Ordering::SeqCst) {
            // The link is gone: nothing arrives, nothing is closed.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

async fn agent_listed(c: &mut Commander) -> bool {
    c.complete_state(&["agents"]).await["agents"].get("agent_A").is_some()
}

/// A server with fast heartbeats and one agent `agent_A` on a fake
/// runtime, linked through a silent proxy.
struct Partitioned {
    server_url: String,
    cut: Arc<AtomicBool>,
    fake: Arc<FakeRuntime>,
    stop: CancellationToken,
    _run_folder: tempfile::TempDir,
}

async fn partitioned_cluster() -> Partitioned {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = listener.local_addr().unwrap().to_string();
    let stop = CancellationToken::new();
    let heartbeat = Heartbeat { interval: Duration::from_millis(100), timeout: Duration::from_millis(200) };
    let options = ank_server::grpc::ServeOptions { heartbeat: Some(heartbeat), ..Default::default() };
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run_with(initial, None, listener, options, stop.clone()));

    let cut = Arc::new(AtomicBool::new(false));
    let proxy = silent_proxy(server_addr.clone(), cut.clone()).await;
    let fake = Arc::new(FakeRuntime::new());
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(fake.clone());
    let run_folder = tempfile::tempdir().unwrap();
    let config = AgentConfig {
        run_folder: run_folder.path().to_path_buf(),
        heartbeat: Some(heartbeat),
        ..AgentConfig::new("agent_A", proxy)
    };
    tokio::spawn(ank_agent::run(config, runtimes, stop.clone()));
    Partitioned { server_url: format!("http://{server_addr}"), cut, fake, stop, _run_folder: run_folder }
}

fn manifest(names: &[&str]) -> String {
    let body: String = names
        .iter()
        .map(|n| format!("  {n}:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: x\n"))
        .collect();
    format!("apiVersion: v1\nworkloads:\n{body}")
}

#[tokio::test(start_paused = true)]
async fn itest_a_silently_cut_agent_is_disconnected_by_heartbeats_and_comes_back() {
    let p = partitioned_cluster().await;
    let (cut, fake) = (p.cut.clone(), p.fake.clone());
    let mut c = Commander::connect(&p.server_url).await;
    c.apply(&manifest(&["w"])).await;
    c.wait_for_state("w", "Running(Ok)").await;
    assert!(agent_listed(&mut c).await);

    cut.store(true, Ordering::SeqCst);
    c.wait_for_state("w", "AgentDisconnected").await;
    assert!(!agent_listed(&mut c).await, "the server dropped the silent agent");

    // The link heals: the agent's own heartbeat gave up the dead
    // connection and it reconnects; its workload was never recreated.
    cut.store(false, Ordering::SeqCst);
    c.wait_for_state("w", "Running(Ok)").await;
    assert!(agent_listed(&mut c).await);
    assert_eq!(fake.created().len(), 1, "the workload was not created again");
    p.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn itest_changes_made_during_a_partition_are_applied_when_it_heals() {
    let p = partitioned_cluster().await;
    let mut c = Commander::connect(&p.server_url).await;
    c.apply(&manifest(&["keep", "gone"])).await;
    c.wait_for_state("keep", "Running(Ok)").await;
    c.wait_for_state("gone", "Running(Ok)").await;

    p.cut.store(true, Ordering::SeqCst);
    c.wait_for_state("keep", "AgentDisconnected").await;
    c.delete(&["gone"]).await;
    // [itest of feature H7] It stays visible until the agent confirms,
    // shown as AgentDisconnected as Ankaios shows it.
    c.wait_for_state("gone", "AgentDisconnected").await;
    c.apply(&manifest(&["new"])).await;
    c.wait_for_state("new", "Pending(Initial)").await;
    // Every state the server sends from here on is recorded by `c`.
    let seen_before_heal = c.states.len();

    p.cut.store(false, Ordering::SeqCst);
    c.wait_for_state("new", "Running(Ok)").await;
    c.wait_for_state("keep", "Running(Ok)").await;
    c.wait_for_state("gone", "Removed").await;
    let deleted = || p.fake.deleted().iter().any(|i| i.workload_name == "gone");
    let removed = async || deleted().then_some(());
    ank_tests::eventually(
        "the workload deleted during the partition removed on the agent",
        Duration::from_secs(2),
        removed,
    )
    .await;
    let created: Vec<String> = p.fake.created().iter().map(|i| i.workload_name.clone()).collect();
    assert_eq!(created, ["gone", "keep", "new"], "'keep' was never created again");
    // After the heal 'gone' only goes its way out: never running again.
    let ghosts: Vec<_> = c.states[seen_before_heal..]
        .iter()
        .filter(|s| s.instance_name.workload_name == "gone")
        .filter(|s| !matches!(s.execution_state.kind, StateKind::Stopping(_) | StateKind::Removed))
        .collect();
    assert!(ghosts.is_empty(), "no state of 'gone' came back after the heal: {ghosts:?}");
    let rows = c.complete_state(&["workloadStates"]).await;
    assert!(rows["workloadStates"]["agent_A"].get("gone").is_none(), "no ghost row: {rows}");
    p.stop.cancel();
}
