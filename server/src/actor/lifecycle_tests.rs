//! The lifecycle features of the server through the actor with a fake
//! agent stream under paused time: effective priorities and escalation
//! (K3), groups (K6), ttlAfterFinished (K7) and `${seq:N}` (K9).

use std::time::Duration;

use ank_common::execution_state::Pending;
use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, State, StateKind};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::tests::{Harness, settle};
use super::*;
use crate::reaper::ReaperSettings;
use crate::seq_pools::SeqPools;

const AGENT: ConnId = 1;
const CLI: ConnId = 2;

fn hello(agent: &str) -> ToServer {
    ToServer::AgentHello {
        agent_name: agent.into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: Default::default(),
    }
}

/// A server on `initial` (validated) with agent A connected; returns the
/// harness and the agent's ServerHello.
pub(super) async fn start(
    initial: State,
    state_file: Option<StateFile>,
    lifecycle: LifecycleOptions,
) -> (Harness, Vec<WorkloadSpec>) {
    start_hooked(initial, state_file, lifecycle, Vec::new()).await
}

/// [`start`] with the server holding dependents back (the opt-in
/// `--hold-dependents --job-stop-on-failure --job-stuck-after-s 300`).
async fn start_holding(initial: State, lifecycle: LifecycleOptions) -> (Harness, Vec<WorkloadSpec>) {
    let jobs = crate::jobs::JobSettings::holding(crate::jobs::JobSettings::EXAMPLE_STUCK_AFTER);
    start_with_jobs(initial, None, lifecycle, Vec::new(), jobs).await
}

/// [`start`] with mutating hooks.
async fn start_hooked(
    initial: State,
    state_file: Option<StateFile>,
    lifecycle: LifecycleOptions,
    hooks: Vec<crate::hooks::HookConfig>,
) -> (Harness, Vec<WorkloadSpec>) {
    start_with_jobs(initial, state_file, lifecycle, hooks, Default::default()).await
}

/// [`start_hooked`] with job settings.
async fn start_with_jobs(
    initial: State,
    state_file: Option<StateFile>,
    lifecycle: LifecycleOptions,
    hooks: Vec<crate::hooks::HookConfig>,
    jobs: crate::jobs::JobSettings,
) -> (Harness, Vec<WorkloadSpec>) {
    let initial = DesiredState::new(initial).expect("valid initial state");
    let lifecycle = LifecycleOptions { hooks: crate::hooks::HooksRegistry::new(hooks), ..lifecycle };
    let (handle, actor) = AnkaiosServer::new_with(initial, state_file, ResyncSettings::default(), jobs, lifecycle);
    let stop = CancellationToken::new();
    tokio::spawn(actor.run(stop.clone()));
    let (agent_tx, mut agent_rx) = mpsc::channel(256);
    let (cli_tx, cli_rx) = mpsc::channel(256);
    handle.opened(AGENT, ConnKind::Agent, agent_tx).await;
    handle.opened(CLI, ConnKind::Commander, cli_tx).await;
    handle.message(AGENT, hello("A")).await;
    let Some(FromServer::ServerHello(specs)) = agent_rx.recv().await else { panic!("no ServerHello") };
    (Harness { handle, agent_rx, cli_rx, stop }, specs)
}

pub(super) fn empty() -> State {
    State { api_version: "v1".into(), ..Default::default() }
}

/// Sends a request and waits for its answer (other messages are dropped).
async fn ask(h: &mut Harness, id: &str, content: RequestContent) -> ResponseContent {
    h.handle.message(CLI, ToServer::Request(Request { request_id: id.into(), content })).await;
    loop {
        match h.cli_rx.recv().await {
            Some(FromServer::Response(r)) if r.request_id == id => return r.content,
            Some(_) => continue,
            None => panic!("server gone"),
        }
    }
}

