//! Unit tests of the job engine with an in-memory view of the workloads.

use std::cell::RefCell;
use std::collections::BTreeMap;

use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::messages::DeletedWorkload;
use ank_common::workload::AddCondition;
use ank_common::{StateKind, WorkloadInstanceName};

use super::*;
use crate::jobs::phase::bounded;

const CHAIN: &str = "apiVersion: v1
workloads:
  db:
    runtime: podman
    agent: A
    runtimeConfig: db
  api:
    runtime: podman
    agent: A
    runtimeConfig: api
    dependencies:
      db: ADD_COND_RUNNING
  ui:
    runtime: podman
    agent: A
    runtimeConfig: ui
    dependencies:
      api: ADD_COND_RUNNING
  log:
    runtime: podman
    agent: A
    runtimeConfig: log
";

/// Workload states by workload name, as the server's store would hold them.
#[derive(Default)]
struct View {
    states: RefCell<BTreeMap<String, StateKind>>,
    /// Agents that are not connected.
    absent: RefCell<Vec<String>>,
    /// Workloads under an open update gate.
    gated: RefCell<Vec<String>>,
}

impl View {
    fn set(&self, name: &str, kind: StateKind) {
        self.states.borrow_mut().insert(name.to_owned(), kind);
    }
    fn gone(&self, name: &str) {
        self.states.borrow_mut().remove(name);
    }
}

impl JobView for View {
    fn away(&self, agent: &str) -> Option<String> {
        self.absent.borrow().iter().any(|a| a == agent).then(|| format!("agent '{agent}' never connected"))
    }
    fn instance(&self, n: &WorkloadInstanceName) -> Option<(StateKind, u64)> {
        self.states.borrow().get(n.workload_name.as_str()).map(|k| (*k, 1))
    }
    fn gate(&self, workload: &str, _generation: u64) -> Option<String> {
        self.gated(workload).then(|| "update gate: not Ready".to_owned())
    }
    fn gated(&self, workload: &str) -> bool {
        self.gated.borrow().iter().any(|g| g == workload)
    }
    fn dependency(&self, dep: &str, condition: AddCondition) -> Result<(), String> {
        if self.gated(dep) {
            return Err(format!("{dep} (update gate open)"));
        }
        let kind = self.states.borrow().get(dep).copied();
        if meets(condition, kind) {
            Ok(())
        } else {
            Err(format!("{dep} ({})", kind.map_or("no state".to_owned(), |k| k.to_string())))
        }
    }
}

fn spec(name: &str) -> WorkloadSpec {
    let state = ank_common::manifest::parse_manifest("t", CHAIN).unwrap();
    let (n, wl) = state.workloads.get_key_value(name).unwrap();
    crate::desired_state::spec_of(n, wl).unwrap()
}

fn adds(names: &[&str]) -> BTreeMap<String, (NewItem, u64)> {
    names.iter().map(|n| (n.to_string(), (NewItem { add: Some(spec(n)), ..NewItem::default() }, 1))).collect()
}

fn triggered(t: &[Trigger]) -> Vec<String> {
    t.iter()
        .map(|t| {
            t.add.as_ref().map_or_else(
                || t.delete.as_ref().unwrap().instance_name.workload_name.to_string(),
                |s| s.name().to_owned(),
            )
        })
        .collect()
}

/// The opt-in Landscaper mode (`--hold-dependents --job-stop-on-failure
/// --job-stuck-after-s 300`).
fn holding() -> JobSettings {
    JobSettings::holding(JobSettings::EXAMPLE_STUCK_AFTER)
}

fn job(engine: &JobEngine, id: u64) -> Job {
    engine.jobs()[&id.to_string()].clone()
}

