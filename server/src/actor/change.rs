//! How the desired state changes: an update request (checked and merged
//! first) or a change the server makes itself (a placement move, reaping,
//! a health gate's revert; [`ServerChange`]) goes one way. It is placed and
//! rendered for the agents, run through the mutating hooks if any
//! (`hooked.rs`), saved (the `${seq:N}` numbers, then the state file: not
//! saved means not accepted), made current, and its job opened; then its
//! origin is told: the update is answered, the server's change logged.
//! The states the server decides for the change (Pending(Initial),
//! NotScheduled) are recorded and pushed.

use ank_common::State;
use ank_common::convert::PartialCompleteState;
use ank_common::messages::{FromServer, HookChange, Response, ResponseContent};

use super::AnkaiosServer;
use crate::connections::{ConnId, Connections, Outbox};
use crate::desired_state::{self, ChangeName, DesiredState, ServerChange, StateDiff};
use crate::health_gate::observe;
use crate::hooks::effect;
use crate::hooks::flow::{ChainError, Running, Update};
use crate::placement::Occasion;
use crate::rendering;
use crate::requests::{self, rejected};
use crate::seq_pools::{SeqPools, SeqPoolsError, SeqTable};
use crate::state_file::{StateFile, StateFileError};

/// A change of the desired state, asked for or the server's own.
pub(crate) enum Change {
    /// An update request (already past the queue of the mutating hooks).
    Update(Update),
    /// A change the server decided.
    Server(Box<ServerChange>),
}

/// Who a change is for, and so how its outcome is told.
pub(crate) enum Origin {
    /// An update request: answered, with which hook changed which
    /// workloads.
    Update(Update, Vec<HookChange>),
    /// The server's own change: logged.
    Server(ChangeName),
    /// The state the server started with, as the mutating hooks made it.
    Initial,
}

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

/// A new desired state ready to be committed, with the `${seq:N}` numbers
/// it took.
pub(crate) struct Prepared {
    pub(crate) next: DesiredState,
    pub(crate) table: SeqTable,
}

/// What a committed change leaves to do: the agents whose labels an update
/// changed (placement looks at them again), then the answer to send.
struct Told {
    retagged: Vec<String>,
    answer: Option<(ConnId, FromServer)>,
}

impl AnkaiosServer {
    /// Makes `change`: refused (answered or logged), started on the chain
    /// of mutating hooks (committed when they answer, `hooked.rs`), or
    /// committed now. The server's own change waits for its next occasion
    /// while a chain runs.
    pub(super) fn change(&mut self, change: Change) {
        let (mut next, moves, origin) = match change {
            Change::Update(update) => {
                let (new_state, mask) = (&update.new_state, &update.update_mask);
                match prepare_update(&self.desired.current, &self.conns, new_state, mask) {
                    Ok(next) => (next, Vec::new(), Origin::Update(update, Vec::new())),
                    Err(answer) => return answer_update(&mut self.io.out, &update, answer),
                }
            }
            Change::Server(change) if self.hooks.flow.busy() => {
                // Not on the base a chain of hooks is working on.
                return tracing::info!("{} waits for the running mutating hooks", change.name);
            }
            Change::Server(change) => {
                let ServerChange { state, moves, name } = *change;
                match self.desired.current.after(state) {
                    Ok(next) => (next, moves, Origin::Server(name)),
                    Err(e) => return name.refused(&e, false),
                }
            }
        };
        // Placement first: the ${seq:N} pools are per agent.
        let placement = self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states);
        self.io.out.append(placement.place_update(&mut next.rendered, &moves));
        let table =
            match rendering::render_for_agents(&self.lifecycle.seq, &self.desired.current, &self.states, &mut next) {
                Ok(table) => table,
                Err(e) => {
                    tracing::warn!("update rejected: {e}");
                    return origin.refused(AcceptError::from(e), false, &mut self.io.out);
                }
            };
        let mut prepared = Prepared { next, table };
        if !self.hooks.registry.is_empty() {
            let Some(input) = effect::input(self.desired.current.base(), &prepared.next.rendered) else {
                let effective = workloads_unchanged(&self.desired.current, &prepared.next.rendered);
                set_effective(&mut prepared.next, effective);
                return self.commit(prepared, origin);
            };
            let prepared = Box::new(prepared);
            let running = match origin {
                Origin::Update(update, _) => Running::Update { update, prepared, input },
                Origin::Server(name) => {
                    tracing::debug!("{name} waits for the mutating hooks");
                    Running::ServerChange { name, prepared, input }
                }
                Origin::Initial => unreachable!("the loaded state goes through the hooks when the loop starts"),
            };
            return self.hooks.flow.start(&self.hooks.registry, running);
        }
        self.commit(prepared, origin);
    }

    /// Saves and applies a prepared state, opens its job, and tells
    /// `origin`.
    pub(super) fn commit(&mut self, prepared: Prepared, origin: Origin) {
        if self.io.out.job_pending() {
            // A second change in one command (a queued update after a hook
            // chain, a placement move after a label change): the jobs step
            // over the first change before the second one's job opens, so
            // that the new job sees what went out.
            self.advance_jobs();
        }
        let Prepared { next, table } = prepared;
        if let Err(e) = save(&self.lifecycle.seq, self.desired.file.as_ref(), &self.desired.current, &next, &table) {
            return origin.refused(e, false, &mut self.io.out);
        }
        self.lifecycle.seq.commit(table);
        let switched = self.desired.switch(next, &self.states);
        let diff = switched.diff;
        // The gates follow the change; the revert marks of new specs go.
        let (gates, file) = (&mut self.lifecycle.gates, self.lifecycle.gate_file.as_ref());
        let (current, generations) = (&self.desired.current, &self.desired.generations);
        let now = tokio::time::Instant::now();
        for name in observe::follow_change(gates, file, current, generations, &switched.generations_before, now) {
            self.states.clear_reverted(&name);
        }
        let workloads = &self.desired.current.state.workloads;
        self.states.retain_events(|name| workloads.contains_key(name));
        rendering::record_escalations(&self.desired.current, &mut self.states, &switched.old.rendered);
        // The states the server decides for the change, then its job,
        // which hands the changes to the agents in dependency order.
        let (current, generations, placer) = (&self.desired.current, &self.desired.generations, &self.lifecycle.placer);
        let changed =
            self.states.record_decided(&diff, &current.rendered, generations, |n| placer.not_scheduled_state(n));
        if !changed.is_empty() {
            self.io.out.broadcast(None, FromServer::UpdateWorkloadState(changed));
        }
        let generations = &self.desired.generations;
        let (job, out) = self.jobs.open_job(&mut self.states, &switched.old.rendered, &diff, false, generations);
        self.io.out.append(out);
        tracing::info!(
            "job {job}: {} workloads to add, {} to delete",
            diff.added.values().map(Vec::len).sum::<usize>(),
            diff.deleted.values().map(Vec::len).sum::<usize>()
        );
        // The jobs advance once the command was handled; what they hand
        // out goes here, before the answer to the change.
        self.io.out.job_opened();
        let told = origin.committed(&diff, job, &mut self.conns);
        // Agents whose labels changed may now take NotScheduled workloads,
        // or no longer match theirs.
        for agent in told.retagged {
            self.placement_on(Occasion::Advertised(&agent));
        }
        if let Some((conn, answer)) = told.answer {
            self.io.out.send(conn, answer);
        }
    }
}

