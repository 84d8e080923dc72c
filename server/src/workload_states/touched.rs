//! [`Touched`]: which agents' part of the workload-state map (as
//! `map_with_events` shows it) may have changed since someone last took
//! the set. The store marks an agent at every mutable access to its
//! entries and every change of the events or revert marks of a workload
//! it runs; the event snapshot takes the set to re-read only those agents.

use std::collections::BTreeSet;

/// Agents whose states may have changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Touched {
    /// These agents (none: nothing changed).
    Agents(BTreeSet<String>),
    /// Any agent.
    All,
}

impl Default for Touched {
    fn default() -> Self {
        Touched::Agents(BTreeSet::new())
    }
}

impl Touched {
    /// Marks `agent`.
    pub fn agent(&mut self, agent: &str) {
        if let Touched::Agents(agents) = self
            && !agents.contains(agent)
        {
            agents.insert(agent.to_owned());
        }
    }

    /// Marks every agent.
    pub fn all(&mut self) {
        *self = Touched::All;
    }

    /// The marks so far; none are left.
    pub fn take(&mut self) -> Touched {
        std::mem::take(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touched_collects_agents_until_taken() {
        let mut t = Touched::default();
        t.agent("a");
        t.agent("a");
        t.agent("b");
        assert_eq!(t.take(), Touched::Agents(["a".to_owned(), "b".to_owned()].into()));
        assert_eq!(t.take(), Touched::default());
        t.agent("a");
        t.all();
        t.agent("c");
        assert_eq!(t.take(), Touched::All);
    }
}
