//! The agents' reports of their workloads' states: which the store takes
//! in, and which it drops (another agent's instances, canceled members,
//! instances the server neither wants nor lists, stale or invalid reports).

use ank_common::{State, StateKind, WorkloadInstanceName, WorkloadState};

use super::{Ingest, WorkloadStateStore};
use crate::desired_state;
use crate::desired_state::generations::Generations;

/// What a batch of reports changed: the states to push, and how many
/// reports were dropped as stale or from the future.
pub(crate) struct Ingested {
    pub(crate) changed: Vec<WorkloadState>,
    pub(crate) stale: u64,
}

impl WorkloadStateStore {
    /// Takes in `agent`'s reports against the rendered desired state
    /// `rendered` (whose workloads have `generations`); `canceled`: the
    /// instances a pipeline canceled, which stay Pending(Canceled).
    pub(crate) fn ingest_reports(
        &mut self,
        agent: &str,
        reports: Vec<WorkloadState>,
        rendered: &State,
        generations: &Generations,
        canceled: impl Fn(&WorkloadInstanceName) -> bool,
    ) -> Ingested {
        // An agent speaks only for its own workloads, and only for those the
        // server wants or still lists: after a partition or a server restart
        // the agent re-sends states of workloads deleted meanwhile, which it
        // is about to remove; they must not come back as ghost rows.
        let mut ingested = Ingested { changed: Vec::new(), stale: 0 };
        for s in reports.into_iter().filter(|s| s.instance_name.agent_name == agent) {
            let n = &s.instance_name;
            if canceled(n) {
                // A canceled member stays Pending(Canceled) whatever its agent says.
                continue;
            }
            let wanted = desired_state::wants_instance(rendered, n);
            // An instance being deleted only goes its way out: a report of
            // it running that the agent sent before it learnt of the
            // deletion (a full set after a reconnect) is not news.
            // An unwanted instance shown Stopping or (deleted while its
            // agent was away) AgentDisconnected is on its way out.
            let leaving = matches!(s.execution_state.kind, StateKind::Stopping(_) | StateKind::Removed);
            let known = match self.kind_of(n) {
                None => false,
                Some(kind) => leaving || !matches!(kind, StateKind::Stopping(_) | StateKind::AgentDisconnected),
            };
            if !wanted && !known {
                continue;
            }
            let generation = wanted.then(|| generations.of(&n.workload_name)).flatten();
            match self.ingest(&s, generation) {
                Ingest::Accepted(true) => ingested.changed.push(self.state_of(n)),
                Ingest::Accepted(false) => {}
                Ingest::Stale | Ingest::Future => {
                    tracing::debug!(
                        "report of '{n}' at generation {} dropped (current {generation:?})",
                        s.status.observed_generation
                    );
                    ingested.stale += 1;
                }
                Ingest::Invalid(missing) => tracing::warn!(
                    "agent '{agent}': report of '{n}' without the {} condition ignored",
                    missing.as_str()
                ),
            }
        }
        ingested
    }
}
