//! Wait mode of `apply`, `run` and `delete`: after the server accepted an
//! update, follow the instances it added until each reached a final state
//! and the ones it deleted until each is `Removed` or gone. [`WaitTracker`]
//! is the pure bookkeeping; [`wait_for`] feeds it one state snapshot and
//! then the updates the server pushes on the connection, in stream order.

use std::collections::{BTreeMap, BTreeSet};

use ank_common::execution_state::Pending;
use ank_common::instance_name::InstanceNameError;
use ank_common::messages::{RequestContent, ResponseContent};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};
use anyhow::{Context, bail};
use tokio::time::Instant;

use crate::connection::Connection;
use crate::output::WorkloadRow;
use crate::view::StateView;

/// What a tracked instance is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// An added instance: any final state.
    Settled,
    /// A deleted instance: `Removed` or absent from the state.
    Removed,
}

#[derive(Debug, Clone)]
struct Tracked {
    goal: Goal,
    state: Option<ExecutionState>,
    /// Sticky: a late, older report does not make a finished instance
    /// pending again.
    done: bool,
    /// Its agent was not connected at the snapshot: it is waited for until
    /// then, unless the agent reports it meanwhile.
    away_until: Option<Instant>,
}

/// How long an instance whose agent was not connected at the snapshot is
/// still waited for. Ankaios' `ank` stops waiting for such instances at
/// once; an agent started together with the apply (a boot script, a test)
/// is then often connecting just as the snapshot is taken, and its reports
/// would be missed. An agent that stays away ends the wait after this.
pub const AWAY_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// The instances an update added and deleted and how far they got.
#[derive(Debug, Clone, Default)]
pub struct WaitTracker {
    entries: BTreeMap<WorkloadInstanceName, Tracked>,
    runtimes: BTreeMap<String, String>,
}

impl WaitTracker {
    /// Tracks the instance names of an `UpdateStateSuccess`. An instance
    /// both deleted and added (same runtime config) is waited for as added.
    pub fn new(added: &[String], deleted: &[String]) -> Result<Self, InstanceNameError> {
        let mut entries = BTreeMap::new();
        for (names, goal) in [(deleted, Goal::Removed), (added, Goal::Settled)] {
            for name in names {
                let instance = WorkloadInstanceName::parse(name)?;
                entries.insert(instance, Tracked { goal, state: None, done: false, away_until: None });
            }
        }
        Ok(Self { entries, runtimes: BTreeMap::new() })
    }

    /// Runtimes (by workload name) shown in the table.
    pub fn with_runtimes(mut self, runtimes: BTreeMap<String, String>) -> Self {
        self.runtimes.extend(runtimes);
        self
    }

    /// Applies pushed states, in the order they were reported.
    pub fn apply_update(&mut self, states: &[WorkloadState]) {
        for s in states {
            if let Some(t) = self.entries.get_mut(&s.instance_name) {
                t.state = Some(s.execution_state.clone());
                t.done |= reached(t.goal, &s.execution_state);
                // Pending(Initial) is the server's own; anything else comes
                // from the agent, which is there after all.
                if s.execution_state.kind != StateKind::Pending(Pending::Initial) {
                    t.away_until = None;
                }
            }
        }
    }

    /// Applies a full snapshot of the workload states and the connected
    /// agents, taken at `now`: deleted instances absent from it are gone,
    /// and instances on agents that are not connected will get no report
    /// unless their agent is just connecting, so they are waited for only
    /// [`AWAY_GRACE`] after the first snapshot that found their agent away
    /// (see [`Self::expire`]).
    pub fn apply_snapshot(&mut self, states: &[WorkloadState], connected_agents: &BTreeSet<String>, now: Instant) {
        self.apply_update(states);
        let present: BTreeSet<&WorkloadInstanceName> = states.iter().map(|s| &s.instance_name).collect();
        for (instance, t) in &mut self.entries {
            // A deleted instance absent from the state is gone: its agent
            // reported it Removed and the server forgot it (Ankaios' server
            // pushes that report to agents only). A row shown before ends
            // as Removed; one never shown stays hidden, as Ankaios shows
            // rows only for reported states.
            if t.goal == Goal::Removed && !present.contains(instance) {
                if !t.done && t.state.is_some() {
                    t.state = Some(ExecutionState::removed());
                }
                t.done = true;
            } else if !t.done {
                if connected_agents.contains(&instance.agent_name) {
                    // The agent is there now: its report will come.
                    t.away_until = None;
                } else {
                    // The grace runs from the first snapshot that found the
                    // agent away: a server that pushes no states is polled
                    // every second, and starting it over each time would
                    // never end the wait (Ankaios' server, an absent agent).
                    t.away_until.get_or_insert(now + AWAY_GRACE);
                }
            }
        }
    }

