//! Placement through the server actor with fake agent streams under paused
//! time: agents advertise labels, capabilities and metrics; selector
//! workloads land on the best candidate, wait as NotScheduled with the
//! reasons, and move on agent loss or at the rebalance pass.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::messages::{FromServer, Request, RequestContent, ResponseContent, ToServer};
use ank_common::{AgentStatus, ExecutionState, WorkloadState};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::tests::{gate_hook, settle};
use super::*;
use crate::hooks::{HookConfig, HooksRegistry};
use crate::placement::{MetricRange, PlacementSettings};

const CLI: ConnId = 1;

/// A server with any number of fake agents.
struct Cluster {
    handle: ServerHandle,
    cli_rx: mpsc::Receiver<FromServer>,
    agents: BTreeMap<String, (ConnId, mpsc::Receiver<FromServer>)>,
    next_conn: ConnId,
    stop: CancellationToken,
}

fn settings(metrics: &[(&str, f64, f64)]) -> PlacementSettings {
    let mut s = PlacementSettings { seed: 42, ..PlacementSettings::default() };
    for (name, min, max) in metrics {
        s.metrics.insert((*name).to_owned(), MetricRange::new(*min, *max, true).unwrap());
    }
    s
}

impl Cluster {
    async fn start(settings: PlacementSettings) -> Self {
        Self::start_with_hooks(settings, ResyncSettings::default(), Vec::new()).await
    }

    async fn start_with_hooks(settings: PlacementSettings, resync: ResyncSettings, hooks: Vec<HookConfig>) -> Self {
        Self::start_with_jobs(settings, resync, hooks, Default::default()).await
    }

    async fn start_with_jobs(
        settings: PlacementSettings,
        resync: ResyncSettings,
        hooks: Vec<HookConfig>,
        jobs: crate::jobs::JobSettings,
    ) -> Self {
        let options =
            LifecycleOptions { placement: Some(settings), hooks: HooksRegistry::new(hooks), ..Default::default() };
        let (handle, actor) = AnkaiosServer::new_with(DesiredState::default(), None, resync, jobs, options);
        let stop = CancellationToken::new();
        tokio::spawn(actor.run(stop.clone()));
        let (cli_tx, cli_rx) = mpsc::channel(256);
        handle.opened(CLI, ConnKind::Commander, cli_tx).await;
        Self { handle, cli_rx, agents: BTreeMap::new(), next_conn: 10, stop }
    }

    /// Connects `name` with labels and capabilities, then reports its load
    /// (free memory in MiB) and extra metrics.
    async fn connect(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        caps: &[&str],
        free_mb: u64,
        extra: &[(&str, f64)],
    ) {
        self.hello(name, labels, caps).await;
        self.load(name, free_mb, extra).await;
    }

    /// Connects `name` with labels and capabilities; no load report yet.
    async fn hello(&mut self, name: &str, labels: &[(&str, &str)], caps: &[&str]) {
        self.next_conn += 1;
        let conn = self.next_conn;
        let (tx, mut rx) = mpsc::channel(256);
        self.handle.opened(conn, ConnKind::Agent, tx).await;
        let hello = ToServer::AgentHello {
            agent_name: name.into(),
            protocol_version: ank_common::PROTOCOL_VERSION.into(),
            tags: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            reports_conditions: true,
            capabilities: caps.iter().map(|c| c.to_string()).collect(),
            quota: Default::default(),
        };
        self.handle.message(conn, hello).await;
        assert!(matches!(rx.recv().await, Some(FromServer::ServerHello(_))));
        self.agents.insert(name.to_owned(), (conn, rx));
        settle().await;
    }

    async fn load(&mut self, name: &str, free_mb: u64, extra: &[(&str, f64)]) {
        let conn = self.agents[name].0;
        let status = AgentStatus { cpu_usage: 10, free_memory: free_mb * 1024 * 1024 };
        let metrics = extra.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        self.handle
            .message(
                conn,
                ToServer::AgentLoadStatus { agent_name: name.into(), status, metrics, quota_used: Default::default() },
            )
            .await;
        settle().await;
    }

    async fn disconnect(&mut self, name: &str) {
        let (conn, _) = self.agents.remove(name).expect("connected");
        self.handle.closed(conn).await;
        settle().await;
    }

    async fn ask(&mut self, content: RequestContent) -> ResponseContent {
        self.handle.message(CLI, ToServer::Request(Request { request_id: "p".into(), content })).await;
        loop {
            match self.cli_rx.recv().await {
                Some(FromServer::Response(r)) if r.request_id == "p" => return r.content,
                Some(_) => continue,
                None => panic!("server gone"),
            }
        }
    }