/// Applies a manifest text with a mask per workload and group.
pub(super) async fn apply(h: &mut Harness, yaml: &str) -> ResponseContent {
    let state = ank_common::manifest::parse_manifest("test", yaml).expect("valid manifest");
    let masks = state
        .workloads
        .keys()
        .map(|n| format!("desiredState.workloads.{n}"))
        .chain(state.groups.keys().map(|n| format!("desiredState.groups.{n}")))
        .collect();
    let new_state = crate::test_support::typed(json!({"desiredState": state}));
    let answer = ask(h, "apply", RequestContent::UpdateState { new_state, update_mask: masks }).await;
    settle().await;
    answer
}

async fn delete(h: &mut Harness, masks: &[&str]) {
    let new_state = crate::test_support::typed(json!({"desiredState": {"apiVersion": "v1"}}));
    let update_mask = masks.iter().map(|m| m.to_string()).collect();
    let answer = ask(h, "delete", RequestContent::UpdateState { new_state, update_mask }).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    settle().await;
}

/// Everything the agent got since the last call: added specs, deleted names.
fn drain(h: &mut Harness) -> (Vec<WorkloadSpec>, Vec<String>) {
    let (mut added, mut deleted) = (Vec::new(), Vec::new());
    while let Ok(msg) = h.agent_rx.try_recv() {
        match msg {
            FromServer::UpdateWorkload { added: a, deleted: d, .. } => {
                added.extend(a);
                deleted.extend(d.into_iter().map(|d| d.instance_name.workload_name));
            }
            FromServer::ServerHello(a) => added.extend(a),
            _ => {}
        }
    }
    (added, deleted)
}

fn names(specs: &[WorkloadSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name()).collect()
}

fn spec<'a>(specs: &'a [WorkloadSpec], name: &str) -> &'a WorkloadSpec {
    specs.iter().find(|s| s.name() == name).unwrap_or_else(|| panic!("no spec of {name}"))
}

/// The (only) instance entry of `name` on agent A.
fn entry(tree: &Value, name: &str) -> Value {
    tree["workloadStates"]["A"][name].as_object().and_then(|m| m.values().next()).cloned().unwrap_or(Value::Null)
}

fn events_of(tree: &Value, name: &str, kind: &str) -> Vec<Value> {
    entry(tree, name)["events"].as_array().into_iter().flatten().filter(|e| e["kind"] == kind).cloned().collect()
}

pub(super) fn wl(name: &str, extra: &str) -> String {
    format!("  {name}:\n    runtime: podman\n    agent: A\n    runtimeConfig: \"image: {name}\"\n{extra}")
}

/// The K3 example: C (priority 1), A (0), B (5) depending on A.
fn k3() -> String {
    format!(
        "apiVersion: v1\nworkloads:\n{}{}{}",
        wl("C", "    priority: 1\n"),
        wl("A", "    priority: 0\n"),
        wl("B", "    priority: 5\n    dependencies:\n      A: ADD_COND_RUNNING\n")
    )
}

// [test of feature K3]
#[tokio::test(start_paused = true)]
async fn k3_the_spec_of_a_carries_effective_priority_5_and_one_escalated_event() {
    let (mut h, _) = start_holding(empty(), LifecycleOptions::default()).await;
    apply(&mut h, &k3()).await;
    let (added, _) = drain(&mut h);
    assert_eq!(names(&added), ["A", "C"], "B waits for A");
    assert_eq!(spec(&added, "A").workload.effective_priority, Some(5));
    assert_eq!(spec(&added, "A").workload.start_priority(), 5);
    assert_eq!(spec(&added, "C").workload.effective_priority, Some(1));
    let tree = h.tree().await;
    assert_eq!(tree["desiredState"]["workloads"]["A"]["effectivePriority"], 5, "visible in the state");
    let escalated = events_of(&tree, "A", "Escalated");
    assert_eq!(escalated.len(), 1, "{tree}");
    assert_eq!((escalated[0]["reason"].as_str(), escalated[0]["count"].as_u64()), (Some("for B (5)"), Some(1)));
    assert!(events_of(&tree, "C", "Escalated").is_empty());
    // An identical re-apply escalates nothing again.
    apply(&mut h, &k3()).await;
    assert_eq!(events_of(&h.tree().await, "A", "Escalated")[0]["count"], 1);
    h.report(spec(&added, "A"), ExecutionState::running(), 1).await;
    let (b, _) = drain(&mut h);
    assert_eq!(names(&b), ["B"]);
    assert_eq!(b[0].workload.effective_priority, Some(5));
    h.stop.cancel();
}

