//! `ank get groups [-o yaml|json]`: the workload groups of the desired
//! state, one row per member in the group's order, with the member's agent
//! and execution state (a pipeline's canceled members show
//! Pending(Canceled)).

use ank_common::ExecutionState;

use crate::cli::OutputFormat;
use crate::cmd::{Ctx, fetch_state};
use crate::output;
use crate::view::StateView;

/// One member of a group as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    pub group: String,
    pub mode: &'static str,
    pub member: String,
    pub agent: String,
    /// `None` while no state is known (or the member is not in the state).
    pub state: Option<ExecutionState>,
}

/// The rows of every group, groups by name, members in their order.
// [feature K6: `ank get groups` shows per-member state]
pub fn group_rows(view: &StateView) -> Vec<MemberRow> {
    let states = view.workload_state_list();
    let mut rows = Vec::new();
    for (name, group) in &view.groups() {
        for member in &group.members {
            let wl = view.workload(member.as_str());
            // The desired agent's instance, else any the member has.
            let agent = wl.and_then(|w| w.agent.clone()).unwrap_or_default();
            let mine = states.iter().filter(|s| s.instance_name.workload_name == member.as_str());
            let state =
                mine.clone().find(|s| s.instance_name.agent_name == agent).or_else(|| mine.clone().next()).cloned();
            rows.push(MemberRow {
                group: name.clone(),
                mode: group.mode.as_str(),
                member: member.to_string(),
                agent: state.as_ref().map_or(agent, |s| s.instance_name.agent_name.clone()),
                state: state.map(|s| s.execution_state),
            });
        }
    }
    rows
}

/// The table of the rows.
pub fn table(rows: &[MemberRow]) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            let (state, info) = match &r.state {
                Some(s) => (s.kind.to_string(), s.additional_info.lines().next().unwrap_or_default().to_owned()),
                None => (String::new(), String::new()),
            };
            [r.group.clone(), r.mode.to_owned(), r.member.clone(), r.agent.clone(), state, info]
        })
        .collect();
    crate::table::table(["GROUP", "MODE", "MEMBER", "AGENT", "EXECUTION STATE", "ADDITIONAL INFO"], &cells)
}

/// The records for `-o`: one per group with its members in order.
pub fn records(view: &StateView, rows: &[MemberRow]) -> serde_json::Value {
    let groups = view.groups();
    let groups = groups.iter().map(|(name, group)| {
        let members: Vec<serde_json::Value> = rows
            .iter()
            .filter(|r| r.group == *name)
            .map(|r| serde_json::json!({"name": r.member, "agent": r.agent, "executionState": r.state}))
            .collect();
        serde_json::json!({"name": name, "mode": group.mode.as_str(), "members": members})
    });
    serde_json::Value::Array(groups.collect())
}

/// Prints the groups.
pub async fn run(ctx: &mut Ctx<'_>, format: Option<OutputFormat>) -> anyhow::Result<()> {
    let masks = ["desiredState.groups", "desiredState.workloads", "workloadStates"];
    let view = fetch_state(ctx, masks.iter().map(|m| (*m).to_owned()).collect()).await?;
    let rows = group_rows(&view);
    match format {
        Some(f) => ctx.print(&output::records(&records(&view, &rows), f)?),
        None => ctx.print(&table(&rows)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> StateView {
        StateView::from_tree(&serde_json::json!({
            "desiredState": {"apiVersion": "v1",
                "workloads": {
                    "s1": {"runtime": "podman", "agent": "agent_A"},
                    "s2": {"runtime": "podman", "agent": "agent_A"},
                    "s3": {"runtime": "podman", "agent": "agent_A"},
                },
                "groups": {"upd": {"mode": "pipeline", "members": ["s1", "s2", "s3"]}},
            },
            "workloadStates": {"agent_A": {
                "s1": {"1": {"state": "Succeeded", "subState": "Ok"}},
                "s2": {"2": {"state": "Failed", "subState": "ExecFailed", "additionalInfo": "Exit code: '1'"}},
                "s3": {"3": {"state": "Pending", "subState": "Canceled", "additionalInfo": "pipeline upd: s2 failed"}},
            }},
        }))
        .unwrap()
    }

    // [test of feature K6: per-member state of a group]
    #[test]
    fn get_groups_lists_members_in_order_with_their_state() {
        let v = view();
        let rows = group_rows(&v);
        let text = table(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("GROUP") && lines[0].contains("EXECUTION STATE"), "{text}");
        assert!(lines[1].starts_with("upd") && lines[1].contains("pipeline") && lines[1].contains("Succeeded(Ok)"));
        assert!(lines[2].contains("s2") && lines[2].contains("Failed(ExecFailed)"), "{text}");
        assert!(lines[3].contains("s3") && lines[3].contains("Pending(Canceled)") && lines[3].ends_with("s2 failed"));
        let yaml = output::records(&records(&v, &rows), OutputFormat::Yaml).unwrap();
        assert!(yaml.contains("mode: pipeline") && yaml.contains("subState: Canceled"), "{yaml}");
        let json = records(&v, &rows);
        assert_eq!(json[0]["members"][2]["name"], "s3");
    }
}
