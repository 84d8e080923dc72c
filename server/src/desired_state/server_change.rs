//! A change of the desired state that the server makes on its own: a
//! placement move, reaping, a health gate's revert. The feature that
//! decides it returns a [`ServerChange`]; the actor makes it the way it
//! makes an update (placement, rendering, the mutating hooks, the state
//! file, a job), but nobody waits for an answer: the outcome is logged.

use super::DesiredState;

/// A change the server decided, ready to be made.
pub(crate) struct ServerChange {
    /// The new desired state, validated and rendered from the user's state.
    pub(crate) next: DesiredState,
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
