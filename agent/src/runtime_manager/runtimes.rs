//! [`Runtimes`]: the `RuntimeManager`'s runtimes (one `RuntimeFacade` per
//! connector, by name), whether each can be reached, and the workloads that
//! asked for a runtime this agent does not have. The agent's runtime
//! health (the first unreachable runtime's reason) goes into every state
//! report's Health condition.

use std::collections::{BTreeMap, HashMap};

use ank_common::WorkloadInstanceName;
use ank_common::conditions::RuntimeHealth;

use super::runtime_facade::RuntimeFacade;

/// The runtimes of this agent.
pub(super) struct Runtimes {
    facades: BTreeMap<String, RuntimeFacade>,
    /// Runtimes that could not be reached, with the reason.
    unreachable: BTreeMap<String, String>,
    health: RuntimeHealth,
    /// Workloads whose runtime this agent does not have, by name.
    pub unsupported: HashMap<String, WorkloadInstanceName>,
}

impl Runtimes {
    /// The runtimes `facades`, of which `unreachable` could not be reached
    /// at the start.
    pub fn new(facades: BTreeMap<String, RuntimeFacade>, unreachable: BTreeMap<String, String>) -> Self {
        let health = overall_health(&unreachable);
        Self { facades, unreachable, health, unsupported: HashMap::new() }
    }

    /// The runtime named `name`.
    pub fn get(&self, name: &str) -> Option<&RuntimeFacade> {
        self.facades.get(name)
    }

    /// Whether this agent has the runtime `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.facades.contains_key(name)
    }

    /// All runtimes, by name.
    pub fn iter(&self) -> impl Iterator<Item = &RuntimeFacade> {
        self.facades.values()
    }

    /// The agent's runtime health now.
    pub fn health(&self) -> RuntimeHealth {
        self.health.clone()
    }

    /// Records whether `runtime` can be reached; true when the agent's
    /// runtime health changed.
    // [feature H4: the agent's Health condition]
    pub fn set(&mut self, runtime: String, health: RuntimeHealth) -> bool {
        match health {
            RuntimeHealth::Reachable => self.unreachable.remove(&runtime),
            RuntimeHealth::Unreachable(why) => self.unreachable.insert(runtime, why),
        };
        let now = overall_health(&self.unreachable);
        std::mem::replace(&mut self.health, now.clone()) != now
    }
}

/// The agent's runtime health: the first unreachable runtime, if any.
fn overall_health(unreachable: &BTreeMap<String, String>) -> RuntimeHealth {
    match unreachable.iter().next() {
        Some((runtime, why)) => RuntimeHealth::Unreachable(format!("runtime '{runtime}': {why}")),
        None => RuntimeHealth::Reachable,
    }
}
