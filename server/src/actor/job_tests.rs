//! Apply jobs through the server actor with a fake agent stream under
//! paused time: what the agent is handed and when, and what the jobs show.

use std::time::Duration;

use ank_common::execution_state::{Pending, Stopping};
use ank_common::messages::{DeletedWorkload, FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind};
use serde_json::json;

use super::tests::{Harness, settle};
use super::*;

const CLI: ConnId = 2;

fn workload(agent: &str, deps: serde_json::Value) -> serde_json::Value {
    json!({"runtime": "podman", "agent": agent, "runtimeConfig": "image: x", "dependencies": deps})
}

/// `db <- api <- ui` on agent A, plus `log` without dependencies.
fn chain() -> serde_json::Value {
    json!({"desiredState": {"apiVersion": "v1", "workloads": {
        "db": workload("A", json!({})),
        "api": workload("A", json!({"db": "ADD_COND_RUNNING"})),
        "ui": workload("A", json!({"api": "ADD_COND_RUNNING"})),
        "log": workload("A", json!({})),
    }}})
}

impl Harness {
    async fn ask(&mut self, content: RequestContent) -> ResponseContent {
        self.handle.message(CLI, ToServer::Request(Request { request_id: "j".into(), content })).await;
        loop {
            match self.cli_rx.recv().await {
                Some(FromServer::Response(r)) if r.request_id == "j" => return r.content,
                Some(_) => continue,
                None => panic!("server gone"),
            }
        }
    }

    async fn update(&mut self, state: serde_json::Value, mask: &[&str]) -> ResponseContent {
        let update_mask = mask.iter().map(|m| m.to_string()).collect();
        self.ask(RequestContent::UpdateState { new_state: crate::test_support::typed(state), update_mask }).await
    }

    /// Everything handed to the agent so far: added and deleted names.
    fn handed_out(&mut self) -> (Vec<WorkloadSpec>, Vec<DeletedWorkload>) {
        let (mut added, mut deleted) = (Vec::new(), Vec::new());
        while let Ok(msg) = self.agent_rx.try_recv() {
            if let FromServer::UpdateWorkload { added: a, deleted: d, .. } = msg {
                added.extend(a);
                deleted.extend(d);
            }
        }
        (added, deleted)
    }

    async fn job(&mut self, id: u64) -> serde_json::Value {
        self.tree().await["jobs"][id.to_string()].clone()
    }
}

// [test of feature L1: the job's progress in the execution states is opt-in]
#[tokio::test(start_paused = true)]
async fn held_workloads_show_the_job_progress_only_when_asked() {
    let jobs = crate::jobs::JobSettings { progress_in_states: true, ..holding() };
    let mut h = Harness::start_with_jobs(jobs).await;
    job_id(&h.update(chain(), &[]).await);
    settle().await;
    let tree = h.tree().await;
    let api = tree["workloadStates"]["A"]["api"].as_object().unwrap().values().next().unwrap().clone();
    assert_eq!((api["state"].as_str(), api["subState"].as_str()), (Some("Pending"), Some("WaitingToStart")));
    assert_eq!(api["additionalInfo"], "job 1: waits for db (Pending(Initial), needs Running)");
}

/// The opt-in Landscaper mode: `--hold-dependents --job-stop-on-failure
/// --job-stuck-after-s 300`.
fn holding() -> crate::jobs::JobSettings {
    crate::jobs::JobSettings::holding(crate::jobs::JobSettings::EXAMPLE_STUCK_AFTER)
}

fn names(specs: &[WorkloadSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name()).collect()
}

fn job_id(answer: &ResponseContent) -> u64 {
    match answer {
        ResponseContent::UpdateStateSuccess { job_id, .. } => *job_id,
        other => panic!("not accepted: {other:?}"),
    }
}

fn running() -> ExecutionState {
    ExecutionState::new(StateKind::Running)
}

