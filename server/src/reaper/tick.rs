//! The reaper's tick: the finished workloads whose ttl ran out, their
//! `Reaped` events, and the desired state without them (also out of their
//! groups). It borrows what it reads and writes and returns the change to
//! make; the actor makes it as an internal update (saved to the state file
//! if there is one, a job like any other change).

use ank_common::workload_events::EventKind;
use tokio::time::Instant;

use crate::desired_state::{self, ChangeName, DesiredState, ServerChange};
use crate::reaper::{Candidate, Due, Reaper};
use crate::workload_states::WorkloadStateStore;

impl Reaper {
    /// The finished workloads of `desired` whose ttl ran out at `now`.
    // [feature K7: ttlAfterFinished reaps from the desired state]
    pub(crate) fn due(&self, desired: &DesiredState, states: &WorkloadStateStore, now: Instant) -> Vec<Due> {
        let default_ttl = self.settings().default_ttl;
        let candidates = desired.rendered.workloads.iter().filter_map(|(name, wl)| {
            // Validated at apply.
            let ttl = wl.ttl_after_finished.as_deref().and_then(|t| ank_common::duration::parse_duration(t).ok());
            if ttl.is_none() && default_ttl.is_none() {
                return None;
            }
            let spec = desired_state::spec_of(name, wl)?;
            let n = &spec.instance_name;
            let state = states.kind_of(n).zip(states.timing(n).map(|t| t.state_since));
            Some(Candidate { name, state, ttl, policy: wl.restart_policy })
        });
        self.check(candidates, now)
    }
}

/// Records why the due workloads go: subscribers see the `Reaped` event
/// before the workload goes.
pub(crate) fn record_reaped(states: &mut WorkloadStateStore, due: &[Due]) {
    for d in due {
        tracing::info!("workload '{}' reaped: {}", d.workload, d.reason);
        states.record_event(&d.workload, EventKind::Reaped, &d.reason);
    }
}

/// The change that deletes the due workloads from `current`.
pub(crate) fn reaping(current: &DesiredState, due: &[Due]) -> ServerChange {
    let what = format!("reaping of {} workloads", due.len());
    let name = ChangeName { what, stays: "tried again at its next tick" };
    ServerChange { state: without(&current.state, due), moves: Vec::new(), name }
}

/// `state` without the due workloads, also as group members (a group
/// left without members goes too).
fn without(state: &ank_common::State, due: &[Due]) -> ank_common::State {
    let mut next = state.clone();
    for d in due {
        next.workloads.remove(d.workload.as_str());
        for group in next.groups.values_mut() {
            group.members.retain(|m| m.as_str() != d.workload);
        }
    }
    next.groups.retain(|_, g| !g.members.is_empty());
    next
}
