//! The podman state watcher: ONE long-running `podman events --format json
//! --filter label=agent=<agent>` child for the whole agent. Each line maps
//! to an [`Observed`] state of the instance named by its `name` label; a
//! slow reconcile (`podman ps --all`) after every (re)start of the stream
//! and every `reconcile_interval` catches anything missed. A dead stream is
//! restarted with backoff.
//!
//! Out: `RuntimeEvent::Changed`, `RuntimeEvent::Snapshot` and, when podman
//! stops or starts answering, `RuntimeEvent::Health` on the sink.

use std::time::Duration;

use ank_common::conditions::RuntimeHealth;
use ank_common::execution_state::{Failed, Pending, Stopping};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cli::{EventLine, PodmanCli, PsEntry};
use crate::backoff::Backoff;
use crate::runtime_connectors::{ListedWorkload, Observed, RuntimeEvent, RuntimeEventSender, WorkloadId};

/// How far back a (re)started event stream replays, so that nothing between
/// spawning `podman events` and its subscription is lost.
pub const EVENT_REPLAY: &str = "2s";

/// The state of a container that exited with `code`.
pub fn exit_state(code: i32) -> ExecutionState {
    if code == 0 { ExecutionState::succeeded() } else { ExecutionState::failed(format!("Exit code: '{code}'")) }
}

/// Maps one event to what it says about the container; `None` for events
/// that do not change the execution state (cleanup, mount, exec, ...).
// [impl->swdd~podman-state-getter-maps-state~3]
// [impl->swdd~podman-implements-runtime-state-getter~1]
pub fn observed_from_event(ev: &EventLine) -> Option<Observed> {
    if !ev.kind.is_empty() && ev.kind != "container" {
        return None;
    }
    let state = match ev.status.as_str() {
        "create" | "init" => ExecutionState::new(StateKind::Pending(Pending::Starting)),
        "start" | "unpause" | "restart" => ExecutionState::running(),
        "died" => exit_state(ev.exit_code.unwrap_or(0)),
        "pause" => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), "paused"),
        // [impl->swdd~podman-state-getter-returns-lost-state~1]
        "remove" => return Some(Observed::Gone),
        _ => return None,
    };
    Some(Observed::State(state))
}

/// The `RuntimeEvent` of an event line, if it concerns an instance of `agent`.
pub fn event_from_line(line: &str, agent: &str) -> Option<RuntimeEvent> {
    let ev = match EventLine::parse(line) {
        Ok(ev) => ev,
        Err(e) => {
            tracing::warn!("ignoring unparsable podman event '{line}': {e}");
            return None;
        }
    };
    if ev.attribute("agent") != Some(agent) {
        return None;
    }
    let instance_name = WorkloadInstanceName::parse(ev.attribute("name")?).ok()?;
    let observed = observed_from_event(&ev)?;
    Some(RuntimeEvent::Changed { instance_name, workload_id: WorkloadId(ev.id), observed })
}

/// The execution state of a `podman ps` entry.
// [impl->swdd~podman-state-getter-maps-state~3]
pub fn state_from_ps(entry: &PsEntry) -> ExecutionState {
    match entry.state.as_str() {
        // Same value as the create/init events, so a reconcile repeats no state.
        "created" | "configured" | "initialized" => ExecutionState::new(StateKind::Pending(Pending::Starting)),
        "running" => ExecutionState::running(),
        "exited" => exit_state(entry.exit_code),
        "stopping" | "stopped" | "removing" => {
            ExecutionState::with_info(StateKind::Stopping(Stopping::Stopping), entry.state.clone())
        }
        // [impl->swdd~podman-state-getter-returns-unknown-state~1]
        other => ExecutionState::with_info(StateKind::Failed(Failed::Unknown), other.to_owned()),
    }
}

/// The containers of `agent` among `entries` (those with a valid `name` label).
// [impl->swdd~podman-list-of-existing-workloads-uses-labels~1]
pub fn listed_from_ps(entries: &[PsEntry], agent: &str) -> Vec<ListedWorkload> {
    entries
        .iter()
        .filter(|e| e.label("agent") == Some(agent))
        .filter_map(|e| {
            let instance_name = WorkloadInstanceName::parse(e.label("name")?).ok()?;
            Some(ListedWorkload { instance_name, workload_id: WorkloadId(e.id.clone()), state: state_from_ps(e) })
        })
        .collect()
}

