//! [`AgentStatus`]: the load an agent reports (CPU usage and free memory),
//! shown in `ank get agents` and read by placement's metrics.

use serde::{Deserialize, Serialize};

/// Resource figures an agent reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    #[serde(default)]
    pub cpu_usage: u32,
    #[serde(default)]
    pub free_memory: u64,
}
