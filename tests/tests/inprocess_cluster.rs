//! In-process server + agent with the in-memory FakeRuntime: the whole
//! apply -> run -> report -> delete flow without podman, plus agent loss.

use ank_agent::{AgentConfig, RuntimeRegistry};
use ank_common::messages::ResponseContent;
use ank_tests::commander::Commander;
use ank_tests::inprocess::InProcess;
use tokio_util::sync::CancellationToken;

async fn setup() -> InProcess {
    InProcess::start().await
}

fn manifest(names_and_runtimes: &[(&str, &str)]) -> String {
    let mut m = String::from("apiVersion: v1\nworkloads:\n");
    for (name, runtime) in names_and_runtimes {
        m.push_str(&format!(
            "  {name}:\n    runtime: {runtime}\n    agent: agent_A\n    runtimeConfig: |\n      image: localhost/busybox:latest\n      commandArgs: [sleep, \"1000\"]\n"
        ));
    }
    m
}

#[tokio::test(start_paused = true)]
async fn itest_apply_runs_workloads_reports_failure_and_deletes() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let ResponseContent::UpdateStateSuccess { added_workloads, .. } =
        c.apply(&manifest(&[("web", "podman"), ("db", "podman")])).await
    else {
        panic!("apply rejected")
    };
    assert_eq!(added_workloads.len(), 2);
    c.wait_for_state("web", "Running(Ok)").await;
    c.wait_for_state("db", "Running(Ok)").await;
    assert_eq!(s.fake.created().len(), 2);

    let web = s.fake.created().into_iter().find(|n| n.workload_name == "web").expect("web created");
    s.fake.exit(&web, 1).await;
    c.wait_for_state("web", "Failed(ExecFailed)").await;

    c.delete(&["db"]).await;
    c.wait_for_state("db", "Removed").await;
    assert!(s.fake.deleted().iter().any(|n| n.workload_name == "db"));
    let state = c.complete_state(&["workloadStates"]).await;
    assert!(state["workloadStates"]["agent_A"].get("db").is_none(), "{state}");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn itest_unknown_runtime_is_pending_starting_failed_naming_it() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    c.apply(&manifest(&[("odd", "containerd")])).await;
    let state = c.wait_for_state("odd", "Pending(StartingFailed)").await;
    assert!(state.additional_info.contains("containerd"), "{state}");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn itest_lost_agent_marks_its_workloads_agent_disconnected() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    c.apply(&manifest(&[("w", "podman")])).await;
    c.wait_for_state("w", "Running(Ok)").await;
    s.agent_stop.cancel();
    c.wait_for_state("w", "AgentDisconnected").await;
    let agents = c.complete_state(&["agents"]).await;
    assert!(agents["agents"].get("agent_A").is_none(), "{agents}");
    s.server_stop.cancel();
}

