//! Wire <-> model of a workload's policy fields (priority, policy,
//! agentSelector, migration, ttlAfterFinished).

use ank_proto::ank_base as pb;

use super::ConvertError;
use crate::workload_policy::{AgentSelector, Migration, RankTerm, WorkloadPolicy};

pub(crate) fn policy_from_pb(p: pb::WorkloadPolicy) -> WorkloadPolicy {
    WorkloadPolicy { preempt_enabled: p.preempt_enabled, preempt_exempt: p.preempt_exempt, isolated: p.isolated }
}

pub(crate) fn policy_to_pb(p: WorkloadPolicy) -> pb::WorkloadPolicy {
    pb::WorkloadPolicy { preempt_enabled: p.preempt_enabled, preempt_exempt: p.preempt_exempt, isolated: p.isolated }
}

pub(crate) fn selector_from_pb(s: pb::AgentSelector) -> AgentSelector {
    AgentSelector {
        labels: s.labels,
        metrics: s.metrics,
        capabilities: s.capabilities,
        rank: s.rank.into_iter().map(|r| RankTerm { metric: r.metric, weight: r.weight }).collect(),
    }
}

pub(crate) fn selector_to_pb(s: AgentSelector) -> pb::AgentSelector {
    pb::AgentSelector {
        labels: s.labels,
        metrics: s.metrics,
        capabilities: s.capabilities,
        rank: s.rank.into_iter().map(|r| pb::RankTerm { metric: r.metric, weight: r.weight }).collect(),
    }
}

pub(crate) fn migration_from_pb(m: i32) -> Result<Migration, ConvertError> {
    match pb::Migration::try_from(m) {
        Ok(pb::Migration::OnAgentLoss) => Ok(Migration::OnAgentLoss),
        Ok(pb::Migration::Never) => Ok(Migration::Never),
        Ok(pb::Migration::Rebalance) => Ok(Migration::Rebalance),
        Err(_) => Err(ConvertError(format!("unknown migration {m}"))),
    }
}

pub(crate) fn migration_to_pb(m: Migration) -> i32 {
    match m {
        Migration::OnAgentLoss => pb::Migration::OnAgentLoss as i32,
        Migration::Never => pb::Migration::Never as i32,
        Migration::Rebalance => pb::Migration::Rebalance as i32,
    }
}