// [test of feature K3]
#[tokio::test(start_paused = true)]
async fn k3_a_later_dependent_escalates_a_waiting_workload_but_never_restarts_a_running_one() {
    let (mut h, _) = start_holding(empty(), LifecycleOptions::default()).await;
    let base = format!("apiVersion: v1\nworkloads:\n{}{}", wl("A", ""), wl("R", ""));
    apply(&mut h, &base).await;
    let (first, _) = drain(&mut h);
    assert_eq!(spec(&first, "A").workload.effective_priority, None);
    h.report(spec(&first, "R"), ExecutionState::running(), 1).await;
    h.report(spec(&first, "A"), ExecutionState::new(StateKind::Pending(Pending::QuotaBlocked)), 1).await;
    let more = format!(
        "{base}{}{}",
        wl("B", "    priority: 5\n    dependencies:\n      A: ADD_COND_RUNNING\n"),
        wl("S", "    priority: 7\n    dependencies:\n      R: ADD_COND_RUNNING\n")
    );
    apply(&mut h, &more).await;
    let (added, deleted) = drain(&mut h);
    assert_eq!(names(&added), ["A", "S"], "A is updated with its new priority; R is left alone");
    assert_eq!(deleted, ["A"]);
    assert_eq!(spec(&added, "A").workload.effective_priority, Some(5));
    let tree = h.tree().await;
    assert_eq!(events_of(&tree, "A", "Escalated")[0]["reason"], "for B (5)");
    assert!(events_of(&tree, "R", "Escalated").is_empty(), "R was running");
    assert_eq!(tree["desiredState"]["workloads"]["R"]["effectivePriority"], 7, "the state still shows it");
    h.stop.cancel();
}

fn pipeline() -> String {
    format!(
        "apiVersion: v1\nworkloads:\n{}{}{}groups:\n  upd:\n    mode: pipeline\n    members: [s1, s2, s3]\n",
        wl("s1", ""),
        wl("s2", ""),
        wl("s3", "")
    )
}

// [test of feature K6: pipeline s1 Succeeded, s2 fails -> s3 Pending(Canceled), never sent]
#[tokio::test(start_paused = true)]
async fn k6_a_failed_pipeline_step_cancels_the_rest_which_never_reach_the_agent() {
    let (mut h, _) = start_holding(empty(), LifecycleOptions::default()).await;
    apply(&mut h, &pipeline()).await;
    let (s1, _) = drain(&mut h);
    assert_eq!(names(&s1), ["s1"], "strictly in list order");
    let tree = h.tree().await;
    assert!(tree["desiredState"]["workloads"]["s2"].get("dependencies").is_none_or(|d| d == &json!({})));
    h.report(&s1[0], ExecutionState::succeeded(), 1).await;
    let (s2, _) = drain(&mut h);
    assert_eq!(names(&s2), ["s2"]);
    h.report(&s2[0], ExecutionState::failed("Exit code: '1'"), 1).await;

    let tree = h.tree().await;
    let s3 = entry(&tree, "s3");
    assert_eq!((s3["state"].as_str(), s3["subState"].as_str()), (Some("Pending"), Some("Canceled")), "{tree}");
    assert_eq!(s3["additionalInfo"], "pipeline upd: s2 failed");
    assert_eq!(events_of(&tree, "s3", "Canceled")[0]["reason"], "pipeline upd: s2 failed");
    assert_eq!(entry(&tree, "s1")["state"], "Succeeded");
    let job = &tree["jobs"]["1"];
    assert_eq!(job["phase"], "Failed");
    assert_eq!(job["workloads"]["s3"]["reason"], "canceled: pipeline upd: s2 failed");
    // The job's classes per step: ran and succeeded, ran and failed, canceled.
    let class = |w: &str| job["workloads"][w]["class"].as_str().unwrap_or_default().to_owned();
    assert_eq!([class("s1"), class("s2"), class("s3")], ["succeeded", "failed", "failed"], "{job}");

    // Never handed out: not by the job, not by a resync, not on a reconnect.
    tokio::time::sleep(Duration::from_secs(120)).await;
    settle().await;
    let (added, _) = drain(&mut h);
    assert!(!names(&added).contains(&"s3"), "{:?}", names(&added));
    // A rerun retries s2 but does not bring s3 back.
    ask(&mut h, "rerun", RequestContent::JobRerun { failed_only: false }).await;
    settle().await;
    assert_eq!(names(&drain(&mut h).0), ["s2"]);
    let (tx, mut rx) = mpsc::channel(16);
    h.handle.closed(AGENT).await;
    h.handle.opened(3, ConnKind::Agent, tx).await;
    h.handle.message(3, hello("A")).await;
    let Some(FromServer::ServerHello(specs)) = rx.recv().await else { panic!("no ServerHello") };
    assert_eq!(names(&specs), ["s1", "s2"]);
    settle().await;
    assert_eq!(entry(&h.tree().await, "s3")["subState"], "Canceled", "still canceled after the agent came back");
    // Deleting the pipeline removes its row.
    delete(&mut h, &["desiredState.workloads.s3", "desiredState.groups.upd"]).await;
    assert_eq!(entry(&h.tree().await, "s3"), Value::Null);
    h.stop.cancel();
}

