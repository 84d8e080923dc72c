//! Dead-peer detection: an agent whose link is cut silently (a proxy that
//! stops forwarding but keeps both sockets open: no FIN, no RST) is marked
//! disconnected by the server's heartbeats, not after TCP's minutes. The
//! agent keeps its workload and comes back when the link does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
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

#[tokio::test]
async fn itest_a_silently_cut_agent_is_disconnected_by_heartbeats_and_comes_back() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server_addr = listener.local_addr().unwrap().to_string();
    let stop = CancellationToken::new();
    let heartbeat = Heartbeat { interval: Duration::from_millis(100), timeout: Duration::from_millis(200) };
    let options = ank_server::grpc::ServeOptions { heartbeat: Some(heartbeat), ..Default::default() };
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run_with(initial, listener, options, stop.clone()));

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

    let mut c = Commander::connect(&format!("http://{server_addr}")).await;
    c.apply("apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: agent_A\n    runtimeConfig: |\n      image: x\n")
        .await;
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
    stop.cancel();
}