    async fn apply(&mut self, workloads: Value) -> ResponseContent {
        let state = json!({"desiredState": {"apiVersion": "v1", "workloads": workloads}});
        let answer = self
            .ask(RequestContent::UpdateState { new_state: crate::test_support::typed(state), update_mask: vec![] })
            .await;
        settle().await;
        answer
    }

    async fn tree(&mut self) -> Value {
        match self.ask(RequestContent::CompleteState { field_mask: vec![], subscribe_for_events: false }).await {
            ResponseContent::CompleteState(tree) => tree.to_json().unwrap(),
            other => panic!("{other:?}"),
        }
    }

    /// Names handed to `agent` (added, deleted) since the last call; the
    /// fake agent confirms each deletion.
    async fn handed(&mut self, agent: &str) -> (Vec<String>, Vec<String>) {
        let (mut added, mut deleted) = (Vec::new(), Vec::new());
        let (conn, rx) = self.agents.get_mut(agent).expect("connected");
        let mut removed = Vec::new();
        while let Ok(msg) = rx.try_recv() {
            if let FromServer::UpdateWorkload { added: a, deleted: d, .. } = msg {
                added.extend(a.into_iter().map(|s| s.name().to_owned()));
                deleted.extend(d.iter().map(|d| d.instance_name.workload_name.to_string()));
                removed.extend(d.into_iter().map(|d| WorkloadState::new(d.instance_name, ExecutionState::removed())));
            }
        }
        if !removed.is_empty() {
            self.handle.message(*conn, ToServer::UpdateWorkloadState(removed)).await;
            settle().await;
        }
        (added, deleted)
    }

    /// The agents holding an instance of `wl` that is not on its way out,
    /// with its state ("" is NotScheduled).
    async fn instances(&mut self, wl: &str) -> Vec<(String, Value)> {
        let tree = self.tree().await;
        let mut out = Vec::new();
        for (agent, by_name) in tree["workloadStates"].as_object().into_iter().flatten() {
            for entry in by_name.get(wl).and_then(Value::as_object).into_iter().flat_map(|m| m.values()) {
                // Not the instances being deleted: Stopping, or (agent away)
                // AgentDisconnected with the Health message that says so.
                let deleted_while_away = entry["state"] == "AgentDisconnected"
                    && entry["conditions"].as_array().into_iter().flatten().any(|c| {
                        c["type"] == "Health"
                            && c["message"]
                                .as_str()
                                .is_some_and(|m| m.starts_with(crate::workload_states::DELETED_WHILE_AWAY))
                    });
                if entry["state"] != "Stopping" && !deleted_while_away {
                    out.push((agent.clone(), entry.clone()));
                }
            }
        }
        out
    }

    async fn placed_on(&mut self, wl: &str) -> Vec<String> {
        self.instances(wl).await.into_iter().map(|(a, _)| a).collect()
    }

    /// The events of `wl`: (kind, reason, count).
    async fn events(&mut self, wl: &str) -> Vec<(String, String, u64)> {
        let tree = self.tree().await;
        for by_name in tree["workloadStates"].as_object().into_iter().flat_map(|m| m.values()) {
            if let Some(entry) = by_name.get(wl).and_then(Value::as_object).and_then(|m| m.values().next()) {
                return entry["events"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|e| {
                        let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
                        (text("kind"), text("reason"), e["count"].as_u64().unwrap_or(0))
                    })
                    .collect();
            }
        }
        Vec::new()
    }

    async fn last_event(&mut self, wl: &str, kind: &str) -> Option<String> {
        self.events(wl).await.into_iter().rev().find(|(k, _, _)| k == kind).map(|(_, r, _)| r)
    }
}

fn selector_workload(selector: Value, migration: &str) -> Value {
    json!({"runtime": "podman", "runtimeConfig": "image: x", "agentSelector": selector, "migration": migration})
}

/// Sleeps in steps of one second (the server's tick) up to `secs` after `from`.
async fn until(from: tokio::time::Instant, secs: u64) {
    let target = from + Duration::from_secs(secs);
    while tokio::time::Instant::now() < target {
        tokio::time::sleep(Duration::from_secs(1).min(target - tokio::time::Instant::now())).await;
        settle().await;
    }
}

