//! The `RuntimeManager` at a `ServerHello` (after every connect): what
//! exists in the runtimes is compared with the full set of this agent's
//! workloads; each desired workload is resumed, started again, replaced or
//! created, and what nobody wants is deleted or removed as an orphan.

use std::collections::BTreeMap;

use ank_common::workload::WorkloadSpec;
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName};

use super::runtime_facade::RuntimeFacade;
use super::{RuntimeManager, listing, no_dependents};
use crate::runtime_connectors::ListedWorkload;
use crate::workload_operation::{Earlier, ReusableWorkloadSpec, WorkloadOperation};

impl RuntimeManager {
    /// Existing workloads of this agent in all runtimes, by instance name.
    async fn list_existing(&self) -> listing::Existing {
        listing::list_existing(self.runtimes.iter().cloned().collect(), self.agent_name.clone(), false).await
    }

    /// What exists in the runtimes for a hello: the listing of the agent's
    /// start when it is still valid (the first hello), else a new one; with
    /// which of the two it is.
    async fn existing_for_hello(&mut self) -> (listing::Existing, &'static str) {
        if self.start_listing.is_some() {
            // Events already sent count before the hello: one of them
            // makes the start listing out of date.
            while let Ok(ev) = self.inbox.runtime_events.try_recv() {
                self.handle_runtime_event(ev);
            }
        }
        if let Some(start) = self.start_listing.take()
            && let Some(existing) = start.take().await
        {
            return (existing, "from the listing of the agent's start");
        }
        (self.list_existing().await, "listed")
    }

    /// The full set of this agent's workloads, after every (re)connect.
    // [impl->swdd~agent-initial-list-existing-workloads~1]
    pub(super) async fn handle_server_hello(&mut self, specs: Vec<WorkloadSpec>) {
        let desired: BTreeMap<String, WorkloadSpec> =
            specs.into_iter().filter(|s| self.is_ours(s)).map(|s| (s.name().to_owned(), s)).collect();
        let began = tokio::time::Instant::now();
        let (mut existing, source) = self.existing_for_hello().await;
        tracing::debug!(
            "server hello with {} workloads; {} existing ones {source}, in {:.1} ms",
            desired.len(),
            existing.len(),
            began.elapsed().as_secs_f64() * 1e3
        );
        for object in self.objects.values() {
            existing.remove(&object.instance_name);
        }
        let mut ops = Vec::new();
        for (name, object) in &self.objects {
            if !desired.contains_key(name) {
                ops.push(WorkloadOperation::Delete(no_dependents(&object.instance_name)));
            }
        }
        // Waiting ones (for quota, say) that are no longer wanted never start.
        for instance in self.scheduling.scheduler.queued_creates() {
            if !desired.contains_key(&instance.workload_name) {
                ops.push(WorkloadOperation::Delete(no_dependents(&instance)));
            }
        }
        self.runtimes.unsupported.retain(|name, _| desired.contains_key(name));
        // [feature K7: a workload deleted while the agent was away forgets that it finished]
        self.leftovers.finished.retain(|name| desired.contains_key(name));
        for spec in desired.into_values() {
            if let Some(op) = self.hello_operation(spec, &mut existing) {
                ops.push(op);
            }
        }
        for (_, (runtime, found)) in existing {
            // [impl->swdd~agent-existing-workloads-delete-unneeded~1]
            if let Some(facade) = self.runtimes.get(&runtime) {
                self.leftovers.orphans.remove(facade.connector(), found);
            }
        }
        self.leftovers.orphans.arm();
        self.schedule(ops).await;
    }

