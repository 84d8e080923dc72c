//! [`Jobs`]: the isolated-job rule (feature K5) during one scheduling pass.
//! Jobs are workloads with `restartPolicy: NEVER`; services are never held
//! back by it and never hold anything back. An isolated job
//! (`policy.isolated`) starts only when no other job of this agent is
//! starting or running, and while it is, no other job starts. A job that
//! comes after a waiting isolated job in the start order waits too, so the
//! isolated job is not starved by the jobs behind it.

use ank_common::workload::WorkloadSpec;

use super::slots::{Slots, is_job};
use crate::workload_state_store::WorkloadStateStore;

/// The jobs that are active (starting or running) and the first isolated
/// job that waits, as the pass goes along the queue.
#[derive(Debug, Default)]
pub struct Jobs {
    /// Active jobs: name and whether it is isolated.
    active: Vec<(String, bool)>,
    /// The first isolated job in start order that is held back.
    isolated_waiting: Option<String>,
}

impl Jobs {
    /// The jobs of `slots` that use quota (starting, running).
    pub fn active_in(slots: &Slots, store: &WorkloadStateStore) -> Self {
        let active = slots
            .iter()
            .filter(|s| s.is_job() && s.occupies(store))
            .map(|s| (s.spec.name().to_owned(), s.spec.workload.policy.isolated))
            .collect();
        Self { active, isolated_waiting: None }
    }

    /// Why `spec` must wait, if it must: the reason of its `Postponed` event.
    // [feature K5: an isolated job runs alone among the agent's jobs]
    pub fn hold(&self, spec: &WorkloadSpec) -> Option<String> {
        if !is_job(spec) {
            return None;
        }
        let name = spec.name();
        let others = self.active.iter().filter(|(n, _)| n != name);
        if spec.workload.policy.isolated {
            if let Some((other, _)) = others.clone().next() {
                return Some(format!("isolated: waiting for {other}"));
            }
        } else if let Some((iso, _)) = others.clone().find(|(_, isolated)| *isolated) {
            return Some(format!("isolated: {iso}"));
        }
        self.isolated_waiting.as_ref().filter(|iso| iso.as_str() != name).map(|iso| format!("isolated: {iso}"))
    }

    /// `spec` starts in this pass.
    pub fn started(&mut self, spec: &WorkloadSpec) {
        if is_job(spec) {
            self.active.push((spec.name().to_owned(), spec.workload.policy.isolated));
        }
    }

    /// `spec` could start by its dependencies but is held back.
    pub fn held(&mut self, spec: &WorkloadSpec) {
        if is_job(spec) && spec.workload.policy.isolated && self.isolated_waiting.is_none() {
            self.isolated_waiting = Some(spec.name().to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use ank_common::workload::{RestartPolicy, Workload};
    use ank_common::{AgentName, WorkloadName};

    use super::*;

    fn job(name: &str, isolated: bool) -> WorkloadSpec {
        let mut wl =
            Workload { runtime: "podman".into(), runtime_config: format!("image: {name}"), ..Default::default() };
        wl.restart_policy = RestartPolicy::Never;
        wl.policy.isolated = isolated;
        WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), wl)
    }

    #[test]
    // [test of feature K5]
    fn isolation_keeps_an_isolated_job_alone_among_jobs() {
        let (j1, iso, j2) = (job("j1", false), job("iso", true), job("j2", false));
        let mut service = job("svc", true);
        service.workload.restart_policy = RestartPolicy::Always;
        let mut jobs = Jobs::default();
        assert_eq!(jobs.hold(&j1), None);
        jobs.started(&j1);
        assert_eq!(jobs.hold(&iso), Some("isolated: waiting for j1".into()));
        jobs.held(&iso);
        assert_eq!(jobs.hold(&j2), Some("isolated: iso".into()), "behind the waiting isolated job");
        assert_eq!(jobs.hold(&service), None, "services are not jobs");

        let mut jobs = Jobs::default();
        assert_eq!(jobs.hold(&iso), None);
        jobs.started(&iso);
        assert_eq!(jobs.hold(&j2), Some("isolated: iso".into()));
        assert_eq!(jobs.hold(&iso), None, "it does not wait for itself");
        jobs.started(&service);
        assert_eq!(jobs.hold(&service), None);
    }
}