// [test of feature S1]
#[tokio::test(start_paused = true)]
async fn arm64_lands_on_c_and_waits_as_not_scheduled_listing_both_exclusions_when_c_stops() {
    let mut c = Cluster::start(settings(&[])).await;
    c.connect("agent_A", &[("arch", "x86_64")], &["podman"], 2048, &[]).await;
    c.connect("agent_B", &[("arch", "arm64")], &["podman"], 2048, &[]).await;
    c.connect("agent_C", &[("arch", "arm64")], &["podman"], 2048, &[]).await;
    c.disconnect("agent_B").await;
    let answer = c.apply(json!({"w": selector_workload(json!({"labels": ["arch = arm64"]}), "onAgentLoss")})).await;
    assert!(matches!(answer, ResponseContent::UpdateStateSuccess { .. }), "{answer:?}");
    assert_eq!(c.handed("agent_C").await.0, ["w"], "handed to agent_C");
    assert!(c.handed("agent_A").await.0.is_empty());
    assert_eq!(c.placed_on("w").await, ["agent_C"]);
    assert_eq!(c.last_event("w", "Scheduled").await.as_deref(), Some("agent_C score 0.00 of 1 candidate"));
    let state = c.tree().await;
    assert!(
        state["desiredState"]["workloads"]["w"].get("agent").is_none_or(|a| a == ""),
        "the user's state has no agent"
    );

    // C stops: after the agent-loss grace nothing else fits.
    let stopped = tokio::time::Instant::now();
    c.disconnect("agent_C").await;
    until(stopped, 299).await;
    assert_eq!(c.placed_on("w").await, ["agent_C"], "kept during the grace");
    until(stopped, 301).await;
    let reason = "3 agents: 2 offline (agent_B, agent_C), 1 label arch = arm64 mismatch (agent_A)";
    let rows = c.instances("w").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[0].1["state"].as_str()), ("", Some("NotScheduled")));
    assert_eq!(rows[0].1["additionalInfo"], reason);
    assert_eq!(c.last_event("w", "Unschedulable").await.as_deref(), Some(reason));

    // C is back: the workload goes there again.
    c.connect("agent_C", &[("arch", "arm64")], &["podman"], 2048, &[]).await;
    assert_eq!(c.handed("agent_C").await.0, ["w"]);
    assert_eq!(c.placed_on("w").await, ["agent_C"]);
    c.stop.cancel();
}

// [test of feature S3]
#[tokio::test(start_paused = true)]
async fn the_agent_with_more_free_memory_wins() {
    let mut c = Cluster::start(settings(&[("free_memory_mb", 0.0, 8192.0)])).await;
    c.connect("agent_A", &[], &["podman"], 1024, &[]).await;
    c.connect("agent_B", &[], &["podman"], 4096, &[]).await;
    let rank = json!({"rank": [{"metric": "free_memory_mb", "weight": 1.0}]});
    c.apply(json!({"w": selector_workload(rank, "onAgentLoss")})).await;
    assert_eq!(c.placed_on("w").await, ["agent_B"]);
    assert_eq!(c.last_event("w", "Scheduled").await.as_deref(), Some("agent_B score 0.45 of 2 candidates"));
    let tree = c.tree().await;
    assert_eq!(tree["agents"]["agent_B"]["metrics"]["free_memory_mb"], 4096.0, "{tree}");
    assert_eq!(tree["agents"]["agent_B"]["capabilities"], json!(["podman"]));
    c.stop.cancel();
}

// [test of feature S6]
#[tokio::test(start_paused = true)]
async fn podman_kube_on_podman_only_agents_is_not_scheduled_until_one_offers_it() {
    let mut c = Cluster::start(settings(&[])).await;
    c.connect("agent_A", &[], &["podman"], 1024, &[]).await;
    c.connect("agent_B", &[], &["podman"], 1024, &[]).await;
    c.apply(json!({"w": selector_workload(json!({"capabilities": ["podman-kube"]}), "onAgentLoss")})).await;
    let reason = "2 agents: 2 missing capability podman-kube (agent_A, agent_B)";
    let rows = c.instances("w").await;
    assert_eq!((rows[0].0.as_str(), rows[0].1["state"].as_str()), ("", Some("NotScheduled")));
    assert_eq!(rows[0].1["additionalInfo"], reason);
    assert_eq!(c.last_event("w", "Unschedulable").await.as_deref(), Some(reason));
    // Re-evaluations with the same outcome do not repeat the event.
    c.load("agent_A", 2000, &[]).await;
    c.apply(json!({"w": selector_workload(json!({"capabilities": ["podman-kube"]}), "onAgentLoss")})).await;
    let unschedulable: Vec<_> = c.events("w").await.into_iter().filter(|(k, _, _)| k == "Unschedulable").collect();
    assert_eq!(unschedulable, [("Unschedulable".to_owned(), reason.to_owned(), 1)]);
    // A changed spec that still cannot be placed keeps its NotScheduled row.
    let mut changed = selector_workload(json!({"capabilities": ["podman-kube"]}), "onAgentLoss");
    changed["runtimeConfig"] = json!("image: y");
    c.apply(json!({"w": changed})).await;
    let rows = c.instances("w").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].1["state"].as_str(), rows[0].1["additionalInfo"].as_str()),
        (Some("NotScheduled"), Some(reason))
    );

    c.connect("agent_K", &[], &["podman", "podman-kube"], 1024, &[]).await;
    assert_eq!(c.handed("agent_K").await.0, ["w"]);
    assert_eq!(c.placed_on("w").await, ["agent_K"]);
    assert_eq!(c.last_event("w", "Scheduled").await.as_deref(), Some("agent_K score 0.00 of 1 candidate"));
    c.stop.cancel();
}

