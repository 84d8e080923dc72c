//! What a chain of hooks sees and what its answer does to the rendered
//! state the agents get (the effective state). A chain sees the workloads
//! that changed between the *pre-hook* rendering of the current state and
//! the new rendering; its answer decides the new effective state:
//! unchanged workloads keep their current effective version (a mutation
//! made by an earlier chain stays), an added workload is taken as the
//! hooks returned it, one they dropped from the added list is not deployed,
//! and one they dropped from the deleted list keeps its current version.

use std::collections::BTreeSet;

use ank_common::messages::DeletedWorkload;
use ank_common::workload::WorkloadSpec;
use ank_common::{AgentName, State, Workload, WorkloadName};
use ank_proto::grpc_api::UpdateWorkload;

use super::HookOutcome;
use crate::desired_state::{delete_conditions, instance_of};

/// A chain's input and what it was made of.
#[derive(Debug, Clone, PartialEq)]
pub struct HookInput {
    /// The message written to the first hook.
    pub message: UpdateWorkload,
    /// Every workload that changed (added, deleted or both).
    changed: BTreeSet<WorkloadName>,
    /// The workloads in the deleted list.
    deleted: BTreeSet<String>,
    /// The added workloads, as rendered.
    added: Vec<(WorkloadName, Workload)>,
}

/// The input of a chain for going from `base` (the pre-hook rendering of
/// the current state) to `next` (the new rendering); `None` if no workload
/// changed, when no hook runs.
// Ankaios: swdd~server-state-compares-rendered-workloads~2
pub fn input(base: &State, next: &State) -> Option<HookInput> {
    let mut changed = BTreeSet::new();
    let mut deleted = Vec::new();
    let mut added = Vec::new();
    for (name, old) in &base.workloads {
        if next.workloads.get(name) == Some(old) {
            continue;
        }
        changed.insert(name.clone());
        deleted.push(DeletedWorkload {
            instance_name: instance_of(name, old),
            dependencies: delete_conditions(base, name),
        });
        if let Some(new) = next.workloads.get(name) {
            added.push((name.clone(), new.clone()));
        }
    }
    for (name, new) in next.workloads.iter().filter(|(name, _)| !base.workloads.contains_key(*name)) {
        changed.insert(name.clone());
        added.push((name.clone(), new.clone()));
    }
    if changed.is_empty() {
        return None;
    }
    let specs: Vec<WorkloadSpec> = added.iter().map(|(name, wl)| spec(name, wl)).collect();
    let message = ank_common::messages::update_workload_to_proto(&specs, &deleted);
    let deleted = deleted.into_iter().map(|d| d.instance_name.workload_name).collect();
    Some(HookInput { message, changed, deleted, added })
}

/// The spec of a workload, with an empty agent if it has none.
fn spec(name: &WorkloadName, wl: &Workload) -> WorkloadSpec {
    let agent = AgentName::new(wl.agent.as_str()).unwrap_or_else(|_| AgentName::unscheduled());
    WorkloadSpec::new(name, &agent, wl.clone())
}

/// The new effective state after the hooks answered `outcome` to `input`:
/// `next` with the workloads as described in the module header.
// Ankaios: swdd~server-applies-mutated-workloads-to-effective-state~1
// Ankaios: swdd~server-removes-dropped-workloads-from-effective-state~1
// Ankaios: swdd~server-restores-undeleted-workloads-in-effective-state~1
pub fn apply(effective: &State, next: &State, input: &HookInput, outcome: HookOutcome) -> Result<State, AnswerError> {
    if outcome.changed_by.is_empty() {
        return Ok(unhooked(effective, next, input));
    }
    let hooks = || outcome.changed_by.iter().map(|(h, _)| h.as_str()).collect::<Vec<_>>().join(", ");
    let invalid = |reason: String| AnswerError::Invalid { hooks: hooks(), reason };
    let (added, deleted) =
        ank_common::messages::hook_answer_from_proto(outcome.output).map_err(|e| invalid(e.to_string()))?;
    // What a manifest could not hold, an answer cannot either: an agent
    // name that is no agent name (it would name folders and FIFOs on the
    // agent) or access rules that do not validate.
    for (name, wl) in &added {
        if !wl.agent.is_empty() {
            AgentName::new(wl.agent.as_str()).map_err(|e| invalid(format!("workload '{name}': field 'agent': {e}")))?;
        }
        ank_common::access_rules::validate(&wl.control_interface_access)
            .map_err(|e| invalid(format!("workload '{name}': {e}")))?;
    }
    let deleted: BTreeSet<String> = deleted.into_iter().collect();
    let out = compose(effective, next, input, added, &deleted);
    if let Some(cycle) = ank_common::dependency_graph::find_cycle(&out) {
        return Err(AnswerError::Cycle(cycle.join(" -> ")));
    }
    Ok(out)
}

/// Why the hooks' answer cannot become the effective state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// The answer does not decode or holds what a manifest could not.
    #[error("the answer of the mutating hooks {hooks} is invalid: {reason}")]
    Invalid { hooks: String, reason: String },
    /// The workloads of the answer depend on each other in a cycle.
    #[error("the mutating hooks' answer has a dependency cycle: {0}")]
    Cycle(String),
}

/// The new effective state for a change no hook ran on (placement moves
/// and reaped workloads): changed workloads as rendered, unchanged ones as
/// they are now.
pub fn unhooked(effective: &State, next: &State, input: &HookInput) -> State {
    compose(effective, next, input, input.added.clone(), &input.deleted)
}

fn compose(
    effective: &State,
    next: &State,
    input: &HookInput,
    added: Vec<(WorkloadName, Workload)>,
    deleted: &BTreeSet<String>,
) -> State {
    let mut out = State { workloads: Default::default(), ..next.clone() };
    for (name, wl) in effective.workloads.iter().filter(|(name, _)| !input.changed.contains(*name)) {
        out.workloads.insert(name.clone(), wl.clone());
    }
    let mut kept = BTreeSet::new();
    for (name, wl) in added {
        kept.insert(name.clone());
        out.workloads.insert(name, wl);
    }
    for name in input.changed.iter().filter(|name| !kept.contains(*name)) {
        let undeleted = input.deleted.contains(name.as_str()) && !deleted.contains(name.as_str());
        if undeleted && let Some(wl) = effective.workloads.get(name) {
            out.workloads.insert(name.clone(), wl.clone());
        }
    }
    out
}

#[cfg(test)]
#[path = "effect_tests.rs"]
mod tests;