// [test of feature K6: a member the startup job handed out is taken back before it starts]
#[tokio::test(start_paused = true)]
async fn k6_a_canceled_member_already_on_its_agent_is_deleted_there() {
    let initial = ank_common::manifest::parse_manifest("m", &pipeline()).unwrap();
    let (mut h, specs) = start(initial, None, LifecycleOptions::default()).await;
    assert_eq!(names(&specs), ["s1", "s2", "s3"], "the startup job hands everything out");
    let s3 = spec(&specs, "s3").clone();
    h.report(spec(&specs, "s1"), ExecutionState::succeeded(), 1).await;
    h.report(&s3, ExecutionState::new(StateKind::Pending(Pending::WaitingToStart)), 1).await;
    h.report(spec(&specs, "s2"), ExecutionState::new(StateKind::Pending(Pending::StartingFailed)), 1).await;
    let (_, deleted) = drain(&mut h);
    assert_eq!(deleted, ["s3"]);
    h.report(&s3, ExecutionState::removed(), 1).await;
    let s3_entry = entry(&h.tree().await, "s3");
    assert_eq!(s3_entry["subState"], "Canceled", "the agent's removal does not replace it");
    h.stop.cancel();
}

// [test of feature K6: batch priority 7, member m2 priority 2 -> m1 effective 7, m2 2]
#[tokio::test(start_paused = true)]
async fn k6_batch_defaults_reach_the_members_specs() {
    let (mut h, _) = start(empty(), None, LifecycleOptions::default()).await;
    let batch = "apiVersion: v1\nworkloads:\n  m1:\n    runtime: podman\n    runtimeConfig: \"image: m1\"\n  m2:\n    runtime: podman\n    agent: A\n    priority: 2\n    runtimeConfig: \"image: m2\"\ngroups:\n  nightly:\n    priority: 7\n    agent: A\n    tags:\n      owner: ops\n    members: [m1, m2]\n";
    apply(&mut h, batch).await;
    let (added, _) = drain(&mut h);
    assert_eq!(names(&added), ["m1", "m2"]);
    let (m1, m2) = (&spec(&added, "m1").workload, &spec(&added, "m2").workload);
    assert_eq!((m1.effective_priority, m2.effective_priority), (Some(7), Some(2)));
    assert_eq!((m1.agent.as_str(), m1.tags["owner"].as_str()), ("A", "ops"));
    let tree = h.tree().await;
    let desired = &tree["desiredState"];
    assert_eq!(desired["groups"]["nightly"]["priority"], 7);
    assert_eq!(desired["workloads"]["m1"]["effectivePriority"], 7);
    assert_eq!(desired["workloads"]["m1"].get("agent"), Some(&json!("")), "the state keeps what users wrote");

    // Validation at apply names the group.
    let unknown = batch.replace("[m1, m2]", "[m1, m2, m9]");
    let ResponseContent::Error(e) = apply(&mut h, &unknown).await else { panic!("unknown member accepted") };
    assert!(
        e.contains("group 'nightly': member 'm9' would not be a workload of the desired state after this update"),
        "{e}"
    );
    let ResponseContent::Error(e) = ask(
        &mut h,
        "del",
        RequestContent::UpdateState {
            new_state: crate::test_support::typed(json!({"desiredState": {"apiVersion": "v1"}})),
            update_mask: vec!["desiredState.workloads.m1".into()],
        },
    )
    .await
    else {
        panic!("deleting a member alone must be refused")
    };
    assert!(e.contains("group 'nightly': member 'm1'"), "{e}");
    h.stop.cancel();
}

