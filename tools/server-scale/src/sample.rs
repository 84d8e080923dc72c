//! [`Sample`]: the figures of one measurement (one server, one size, one
//! round) and its correctness results, as kept in the JSON file.

use serde::Serialize;

/// What one measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// `ours` or `reference`.
    pub server: String,
    pub agents: usize,
    pub round: usize,
    /// Until the server listed every agent as connected.
    pub connect_s: f64,
    /// From the apply until the last agent's fake created its workloads.
    pub apply_created_s: f64,
    /// From the apply until the events showed every workload Running(Ok).
    pub apply_running_s: f64,
    /// From the re-apply until the changed workload's agent created it.
    pub update_s: f64,
    /// From the agent's start again until its workloads were Running(Ok);
    /// `None` when the server never showed the stopped agent gone.
    pub reconnect_s: Option<f64>,
    /// Server CPU seconds per phase and from its start to the end.
    pub cpu: CpuSeconds,
    /// VmRSS right after every workload ran, KiB.
    pub rss_after_apply_kib: u64,
    /// VmHWM at the end, KiB.
    pub peak_rss_kib: u64,
    /// Events each subscriber received.
    pub events_per_subscriber: Vec<u64>,
    /// Event streams the server ended that were subscribed again (a reader
    /// too slow for the server's queue, or a missed heartbeat).
    pub resubscriptions: u64,
    pub correctness: Correctness,
}

/// Server CPU seconds (utime + stime) by phase.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuSeconds {
    pub connect: f64,
    pub apply: f64,
    pub update: f64,
    pub reconnect: f64,
    pub total: f64,
}

/// The results that must hold whatever the timings.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Correctness {
    /// Creates of all fakes after the apply (must be agents × 20).
    pub creates_after_apply: usize,
    /// Agents whose fake created exactly its 20 workloads.
    pub agents_complete: usize,
    /// The changed workload's agent created its new instance once.
    pub update_delivered: bool,
    /// Creates, starts and deletes on the other agents' fakes due to the
    /// change (must be 0).
    pub update_side_effects: usize,
    /// Creates, starts and deletes of the reconnected agent's fake (must
    /// be 0: the fake keeps its workloads).
    pub reconnect_restarts: usize,
}

impl Correctness {
    /// Whether every result is as it must be for `agents` agents.
    pub fn holds(&self, agents: usize) -> bool {
        let workloads = agents * crate::manifest::WORKLOADS_PER_AGENT;
        self.creates_after_apply == workloads
            && self.agents_complete == agents
            && self.update_delivered
            && self.update_side_effects == 0
            && self.reconnect_restarts == 0
    }
}
