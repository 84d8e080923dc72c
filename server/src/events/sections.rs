//! [`Sections`]: the top-level parts of the complete state that the open
//! subscriptions' field masks can see. Only those are compared for events:
//! a change elsewhere gives none of them an event anyway.

/// Which top-level parts of the complete state to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sections {
    pub desired_state: bool,
    pub workload_states: bool,
    pub agents: bool,
    pub effective_state: bool,
    pub jobs: bool,
}

impl Sections {
    /// Every part.
    pub fn all() -> Self {
        Self { desired_state: true, workload_states: true, agents: true, effective_state: true, jobs: true }
    }

    /// Adds what one subscription's masks see: all without masks, and all
    /// for a mask whose first segment is no known part (a wildcard).
    pub fn add(&mut self, masks: &[String]) {
        if masks.is_empty() {
            *self = Self::all();
        }
        for mask in masks {
            match mask.split('.').next().unwrap_or_default() {
                "desiredState" => self.desired_state = true,
                "workloadStates" => self.workload_states = true,
                "agents" => self.agents = true,
                "effectiveState" => self.effective_state = true,
                "jobs" => self.jobs = true,
                _ => *self = Self::all(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_follow_the_first_segment_of_each_mask() {
        let mut s = Sections::default();
        s.add(&["workloadStates.agent_A".into()]);
        assert_eq!(s, Sections { workload_states: true, ..Default::default() });
        s.add(&["jobs".into(), "desiredState.workloads.a".into()]);
        assert!(s.jobs && s.desired_state && !s.agents && !s.effective_state);
        s.add(&["*.x".into()]);
        assert_eq!(s, Sections::all());
        let mut none = Sections::default();
        none.add(&[]);
        assert_eq!(none, Sections::all());
    }
}
