//! [`StateBook`]: the workload states an event subscriber has seen, one
//! entry per (agent, workload) with its latest instance id and whether it
//! is `Running(Ok)`; built from the subscription's first answer and every
//! event's `completeState` under `workloadStates`.

use std::collections::HashMap;

use ank_common::messages::AlteredFields;
use serde_json::Value;

/// The latest state of each workload, by agent.
#[derive(Debug, Default)]
pub struct StateBook {
    /// agent -> workload -> (instance id, Running(Ok)).
    agents: HashMap<String, HashMap<String, (String, bool)>>,
    events: u64,
    /// Why the subscription ended, if it did.
    ended: Option<String>,
    /// How often the stream was lost and subscribed again.
    resubscribed: u64,
}

impl StateBook {
    /// Takes in the states of a complete state tree (the first answer).
    pub fn load(&mut self, tree: &Value) {
        let Some(agents) = tree.get("workloadStates").and_then(Value::as_object) else { return };
        for (agent, workloads) in agents {
            let Some(workloads) = workloads.as_object() else { continue };
            for (workload, instances) in workloads {
                let Some(instances) = instances.as_object() else { continue };
                for (id, state) in instances {
                    self.set(agent, workload, id, state);
                }
            }
        }
    }

    /// Takes in one event: removed paths first, then the states it holds.
    pub fn apply_event(&mut self, tree: &Value, altered: &AlteredFields) {
        self.events += 1;
        for path in &altered.removed_fields {
            self.remove(path);
        }
        self.load(tree);
    }

    fn set(&mut self, agent: &str, workload: &str, id: &str, state: &Value) {
        // An event that changed only `additionalInfo` carries no state.
        let Some(kind) = state.get("state").and_then(Value::as_str) else { return };
        let sub = state.get("subState").and_then(Value::as_str).unwrap_or_default();
        let running_ok = kind == "Running" && sub == "Ok";
        let entry = self.agents.entry(agent.to_owned()).or_default();
        entry.insert(workload.to_owned(), (id.to_owned(), running_ok));
    }

    fn remove(&mut self, path: &str) {
        let mut parts = path.split('.');
        if parts.next() != Some("workloadStates") {
            return;
        }
        let (agent, workload, id) = (parts.next(), parts.next(), parts.next());
        match (agent, workload, id) {
            (Some(a), Some(w), Some(id)) => {
                if let Some(workloads) = self.agents.get_mut(a)
                    && workloads.get(w).is_some_and(|(known, _)| known == id)
                {
                    workloads.remove(w);
                }
            }
            (Some(a), Some(w), None) => {
                self.agents.get_mut(a).map(|workloads| workloads.remove(w));
            }
            (Some(a), None, _) => {
                self.agents.remove(a);
            }
            (None, _, _) => self.agents.clear(),
        }
    }

    /// Starts over from the first answer of a new subscription.
    pub fn reload(&mut self, tree: &Value) {
        self.agents.clear();
        self.resubscribed += 1;
        self.load(tree);
    }

    /// How often the stream was lost and subscribed again.
    pub fn resubscribed(&self) -> u64 {
        self.resubscribed
    }

    /// Notes that the subscription ended and why.
    pub fn end(&mut self, reason: String) {
        self.ended = Some(reason);
    }

    /// Why the subscription ended, if it did.
    pub fn ended(&self) -> Option<&str> {
        self.ended.as_deref()
    }

    /// How many events it took in.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// How many workloads of all agents are `Running(Ok)`.
    pub fn running_ok(&self) -> usize {
        self.agents.values().flat_map(HashMap::values).filter(|(_, ok)| *ok).count()
    }

    /// How many workloads of `agent` are `Running(Ok)`.
    pub fn running_ok_of(&self, agent: &str) -> usize {
        self.agents.get(agent).map_or(0, |w| w.values().filter(|(_, ok)| *ok).count())
    }

    /// The instance id of `workload` on `agent` and whether it runs.
    pub fn instance_of(&self, agent: &str, workload: &str) -> Option<(&str, bool)> {
        self.agents.get(agent)?.get(workload).map(|(id, ok)| (id.as_str(), *ok))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn state_book_follows_updates_and_removals() {
        let mut book = StateBook::default();
        book.load(&json!({"workloadStates": {"a": {"w": {"1": {"state": "Pending", "subState": "Starting"}}}}}));
        assert_eq!(book.running_ok(), 0);
        let running = json!({"workloadStates": {"a": {"w": {"2": {"state": "Running", "subState": "Ok"}}}}});
        let altered = AlteredFields { removed_fields: vec!["workloadStates.a.w.1".into()], ..Default::default() };
        book.apply_event(&running, &altered);
        assert_eq!(book.running_ok_of("a"), 1);
        assert_eq!(book.instance_of("a", "w"), Some(("2", true)));
        let gone = AlteredFields { removed_fields: vec!["workloadStates.a.w.2".into()], ..Default::default() };
        book.apply_event(&json!({}), &gone);
        assert_eq!(book.running_ok(), 0);
        assert_eq!(book.events(), 2);
    }
}
