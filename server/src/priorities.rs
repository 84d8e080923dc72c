//! Effective priorities (the tackle2-hub escalation): a workload's
//! effective priority is the highest of its own priority and the
//! priorities of every workload that depends on it, directly or through
//! others, so that a dependency never waits behind work of lower priority
//! than what waits for it. The server computes it on the rendered desired
//! state (group defaults and pipeline order included) and writes it into
//! both the rendered state (agents order by it) and the state users read;
//! a value written in a manifest is replaced.
//!
//! Start-time properties (dependencies, priority, effective priority) that
//! change only because of other workloads must not restart a workload that
//! already started: [`keep_started`] carries the old rendering over.

use std::collections::BTreeMap;

use ank_common::execution_state::Pending;
use ank_common::{State, StateKind, Workload};

/// Whether an instance in state `kind` is past its start: anything but no
/// state yet, NotScheduled and the Pending states of a workload still
/// waiting for its start (Initial, WaitingToStart, QuotaBlocked,
/// Postponed, Preempted). A canceled workload is past it for good, and of
/// an AgentDisconnected one nothing is known, so it counts as started.
pub fn started(kind: Option<StateKind>) -> bool {
    match kind {
        None | Some(StateKind::NotScheduled) => false,
        Some(StateKind::Pending(p)) => !matches!(
            p,
            Pending::Initial
                | Pending::WaitingToStart
                | Pending::QuotaBlocked
                | Pending::Postponed
                | Pending::Preempted
        ),
        Some(_) => true,
    }
}

/// A workload's effective priority and, when a dependent raised it, the
/// workload whose own priority it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub value: u32,
    pub raised_by: Option<String>,
}

/// The effective priority of every workload of `state` (dependencies on
/// workloads the state lacks are ignored; the state has no cycle, a
/// workload on one would keep its own priority). Iterative, dependents
/// before what they depend on, so a long chain cannot exhaust the stack.
// [feature K3: effective priority = max over the transitive dependents]
pub fn compute(state: &State) -> BTreeMap<String, Effective> {
    let names: Vec<&str> = state.workloads.keys().map(|n| n.as_str()).collect();
    // Dependents in name order: the first with the highest value names the escalation.
    let mut dependents: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, wl) in &state.workloads {
        for dep in wl.dependencies.keys().filter(|d| state.workloads.contains_key(*d)) {
            dependents.entry(dep.as_str()).or_default().push(name.as_str());
        }
    }
    let mut open: BTreeMap<&str, usize> = names.iter().map(|n| (*n, dependents.get(n).map_or(0, Vec::len))).collect();
    let mut ready: Vec<&str> = names.iter().copied().filter(|n| open[n] == 0).collect();
    let mut out: BTreeMap<String, Effective> = BTreeMap::new();
    while let Some(name) = ready.pop() {
        let own = state.workloads.get(name).and_then(|w| w.priority).unwrap_or(0);
        let mut best = Effective { value: own, raised_by: None };
        for dependent in dependents.get(name).into_iter().flatten() {
            let Some(e) = out.get(*dependent) else { continue };
            if e.value > best.value {
                let origin = e.raised_by.clone().unwrap_or_else(|| (*dependent).to_owned());
                best = Effective { value: e.value, raised_by: Some(origin) };
            }
        }
        out.insert(name.to_owned(), best);
        for dep in state.workloads.get(name).into_iter().flat_map(|w| w.dependencies.keys()) {
            if let Some(count) = open.get_mut(dep.as_str()) {
                *count -= 1;
                if *count == 0 {
                    ready.push(dep.as_str());
                }
            }
        }
    }
    for name in names {
        let own = state.workloads.get(name).and_then(|w| w.priority).unwrap_or(0);
        out.entry(name.to_owned()).or_insert(Effective { value: own, raised_by: None });
    }
    out
}

/// The field value of an effective priority: set when the workload has a
/// priority of its own or is raised above 0, absent otherwise (so states
/// without priorities stay as Ankaios shows them).
fn field(wl: &Workload, e: &Effective) -> Option<u32> {
    (wl.priority.is_some() || e.value > 0).then_some(e.value)
}

/// Writes the effective priorities of `rendered` into it and into `state`.
pub fn write(state: &mut State, rendered: &mut State) {
    let effective = compute(rendered);
    for (name, wl) in rendered.workloads.iter_mut() {
        let e = &effective[name.as_str()];
        wl.effective_priority = field(wl, e);
        if let Some(user) = state.workloads.get_mut(name) {
            user.effective_priority = wl.effective_priority;
        }
    }
}

/// The escalations of `rendered` that are new against `old` (a workload
/// new, or its effective priority changed) and raise a workload above its
/// own priority, as (workload, reason "for B (5)").
pub fn new_escalations(old: &State, rendered: &State) -> Vec<(String, String)> {
    compute(rendered)
        .into_iter()
        .filter_map(|(name, e)| {
            let by = e.raised_by?;
            let before = old.workloads.get(name.as_str()).map(|w| w.effective_priority);
            let now = rendered.workloads.get(name.as_str()).map(|w| w.effective_priority);
            (before != now).then(|| (name, format!("for {by} ({})", e.value)))
        })
        .collect()
}

