//! `ank get agents`: the connected agents, how many workloads each has and
//! the resources they report.

use crate::cli::OutputFormat;
use crate::cmd::{Ctx, fetch_state};
use crate::output::{self, AgentRow};
use crate::view::StateView;

/// Table rows of the agents in `view`, sorted by name.
pub fn agent_rows(view: &StateView) -> Vec<AgentRow> {
    view.agents
        .iter()
        .map(|(name, agent)| AgentRow {
            name: name.clone(),
            workloads: view.workload_states.get(name).map_or(0, |by_name| by_name.len()),
            cpu_usage: agent.status.as_ref().and_then(|s| s.cpu_usage),
            free_memory: agent.status.as_ref().and_then(|s| s.free_memory),
            dropped_stale_reports: agent.dropped_stale_reports,
            labels: agent.tags.clone(),
            capabilities: agent.capabilities.clone(),
            metrics: agent.metrics.clone(),
            quota: agent.quota,
        })
        .collect()
}

/// Prints the agent table (or its records with `-o`).
pub async fn run(ctx: &mut Ctx<'_>, format: Option<OutputFormat>) -> anyhow::Result<()> {
    let tree = fetch_state(ctx, vec!["agents".to_owned(), "workloadStates".to_owned()]).await?;
    let rows = agent_rows(&StateView::from_tree(&tree)?);
    match format {
        Some(f) => ctx.print(&output::records(&output::agent_records(&rows), f)?),
        None => ctx.print(&output::agent_table(&rows)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature S1: labels, capabilities and metrics in `ank get agents -o yaml`]
    #[test]
    fn get_agents_records_show_the_advertisement() {
        let tree = serde_json::json!({"agents": {"agent_A": {
            "tags": {"arch": "arm64"},
            "capabilities": ["podman", "podman-kube"],
            "metrics": {"cpu_usage": 3.0, "free_memory_mb": 2048.0},
        }}});
        let rows = agent_rows(&StateView::from_tree(&tree).unwrap());
        let yaml = output::records(&output::agent_records(&rows), OutputFormat::Yaml).unwrap();
        assert!(yaml.contains("labels:") && yaml.contains("arch: arm64"), "{yaml}");
        assert!(yaml.contains("- podman-kube"), "{yaml}");
        assert!(yaml.contains("free_memory_mb: 2048"), "{yaml}");
    }

    #[test]
    fn get_agents_counts_workloads_per_agent() {
        let tree = serde_json::json!({
            "agents": {
                "agent_A": {"status": {"cpuUsage": 3, "freeMemory": 1024}, "droppedStaleReports": 4},
                "agent_B": {},
            },
            "workloadStates": {"agent_A": {
                "w1": {"1": {"state": "Running", "subState": "Ok"}},
                "w2": {"2": {"state": "Succeeded", "subState": "Ok"}},
            }},
        });
        let rows = agent_rows(&StateView::from_tree(&tree).unwrap());
        assert_eq!(
            rows,
            vec![
                AgentRow {
                    name: "agent_A".into(),
                    workloads: 2,
                    cpu_usage: Some(3),
                    free_memory: Some(1024),
                    dropped_stale_reports: 4,
                    quota: None,
                    ..Default::default()
                },
                AgentRow { name: "agent_B".into(), ..Default::default() },
            ]
        );
    }

    #[test]
    // [test of feature K2]
    fn get_agents_shows_the_quota_column_only_when_an_agent_has_a_quota() {
        let tree = serde_json::json!({
            "agents": {
                "agent_A": {"quota": {"maxWorkloads": 4, "maxMemory": 0, "usedWorkloads": 3, "usedMemory": 0}},
                "agent_B": {},
            },
        });
        let rows = agent_rows(&StateView::from_tree(&tree).unwrap());
        let text = output::agent_table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME") && lines[0].ends_with("QUOTA"), "{text}");
        assert!(lines[1].starts_with("agent_A") && lines[1].ends_with("3/4"), "{text}");
        assert!(lines[2].starts_with("agent_B") && !lines[2].contains('/'), "{text}");
        let without = agent_rows(&StateView::from_tree(&serde_json::json!({"agents": {"agent_B": {}}})).unwrap());
        assert!(!output::agent_table(&without).contains("QUOTA"), "Ankaios' columns without quotas");
        let records = output::agent_records(&rows);
        assert_eq!(records[0]["quota"]["usedWorkloads"], 3);
    }
}
