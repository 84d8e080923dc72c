//! [`InstanceTable`]: the one record of every workload instance this agent
//! knows, owned by the `RuntimeManager`. Per instance of this agent it keeps
//! the generation of its spec (as the server said), whether its next report
//! answers a workload message of the server, whether it is retiring (deleted
//! and not added again), and the events not yet sent; per workload the ring
//! of its events. The execution states themselves — this agent's, after the
//! hysteresis, and the other agents' as the server forwards them — are kept
//! once, in its [`WorkloadStateStore`].
//!
//! It alone turns states into what the server gets: stamped with the
//! generation (`observedGeneration`), the Applied / Available / Health
//! conditions and the events, in batches; and it alone decides what is
//! passed on (the hysteresis, duplicates dropped, the first report after a
//! workload message passed on even when it repeats the last one). Pure
//! bookkeeping: the caller sends what it returns.

use std::collections::HashMap;

use ank_common::conditions::{self, ConditionType, InstanceStatus, RuntimeHealth};
use ank_common::workload::WorkloadSpec;
use ank_common::workload_events::{EventRing, WorkloadEvent};
use ank_common::{ExecutionState, StateKind, WorkloadInstanceName, WorkloadState};

use super::hysteresis;
use crate::probes::Readiness;
use crate::workload::EventReport;
use crate::workload_state_store::WorkloadStateStore;

/// Most states batched into one `UpdateWorkloadState`.
pub const MAX_BATCH: usize = 64;

/// What the table keeps of one instance of this agent besides its state.
#[derive(Debug, Default)]
struct Record {
    /// The generation of the instance's spec, once the server sent it.
    generation: Option<u64>,
    /// The next report is passed on even if it repeats the last one.
    answer_due: bool,
    /// Deleted and not added again: forgotten once removed.
    retiring: bool,
    /// Event entries changed since the last report, sent with the next.
    unsent: Vec<WorkloadEvent>,
    /// The readiness by its readiness probe (`None`: it has none); while
    /// it runs, the Available condition follows it.
    readiness: Option<Readiness>,
    /// The readiness changed since the last report.
    readiness_unsent: bool,
}

/// How many workloads of this agent there are, and how many run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkloadCounts {
    pub workloads: usize,
    pub running: usize,
}

/// Every instance this agent knows (see the module header).
#[derive(Debug)]
pub struct InstanceTable {
    agent_name: String,
    own: HashMap<WorkloadInstanceName, Record>,
    /// Each workload's events, by workload name.
    rings: HashMap<String, EventRing>,
    states: WorkloadStateStore,
}

impl InstanceTable {
    /// An empty table of the agent `agent_name`.
    pub fn new(agent_name: &str) -> Self {
        Self {
            agent_name: agent_name.to_owned(),
            own: HashMap::new(),
            rings: HashMap::new(),
            states: WorkloadStateStore::new(),
        }
    }

    /// The execution states of all instances (for the scheduler).
    pub fn states(&self) -> &WorkloadStateStore {
        &self.states
    }

    /// The state of one of this agent's instances, if it has one.
    fn own_state(&self, instance: &WorkloadInstanceName) -> Option<&ExecutionState> {
        self.states.state_of_instance(instance)
    }

    fn is_own(&self, instance: &WorkloadInstanceName) -> bool {
        instance.agent_name == self.agent_name
    }

    /// This agent's instances that have a state.
    fn stated(&self) -> Vec<WorkloadInstanceName> {
        self.own.keys().filter(|n| self.own_state(n).is_some()).cloned().collect()
    }

    /// The workload counts of this agent, for its health.
    pub fn counts(&self) -> WorkloadCounts {
        let states: Vec<&ExecutionState> = self.own.keys().filter_map(|n| self.own_state(n)).collect();
        WorkloadCounts {
            workloads: states.len(),
            running: states.iter().filter(|s| s.kind == StateKind::Running).count(),
        }
    }

