//! The actor's side of mutating hooks: an update that changes workloads
//! is prepared here and handed with its chain to the [`HookFlow`]
//! (`hooks/flow.rs`), which runs the chain in a task of its own and queues
//! the updates that arrive meanwhile; when the chain is done, the update
//! is committed with the effect of the hooks' answer or refused, and
//! answered. The server's own changes (placement moves, reaped workloads)
//! go through the hooks too, so that a moved workload keeps what the hooks
//! enforce; while a chain runs they wait for their next occasion. The state
//! the server starts with (startup manifest or state file) goes through the
//! hooks once the loop runs.
//!
//! [`HookFlow`]: crate::hooks::flow::HookFlow

use ank_common::State;
use ank_common::messages::{FromServer, HookChange, Response, ResponseContent};

use super::parts::Hooks;
use super::update::{AcceptError, prepare_update};
use super::{AnkaiosServer, Prepared};
use crate::connections::Outbox;
use crate::desired_state::DesiredState;
use crate::hooks::effect;
use crate::hooks::flow::{ChainResult, Concluded, Running, Update};

impl AnkaiosServer {
    /// Prepares `update`; answers at once if it is refused or changes no
    /// workload, else starts its chain.
    pub(super) fn start_update(&mut self, update: Update) {
        let next = match prepare_update(&self.desired.current, &self.conns, &update.new_state, &update.update_mask) {
            Ok(next) => next,
            Err(answer) => return answer_update(&mut self.io.out, &update, answer),
        };
        let prepared = match self.prepare_accept(next, &[]) {
            Ok(prepared) => prepared,
            Err(e) => {
                let answer = ResponseContent::Error(format!("Update rejected: '{e}'"));
                return answer_update(&mut self.io.out, &update, answer);
            }
        };
        let Some(input) = effect::input(self.desired.current.base(), &prepared.next.rendered) else {
            let effective = workloads_unchanged(&self.desired.current, &prepared.next.rendered);
            return self.finish_update(update, prepared, effective, Vec::new());
        };
        let running = Running::Update { update, prepared: Box::new(prepared), input };
        self.hooks.flow.start(&self.hooks.registry, running);
    }

    /// A change the server makes itself (placement moves, reaped
    /// workloads; `what` names it in the log): without hooks committed at
    /// once; with hooks committed at once when it changes no workload, else
    /// after the hooks answered. Not called while a chain runs (the callers
    /// wait for their next occasion).
    pub(crate) fn server_change(
        &mut self,
        next: DesiredState,
        moves: &[(String, String)],
        what: String,
    ) -> Result<(), AcceptError> {
        if self.hooks.registry.is_empty() {
            let prepared = self.prepare_accept(next, moves)?;
            let (_, job) = self.commit(prepared)?;
            tracing::info!("job {job}: {what}");
            return Ok(());
        }
        let mut prepared = self.prepare_accept(next, moves)?;
        let Some(input) = effect::input(self.desired.current.base(), &prepared.next.rendered) else {
            let effective = workloads_unchanged(&self.desired.current, &prepared.next.rendered);
            set_effective(&mut prepared.next, effective);
            let (_, job) = self.commit(prepared)?;
            tracing::info!("job {job}: {what}");
            return Ok(());
        };
        tracing::debug!("{what} waits for the mutating hooks");
        let running = Running::ServerChange { what, prepared: Box::new(prepared), input };
        self.hooks.flow.start(&self.hooks.registry, running);
        Ok(())
    }

    /// The running chain ended: commits its update, the loaded state or
    /// the server's change with the effect of the hooks' answer
    /// ([`Concluded`]), or refuses it.
    pub(crate) fn hooks_done(&mut self, result: ChainResult) {
        let current = &self.desired.current.rendered;
        let Some(concluded) = self.hooks.flow.conclude(result, current, |p: &Prepared| &p.next.rendered) else {
            return;
        };
        match concluded {
            Concluded::Update { update, prepared, result: Ok((effective, changes)) } => {
                self.finish_update(update, prepared, effective, changes);
            }
            Concluded::Update { update, result: Err(answer), .. } => answer_update(&mut self.io.out, &update, answer),
            Concluded::Initial(Ok(effective)) => {
                let mut next = self.desired.current.clone();
                set_effective(&mut next, effective);
                let (_, job) = self.switch_to(next);
                tracing::info!("job {job}: the loaded desired state as the mutating hooks made it");
            }
            Concluded::Initial(Err(e)) => {
                tracing::error!("the mutating hooks refused the loaded desired state, served as loaded: {e}");
            }
            Concluded::ServerChange { what, mut prepared, effective } => {
                let committed = effective.map_err(AcceptError::from).and_then(|effective| {
                    set_effective(&mut prepared.next, effective);
                    self.commit(prepared)
                });
                match committed {
                    Ok((_, job)) => tracing::info!("job {job}: {what}, as the mutating hooks made it"),
                    Err(e) => tracing::warn!("{what} not applied, tried again at its next occasion: {e}"),
                }
            }
        }
    }

    fn finish_update(&mut self, update: Update, mut prepared: Prepared, effective: State, changes: Vec<HookChange>) {
        set_effective(&mut prepared.next, effective);
        let result = self.commit(prepared);
        let mut answer = self.update_answer(&update.new_state, &update.update_mask, result);
        if let ResponseContent::UpdateStateSuccess { hook_changes, .. } = &mut answer {
            *hook_changes = changes;
        }
        answer_update(&mut self.io.out, &update, answer);
    }
}

impl Hooks {
    /// Runs the hooks on the state the server started with (`loaded`), as
    /// if it had been applied to an empty one; until they answer, it is
    /// served as loaded.
    pub(super) fn start_initial(&mut self, loaded: &State) {
        if self.registry.is_empty() {
            return;
        }
        let Some(input) = effect::input(&State::default(), loaded) else { return };
        self.flow.start(&self.registry, Running::Initial(input));
    }
}

/// `next` when it changes no workload: the workloads stay as the hooks
/// made them (in `current`), the rest is taken from `next`.
fn workloads_unchanged(current: &DesiredState, next: &State) -> State {
    State { workloads: current.rendered.workloads.clone(), ..next.clone() }
}

fn answer_update(out: &mut Outbox, update: &Update, content: ResponseContent) {
    let response = Response { request_id: update.request_id.clone(), content };
    out.send(update.conn, FromServer::Response(response));
}

/// Makes `effective` the rendering agents get, keeping the rendering as the
/// base of the next change when they differ.
fn set_effective(next: &mut DesiredState, effective: State) {
    let pre_hook = std::mem::replace(&mut next.rendered, effective);
    next.pre_hook = (pre_hook != next.rendered).then_some(pre_hook);
}
