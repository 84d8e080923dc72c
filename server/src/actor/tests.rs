//! The server actor with fake agent and commander streams (plain channels,
//! no gRPC), under paused time: generations, the generation guard, the TTL
//! resync and deletions that wait for their agent.

use std::time::Duration;

use ank_common::conditions::{ConditionStatus, ConditionType, InstanceStatus, RuntimeHealth, agent_conditions};
use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, WorkloadState};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::*;

const AGENT: ConnId = 1;
const CLI: ConnId = 2;

pub(super) struct Harness {
    pub(super) handle: ServerHandle,
    pub(super) agent_rx: mpsc::Receiver<FromServer>,
    pub(super) cli_rx: mpsc::Receiver<FromServer>,
    pub(super) stop: CancellationToken,
}

fn manifest(image: &str, policy: &str) -> serde_json::Value {
    serde_json::json!({"desiredState": {"apiVersion": "v1", "workloads": {"w": {
        "runtime": "podman", "agent": "A", "restartPolicy": policy, "runtimeConfig": format!("image: {image}")
    }}}})
}

/// Lets the actor work through what was sent (time is paused: sleeping
/// advances the clock only as far as the first timer).
pub(super) async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A shell hook in `dir` that lets every change through until the file
/// `block` exists, then vetoes, noting each veto in `vetoes`.
pub(super) fn gate_hook(
    dir: &std::path::Path,
    block: &std::path::Path,
    vetoes: &std::path::Path,
) -> crate::hooks::HookConfig {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("gate");
    let body = format!(
        "#!/bin/sh\nif [ -e '{}' ]; then echo veto >> '{}'; echo 'no moves' >&2; exit 1; fi\nexec cat\n",
        block.display(),
        vetoes.display()
    );
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    crate::hooks::HookConfig { name: "gate".into(), prio: 0, path: dir.to_path_buf(), timeout: Duration::from_secs(5) }
}

impl Harness {
    pub(super) async fn start() -> Self {
        Self::start_with_jobs(JobSettings::default()).await
    }

    pub(super) async fn start_with_jobs(jobs: JobSettings) -> Self {
        let (handle, actor) = AnkaiosServer::new_with(
            DesiredState::default(),
            None,
            ResyncSettings::default(),
            jobs,
            LifecycleOptions::default(),
        );
        let stop = CancellationToken::new();
        tokio::spawn(actor.run(stop.clone()));
        let (agent_tx, mut agent_rx) = mpsc::channel(64);
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
        assert!(matches!(agent_rx.recv().await, Some(FromServer::ServerHello(s)) if s.is_empty()));
        Self { handle, agent_rx, cli_rx, stop }
    }

    pub(super) async fn apply(&mut self, state: serde_json::Value) {
        let content = RequestContent::UpdateState { new_state: crate::test_support::typed(state), update_mask: vec![] };
        self.handle.message(CLI, ToServer::Request(Request { request_id: "r".into(), content })).await;
        loop {
            match self.cli_rx.recv().await {
                Some(FromServer::Response(r)) => {
                    assert!(matches!(r.content, ResponseContent::UpdateStateSuccess { .. }), "{r:?}");
                    return;
                }
                Some(_) => continue,
                None => panic!("server gone"),
            }
        }
    }

    /// The added workloads of the next UpdateWorkload for the agent, if one is queued.
    fn update_for_agent(&mut self) -> Option<Vec<WorkloadSpec>> {
        self.marked_update_for_agent().map(|(added, _)| added)
    }

    /// The same, with whether it is marked as a resync.
    fn marked_update_for_agent(&mut self) -> Option<(Vec<WorkloadSpec>, bool)> {
        while let Ok(msg) = self.agent_rx.try_recv() {
            if let FromServer::UpdateWorkload { added, resync, .. } = msg {
                return Some((added, resync));
            }
        }
        None
    }

    pub(super) async fn report(&self, spec: &WorkloadSpec, state: ExecutionState, generation: u64) {
        let conditions = agent_conditions(&state, generation, &RuntimeHealth::Reachable);
        let status = InstanceStatus { observed_generation: generation, conditions, ..Default::default() };
        let report = WorkloadState::new(spec.instance_name.clone(), state).with_status(status);
        self.handle.message(AGENT, ToServer::UpdateWorkloadState(vec![report])).await;
        settle().await;
    }

    pub(super) async fn tree(&mut self) -> serde_json::Value {
        let content = RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false };
        self.handle.message(CLI, ToServer::Request(Request { request_id: "s".into(), content })).await;
        loop {
            if let Some(FromServer::Response(r)) = self.cli_rx.recv().await
                && let ResponseContent::CompleteState(tree) = r.content
            {
                return tree.to_json().unwrap();
            }
        }
    }

    async fn entry(&mut self, spec: &WorkloadSpec) -> serde_json::Value {
        let n = &spec.instance_name;
        self.tree().await["workloadStates"][&n.agent_name][&n.workload_name][&n.id].clone()
    }
}

