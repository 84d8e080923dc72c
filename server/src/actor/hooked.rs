//! The actor's side of mutating hooks: a change that changes workloads is
//! prepared (`change.rs`) and handed with its chain to the [`HookFlow`]
//! (`hooks/flow.rs`), which runs the chain in a task of its own and queues
//! the updates that arrive meanwhile; when the chain is done, the change is
//! committed with the effect of the hooks' answer or refused, and its
//! origin told. The server's own changes (placement moves, reaped
//! workloads, reverts) go through the hooks too, so that a moved workload
//! keeps what the hooks enforce; while a chain runs they wait for their
//! next occasion. The state the server starts with (startup manifest or
//! state file) goes through the hooks once the loop runs.
//!
//! [`HookFlow`]: crate::hooks::flow::HookFlow

use ank_common::State;

use super::AnkaiosServer;
use super::change::{AcceptError, Origin, Prepared, answer_update, set_effective};
use super::parts::Hooks;
use crate::hooks::effect;
use crate::hooks::flow::{ChainResult, Concluded, Running};

impl AnkaiosServer {
    /// The running chain ended: commits its update, the loaded state or
    /// the server's change with the effect of the hooks' answer
    /// ([`Concluded`]), or refuses it.
    pub(super) fn hooks_done(&mut self, result: ChainResult) {
        let current = &self.desired.current.rendered;
        let Some(concluded) = self.hooks.flow.conclude(result, current, |p: &Prepared| &p.next.rendered) else {
            return;
        };
        match concluded {
            Concluded::Update { update, mut prepared, result: Ok((effective, changes)) } => {
                set_effective(&mut prepared.next, effective);
                self.commit(prepared, Origin::Update(update, changes));
            }
            Concluded::Update { update, result: Err(answer), .. } => answer_update(&mut self.io.out, &update, answer),
            Concluded::Initial(Ok(effective)) => {
                // The state as loaded (saved already), served as the hooks
                // made it; its `${seq:N}` numbers stay.
                let mut next = self.desired.current.clone();
                set_effective(&mut next, effective);
                let table = self.lifecycle.seq.table().clone();
                self.commit(Prepared { next, table }, Origin::Initial);
            }
            Concluded::Initial(Err(e)) => {
                tracing::error!("the mutating hooks refused the loaded desired state, served as loaded: {e}");
            }
            Concluded::ServerChange { name, mut prepared, effective: Ok(effective) } => {
                set_effective(&mut prepared.next, effective);
                self.commit(prepared, Origin::Server(name));
            }
            Concluded::ServerChange { name, effective: Err(e), .. } => {
                Origin::Server(name).refused(AcceptError::from(e), true, &mut self.io.out);
            }
        }
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
