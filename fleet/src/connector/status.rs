//! The vehicle's status as the fleet sees it, computed from one complete
//! state (desired workloads, the ledger, workload states, jobs): the
//! workloads the applied rollout manages, their execution states,
//! generations and Ready/Available, and the apply job's phase. Also the
//! workload events that are new or counted up since the last look.

use std::collections::{BTreeMap, HashMap};

use ank_common::complete_state::ConfigItem;
use ank_common::conditions::{ConditionStatus, ConditionType};
use ank_common::convert::{PartialCompleteState, PartialInstance};

use super::apply::{LEDGER_CONFIG, Ledger};
use crate::payload::{Event, JobStatus, PAYLOAD_VERSION, RolloutStatus, Status, WorkloadStatus};

/// The field masks of the state a status is computed from.
pub const STATUS_MASKS: [&str; 4] = ["desiredState.workloads", "desiredState.configs", "workloadStates", "jobs"];

/// The ledger held in a complete state.
pub fn ledger_of(state: &PartialCompleteState) -> Ledger {
    let config: Option<&ConfigItem> =
        state.desired_state.as_ref().and_then(|d| d.configs.as_ref()).and_then(|c| c.get(LEDGER_CONFIG));
    Ledger::from_config(config)
}

fn workload_status(state: &PartialCompleteState, name: &str, agent: &str) -> WorkloadStatus {
    let desired = state.desired_state.as_ref().and_then(|d| d.workloads.as_ref()).is_some_and(|w| w.contains_key(name));
    let mut best: Option<WorkloadStatus> = None;
    let agents = state.workload_states.iter().flatten();
    for (state_agent, workloads) in agents {
        for instance in workloads.get(name).into_iter().flat_map(|ids| ids.values()) {
            let PartialInstance::Full(entry) = instance else { continue };
            let (s, sub) = entry.state.kind.names();
            let candidate = WorkloadStatus {
                agent: state_agent.clone(),
                state: s.to_owned(),
                sub_state: sub.to_owned(),
                additional_info: entry.state.additional_info.clone(),
                generation: entry.status.generation,
                observed_generation: entry.status.observed_generation,
                ready: entry.status.status_of(ConditionType::Ready) == ConditionStatus::True,
                available: entry.status.status_of(ConditionType::Available) == ConditionStatus::True,
                reverted: entry.status.reverted.as_ref().map(|r| r.reason.clone()).unwrap_or_default(),
            };
            // The instance on the desired agent wins; among equals the newest generation.
            let better = match &best {
                None => true,
                Some(b) => {
                    (state_agent == agent, candidate.observed_generation) > (b.agent == agent, b.observed_generation)
                }
            };
            if better {
                best = Some(candidate);
            }
        }
    }
    best.unwrap_or_else(|| WorkloadStatus {
        agent: agent.to_owned(),
        // Desired but not reported yet, or no longer desired and gone.
        state: if desired { "Unknown" } else { "Removed" }.to_owned(),
        sub_state: String::new(),
        ..WorkloadStatus::default()
    })
}

/// The apply job of the ledger's rollout: `job_id` when the connector
/// knows it (it applied the rollout in this run), otherwise the newest job
/// the server keeps that touched a managed workload.
fn job_of(state: &PartialCompleteState, ledger: &Ledger, job_id: Option<u64>) -> Option<JobStatus> {
    let jobs = state.jobs.as_ref()?;
    let job = match job_id {
        Some(id) => jobs.get(&id.to_string()),
        None => jobs.values().filter(|j| j.workloads.keys().any(|w| ledger.workloads.contains(w))).max_by_key(|j| j.id),
    }?;
    Some(JobStatus { id: job.id, phase: job.phase.as_str().to_owned(), reason: job.reason.clone() })
}

/// The status of the vehicle in `state`; `rollout` is the latest desired
/// message the connector handled, `job_id` the job its apply became.
pub fn compute(
    vehicle: &str,
    seq: u64,
    state: &PartialCompleteState,
    rollout: Option<&RolloutStatus>,
    job_id: Option<u64>,
) -> Status {
    let ledger = ledger_of(state);
    let desired = state.desired_state.as_ref().and_then(|d| d.workloads.as_ref());
    let workloads: BTreeMap<String, WorkloadStatus> = ledger
        .workloads
        .iter()
        .map(|name| {
            let agent = desired.and_then(|w| w.get(name)).and_then(|w| w.agent.clone()).unwrap_or_default();
            (name.clone(), workload_status(state, name, &agent))
        })
        .collect();
    let job = job_of(state, &ledger, job_id);
    let applied = ledger.current.is_some();
    Status {
        version: PAYLOAD_VERSION,
        vehicle: vehicle.to_owned(),
        seq,
        published_at: crate::payload::now(),
        rollout: rollout.cloned(),
        applied_rollout: ledger.current.clone(),
        accepted_seq: ledger.seq,
        job,
        ready: applied && workloads.values().all(|w| w.ready),
        available: applied && workloads.values().all(|w| w.available),
        workloads,
    }
}

/// Remembers the count of every event published, to send only what is
/// new or counted up.
#[derive(Debug, Default)]
pub struct EventTracker {
    seen: HashMap<(String, String, String, String), u64>,
}