// [test of feature L1]
// [test of feature L2]
#[tokio::test(start_paused = true)]
async fn a_chain_is_triggered_in_dependency_order_and_succeeds() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    let id = engine.create(adds(&["db", "api", "ui"]));
    assert_eq!(id, 1);
    assert_eq!(engine.create(BTreeMap::new()), 2, "ids are monotonic, an empty change is a job too");
    let now = Instant::now();
    assert_eq!(triggered(&engine.step(&view, now)), ["db"]);
    assert!(engine.is_held("api") && engine.is_held("ui") && !engine.is_held("db"));
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Progressing);
    assert_eq!(j.names_in(ItemClass::InProgress), ["db"]);
    assert_eq!(j.names_in(ItemClass::Waiting), ["api", "ui"]);
    assert_eq!(j.workloads["api"].reason, "waits for db (no state)");
    assert_eq!(job(&engine, 2).phase, JobPhase::Succeeded);

    view.set("db", StateKind::Pending(Pending::Starting));
    assert!(engine.step(&view, now).is_empty(), "nothing new while db starts");
    view.set("db", StateKind::Running);
    assert_eq!(triggered(&engine.step(&view, now)), ["api"]);
    view.set("api", StateKind::Running);
    assert_eq!(triggered(&engine.step(&view, now)), ["ui"]);
    assert_eq!(job(&engine, 1).phase, JobPhase::Completing, "all handed out, one result outstanding");
    view.set("ui", StateKind::Running);
    assert!(engine.step(&view, now).is_empty());
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Succeeded);
    assert_eq!(j.names_in(ItemClass::Succeeded), ["api", "db", "ui"]);
    assert!(!j.finished_at.is_empty());
}

// By default (as Ankaios): the whole chain goes out at once, the agent
// waits for the dependencies, and a job with nothing in flight waits as long
// as it takes instead of failing as stuck.
#[tokio::test(start_paused = true)]
async fn by_default_every_item_goes_out_at_once_and_the_job_waits_without_a_stuck_timeout() {
    let mut engine = JobEngine::new(JobSettings::default());
    let view = View::default();
    view.absent.borrow_mut().push("A".to_owned());
    engine.create(adds(&["db", "api", "ui"]));
    assert_eq!(triggered(&engine.step(&view, Instant::now())), ["api", "db", "ui"]);
    assert!(!engine.is_held("api") && !engine.is_held("ui"), "nothing is held back");
    view.set("db", StateKind::Pending(Pending::Initial));
    engine.step(&view, Instant::now());
    let j = job(&engine, 1);
    assert_eq!(j.workloads["db"].class, ItemClass::Waiting);
    assert_eq!(j.workloads["db"].reason, "waits for agent 'A' never connected");
    assert!(!engine.waits_on_clock(), "no stuck timeout by default");
    tokio::time::advance(JobSettings::EXAMPLE_STUCK_AFTER * 10).await;
    assert!(engine.step(&view, Instant::now()).is_empty());
    assert_eq!(job(&engine, 1).phase, JobPhase::Progressing, "still tracking after the old stuck timeout");
    view.absent.borrow_mut().clear();
    view.set("db", StateKind::Running);
    view.set("api", StateKind::Pending(Pending::WaitingToStart));
    view.set("ui", StateKind::Pending(Pending::WaitingToStart));
    engine.step(&view, Instant::now());
    let j = job(&engine, 1);
    assert_eq!(j.workloads["ui"].class, ItemClass::Waiting);
    assert_eq!(j.workloads["ui"].reason, "waits for api (Pending(WaitingToStart))");
    assert_eq!(j.workloads["api"].class, ItemClass::InProgress, "its dependency runs: the agent starts it");
    for name in ["db", "api", "ui"] {
        view.set(name, StateKind::Running);
    }
    assert!(engine.step(&view, Instant::now()).is_empty(), "nothing is handed out twice");
    assert_eq!(job(&engine, 1).phase, JobPhase::Succeeded);
}

// By default a failure withholds nothing (everything is out); the job ends
// Failed once nothing is in flight, naming what its agent still holds.
#[tokio::test(start_paused = true)]
async fn by_default_a_failure_withholds_nothing_and_the_job_reports_it() {
    let mut engine = JobEngine::new(JobSettings::default());
    let view = View::default();
    engine.create(adds(&["db", "api", "ui"]));
    assert_eq!(triggered(&engine.step(&view, Instant::now())), ["api", "db", "ui"]);
    view.set("db", StateKind::Running);
    view.set("api", StateKind::Pending(Pending::StartingFailed));
    view.set("ui", StateKind::Pending(Pending::WaitingToStart));
    assert!(engine.step(&view, Instant::now()).is_empty());
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.reason, "api: Pending(StartingFailed); not started: ui");
    assert!(!engine.is_held("ui"));
}

