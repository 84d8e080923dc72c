//! The update path on the actor: an update request is checked and merged
//! into a new desired state, placed and rendered for the agents, saved,
//! made current, and its job opened; the states the server decides for the
//! change (Pending(Initial), NotScheduled) are recorded and pushed.

use ank_common::convert::PartialCompleteState;
use ank_common::messages::{FromServer, ResponseContent};

use super::placement::AgentChange;
use super::{AnkaiosServer, Prepared};
use crate::connections::Connections;
use crate::desired_state::{self, DesiredState, StateDiff};
use crate::health_gate::observe;
use crate::hooks::flow::ChainError;
use crate::rendering;
use crate::requests::{self, rejected};
use crate::seq_pools::SeqPoolsError;
use crate::state_file::StateFileError;

/// Why a new desired state is not accepted (each worded as before:
/// the text goes into the update's answer).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcceptError {
    /// The `${seq:N}` numbers cannot be taken or saved.
    #[error(transparent)]
    SeqPools(#[from] SeqPoolsError),
    /// The state file cannot be written.
    #[error(transparent)]
    StateFile(#[from] StateFileError),
    /// A chain of mutating hooks refused the change, or its answer
    /// cannot be applied.
    #[error(transparent)]
    Hooks(#[from] ChainError),
}

impl AnkaiosServer {
    pub(crate) fn update_state(&mut self, new_state: &PartialCompleteState, update_mask: &[String]) -> ResponseContent {
        let next = match prepare_update(&self.desired.current, &self.conns, new_state, update_mask) {
            Ok(next) => next,
            Err(answer) => return answer,
        };
        let began = tokio::time::Instant::now();
        // With hooks configured, changes go through `start_update` and
        // `server_change` instead.
        debug_assert!(self.hooks.registry.is_empty(), "a change bypassed the mutating hooks");
        let result = self.prepare_accept(next, &[]).and_then(|prepared| self.commit(prepared));
        if let Ok((diff, job)) = &result {
            // With the agent's podman timings, a timeline of a start.
            tracing::debug!(
                "update accepted as job {job}: {} added, {} deleted; sent to the agents after {:.1} ms",
                diff.added_instance_names().len(),
                diff.deleted_instance_names().len(),
                began.elapsed().as_secs_f64() * 1e3
            );
        }
        self.update_answer(new_state, update_mask, result)
    }

    /// The answer to an update whose new state was accepted or not.
    pub(crate) fn update_answer(
        &mut self,
        new_state: &PartialCompleteState,
        update_mask: &[String],
        result: Result<(StateDiff, u64), AcceptError>,
    ) -> ResponseContent {
        match result {
            Ok((diff, job_id)) => {
                // Agents whose labels changed may now take NotScheduled
                // workloads, or no longer match theirs.
                for agent in requests::update_agent_tags(&mut self.conns, new_state, update_mask) {
                    self.placement_on(AgentChange::Advertised(&agent));
                }
                ResponseContent::UpdateStateSuccess {
                    added_workloads: diff.added_instance_names(),
                    deleted_workloads: diff.deleted_instance_names(),
                    job_id,
                    hook_changes: Vec::new(),
                }
            }
            Err(e) => ResponseContent::Error(format!("Update rejected: '{e}'")),
        }
    }

    /// The rendering of `next` finished for the agents: placed, `moves`
    /// applied, `${seq:N}` numbers planned.
    pub(crate) fn prepare_accept(
        &mut self,
        mut next: DesiredState,
        moves: &[(String, String)],
    ) -> Result<Prepared, AcceptError> {
        // Placement first: the ${seq:N} pools are per agent.
        let placement = self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states);
        self.io.out.append(placement.place_update(&mut next.rendered, moves));
        let table = rendering::render_for_agents(&self.lifecycle.seq, &self.desired.current, &self.states, &mut next)
            .inspect_err(|e| tracing::warn!("update rejected: {e}"))?;
        Ok(Prepared { next, table })
    }

    /// Saves and applies a prepared state (the `${seq:N}` numbers first,
    /// then the state file; not saved means not accepted) and opens its job.
    pub(crate) fn commit(&mut self, prepared: Prepared) -> Result<(StateDiff, u64), AcceptError> {
        let Prepared { next, table } = prepared;
        self.lifecycle.seq.save(&table).inspect_err(|e| tracing::error!("update rejected: {e}"))?;
        if next.state != self.desired.current.state
            && let Some(file) = &self.desired.file
            && let Err(e) = file.save(&next.state)
        {
            tracing::error!("update rejected: {e}");
            return Err(e.into());
        }
        self.lifecycle.seq.commit(table);
        Ok(self.switch_to(next))
    }

    /// Makes `next` (saved already) the current state and opens its job.
    pub(crate) fn switch_to(&mut self, next: DesiredState) -> (StateDiff, u64) {
        if self.io.out.job_pending() {
            // A second change in one command (a queued update after a hook
            // chain, a placement move after a label change): the jobs step
            // over the first change before the second one's job opens, so
            // that the new job sees what went out.
            self.advance_jobs();
        }
        let diff = desired_state::diff(&self.desired.current.rendered, &next.rendered);
        let states = &self.states;
        let before = self.desired.generations.clone();
        self.desired
            .generations
            .advance(&self.desired.current.rendered, &next.rendered, |name| states.max_generation(name));
        let old = std::mem::replace(&mut self.desired.current, next);
        // The gates follow the change; the revert marks of new specs go.
        let (gates, file) = (&mut self.lifecycle.gates, self.lifecycle.gate_file.as_ref());
        let now = tokio::time::Instant::now();
        for name in observe::follow_change(gates, file, &self.desired.current, &self.desired.generations, &before, now)
        {
            self.states.clear_reverted(&name);
        }
        let workloads = &self.desired.current.state.workloads;
        self.states.retain_events(|name| workloads.contains_key(name));
        rendering::record_escalations(&self.desired.current, &mut self.states, &old.rendered);
        // The states the server decides for the change, then its job,
        // which hands the changes to the agents in dependency order.
        let (current, generations, placer) = (&self.desired.current, &self.desired.generations, &self.lifecycle.placer);
        let changed =
            self.states.record_decided(&diff, &current.rendered, generations, |n| placer.not_scheduled_state(n));
        if !changed.is_empty() {
            self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        let generations = &self.desired.generations;
        let (id, out) = self.jobs.open_job(&mut self.states, &old.rendered, &diff, false, generations);
        self.io.out.append(out);
        tracing::info!(
            "job {id}: {} workloads to add, {} to delete",
            diff.added.values().map(Vec::len).sum::<usize>(),
            diff.deleted.values().map(Vec::len).sum::<usize>()
        );
        // The jobs advance once the command was handled; what they hand
        // out goes here, before the answer to the change.
        self.io.out.job_opened();
        (diff, id)
    }
}

/// The new desired state an update asks to make of `current` (the
/// masks into the agents checked against `conns`), or the refusal.
pub(crate) fn prepare_update(
    current: &DesiredState,
    conns: &Connections,
    new_state: &PartialCompleteState,
    update_mask: &[String],
) -> Result<DesiredState, ResponseContent> {
    // The effective state is computed, never written; an effectiveState
    // part of a new state without such a mask is ignored, as in Ankaios.
    if let Some(mask) = update_mask.iter().find(|m| m.split('.').next() == Some("effectiveState")) {
        return Err(rejected(format!(
            "'{mask}' is read-only: the effective state is computed from the desired state; update 'desiredState' instead"
        )));
    }
    if let Err(mask) = requests::check_update_masks(current, conns, new_state, update_mask) {
        return Err(rejected(format!("Could not find field {mask}")));
    }
    desired_state::apply_update(current, new_state, update_mask).map_err(|e| rejected(e.to_string()))
}
