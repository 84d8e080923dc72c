//! The last rendering steps before a state goes to the agents (`${seq:N}`
//! numbers from the pools of the workload's agent; start-time changes of
//! started workloads kept back), the `Escalated` events of K3, and the
//! rendered state users can read (`ank get workload X --rendered`). Each
//! is a function of the parts it reads and writes; the rendering returns
//! the pools' table the caller saves and commits with the state.

use ank_common::convert::{PartialCompleteState, PartialState, selects_typed};
use ank_common::field_mask;
use ank_common::mask_path::MaskPath;
use ank_common::messages::ResponseContent;
use ank_common::workload_events::EventKind;
use ank_common::{State, WorkloadInstanceName};
use serde_json::json;

use crate::desired_state::{self, DesiredState};
use crate::priorities;
use crate::seq_pools::{SeqPools, SeqPoolsError, SeqTable};
use crate::workload_states::WorkloadStateStore;

/// Finishes rendering `next` for the agents, against `current`: expands
/// the `${seq:N}` macros of every workload that has an agent (call it
/// again once placement gave one) and keeps the rendering of started
/// workloads whose only change is in start-time properties. Returns the
/// pools' table to save and commit with `next`.
// [feature K9: rendered in the server, per agent]
pub(crate) fn render_for_agents(
    seq: &SeqPools,
    current: &DesiredState,
    states: &WorkloadStateStore,
    next: &mut DesiredState,
) -> Result<SeqTable, SeqPoolsError> {
    let table = seq.plan(&mut next.rendered)?;
    let old = current;
    let started = |name: &str| {
        let instance = old
            .rendered
            .workloads
            .get_key_value(name)
            .and_then(|(n, wl)| desired_state::spec_of(n, wl))
            .map(|spec| spec.instance_name);
        instance.is_some_and(|n: WorkloadInstanceName| priorities::started(states.kind_of(&n)))
    };
    priorities::keep_started(&old.state, old.base(), &next.state, &mut next.rendered, started);
    Ok(table)
}

/// [`render_for_agents`] for the state the server starts with (against
/// `current`); a failure to save the numbers is logged (they stay in
/// memory).
pub(crate) fn render_initial(
    seq: &mut SeqPools,
    current: &DesiredState,
    states: &WorkloadStateStore,
    initial: &mut DesiredState,
) {
    match render_for_agents(seq, current, states, initial) {
        Ok(table) => {
            if let Err(e) = seq.save(&table) {
                tracing::error!("{e}; the numbers are kept in memory only until the next change");
            }
            seq.commit(table);
        }
        Err(e) => tracing::error!("the initial state keeps its ${{seq:N}} macros unexpanded: {e}"),
    }
}

/// Records an `Escalated` event on every workload of `current` not started
/// yet whose effective priority a dependent raised since `old`.
// [feature K3: Escalated event "for B (5)"]
pub(crate) fn record_escalations(current: &DesiredState, states: &mut WorkloadStateStore, old: &State) {
    for (name, reason) in priorities::new_escalations(old, &current.rendered) {
        let spec =
            current.rendered.workloads.get_key_value(name.as_str()).and_then(|(n, wl)| desired_state::spec_of(n, wl));
        if spec.is_some_and(|s| priorities::started(states.kind_of(&s.instance_name))) {
            continue;
        }
        tracing::info!("workload '{name}' escalated {reason}");
        states.record_event(&name, EventKind::Escalated, &reason);
    }
}

/// The rendered desired state `current`, filtered by masks under
/// `desiredState` (typed for masks at or above one entry, else on the JSON
/// tree).
pub(crate) fn rendered_state(current: &DesiredState, field_mask: &[String]) -> ResponseContent {
    if let Some(bad) = field_mask.iter().find(|m| m.split('.').next() != Some("desiredState")) {
        return ResponseContent::Error(format!(
            "the rendered state has only 'desiredState'; mask '{bad}' selects nothing of it"
        ));
    }
    let mut masks = field_mask.to_vec();
    if !field_mask.is_empty() {
        masks.push("desiredState.apiVersion".to_owned());
    }
    let paths: Vec<MaskPath> = masks.iter().filter_map(|m| MaskPath::parse(m).ok()).collect();
    if selects_typed(&paths) {
        let whole = PartialCompleteState::of_desired(PartialState::from(&current.rendered));
        return ResponseContent::CompleteState(Box::new(whole.select(&paths)));
    }
    let tree = match serde_json::to_value(&current.rendered) {
        Ok(v) => json!({ "desiredState": v }),
        Err(e) => return ResponseContent::Error(e.to_string()),
    };
    match PartialCompleteState::from_json(&field_mask::filter(&tree, &masks)) {
        Ok(state) => ResponseContent::CompleteState(Box::new(state)),
        Err(e) => ResponseContent::Error(e.to_string()),
    }
}
