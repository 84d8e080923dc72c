//! [`StatesSnapshot`]: the workload states as the events last compared
//! them, per agent, in both the shape the complete state shows
//! (`current`) and the reduced shape events compare
//! ([`comparable`](super::state_diff::comparable)). With it a change is
//! compared only over the agents the state store marks touched, instead
//! of over every agent's states before and after each message: with many
//! agents the comparison no longer grows with all workloads for every
//! state report.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::workload_states::{Touched, WorkloadStateStore};

/// One agent's states in the two shapes.
#[derive(Debug, Clone)]
struct AgentStates {
    shown: Value,
    comparable: Value,
}

/// The `workloadStates` parts of the trees an event compares.
#[derive(Debug, Default)]
pub struct StatesChange {
    pub before: Map<String, Value>,
    pub after: Map<String, Value>,
    pub current: Map<String, Value>,
}

/// The last compared states of each agent that has any.
#[derive(Debug, Default)]
pub struct StatesSnapshot {
    agents: BTreeMap<String, AgentStates>,
    /// Whether `agents` follows the store (only while someone subscribes).
    valid: bool,
}

impl StatesSnapshot {
    /// Stops following the store (nobody subscribes); the next
    /// [`Self::refresh`] reads every agent again.
    pub fn invalidate(&mut self) {
        self.valid = false;
        self.agents.clear();
    }

    /// Brings the snapshot up to the store's states (before a change).
    pub fn refresh(&mut self, store: &mut WorkloadStateStore) {
        let touched = store.take_touched();
        if !self.valid {
            self.valid = true;
            self.reread(store, &Touched::All);
        } else {
            self.reread(store, &touched);
        }
    }

    /// After a change: the touched agents' states before and after it,
    /// comparable, and as shown now; the snapshot follows.
    pub fn advance(&mut self, store: &mut WorkloadStateStore) -> StatesChange {
        let touched = store.take_touched();
        let names: BTreeSet<String> = match touched {
            Touched::All => store.agent_names().into_iter().chain(self.agents.keys().cloned()).collect(),
            Touched::Agents(agents) => agents,
        };
        let mut change = StatesChange::default();
        for name in &names {
            if let Some(before) = self.agents.get(name) {
                change.before.insert(name.clone(), before.comparable.clone());
            }
        }
        names.iter().for_each(|name| self.read_agent(store, name));
        for name in &names {
            if let Some(after) = self.agents.get(name) {
                change.after.insert(name.clone(), after.comparable.clone());
                change.current.insert(name.clone(), after.shown.clone());
            }
        }
        change
    }

    fn reread(&mut self, store: &WorkloadStateStore, touched: &Touched) {
        match touched {
            Touched::All => {
                self.agents.clear();
                for name in store.agent_names() {
                    self.read_agent(store, &name);
                }
            }
            Touched::Agents(names) => names.iter().for_each(|name| self.read_agent(store, name)),
        }
    }

    fn read_agent(&mut self, store: &WorkloadStateStore, name: &str) {
        let Some(map) = store.agent_map_with_events(name) else {
            self.agents.remove(name);
            return;
        };
        let cs = ank_common::CompleteState {
            workload_states: BTreeMap::from([(name.to_owned(), map)]),
            ..Default::default()
        };
        let tree = serde_json::to_value(&cs).unwrap_or_default();
        let comparable = super::state_diff::comparable(&tree, |_| true);
        let pick = |t: &Value| t.get("workloadStates").and_then(|w| w.get(name)).cloned().unwrap_or_default();
        self.agents.insert(name.to_owned(), AgentStates { shown: pick(&tree), comparable: pick(&comparable) });
    }
}
