//! The server's side of placement: a workload with an `agentSelector` (and
//! no `agent`) gets the agent placement chooses written into the *rendered*
//! desired state, so a (re)placement is an internal update of the rendered
//! state that goes the usual way: diff, job, agents. The user's state keeps
//! the selector and no agent.
//!
//! When placement runs: on every accepted update (new or changed
//! selectors; unchanged ones keep their agent), when an agent connects or
//! its advertisement changes (NotScheduled workloads it may run), and at
//! the server's tick: workloads whose agent stayed away longer than the
//! agent-loss grace (`migration: onAgentLoss` and `rebalance`) and the
//! periodic pass of `migration: rebalance` workloads. Events: `Scheduled`,
//! `Unschedulable` (only when its reason changes) and `Rescheduled`.
//!
//! An agent's metrics come with its load reports, not its hello: until its
//! first one, placement does not judge the agent by metric constraints (nor
//! rebalance a workload on it). A workload only such an agent may fit waits
//! as NotScheduled "waiting for the first load report of ..." without an
//! `Unschedulable` event, and is placed when the report comes.
//!
//! A pass borrows what it reads and writes ([`Placement`]) and returns its
//! effects ([`Moved`]): the messages to send and the moves, which the actor
//! makes as an internal update.

use std::collections::BTreeMap;
use std::time::Duration;

use ank_common::duration::format_elapsed;
use ank_common::workload_events::EventKind;
use ank_common::workload_policy::Migration;
use ank_common::{ExecutionState, State, StateKind, WorkloadState};
use tokio::time::Instant;

use crate::connections::{Connections, Outbox};
use crate::desired_state::{ChangeName, DesiredState, ServerChange};
use crate::placement::{AgentInfo, Constraints, Decision, Placer};
use crate::workload_states::WorkloadStateStore;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
static NO_METRICS: BTreeMap<String, f64> = BTreeMap::new();

/// What placement sees of every agent known in this server's life, by
/// name: the connected ones with their advertisement, the others offline.
fn agent_infos(conns: &Connections) -> Vec<AgentInfo<'_>> {
    let mut infos: Vec<AgentInfo<'_>> = conns
        .agent_attributes()
        .map(|(name, a)| AgentInfo {
            name,
            connected: true,
            labels: &a.tags,
            capabilities: &a.capabilities,
            metrics: a.metrics.as_map(),
            reported: conns.status_reported(name),
        })
        .collect();
    for name in conns.seen().keys().filter(|name| !conns.is_connected(name)) {
        infos.push(AgentInfo {
            name,
            connected: false,
            labels: &NO_LABELS,
            capabilities: &[],
            metrics: &NO_METRICS,
            reported: false,
        });
    }
    infos.sort_by(|a, b| a.name.cmp(b.name));
    infos
}

/// Why a placed workload is looked at again.
pub(crate) enum Due {
    /// Its agent is gone this long, more than the grace.
    Lost(Duration),
    /// Its periodic rebalance pass.
    Rebalance,
}

/// The outcome of a placement pass, applied after the decisions.
#[derive(Default)]
struct Pass {
    /// Workload -> its new agent ("" for NotScheduled).
    moves: Vec<(String, String)>,
    /// Events to record.
    events: Vec<(String, EventKind, String)>,
    /// Workloads that cannot be placed, with the reason.
    unschedulable: Vec<(String, String)>,
    /// Workloads waiting for the first load report of an agent they may
    /// fit, with the reason (no event).
    awaiting: Vec<(String, String)>,
}

/// What a placement pass reads and writes.
pub(crate) struct Placement<'a> {
    pub(crate) placer: &'a mut Placer,
    pub(crate) conns: &'a Connections,
    /// The desired state in force.
    pub(crate) current: &'a DesiredState,
    pub(crate) states: &'a mut WorkloadStateStore,
}

/// The effects of a pass: the messages to send (the NotScheduled rows that
/// changed), then the moves (workload, agent; "" for NotScheduled) to make
/// as an internal update.
#[derive(Default)]
pub(crate) struct Moved {
    pub(crate) out: Outbox,
    pub(crate) moves: Vec<(String, String)>,
}