/// Waits on paused time until `check` holds, at most `limit`.
async fn within(h: &mut Harness, limit: Duration, mut check: impl FnMut(&Value) -> bool) -> Duration {
    let start = tokio::time::Instant::now();
    loop {
        if check(&h.tree().await) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
        settle().await;
    }
}

// [test of feature K7: ttlAfterFinished reaps a finished workload: Reaped, then Removed]
#[tokio::test(start_paused = true)]
async fn k7_a_finished_workload_is_reaped_after_its_ttl_and_saved_so() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let (mut h, _) = start(empty(), Some(file.clone()), LifecycleOptions::default()).await;
    let text = format!(
        "apiVersion: v1\nworkloads:\n{}{}{}groups:\n  g:\n    members: [job, svc]\n",
        wl("job", "    ttlAfterFinished: 10s\n"),
        wl("svc", "    restartPolicy: ON_FAILURE\n    ttlAfterFinished: 10s\n"),
        wl("keep", "")
    );
    apply(&mut h, &text).await;
    let (added, _) = drain(&mut h);
    // A subscriber from now on: the Reaped event comes before the removal.
    let (sub_tx, mut sub_rx) = mpsc::channel(256);
    h.handle.opened(4, ConnKind::Commander, sub_tx).await;
    // The events beside an execution state are an extension: named by the mask.
    let field_mask = vec!["workloadStates.*.*.*.events".into()];
    let sub = RequestContent::CompleteState { field_mask, subscribe_for_events: true };
    h.handle.message(4, ToServer::Request(Request { request_id: "sub".into(), content: sub })).await;
    let finished = tokio::time::Instant::now();
    h.report(spec(&added, "job"), ExecutionState::succeeded(), 1).await;
    h.report(spec(&added, "svc"), ExecutionState::failed("Exit code: '1'"), 1).await;
    h.report(spec(&added, "keep"), ExecutionState::succeeded(), 1).await;
    tokio::time::sleep(Duration::from_secs(9)).await;
    settle().await;
    assert!(h.tree().await["desiredState"]["workloads"].get("job").is_some(), "not before 10 s");
    within(&mut h, Duration::from_secs(3), |t| t["desiredState"]["workloads"].get("job").is_none()).await;
    let took = finished.elapsed();
    eprintln!("ttl 10s, 1 s tick: reaped {took:?} after it finished (paused time, polled every 0.5 s)");
    assert!(took >= Duration::from_secs(10) && took <= Duration::from_millis(11_500), "{took:?}");
    let tree = h.tree().await;
    assert!(tree["desiredState"]["workloads"].get("svc").is_some(), "ON_FAILURE restarts a failure: not finished");
    assert!(tree["desiredState"]["workloads"].get("keep").is_some(), "no ttl, no default: stays");
    assert_eq!(tree["desiredState"]["groups"]["g"]["members"], json!(["svc"]), "out of its group too");
    let saved = file.load().unwrap().unwrap().state;
    assert!(!saved.workloads.contains_key("job") && saved.workloads.contains_key("keep"));
    let (_, deleted) = drain(&mut h);
    assert_eq!(deleted, ["job"], "a job like any other change");
    // The subscriber saw Reaped while the workload was still listed.
    let mut saw_reaped = false;
    while let Ok(msg) = sub_rx.try_recv() {
        if let FromServer::Response(r) = msg
            && let ResponseContent::Event { complete_state, .. } = r.content
            && let Some(e) = events_of(&complete_state, "job", "Reaped").first()
        {
            assert_eq!(e["reason"], "ttlAfterFinished 10s");
            saw_reaped = true;
        }
    }
    assert!(saw_reaped, "no Reaped event");
    h.stop.cancel();
}