fn condition<'a>(entry: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    entry["conditions"].as_array().and_then(|a| a.iter().find(|c| c["type"] == kind)).expect("condition present")
}

// [test of feature H1]
#[tokio::test(start_paused = true)]
async fn generation_grows_only_when_the_spec_changes() {
    let mut h = Harness::start().await;
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let first = h.update_for_agent().expect("sent to the agent");
    assert_eq!(first[0].generation, 1);
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    assert!(h.update_for_agent().is_none(), "an identical re-apply sends nothing");
    assert_eq!(h.entry(&first[0]).await["generation"], 1);
    h.apply(manifest("b", "NEVER")).await;
    settle().await;
    let second = h.update_for_agent().expect("the change is sent");
    assert_eq!(second[0].generation, 2);
    assert_eq!(h.entry(&second[0]).await["generation"], 2);
    h.stop.cancel();
}

// [test of feature H2]
#[tokio::test(start_paused = true)]
async fn a_late_report_of_an_older_generation_is_dropped_and_counted() {
    let mut h = Harness::start().await;
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let v1 = h.update_for_agent().unwrap().remove(0);
    // Same image, other restart policy: same instance, generation 2.
    h.apply(manifest("a", "ALWAYS")).await;
    settle().await;
    let v2 = h.update_for_agent().unwrap().remove(0);
    assert_eq!((v2.instance_name == v1.instance_name, v2.generation), (true, 2));
    h.report(&v2, ExecutionState::running(), 2).await;
    h.report(&v1, ExecutionState::failed("late"), 1).await;
    let entry = h.entry(&v2).await;
    assert_eq!((entry["state"].as_str(), entry["observedGeneration"].as_u64()), (Some("Running"), Some(2)));
    h.report(&v2, ExecutionState::failed("from the future"), 3).await;
    let tree = h.tree().await;
    let entry = &tree["workloadStates"]["A"]["w"][&v2.instance_name.id];
    assert_eq!(entry["state"], "Running");
    assert_eq!(condition(entry, "Ready")["status"], "True");
    assert_eq!(tree["agents"]["A"]["droppedStaleReports"], 2, "{tree}");
    h.stop.cancel();
}

// [test of feature H6]
#[tokio::test(start_paused = true)]
async fn a_lost_update_is_resent_after_10_s_and_a_ready_workload_after_30_min() {
    let mut h = Harness::start().await;
    let applied = tokio::time::Instant::now();
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let (lost, resync) = h.marked_update_for_agent().expect("first UpdateWorkload");
    assert!(!resync, "the apply's UpdateWorkload is no resync");
    drop(lost); // the fake agent never sees it
    tokio::time::sleep(Duration::from_millis(9_500)).await;
    settle().await;
    assert!(h.update_for_agent().is_none(), "no resync before 10 s");
    let resent = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        settle().await;
        if let Some((r, resync)) = h.marked_update_for_agent() {
            assert!(resync, "the agent is told that this is a resync (no rerun)");
            break r;
        }
    };
    let spec = resent[0].clone();
    h.report(&spec, ExecutionState::running(), spec.generation).await;
    let recovered = applied.elapsed();
    let entry = h.entry(&spec).await;
    assert_eq!(condition(&entry, "Ready")["status"], "True");
    assert_eq!(entry["resyncs"], 1);
    eprintln!("lost UpdateWorkload -> Ready by resync after {recovered:?} (paused time)");
    assert!(recovered >= Duration::from_secs(10) && recovered <= Duration::from_secs(12), "{recovered:?}");

    // Ready: nothing for 30 min, then exactly one resync, which the agent answers.
    let ready_since = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(29 * 60 + 50)).await;
    settle().await;
    assert!(h.update_for_agent().is_none(), "no resync of a Ready workload before 30 min");
    let mut resyncs = Vec::new();
    while ready_since.elapsed() < Duration::from_secs(31 * 60) {
        tokio::time::sleep(Duration::from_secs(1)).await;
        settle().await;
        if let Some(r) = h.update_for_agent() {
            resyncs.push(ready_since.elapsed());
            h.report(&r[0], ExecutionState::running(), r[0].generation).await;
        }
    }
    assert_eq!(resyncs.len(), 1, "{resyncs:?}");
    assert!(resyncs[0] >= Duration::from_secs(30 * 60) && resyncs[0] <= Duration::from_secs(30 * 60 + 2));
    h.stop.cancel();
}

// [test of feature H6]
#[tokio::test(start_paused = true)]
async fn a_workload_whose_creates_gave_up_is_not_resent() {
    use ank_common::StateKind;
    use ank_common::execution_state::Pending;
    let mut h = Harness::start().await;
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let spec = h.update_for_agent().expect("first UpdateWorkload");
    let gave_up = ExecutionState::with_info(StateKind::Pending(Pending::StartingFailed), "No more retries: no image");
    h.report(&spec[0], gave_up, spec[0].generation).await;
    // The agent got the spec and gave up: a resync would start its retries
    // again every 10 s, and StartingFailed is final until the spec changes.
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        settle().await;
        assert!(h.update_for_agent().is_none(), "a given-up workload was re-sent");
    }
    h.stop.cancel();
}

