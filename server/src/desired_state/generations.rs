//! Workload generations: a counter per workload of the desired state that
//! starts at 1 and grows by one whenever that workload's rendered spec
//! changes (an identical re-apply keeps it). Agents echo it as
//! `observedGeneration`, which tells the server whether a report is about
//! the spec now in force.

use std::collections::BTreeMap;

use ank_common::State;

/// Workload name -> generation of its current spec.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Generations {
    map: BTreeMap<String, u64>,
}

impl Generations {
    /// The generation of `workload`, if the desired state has it.
    /// `spec` with its workload's current generation.
    pub fn stamp(&self, spec: ank_common::workload::WorkloadSpec) -> ank_common::workload::WorkloadSpec {
        let g = self.of(spec.name()).unwrap_or(0);
        spec.at_generation(g)
    }

    pub fn of(&self, workload: &str) -> Option<u64> {
        self.map.get(workload).copied()
    }

    /// The workloads that have a generation.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// Moves from rendered state `old` to `new`: unchanged workloads keep
    /// their generation, changed ones go up by one, new ones start after
    /// `floor(name)` (the highest generation an instance of that name still
    /// shows, so a re-added workload never reuses a number its leftovers
    /// carry); removed ones are forgotten.
    // [feature H1: generation bumped only when a workload's spec changes]
    pub fn advance(&mut self, old: &State, new: &State, floor: impl Fn(&str) -> u64) {
        let next = new
            .workloads
            .iter()
            .map(|(name, wl)| {
                let g = match (old.workloads.get(name), self.of(name.as_str())) {
                    (Some(before), Some(g)) if before == wl => g,
                    (Some(_), Some(g)) => g + 1,
                    _ => floor(name.as_str()) + 1,
                };
                (name.to_string(), g)
            })
            .collect();
        self.map = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(image: &str, extra: &str) -> State {
        ank_common::manifest::parse_manifest(
            "t",
            &format!(
                "apiVersion: v1\nworkloads:\n  w:\n    runtime: podman\n    agent: A\n    runtimeConfig: \"image: {image}\"\n{extra}"
            ),
        )
        .unwrap()
    }

    // [test of feature H1]
    #[test]
    fn generations_start_at_one_and_grow_only_on_a_change() {
        let mut g = Generations::default();
        let v1 = state("a", "");
        g.advance(&State::default(), &v1, |_| 0);
        assert_eq!(g.of("w"), Some(1));
        g.advance(&v1, &v1.clone(), |_| 0);
        assert_eq!(g.of("w"), Some(1), "an identical re-apply keeps it");
        let v2 = state("b", "  v:\n    runtime: podman\n    agent: A\n    runtimeConfig: x\n");
        g.advance(&v1, &v2, |_| 0);
        assert_eq!((g.of("w"), g.of("v")), (Some(2), Some(1)));
        g.advance(&v2, &State::default(), |_| 0);
        assert_eq!(g.of("w"), None);
        g.advance(&State::default(), &v1, |name| if name == "w" { 2 } else { 0 });
        assert_eq!(g.of("w"), Some(3), "a re-added workload continues after its leftovers");
    }
}
