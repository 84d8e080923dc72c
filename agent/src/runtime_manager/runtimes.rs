//! [`Runtimes`]: the `RuntimeManager`'s runtimes (one `RuntimeFacade` per
//! connector, by name) and whether each can be reached; the agent's runtime
//! health (the first unreachable runtime's reason) is published on a watch
//! channel and goes into every state report's Health condition.

use std::collections::BTreeMap;

use ank_common::conditions::RuntimeHealth;
use tokio::sync::watch;

use crate::runtime_facade::RuntimeFacade;

/// The runtimes of this agent.
pub(super) struct Runtimes {
    facades: BTreeMap<String, RuntimeFacade>,
    /// Runtimes that could not be reached, with the reason.
    unreachable: BTreeMap<String, String>,
    health: watch::Sender<RuntimeHealth>,
}

impl Runtimes {
    /// The runtimes `facades`, of which `unreachable` could not be reached
    /// at the start.
    pub fn new(facades: BTreeMap<String, RuntimeFacade>, unreachable: BTreeMap<String, String>) -> Self {
        let (health, _) = watch::channel(overall_health(&unreachable));
        Self { facades, unreachable, health }
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
        self.health.borrow().clone()
    }

    /// Follows the agent's runtime health.
    pub fn subscribe(&self) -> watch::Receiver<RuntimeHealth> {
        self.health.subscribe()
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
        self.health.send_if_modified(|h| std::mem::replace(h, now.clone()) != now)
    }
}

/// The agent's runtime health: the first unreachable runtime, if any.
fn overall_health(unreachable: &BTreeMap<String, String>) -> RuntimeHealth {
    match unreachable.iter().next() {
        Some((runtime, why)) => RuntimeHealth::Unreachable(format!("runtime '{runtime}': {why}")),
        None => RuntimeHealth::Reachable,
    }
}