// Holding without stop on failure: a held item still goes out once ready,
// and the job does not end while it holds one.
#[tokio::test(start_paused = true)]
async fn holding_without_stop_on_failure_hands_out_what_becomes_ready_after_a_failure() {
    let settings = JobSettings { hold_dependents: true, ..JobSettings::default() };
    let mut engine = JobEngine::new(settings);
    let view = View::default();
    engine.create(adds(&["db", "api", "log"]));
    assert_eq!(triggered(&engine.step(&view, Instant::now())), ["db", "log"]);
    view.set("log", StateKind::Failed(Failed::ExecFailed));
    view.set("db", StateKind::Pending(Pending::Starting));
    engine.step(&view, Instant::now());
    view.set("db", StateKind::Running);
    assert_eq!(triggered(&engine.step(&view, Instant::now())), ["api"]);
    assert_eq!(job(&engine, 1).phase, JobPhase::Progressing);
    view.set("api", StateKind::Running);
    engine.step(&view, Instant::now());
    let j = job(&engine, 1);
    assert_eq!((j.phase, j.reason.as_str()), (JobPhase::Failed, "log: Failed(ExecFailed)"));
}

// [test of feature L3]
#[tokio::test(start_paused = true)]
async fn a_failure_stops_triggering_and_the_job_fails_once_in_flight_ones_finish() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    engine.create(adds(&["db", "api", "ui", "log"]));
    let now = Instant::now();
    assert_eq!(triggered(&engine.step(&view, now)), ["db", "log"]);
    view.set("db", StateKind::Running);
    view.set("log", StateKind::Pending(Pending::Starting));
    assert_eq!(triggered(&engine.step(&view, now)), ["api"]);
    view.set("api", StateKind::Pending(Pending::StartingFailed));
    assert!(engine.step(&view, now).is_empty(), "ui is not started after api failed");
    assert_eq!(job(&engine, 1).phase, JobPhase::Progressing, "log is still starting");
    view.set("log", StateKind::Running);
    assert!(engine.step(&view, now).is_empty());
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.reason, "api: Pending(StartingFailed); not started: ui");
    assert_eq!(j.names_in(ItemClass::Failed), ["api"]);
    assert!(engine.is_held("ui"), "the untriggered item stays held");
    // A final job is not advanced any more, even when api recovers.
    view.set("api", StateKind::Running);
    assert!(engine.step(&view, now).is_empty());
    assert_eq!(job(&engine, 1).phase, JobPhase::Failed);
}

// [test of feature L4]
#[tokio::test(start_paused = true)]
async fn a_job_with_nothing_to_do_but_wait_fails_as_stuck_after_the_configured_time() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    view.set("db", StateKind::Pending(Pending::Initial));
    engine.create(adds(&["api"]));
    let start = Instant::now();
    assert!(engine.step(&view, start).is_empty());
    tokio::time::advance(JobSettings::EXAMPLE_STUCK_AFTER - std::time::Duration::from_secs(1)).await;
    engine.step(&view, Instant::now());
    assert_eq!(job(&engine, 1).phase, JobPhase::Progressing);
    tokio::time::advance(std::time::Duration::from_secs(1)).await;
    engine.step(&view, Instant::now());
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.reason, "stuck: api waits for db (Pending(Initial))");
}