// [test of feature K7: the server-wide default ttl and its tick]
#[tokio::test(start_paused = true)]
async fn k7_the_server_default_ttl_reaps_workloads_without_their_own() {
    let lifecycle = LifecycleOptions {
        reaper: ReaperSettings { tick: Duration::from_secs(5), default_ttl: Some(Duration::from_secs(60)) },
        ..Default::default()
    };
    let (mut h, _) = start(empty(), None, lifecycle).await;
    apply(&mut h, &format!("apiVersion: v1\nworkloads:\n{}", wl("w", ""))).await;
    let (added, _) = drain(&mut h);
    h.report(&added[0], ExecutionState::failed("Exit code: '2'"), 1).await;
    tokio::time::sleep(Duration::from_secs(59)).await;
    settle().await;
    assert!(h.tree().await["desiredState"]["workloads"].get("w").is_some());
    let took = within(&mut h, Duration::from_secs(12), |t| t["desiredState"]["workloads"].get("w").is_none()).await;
    assert!(took <= Duration::from_secs(6), "within one tick of 5 s: {took:?}");
    h.stop.cancel();
}

// Issue 26: a workload with ttl T is reaped no later than T + one reaper
// tick after it finished. Before, the ttl counted from the first tick that
// saw it finished, so a ttl that is no multiple of the tick took up to
// T + 2 ticks: here ttl 7 s, tick 5 s, finished 0.1 s after a tick, reaped
// 14.9 s after it finished instead of 9.9 s.
#[tokio::test(start_paused = true)]
async fn k7_a_workload_is_reaped_within_its_ttl_and_one_tick_after_it_finished() {
    let tick = Duration::from_secs(5);
    let lifecycle = LifecycleOptions { reaper: ReaperSettings { tick, default_ttl: None }, ..Default::default() };
    let t0 = tokio::time::Instant::now();
    let (mut h, _) = start(empty(), None, lifecycle).await;
    apply(&mut h, &format!("apiVersion: v1\nworkloads:\n{}", wl("job", "    ttlAfterFinished: 7s\n"))).await;
    let (added, _) = drain(&mut h);
    tokio::time::sleep_until(t0 + tick + Duration::from_millis(100)).await;
    settle().await;
    let finished = tokio::time::Instant::now();
    h.report(spec(&added, "job"), ExecutionState::succeeded(), 1).await;
    settle().await;
    tokio::time::sleep_until(finished + Duration::from_millis(6_900)).await;
    settle().await;
    assert!(h.tree().await["desiredState"]["workloads"].get("job").is_some(), "not before its ttl");
    tokio::time::sleep_until(finished + Duration::from_secs(7) + tick).await;
    settle().await;
    assert!(h.tree().await["desiredState"]["workloads"].get("job").is_none(), "reaped within ttl + one tick");
    h.stop.cancel();
}

fn ported(name: &str) -> String {
    format!(
        "  {name}:\n    runtime: podman\n    agent: A\n    runtimeConfig: |\n      image: {name}\n      commandOptions: [\"-e\", \"PORT_A=${{seq:8000}}\", \"-e\", \"PORT_B=${{seq:8000}}\"]\n"
    )
}

fn ports(s: &WorkloadSpec) -> String {
    port_pair(&s.workload.runtime_config)
}

/// `PORT_A=8000` and `PORT_B=8001` in a runtime config -> "8000/8001".
fn port_pair(rc: &str) -> String {
    let get = |key: &str| {
        rc.split(key).nth(1).map(|r| r.chars().take_while(char::is_ascii_digit).collect::<String>()).unwrap_or_default()
    };
    format!("{}/{}", get("PORT_A="), get("PORT_B="))
}