const TEMPLATED: &str = "apiVersion: v1
workloads:
  web:
    runtime: podman
    agent: \"{{place.agent}}\"
    configs:
      place: placement
      opts: web_options
    runtimeConfig: |
      image: localhost/busybox:latest
      commandArgs: [sleep, \"{{opts.seconds}}\"]
configs:
  placement:
    agent: agent_A
  web_options:
    seconds: \"1000\"
";

#[tokio::test(start_paused = true)]
async fn itest_templated_workload_runs_rendered_and_a_config_change_recreates_it() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let ResponseContent::UpdateStateSuccess { added_workloads, .. } = c.apply(TEMPLATED).await else {
        panic!("apply rejected")
    };
    // The `|` block is stored trimmed (as by Ankaios), then rendered.
    let rendered = "image: localhost/busybox:latest\ncommandArgs: [sleep, \"1000\"]";
    let web = ank_common::WorkloadName::new("web").unwrap();
    let agent = ank_common::AgentName::new("agent_A").unwrap();
    let first = ank_common::WorkloadInstanceName::new(&web, &agent, rendered);
    assert_eq!(added_workloads, vec![first.to_string()], "the instance id hashes the rendered runtimeConfig");
    // sha256 of the rendered, trimmed config, computed with sha256sum.
    assert_eq!(first.id, "ee128dfdb203b8541d667daddea530577857cc23daebb8b4d60e9652a27939c8");
    c.wait_for_state("web", "Running(Ok)").await;
    assert_eq!(s.fake.created(), vec![first.clone()]);
    // The state keeps the template.
    let state = c.complete_state(&["desiredState.workloads.web.agent"]).await;
    assert_eq!(state["desiredState"]["workloads"]["web"]["agent"], "{{place.agent}}");

    // Only the config item changes: the workload is re-created.
    let ResponseContent::UpdateStateSuccess { added_workloads, deleted_workloads, .. } =
        c.apply(&TEMPLATED.replace("seconds: \"1000\"", "seconds: \"2000\"")).await
    else {
        panic!("config update rejected")
    };
    let second = ank_common::WorkloadInstanceName::new(&web, &agent, &rendered.replace("1000", "2000"));
    assert_eq!((added_workloads, deleted_workloads), (vec![second.to_string()], vec![first.to_string()]));
    let replaced = async || (s.fake.created().contains(&second) && s.fake.deleted().contains(&first)).then_some(());
    ank_tests::eventually("the old instance replaced by the new", std::time::Duration::from_secs(2), replaced).await;

    // A template naming a key the item lacks is rejected and changes nothing.
    let ResponseContent::Error(e) = c.apply(&TEMPLATED.replace("{{opts.seconds}}", "{{opts.minutes}}")).await else {
        panic!("a missing key must be rejected")
    };
    assert!(e.contains("opts.minutes"), "{e}");
    let state = c.complete_state(&["desiredState.workloads.web.runtimeConfig"]).await;
    assert!(state.to_string().contains("opts.seconds"), "{state}");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn itest_tags_of_a_connected_agent_are_writable() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let connected = async || c.complete_state(&["agents"]).await["agents"].get("agent_A").map(|_| ());
    ank_tests::eventually("agent_A connected", std::time::Duration::from_secs(2), connected).await;
    let new_state =
        serde_json::json!({"agents": {"agent_A": {"tags": {"zone": "north"}}, "ghost": {"tags": {"a": "b"}}}});
    let masks = vec!["agents.agent_A.tags".to_owned(), "agents.ghost".to_owned()];
    let answer = c
        .request(ank_common::messages::RequestContent::UpdateState {
            new_state: ank_tests::typed_state(new_state),
            update_mask: masks,
        })
        .await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    let agents = c.complete_state(&["agents"]).await;
    assert_eq!(agents["agents"]["agent_A"]["tags"], serde_json::json!({"zone": "north"}), "{agents}");
    assert!(agents["agents"].get("ghost").is_none(), "{agents}");
    s.agent_stop.cancel();
    s.server_stop.cancel();
}

/// The states `c` received for workload `name` at `generation`.
fn reports_at(c: &Commander, name: &str, generation: u64) -> Vec<ank_common::WorkloadState> {
    c.states
        .iter()
        .filter(|s| s.instance_name.workload_name == name && s.status.observed_generation == generation)
        .cloned()
        .collect()
}

// [itest of feature H1]
#[tokio::test(start_paused = true)]
async fn itest_the_agent_reports_the_generation_of_the_spec_it_runs() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    c.apply(&manifest(&[("web", "podman")])).await;
    c.wait_for_state("web", "Running(Ok)").await;
    assert!(!reports_at(&c, "web", 1).is_empty(), "reports carry observedGeneration 1");
    c.apply(&manifest(&[("web", "podman")]).replace("1000", "2000")).await;
    loop {
        let running = c.wait_for_state("web", "Running(Ok)").await;
        if reports_at(&c, "web", 2).iter().any(|r| r.execution_state == running) {
            break;
        }
        c.next_update().await;
    }
    let tree = c.complete_state(&["workloadStates"]).await;
    let entries = tree["workloadStates"]["agent_A"]["web"].as_object().expect("web reported").clone();
    assert_eq!(entries.len(), 1, "{tree}");
    let entry = entries.values().next().unwrap();
    assert_eq!((entry["generation"].as_u64(), entry["observedGeneration"].as_u64()), (Some(2), Some(2)), "{tree}");
    s.server_stop.cancel();
    s.agent_stop.cancel();
}

