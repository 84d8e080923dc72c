//! In-process server and two agents with FakeRuntimes: a workload with an
//! agentSelector runs on the agent whose labels, capabilities and metrics
//! match; `ank get agents -o yaml` shows what the agents advertise; a bad
//! selector expression is refused by `ank apply` and by the server.

use std::sync::Arc;
use std::time::Duration;

use ank_agent::runtime_connectors::fake::FakeRuntime;
use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_common::messages::{RequestContent, ResponseContent};
use ank_tests::commander::Commander;
use clap::Parser;
use tokio_util::sync::CancellationToken;

struct Agent {
    fake: Arc<FakeRuntime>,
    stop: CancellationToken,
    _run_folder: tempfile::TempDir,
}

fn start_agent(url: &str, name: &str, config: impl FnOnce(&mut AgentConfig)) -> Agent {
    let fake = Arc::new(FakeRuntime::new());
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(fake.clone());
    let run_folder = tempfile::tempdir().expect("run folder");
    let mut c = AgentConfig { run_folder: run_folder.path().to_path_buf(), ..AgentConfig::new(name, url) };
    config(&mut c);
    let stop = CancellationToken::new();
    tokio::spawn(ank_agent::run(c, runtimes, stop.clone()));
    Agent { fake, stop, _run_folder: run_folder }
}

/// Runs `ank` in-process; its output or its error.
async fn ank(args: &[&str]) -> Result<String, String> {
    let cli = ank_cli::cli::Cli::try_parse_from(std::iter::once("ank").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match ank_cli::run(cli, &mut out).await {
        Ok(()) => Ok(String::from_utf8_lossy(&out).into_owned()),
        Err(e) => Err(format!("{e:#}")),
    }
}

const SELECTED: &str = "apiVersion: v1
workloads:
  nav:
    runtime: podman
    agentSelector:
      labels: [\"arch = arm64\", \"ecu in (hpc1, hpc2)\"]
      capabilities: [podman, gpu]
      metrics: [\"free_memory_mb >= 1\", \"speed > 1\"]
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [sleep, \"1000\"]
";

// [itest of feature S1]
#[tokio::test(start_paused = true)]
async fn itest_a_selector_workload_runs_on_the_matching_agent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let server_stop = CancellationToken::new();
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(initial, listener, server_stop.clone()));
    let x86 = start_agent(&url, "agent_x86", |c| {
        c.tags.insert("arch".into(), "x86_64".into());
        c.tags.insert("ecu".into(), "hpc1".into());
        c.capabilities = vec!["gpu".into()];
    });
    let arm = start_agent(&url, "agent_arm", |c| {
        c.tags.insert("arch".into(), "arm64".into());
        c.tags.insert("ecu".into(), "hpc2".into());
        c.capabilities = vec!["gpu".into()];
        c.metrics.insert("speed".into(), 2.0);
    });

    let mut c = Commander::connect(&url).await;
    // Both agents connected and advertised their metrics.
    let both = async || {
        let agents = c.complete_state(&["agents"]).await;
        let advertised = |a: &str| agents["agents"][a]["metrics"].get("free_memory_mb").is_some();
        (advertised("agent_x86") && advertised("agent_arm")).then_some(())
    };
    ank_tests::eventually("both agents' metrics", Duration::from_secs(5), both).await;
    let yaml = ank(&["-k", "-s", &url, "get", "agents", "-o", "yaml"]).await.expect("ank get agents");
    assert!(yaml.contains("name: agent_arm") && yaml.contains("arch: arm64"), "{yaml}");
    assert!(yaml.contains("- gpu") && yaml.contains("- podman"), "{yaml}");
    assert!(yaml.contains("speed: 2") && yaml.contains("free_memory_mb:") && yaml.contains("cpu_usage:"), "{yaml}");

    let answer = c.apply(SELECTED).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    c.wait_for_state("nav", "Running(Ok)").await;
    assert_eq!(arm.fake.created().iter().map(|n| n.workload_name.as_str()).collect::<Vec<_>>(), ["nav"]);
    assert!(x86.fake.created().is_empty(), "agent_x86 has no speed metric and the wrong arch");
    let state = c.complete_state(&["workloadStates", "desiredState.workloads.nav"]).await;
    let events = state["workloadStates"]["agent_arm"]["nav"].as_object().and_then(|m| m.values().next()).cloned();
    let events = events.map(|e| e["events"].to_string()).unwrap_or_default();
    assert!(events.contains("Scheduled") && events.contains("agent_arm score"), "{events}");
    assert!(state["desiredState"]["workloads"]["nav"].get("agent").is_none_or(|a| a == ""), "{state}");

    x86.stop.cancel();
    arm.stop.cancel();
    server_stop.cancel();
}

// [itest of feature S1: a bad expression fails at apply, in `ank` and in the server]
#[tokio::test(start_paused = true)]
async fn itest_a_bad_selector_expression_is_refused_naming_field_and_column() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let server_stop = CancellationToken::new();
    let initial = ank_common::State { api_version: "v1".into(), ..Default::default() };
    tokio::spawn(ank_server::run(initial, listener, server_stop.clone()));

    let dir = tempfile::tempdir().expect("dir");
    let manifest = dir.path().join("bad.yaml");
    std::fs::write(&manifest, SELECTED.replace("arch = arm64", "arch === x")).expect("write");
    let e = ank(&["-k", "-s", &url, "apply", manifest.to_str().unwrap()]).await.expect_err("refused");
    assert!(e.contains("agentSelector.labels[0]: unexpected '='"), "{e}");

    // A client that does not check: the server refuses it the same way.
    let mut c = Commander::connect(&url).await;
    let bad = serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"nav": {
        "runtime": "podman", "runtimeConfig": "x", "agentSelector": {"labels": ["arch === x"]}
    }}}});
    let answer = c
        .request(RequestContent::UpdateState {
            new_state: ank_tests::typed_state(bad),
            update_mask: vec!["desiredState".into()],
        })
        .await;
    let ResponseContent::Error(e) = answer else { panic!("accepted: {answer:?}") };
    assert!(e.contains("agentSelector.labels[0]: unexpected '='"), "{e}");
    let state = c.complete_state(&["desiredState"]).await;
    assert!(
        state["desiredState"].get("workloads").is_none_or(|w| w.as_object().is_some_and(|m| m.is_empty())),
        "{state}"
    );
    server_stop.cancel();
}
