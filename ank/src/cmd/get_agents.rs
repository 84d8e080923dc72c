//! `ank get agents`: the connected agents, how many workloads each has and
//! the resources they report, in Ankaios' table; `-o wide` adds our QUOTA
//! column, `-o yaml|json` prints the records with everything we know.

use crate::cli::{AgentsFormat, OutputFormat};
use crate::cmd::{Ctx, fetch_state};
use crate::output::{self, AgentRow};
use crate::table::{self, Fit, terminal_width};
use crate::view::StateView;

/// Table rows of the agents in `view`, sorted by name.
pub fn agent_rows(view: &StateView) -> Vec<AgentRow> {
    view.agents()
        .into_iter()
        .map(|(name, agent)| AgentRow {
            name: name.to_owned(),
            workloads: view.workloads_on(name),
            cpu_usage: agent.status.as_ref().map(|s| u64::from(s.cpu_usage)),
            free_memory: agent.status.as_ref().map(|s| s.free_memory),
            dropped_stale_reports: agent.dropped_stale_reports.unwrap_or(0),
            labels: agent.tags.clone().unwrap_or_default(),
            capabilities: agent.capabilities.clone(),
            metrics: agent.metrics.clone(),
            quota: agent.quota,
            not_reported: agent.not_reported.clone(),
        })
        .collect()
}

/// The agent table as Ankaios prints it; `wide` adds the QUOTA column
/// (`3/4`, empty for agents without a quota).
// [feature K2: `ank get agents -o wide` shows each agent's quota]
pub fn agent_table(rows: &[AgentRow], wide: bool, max_width: Option<usize>) -> String {
    let cells = |r: &AgentRow| {
        [
            r.name.clone(),
            r.workloads.to_string(),
            r.cpu_usage.map(|c| format!("{c}%")).unwrap_or_default(),
            r.free_memory.map(|m| format!("{m}B")).unwrap_or_default(),
        ]
    };
    const HEADER: [&str; 4] = ["NAME", "WORKLOADS", "CPU USAGE", "FREE MEMORY"];
    if !wide {
        let cells: Vec<[String; 4]> = rows.iter().map(cells).collect();
        return table::render(HEADER, &cells, Fit::Cut, max_width);
    }
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let [name, workloads, cpu, memory] = cells(r);
            [name, workloads, cpu, memory, r.quota.map(|q| q.summary()).unwrap_or_default()]
        })
        .collect();
    let [a, b, c, d] = HEADER;
    table::render([a, b, c, d, "QUOTA"], &cells, Fit::Cut, max_width)
}

/// Prints the agent table (or its records with `-o yaml|json`).
pub async fn run(ctx: &mut Ctx<'_>, format: Option<AgentsFormat>) -> anyhow::Result<()> {
    let rows = agent_rows(&fetch_state(ctx, vec!["agents".to_owned(), "workloadStates".to_owned()]).await?);
    let records = |f| output::records(&output::agent_records(&rows), f);
    match format {
        Some(AgentsFormat::Yaml) => ctx.print(&records(OutputFormat::Yaml)?),
        Some(AgentsFormat::Json) => ctx.print(&records(OutputFormat::Json)?),
        Some(AgentsFormat::Wide) => ctx.print(&agent_table(&rows, true, terminal_width())),
        None => ctx.print(&agent_table(&rows, false, terminal_width())),
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
    fn get_agents_records_say_what_an_ankaios_agent_does_not_report() {
        let tree = serde_json::json!({"agents": {
            "ankaios_agent": {"notReported": ["generations", "conditions", "quota"]},
            "our_agent": {},
        }});
        let rows = agent_rows(&StateView::from_tree(&tree).unwrap());
        let records = output::agent_records(&rows);
        assert_eq!(records[0]["notReported"], serde_json::json!(["generations", "conditions", "quota"]));
        assert!(records[1].get("notReported").is_none(), "{records}");
        let yaml = output::records(&records, OutputFormat::Yaml).unwrap();
        assert!(yaml.contains("notReported:") && yaml.contains("- generations"), "{yaml}");
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
        // Ankaios' table: every cell padded, also the last column.
        assert_eq!(
            agent_table(&rows, false, None),
            "NAME      WORKLOADS   CPU USAGE   FREE MEMORY\nagent_A   2           3%          1024B      \n\
             agent_B   0                                  \n"
        );
    }

    #[test]
    // [test of feature K2]
    fn get_agents_shows_the_quota_column_only_in_the_wide_table() {
        let tree = serde_json::json!({
            "agents": {
                "agent_A": {"quota": {"maxWorkloads": 4, "maxMemory": 0, "usedWorkloads": 3, "usedMemory": 0}},
                "agent_B": {},
            },
        });
        let rows = agent_rows(&StateView::from_tree(&tree).unwrap());
        assert!(!agent_table(&rows, false, None).contains("QUOTA"), "Ankaios' columns by default");
        let text = agent_table(&rows, true, None);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME") && lines[0].ends_with("QUOTA"), "{text}");
        assert!(lines[1].starts_with("agent_A") && lines[1].ends_with("3/4  "), "{text}");
        assert!(lines[2].starts_with("agent_B") && !lines[2].contains('/'), "{text}");
        let records = output::agent_records(&rows);
        assert_eq!(records[0]["quota"]["usedWorkloads"], 3);
    }
}