impl EventTracker {
    /// The events of `state` not published yet with their current count.
    pub fn fresh(&mut self, state: &PartialCompleteState) -> Vec<Event> {
        let mut fresh = Vec::new();
        for (agent, workloads) in state.workload_states.iter().flatten() {
            for (workload, ids) in workloads {
                for instance in ids.values() {
                    let PartialInstance::Full(entry) = instance else { continue };
                    for e in &entry.status.events {
                        let key = (agent.clone(), workload.clone(), e.kind.as_str().to_owned(), e.reason.clone());
                        if self.seen.get(&key).is_some_and(|&c| c >= e.count) {
                            continue;
                        }
                        self.seen.insert(key, e.count);
                        fresh.push(Event {
                            workload: workload.clone(),
                            agent: agent.clone(),
                            kind: e.kind.as_str().to_owned(),
                            reason: e.reason.clone(),
                            count: e.count,
                            first_seen: e.first_seen.clone(),
                            last: e.last.clone(),
                        });
                    }
                }
            }
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::payload::RolloutResult;

    fn state(ready: &str, job_phase: &str) -> PartialCompleteState {
        let ledger =
            json!({"current": "r2", "applied": ["r1", "r2"], "workloads": ["app"], "configs": [], "groups": []});
        PartialCompleteState::from_json(&json!({
            "desiredState": {"apiVersion": "v1", "workloads": {"app": {"agent": "v01", "runtime": "podman", "runtimeConfig": ""}},
                              "configs": {"fleet-rollout": ledger}},
            "workloadStates": {"v01": {"app": {"abc": {"state": "Running", "subState": "Ok", "additionalInfo": "",
                "generation": 2, "observedGeneration": 2,
                "conditions": [{"type": "Ready", "status": ready, "observedGeneration": 2},
                               {"type": "Available", "status": "True", "observedGeneration": 2}],
                "events": [{"kind": "BackOff", "reason": "exit 1", "count": 3, "firstSeen": "t0", "last": "t1"}]}}}},
            "jobs": {"3": {"id": 3, "phase": "Succeeded", "workloads": {"app": {"class": "succeeded"}}},
                     "4": {"id": 4, "phase": job_phase, "workloads": {"app": {"class": "inProgress"}}},
                     "5": {"id": 5, "phase": "Failed", "workloads": {"other": {"class": "failed"}}}}
        }))
        .unwrap()
    }

    #[test]
    fn a_status_shows_the_managed_workloads_their_conditions_and_the_job() {
        let rollout = RolloutStatus { id: "r2".into(), result: RolloutResult::Applied, reason: String::new() };
        let s = compute("v01", 5, &state("True", "Succeeded"), Some(&rollout), Some(4));
        assert_eq!(s.applied_rollout.as_deref(), Some("r2"));
        assert_eq!(s.job, Some(JobStatus { id: 4, phase: "Succeeded".into(), reason: String::new() }));
        assert!(s.ready && s.available);
        let app = &s.workloads["app"];
        assert_eq!(
            (app.state.as_str(), app.sub_state.as_str(), app.generation, app.observed_generation),
            ("Running", "Ok", 2, 2)
        );
        let not_ready = compute("v01", 6, &state("False", "Progressing"), None, None);
        assert!(!not_ready.ready && not_ready.available);
        let job = not_ready.job.unwrap();
        assert_eq!(
            (job.id, job.phase.as_str()),
            (4, "Progressing"),
            "without a known id: the newest job of a managed workload"
        );
    }

    #[test]
    fn a_vehicle_without_a_rollout_is_not_ready_and_a_missing_state_is_unknown() {
        let empty = PartialCompleteState::from_json(&json!({"desiredState": {"apiVersion": "v1"}})).unwrap();
        let s = compute("v01", 1, &empty, None, None);
        assert!(!s.ready && s.workloads.is_empty() && s.applied_rollout.is_none());
        let mut st = state("True", "Succeeded");
        st.workload_states = None;
        assert_eq!(compute("v01", 1, &st, None, None).workloads["app"].state, "Unknown");
    }

    #[test]
    fn a_workload_whose_gated_update_was_reverted_says_why() {
        let mut json = state("True", "Failed").to_json().unwrap();
        json["workloadStates"]["v01"]["app"]["abc"]["reverted"] = json!({
            "fromGeneration": 2, "toGeneration": 1, "at": "t2",
            "reason": "generation 2 not Ready within 15s; put back generation 1"
        });
        let st = PartialCompleteState::from_json(&json).unwrap();
        let s = compute("v01", 1, &st, None, None);
        assert_eq!(s.workloads["app"].reverted, "generation 2 not Ready within 15s; put back generation 1");
        assert!(compute("v01", 1, &state("True", "Failed"), None, None).workloads["app"].reverted.is_empty());
    }

    #[test]
    fn events_are_sent_once_per_count() {
        let mut tracker = EventTracker::default();
        let first = tracker.fresh(&state("True", "Succeeded"));
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].kind.as_str(), first[0].reason.as_str(), first[0].count), ("BackOff", "exit 1", 3));
        assert!(tracker.fresh(&state("True", "Succeeded")).is_empty());
    }
}
