//! [`Orphans`]: removes this agent's orphans, the containers that carry its
//! `agent` label but belong to no workload of its desired state (feature
//! K7). The `RuntimeManager` hands it the leftovers a ServerHello does not
//! want (at start and after every reconnect) and, after the first
//! ServerHello, the containers of every reconcile snapshot whose workload
//! it does not know. Removals run in the background and report no states
//! (the server does not know these instances); a container whose removal
//! still runs is not removed a second time.
//!
//! Containers of other agents never reach it: the connectors list only
//! those labelled with this agent's name.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::runtime_connectors::{ListedWorkload, RuntimeConnector, WorkloadId};

/// The background removal of orphaned containers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Orphans {
    /// Containers whose removal runs.
    in_flight: Arc<Mutex<HashSet<WorkloadId>>>,
    /// Whether a ServerHello said what is desired; before it, no listed
    /// container is an orphan.
    armed: bool,
}

/// The containers in `listed` of workloads that `wanted` does not know (by
/// workload name): a workload's own containers, also the finished ones kept
/// for their retention, are never orphans.
// [feature K7: orphans are containers of no workload of the desired state]
pub(crate) fn select<'a>(
    listed: &'a [ListedWorkload],
    wanted: impl Fn(&str) -> bool + 'a,
) -> impl Iterator<Item = &'a ListedWorkload> + 'a {
    listed.iter().filter(move |w| !wanted(&w.instance_name.workload_name))
}

impl Orphans {
    pub fn new() -> Self {
        Self::default()
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, HashSet<WorkloadId>> {
        self.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lets [`sweep`](Self::sweep) remove orphans: a ServerHello said what is desired.
    pub fn arm(&mut self) {
        self.armed = true;
    }

    /// Removes the containers of a reconcile listing whose workload
    /// `known` does not know (nothing before [`arm`](Self::arm)).
    // [feature K7: orphans are removed on each reconcile]
    pub fn sweep(&self, connector: Arc<dyn RuntimeConnector>, listed: &[ListedWorkload], known: impl Fn(&str) -> bool) {
        if !self.armed {
            return;
        }
        for found in select(listed, known) {
            self.remove(connector.clone(), found.clone());
        }
    }

    /// Removes `found` with `connector` in the background, unless its
    /// removal already runs.
    // [impl->swdd~agent-delete-old-workload-without-sending-workload-states~1]
    // [feature K7: orphans are removed at start and at every reconcile]
    pub fn remove(&self, connector: Arc<dyn RuntimeConnector>, found: ListedWorkload) {
        if !self.in_flight().insert(found.workload_id.clone()) {
            return;
        }
        tracing::info!("removing orphaned workload '{}' ('{}')", found.instance_name, found.workload_id);
        let in_flight = self.in_flight.clone();
        tokio::spawn(async move {
            if let Err(e) = connector.delete(&found.workload_id).await {
                tracing::warn!("removing orphaned workload '{}' failed: {e}", found.instance_name);
            }
            in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&found.workload_id);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime_connectors::fake::FakeRuntime;
    use ank_common::{AgentName, ExecutionState, WorkloadInstanceName, WorkloadName};

    fn instance(name: &str) -> WorkloadInstanceName {
        WorkloadInstanceName::new(&WorkloadName::new(name).unwrap(), &AgentName::new("agent_A").unwrap(), "image: x\n")
    }

    #[tokio::test]
    // [test of feature K7]
    async fn orphans_selects_unknown_names_and_removes_each_container_once() {
        let fake = Arc::new(FakeRuntime::new());
        let known = fake.insert_existing(instance("known"), ExecutionState::succeeded());
        let stray = fake.insert_existing(instance("stray"), ExecutionState::running());
        let listed = fake.list_workloads("agent_A").await.unwrap();
        let picked: Vec<_> = select(&listed, |n| n == "known").cloned().collect();
        assert_eq!(picked.iter().map(|w| &w.workload_id).collect::<Vec<_>>(), vec![&stray]);
        let orphans = Orphans::new();
        let settled = |o: &Orphans| {
            let o = o.clone();
            async move {
                tokio::time::timeout(std::time::Duration::from_secs(5), async {
                    while !o.in_flight().is_empty() {
                        tokio::task::yield_now().await;
                    }
                })
                .await
                .expect("removals end");
            }
        };
        // A failing delete leaves the container, so every attempt is seen.
        fake.fail_deletes(Some("busy"));
        orphans.remove(fake.clone(), picked[0].clone());
        orphans.remove(fake.clone(), picked[0].clone());
        settled(&orphans).await;
        assert_eq!(fake.deleted(), vec![instance("stray")], "a running removal is not started twice");
        fake.fail_deletes(None);
        orphans.remove(fake.clone(), picked[0].clone());
        settled(&orphans).await;
        assert_eq!(fake.workload_id_of(&instance("stray")), None, "a later attempt removes it");
        assert_eq!(fake.workload_id_of(&instance("known")), Some(known));
    }
}