/// The running watcher; owns the `podman events` child.
pub(super) struct EventWatcher {
    pub cli: PodmanCli,
    pub runtime: String,
    pub agent: String,
    pub sink: RuntimeEventSender,
    pub shutdown: CancellationToken,
    pub reconcile_interval: Duration,
    /// Whether podman answered last time (Health is sent on a change).
    pub reachable: std::sync::atomic::AtomicBool,
}

impl EventWatcher {
    pub fn label(agent: &str) -> String {
        format!("agent={agent}")
    }

    /// Runs until shutdown, starting with the already spawned `first` child.
    pub async fn run(self, first: Child) {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
        let mut next = Some(first);
        loop {
            let child = match next.take() {
                Some(c) => c,
                None => match self.cli.spawn_events(&Self::label(&self.agent), EVENT_REPLAY) {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!("cannot start podman events: {e}");
                        self.report_health(RuntimeHealth::Unreachable(e.to_string())).await;
                        if !self.pause(&mut backoff).await {
                            return;
                        }
                        continue;
                    }
                },
            };
            if !self.follow(child, &mut backoff).await {
                return;
            }
            tracing::warn!("podman events stream ended; restarting it");
            if !self.pause(&mut backoff).await {
                return;
            }
        }
    }

    /// Sleeps one backoff step; false when shut down meanwhile.
    async fn pause(&self, backoff: &mut Backoff) -> bool {
        tokio::select! {
            () = self.shutdown.cancelled() => false,
            () = tokio::time::sleep(backoff.next_delay()) => true,
        }
    }

    /// Reads one child's events until it ends (true) or shutdown (false).
    async fn follow(&self, mut child: Child, backoff: &mut Backoff) -> bool {
        let Some(stdout) = child.stdout.take() else {
            return true;
        };
        let mut lines = BufReader::new(stdout).lines();
        self.reconcile().await;
        let mut tick = tokio::time::interval_at(Instant::now() + self.reconcile_interval, self.reconcile_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => {
                    let _ = child.kill().await;
                    return false;
                }
                line = lines.next_line() => match line {
                    Ok(Some(line)) => {
                        backoff.reset();
                        if let Some(ev) = event_from_line(&line, &self.agent)
                            && self.sink.send(ev).await.is_err()
                        {
                            return false;
                        }
                    }
                    Ok(None) | Err(_) => {
                        let _ = child.kill().await;
                        return true;
                    }
                },
                _ = tick.tick() => self.reconcile().await,
            }
        }
    }

    /// One `podman ps --all` pass, sent as a snapshot.
    // [impl->swdd~podman-state-getter-uses-podmancli~1]
    async fn reconcile(&self) {
        let taken_at = Instant::now();
        match self.cli.ps_by_label(&Self::label(&self.agent)).await {
            Ok(entries) => {
                self.report_health(RuntimeHealth::Reachable).await;
                let workloads = listed_from_ps(&entries, &self.agent);
                let _ =
                    self.sink.send(RuntimeEvent::Snapshot { runtime: self.runtime.clone(), taken_at, workloads }).await;
            }
            Err(e) => {
                tracing::warn!("reconcile with podman ps failed: {e}");
                self.report_health(RuntimeHealth::Unreachable(e.to_string())).await;
            }
        }
    }

    /// Tells the agent when podman becomes reachable or unreachable.
    // [feature H4: the agent's Health condition]
    async fn report_health(&self, health: RuntimeHealth) {
        let reachable = health == RuntimeHealth::Reachable;
        if self.reachable.swap(reachable, std::sync::atomic::Ordering::Relaxed) != reachable {
            let _ = self.sink.send(RuntimeEvent::Health { runtime: self.runtime.clone(), health }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIED_3: &str = r#"{"ID":"1dd2","Image":"localhost/busybox:latest","Name":"xt","Status":"died","Time":"2026-11-23T02:58:45.593390447Z","Type":"container","ContainerExitCode":3,"Attributes":{"agent":"agent_T","name":"x.abc.agent_T"}}"#;
    const DIED_0: &str = r#"{"ID":"b1cb","Image":"localhost/busybox:latest","Name":"probe3","Status":"died","Time":"2026-11-23T03:13:51.650784414Z","Type":"container","Attributes":{"agent":"agent_T","name":"z.abc.agent_T"}}"#;
    const START: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"start","Time":"2026-11-23T03:13:50.026329226Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;
    const REMOVE: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"remove","Time":"2026-11-23T03:13:51.435794149Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;
    const CLEANUP: &str = r#"{"ID":"2af2","Image":"localhost/busybox:latest","Name":"probe2","Status":"cleanup","Time":"2026-11-23T03:13:51.381597637Z","Type":"container","Attributes":{"agent":"agent_T","name":"y.abc.agent_T"}}"#;

    fn changed(line: &str) -> Option<(String, String, Observed)> {
        match event_from_line(line, "agent_T")? {
            RuntimeEvent::Changed { instance_name, workload_id, observed } => {
                Some((instance_name.to_string(), workload_id.0, observed))
            }
            RuntimeEvent::Snapshot { .. } | RuntimeEvent::ChangedById { .. } | RuntimeEvent::Health { .. } => None,
        }
    }

    #[test]
    // [utest->swdd~podman-state-getter-maps-state~3]
    fn podman_events_died_with_exit_code_3_is_exec_failed() {
        let (name, id, observed) = changed(DIED_3).unwrap();
        assert_eq!(name, "x.abc.agent_T");
        assert_eq!(id, "1dd2");
        assert_eq!(
            observed,
            Observed::State(ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), "Exit code: '3'"))
        );
    }

    #[test]
    fn podman_events_died_without_exit_code_is_succeeded() {
        assert_eq!(changed(DIED_0).unwrap().2, Observed::State(ExecutionState::succeeded()));
    }

    #[test]
    // [utest->swdd~podman-state-getter-returns-lost-state~1]
    fn podman_events_start_is_running_and_remove_is_gone() {
        assert_eq!(changed(START).unwrap().2, Observed::State(ExecutionState::running()));
        assert_eq!(changed(REMOVE).unwrap().2, Observed::Gone);
        assert_eq!(changed(CLEANUP), None);
    }

    #[test]
    fn podman_events_garbage_and_foreign_lines_are_ignored() {
        for line in ["", "not json", "{", "[1,2]", r#"{"Status":"start"}"#, r#"{"ID":5}"#] {
            assert_eq!(event_from_line(line, "agent_T"), None, "{line}");
        }
        // another agent's container, and a label that is no instance name
        assert_eq!(event_from_line(START, "agent_U"), None);
        let bad_name = START.replace("y.abc.agent_T", "not-an-instance");
        assert_eq!(event_from_line(&bad_name, "agent_T"), None);
        let image_event = START.replace("\"container\"", "\"image\"");
        assert_eq!(event_from_line(&image_event, "agent_T"), None);
    }

    #[test]
    // [utest->swdd~podman-state-getter-maps-state~3]
    // [utest->swdd~podman-state-getter-returns-unknown-state~1]
    // [utest->swdd~podman-list-of-existing-workloads-uses-labels~1]
    fn podman_ps_states_map_like_ankaios() {
        let entry = |state: &str, code: i32| PsEntry {
            id: "1".into(),
            names: vec![],
            state: state.into(),
            exit_code: code,
            labels: Some([("agent".into(), "a".into()), ("name".into(), "w.h.a".into())].into_iter().collect()),
            pod: String::new(),
            is_infra: false,
        };
        assert_eq!(state_from_ps(&entry("running", 0)), ExecutionState::running());
        assert_eq!(state_from_ps(&entry("exited", 0)), ExecutionState::succeeded());
        assert_eq!(state_from_ps(&entry("exited", 3)).kind, StateKind::Failed(Failed::ExecFailed));
        assert_eq!(state_from_ps(&entry("created", 0)).kind, StateKind::Pending(Pending::Starting));
        assert_eq!(state_from_ps(&entry("paused", 0)).kind, StateKind::Failed(Failed::Unknown));
        let listed = listed_from_ps(&[entry("running", 0)], "a");
        assert_eq!(listed[0].instance_name.to_string(), "w.h.a");
        assert!(listed_from_ps(&[entry("running", 0)], "b").is_empty());
    }
}