// [test of feature L7]
#[tokio::test(start_paused = true)]
async fn an_interrupt_fails_the_unfinished_items_and_ends_the_job() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    engine.create(adds(&["db", "api"]));
    engine.step(&view, Instant::now());
    engine.interrupt(1).unwrap();
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.reason, "interrupted");
    assert_eq!(j.names_in(ItemClass::Failed), ["api", "db"]);
    assert_eq!(engine.interrupt(1).unwrap_err().to_string(), "job 1 is already Failed");
    assert_eq!(engine.interrupt(7).unwrap_err().to_string(), "no job 7");
    // A new job takes the held workload over and may start it.
    view.set("db", StateKind::Running);
    assert_eq!(engine.create(adds(&["api"])), 2);
    assert_eq!(triggered(&engine.step(&view, Instant::now())), ["api"]);
    assert_eq!(job(&engine, 1).workloads["api"].reason, "superseded by job 2");
}

fn deletion(name: &str) -> DeletedWorkload {
    DeletedWorkload { instance_name: spec(name).instance_name, dependencies: BTreeMap::new() }
}

// [test of feature L5]
#[tokio::test(start_paused = true)]
async fn deletion_runs_in_reverse_dependency_order_and_stops_on_a_failed_stop() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    for n in ["db", "api", "ui"] {
        view.set(n, StateKind::Running);
    }
    let item = |name: &str, after: &[&str]| NewItem {
        delete: Some(deletion(name)),
        delete_after: after.iter().map(|a| spec(a).instance_name).collect(),
        ..NewItem::default()
    };
    let items = [("db", item("db", &["api"])), ("api", item("api", &["ui"])), ("ui", item("ui", &[]))]
        .into_iter()
        .map(|(n, i)| (n.to_owned(), (i, 1)))
        .collect();
    engine.create(items);
    assert_eq!(job(&engine, 1).phase, JobPhase::InitDelete);
    let now = Instant::now();
    assert_eq!(triggered(&engine.step(&view, now)), ["ui"]);
    assert_eq!(job(&engine, 1).phase, JobPhase::Deleting);
    assert_eq!(job(&engine, 1).workloads["db"].reason, "waits for api to stop");
    view.set("ui", StateKind::Stopping(Stopping::RequestedAtRuntime));
    assert!(engine.step(&view, now).is_empty());
    view.gone("ui");
    assert_eq!(triggered(&engine.step(&view, now)), ["api"]);
    view.set("api", StateKind::Stopping(Stopping::DeleteFailed));
    assert!(engine.step(&view, now).is_empty(), "db is never stopped");
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::DeleteFailed);
    assert_eq!(j.reason, "api: Stopping(DeleteFailed); not stopped: db");
    assert!(j.workloads["db"].delete);
}

#[tokio::test(start_paused = true)]
async fn a_report_about_an_older_generation_does_not_finish_an_item() {
    struct Old;
    impl JobView for Old {
        fn instance(&self, _: &WorkloadInstanceName) -> Option<(StateKind, u64)> {
            Some((StateKind::Failed(Failed::ExecFailed), 1))
        }
        fn dependency(&self, _: &str, _: AddCondition) -> Result<(), String> {
            Ok(())
        }
        fn away(&self, _: &str) -> Option<String> {
            None
        }
    }
    let mut engine = JobEngine::new(holding());
    let mut items = adds(&["db"]);
    items.get_mut("db").unwrap().1 = 2;
    engine.create(items);
    engine.step(&Old, Instant::now());
    engine.step(&Old, Instant::now());
    assert_eq!(job(&engine, 1).phase, JobPhase::Completing);
}

#[tokio::test(start_paused = true)]
async fn the_history_keeps_the_configured_number_of_finished_jobs() {
    let mut engine = JobEngine::new(JobSettings { history: 3, ..holding() });
    let view = View::default();
    for _ in 0..10 {
        engine.create(BTreeMap::new());
        engine.step(&view, Instant::now());
    }
    assert_eq!(engine.jobs().keys().collect::<Vec<_>>(), ["10", "8", "9"]);
}

#[test]
fn a_reason_names_a_few_items_and_counts_the_rest() {
    let parts: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    assert_eq!(bounded(parts, ", "), "w0, w1, w2, w3, w4, and 3 more");
    assert_eq!(bounded(vec!["a"], "; "), "a");
}

