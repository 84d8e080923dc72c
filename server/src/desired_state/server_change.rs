//! A change of the desired state that the server makes on its own: a
//! placement move, reaping, a health gate's revert. The feature that
//! decides it returns a [`ServerChange`]: the user's state it wants. The
//! actor makes it the way it makes an update (validation and rendering,
//! placement, the mutating hooks, the state file, a job), but nobody waits
//! for an answer: the outcome is logged.

use ank_common::State;

/// A change the server decided, ready to be made.
pub(crate) struct ServerChange {
    /// The new user's state; rendered when the change is made, so that the
    /// `${seq:N}` numbers of a moved workload come from its new agent's
    /// pools.
    pub(crate) state: State,
    /// Workloads placed on another agent: (workload, agent; "" for
    /// NotScheduled).
    pub(crate) moves: Vec<(String, String)>,
    /// How the log names the change.
    pub(crate) name: ChangeName,
}

/// How the log names a change of the server's, and what stays when it is
/// refused.
#[derive(Debug, Clone)]
pub(crate) struct ChangeName {
    /// What the change does, e.g. `placement of 2 workloads`.
    pub(crate) what: String,
    /// What happens when the change is refused, e.g. `the workloads stay`.
    pub(crate) stays: &'static str,
}

impl ChangeName {
    /// Logs that the change was refused: at error level when the server
    /// could not make it, at warn level when the mutating hooks vetoed it.
    pub(crate) fn refused(&self, reason: &dyn std::fmt::Display, vetoed: bool) {
        let Self { what, stays } = self;
        if vetoed {
            tracing::warn!("{what} not applied, {stays}: {reason}");
        } else {
            tracing::error!("{what} not applied, {stays}: {reason}");
        }
    }
}

impl std::fmt::Display for ChangeName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.what)
    }
}
