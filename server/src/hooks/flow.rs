//! The server's side of mutating hooks: an update that changes workloads
//! is prepared on the loop, its chain of hooks runs in a task of its own
//! (reads, agents' reports and every other message are served meanwhile),
//! and the chain's result comes back to the loop, which commits or refuses
//! the update and answers. Updates that arrive while a chain runs wait in
//! order and are prepared on the state the chain leaves, so no two chains
//! run at once and none works on a stale state. The server's own changes
//! (placement moves, reaped workloads) go through the hooks too, so that a
//! moved workload keeps what the hooks enforce; while a chain runs they
//! wait for their next occasion. The state the server starts with (startup
//! manifest or state file) goes through the hooks once the loop runs.

use std::collections::VecDeque;

use ank_common::State;
use ank_common::messages::{FromServer, HookChange, Response, ResponseContent};
use tokio::sync::mpsc;

use crate::actor::{AnkaiosServer, Prepared, rejected};
use ank_common::convert::PartialCompleteState;

use crate::connections::ConnId;
use crate::desired_state::DesiredState;
use crate::hooks::effect::{self, HookInput};
use crate::hooks::{HookError, HookOutcome, HooksRegistry};

type ChainResult = Result<HookOutcome, HookError>;

/// An update request waiting for its answer.
struct Update {
    conn: ConnId,
    request_id: String,
    new_state: Box<PartialCompleteState>,
    update_mask: Vec<String>,
}

/// What the running chain is for.
enum Running {
    /// An update request.
    Update { update: Update, prepared: Box<Prepared>, input: HookInput },
    /// The state the server started with.
    Initial(HookInput),
    /// A change the server made itself (`what` says which, for the log).
    ServerChange { what: String, prepared: Box<Prepared>, input: HookInput },
}

/// The running chain, the updates behind it, and the channel its task
/// reports on.
pub(crate) struct HookFlow {
    running: Option<Running>,
    queue: VecDeque<Update>,
    tx: mpsc::Sender<ChainResult>,
    rx: mpsc::Receiver<ChainResult>,
}

impl Default for HookFlow {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(1);
        Self { running: None, queue: VecDeque::new(), tx, rx }
    }
}

impl HookFlow {
    /// The result of the running chain, when it comes.
    pub(crate) async fn done(&mut self) -> Option<ChainResult> {
        self.rx.recv().await
    }
}

impl AnkaiosServer {
    /// Runs `hooks` on every update that changes workloads.
    pub fn with_hooks(mut self, hooks: HooksRegistry) -> Self {
        self.hooks.registry = hooks;
        self
    }

    /// Whether a chain of hooks runs.
    pub(crate) fn hooks_busy(&self) -> bool {
        self.hooks.flow.running.is_some()
    }

    /// An update request while hooks are configured: started now, or
    /// queued behind the running chain.
    pub(crate) fn hooked_update(
        &mut self,
        conn: ConnId,
        request_id: String,
        new_state: Box<PartialCompleteState>,
        update_mask: Vec<String>,
    ) {
        let update = Update { conn, request_id, new_state, update_mask };
        if self.hooks_busy() {
            tracing::debug!("update '{}' waits for the running mutating hooks", update.request_id);
            self.hooks.flow.queue.push_back(update);
            return;
        }
        self.start_update(update);
    }

    /// Starts the queued updates in order until one waits for its hooks.
    pub(crate) fn start_queued(&mut self) {
        while !self.hooks_busy() {
            let Some(update) = self.hooks.flow.queue.pop_front() else { return };
            self.start_update(update);
        }
    }

    /// Prepares `update`; answers at once if it is refused or changes no
    /// workload, else starts its chain.
    fn start_update(&mut self, update: Update) {
        let next = match self.prepare_update(&update.new_state, &update.update_mask) {
            Ok(next) => next,
            Err(answer) => return self.answer(&update, answer),
        };
        let prepared = match self.prepare_accept(next, &[]) {
            Ok(prepared) => prepared,
            Err(e) => return self.answer(&update, ResponseContent::Error(format!("Update rejected: '{e}'"))),
        };
        let Some(input) = effect::input(self.desired.current.base(), &prepared.next.rendered) else {
            let effective = self.workloads_unchanged(&prepared.next.rendered);
            return self.finish_update(update, prepared, effective, Vec::new());
        };
        self.spawn_chain(&input);
        self.hooks.flow.running = Some(Running::Update { update, prepared: Box::new(prepared), input });
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
    ) -> Result<(), String> {
        if self.hooks.registry.is_empty() {
            let (_, job) = self.accept_moving(next, moves)?;
            tracing::info!("job {job}: {what}");
            return Ok(());
        }
        let mut prepared = self.prepare_accept(next, moves)?;
        let Some(input) = effect::input(self.desired.current.base(), &prepared.next.rendered) else {
            let effective = self.workloads_unchanged(&prepared.next.rendered);
            set_effective(&mut prepared.next, effective);
            let (_, job) = self.commit(prepared)?;
            tracing::info!("job {job}: {what}");
            return Ok(());
        };
        tracing::debug!("{what} waits for the mutating hooks");
        self.spawn_chain(&input);
        self.hooks.flow.running = Some(Running::ServerChange { what, prepared: Box::new(prepared), input });
        Ok(())
    }

