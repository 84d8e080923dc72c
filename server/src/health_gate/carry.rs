//! What a gate's decision does besides the job's item (which the actor
//! fails): the workload states get its event (`UpdateHealthy` /
//! `Reverted`) and, on a failure, the revert mark ([`record`]); with
//! `autoRevert` the last healthy spec becomes the desired one
//! ([`revert`], a change the server makes like the reaper's). The gates'
//! tick itself ([`tick`]) shows them Ready and takes what they decided.

use ank_common::conditions::RevertMark;
use ank_common::daemon::clock::now_rfc3339;
use ank_common::workload_events::EventKind;
use tokio::time::Instant;

use super::file::GateFile;
use super::{HealthGates, Healthy, Outcome, observe};
use crate::desired_state::generations::Generations;
use crate::desired_state::{ChangeName, DesiredState, ServerChange};
use crate::workload_states::WorkloadStateStore;

/// What the gates saw and decided at one tick.
pub(crate) struct GateTick {
    /// Whether an open gate changed (the jobs show where their gates stand).
    pub(crate) seen_changed: bool,
    /// The gates that passed or failed.
    pub(crate) outcomes: Vec<Outcome>,
}

/// Every second: what Ready says of each workload's current generation,
/// then what the gates decided (saved next to the state file when any).
pub(crate) fn tick(
    gates: &mut HealthGates,
    file: Option<&GateFile>,
    current: &DesiredState,
    generations: &Generations,
    states: &WorkloadStateStore,
    now: Instant,
) -> GateTick {
    let seen_changed = observe::observe_ready(gates, current, generations, states, now);
    let outcomes = gates.due(now);
    if !outcomes.is_empty() {
        observe::save(gates, file);
    }
    GateTick { seen_changed, outcomes }
}

/// A gate that failed: the job item that brought `generation` fails, and
/// with a `revert` the healthy spec goes back.
pub(crate) struct Failed {
    pub(crate) workload: String,
    pub(crate) generation: u64,
    pub(crate) reason: String,
    pub(crate) revert: Option<Box<Healthy>>,
}

/// Records `outcome` in the workload states: its event, and on a failure
/// the revert mark; returns the failure.
// [feature: issue 39 health-gated update with automatic revert]
pub(crate) fn record(outcome: Outcome, states: &mut WorkloadStateStore) -> Option<Failed> {
    match outcome {
        Outcome::Passed { workload, generation, reason } => {
            tracing::info!("update of '{workload}' to generation {generation} healthy: {reason}");
            states.record_event(&workload, EventKind::UpdateHealthy, &reason);
            None
        }
        Outcome::Failed { workload, generation, reason, revert } => {
            tracing::warn!("update of '{workload}' to generation {generation} not healthy: {reason}");
            states.record_event(&workload, EventKind::Reverted, &reason);
            let mark = RevertMark {
                from_generation: generation,
                to_generation: revert.as_ref().map_or(0, |h| h.generation),
                reason: reason.clone(),
                at: now_rfc3339(),
            };
            states.set_reverted(&workload, mark);
            Some(Failed { workload, generation, reason, revert })
        }
    }
}

/// The change that writes `healthy` back as the spec of `workload`;
/// `None` if the workload is no longer desired.
pub(crate) fn revert(current: &DesiredState, workload: &str, healthy: Healthy) -> Option<ServerChange> {
    let mut state = current.state.clone();
    let slot = state.workloads.get_mut(workload)?;
    *slot = healthy.spec;
    let what = format!("revert of '{workload}' to generation {}", healthy.generation);
    Some(ServerChange { state, moves: Vec::new(), name: ChangeName { what, stays: "the new spec stays" } })
}