    /// Gives up on the instances whose agent stayed away past its grace.
    pub fn expire(&mut self, now: Instant) {
        for t in self.entries.values_mut() {
            if t.away_until.is_some_and(|until| until <= now) {
                t.done = true;
                t.away_until = None;
            }
        }
    }

    /// Whether every tracked instance reached its goal.
    pub fn is_done(&self) -> bool {
        self.entries.values().all(|t| t.done)
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Table rows of the tracked instances that have a state, each with
    /// whether it reached its goal.
    pub fn rows(&self) -> Vec<(WorkloadRow, bool)> {
        self.entries
            .iter()
            .filter(|(_, t)| t.state.is_some())
            .map(|(i, t)| {
                let row = WorkloadRow {
                    name: i.workload_name.clone(),
                    agent: i.agent_name.clone(),
                    runtime: self.runtimes.get(&i.workload_name).cloned().unwrap_or_default(),
                    state: t.state.clone(),
                    ..Default::default()
                };
                (row, t.done)
            })
            .collect()
    }
}

fn reached(goal: Goal, state: &ExecutionState) -> bool {
    match goal {
        // A workload the agent's scheduler holds back (no room in its quota,
        // an isolated job running, preempted) has come to rest too: it may
        // wait for capacity for a long time.
        Goal::Settled => {
            state.is_final()
                || matches!(
                    state.kind,
                    StateKind::AgentDisconnected
                        | StateKind::Pending(Pending::QuotaBlocked | Pending::Postponed | Pending::Preempted)
                )
        }
        Goal::Removed => matches!(state.kind, StateKind::Removed | StateKind::AgentDisconnected),
    }
}

/// How often the spinner of the wait table steps, as in Ankaios.
pub const SPINNER_STEP: std::time::Duration = std::time::Duration::from_millis(100);

/// How often [`wait_for`] reads the workload states itself from a server
/// that pushes none ([`Connection::pushes_states`]): Ankaios' server pushes
/// none to a commander, so without this a wait against it never ends.
pub const POLL_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What the wait loops report to: every applied update, and every step of
/// the spinner while something is still awaited.
pub trait Progress {
    /// The tracker changed (or was first filled).
    fn changed(&mut self, tracker: &WaitTracker) -> anyhow::Result<()>;
    /// [`SPINNER_STEP`] passed.
    fn tick(&mut self, tracker: &WaitTracker) -> anyhow::Result<()>;
}

/// Follows the tracked instances on `conn` until all reached their goal:
/// one snapshot request, then the pushed updates, or a snapshot every
/// [`POLL_EVERY`] from a server that pushes none. Updates that arrived
/// before the snapshot's response are older than it and applied first.
/// `progress` sees the tracker after the snapshot, after every update and
/// at every spinner step.
pub async fn wait_for(
    conn: &mut Connection,
    tracker: &mut WaitTracker,
    progress: &mut dyn Progress,
) -> anyhow::Result<()> {
    if tracker.is_empty() {
        return Ok(());
    }
    snapshot(conn, tracker).await?;
    progress.changed(tracker)?;
    let mut ticks = tokio::time::interval(SPINNER_STEP);
    let poll = !conn.pushes_states();
    let mut polls = tokio::time::interval_at(tokio::time::Instant::now() + POLL_EVERY, POLL_EVERY);
    while !tracker.is_done() {
        tokio::select! {
            states = conn.next_state_update() => {
                tracker.apply_update(&states.context("lost the server while waiting for the workloads")?);
                progress.changed(tracker)?;
            }
            now = ticks.tick() => {
                tracker.expire(now);
                progress.tick(tracker)?;
            }
            _ = polls.tick(), if poll => {
                snapshot(conn, tracker).await?;
                progress.changed(tracker)?;
            }
        }
    }
    Ok(())
}

/// The parts of the complete state under `masks`, on an open connection;
/// `what` names them in errors.
pub async fn read_state(
    conn: &mut Connection,
    masks: Vec<String>,
    what: &str,
) -> anyhow::Result<ank_common::convert::PartialCompleteState> {
    let request = RequestContent::CompleteState { field_mask: masks, subscribe_for_events: false };
    match conn.request(request).await.with_context(|| format!("cannot read {what}"))? {
        ResponseContent::CompleteState(state) => Ok(*state),
        ResponseContent::Error(msg) => bail!("the server refused to send {what}: {msg}"),
        other => bail!("unexpected answer to a state request: {other:?}"),
    }
}

/// Feeds `tracker` one snapshot of the workload states and agents, after
/// the updates that arrived before it.
pub async fn snapshot(conn: &mut Connection, tracker: &mut WaitTracker) -> anyhow::Result<()> {
    let masks = vec!["workloadStates".to_owned(), "agents".to_owned()];
    let view = StateView::of(read_state(conn, masks, "the workload states").await?);
    while let Some(states) = conn.take_pushed() {
        tracker.apply_update(&states);
    }
    tracker.apply_snapshot(&view.workload_state_list(), &view.agent_names(), Instant::now());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ank_common::execution_state::{Pending, Stopping};

    fn st(instance: &str, kind: StateKind) -> WorkloadState {
        WorkloadState::new(WorkloadInstanceName::parse(instance).unwrap(), ExecutionState::new(kind))
    }

    fn now() -> Instant {
        Instant::now()
    }

    fn agents(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn wait_added_instances_finish_in_final_states() {
        let mut t = WaitTracker::new(&["a.1.ag".into(), "b.2.ag".into()], &[]).unwrap();
        t.apply_snapshot(&[st("a.1.ag", StateKind::Pending(Pending::Initial))], &agents(&["ag"]), now());
        assert!(!t.is_done());
        t.apply_update(&[st("a.1.ag", StateKind::Running), st("b.2.ag", StateKind::Pending(Pending::Starting))]);
        assert!(!t.is_done());
        t.apply_update(&[st("b.2.ag", StateKind::Failed(ank_common::execution_state::Failed::ExecFailed))]);
        assert!(t.is_done(), "a failed workload is final too");
        let rows = t.rows();
        assert_eq!(rows[0].0.state.as_ref().unwrap().to_string(), "Running(Ok)");
        assert_eq!(rows[1].0.state.as_ref().unwrap().to_string(), "Failed(ExecFailed)");
        assert!(rows.iter().all(|(_, settled)| *settled));
    }

    #[test]
    fn wait_deleted_instances_finish_when_removed_or_gone() {
        let mut t = WaitTracker::new(&[], &["a.1.ag".into(), "b.2.ag".into()]).unwrap();
        t.apply_snapshot(&[st("a.1.ag", StateKind::Stopping(Stopping::RequestedAtRuntime))], &agents(&["ag"]), now());
        assert!(!t.is_done(), "a is still stopping");
        t.apply_update(&[st("a.1.ag", StateKind::Running)]);
        assert!(!t.is_done(), "Running is no goal for a deleted instance");
        t.apply_update(&[st("a.1.ag", StateKind::Removed)]);
        assert!(t.is_done(), "b was absent from the snapshot, a is removed");
        let rows = t.rows();
        assert_eq!(rows.len(), 1, "b never had a reported state: no row");
        assert_eq!(rows[0].0.state, Some(ExecutionState::removed()));
        let mut t = WaitTracker::new(&[], &["c.3.gone".into()]).unwrap();
        let at = now();
        t.apply_snapshot(&[st("c.3.gone", StateKind::Running)], &agents(&["ag"]), at);
        assert!(!t.is_done(), "its agent may be just connecting");
        t.expire(at + AWAY_GRACE);
        assert!(t.is_done(), "an instance of an agent that stays away is not waited for");
        let mut t = WaitTracker::new(&[], &["d.4.ag".into()]).unwrap();
        t.apply_update(&[st("d.4.ag", StateKind::AgentDisconnected)]);
        assert!(t.is_done(), "nor one whose agent disconnected");
    }

    #[test]
    fn wait_a_shown_deleted_instance_gone_from_a_snapshot_ends_removed() {
        let mut t = WaitTracker::new(&[], &["a.1.ag".into()]).unwrap();
        t.apply_snapshot(&[st("a.1.ag", StateKind::Stopping(Stopping::RequestedAtRuntime))], &agents(&["ag"]), now());
        t.apply_snapshot(&[], &agents(&["ag"]), now());
        assert!(t.is_done());
        assert_eq!(t.rows()[0].0.state, Some(ExecutionState::removed()));
    }

    #[test]
    fn wait_late_updates_do_not_reopen_finished_instances() {
        let mut t = WaitTracker::new(&["n.2.ag".into()], &["n.1.ag".into()]).unwrap();
        // The old instance's Removed arrives after the new one settled.
        t.apply_update(&[st("n.2.ag", StateKind::Running)]);
        t.apply_update(&[st("n.1.ag", StateKind::Removed)]);
        t.apply_update(&[st("n.1.ag", StateKind::Stopping(Stopping::Stopping))]);
        t.apply_snapshot(&[st("n.2.ag", StateKind::Running)], &agents(&["ag"]), now());
        assert!(t.is_done());
        // Updates for instances nobody tracks are ignored.
        t.apply_update(&[st("other.9.ag", StateKind::Pending(Pending::Initial))]);
        assert!(t.is_done());
        assert_eq!(t.rows().len(), 2);
    }

    #[test]
    fn wait_snapshot_replaces_older_pushed_state() {
        // A push from before the snapshot says Pending(Initial); the newer
        // snapshot says Pending(Starting) and replaces it.
        let mut t = WaitTracker::new(&["a.1.ag".into()], &[]).unwrap();
        t.apply_update(&[st("a.1.ag", StateKind::Pending(Pending::Initial))]);
        t.apply_snapshot(&[st("a.1.ag", StateKind::Pending(Pending::Starting))], &agents(&["ag"]), now());
        assert!(!t.is_done());
        assert_eq!(t.rows()[0].0.state.as_ref().unwrap().to_string(), "Pending(Starting)");
        assert!(!t.rows()[0].1);
    }

    #[test]
    fn wait_skips_workloads_of_agents_that_are_not_connected_after_a_grace() {
        let mut t = WaitTracker::new(&["a.1.gone".into()], &[]).unwrap();
        let at = now();
        t.apply_snapshot(&[st("a.1.gone", StateKind::Pending(Pending::Initial))], &agents(&["other"]), at);
        t.apply_update(&[st("a.1.gone", StateKind::Pending(Pending::Initial))]);
        t.expire(at + AWAY_GRACE - std::time::Duration::from_millis(1));
        assert!(!t.is_done(), "within the grace");
        t.expire(at + AWAY_GRACE);
        assert!(t.is_done(), "the server's own Pending(Initial) does not keep the wait going");
    }

    // Against a server that pushes nothing (Ankaios'), `ank` polls a
    // snapshot every second, as long as the grace: a snapshot that finds the
    // agent still away must not start the grace over, or the wait never ends.
    #[test]
    fn wait_a_later_snapshot_does_not_renew_the_grace_of_an_absent_agent() {
        let mut t = WaitTracker::new(&["u.1.".into(), "d.2.gone".into()], &[]).unwrap();
        let at = now();
        let states = [st("u.1.", StateKind::NotScheduled), st("d.2.gone", StateKind::Pending(Pending::Initial))];
        t.apply_snapshot(&states, &agents(&["ag"]), at);
        let poll = at + POLL_EVERY + std::time::Duration::from_millis(3);
        t.apply_snapshot(&states, &agents(&["ag"]), poll);
        t.expire(poll);
        assert!(t.is_done(), "the grace counts from the first snapshot that found the agent away");
    }

    #[test]
    fn wait_follows_an_agent_that_connects_within_the_grace() {
        // Agent and apply started together: the snapshot misses the agent
        // by a fraction of a millisecond, then its reports arrive.
        let mut t = WaitTracker::new(&["a.1.ag".into()], &[]).unwrap();
        let at = now();
        t.apply_snapshot(&[st("a.1.ag", StateKind::Pending(Pending::Initial))], &agents(&[]), at);
        t.apply_update(&[st("a.1.ag", StateKind::Pending(Pending::Starting))]);
        t.expire(at + AWAY_GRACE * 5);
        assert!(!t.is_done(), "the agent reported: it is followed to the end");
        t.apply_update(&[st("a.1.ag", StateKind::Running)]);
        assert!(t.is_done());
    }

    #[test]
    fn wait_same_instance_deleted_and_added_waits_as_added() {
        let mut t = WaitTracker::new(&["a.1.ag".into()], &["a.1.ag".into()]).unwrap();
        t.apply_snapshot(&[], &agents(&["ag"]), now());
        assert!(!t.is_done(), "absence does not finish an added instance");
        t.apply_update(&[st("a.1.ag", StateKind::Succeeded)]);
        assert!(t.is_done());
    }

    #[test]
    fn wait_rejects_malformed_instance_names() {
        assert!(WaitTracker::new(&["no-dots".into()], &[]).is_err());
    }
}

#[cfg(test)]
mod scheduler_wait_tests {
    use super::*;

    // [test of feature K2: an apply does not wait for quota-blocked workloads to get room]
    #[test]
    fn workloads_the_scheduler_holds_back_count_as_settled() {
        for p in [Pending::QuotaBlocked, Pending::Postponed, Pending::Preempted, Pending::Canceled] {
            assert!(reached(Goal::Settled, &ExecutionState::new(StateKind::Pending(p))), "{p:?}");
        }
        assert!(!reached(Goal::Settled, &ExecutionState::new(StateKind::Pending(Pending::WaitingToStart))));
    }
}