// [test of feature K6: a canceled item fails its job and is held for good until taken over]
#[tokio::test(start_paused = true)]
async fn a_canceled_workload_fails_its_item_and_stays_held_until_a_new_job_takes_it_over() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    engine.create(adds(&["db", "api"]));
    let now = Instant::now();
    assert_eq!(triggered(&engine.step(&view, now)), ["db"]);
    view.set("db", StateKind::Failed(Failed::ExecFailed));
    assert!(engine.cancel(spec("api"), "pipeline p: db failed"), "api was never handed out");
    assert!(engine.is_held("api") && engine.is_canceled(&spec("api").instance_name));
    assert_eq!(engine.held_items().count(), 0, "not shown as waiting, not rerun");
    assert!(engine.step(&view, now).is_empty());
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.workloads["api"].reason, "canceled: pipeline p: db failed");
    assert_eq!(
        engine.canceled().map(|(n, r)| (n.workload_name.as_str(), r)).collect::<Vec<_>>(),
        [("api", "pipeline p: db failed")]
    );
    // Canceling what was handed out says so: the server then deletes it on its agent.
    assert!(!engine.cancel(spec("log"), "pipeline q: x failed"), "log was never held");
    assert!(engine.is_held("log"), "held for good from now on");
    // A new job over api takes it over: handed out once db is Running.
    engine.create(adds(&["api"]));
    assert!(!engine.is_canceled(&spec("api").instance_name));
    view.set("db", StateKind::Running);
    assert_eq!(triggered(&engine.step(&view, now)), ["api"]);
}

// [test of feature K6: a handed-out item whose instance is Pending(Canceled) has failed]
#[tokio::test(start_paused = true)]
async fn a_handed_out_item_in_pending_canceled_is_failed() {
    let mut engine = JobEngine::new(holding());
    let view = View::default();
    engine.create(adds(&["log"]));
    let now = Instant::now();
    assert_eq!(triggered(&engine.step(&view, now)), ["log"]);
    view.set("log", StateKind::Pending(Pending::Canceled));
    engine.step(&view, now);
    let j = job(&engine, 1);
    assert_eq!((j.phase, j.workloads["log"].reason.as_str()), (JobPhase::Failed, "Pending(Canceled)"));
}

// [test of feature: issue 39 the job follows the update gate; dependents wait for it]
#[tokio::test(start_paused = true)]
async fn a_gated_item_waits_for_its_gate_and_fails_with_it_and_holds_its_dependents() {
    let view = View::default();
    let mut engine = JobEngine::new(JobSettings::default());
    let now = Instant::now();
    engine.create(adds(&["db", "api"]));
    view.gated.borrow_mut().push("db".into());
    assert_eq!(triggered(&engine.step(&view, now)), ["db"], "api waits, without --hold-dependents");
    assert_eq!(job(&engine, 1).workloads["api"].reason, "waits for db (update gate open)");
    view.set("db", StateKind::Failed(Failed::ExecFailed));
    assert!(engine.step(&view, now).is_empty());
    let j = job(&engine, 1);
    assert_eq!((j.phase, j.workloads["db"].class), (JobPhase::Progressing, ItemClass::InProgress), "the gate decides");
    assert_eq!(j.workloads["db"].reason, "update gate: not Ready");
    // The gate fails; the revert is a new job over db, which does not
    // supersede the failure.
    engine.fail_gated("db", 1, "update gate: generation 1 not Ready within 20s");
    view.gated.borrow_mut().clear();
    engine.create(adds(&["db"]));
    view.set("db", StateKind::Running);
    let out = engine.step(&view, now);
    assert_eq!(triggered(&out), ["api", "db"], "api is released, the revert goes out");
    let j = job(&engine, 1);
    assert_eq!(j.workloads["db"].class, ItemClass::Failed);
    assert_eq!(j.workloads["db"].reason, "update gate: generation 1 not Ready within 20s");
    view.set("api", StateKind::Running);
    engine.step(&view, now);
    let j = job(&engine, 1);
    assert_eq!(j.phase, JobPhase::Failed);
    assert_eq!(j.reason, "db: update gate: generation 1 not Ready within 20s");
    assert_eq!(job(&engine, 2).phase, JobPhase::Succeeded);
}