/// A on load 0.50 (current), B on `b`; one rank metric, stickiness 0.1.
async fn on_a_with_b_at(b: f64, migration: &str) -> Cluster {
    let mut c = Cluster::start(settings(&[("load", 0.0, 1.0)])).await;
    c.connect("agent_A", &[], &["podman"], 1024, &[("load", 0.50)]).await;
    c.connect("agent_B", &[], &["podman"], 1024, &[("load", 0.30)]).await;
    let rank = json!({"rank": [{"metric": "load", "weight": 1.0}]});
    c.apply(json!({"w": selector_workload(rank, migration)})).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"]);
    assert_eq!(c.handed("agent_A").await.0, ["w"]);
    c.load("agent_B", 1024, &[("load", b)]).await;
    c
}

// [test of feature S4: 0.545 vs 0.527 stays]
#[tokio::test(start_paused = true)]
async fn rebalance_keeps_the_workload_while_stickiness_outweighs_the_difference() {
    let start = tokio::time::Instant::now();
    let mut c = on_a_with_b_at(0.58, "rebalance").await;
    until(start, 190).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "B 0.527 < A 0.545 at three passes");
    assert!(c.last_event("w", "Rescheduled").await.is_none());
    c.stop.cancel();
}

// [test of feature S4: 0.727 > 0.545 moves at the next pass, not earlier]
#[tokio::test(start_paused = true)]
async fn rebalance_moves_to_a_better_agent_at_the_next_pass_only() {
    let start = tokio::time::Instant::now();
    let mut c = on_a_with_b_at(0.80, "rebalance").await;
    until(start, 59).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "still on A at 59 s");
    assert!(c.handed("agent_B").await.0.is_empty());
    until(start, 61).await;
    assert_eq!(c.handed("agent_B").await.0, ["w"], "started on B");
    assert_eq!(c.handed("agent_A").await.1, ["w"], "the old instance is deleted on A");
    assert_eq!(c.placed_on("w").await, ["agent_B"]);
    assert_eq!(
        c.last_event("w", "Rescheduled").await.as_deref(),
        Some("agent_A -> agent_B: score 0.73 > 0.55 of agent_A (stickiness 0.1 included)")
    );
    c.stop.cancel();
}

// [test of feature S4: migration never]
#[tokio::test(start_paused = true)]
async fn migration_never_stays_put_even_when_outscored_or_its_agent_is_lost() {
    let start = tokio::time::Instant::now();
    let mut c = on_a_with_b_at(0.80, "never").await;
    until(start, 200).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"]);
    c.disconnect("agent_A").await;
    until(start, 200 + 600).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "AgentDisconnected, never moved");
    assert!(c.handed("agent_B").await.0.is_empty());
    c.stop.cancel();
}

