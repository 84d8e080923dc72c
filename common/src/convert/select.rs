//! Field masks on the typed [`PartialCompleteState`]: the parts a read
//! selects, exactly as [`crate::field_mask::filter`] selects them on the
//! state's JSON tree, for masks that end at or above one entry (a whole
//! part, one workload, config item, agent, job or workload instance).
//! [`selects_typed`] says whether every mask is such a mask; deeper masks
//! (into a workload's fields) are left to the tree.
//!
//! The tree's rules kept here: an empty mask remainder selects the whole
//! value (an empty map too); a map of which no key is selected leaves no
//! empty map behind; several masks select the union.

use std::collections::BTreeMap;

use super::partial::{PartialAgent, PartialCompleteState, PartialInstance, PartialState, PartialStatesMap};
use crate::complete_state::{AgentAttributes, WorkloadStatesMap};
use crate::mask_path::{MaskPath, Segment};

/// The workload states in their partial form (each instance whole), as
/// they read from their JSON tree.
pub fn partial_states(states: WorkloadStatesMap) -> PartialStatesMap {
    let ids = |ids: BTreeMap<_, _>| ids.into_iter().map(|(id, e)| (id, PartialInstance::Full(e))).collect();
    states.into_iter().map(|(agent, wls)| (agent, wls.into_iter().map(|(w, i)| (w, ids(i))).collect())).collect()
}

impl From<AgentAttributes> for PartialAgent {
    /// Every part of `a`, present where its JSON form has it.
    fn from(a: AgentAttributes) -> Self {
        PartialAgent {
            status: Some(a.status),
            tags: Some(a.tags),
            dropped_stale_reports: (a.dropped_stale_reports != 0).then_some(a.dropped_stale_reports),
            capabilities: a.capabilities,
            metrics: a.metrics,
            quota: a.quota,
            not_reported: a.not_reported,
        }
    }
}

/// Whether every mask ends at or above one entry of the state, so that
/// [`PartialCompleteState::select`] selects what the tree filter selects.
pub fn selects_typed(masks: &[MaskPath]) -> bool {
    masks.iter().all(|m| {
        let s = m.segments();
        let Some(Segment::Key(root)) = s.first() else { return false };
        match root.as_str() {
            "desiredState" | "effectiveState" => match s.get(1) {
                None => true,
                Some(Segment::Key(k)) if k == "apiVersion" || k == "groups" => s.len() == 2,
                Some(Segment::Key(k)) if k == "workloads" || k == "configs" => s.len() <= 3,
                Some(Segment::Key(_)) => true,
                Some(Segment::Any) => false,
            },
            "workloadStates" => s.len() <= 4,
            "agents" | "jobs" => s.len() <= 2,
            _ => true,
        }
    })
}

impl PartialCompleteState {
    /// The parts of this (whole) state that `masks` select, when
    /// [`selects_typed`] holds for them; no mask selects everything.
    pub fn select(self, masks: &[MaskPath]) -> Self {
        if masks.is_empty() {
            return self;
        }
        let paths: Vec<&[Segment]> = masks.iter().map(MaskPath::segments).collect();
        let under = |root: &str| under(&paths, root);
        PartialCompleteState {
            desired_state: self.desired_state.and_then(|d| select_state(d, &under("desiredState"))),
            workload_states: self.workload_states.and_then(|m| {
                pick_map(m, &under("workloadStates"), |wls, r| pick_map(wls, r, |ids, r| pick_map(ids, r, leaf)))
            }),
            agents: self.agents.and_then(|m| pick_map(m, &under("agents"), leaf)),
            effective_state: self.effective_state.and_then(|d| select_state(d, &under("effectiveState"))),
            jobs: self.jobs.and_then(|m| pick_map(m, &under("jobs"), leaf)),
        }
    }
}

/// The parts of a desired state the remainders `rests` select.
fn select_state(state: PartialState, rests: &[&[Segment]]) -> Option<PartialState> {
    if rests.is_empty() {
        return None;
    }
    if rests.iter().any(|r| r.is_empty()) {
        return Some(state);
    }
    let whole = |key: &str| under(rests, key).iter().any(|r| r.is_empty());
    let out = PartialState {
        api_version: if whole("apiVersion") { state.api_version } else { String::new() },
        workloads: state.workloads.and_then(|m| pick_map(m, &under(rests, "workloads"), leaf)),
        configs: state.configs.and_then(|m| pick_map(m, &under(rests, "configs"), leaf)),
        groups: state.groups.filter(|_| whole("groups")),
    };
    let any = whole("apiVersion") || out.workloads.is_some() || out.configs.is_some() || out.groups.is_some();
    any.then_some(out)
}

/// The remainders of the paths `paths` under the key `key`.
fn under<'a>(paths: &[&'a [Segment]], key: &str) -> Vec<&'a [Segment]> {
    paths
        .iter()
        .filter_map(|p| match p.split_first() {
            Some((Segment::Key(k), rest)) if k == key => Some(rest),
            _ => None,
        })
        .collect()
}

/// A leaf value when a remainder ends at it (none goes deeper).
fn leaf<V>(v: V, rests: &[&[Segment]]) -> Option<V> {
    rests.iter().any(|r| r.is_empty()).then_some(v)
}

/// The entries of `map` the remainders `rests` select, each narrowed by
/// `pick` with the remainders under it; the whole map for an empty
/// remainder, `None` when nothing is selected.
fn pick_map<V>(
    map: BTreeMap<String, V>,
    rests: &[&[Segment]],
    pick: impl Fn(V, &[&[Segment]]) -> Option<V>,
) -> Option<BTreeMap<String, V>> {
    if rests.iter().any(|r| r.is_empty()) {
        return Some(map);
    }
    if rests.is_empty() {
        return None;
    }
    let out: BTreeMap<String, V> = map
        .into_iter()
        .filter_map(|(key, v)| {
            let tails: Vec<&[Segment]> = rests
                .iter()
                .filter_map(|r| r.split_first().filter(|(head, _)| head.selects(&key)).map(|(_, tail)| tail))
                .collect();
            if tails.is_empty() { None } else { pick(v, &tails).map(|v| (key, v)) }
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
#[path = "select_tests.rs"]
mod tests;
