//! The agents' load reports (every 2 s from each agent): the status,
//! metrics and quota use they show in the agent's attributes, and whether
//! placement must look again.

use std::collections::BTreeMap;

use ank_common::AgentStatus;
use ank_common::placement::metrics::Metrics;
use ank_common::quota::QuotaUsage;

use super::{ConnId, Connections};

/// What a load report tells placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadNews {
    /// The agent's first report: its metrics are known from now on.
    First,
    /// Its metrics changed.
    Metrics,
}

impl Connections {
    /// Records the load report of `agent` sent on `conn` (ignored unless
    /// that stream speaks for it); says whether placement must look again.
    pub(crate) fn record_load(
        &mut self,
        conn: ConnId,
        agent: &str,
        status: AgentStatus,
        extra: &BTreeMap<String, f64>,
        used: QuotaUsage,
    ) -> Option<LoadNews> {
        if self.agent_of(conn).as_deref() != Some(agent) {
            return None;
        }
        let first = !self.status_reported(agent);
        self.mark_status_reported(agent);
        let attrs = self.agent_attributes_mut(agent)?;
        let metrics = Metrics::from_load(&status, extra);
        attrs.status = status;
        // [feature K2: the server shows what an agent uses of its quota]
        if let Some(quota) = attrs.quota.as_mut() {
            quota.used_workloads = used.workloads;
            quota.used_memory = used.memory;
        }
        if attrs.metrics != metrics || first {
            attrs.metrics = metrics;
            return Some(if first { LoadNews::First } else { LoadNews::Metrics });
        }
        None
    }
}