// [test of feature L1]
// [test of feature L2]
#[tokio::test(start_paused = true)]
async fn a_chain_is_handed_to_the_agent_in_dependency_order() {
    let mut h = Harness::start_with_jobs(holding()).await;
    assert_eq!(job_id(&h.update(chain(), &[]).await), 1);
    settle().await;
    let (added, _) = h.handed_out();
    assert_eq!(names(&added), ["db", "log"]);
    let job = h.job(1).await;
    assert_eq!(job["phase"], "Progressing");
    assert_eq!(job["workloads"]["api"]["class"], "waiting");
    assert_eq!(job["workloads"]["api"]["reason"], "waits for db (Pending(Initial), needs Running)");
    let tree = h.tree().await;
    let api = tree["workloadStates"]["A"]["api"].as_object().unwrap().values().next().unwrap().clone();
    assert_eq!((api["state"].as_str(), api["subState"].as_str()), (Some("Pending"), Some("WaitingToStart")));
    assert_eq!(api["additionalInfo"], "", "as in Ankaios, the job's progress is not in the execution state");

    let (db, log) = (added[0].clone(), added[1].clone());
    h.report(&log, running(), 1).await;
    h.report(&db, ExecutionState::new(StateKind::Pending(Pending::Starting)), 1).await;
    assert!(h.handed_out().0.is_empty(), "api waits while db starts");
    h.report(&db, running(), 1).await;
    let (api, _) = h.handed_out();
    assert_eq!(names(&api), ["api"]);
    assert_eq!(api[0].generation, 1);
    h.report(&api[0], running(), 1).await;
    let (ui, _) = h.handed_out();
    assert_eq!(names(&ui), ["ui"]);
    assert_eq!(h.job(1).await["phase"], "Completing");
    h.report(&ui[0], running(), 1).await;
    let job = h.job(1).await;
    assert_eq!(job["phase"], "Succeeded");
    assert_eq!(job["workloads"]["ui"]["class"], "succeeded");
    // The next change is the next job.
    assert_eq!(job_id(&h.update(chain(), &[]).await), 2);
    h.stop.cancel();
}

/// Applies the chain and fails `api`; returns the specs of db and api.
async fn failed_api(h: &mut Harness) -> (WorkloadSpec, WorkloadSpec) {
    h.update(chain(), &[]).await;
    settle().await;
    let (added, _) = h.handed_out();
    let (db, log) = (added[0].clone(), added[1].clone());
    h.report(&log, ExecutionState::new(StateKind::Pending(Pending::Starting)), 1).await;
    h.report(&db, running(), 1).await;
    let api = h.handed_out().0.remove(0);
    h.report(&api, ExecutionState::new(StateKind::Pending(Pending::StartingFailed)), 1).await;
    (db, api)
}

// [test of feature L3]
// [test of feature L6]
#[tokio::test(start_paused = true)]
async fn after_a_failure_nothing_more_starts_and_a_rerun_retries_it() {
    let mut h = Harness::start_with_jobs(holding()).await;
    let (db, api) = failed_api(&mut h).await;
    assert!(h.handed_out().0.is_empty(), "ui is not handed out after api failed");
    assert_eq!(h.job(1).await["phase"], "Progressing", "log is still starting");
    let log = h.tree().await["workloadStates"]["A"]["log"].as_object().unwrap().keys().next().unwrap().clone();
    let log = WorkloadSpec {
        instance_name: ank_common::WorkloadInstanceName::parse(&format!("log.{log}.A")).unwrap(),
        ..api.clone()
    };
    h.report(&log, running(), 1).await;
    let job = h.job(1).await;
    assert_eq!(job["phase"], "Failed");
    assert_eq!(job["reason"], "api: Pending(StartingFailed); not started: ui");

    let rerun = h.ask(RequestContent::JobRerun { failed_only: false }).await;
    assert_eq!(job_id(&rerun), 2);
    settle().await;
    let (again, _) = h.handed_out();
    assert_eq!(names(&again), ["api"], "db is untouched");
    h.report(&api, running(), 1).await;
    let (ui, _) = h.handed_out();
    assert_eq!(names(&ui), ["ui"]);
    h.report(&ui[0], running(), 1).await;
    let job = h.job(2).await;
    assert_eq!(job["phase"], "Succeeded");
    assert!(job["workloads"].get("db").is_none());
    let _ = db;
    h.stop.cancel();
}