    /// The server's full set of this agent's workloads: the generations of
    /// instances neither listed nor stated are forgotten. Returns the
    /// stated instances whose generation the hello changed (their states
    /// go to the server again).
    pub fn hello(&mut self, specs: &[WorkloadSpec]) -> Vec<WorkloadInstanceName> {
        let listed: std::collections::HashSet<&WorkloadInstanceName> = specs.iter().map(|s| &s.instance_name).collect();
        let states = &self.states;
        for (name, record) in self.own.iter_mut() {
            if !listed.contains(name) && states.state_of_instance(name).is_none() {
                record.generation = None;
            }
        }
        self.forget_idle();
        self.added(specs)
    }

    /// Specs the server added (or sent again): their generations are
    /// remembered and their next reports answer. Returns the stated
    /// instances whose generation changed.
    pub fn added(&mut self, specs: &[WorkloadSpec]) -> Vec<WorkloadInstanceName> {
        let mut changed = Vec::new();
        for s in specs {
            let n = &s.instance_name;
            let stated = self.own_state(n).is_some();
            let record = self.own.entry(n.clone()).or_default();
            if record.generation.replace(s.generation) != Some(s.generation) && stated {
                changed.push(n.clone());
            }
            record.answer_due = true;
            record.retiring = false;
        }
        changed
    }

    /// Instances the server deleted: their next reports answer, and they
    /// are forgotten once removed unless added again.
    pub fn deleted(&mut self, instances: impl IntoIterator<Item = WorkloadInstanceName>) {
        for n in instances {
            let record = self.own.entry(n).or_default();
            record.answer_due = true;
            record.retiring = true;
        }
    }

    /// States of other agents' workloads, as the server forwards them.
    /// This agent's own states come only from its control loops.
    // [impl->swdd~agent-manager-stores-all-workload-states~1]
    pub fn others(&mut self, states: &[WorkloadState]) {
        for s in states {
            if !self.is_own(&s.instance_name) {
                self.states.update(s);
            }
        }
    }

    /// Takes a state a control loop (or the scheduler) reported, through
    /// the hysteresis; returns it as the server gets it, or `None` when it
    /// is dropped.
    // [impl->swdd~agent-stores-workload-states-of-its-workloads~1]
    pub fn accept(&mut self, state: WorkloadState, health: &RuntimeHealth) -> Option<WorkloadState> {
        let name = state.instance_name;
        let current = self.own_state(&name).cloned();
        let answer = std::mem::take(&mut self.own.entry(name.clone()).or_default().answer_due);
        let passed = match hysteresis::transition(current.as_ref(), &state.execution_state) {
            Some(passed) => passed,
            // A repeat that answers a workload message of the server.
            None if answer && current.as_ref() == Some(&state.execution_state) => state.execution_state,
            None => return None,
        };
        let removed = passed.kind == StateKind::Removed;
        if passed.kind != StateKind::Running
            && let Some(r) = self.own.get_mut(&name).and_then(|r| r.readiness.as_mut())
        {
            // A probe's verdict is about the run that ended.
            *r = Readiness::Unknown;
        }
        self.states.update(&WorkloadState::new(name.clone(), passed.clone()));
        // Stamped before a removal forgets the generation.
        let reported = self.reported(WorkloadState::new(name.clone(), passed), health);
        if removed {
            self.removed(&name);
        }
        Some(reported)
    }

    /// Forgets what a removed instance leaves behind.
    fn removed(&mut self, name: &WorkloadInstanceName) {
        let Some(record) = self.own.get_mut(name) else { return };
        record.unsent.clear();
        if record.retiring {
            self.own.remove(name);
            // A workload deleted from this agent takes its events along.
            let workload = &name.workload_name;
            if !self.own.iter().any(|(n, r)| &n.workload_name == workload && r.generation.is_some()) {
                self.rings.remove(workload);
            }
        }
    }