// [test of feature K9: 8000/8001 and 8002/8003; same after a restart; freed numbers reused]
#[tokio::test(start_paused = true)]
async fn k9_seq_numbers_are_per_agent_stable_across_a_restart_and_reused_after_a_delete() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let lifecycle = || LifecycleOptions { seq: SeqPools::open(file.seq_path()).unwrap(), ..Default::default() };
    let (mut h, _) = start(empty(), Some(file.clone()), lifecycle()).await;
    apply(&mut h, &format!("apiVersion: v1\nworkloads:\n{}{}", ported("w1"), ported("w2"))).await;
    let (added, _) = drain(&mut h);
    assert_eq!((ports(spec(&added, "w1")), ports(spec(&added, "w2"))), ("8000/8001".into(), "8002/8003".into()));
    // The state keeps the macro; the rendered state has the numbers.
    let tree = h.tree().await;
    assert!(tree["desiredState"]["workloads"]["w1"]["runtimeConfig"].as_str().unwrap().contains("${seq:8000}"));
    let ResponseContent::CompleteState(rendered) =
        ask(&mut h, "r", RequestContent::RenderedState { field_mask: vec!["desiredState.workloads.w2".into()] }).await
    else {
        panic!("no rendered state")
    };
    let rendered = rendered.to_json().unwrap();
    let rc = rendered["desiredState"]["workloads"]["w2"]["runtimeConfig"].as_str().unwrap().to_owned();
    assert_eq!(port_pair(&rc), "8002/8003", "{rc}");
    assert!(rendered["desiredState"]["workloads"].get("w1").is_none(), "filtered by the mask");
    assert!(file.seq_path().exists(), "kept next to the state file");
    // The agent restarts: its ServerHello has the same numbers.
    let (tx, mut rx) = mpsc::channel(16);
    h.handle.closed(AGENT).await;
    h.handle.opened(3, ConnKind::Agent, tx).await;
    h.handle.message(3, hello("A")).await;
    let Some(FromServer::ServerHello(again)) = rx.recv().await else { panic!("no ServerHello") };
    assert_eq!((ports(spec(&again, "w1")), ports(spec(&again, "w2"))), ("8000/8001".into(), "8002/8003".into()));
    h.stop.cancel();

    // A new server on the same files hands the agent the same numbers.
    let (initial, _) = crate::initial_state(Some(&file), None).unwrap();
    let (mut h, specs) = start(initial, Some(file.clone()), lifecycle()).await;
    assert_eq!((ports(spec(&specs, "w1")), ports(spec(&specs, "w2"))), ("8000/8001".into(), "8002/8003".into()));
    let same = |a: &WorkloadSpec| added.iter().any(|b| b.instance_name == a.instance_name);
    assert!(specs.iter().all(same), "same instances: nothing restarts");

    // Delete w1, apply w3: w3 reuses 8000/8001.
    delete(&mut h, &["desiredState.workloads.w1"]).await;
    apply(&mut h, &format!("apiVersion: v1\nworkloads:\n{}", ported("w3"))).await;
    let (added, _) = drain(&mut h);
    assert_eq!(ports(spec(&added, "w3")), "8000/8001");

    // `${seq:` without a number is a shell expansion, kept as written (a
    // plain Ankaios manifest is never refused or changed by the macro).
    let shell = "apiVersion: v1\nworkloads:\n  sh:\n    runtime: podman\n    agent: A\n    runtimeConfig: \"PORT: ${seq:-8000}\"\n";
    let ResponseContent::UpdateStateSuccess { .. } = apply(&mut h, shell).await else { panic!("shell text must pass") };
    let (added, _) = drain(&mut h);
    assert_eq!(spec(&added, "sh").workload.runtime_config, "PORT: ${seq:-8000}");
    let ResponseContent::Error(e) =
        ask(&mut h, "r2", RequestContent::RenderedState { field_mask: vec!["workloadStates".into()] }).await
    else {
        panic!("a mask outside the desired state must be refused")
    };
    assert!(e.contains("'workloadStates'"), "{e}");
    h.stop.cancel();
}