// [test of feature L4]
// [test of feature L7]
#[tokio::test(start_paused = true)]
async fn a_job_waiting_on_a_never_connected_agent_fails_as_stuck_and_can_be_interrupted() {
    let mut h = Harness::start_with_jobs(holding()).await;
    let state = json!({"desiredState": {"apiVersion": "v1", "workloads": {
        "db": workload("Z", json!({})),
        "api": workload("A", json!({"db": "ADD_COND_RUNNING"})),
    }}});
    assert_eq!(job_id(&h.update(state.clone(), &[]).await), 1);
    settle().await;
    assert!(h.handed_out().0.is_empty());
    tokio::time::sleep(Duration::from_secs(299)).await;
    settle().await;
    assert_eq!(h.job(1).await["phase"], "Progressing");
    tokio::time::sleep(Duration::from_secs(2)).await;
    settle().await;
    let job = h.job(1).await;
    assert_eq!(job["phase"], "Failed");
    assert_eq!(
        job["reason"],
        "stuck: api waits for db (Pending(Initial), needs Running, agent 'Z' never connected); db waits for agent 'Z' never connected"
    );
    let answer = h.ask(RequestContent::JobInterrupt { job_id: 1 }).await;
    assert_eq!(answer, ResponseContent::Error("interrupt rejected: job 1 is already Failed".into()));

    // A second one, interrupted before it is stuck.
    let mut other = state.clone();
    other["desiredState"]["workloads"]["api"]["runtimeConfig"] = json!("image: y");
    assert_eq!(job_id(&h.update(other, &[]).await), 2);
    assert_eq!(job_id(&h.ask(RequestContent::JobInterrupt { job_id: 2 }).await), 2);
    let job = h.job(2).await;
    assert_eq!((job["phase"].as_str(), job["reason"].as_str()), (Some("Failed"), Some("interrupted")));
    assert_eq!(job["workloads"]["api"]["class"], "failed");
    // A fix without the dependency is accepted as the next job and starts.
    let fix = json!({"desiredState": {"apiVersion": "v1", "workloads": {"api": workload("A", json!({}))}}});
    assert_eq!(job_id(&h.update(fix, &[]).await), 3);
    settle().await;
    assert_eq!(names(&h.handed_out().0), ["api"]);
    h.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_dependency_cycle_is_rejected_and_nothing_changes() {
    let mut h = Harness::start().await;
    h.update(chain(), &[]).await;
    let before = h.tree().await["desiredState"].clone();
    let mut cycle = chain();
    cycle["desiredState"]["workloads"]["db"]["dependencies"] = json!({"ui": "ADD_COND_RUNNING"});
    let ResponseContent::Error(e) = h.update(cycle, &[]).await else { panic!("a cycle must be rejected") };
    assert!(e.contains("dependency cycle: "), "{e}");
    assert_eq!(h.tree().await["desiredState"], before);
    assert!(h.tree().await["jobs"].get("2").is_none(), "a rejected change is no job");
    h.stop.cancel();
}

// [test of feature L5]
#[tokio::test(start_paused = true)]
async fn deleting_a_chain_stops_dependents_first_and_a_failed_stop_ends_the_cascade() {
    let mut h = Harness::start_with_jobs(holding()).await;
    h.update(chain(), &[]).await;
    settle().await;
    let mut specs = h.handed_out().0;
    for s in &specs {
        h.report(s, running(), 1).await;
    }
    for _ in 0..2 {
        let next = h.handed_out().0;
        for s in &next {
            h.report(s, running(), 1).await;
        }
        specs.extend(next);
    }
    assert_eq!(h.job(1).await["phase"], "Succeeded");
    let spec = |name: &str| specs.iter().find(|s| s.name() == name).unwrap().clone();

    let delete = json!({"desiredState": {"apiVersion": "v1"}});
    let masks = ["desiredState.workloads.db", "desiredState.workloads.api", "desiredState.workloads.ui"];
    assert_eq!(job_id(&h.update(delete, &masks).await), 2);
    settle().await;
    let (_, deleted) = h.handed_out();
    let gone: Vec<&str> = deleted.iter().map(|d| d.instance_name.workload_name.as_str()).collect();
    assert_eq!(gone, ["ui"]);
    let job = h.job(2).await;
    assert_eq!(job["phase"], "Deleting");
    assert_eq!(job["workloads"]["db"]["reason"], "waits for api to stop");
    let db = spec("db");
    let tree = h.tree().await;
    assert_eq!(tree["workloadStates"]["A"]["db"][&db.instance_name.id]["subState"], "WaitingToStop");
    h.report(&spec("ui"), ExecutionState::new(StateKind::Removed), 1).await;
    let (_, deleted) = h.handed_out();
    assert_eq!(deleted.iter().map(|d| d.instance_name.workload_name.as_str()).collect::<Vec<_>>(), ["api"]);
    h.report(&spec("api"), ExecutionState::new(StateKind::Stopping(Stopping::DeleteFailed)), 1).await;
    assert!(h.handed_out().1.is_empty(), "db is never stopped");
    let job = h.job(2).await;
    assert_eq!(job["phase"], "DeleteFailed");
    assert_eq!(job["reason"], "api: Stopping(DeleteFailed); not stopped: db");
    h.stop.cancel();
}

/// The execution state of workload `name` on `agent`, as `Kind(Sub)`.
async fn shown(h: &mut Harness, agent: &str, name: &str) -> String {
    let tree = h.tree().await;
    let by_id = tree["workloadStates"][agent][name].as_object().unwrap_or_else(|| panic!("{name}: {tree}")).clone();
    let s = by_id.values().next().unwrap().clone();
    format!("{}({})", s["state"].as_str().unwrap(), s["subState"].as_str().unwrap())
}

// By default (as in Ankaios) the whole chain goes to the agent at once: the
// agent waits for the dependencies itself, and the server shows what it
// handed out as Pending(Initial) until the agent reports.
#[tokio::test(start_paused = true)]
async fn by_default_a_chain_goes_to_the_agent_at_once() {
    let mut h = Harness::start().await;
    assert_eq!(job_id(&h.update(chain(), &[]).await), 1);
    settle().await;
    let (added, _) = h.handed_out();
    assert_eq!(names(&added), ["api", "db", "log", "ui"]);
    assert_eq!(shown(&mut h, "A", "api").await, "Pending(Initial)");
    let api = added[0].clone();
    h.report(&api, ExecutionState::new(StateKind::Pending(Pending::WaitingToStart)), 1).await;
    let job = h.job(1).await;
    assert_eq!(job["workloads"]["api"]["class"], "waiting");
    assert_eq!(job["workloads"]["api"]["reason"], "waits for db (Pending(Initial), needs Running)");
    for spec in &added {
        h.report(spec, running(), 1).await;
    }
    assert!(h.handed_out().0.is_empty(), "nothing is handed out twice");
    assert_eq!(h.job(1).await["phase"], "Succeeded");
    h.stop.cancel();
}

// A on an agent that is not there, B on agent A needing A running: B goes
// to agent A at once, A and a dependent on the absent agent stay
// Pending(Initial) (as in Ankaios), the job does not give up after the old
// stuck timeout, and the late agent gets A in its hello; once A runs, B's
// job succeeds.
#[tokio::test(start_paused = true)]
async fn by_default_a_late_agent_still_gets_its_workloads_and_nothing_is_held() {
    let mut h = Harness::start().await;
    let state = json!({"desiredState": {"apiVersion": "v1", "workloads": {
        "a": workload("Z", json!({})),
        "b": workload("A", json!({"a": "ADD_COND_RUNNING"})),
        "c": workload("Z", json!({"a": "ADD_COND_RUNNING"})),
    }}});
    assert_eq!(job_id(&h.update(state, &[]).await), 1);
    settle().await;
    let (added, _) = h.handed_out();
    assert_eq!(names(&added), ["b"], "b goes to its agent at once");
    assert_eq!(shown(&mut h, "A", "b").await, "Pending(Initial)");
    assert_eq!(shown(&mut h, "Z", "a").await, "Pending(Initial)");
    assert_eq!(shown(&mut h, "Z", "c").await, "Pending(Initial)", "no agent: Pending(Initial), as in Ankaios");
    let b = added[0].clone();
    h.report(&b, ExecutionState::new(StateKind::Pending(Pending::WaitingToStart)), 1).await;

    tokio::time::sleep(Duration::from_secs(6 * 60)).await;
    settle().await;
    assert_eq!(h.job(1).await["phase"], "Progressing", "no stuck timeout by default");
    assert_eq!(shown(&mut h, "Z", "c").await, "Pending(Initial)");

    // The late agent Z connects and gets a and c in its hello.
    const LATE: ConnId = 3;
    let (z_tx, mut z_rx) = tokio::sync::mpsc::channel(64);
    h.handle.opened(LATE, ConnKind::Agent, z_tx).await;
    let hello = ToServer::AgentHello {
        agent_name: "Z".into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: Default::default(),
    };
    h.handle.message(LATE, hello).await;
    let Some(FromServer::ServerHello(specs)) = z_rx.recv().await else { panic!("no hello") };
    let mut got: Vec<&str> = specs.iter().map(|s| s.name()).collect();
    got.sort_unstable();
    assert_eq!(got, ["a", "c"]);
    for spec in &specs {
        let status = ank_common::conditions::InstanceStatus { observed_generation: 1, ..Default::default() };
        let state = ank_common::WorkloadState::new(spec.instance_name.clone(), running()).with_status(status);
        h.handle.message(LATE, ToServer::UpdateWorkloadState(vec![state])).await;
    }
    settle().await;
    h.report(&b, running(), 1).await;
    assert_eq!(h.job(1).await["phase"], "Succeeded");
    h.stop.cancel();
}
