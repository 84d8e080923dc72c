//! The server's reaper tick: finished workloads whose ttl ran out get a
//! `Reaped` event, then they are deleted from the desired state as an
//! internal update (saved to the state file if there is one, a job like
//! any other change), which also takes them out of their group.

use ank_common::workload_events::EventKind;
use tokio::time::Instant;

use crate::actor::AnkaiosServer;
use crate::desired_state;
use crate::reaper::{Candidate, Due};

impl AnkaiosServer {
    /// Checks the finished workloads and deletes those due.
    // [feature K7: ttlAfterFinished reaps from the desired state]
    pub(crate) fn reaper_tick(&mut self) {
        if self.hooks_busy() {
            // Reaped at the next tick, on the state the hooks' chain leaves.
            return;
        }
        let now = Instant::now();
        let states = &self.states;
        let default_ttl = self.sched.reaper.settings().default_ttl;
        let candidates = self.desired.current.rendered.workloads.iter().filter_map(|(name, wl)| {
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
        let due = self.sched.reaper.check(candidates, now);
        if due.is_empty() {
            return;
        }
        // The event first, so that subscribers see why the workload goes.
        self.with_events(|s| {
            for d in &due {
                tracing::info!("workload '{}' reaped: {}", d.workload, d.reason);
                s.states.record_event(&d.workload, EventKind::Reaped, &d.reason);
            }
        });
        let next = match self.desired.current.after(without(&self.desired.current.state, &due)) {
            Ok(next) => next,
            Err(e) => return tracing::error!("reaping failed, the workloads stay: {e}"),
        };
        self.with_events(|s| {
            if let Err(e) = s.server_change(next, &[], format!("reaping of {} workloads", due.len())) {
                tracing::error!("reaping failed, the workloads stay: {e}");
            }
            s.advance_jobs_if_opened();
        });
    }
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
