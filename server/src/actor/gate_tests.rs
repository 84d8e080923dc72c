//! Health-gated updates through the server actor with a fake agent stream
//! under paused time: the gate passing, failing with a revert, the job of
//! the update, dependents held while the gate is open, and a restart with
//! the state file in the middle of a gate.

use std::time::Duration;

use ank_common::execution_state::Pending;
use ank_common::messages::{FromServer, ToServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::tests::{Harness, settle};
use super::*;

const AGENT: ConnId = 1;
const CLI: ConnId = 2;

/// `w` with `image`, gated when `gate` is `(deadline, min, autoRevert)`.
fn w(image: &str, gate: Option<(&str, &str, bool)>) -> Value {
    let mut wl = json!({"runtime": "podman", "agent": "A", "runtimeConfig": format!("image: {image}")});
    if let Some((deadline, min, revert)) = gate {
        wl["update"] = json!({"healthyDeadline": deadline, "minHealthyTime": min, "autoRevert": revert});
    }
    wl
}

fn state(workloads: Value) -> Value {
    json!({"desiredState": {"apiVersion": "v1", "workloads": workloads}})
}

fn running() -> ExecutionState {
    ExecutionState::new(StateKind::Running)
}

impl Harness {
    /// The specs handed to the agent since the last call (no resyncs).
    fn added(&mut self) -> Vec<WorkloadSpec> {
        let mut added = Vec::new();
        while let Ok(msg) = self.agent_rx.try_recv() {
            if let FromServer::UpdateWorkload { added: a, resync: false, .. } = msg {
                added.extend(a);
            }
        }
        added
    }

    /// The one spec of `name` handed out since the last call.
    fn added_one(&mut self, name: &str) -> WorkloadSpec {
        let added = self.added();
        let mut of: Vec<WorkloadSpec> = added.into_iter().filter(|s| s.name() == name).collect();
        assert_eq!(of.len(), 1, "one spec of {name} handed out: {of:?}");
        of.remove(0)
    }

    async fn events(&mut self, name: &str) -> Vec<(String, String)> {
        let tree = self.tree().await;
        let Some(by_id) = tree["workloadStates"]["A"][name].as_object() else { return Vec::new() };
        let Some(entry) = by_id.values().next() else { return Vec::new() };
        entry["events"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["reason"].as_str().unwrap().to_owned()))
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn job_of(&mut self, id: u64) -> Value {
        self.tree().await["jobs"][id.to_string()].clone()
    }
}

/// Lets `secs` seconds of ticks pass.
async fn pass(secs: u64) {
    for _ in 0..secs {
        tokio::time::sleep(Duration::from_secs(1)).await;
        settle().await;
    }
}

/// v1 of `w` (no gate) running and seen Ready by a tick.
async fn v1_ready(h: &mut Harness) -> WorkloadSpec {
    h.apply(state(json!({"w": w("v1", None)}))).await;
    settle().await;
    let v1 = h.added_one("w");
    h.report(&v1, running(), 1).await;
    pass(2).await;
    v1
}

// [test of feature: issue 39 gate fails at the deadline, the last healthy spec is put back, the job fails]
#[tokio::test(start_paused = true)]
async fn gate_failure_puts_back_the_last_healthy_spec_and_fails_the_job() {
    let mut h = Harness::start().await;
    let v1 = v1_ready(&mut h).await;
    h.apply(state(json!({"w": w("nosuch", Some(("20s", "5s", true)))}))).await;
    settle().await;
    let v2 = h.added_one("w");
    assert_eq!(v2.generation, 2);
    h.report(&v2, ExecutionState::new(StateKind::Pending(Pending::StartingFailed)), 2).await;
    pass(2).await;
    let job = h.job_of(2).await;
    assert_eq!(job["phase"], "Completing", "the gate decides, not the failed start: {job}");
    let reason = job["workloads"]["w"]["reason"].as_str().unwrap();
    assert!(reason.starts_with("update gate: not Ready (NotAvailable"), "{reason}");
    assert!(h.added().is_empty(), "nothing is put back before the deadline");
    pass(19).await;
    // v1's spec is desired again, with v1's instance name, at generation 3.
    let back = h.added_one("w");
    assert_eq!(back.instance_name, v1.instance_name);
    assert_eq!(back.generation, 3);
    let tree = h.tree().await;
    assert_eq!(tree["desiredState"]["workloads"]["w"]["runtimeConfig"], "image: v1");
    assert!(tree["desiredState"]["workloads"]["w"].get("update").is_none(), "v1 as it was written");
    let job = h.job_of(2).await;
    assert_eq!(job["phase"], "Failed", "{job}");
    let why = "generation 2 not Ready within 20s (NotAvailable: Pending(StartingFailed)); put back generation 1";
    assert_eq!(job["reason"], format!("w: update gate: {why}"));
    assert!(!h.job_of(3).await.is_null(), "the revert is a job of its own");
    h.report(&back, running(), 3).await;
    assert!(h.events("w").await.contains(&("Reverted".to_owned(), why.to_owned())));
    let entry = h.tree().await["workloadStates"]["A"]["w"][&back.instance_name.id].clone();
    assert_eq!(entry["reverted"]["fromGeneration"], 2, "{entry}");
    assert_eq!(entry["reverted"]["toGeneration"], 1);
    assert_eq!(entry["reverted"]["reason"], why);
    // The next change of the spec drops the mark.
    h.apply(state(json!({"w": w("v4", None)}))).await;
    settle().await;
    let v4 = h.added_one("w");
    assert!(h.tree().await["workloadStates"]["A"]["w"][&v4.instance_name.id].get("reverted").is_none());
    h.stop.cancel();
}

// [test of feature: issue 39 gate passes after minHealthyTime, the job succeeds then]
#[tokio::test(start_paused = true)]
async fn gate_passes_when_the_new_generation_stays_ready() {
    let mut h = Harness::start().await;
    v1_ready(&mut h).await;
    h.apply(state(json!({"w": w("v2", Some(("20s", "5s", true)))}))).await;
    settle().await;
    let v2 = h.added_one("w");
    h.report(&v2, running(), 2).await;
    pass(2).await;
    let job = h.job_of(2).await;
    assert_eq!(job["phase"], "Completing", "Running is not healthy yet: {job}");
    pass(5).await;
    let job = h.job_of(2).await;
    assert_eq!(job["phase"], "Succeeded", "{job}");
    assert!(h.events("w").await.contains(&("UpdateHealthy".to_owned(), "generation 2 Ready for 5s".to_owned())));
    pass(30).await;
    assert!(h.added().is_empty(), "nothing is put back");
    // Without a gate nothing changes: a plain update's job succeeds on Running.
    h.apply(state(json!({"w": w("v3", None)}))).await;
    settle().await;
    let v3 = h.added_one("w");
    h.report(&v3, running(), 3).await;
    assert_eq!(h.job_of(3).await["phase"], "Succeeded");
    h.stop.cancel();
}

// [test of feature: issue 39 without autoRevert only the event and the job failure]
#[tokio::test(start_paused = true)]
async fn gate_failure_without_auto_revert_keeps_the_new_spec() {
    let mut h = Harness::start().await;
    v1_ready(&mut h).await;
    h.apply(state(json!({"w": w("v2", Some(("20s", "5s", false)))}))).await;
    settle().await;
    let v2 = h.added_one("w");
    h.report(&v2, ExecutionState::new(StateKind::Failed(ank_common::execution_state::Failed::ExecFailed)), 2).await;
    pass(21).await;
    assert!(h.added().is_empty(), "nothing is put back");
    assert_eq!(h.tree().await["desiredState"]["workloads"]["w"]["runtimeConfig"], "image: v2");
    let job = h.job_of(2).await;
    assert_eq!(job["phase"], "Failed");
    assert!(job["reason"].as_str().unwrap().ends_with("autoRevert is off, nothing put back"), "{job}");
    let entry = h.tree().await["workloadStates"]["A"]["w"][&v2.instance_name.id].clone();
    assert_eq!(entry["reverted"]["fromGeneration"], 2, "marked though nothing was put back: {entry}");
    assert!(entry["reverted"].get("toGeneration").is_none());
    h.stop.cancel();
}

// [test of feature: issue 39 dependents of a gated workload wait for the gate]
#[tokio::test(start_paused = true)]
async fn a_dependent_is_held_while_the_gate_is_open() {
    let mut h = Harness::start().await;
    v1_ready(&mut h).await;
    let mut web = w("web", None);
    web["dependencies"] = json!({"w": "ADD_COND_RUNNING"});
    h.apply(state(json!({"w": w("v2", Some(("20s", "5s", true))), "web": web}))).await;
    settle().await;
    let v2 = h.added_one("w");
    h.report(&v2, running(), 2).await;
    pass(2).await;
    assert!(h.added().is_empty(), "web is held");
    let job = h.job_of(2).await;
    assert_eq!(job["workloads"]["web"]["reason"], "waits for w (update gate open)", "{job}");
    let tree = h.tree().await;
    let web_state = tree["workloadStates"]["A"]["web"].as_object().unwrap().values().next().unwrap().clone();
    assert_eq!(web_state["subState"], "WaitingToStart");
    pass(5).await;
    let web = h.added_one("web");
    assert_eq!(web.name(), "web", "handed out once the gate passed");
    h.stop.cancel();
}

/// A server with a state file and a connected agent `A` that reports `w`
/// running at the generation the server hands out in its ServerHello.
async fn start_with_file(dir: &std::path::Path) -> Harness {
    let file = crate::state_file::StateFile::new(dir.join("state.json"));
    let initial = file.load().unwrap().unwrap_or_default();
    let (handle, actor) = AnkaiosServer::new_with(
        initial,
        Some(file),
        ResyncSettings::default(),
        JobSettings::default(),
        LifecycleOptions::default(),
    );
    let stop = CancellationToken::new();
    tokio::spawn(actor.run(stop.clone()));
    let (agent_tx, agent_rx) = mpsc::channel(64);
    let (cli_tx, cli_rx) = mpsc::channel(64);
    handle.opened(AGENT, ConnKind::Agent, agent_tx).await;
    handle.opened(CLI, ConnKind::Commander, cli_tx).await;
    let hello = ToServer::AgentHello {
        agent_name: "A".into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: Default::default(),
    };
    handle.message(AGENT, hello).await;
    settle().await;
    Harness { handle, agent_rx, cli_rx, stop }
}

fn hello_specs(h: &mut Harness) -> Vec<WorkloadSpec> {
    while let Ok(msg) = h.agent_rx.try_recv() {
        if let FromServer::ServerHello(specs) = msg {
            return specs;
        }
    }
    panic!("no ServerHello")
}

// [test of feature: issue 39 a restart with the state file restarts the open gate with a fresh deadline]
#[tokio::test(start_paused = true)]
async fn a_restart_in_the_middle_of_a_gate_opens_it_again_and_reverts() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = start_with_file(dir.path()).await;
    assert!(hello_specs(&mut h).is_empty());
    let v1 = v1_ready(&mut h).await;
    h.apply(state(json!({"w": w("nosuch", Some(("20s", "5s", true)))}))).await;
    settle().await;
    let v2 = h.added_one("w");
    h.report(&v2, ExecutionState::new(StateKind::Pending(Pending::StartingFailed)), 2).await;
    pass(10).await;
    assert!(dir.path().join("state.gates.json").exists(), "the open gate is saved");
    h.stop.cancel();
    settle().await;

    // The server comes back: generations count from 1, the gate restarts.
    let mut h = start_with_file(dir.path()).await;
    let specs = hello_specs(&mut h);
    assert_eq!(specs.len(), 1);
    assert_eq!(specs[0].instance_name, v2.instance_name, "the new spec is still desired");
    h.report(&specs[0], ExecutionState::new(StateKind::Pending(Pending::StartingFailed)), 1).await;
    pass(15).await;
    assert!(h.added().is_empty(), "a fresh deadline: 20s from the restart");
    pass(6).await;
    let back = h.added_one("w");
    assert_eq!(back.instance_name, v1.instance_name, "v1 is put back");
    assert!(!dir.path().join("state.gates.json").exists(), "no open gate left");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("state.json")).unwrap()).unwrap();
    assert_eq!(saved["workloads"]["w"]["runtimeConfig"], "image: v1", "the revert is in the state file");
    h.stop.cancel();
}

// [test of feature: issue 39 the reason of a gate says why the new generation is not Ready]
#[tokio::test(start_paused = true)]
async fn gate_reason_names_the_state_of_a_generation_that_never_replaced_the_old_one() {
    let mut h = Harness::start().await;
    v1_ready(&mut h).await;
    h.apply(state(json!({"w": w("nosuch", Some(("20s", "5s", false)))}))).await;
    settle().await;
    let v2 = h.added_one("w");
    let retrying = ExecutionState::with_info(
        StateKind::Pending(Pending::Starting),
        "Retry 2: Error: initializing source docker://nosuch:latest: manifest unknown",
    );
    h.report(&v2, retrying, 2).await;
    pass(21).await;
    let job = h.job_of(2).await;
    assert_eq!(
        job["reason"],
        "w: update gate: generation 2 not Ready within 20s (GenerationPending: Pending(Starting): 'Retry 2: Error: \
         initializing source docker://nosuch:latest: manifest unknown'); autoRevert is off, nothing put back",
        "{job}"
    );
    h.stop.cancel();
}
