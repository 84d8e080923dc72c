//! Cancel-on-failure of pipeline groups: once a member failed for good
//! (Failed and not restarted, or Pending(StartingFailed)), every later
//! member that has not started becomes Pending(Canceled) with a `Canceled`
//! event ("pipeline upd: s2 failed"). The job engine keeps a canceled
//! member from ever being handed out; one already handed out (a startup
//! job hands everything out at once) is deleted from its agent before it
//! could start. Canceled is terminal for that instance: a new apply of the
//! member (changed, or deleted and applied again) starts over.

use std::collections::BTreeMap;

use ank_common::execution_state::Pending;
use ank_common::groups::GroupMode;
use ank_common::messages::{DeletedWorkload, FromServer};
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind, WorkloadState};

use super::advance::Advance;
use crate::desired_state;
use crate::priorities;
use crate::reaper::failed_for_good;

impl Advance<'_> {
    /// Cancels the members of failed pipelines that have not started and
    /// shows every canceled member as Pending(Canceled); returns the
    /// changed states. Runs before the jobs are stepped.
    // [feature K6: pipeline cancel-on-failure -> Pending(Canceled), never sent to the agent]
    pub(super) fn cancel_failed_pipelines(&mut self) -> Vec<WorkloadState> {
        let mut cancel: Vec<(WorkloadSpec, String)> = Vec::new();
        for (group_name, group) in self.current.state.groups.iter().filter(|(_, g)| g.mode == GroupMode::Pipeline) {
            let mut failed: Option<&str> = None;
            for member in &group.members {
                let Some((name, wl)) = self.current.rendered.workloads.get_key_value(member.as_str()) else {
                    continue;
                };
                let Some(spec) = desired_state::spec_of(name, wl) else { continue };
                if self.jobs.is_canceled(&spec.instance_name) {
                    continue;
                }
                let kind = self.states.kind_of(&spec.instance_name);
                match failed {
                    None if kind.is_some_and(|k| failed_for_good(wl.restart_policy, k)) => {
                        failed = Some(member.as_str());
                    }
                    Some(step) if !priorities::started(kind) => {
                        cancel.push((spec, format!("pipeline {group_name}: {step} failed")));
                    }
                    _ => {}
                }
            }
        }
        for (spec, reason) in cancel {
            let n = spec.instance_name.clone();
            tracing::info!("workload '{}' canceled: {reason}", n.workload_name);
            let never_sent = self.jobs.cancel(spec, &reason);
            if !never_sent && self.conns.is_connected(&n.agent_name) {
                // Handed out but not started: the agent drops it before it starts.
                let deleted = vec![DeletedWorkload { instance_name: n.clone(), dependencies: BTreeMap::new() }];
                self.out.send_to_agent(
                    &n.agent_name,
                    FromServer::UpdateWorkload { added: Vec::new(), deleted, resync: false },
                );
            }
            self.states.record_event(&n.workload_name, EventKind::Canceled, &reason);
        }
        let marks: Vec<WorkloadState> = self
            .jobs
            .canceled()
            .filter(|(n, _)| self.states.kind_of(n) != Some(StateKind::Pending(Pending::Canceled)))
            .map(|(n, reason)| {
                WorkloadState::new(n.clone(), ExecutionState::with_info(StateKind::Pending(Pending::Canceled), reason))
            })
            .collect();
        let mut changed = Vec::new();
        for state in marks {
            if self.states.record(&state) {
                changed.push(self.states.state_of(&state.instance_name));
            }
        }
        changed
    }
}
