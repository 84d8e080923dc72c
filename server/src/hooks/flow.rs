//! The chain of mutating hooks the server runs, and the updates waiting
//! for it: an update that changes workloads is prepared on the server's
//! loop, its chain of hooks runs in a task of its own (reads, agents'
//! reports and every other message are served meanwhile), and the chain's
//! result comes back to the loop ([`HookFlow::done`]), which commits or
//! refuses the update and answers. Updates that arrive while a chain runs
//! wait in order, so no two chains run at once. [`HookFlow`] owns the
//! running chain and the queue; what the server prepared for a chain (`P`)
//! it keeps for the server until the chain is done.

use std::collections::VecDeque;

use ank_common::convert::PartialCompleteState;
use tokio::sync::mpsc;

use crate::connections::ConnId;
use crate::hooks::effect::HookInput;
use crate::hooks::{HookError, HookOutcome, HooksRegistry};

/// What a chain of hooks answered.
pub(crate) type ChainResult = Result<HookOutcome, HookError>;

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
    /// A change the server made itself (`what` says which, for the log).
    ServerChange { what: String, prepared: Box<P>, input: HookInput },
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

    /// Queues `update` behind the running chain.
    pub(crate) fn wait(&mut self, update: Update) {
        tracing::debug!("update '{}' waits for the running mutating hooks", update.request_id);
        self.queue.push_back(update);
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

    /// The chain that ended, with what the server prepared for it.
    pub(crate) fn finished(&mut self) -> Option<Running<P>> {
        self.running.take()
    }
}
