//! The actor's side of placement: it lends a pass the parts it reads and
//! writes (`Placement`, through `Placer::pass`) and applies what the pass returns: its messages
//! into the outbox, then its moves as an internal update.

use super::AnkaiosServer;
use crate::placement::Moved;

/// What happened to an agent that placement looks at.
pub(super) enum AgentChange<'a> {
    /// It connected: it is back, and may run NotScheduled workloads.
    Joined(&'a str),
    /// It disconnected: its workloads may move after the grace.
    Left(&'a str),
    /// Its advertisement (labels, capabilities, first metrics) changed.
    Advertised(&'a str),
    /// Its metrics changed after its first load report.
    Metrics(&'a str),
}

impl AnkaiosServer {
    /// Lets placement react to what happened to an agent, and moves what
    /// it moved.
    pub(super) fn placement_on(&mut self, change: AgentChange<'_>) {
        let moved = match change {
            AgentChange::Joined(agent) => {
                self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).agent_joined(agent)
            }
            AgentChange::Left(agent) => {
                self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).agent_left(agent)
            }
            AgentChange::Advertised(agent) => {
                self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).agent_changed(agent)
            }
            AgentChange::Metrics(agent) => {
                self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).metrics_changed(agent)
            }
        };
        self.move_workloads(moved);
    }

    /// Sends a pass's messages, then writes the new agents into the
    /// rendered state and dispatches the change like an update: the old
    /// instances are deleted, the new ones handed out by a job.
    pub(super) fn move_workloads(&mut self, moved: Moved) {
        let Moved { out, moves } = moved;
        self.io.out.append(out);
        if moves.is_empty() {
            return;
        }
        if self.hooks.flow.busy() {
            // Not on the base a chain of hooks is working on; placement
            // looks again at its next occasion.
            return tracing::info!("placement of {} workloads waits for the running mutating hooks", moves.len());
        }
        // Rendered again from the user's state, so that the ${seq:N}
        // numbers of a moved workload come from its new agent's pools.
        let next = match self.desired.current.after(self.desired.current.state.clone()) {
            Ok(next) => next,
            Err(e) => return tracing::error!("placement of {} workloads not applied: {e}", moves.len()),
        };
        let what = format!("placement of {} workloads", moves.len());
        if let Err(e) = self.server_change(next, &moves, what.clone()) {
            tracing::error!("{what} not applied: {e}");
        }
    }
}