    /// Runs the hooks on the state the server started with, as if it had
    /// been applied to an empty one; until they answer, it is served as
    /// loaded.
    pub(crate) fn start_initial_hooks(&mut self) {
        if self.hooks.registry.is_empty() {
            return;
        }
        let Some(input) = effect::input(&State::default(), &self.desired.current.rendered) else { return };
        self.spawn_chain(&input);
        self.hooks.flow.running = Some(Running::Initial(input));
    }

    fn spawn_chain(&self, input: &HookInput) {
        let hooks = self.hooks.registry.clone();
        let tx = self.hooks.flow.tx.clone();
        let message = input.message.clone();
        tokio::spawn(async move {
            let _ = tx.send(hooks.run(message).await).await;
        });
    }

    /// The running chain ended: commits its update with the effect of the
    /// hooks' answer, or refuses it.
    pub(crate) fn hooks_done(&mut self, result: ChainResult) {
        let (update, prepared, input) = match self.hooks.flow.running.take() {
            Some(Running::Update { update, prepared, input }) => (update, *prepared, input),
            Some(Running::Initial(input)) => return self.initial_hooks_done(result, &input),
            Some(Running::ServerChange { what, prepared, input }) => {
                return self.server_change_done(result, &what, *prepared, &input);
            }
            None => return,
        };
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                let text = e.rejection();
                tracing::info!("{text}");
                return self.answer(&update, ResponseContent::Error(text));
            }
        };
        let changes = hook_changes(&outcome);
        match effect::apply(&self.desired.current.rendered, &prepared.next.rendered, &input, outcome) {
            Ok(effective) => self.finish_update(update, prepared, effective, changes),
            Err(e) => self.answer(&update, rejected(e)),
        }
    }

    fn initial_hooks_done(&mut self, result: ChainResult, input: &HookInput) {
        let loaded = &self.desired.current.rendered;
        let effective = result
            .map_err(|e| e.to_string())
            .and_then(|outcome| effect::apply(&State::default(), loaded, input, outcome));
        match effective {
            Ok(effective) => {
                let mut next = self.desired.current.clone();
                set_effective(&mut next, effective);
                let (_, job) = self.switch_to(next);
                tracing::info!("job {job}: the loaded desired state as the mutating hooks made it");
            }
            Err(e) => tracing::error!("the mutating hooks refused the loaded desired state, served as loaded: {e}"),
        }
    }

    fn server_change_done(&mut self, result: ChainResult, what: &str, mut prepared: Prepared, input: &HookInput) {
        let effective = result
            .map_err(|e| e.to_string())
            .and_then(|outcome| effect::apply(&self.desired.current.rendered, &prepared.next.rendered, input, outcome));
        let committed = effective.and_then(|effective| {
            set_effective(&mut prepared.next, effective);
            self.commit(prepared)
        });
        match committed {
            Ok((_, job)) => tracing::info!("job {job}: {what}, as the mutating hooks made it"),
            Err(e) => tracing::warn!("{what} not applied, tried again at its next occasion: {e}"),
        }
    }

    fn finish_update(&mut self, update: Update, mut prepared: Prepared, effective: State, changes: Vec<HookChange>) {
        set_effective(&mut prepared.next, effective);
        let result = self.commit(prepared);
        let mut answer = self.update_answer(&update.new_state, &update.update_mask, result);
        if let ResponseContent::UpdateStateSuccess { hook_changes, .. } = &mut answer {
            *hook_changes = changes;
        }
        self.answer(&update, answer);
    }

    /// `next` when it changes no workload: the workloads stay as the hooks
    /// made them, the rest is taken from `next`.
    fn workloads_unchanged(&self, next: &State) -> State {
        State { workloads: self.desired.current.rendered.workloads.clone(), ..next.clone() }
    }

    fn answer(&mut self, update: &Update, content: ResponseContent) {
        let response = Response { request_id: update.request_id.clone(), content };
        self.io.out.send(update.conn, FromServer::Response(response));
    }
}

/// Makes `effective` the rendering agents get, keeping the rendering as the
/// base of the next change when they differ.
fn set_effective(next: &mut DesiredState, effective: State) {
    let pre_hook = std::mem::replace(&mut next.rendered, effective);
    next.pre_hook = (pre_hook != next.rendered).then_some(pre_hook);
}

/// Which hook changed which workloads, for the update's answer.
fn hook_changes(outcome: &HookOutcome) -> Vec<HookChange> {
    outcome
        .changed_by
        .iter()
        .map(|(hook, workloads)| HookChange { hook: hook.clone(), workloads: workloads.clone() })
        .collect()
}