// [test of feature S4: onAgentLoss after the grace, not before]
#[tokio::test(start_paused = true)]
async fn on_agent_loss_moves_only_after_the_agent_stayed_away_for_the_grace() {
    let mut c = on_a_with_b_at(0.80, "onAgentLoss").await;
    let start = tokio::time::Instant::now();
    until(start, 180).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "onAgentLoss does not rebalance");
    let lost = tokio::time::Instant::now();
    c.disconnect("agent_A").await;
    until(lost, 299).await;
    let rows = c.instances("w").await;
    assert_eq!((rows[0].0.as_str(), rows[0].1["state"].as_str()), ("agent_A", Some("AgentDisconnected")));
    assert!(c.handed("agent_B").await.0.is_empty(), "not before the grace");
    until(lost, 301).await;
    assert_eq!(c.handed("agent_B").await.0, ["w"]);
    assert_eq!(c.placed_on("w").await, ["agent_B"]);
    assert_eq!(
        c.last_event("w", "Rescheduled").await.as_deref(),
        Some("agent_A -> agent_B: agent_A disconnected for 5m; score 0.73 of 1 candidate")
    );
    // A returns: its old instance is deleted, nothing new is started there.
    let (tx, mut rx) = mpsc::channel(16);
    c.handle.opened(99, ConnKind::Agent, tx).await;
    let hello = ToServer::AgentHello {
        agent_name: "agent_A".into(),
        protocol_version: ank_common::PROTOCOL_VERSION.into(),
        tags: Default::default(),
        reports_conditions: true,
        capabilities: vec!["podman".into()],
        quota: Default::default(),
    };
    c.handle.message(99, hello).await;
    assert!(matches!(rx.recv().await, Some(FromServer::ServerHello(s)) if s.is_empty()));
    let Some(FromServer::UpdateWorkload { added, deleted, .. }) = rx.recv().await else { panic!("no deletion") };
    assert!(added.is_empty());
    assert_eq!(deleted[0].instance_name.workload_name, "w");
    let removed = ank_common::WorkloadState::new(deleted[0].instance_name.clone(), ExecutionState::removed());
    c.handle.message(99, ToServer::UpdateWorkloadState(vec![removed])).await;
    settle().await;
    assert_eq!(c.placed_on("w").await, ["agent_B"]);
    assert!(c.tree().await["workloadStates"].get("agent_A").is_none(), "the old instance is gone");
    c.stop.cancel();
}

