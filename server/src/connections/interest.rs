//! [`Interest`]: which other workloads' states an agent of this orchestrator
//! needs, learnt from the workloads the server hands it.
//!
//! An agent reads the states of other agents' workloads for one thing: the
//! inter-workload dependencies of its own (start when a dependency runs,
//! delete when its dependents are gone). Ankaios forwards every state report
//! to every agent, so with N agents an apply costs N × all workloads
//! messages. Agents that say they are this orchestrator's (they report
//! conditions in their hello) get only the states of
//!
//! - the workloads their workloads depend on (`dependencies` of each spec
//!   in a `ServerHello` or an `UpdateWorkload`), and
//! - the dependents a deletion waits for (`dependencies` of each
//!   `DeletedWorkload`),
//!
//! and, the moment a name becomes needed, its current states. A name once
//! needed stays needed for the life of the stream, so the agent also gets
//! its `Removed`, and no state it keeps can go stale. Ankaios agents keep
//! getting every state, as from Ankaios.

use std::collections::{BTreeSet, HashSet};

use ank_common::WorkloadState;
use ank_common::messages::FromServer;

/// The workload names whose states one agent stream is sent.
#[derive(Debug, Default)]
pub struct Interest {
    names: HashSet<String>,
}

impl Interest {
    /// Notes the names `msg` (a message to this agent) makes it need;
    /// returns those it did not need before.
    pub fn learn(&mut self, msg: &FromServer) -> BTreeSet<String> {
        let mut new = BTreeSet::new();
        let mut need = |name: &str| {
            if !self.names.contains(name) {
                self.names.insert(name.to_owned());
                new.insert(name.to_owned());
            }
        };
        let (added, deleted) = match msg {
            FromServer::ServerHello(added) => (added.as_slice(), &[][..]),
            FromServer::UpdateWorkload { added, deleted, .. } => (added.as_slice(), deleted.as_slice()),
            _ => return new,
        };
        for spec in added {
            spec.workload.dependencies.keys().for_each(|d| need(d.as_str()));
        }
        for d in deleted {
            d.dependencies.keys().for_each(|n| need(n));
        }
        new
    }

    /// What a stream with this interest is sent of `msg`: a states message
    /// with only the needed states (`None` when it needs none of them), any
    /// other message as it is.
    pub fn narrow(&self, msg: &FromServer) -> Option<FromServer> {
        match msg {
            FromServer::UpdateWorkloadState(states) => match self.filter(states) {
                None => Some(msg.clone()),
                Some(kept) => (!kept.is_empty()).then_some(FromServer::UpdateWorkloadState(kept)),
            },
            other => Some(other.clone()),
        }
    }

    /// The states of `states` this agent needs, or `None` if it needs all.
    fn filter(&self, states: &[WorkloadState]) -> Option<Vec<WorkloadState>> {
        if states.iter().all(|s| self.needs(&s.instance_name.workload_name)) {
            return None;
        }
        Some(states.iter().filter(|s| self.needs(&s.instance_name.workload_name)).cloned().collect())
    }

    /// Whether this agent needs the states of `workload`.
    fn needs(&self, workload: &str) -> bool {
        self.names.contains(workload)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ank_common::messages::{DeleteCondition, DeletedWorkload};
    use ank_common::workload::WorkloadSpec;
    use ank_common::{AddCondition, AgentName, ExecutionState, Workload, WorkloadName};

    use super::*;

    fn spec(name: &str, deps: &[&str]) -> WorkloadSpec {
        let workload = Workload {
            agent: "A".into(),
            runtime: "podman".into(),
            runtime_config: "image: x".into(),
            dependencies: deps.iter().map(|d| (WorkloadName::new(*d).unwrap(), AddCondition::Running)).collect(),
            ..Workload::default()
        };
        WorkloadSpec::new(&WorkloadName::new(name).unwrap(), &AgentName::new("A").unwrap(), workload)
    }

    fn state(name: &str, agent: &str) -> WorkloadState {
        let spec = spec(name, &[]);
        let mut n = spec.instance_name;
        n.agent_name = agent.into();
        WorkloadState::new(n, ExecutionState::running())
    }

    #[test]
    fn interest_learns_dependencies_of_added_specs_and_dependents_of_deletions() {
        let mut i = Interest::default();
        assert!(i.learn(&FromServer::ServerHello(vec![spec("web", &["db"]), spec("db", &[])])).contains("db"));
        // Known already: nothing new.
        assert!(i.learn(&FromServer::ServerHello(vec![spec("web", &["db"])])).is_empty());
        let deleted = DeletedWorkload {
            instance_name: spec("db", &[]).instance_name,
            dependencies: BTreeMap::from([("cache".to_owned(), DeleteCondition::NotPendingNorRunning)]),
        };
        let new = i.learn(&FromServer::UpdateWorkload {
            added: vec![spec("api", &["auth"])],
            deleted: vec![deleted],
            resync: false,
        });
        assert_eq!(new, BTreeSet::from(["auth".to_owned(), "cache".to_owned()]));
        assert!(i.learn(&FromServer::UpdateWorkloadState(vec![state("other", "B")])).is_empty());
        assert!(!i.needs("other") && !i.needs("web"));
    }

    #[test]
    fn interest_keeps_only_the_states_of_needed_workloads() {
        let mut i = Interest::default();
        i.learn(&FromServer::ServerHello(vec![spec("web", &["db"])]));
        let all = vec![state("db", "B"), state("db", "C")];
        assert_eq!(i.filter(&all), None, "all needed: the message goes as it is");
        let mixed = vec![state("db", "B"), state("log", "B"), state("other", "C")];
        assert_eq!(i.filter(&mixed), Some(vec![state("db", "B")]));
        assert_eq!(i.filter(&[state("log", "B")]), Some(vec![]));
    }
}