    /// Drops records that hold nothing any more.
    fn forget_idle(&mut self) {
        let states = &self.states;
        self.own.retain(|n, r| {
            r.generation.is_some()
                || r.answer_due
                || r.retiring
                || !r.unsent.is_empty()
                || r.readiness.is_some()
                || states.state_of_instance(n).is_some()
        });
    }

    /// Merges an event into its workload's ring; returns the instance when
    /// it has a state (its report then carries the changed entry).
    pub fn event(&mut self, ev: EventReport, at: &str) -> Option<WorkloadInstanceName> {
        let ring = self.rings.entry(ev.instance_name.workload_name.clone()).or_default();
        let entry = ring.record(ev.kind, &ev.reason, at).clone();
        let record = self.own.entry(ev.instance_name.clone()).or_default();
        record.unsent.retain(|e| !(e.kind == entry.kind && e.reason == entry.reason));
        record.unsent.push(entry);
        self.own_state(&ev.instance_name).is_some().then_some(ev.instance_name)
    }

    /// Whether `instance` has events or a readiness not sent yet.
    pub fn has_unsent(&self, instance: &WorkloadInstanceName) -> bool {
        self.own.get(instance).is_some_and(|r| !r.unsent.is_empty() || r.readiness_unsent)
    }

    /// Takes the readiness of an instance by its probe; returns the
    /// instance when that changes what it reports (it is running), so
    /// that its state goes to the server again.
    // [feature H6: readiness probes drive Available]
    pub fn readiness(
        &mut self,
        instance: &WorkloadInstanceName,
        readiness: Option<Readiness>,
    ) -> Option<WorkloadInstanceName> {
        let running = self.own_state(instance).is_some_and(|s| s.kind == StateKind::Running);
        let record = self.own.entry(instance.clone()).or_default();
        if record.readiness == readiness {
            return None;
        }
        record.readiness = readiness;
        record.readiness_unsent |= running;
        running.then(|| instance.clone())
    }

    /// Every stated instance of this agent, each bringing its workload's
    /// whole event ring (a server that restarted knows no events).
    pub fn all(&mut self) -> Vec<WorkloadInstanceName> {
        let all = self.stated();
        for n in &all {
            if let (Some(ring), Some(record)) = (self.rings.get(&n.workload_name), self.own.get_mut(n)) {
                record.unsent = ring.to_vec();
            }
        }
        all
    }

    /// The current states of `instances` as the server gets them.
    pub fn reports(&mut self, instances: Vec<WorkloadInstanceName>, health: &RuntimeHealth) -> Vec<WorkloadState> {
        instances
            .into_iter()
            .filter_map(|n| {
                let state = self.own_state(&n)?.clone();
                Some(self.reported(WorkloadState::new(n, state), health))
            })
            .collect()
    }

    /// A state as the server gets it: with the generation of its spec, the
    /// conditions it implies and the events not sent yet.
    // [feature H4: an agent reports Applied, Available and Health]
    fn reported(&mut self, state: WorkloadState, health: &RuntimeHealth) -> WorkloadState {
        let record = self.own.get_mut(&state.instance_name);
        let (generation, events, readiness) = match record {
            Some(r) => {
                r.readiness_unsent = false;
                (r.generation.unwrap_or(0), std::mem::take(&mut r.unsent), r.readiness.as_ref())
            }
            None => (0, Vec::new(), None),
        };
        let mut conditions = conditions::agent_conditions(&state.execution_state, generation, health);
        if let Some(r) = readiness.filter(|_| state.execution_state.kind == StateKind::Running) {
            for c in conditions.iter_mut().filter(|c| c.kind == ConditionType::Available) {
                *c = r.available(generation);
            }
        }
        state.with_status(InstanceStatus { observed_generation: generation, conditions, events, ..Default::default() })
    }
}

#[cfg(test)]
#[path = "instances_tests.rs"]
mod tests;