/// What placement looks at.
pub(crate) enum Occasion<'a> {
    /// An agent connected: it is back, and may run NotScheduled workloads.
    Joined(&'a str),
    /// An agent disconnected: its workloads may move after the grace.
    Left(&'a str),
    /// An agent's advertisement (labels, capabilities, first metrics)
    /// changed.
    Advertised(&'a str),
    /// An agent's metrics changed after its first load report.
    Metrics(&'a str),
    /// The placed workloads due again at a tick ([`Placement::due`]).
    Due(Vec<(String, Due)>, Instant),
}

impl Moved {
    /// The messages to send, and the moves as a change of `current`'s
    /// user state (rendered again when the change is made); `None`
    /// without moves.
    pub(crate) fn into_change(self, current: &DesiredState) -> (Outbox, Option<ServerChange>) {
        let Moved { out, moves } = self;
        if moves.is_empty() {
            return (out, None);
        }
        let what = format!("placement of {} workloads", moves.len());
        let name = ChangeName { what, stays: "tried again at its next occasion" };
        (out, Some(ServerChange { state: current.state.clone(), moves, name }))
    }
}

impl Placement<'_> {
    /// Lets placement react to `occasion`; returns what it moved.
    pub(crate) fn on(self, occasion: Occasion<'_>) -> Moved {
        match occasion {
            Occasion::Joined(agent) => self.agent_joined(agent),
            Occasion::Left(agent) => self.agent_left(agent),
            Occasion::Advertised(agent) => self.agent_changed(agent),
            Occasion::Metrics(agent) => self.metrics_changed(agent),
            Occasion::Due(due, now) => self.reschedule(due, now),
        }
    }

    /// Writes the agents of the selector workloads of `next` (a rendered
    /// state about to replace the current one): a workload of `moves`
    /// (workload, agent; "" for NotScheduled) goes where its move says,
    /// decided and recorded by the pass that moves it; an unchanged
    /// selector keeps its agent, a new or changed one (or one not placed
    /// yet) is placed, the old agent getting the stickiness bonus.
    // [feature S1: the chosen agent is written into the rendered state]
    pub(crate) fn place_update(mut self, next: &mut State, moves: &[(String, String)]) -> Outbox {
        let now = Instant::now();
        let mut pass = Pass::default();
        {
            let agents = agent_infos(self.conns);
            for (name, wl) in next.workloads.iter_mut().filter(|(_, wl)| wl.agent.is_empty()) {
                let Some(selector) = &wl.agent_selector else { continue };
                if let Some((_, agent)) = moves.iter().find(|(moved, _)| moved == name.as_str()) {
                    wl.agent.clone_from(agent);
                    continue;
                }
                let old = self.current.base().workloads.get(name.as_str());
                let old_agent = old.map(|o| o.agent.as_str()).filter(|a| !a.is_empty());
                if let Some(agent) = old_agent
                    && old.and_then(|o| o.agent_selector.as_ref()) == Some(selector)
                {
                    wl.agent = agent.to_owned();
                    continue;
                }
                match self.placer.decide(selector, old_agent, &agents) {
                    d @ Decision::Placed { .. } => {
                        let reason = d.scheduled_reason().unwrap_or_default();
                        if let Decision::Placed { agent, .. } = d {
                            wl.agent = agent;
                        }
                        pass.events.push((name.to_string(), EventKind::Scheduled, reason));
                    }
                    Decision::Unschedulable { reason } => pass.unschedulable.push((name.to_string(), reason)),
                    Decision::AwaitingReport { reason } => pass.awaiting.push((name.to_string(), reason)),
                }
            }
        }
        self.placer.retain(|name| next.workloads.get(name).is_some_and(|wl| wl.agent_selector.is_some()));
        for (name, _, _) in &pass.events {
            self.placer.placed(name, now);
        }
        self.note(pass)
    }

    /// `agent` connected: it is back, and may run NotScheduled workloads.
    fn agent_joined(self, agent: &str) -> Moved {
        self.placer.agent_back(agent);
        self.agent_changed(agent)
    }

    /// `agent` disconnected: its workloads may move after the grace, and
    /// the reasons of NotScheduled ones may change (one may have awaited
    /// its first load report).
    fn agent_left(self, agent: &str) -> Moved {
        self.placer.agent_lost(agent, Instant::now());
        self.agent_changed(agent)
    }

    /// The advertisement of `agent` changed (it connected or left, its
    /// labels changed, or its first load report brought its metrics):
    /// every NotScheduled selector workload that `agent` may run now is
    /// placed (on the best candidate, which need not be `agent`); one that
    /// still no agent may run gets its reason again (an event if it changed,
    /// none while it awaits an agent's first load report).
    // [feature S1: NotScheduled workloads are placed when a fitting agent appears]
    fn agent_changed(self, agent: &str) -> Moved {
        self.place_waiting(agent, true)
    }

    /// The metrics of `agent` changed after its first load report: the
    /// NotScheduled selector workloads it may run now are placed. (The
    /// reasons of the others are not judged again at every load report:
    /// their texts name no values, and it would cost a decision per
    /// waiting workload and report.)
    fn metrics_changed(self, agent: &str) -> Moved {
        self.place_waiting(agent, false)
    }

    /// Places the NotScheduled workloads `agent` may run; with `reasons`,
    /// judges the others again.
    fn place_waiting(self, agent: &str, reasons: bool) -> Moved {
        let waiting = self.current.rendered.workloads.iter().filter(|(_, wl)| wl.agent.is_empty());
        let waiting: Vec<String> =
            waiting.filter(|(_, wl)| wl.agent_selector.is_some()).map(|(n, _)| n.to_string()).collect();
        if waiting.is_empty() {
            return Moved::default();
        }
        let mut pass = Pass::default();
        {
            let agents = agent_infos(self.conns);
            let Some(me) = agents.iter().find(|a| a.name == agent).copied() else { return Moved::default() };
            let ranges = self.placer.settings().metrics.clone();
            for name in waiting {
                let wl = self.current.rendered.workloads.get(name.as_str());
                let Some(selector) = wl.and_then(|wl| wl.agent_selector.as_ref()) else { continue };
                let Ok(constraints) = Constraints::new(selector) else { continue };
                if constraints.check(&me, &ranges).is_ok() {
                    let d = self.placer.decide(selector, None, &agents);
                    if let Some(reason) = d.scheduled_reason()
                        && let Decision::Placed { agent, .. } = d
                    {
                        pass.events.push((name.clone(), EventKind::Scheduled, reason));
                        pass.moves.push((name, agent));
                    }
                } else if reasons && !agents.iter().any(|a| constraints.check(a, &ranges).is_ok()) {
                    match self.placer.decide(selector, None, &agents) {
                        Decision::Unschedulable { reason } => pass.unschedulable.push((name, reason)),
                        Decision::AwaitingReport { reason } => pass.awaiting.push((name, reason)),
                        Decision::Placed { .. } => {}
                    }
                }
            }
        }
        self.apply(pass, Instant::now())
    }

    /// The placed selector workloads to look at again now.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<(String, Due)> {
        let any_lost = self.placer.any_lost_beyond_grace(now);
        let mut due = Vec::new();
        let mut rebalance = Vec::new();
        for (name, wl) in &self.current.rendered.workloads {
            if wl.agent.is_empty() || wl.agent_selector.is_none() || wl.migration == Migration::Never {
                continue;
            }
            // [feature S4: onAgentLoss moves only after the agent-loss grace]
            if any_lost && let Some(gone) = self.placer.lost_beyond_grace(&wl.agent, now) {
                due.push((name.to_string(), Due::Lost(gone)));
            } else if wl.migration == Migration::Rebalance
                && self.conns.is_connected(&wl.agent)
                && self.conns.status_reported(&wl.agent)
            {
                rebalance.push(name.to_string());
            }
        }
        for name in rebalance {
            if self.placer.rebalance_due(&name, now) {
                due.push((name, Due::Rebalance));
            }
        }
        due
    }

    /// Places the `due` workloads again and moves those that should go.
    fn reschedule(self, due: Vec<(String, Due)>, now: Instant) -> Moved {
        let mut pass = Pass::default();
        {
            let agents = agent_infos(self.conns);
            let stickiness = self.placer.settings().stickiness;
            for (name, why) in due {
                let Some(wl) = self.current.rendered.workloads.get(name.as_str()) else { continue };
                let Some(selector) = &wl.agent_selector else { continue };
                let current = wl.agent.as_str();
                let d = self.placer.decide(selector, Some(current), &agents);
                match (why, d) {
                    (Due::Lost(gone), Decision::Placed { agent, score, candidates, .. }) => {
                        let reason = format!(
                            "{current} -> {agent}: {current} disconnected for {}; score {score:.2} of {candidates} {}",
                            format_elapsed(gone),
                            if candidates == 1 { "candidate" } else { "candidates" }
                        );
                        pass.events.push((name.clone(), EventKind::Rescheduled, reason));
                        pass.moves.push((name, agent));
                    }
                    (Due::Lost(_), Decision::Unschedulable { reason }) => {
                        pass.unschedulable.push((name.clone(), reason));
                        pass.moves.push((name, String::new()));
                    }
                    // [feature S4: rebalance moves when another agent outscores the current one with its stickiness]
                    (Due::Rebalance, Decision::Placed { agent, score, current_score, current_excluded, .. })
                        if agent != current =>
                    {
                        let reason = match (current_score, current_excluded) {
                            (Some(cs), _) => format!(
                                "{current} -> {agent}: score {score:.2} > {cs:.2} of {current} (stickiness {stickiness} included)"
                            ),
                            (None, why) => format!(
                                "{current} -> {agent}: {current} no longer fits ({}); score {score:.2}",
                                why.map(|w| w.to_string()).unwrap_or_default()
                            ),
                        };
                        pass.events.push((name.clone(), EventKind::Rescheduled, reason));
                        pass.moves.push((name, agent));
                    }
                    _ => {}
                }
            }
        }
        self.apply(pass, now)
    }

    /// Records a pass's events and returns its moves.
    fn apply(mut self, mut pass: Pass, now: Instant) -> Moved {
        for (name, _) in pass.moves.iter().filter(|(_, agent)| !agent.is_empty()) {
            self.placer.placed(name, now);
        }
        let moves = std::mem::take(&mut pass.moves);
        let out = self.note(pass);
        Moved { out, moves }
    }

    /// Records the events of a pass; an Unschedulable reason only when it
    /// changed, also into the workload's NotScheduled row, which also shows
    /// what an awaiting workload waits for (no event: it is not judged yet).
    fn note(&mut self, pass: Pass) -> Outbox {
        for (name, kind, reason) in pass.events {
            tracing::info!("workload '{name}': {} {reason}", kind.as_str());
            self.states.record_event(&name, kind, &reason);
        }
        let mut changed = Vec::new();
        for (name, reason) in pass.unschedulable {
            if !self.placer.unschedulable(&name, &reason) {
                continue;
            }
            tracing::info!("workload '{name}': Unschedulable {reason}");
            self.states.record_event(&name, EventKind::Unschedulable, &reason);
            self.not_scheduled_rows(&name, &mut changed);
        }
        for (name, reason) in pass.awaiting {
            if self.placer.awaiting(&name, &reason) {
                tracing::info!("workload '{name}': {reason}");
                self.not_scheduled_rows(&name, &mut changed);
            }
        }
        let mut out = Outbox::default();
        if !changed.is_empty() {
            out.broadcast(None, ank_common::messages::FromServer::UpdateWorkloadState(changed));
        }
        out
    }

    /// Records the NotScheduled state (with its reason) of the NotScheduled
    /// rows of `workload`; those that changed go to `changed`.
    fn not_scheduled_rows(&mut self, workload: &str, changed: &mut Vec<WorkloadState>) {
        for n in self.states.instances_of("").into_iter().filter(|n| n.workload_name == workload) {
            let state = WorkloadState::new(n.clone(), self.placer.not_scheduled_state(workload));
            if self.states.record(&state) {
                changed.push(self.states.state_of(&n));
            }
        }
    }
}

impl Placer {
    /// The NotScheduled state of `workload`, with why it cannot be placed.
    pub(crate) fn not_scheduled_state(&self, workload: &str) -> ExecutionState {
        match self.reason(workload) {
            Some(reason) => ExecutionState::with_info(StateKind::NotScheduled, reason),
            None => ExecutionState::not_scheduled(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current() -> DesiredState {
        let yaml = "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    runtimeConfig: x\n    agentSelector:\n      matchLabels:\n        zone: a\n";
        DesiredState::new(ank_common::manifest::parse_manifest("t", yaml).unwrap()).unwrap()
    }

    // A pass that moved nothing asks for no change; its messages still go.
    #[test]
    fn a_pass_without_moves_is_no_change() {
        let (_, change) = Moved::default().into_change(&current());
        assert!(change.is_none());
    }

    // The moves become a change of the server's own, rendered again from
    // the user's state and named for the log.
    #[test]
    fn moves_become_a_server_change_of_the_same_user_state() {
        let current = current();
        let moved = Moved { out: Outbox::default(), moves: vec![("w".to_owned(), "B".to_owned())] };
        let (_, change) = moved.into_change(&current);
        let change = change.expect("a change");
        assert_eq!(change.moves, [("w".to_owned(), "B".to_owned())]);
        assert_eq!(change.state, current.state);
        assert_eq!(change.name.what, "placement of 1 workloads");
        assert_eq!(change.name.stays, "tried again at its next occasion");
    }
}
