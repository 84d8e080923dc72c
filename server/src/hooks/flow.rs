//! The chain of mutating hooks the server runs, and the updates waiting
//! for it: an update that changes workloads is prepared on the server's
//! loop, its chain of hooks runs in a task of its own (reads, agents'
//! reports and every other message are served meanwhile), and the chain's
//! result comes back to the loop ([`HookFlow::done`]), which commits or
//! refuses the update and answers. Updates that arrive while a chain runs
//! wait in order, so no two chains run at once. [`HookFlow`] owns the
//! running chain and the queue; what the server prepared for a chain (`P`)
//! it keeps for the server until the chain is done, and when the chain
//! ended it tells the server what to do with it ([`Concluded`]).

use std::collections::VecDeque;

use ank_common::State;
use ank_common::convert::PartialCompleteState;
use ank_common::messages::{HookChange, ResponseContent};
use tokio::sync::mpsc;

use crate::connections::ConnId;
use crate::desired_state::ChangeName;
use crate::hooks::effect::{self, AnswerError, HookInput};
use crate::hooks::{HookError, HookOutcome, HooksRegistry};
use crate::requests::rejected;

/// What a chain of hooks answered.
pub(crate) type ChainResult = Result<HookOutcome, HookError>;

/// Why the hooks made no state of a change: the chain refused it, or its
/// answer cannot be applied (each worded as the error it holds).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChainError {
    #[error(transparent)]
    Hooks(#[from] HookError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
}

/// What a chain that ended leaves the server to do.
pub(crate) enum Concluded<P> {
    /// Commit the update as the hooks made it and answer it with which
    /// hook changed which workloads; or refuse it with the answer.
    Update { update: Update, prepared: P, result: Result<(State, Vec<HookChange>), ResponseContent> },
    /// Serve the loaded state as the hooks made it, or say why not.
    Initial(Result<State, ChainError>),
    /// Commit the server's change as the hooks made it, or say why not.
    ServerChange { name: ChangeName, prepared: P, effective: Result<State, ChainError> },
}

/// An update request waiting for its answer.
pub(crate) struct Update {
    pub(crate) conn: ConnId,
    pub(crate) request_id: String,
    pub(crate) new_state: Box<PartialCompleteState>,
    pub(crate) update_mask: Vec<String>,
}

/// What the running chain is for, with what the server prepared (`P`).
pub(crate) enum Running<P> {
    /// An update request.
    Update { update: Update, prepared: Box<P>, input: HookInput },
    /// The state the server started with.
    Initial(HookInput),
    /// A change the server made itself (`name` says which, for the log).
    ServerChange { name: ChangeName, prepared: Box<P>, input: HookInput },
}

impl<P> Running<P> {
    fn input(&self) -> &HookInput {
        match self {
            Running::Update { input, .. } | Running::Initial(input) | Running::ServerChange { input, .. } => input,
        }
    }
}

/// The running chain, the updates behind it, and the channel its task
/// reports on.
pub(crate) struct HookFlow<P> {
    running: Option<Running<P>>,
    queue: VecDeque<Update>,
    tx: mpsc::Sender<ChainResult>,
    rx: mpsc::Receiver<ChainResult>,
}

impl<P> Default for HookFlow<P> {
    fn default() -> Self {
        let (tx, rx) = mpsc::channel(1);
        Self { running: None, queue: VecDeque::new(), tx, rx }
    }
}

impl<P> HookFlow<P> {
    /// The result of the running chain, when it comes.
    pub(crate) async fn done(&mut self) -> Option<ChainResult> {
        self.rx.recv().await
    }

    /// Whether a chain of hooks runs.
    pub(crate) fn busy(&self) -> bool {
        self.running.is_some()
    }

    /// `update` if it starts now (no chain runs), else queued behind the
    /// running chain.
    pub(crate) fn submit(&mut self, update: Update) -> Option<Update> {
        if !self.busy() {
            return Some(update);
        }
        tracing::debug!("update '{}' waits for the running mutating hooks", update.request_id);
        self.queue.push_back(update);
        None
    }

    /// The next queued update, once no chain runs.
    pub(crate) fn next_queued(&mut self) -> Option<Update> {
        if self.busy() { None } else { self.queue.pop_front() }
    }

    /// Runs `hooks` on the input of `running` in a task of its own; its
    /// result comes through [`done`](Self::done).
    pub(crate) fn start(&mut self, hooks: &HooksRegistry, running: Running<P>) {
        let hooks = hooks.clone();
        let tx = self.tx.clone();
        let message = running.input().message.clone();
        tokio::spawn(async move {
            let _ = tx.send(hooks.run(message).await).await;
        });
        self.running = Some(running);
    }

    /// The running chain ended with `result`: the effect of the hooks'
    /// answer on what the server prepared (`rendered` shows its rendering)
    /// over `current`, the rendered state in force (the loaded state goes
    /// through the hooks as if applied to an empty one).
    pub(crate) fn conclude(
        &mut self,
        result: ChainResult,
        current: &State,
        rendered: impl Fn(&P) -> &State,
    ) -> Option<Concluded<P>> {
        Some(match self.running.take()? {
            Running::Update { update, prepared, input } => {
                let result = match result {
                    Ok(outcome) => {
                        let changes = hook_changes(&outcome);
                        effect::apply(current, rendered(&prepared), &input, outcome)
                            .map(|effective| (effective, changes))
                            .map_err(|e| rejected(e.to_string()))
                    }
                    Err(e) => {
                        let text = e.rejection();
                        tracing::info!("{text}");
                        Err(ResponseContent::Error(text))
                    }
                };
                Concluded::Update { update, prepared: *prepared, result }
            }
            Running::Initial(input) => Concluded::Initial(
                result
                    .map_err(ChainError::from)
                    .and_then(|outcome| Ok(effect::apply(&State::default(), current, &input, outcome)?)),
            ),
            Running::ServerChange { name, prepared, input } => {
                let effective = result
                    .map_err(ChainError::from)
                    .and_then(|outcome| Ok(effect::apply(current, rendered(&prepared), &input, outcome)?));
                Concluded::ServerChange { name, prepared: *prepared, effective }
            }
        })
    }
}

/// Which hook changed which workloads, for the update's answer.
fn hook_changes(outcome: &HookOutcome) -> Vec<HookChange> {
    outcome
        .changed_by
        .iter()
        .map(|(hook, workloads)| HookChange { hook: hook.clone(), workloads: workloads.clone() })
        .collect()
}