/// For every workload `started` says has started and whose user-written
/// spec is unchanged: when its new rendering differs from the old one only
/// in start-time properties (other workloads, a group or the escalation
/// changed them), the old rendering stays, so the change does not restart
/// it (they matter only for a start it is past). What users change in the
/// workload itself always goes through.
pub fn keep_started(
    old_state: &State,
    old_rendered: &State,
    new_state: &State,
    new_rendered: &mut State,
    started: impl Fn(&str) -> bool,
) {
    for (name, wl) in new_rendered.workloads.iter_mut() {
        let (Some(before), Some(user_before), Some(user_now)) =
            (old_rendered.workloads.get(name), old_state.workloads.get(name), new_state.workloads.get(name))
        else {
            continue;
        };
        let as_written = |w: &Workload| Workload { effective_priority: None, ..w.clone() };
        if before == wl || as_written(user_before) != as_written(user_now) {
            continue;
        }
        if without_start_time(before) == without_start_time(wl) && started(name.as_str()) {
            *wl = before.clone();
        }
    }
}

fn without_start_time(wl: &Workload) -> Workload {
    Workload { dependencies: Default::default(), priority: None, effective_priority: None, ..wl.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(yaml: &str) -> State {
        ank_common::manifest::parse_manifest("t", yaml).unwrap()
    }

    /// The K3 example: C (1), A (0), B (5) depends on A.
    const K3: &str = "apiVersion: v1\nworkloads:\n  C: {runtime: podman, agent: agent_A, priority: 1, runtimeConfig: c}\n  A: {runtime: podman, agent: agent_A, priority: 0, runtimeConfig: a}\n  B: {runtime: podman, agent: agent_A, priority: 5, runtimeConfig: b, dependencies: {A: ADD_COND_RUNNING}}\n";

    // [test of feature K3]
    #[test]
    fn effective_priority_is_the_max_over_transitive_dependents() {
        let mut s = state(K3);
        let mut r = s.clone();
        write(&mut s, &mut r);
        let eff = |st: &State, n: &str| st.workloads[n].effective_priority;
        assert_eq!((eff(&r, "A"), eff(&r, "B"), eff(&r, "C")), (Some(5), Some(5), Some(1)));
        assert_eq!(eff(&s, "A"), Some(5), "the user's state shows it too");
        let e = compute(&r);
        assert_eq!(e["A"].raised_by.as_deref(), Some("B"));
        assert_eq!(e["B"].raised_by, None);

        // Transitive: D (9) -> B -> A; the origin is named.
        let chain = format!(
            "{K3}  D: {{runtime: podman, agent: agent_A, priority: 9, runtimeConfig: d, dependencies: {{B: ADD_COND_RUNNING}}}}\n"
        );
        let e = compute(&state(&chain));
        assert_eq!((e["A"].value, e["A"].raised_by.as_deref()), (9, Some("D")));
        assert_eq!(e["C"].value, 1);
    }

    #[test]
    fn effective_priority_of_a_long_chain_needs_no_deep_stack() {
        let mut s = State { api_version: "v1".into(), ..Default::default() };
        let name = |i: usize| ank_common::WorkloadName::new(format!("w{i}")).unwrap();
        for i in 0..20_000 {
            let mut wl = Workload { runtime: "podman".into(), agent: "A".into(), ..Default::default() };
            if i > 0 {
                wl.dependencies.insert(name(i - 1), ank_common::AddCondition::Running);
            }
            s.workloads.insert(name(i), wl);
        }
        s.workloads.get_mut("w19999").unwrap().priority = Some(9);
        let e = compute(&s);
        assert_eq!((e["w0"].value, e["w0"].raised_by.as_deref()), (9, Some("w19999")));
    }

    #[test]
    fn effective_priority_replaces_user_values_and_stays_off_plain_workloads() {
        let mut s = state(
            "apiVersion: v1\nworkloads:\n  x: {runtime: podman, agent: A, runtimeConfig: x, effectivePriority: 9}\n  y: {runtime: podman, agent: A, runtimeConfig: y, priority: 0}\n",
        );
        let mut r = s.clone();
        write(&mut s, &mut r);
        assert_eq!(r.workloads["x"].effective_priority, None, "a user's value is replaced");
        assert_eq!(r.workloads["y"].effective_priority, Some(0));
    }

    #[test]
    fn new_escalations_name_the_dependent_once() {
        let mut s = state(K3);
        let mut r = s.clone();
        write(&mut s, &mut r);
        let esc = new_escalations(&State::default(), &r);
        assert_eq!(esc, vec![("A".to_owned(), "for B (5)".to_owned())]);
        assert!(new_escalations(&r, &r).is_empty(), "unchanged: no new escalation");
    }

    #[test]
    fn a_started_workload_keeps_its_rendering_when_only_start_time_fields_change() {
        let base = "apiVersion: v1\nworkloads:\n  A: {runtime: podman, agent: agent_A, runtimeConfig: a}\n";
        let (mut old_s, mut old_r) = (state(base), state(base));
        write(&mut old_s, &mut old_r);
        let more = format!(
            "{base}  B: {{runtime: podman, agent: agent_A, priority: 5, runtimeConfig: b, dependencies: {{A: ADD_COND_RUNNING}}}}\n"
        );
        let (mut new_s, mut new_r) = (state(&more), state(&more));
        write(&mut new_s, &mut new_r);
        let mut started = new_r.clone();
        keep_started(&old_s, &old_r, &new_s, &mut started, |_| true);
        assert_eq!(started.workloads["A"], old_r.workloads["A"], "running A is not restarted");
        let mut pending = new_r.clone();
        keep_started(&old_s, &old_r, &new_s, &mut pending, |_| false);
        assert_eq!(pending.workloads["A"].effective_priority, Some(5), "a pending A is escalated");
        // A change the user made is never kept back.
        let changed = more.replace("runtimeConfig: a", "runtimeConfig: a2");
        let (mut ch_s, mut ch_r) = (state(&changed), state(&changed));
        write(&mut ch_s, &mut ch_r);
        let before = ch_r.clone();
        keep_started(&old_s, &old_r, &ch_s, &mut ch_r, |_| true);
        assert_eq!(ch_r, before);
    }
}
