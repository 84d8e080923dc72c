//! In-process server (with a state file) and agent with the FakeRuntime
//! under a paused clock: health-gated updates (issue 39) from the apply
//! to the runtime: a v2 whose create fails is reverted to v1 after the
//! deadline (v1 created again, the Reverted event, the job failed,
//! `ank describe` shows it); a v2 that becomes Ready passes with
//! UpdateHealthy while its dependent waits; a server restart in the middle
//! of a gate ends in the revert too.

use std::sync::Arc;
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RetryPolicy, RuntimeRegistry};
use ank_server::state_file::StateFile;
use ank_tests::commander::Commander;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// The server (restartable on its port with its state file) and one agent.
struct Cluster {
    addr: std::net::SocketAddr,
    url: String,
    fake: Arc<FakeRuntime>,
    state: StateFile,
    server_stop: CancellationToken,
    agent_stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Cluster {
    async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let url = format!("http://{addr}");
        let state = StateFile::new(dir.path().join("state.json"));
        let server_stop = serve(listener, &state);
        let fake = Arc::new(FakeRuntime::new());
        let mut runtimes = RuntimeRegistry::new();
        runtimes.register(fake.clone());
        let config = AgentConfig {
            run_folder: dir.path().join("run"),
            // A failed create gives up soon: Pending(StartingFailed).
            retry_policy: RetryPolicy::Limited { max_retries: 1, interval: Duration::from_secs(1) },
            ..AgentConfig::new("agent_A", url.clone())
        };
        std::fs::create_dir_all(&config.run_folder).expect("run folder");
        let agent_stop = CancellationToken::new();
        tokio::spawn(ank_agent::run(config, runtimes, agent_stop.clone()));
        Self { addr, url, fake, state, server_stop, agent_stop, _dir: dir }
    }

    /// Stops the server and starts a new one on the same port from the state file.
    async fn restart_server(&mut self) {
        self.server_stop.cancel();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let listener = TcpListener::bind(self.addr).await.expect("bind the same port again");
        self.server_stop = serve(listener, &self.state);
    }

    fn stop(&self) {
        self.agent_stop.cancel();
        self.server_stop.cancel();
    }
}

fn serve(listener: TcpListener, state: &StateFile) -> CancellationToken {
    let stop = CancellationToken::new();
    let initial = ank_server::initial_state(Some(state), None).expect("state file").0;
    let serving = ank_server::run_with(initial, Some(state.clone()), listener, Default::default(), stop.clone());
    tokio::spawn(serving);
    stop
}

fn manifest(image: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: agent_A\n    restartPolicy: NEVER\n    runtimeConfig: |\n      image: {image}\n{extra}"
    )
}

const GATE: &str = "    update:\n      healthyDeadline: 20s\n      minHealthyTime: 5s\n      autoRevert: true\n";