// [test of feature S1: a bad expression is rejected by the server's update path]
#[tokio::test(start_paused = true)]
async fn a_bad_selector_expression_is_rejected_naming_field_index_and_column() {
    let mut c = Cluster::start(settings(&[])).await;
    let answer = c.apply(json!({"w": selector_workload(json!({"labels": ["arch === x"]}), "onAgentLoss")})).await;
    let ResponseContent::Error(e) = answer else { panic!("accepted: {answer:?}") };
    assert!(e.contains("workload 'w': agentSelector.labels[0]: unexpected '='"), "{e}");
    assert!(e.ends_with("at column 8 in 'arch === x''"), "{e}");
    let both =
        json!({"w": {"runtime": "podman", "runtimeConfig": "x", "agent": "A", "agentSelector": {"labels": ["a = b"]}}});
    let ResponseContent::Error(e) = c.apply(both).await else { panic!("accepted") };
    assert!(e.contains("'agent' and 'agentSelector' are exclusive"), "{e}");
    c.stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn an_unchanged_selector_keeps_its_agent_across_updates_and_a_changed_one_is_placed_again() {
    let mut c = Cluster::start(settings(&[])).await;
    c.connect("agent_A", &[("zone", "a")], &["podman"], 1024, &[]).await;
    c.connect("agent_B", &[("zone", "b")], &["podman"], 1024, &[]).await;
    let first = c.tree().await;
    assert!(first["agents"]["agent_A"]["tags"]["zone"] == "a");
    c.apply(json!({"w": selector_workload(json!({"labels": ["zone in (a, b)"]}), "onAgentLoss")})).await;
    let on = c.placed_on("w").await;
    assert_eq!(c.handed(&on[0]).await.0, ["w"]);
    // A new image: same selector, same agent.
    let mut wl = selector_workload(json!({"labels": ["zone in (a, b)"]}), "onAgentLoss");
    wl["runtimeConfig"] = json!("image: y");
    c.apply(json!({"w": wl})).await;
    assert_eq!(c.handed(&on[0]).await, (vec!["w".to_owned()], vec!["w".to_owned()]), "replaced on the same agent");
    assert_eq!(c.placed_on("w").await, on);
    // The selector now excludes that agent.
    let other = if on[0] == "agent_A" { "b" } else { "a" };
    c.apply(json!({"w": selector_workload(json!({"labels": [format!("zone = {other}")]}), "onAgentLoss")})).await;
    assert_eq!(c.handed(&on[0]).await.1, ["w"], "deleted where it ran");
    assert_eq!(c.placed_on("w").await, [format!("agent_{}", other.to_uppercase())]);
    c.stop.cancel();
}

/// Polls `check` in real time (the hooks are real processes) for up to 10 s.
async fn eventually(c: &mut Cluster, what: &str, mut check: impl AsyncFnMut(&mut Cluster) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check(c).await {
        assert!(tokio::time::Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// A move changes what the agents run: the mutating hooks see it as they
// see a user's change (before, a move handed out the workload as rendered,
// bypassing whatever the hooks enforce). Real time: the hooks are real
// processes; the server ticks every 20 ms.
#[tokio::test]
async fn a_move_goes_through_the_mutating_hooks_whose_veto_keeps_it_until_they_let_it_through() {
    let dir = tempfile::tempdir().unwrap();
    let (block, vetoes) = (dir.path().join("block"), dir.path().join("vetoes"));
    let mut placement = settings(&[("load", 0.0, 1.0)]);
    placement.agent_loss_grace = Duration::ZERO;
    let resync = ResyncSettings { ready: Duration::from_millis(20), not_ready: Duration::from_millis(20) };
    let mut c = Cluster::start_with_hooks(placement, resync, vec![gate_hook(dir.path(), &block, &vetoes)]).await;
    c.connect("agent_A", &[], &["podman"], 1024, &[("load", 0.50)]).await;
    c.connect("agent_B", &[], &["podman"], 1024, &[("load", 0.30)]).await;
    let rank = json!({"rank": [{"metric": "load", "weight": 1.0}]});
    c.apply(json!({"w": selector_workload(rank, "onAgentLoss")})).await;
    eventually(&mut c, "w placed on agent_A", async |c| c.placed_on("w").await == ["agent_A"]).await;

    std::fs::write(&block, "").unwrap();
    c.disconnect("agent_A").await;
    let vetoed = |n: usize| std::fs::read_to_string(&vetoes).map(|v| v.lines().count() >= n).unwrap_or(false);
    eventually(&mut c, "two vetoed moves", async |_| vetoed(2)).await;
    assert!(!c.handed("agent_B").await.0.contains(&"w".to_owned()), "the hook vetoed the move");
    assert_eq!(c.placed_on("w").await, ["agent_A"]);

    std::fs::remove_file(&block).unwrap();
    eventually(&mut c, "w moved to agent_B", async |c| c.placed_on("w").await == ["agent_B"]).await;
    assert!(c.handed("agent_B").await.0.contains(&"w".to_owned()), "tried again at a later tick, let through");
    c.stop.cancel();
}

// Issue 26, bug 2: a job accounts for every workload it was asked to roll
// out. One whose selector no agent matches waits in its job (which is not
// Succeeded meanwhile, and fails as stuck if it stays so); when a fitting
// agent comes, the placement's job takes it over and rolls it out.
#[tokio::test(start_paused = true)]
async fn a_job_waits_for_a_workload_no_agent_matches_until_placement_takes_it_over() {
    let mut c = Cluster::start(settings(&[])).await;
    c.connect("agent_A", &[("arch", "x86_64")], &["podman"], 1024, &[]).await;
    let answer = c.apply(json!({"w": selector_workload(json!({"labels": ["arch = arm64"]}), "onAgentLoss")})).await;
    let ResponseContent::UpdateStateSuccess { job_id, .. } = answer else { panic!("{answer:?}") };
    let job = c.tree().await["jobs"][job_id.to_string()].clone();
    assert_eq!(job["workloads"]["w"]["class"], "waiting", "{job}");
    assert_eq!(job["workloads"]["w"]["state"], "NotScheduled", "{job}");
    assert_ne!(job["phase"], "Succeeded", "{job}");
    let rows = c.instances("w").await;
    assert_eq!(
        (rows[0].1["state"].as_str(), rows[0].1["generation"].as_u64()),
        (Some("NotScheduled"), Some(1)),
        "{rows:?}"
    );
    let conditions: Vec<(String, String, String)> = rows[0].1["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().into(),
                c["status"].as_str().unwrap().into(),
                c["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    let not_scheduled = |t: &str| (t.to_owned(), "False".to_owned(), "NotScheduled".to_owned());
    assert_eq!(conditions, [not_scheduled("Applied"), not_scheduled("Available"), not_scheduled("Ready")]);

    c.connect("agent_C", &[("arch", "arm64")], &["podman"], 1024, &[]).await;
    assert_eq!(c.handed("agent_C").await.0, ["w"]);
    let jobs = c.tree().await["jobs"].clone();
    let first = &jobs[job_id.to_string()];
    let taken = format!("superseded by job {}", job_id + 1);
    assert_eq!(
        (first["phase"].as_str(), first["workloads"]["w"]["reason"].as_str()),
        (Some("Succeeded"), Some(taken.as_str()))
    );
    assert!(jobs[(job_id + 1).to_string()]["workloads"].get("w").is_some(), "{jobs}");
    c.stop.cancel();
}

// With the opt-in stuck timeout, a job whose workload stays unplaced fails
// as stuck, naming why; by default it waits for a fitting agent.
#[tokio::test(start_paused = true)]
async fn a_job_whose_workload_no_agent_ever_matches_fails_as_stuck() {
    let stuck = crate::jobs::JobSettings {
        stuck_after: Some(crate::jobs::JobSettings::EXAMPLE_STUCK_AFTER),
        ..Default::default()
    };
    let mut c = Cluster::start_with_jobs(settings(&[]), ResyncSettings::default(), Vec::new(), stuck).await;
    c.connect("agent_A", &[("arch", "x86_64")], &["podman"], 1024, &[]).await;
    let start = tokio::time::Instant::now();
    let answer = c.apply(json!({"w": selector_workload(json!({"labels": ["arch = arm64"]}), "onAgentLoss")})).await;
    let ResponseContent::UpdateStateSuccess { job_id, .. } = answer else { panic!("{answer:?}") };
    until(start, 301).await;
    let job = c.tree().await["jobs"][job_id.to_string()].clone();
    assert_eq!(job["phase"], "Failed", "{job}");
    assert_eq!(job["reason"], "stuck: w waits for an agent that matches its agentSelector", "{job}");
    c.stop.cancel();
}

// Issue 26, bug 3: when a fitting agent connects, the NotScheduled workload
// is placed once and its `Scheduled` event recorded once (before, the move
// placed it a second time and recorded the event again).
#[tokio::test(start_paused = true)]
async fn a_fitting_agent_connecting_records_one_scheduled_event() {
    let mut c = Cluster::start(settings(&[])).await;
    c.connect("agent_A", &[("arch", "x86_64")], &["podman"], 1024, &[]).await;
    c.apply(json!({"w": selector_workload(json!({"labels": ["arch = arm64"]}), "onAgentLoss")})).await;
    c.connect("agent_C", &[("arch", "arm64")], &["podman"], 1024, &[]).await;
    assert_eq!(c.handed("agent_C").await.0, ["w"]);
    let scheduled: Vec<_> = c.events("w").await.into_iter().filter(|(k, _, _)| k == "Scheduled").collect();
    assert_eq!(scheduled, [("Scheduled".to_owned(), "agent_C score 0.00 of 1 candidate".to_owned(), 1)]);
    c.stop.cancel();
}

// Issue 26, bug 4: an agent's metrics come with its first load report, not
// its hello. Until then placement does not judge the agent's metric
// constraints: no false "metric speed missing" Unschedulable at the hello
// (here caused by the placement of another workload the agent fits at
// once, or by an update), and the workload is placed once the report comes;
// one the report shows it does not fit is Unschedulable then, with the truth.
#[tokio::test(start_paused = true)]
async fn metric_constraints_wait_for_the_agents_first_load_report_without_a_false_unschedulable() {
    let mut c = Cluster::start(settings(&[])).await;
    let fast = selector_workload(json!({"metrics": ["speed >= 5"]}), "onAgentLoss");
    let any = selector_workload(json!({"labels": ["arch = arm64"]}), "onAgentLoss");
    c.apply(json!({"fast": fast.clone(), "any": any.clone()})).await;
    let before = c.events("fast").await;
    assert_eq!(
        before,
        [("Unschedulable".to_owned(), "no agent known to the server".to_owned(), 1)],
        "true while no agent is known"
    );

    c.hello("agent_X", &[("arch", "arm64")], &["podman"]).await;
    assert_eq!(c.handed("agent_X").await.0, ["any"], "placed at the hello: it has no metric constraint");
    assert_eq!(c.events("fast").await, before, "no Unschedulable at the hello");
    let faster = selector_workload(json!({"metrics": ["speed >= 50"]}), "never");
    c.apply(json!({"fast": fast, "any": any, "faster": faster})).await;
    assert_eq!(c.events("fast").await, before, "nor at an update before agent_X's first load report");
    assert_eq!(c.events("faster").await, [], "a new workload is not judged either");
    for wl in ["fast", "faster"] {
        let rows = c.instances(wl).await;
        assert_eq!(
            (rows[0].0.as_str(), rows[0].1["state"].as_str(), rows[0].1["additionalInfo"].as_str()),
            ("", Some("NotScheduled"), Some("waiting for the first load report of agent_X")),
            "{rows:?}"
        );
    }

    c.load("agent_X", 1024, &[("speed", 10.0)]).await;
    assert_eq!(c.handed("agent_X").await.0, ["fast"], "placed once the report came");
    assert_eq!(c.placed_on("fast").await, ["agent_X"]);
    assert_eq!(c.last_event("fast", "Scheduled").await.as_deref(), Some("agent_X score 0.00 of 1 candidate"));
    let reason = "1 agent: 1 metric speed >= 50 not met (agent_X)";
    assert_eq!(c.events("faster").await, [("Unschedulable".to_owned(), reason.to_owned(), 1)]);
    assert_eq!(c.instances("faster").await[0].1["additionalInfo"], reason);
    c.stop.cancel();
}

// Issue 26, bug 4, for rebalance: a rebalance pass does not judge the
// current agent before its first load report after it reconnected (its rank
// metrics are unknown, not bad): the workload stays, and is judged at the
// first pass after the report.
#[tokio::test(start_paused = true)]
async fn rebalance_waits_for_the_current_agents_first_load_report_after_a_reconnect() {
    let start = tokio::time::Instant::now();
    let mut c = on_a_with_b_at(0.58, "rebalance").await;
    until(start, 50).await;
    c.disconnect("agent_A").await;
    c.hello("agent_A", &[], &["podman"]).await;
    until(start, 70).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "not moved for a load agent_A has not reported yet");
    assert!(c.handed("agent_B").await.0.is_empty());
    c.load("agent_A", 1024, &[("load", 0.50)]).await;
    until(start, 130).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"], "B 0.527 < A 0.545 once A reported");
    assert!(c.last_event("w", "Rescheduled").await.is_none());
    c.load("agent_A", 1024, &[("load", 0.10)]).await;
    until(start, 200).await;
    assert!(c.handed("agent_B").await.0.contains(&"w".to_owned()), "judged again at the passes after the report");
    assert!(c.handed("agent_A").await.1.contains(&"w".to_owned()), "the old instance is deleted on A");
    assert_eq!(c.placed_on("w").await, ["agent_B"]);
    assert_eq!(
        c.last_event("w", "Rescheduled").await.as_deref(),
        Some("agent_A -> agent_B: score 0.53 > 0.18 of agent_A (stickiness 0.1 included)")
    );
    c.stop.cancel();
}

// Issue 26: a Rescheduled reason shows how long the agent was away as a
// human duration ("5.9s"), not in raw milliseconds ("5926ms").
#[tokio::test(start_paused = true)]
async fn a_rescheduled_reason_shows_the_time_away_as_a_human_duration() {
    let mut placement = settings(&[("load", 0.0, 1.0)]);
    placement.agent_loss_grace = Duration::from_secs(5);
    let start = tokio::time::Instant::now();
    let mut c = Cluster::start(placement).await;
    c.connect("agent_A", &[], &["podman"], 1024, &[("load", 0.50)]).await;
    c.connect("agent_B", &[], &["podman"], 1024, &[("load", 0.30)]).await;
    let rank = json!({"rank": [{"metric": "load", "weight": 1.0}]});
    c.apply(json!({"w": selector_workload(rank, "onAgentLoss")})).await;
    assert_eq!(c.placed_on("w").await, ["agent_A"]);
    // Away from 74 ms after a tick: the tick that moves it sees 5.926 s.
    until(start, 10).await;
    tokio::time::sleep(Duration::from_millis(74)).await;
    c.disconnect("agent_A").await;
    until(start, 17).await;
    assert_eq!(
        c.last_event("w", "Rescheduled").await.as_deref(),
        Some("agent_A -> agent_B: agent_A disconnected for 5.9s; score 0.27 of 1 candidate")
    );
    c.stop.cancel();
}

// Issue 26, bug 4: a workload that waited for an agent's first load report
// the agent then does not fit becomes Unschedulable with the true reason at
// that report (not only at the next update or move).
#[tokio::test(start_paused = true)]
async fn a_workload_the_first_load_report_rules_out_gets_the_true_reason_at_that_report() {
    let mut c = Cluster::start(settings(&[])).await;
    c.hello("agent_X", &[], &["podman"]).await;
    c.apply(json!({"faster": selector_workload(json!({"metrics": ["speed >= 50"]}), "onAgentLoss")})).await;
    assert_eq!(c.events("faster").await, []);
    c.load("agent_X", 1024, &[("speed", 10.0)]).await;
    let reason = "1 agent: 1 metric speed >= 50 not met (agent_X)";
    assert_eq!(c.events("faster").await, [("Unschedulable".to_owned(), reason.to_owned(), 1)]);
    assert_eq!(c.instances("faster").await[0].1["additionalInfo"], reason);
    c.load("agent_X", 1024, &[("speed", 60.0)]).await;
    assert_eq!(c.handed("agent_X").await.0, ["faster"], "placed when a later report makes it fit");
    c.stop.cancel();
}