// [test of feature H7]
#[tokio::test(start_paused = true)]
async fn a_deletion_while_the_agent_is_away_waits_for_its_confirmation() {
    let mut h = Harness::start().await;
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let spec = h.update_for_agent().unwrap().remove(0);
    h.report(&spec, ExecutionState::running(), 1).await;
    h.handle.closed(AGENT).await;
    h.apply(serde_json::json!({"desiredState": {"apiVersion": "v1"}})).await;
    let entry = h.entry(&spec).await;
    assert_eq!(entry["state"].as_str(), Some("AgentDisconnected"), "shown as Ankaios shows it: {entry}");
    assert_eq!(condition(&entry, "Health")["reason"], "AgentDisconnected");

    // The agent is back: its ServerHello is empty and the deletion is sent.
    let (tx, mut rx) = mpsc::channel(16);
    h.handle.opened(3, ConnKind::Agent, tx).await;
    let hello = ToServer::AgentHello {
        agent_name: "A".into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: Default::default(),
    };
    h.handle.message(3, hello).await;
    assert!(matches!(rx.recv().await, Some(FromServer::ServerHello(s)) if s.is_empty()));
    let Some(FromServer::UpdateWorkload { deleted, .. }) = rx.recv().await else { panic!("no deletion") };
    assert_eq!(deleted[0].instance_name, spec.instance_name);
    let removed = WorkloadState::new(spec.instance_name.clone(), ExecutionState::removed());
    h.handle.message(3, ToServer::UpdateWorkloadState(vec![removed])).await;
    settle().await;
    assert!(h.tree().await["workloadStates"].get("A").is_none(), "gone once confirmed");
    h.stop.cancel();
}

// [test of feature H3]
#[tokio::test(start_paused = true)]
async fn an_update_that_fails_keeps_available_of_the_old_generation_until_it_replaced_it() {
    let mut h = Harness::start().await;
    h.apply(manifest("a", "NEVER")).await;
    settle().await;
    let v1 = h.update_for_agent().unwrap().remove(0);
    h.report(&v1, ExecutionState::running(), 1).await;
    h.apply(manifest("missing", "NEVER")).await;
    settle().await;
    let v2 = h.update_for_agent().unwrap().remove(0);
    let entry = h.entry(&v2).await;
    assert_eq!(condition(&entry, "Ready")["status"], "False", "not ready at once");
    let available = condition(&entry, "Available");
    assert_eq!((available["status"].as_str(), available["observedGeneration"].as_u64()), (Some("True"), Some(1)));
    // The old one is removed, the new one cannot be pulled.
    let removed = WorkloadState::new(v1.instance_name.clone(), ExecutionState::removed());
    h.handle.message(AGENT, ToServer::UpdateWorkloadState(vec![removed])).await;
    let failed = ExecutionState::with_info(
        ank_common::StateKind::Pending(ank_common::execution_state::Pending::StartingFailed),
        "image not known",
    );
    h.report(&v2, failed, 2).await;
    let entry = h.entry(&v2).await;
    assert_eq!(condition(&entry, "Available")["status"], "False");
    assert_eq!(condition(&entry, "Ready")["reason"], "NotAvailable");
    assert_eq!(condition(&entry, "Applied")["status"], ConditionStatus::False.as_str());
    assert_eq!(condition(&entry, ConditionType::Health.as_str())["status"], "True");
    h.stop.cancel();
}

// [test of feature K2]
#[tokio::test(start_paused = true)]
async fn an_agents_quota_and_its_use_show_in_the_complete_state() {
    let mut h = Harness::start().await;
    assert!(h.tree().await["agents"]["A"].get("quota").is_none(), "the harness agent has no limits");
    let (tx, _rx) = mpsc::channel(16);
    h.handle.opened(3, ConnKind::Agent, tx).await;
    let hello = ToServer::AgentHello {
        agent_name: "B".into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: Vec::new(),
        quota: ank_common::quota::QuotaLimits { max_workloads: 4, max_memory: 2 << 30 },
    };
    h.handle.message(3, hello).await;
    let load = ToServer::AgentLoadStatus {
        agent_name: "B".into(),
        status: Default::default(),
        metrics: Default::default(),
        quota_used: ank_common::quota::QuotaUsage { workloads: 3, memory: 1 << 30 },
    };
    h.handle.message(3, load).await;
    settle().await;
    let quota = h.tree().await["agents"]["B"]["quota"].clone();
    assert_eq!(
        quota,
        serde_json::json!({"maxWorkloads": 4, "maxMemory": 2u64 << 30, "usedWorkloads": 3, "usedMemory": 1u64 << 30})
    );
    h.stop.cancel();
}