// Reaping changes what the agents run: the mutating hooks see it as they
// see a user's delete; a veto keeps the workload until a later tick. Real
// time: the hooks are real processes (ttl 10 ms, reaper tick 20 ms).
#[tokio::test]
async fn k7_reaping_goes_through_the_mutating_hooks_whose_veto_keeps_the_workload() {
    let dir = tempfile::tempdir().unwrap();
    let (block, vetoes) = (dir.path().join("block"), dir.path().join("vetoes"));
    let lifecycle = LifecycleOptions {
        reaper: ReaperSettings { tick: Duration::from_millis(20), default_ttl: None },
        ..Default::default()
    };
    let hooks = vec![super::tests::gate_hook(dir.path(), &block, &vetoes)];
    let (mut h, _) = start_hooked(empty(), None, lifecycle, hooks).await;
    apply(&mut h, &format!("apiVersion: v1\nworkloads:\n{}", wl("job", "    ttlAfterFinished: 10ms\n"))).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut added = Vec::new();
    while added.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the apply went through the hook");
        tokio::time::sleep(Duration::from_millis(10)).await;
        added = drain(&mut h).0;
    }
    std::fs::write(&block, "").unwrap();
    h.report(spec(&added, "job"), ExecutionState::succeeded(), 1).await;
    let vetoed = || std::fs::read_to_string(&vetoes).map(|v| v.lines().count() >= 2).unwrap_or(false);
    while !vetoed() {
        assert!(tokio::time::Instant::now() < deadline, "two reapings vetoed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(h.tree().await["desiredState"]["workloads"].get("job").is_some(), "vetoed: the workload stays");
    assert!(drain(&mut h).1.is_empty(), "nothing deleted on the agent");

    std::fs::remove_file(&block).unwrap();
    while h.tree().await["desiredState"]["workloads"].get("job").is_some() {
        assert!(tokio::time::Instant::now() < deadline, "reaped once the hook lets it through");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.stop.cancel();
}

/// A field or update mask with an empty segment is refused before anything
/// reads it: before, the server dropped the empty segment, so
/// `desiredState.workloads.` replaced every workload and
/// `desiredState.workloads..tags` wrote the map itself.
#[tokio::test(start_paused = true)]
async fn masks_with_empty_segments_are_refused_and_change_nothing() {
    let yaml = "apiVersion: v1\nworkloads:\n  secret:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n  web:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n";
    let initial = ank_common::manifest::parse_manifest("t", yaml).unwrap();
    let (mut h, _) = start(initial, None, LifecycleOptions::default()).await;
    for (i, mask) in ["desiredState.workloads.", "desiredState.workloads..tags", ".desiredState"].iter().enumerate() {
        let update = RequestContent::UpdateState { new_state: Box::default(), update_mask: vec![(*mask).to_owned()] };
        let ResponseContent::Error(e) = ask(&mut h, &format!("u{i}"), update).await else {
            panic!("'{mask}' must be refused")
        };
        assert_eq!(
            e,
            format!(
                "field mask '{mask}' has an empty segment: segments are separated by single dots and none may be empty"
            )
        );
        let read = RequestContent::CompleteState { field_mask: vec![(*mask).to_owned()], subscribe_for_events: true };
        let ResponseContent::Error(e) = ask(&mut h, &format!("r{i}"), read).await else {
            panic!("'{mask}' must be refused for reading")
        };
        assert!(e.contains("empty segment"), "{e}");
    }
    let read = RequestContent::CompleteState {
        field_mask: vec!["desiredState.workloads".into()],
        subscribe_for_events: false,
    };
    let ResponseContent::CompleteState(tree) = ask(&mut h, "all", read).await else { panic!("no state") };
    let tree = tree.to_json().unwrap();
    let names: Vec<&String> = tree["desiredState"]["workloads"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["secret", "web"], "nothing changed");
    h.stop.cancel();
}
