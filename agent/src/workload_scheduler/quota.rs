//! [`Room`]: what is left of the agent's quota during one scheduling pass
//! (feature K2): the limits, what the occupying workloads use, and the
//! check whether one more workload of a given declared memory fits, with the
//! reason shown when it does not ("agent_A 2/2", "agent_A memory
//! 1536/2048 MiB").

use ank_common::quota::{QuotaLimits, QuotaUsage, mib_ceil};

/// The agent's quota and its use during one pass.
#[derive(Debug, Clone)]
pub struct Room<'a> {
    agent: &'a str,
    limits: QuotaLimits,
    pub used: QuotaUsage,
}

/// Why a workload does not fit the quota (the `QuotaBlocked` reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaFull {
    #[error("{agent} {used}/{max}")]
    Workloads { agent: String, used: u32, max: u32 },
    #[error("{agent} memory {used_mib}/{max_mib} MiB")]
    Memory { agent: String, used_mib: u64, max_mib: u64 },
}

impl<'a> Room<'a> {
    pub fn new(agent: &'a str, limits: QuotaLimits, used: QuotaUsage) -> Self {
        Self { agent, limits, used }
    }

    /// Whether a workload declaring `memory` bytes fits; else why not.
    // [feature K2: the quota check and the QuotaBlocked reason]
    pub fn fits(&self, memory: u64) -> Result<(), QuotaFull> {
        let QuotaLimits { max_workloads, max_memory } = self.limits;
        let agent = self.agent.to_owned();
        if max_workloads > 0 && self.used.workloads >= max_workloads {
            return Err(QuotaFull::Workloads { agent, used: self.used.workloads, max: max_workloads });
        }
        if max_memory > 0 && self.used.memory.saturating_add(memory) > max_memory {
            return Err(QuotaFull::Memory {
                agent,
                used_mib: mib_ceil(self.used.memory),
                max_mib: mib_ceil(max_memory),
            });
        }
        Ok(())
    }

    /// Counts a workload that starts.
    pub fn take(&mut self, memory: u64) {
        self.used.workloads += 1;
        self.used.memory = self.used.memory.saturating_add(memory);
    }

    /// Gives back what a stopping workload used.
    pub fn give_back(&mut self, workloads: u32, memory: u64) {
        self.used.workloads = self.used.workloads.saturating_sub(workloads);
        self.used.memory = self.used.memory.saturating_sub(memory);
    }

    /// What must be freed before a workload of `memory` fits: (workloads, bytes).
    pub fn shortfall(&self, memory: u64) -> (u32, u64) {
        let QuotaLimits { max_workloads, max_memory } = self.limits;
        let count = if max_workloads > 0 { (self.used.workloads + 1).saturating_sub(max_workloads) } else { 0 };
        let bytes = if max_memory > 0 { self.used.memory.saturating_add(memory).saturating_sub(max_memory) } else { 0 };
        (count, bytes)
    }
}

#[cfg(test)]
mod tests {
    use ank_common::quota::MIB;

    use super::*;

    #[test]
    // [test of feature K2]
    fn room_counts_workloads_and_declared_memory() {
        let limits = QuotaLimits { max_workloads: 2, max_memory: 2048 * MIB };
        let mut room = Room::new("agent_A", limits, QuotaUsage::default());
        assert_eq!(room.fits(1024 * MIB), Ok(()));
        room.take(1536 * MIB);
        assert_eq!(room.fits(1024 * MIB).map_err(|e| e.to_string()), Err("agent_A memory 1536/2048 MiB".into()));
        assert_eq!(room.shortfall(1024 * MIB), (0, 512 * MIB));
        assert_eq!(room.fits(512 * MIB), Ok(()));
        room.take(0);
        assert_eq!(room.fits(0).map_err(|e| e.to_string()), Err("agent_A 2/2".into()));
        assert_eq!(room.shortfall(0), (1, 0));
        room.give_back(1, 1536 * MIB);
        assert_eq!(room.fits(2048 * MIB), Ok(()));
        let unlimited = Room::new("agent_A", QuotaLimits::default(), QuotaUsage { workloads: 99, memory: u64::MAX });
        assert_eq!(unlimited.fits(u64::MAX), Ok(()));
        assert_eq!(unlimited.shortfall(1), (0, 0));
    }
}