    /// What to do with one desired workload of a hello; resumes it at once
    /// when it still runs unchanged.
    fn hello_operation(
        &mut self,
        spec: WorkloadSpec,
        existing: &mut BTreeMap<WorkloadInstanceName, (String, ListedWorkload)>,
    ) -> Option<WorkloadOperation> {
        // Already waiting in the queue (after an update whose old instance
        // went first, its loop is still there): it waits there.
        match self.scheduling.scheduler.queued_create(spec.name()) {
            Some(queued) if *queued == spec => return None,
            Some(_) if self.objects.contains_key(spec.name()) => {
                return Some(WorkloadOperation::Create(ReusableWorkloadSpec::new(spec)));
            }
            _ => {}
        }
        if let Some(object) = self.objects.get_mut(spec.name()) {
            if object.instance_name == spec.instance_name && !object.deleting {
                // Wanted as it is: a delete waiting for its dependents is
                // called off; the loop reports its state again when nothing
                // changed, or finishes an update whose delete failed before.
                return self.wanted_again(spec, false);
            }
            return Some(WorkloadOperation::Update(spec, no_dependents(&object.instance_name)));
        }
        // [impl->swdd~agent-existing-workloads-starts-new-if-not-found~1]
        let Some((runtime, found)) = existing.remove(&spec.instance_name) else {
            // [feature K7: a reaped workload is not re-run after an agent restart]
            if let Some(state) = self.leftovers.finished.final_state(&spec)
                && let Some(facade) = self.runtimes.get(&spec.workload.runtime)
            {
                let object = facade.finished_workload(spec.clone(), state);
                self.objects.insert(spec.name().to_owned(), object);
                return None;
            }
            // An earlier instance of the same workload is replaced: removed
            // right before the create, so both never run together.
            let earlier = existing
                .iter()
                .find(|(i, (rt, _))| i.workload_name == spec.name() && *rt == spec.workload.runtime)
                .map(|(i, _)| i.clone());
            let earlier = earlier.and_then(|i| existing.remove(&i)).map(|(rt, w)| Earlier::Replace(rt, w.workload_id));
            return Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }));
        };
        let facade = self.runtimes.get(&runtime).filter(|_| runtime == spec.workload.runtime);
        match facade.map(|f| (f, self.found_unchanged(&found.state, f))) {
            Some((facade, Found::Resume)) => {
                // [impl->swdd~agent-existing-workloads-resume-existing~2]
                // [impl->swdd~agent-stores-running-workload~1]
                self.scheduling.scheduler.started_outside(&spec);
                let object = facade.resume_workload(spec.clone(), found);
                self.objects.insert(spec.name().to_owned(), object);
                None
            }
            Some((_, Found::StartAgain)) => {
                // [impl->swdd~agent-existing-workloads-reuse-unmodified~1]
                let earlier = Some(Earlier::Reuse(runtime, found.workload_id));
                Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }))
            }
            Some((_, Found::Replace)) | None => {
                // [impl->swdd~agent-existing-workloads-replace-updated~2]
                let earlier = Some(Earlier::Replace(runtime, found.workload_id));
                Some(WorkloadOperation::Create(ReusableWorkloadSpec { spec, earlier }))
            }
        }
    }

    /// What the agent does with an unchanged workload of its desired state
    /// that it finds at its start (or a reconnect) in `state`, as Ankaios
    /// does whatever the restart policy: a running one is taken over; one
    /// that succeeded is started again in place (its logs stay); any other
    /// (failed, created but never started, paused) is removed and created
    /// anew. With the opt-in retention of its end (`--retain-succeeded`,
    /// `--retain-failed`), a finished one is taken over instead and stays
    /// finished until it is reaped, as a reaped one is not run again.
    fn found_unchanged(&self, state: &ExecutionState, facade: &RuntimeFacade) -> Found {
        match state.kind {
            StateKind::Running => Found::Resume,
            _ if self.leftovers.retention.of(state).is_some() => Found::Resume,
            StateKind::Succeeded if facade.connector().supports_start() => Found::StartAgain,
            _ => Found::Replace,
        }
    }
}

/// What becomes of an unchanged workload found at startup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// Taken over as it is.
    Resume,
    /// Its container is started again (`podman start`).
    StartAgain,
    /// Removed, then created anew.
    Replace,
}
