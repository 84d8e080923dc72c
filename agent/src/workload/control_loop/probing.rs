//! The probing half of the [`WorkloadControlLoop`] (feature H6): the loop
//! starts the [`ProbeRunner`] of a workload with probes when it reports the
//! container Running and drops it when it reports anything else (or the
//! container goes); a change of only the probe settings starts it anew
//! with them. A liveness failure of the runner comes back as
//! `WorkloadCommand::LivenessFailed` and is a failure under the restart
//! policy: with ON_FAILURE or ALWAYS the container is removed and created
//! anew (`apply_restart_policy`), with NEVER it is removed and the
//! workload stays `Failed(ExecFailed)`. Workloads without probes are not
//! touched here at all.

use ank_common::execution_state::Failed;
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::EventKind;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};

use super::WorkloadControlLoop;
use crate::probes::{ProbeSet, ProbeTarget, Readiness};
use crate::runtime_connectors::WorkloadId;
use crate::workload::policy;
use crate::workload::probe_runner::{ProbeRunner, Runner};

impl WorkloadControlLoop {
    /// Starts or stops the probes before `state` of `instance` is reported.
    pub(super) async fn follow_probes(&mut self, instance: &WorkloadInstanceName, state: &ExecutionState) {
        let Some(spec) = self.spec.as_ref().filter(|s| &s.instance_name == instance) else { return };
        let probes = ProbeSet::of(spec);
        let Some(current) = self.current.as_mut() else { return };
        if probes.is_empty() || state.kind != StateKind::Running || self.deleting {
            current.probes = None;
            return;
        }
        if current.probes.is_some() {
            return;
        }
        let readiness = probes.readiness.is_some().then_some(Readiness::Unknown);
        let executor = self.ctx.registry.get(&current.runtime).and_then(|c| c.probe_executor());
        let runner = Runner {
            instance: instance.clone(),
            target: ProbeTarget::new(current.id.clone()),
            probes,
            executor,
            self_reports: self.ctx.control_interfaces.self_reports(),
            reporter: self.ctx.reporter.clone(),
            control_loop: self.own.clone(),
        };
        tracing::debug!("workload '{instance}': probes start in '{}'", current.id);
        current.probes = Some(ProbeRunner::start(runner));
        self.ctx.reporter.readiness(instance, readiness).await;
    }

    /// The spec changed only in what keeps the container (the probes, say):
    /// a running runner starts over with the new probe settings.
    pub(super) async fn probes_changed(&mut self, old: Option<&WorkloadSpec>) {
        let Some(spec) = self.spec.clone() else { return };
        let before = old.map(ProbeSet::of).unwrap_or_default();
        let now = ProbeSet::of(&spec);
        if before == now {
            return;
        }
        if let Some(current) = self.current.as_mut() {
            current.probes = None;
        }
        if now.readiness.is_none() && before.readiness.is_some() {
            self.ctx.reporter.readiness(&spec.instance_name, None).await;
        }
        let running =
            self.last_reported.clone().filter(|(i, s)| *i == spec.instance_name && s.kind == StateKind::Running);
        if let Some((instance, state)) = running {
            self.follow_probes(&instance, &state).await;
        }
    }

    /// The runner of `workload_id` saw its liveness (or startup) probe fail.
    pub(super) async fn handle_liveness_failed(&mut self, workload_id: &WorkloadId, reason: String) {
        let Some(spec) = self.spec.clone() else { return };
        if self.deleting || self.current.as_ref().is_none_or(|c| &c.id != workload_id) {
            return;
        }
        let instance = spec.instance_name.clone();
        tracing::warn!("workload '{instance}' is unhealthy: {reason}");
        self.ctx.reporter.event(&instance, EventKind::Unhealthy, reason.clone()).await;
        let state = ExecutionState::with_info(StateKind::Failed(Failed::ExecFailed), reason);
        if !policy::restart_needed(spec.workload.restart_policy, &state)
            && let Some(current) = self.current.take()
        {
            // NEVER: stopped for good (removed), the state stays Failed.
            self.remove_silently(&current.runtime, &current.id).await;
        }
        self.report(&instance, state.clone()).await;
        self.apply_restart_policy(&state).await;
    }
}