// [itest of feature H4]
#[tokio::test(start_paused = true)]
async fn itest_an_unreachable_runtime_makes_health_false_and_keeps_available() {
    use ank_common::conditions::{ConditionStatus, ConditionType, RuntimeHealth};
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    c.apply(&manifest(&[("web", "podman"), ("db", "podman")])).await;
    c.wait_for_state("web", "Running(Ok)").await;
    c.wait_for_state("db", "Running(Ok)").await;
    s.fake.set_health(RuntimeHealth::Unreachable("podman: command not found".into())).await;
    let unhealthy = |c: &Commander, name: &str| {
        c.states.iter().rev().find(|s| s.instance_name.workload_name == name).is_some_and(|s| {
            s.status
                .condition(ConditionType::Health)
                .is_some_and(|h| h.status == ConditionStatus::False && h.reason == "RuntimeUnreachable")
        })
    };
    while !(unhealthy(&c, "web") && unhealthy(&c, "db")) {
        c.next_update().await;
    }
    let tree = c.complete_state(&["workloadStates"]).await;
    for name in ["web", "db"] {
        let entry = tree["workloadStates"]["agent_A"][name].as_object().unwrap().values().next().unwrap().clone();
        let find = |kind: &str| entry["conditions"].as_array().unwrap().iter().find(|c| c["type"] == kind).cloned();
        assert_eq!(find("Health").unwrap()["status"], "False", "{entry}");
        assert_eq!(find("Available").unwrap()["status"], "True", "Available keeps its value: {entry}");
    }
    s.fake.set_health(RuntimeHealth::Reachable).await;
    while unhealthy(&c, "web") {
        c.next_update().await;
    }
    s.server_stop.cancel();
    s.agent_stop.cancel();
}

/// The phase of job `id` as the server shows it.
async fn job_phase(c: &mut Commander, id: u64) -> String {
    let tree = c.complete_state(&[&format!("jobs.{id}")]).await;
    tree["jobs"][id.to_string()]["phase"].as_str().unwrap_or_default().to_owned()
}

// [itest of feature L1]
#[tokio::test(start_paused = true)]
async fn itest_a_job_succeeds_once_all_run_and_its_specs_sent_again_restart_nothing() {
    let s = setup().await;
    let mut c = Commander::connect(&s.url).await;
    let answer = c.apply(&manifest(&[("a", "podman"), ("b", "podman"), ("c", "podman")])).await;
    let ResponseContent::UpdateStateSuccess { job_id, .. } = answer else { panic!("apply rejected: {answer:?}") };
    assert_eq!(job_id, 1);
    for name in ["a", "b", "c"] {
        c.wait_for_state(name, "Running(Ok)").await;
    }
    // The server ends the job in the same turn as it takes the last report.
    assert_eq!(job_phase(&mut c, 1).await, "Succeeded");
    assert_eq!(s.fake.created().len(), 3);

    // The agent goes and comes back (same run folder, same runtime): the
    // server hands it the job's specs again in its ServerHello.
    s.agent_stop.cancel();
    c.wait_for_state("a", "AgentDisconnected").await;
    let mut runtimes = RuntimeRegistry::new();
    runtimes.register(s.fake.clone());
    let config = AgentConfig { run_folder: s.run_folder().to_path_buf(), ..AgentConfig::new("agent_A", s.url.clone()) };
    let again = CancellationToken::new();
    tokio::spawn(ank_agent::run(config, runtimes, again.clone()));
    for name in ["a", "b", "c"] {
        c.wait_for_state(name, "Running(Ok)").await;
    }
    // A rerun with nothing failed is a job that touches nothing.
    let ResponseContent::UpdateStateSuccess { job_id, .. } =
        c.request(ank_common::messages::RequestContent::JobRerun { failed_only: false }).await
    else {
        panic!("rerun rejected")
    };
    assert_eq!(job_id, 2);
    assert_eq!(job_phase(&mut c, 2).await, "Succeeded");
    assert_eq!(s.fake.created().len(), 3, "no container was created again");
    assert!(s.fake.deleted().is_empty(), "no container was removed");
    again.cancel();
    s.server_stop.cancel();
}