impl Origin {
    /// Tells the origin its change was committed as `job`.
    fn committed(self, diff: &StateDiff, job: u64, conns: &mut Connections) -> Told {
        match self {
            Origin::Update(update, hook_changes) => {
                let (added, deleted) = (diff.added_instance_names(), diff.deleted_instance_names());
                tracing::debug!("update accepted as job {job}: {} added, {} deleted", added.len(), deleted.len());
                let retagged = requests::update_agent_tags(conns, &update.new_state, &update.update_mask);
                let content = ResponseContent::UpdateStateSuccess {
                    added_workloads: added,
                    deleted_workloads: deleted,
                    job_id: job,
                    hook_changes,
                };
                let answer = FromServer::Response(Response { request_id: update.request_id, content });
                Told { retagged, answer: Some((update.conn, answer)) }
            }
            Origin::Server(name) => {
                tracing::info!("job {job}: {name}");
                Told { retagged: Vec::new(), answer: None }
            }
            Origin::Initial => {
                tracing::info!("job {job}: the loaded desired state as the mutating hooks made it");
                Told { retagged: Vec::new(), answer: None }
            }
        }
    }

    /// Tells the origin its change was refused for `e` (`vetoed`: by the
    /// mutating hooks).
    pub(super) fn refused(self, e: AcceptError, vetoed: bool, out: &mut Outbox) {
        match self {
            Origin::Update(update, _) => {
                answer_update(out, &update, ResponseContent::Error(format!("Update rejected: '{e}'")))
            }
            Origin::Server(name) => name.refused(&e, vetoed),
            Origin::Initial => {
                tracing::error!("the loaded desired state as the mutating hooks made it not served: {e}")
            }
        }
    }
}

/// Saves the `${seq:N}` numbers of `next`, then `next` itself if its state
/// differs from `current`'s; the in-memory table is not changed yet.
fn save(
    seq: &SeqPools,
    file: Option<&StateFile>,
    current: &DesiredState,
    next: &DesiredState,
    table: &SeqTable,
) -> Result<(), AcceptError> {
    seq.save(table).inspect_err(|e| tracing::error!("update rejected: {e}"))?;
    if next.state != current.state
        && let Some(file) = file
    {
        file.save(&next.state).inspect_err(|e| tracing::error!("update rejected: {e}"))?;
    }
    Ok(())
}

/// The new desired state an update asks to make of `current` (the
/// masks into the agents checked against `conns`), or the refusal.
fn prepare_update(
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

/// Answers `update` with `content`.
pub(super) fn answer_update(out: &mut Outbox, update: &Update, content: ResponseContent) {
    let response = Response { request_id: update.request_id.clone(), content };
    out.send(update.conn, FromServer::Response(response));
}

/// `next` when it changes no workload: the workloads stay as the hooks
/// made them (in `current`), the rest is taken from `next`.
fn workloads_unchanged(current: &DesiredState, next: &State) -> State {
    State { workloads: current.rendered.workloads.clone(), ..next.clone() }
}

/// Makes `effective` the rendering agents get, keeping the rendering as the
/// base of the next change when they differ.
pub(super) fn set_effective(next: &mut DesiredState, effective: State) {
    let pre_hook = std::mem::replace(&mut next.rendered, effective);
    next.pre_hook = (pre_hook != next.rendered).then_some(pre_hook);
}