/// Polls the complete state (paused clock: instant) until `pred` holds,
/// for at most `secs` seconds.
async fn until(c: &mut Commander, secs: u64, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..secs * 4 {
        let tree = c.complete_state(&[]).await;
        if pred(&tree) {
            return tree;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("{what} not within {secs}s: {}", c.complete_state(&[]).await);
}

/// The instances of `w` as (id, state, generation).
fn instances(tree: &Value, name: &str) -> Vec<(String, String, u64)> {
    let Some(by_id) = tree["workloadStates"]["agent_A"][name].as_object() else { return Vec::new() };
    by_id
        .iter()
        .map(|(id, e)| {
            let state = format!("{}({})", e["state"].as_str().unwrap_or(""), e["subState"].as_str().unwrap_or(""));
            (id.clone(), state, e["generation"].as_u64().unwrap_or(0))
        })
        .collect()
}

fn running_at(tree: &Value, name: &str, generation: u64) -> bool {
    instances(tree, name).iter().any(|(_, s, g)| s == "Running(Ok)" && *g == generation)
}

fn ready(tree: &Value, name: &str) -> bool {
    let Some(by_id) = tree["workloadStates"]["agent_A"][name].as_object() else { return false };
    by_id.values().any(|e| {
        e["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn describe(tree: &Value, name: &str) -> String {
    let view = ank_cli::view::StateView::from_tree(tree).expect("a state view");
    let spec: ank_common::Workload =
        serde_json::from_value(tree["desiredState"]["workloads"][name].clone()).expect("the workload");
    ank_cli::cmd::describe::describe(name, Some(&spec), &view)
}

/// v1 of `w` running and Ready, seen so by the server's tick.
async fn v1_ready(c: &mut Commander) -> String {
    c.apply(&manifest("localhost/busybox:latest", "")).await;
    let tree = until(c, 10, "v1 Ready", |t| ready(t, "w")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    instances(&tree, "w")[0].0.clone()
}

// [itest of feature: issue 39 a gated update whose create fails is reverted after its deadline]
#[tokio::test(start_paused = true)]
async fn itest_gated_update_whose_create_fails_is_reverted_to_v1() {
    let s = Cluster::start().await;
    let mut c = Commander::connect(&s.url).await;
    let v1_id = v1_ready(&mut c).await;
    s.fake.fail_creates_of("w", "image not known");
    c.apply(&manifest("localhost/busybox:no-such-tag", GATE)).await;
    until(&mut c, 10, "v2 gave up", |t| instances(t, "w").iter().any(|(_, st, _)| st == "Pending(StartingFailed)"))
        .await;
    s.fake.clear_failures();
    let tree = c.complete_state(&[]).await;
    assert_eq!(tree["jobs"]["2"]["phase"], "Completing", "the gate decides: {}", tree["jobs"]);
    assert!(tree["desiredState"]["workloads"]["w"]["runtimeConfig"].as_str().unwrap().contains("no-such-tag"));

    let tree = until(&mut c, 25, "v1 back and running", |t| running_at(t, "w", 3)).await;
    assert_eq!(instances(&tree, "w")[0].0, v1_id, "v1's instance name");
    assert!(tree["desiredState"]["workloads"]["w"]["runtimeConfig"].as_str().unwrap().contains("busybox:latest"));
    let job = &tree["jobs"]["2"];
    assert_eq!(job["phase"], "Failed", "{job}");
    let why = "generation 2 not Ready within 20s (NotAvailable: Pending(StartingFailed): ";
    assert!(job["reason"].as_str().unwrap().starts_with(&format!("w: update gate: {why}")), "{job}");
    assert!(job["reason"].as_str().unwrap().ends_with("; put back generation 1"), "{job}");
    let entry = tree["workloadStates"]["agent_A"]["w"][&v1_id].clone();
    assert!(entry["events"].as_array().unwrap().iter().any(|e| e["kind"] == "Reverted"), "{entry}");
    assert_eq!(
        (entry["reverted"]["fromGeneration"].as_u64(), entry["reverted"]["toGeneration"].as_u64()),
        (Some(2), Some(1))
    );
    let text = describe(&tree, "w");
    assert!(text.contains("Reverted:") && text.contains("put back generation 1"), "{text}");
    let saved = std::fs::read_to_string(s.state.path()).unwrap();
    assert!(saved.contains("busybox:latest") && !saved.contains("no-such-tag"), "the revert is saved: {saved}");
    s.stop();
}

// [itest of feature: issue 39 a gated update that becomes Ready passes; its dependent waits for the gate]
#[tokio::test(start_paused = true)]
async fn itest_gated_update_that_becomes_ready_passes_and_releases_its_dependent() {
    let s = Cluster::start().await;
    let mut c = Commander::connect(&s.url).await;
    v1_ready(&mut c).await;
    let web = "  web:\n    runtime: podman\n    agent: agent_A\n    dependencies:\n      w: ADD_COND_RUNNING\n    runtimeConfig: |\n      image: localhost/busybox:latest\n";
    c.apply(&format!("{}{web}", manifest("localhost/busybox:v2", GATE))).await;
    let tree = until(&mut c, 10, "v2 running", |t| running_at(t, "w", 2)).await;
    assert!(!s.fake.created().iter().any(|n| n.workload_name == "web"), "web waits for the gate");
    assert_eq!(tree["jobs"]["2"]["workloads"]["web"]["reason"], "waits for w (update gate open)", "{}", tree["jobs"]);
    let tree = until(&mut c, 10, "web running", |t| running_at(t, "web", 1)).await;
    assert_eq!(tree["jobs"]["2"]["phase"], "Succeeded", "{}", tree["jobs"]);
    assert!(tree["desiredState"]["workloads"]["w"]["runtimeConfig"].as_str().unwrap().contains("v2"), "kept");
    let text = describe(&tree, "w");
    assert!(text.contains("Update healthy:   generation 2 Ready for 5s"), "{text}");
    s.stop();
}

// [itest of feature: issue 39 a server restart with the state file in the middle of a gate]
#[tokio::test(start_paused = true)]
async fn itest_server_restart_in_the_middle_of_a_gate_restarts_it_and_reverts() {
    let mut s = Cluster::start().await;
    let mut c = Commander::connect(&s.url).await;
    let v1_id = v1_ready(&mut c).await;
    s.fake.fail_creates_of("w", "image not known");
    c.apply(&manifest("localhost/busybox:no-such-tag", GATE)).await;
    until(&mut c, 10, "v2 gave up", |t| instances(t, "w").iter().any(|(_, st, _)| st == "Pending(StartingFailed)"))
        .await;
    // The creates keep failing over the restart: the agent tries v2 again
    // when the new server hands it out.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let gates = s.state.path().with_extension("gates.json");
    assert!(gates.exists(), "the open gate is saved");
    drop(c);
    s.restart_server().await;
    let mut c = Commander::connect(&s.url).await;
    // The new server numbers from 1 and gives the gate a fresh 20 s.
    tokio::time::sleep(Duration::from_secs(17)).await;
    let tree = c.complete_state(&[]).await;
    assert!(
        tree["desiredState"]["workloads"]["w"]["runtimeConfig"].as_str().unwrap().contains("no-such-tag"),
        "not reverted before the fresh deadline: {}",
        tree["workloadStates"]
    );
    s.fake.clear_failures();
    let tree = until(&mut c, 10, "v1 back and running", |t| running_at(t, "w", 2)).await;
    assert_eq!(instances(&tree, "w")[0].0, v1_id);
    assert!(!gates.exists(), "no gate open any more");
    // The job that brought v2 died with the old server: the restarted
    // server's first job (its startup state) carries the failure.
    let job = &tree["jobs"]["1"];
    assert_eq!(job["phase"], "Failed", "{job}");
    assert!(job["reason"].as_str().unwrap().starts_with("w: update gate: generation 1 not Ready within 20s"), "{job}");
    assert_eq!(
        tree["workloadStates"]["agent_A"]["w"][&v1_id]["reverted"]["toGeneration"], 1,
        "the spec put back keeps its number from before the restart"
    );
    assert!(std::fs::read_to_string(s.state.path()).unwrap().contains("busybox:latest"));
    s.stop();
}
