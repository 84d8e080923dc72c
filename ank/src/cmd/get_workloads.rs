//! `ank get workloads [NAME...] [-a AGENT] [-s STATE] [-w]`: one row per
//! reported workload instance with its agent, runtime and execution state
//! (`-w` watches, see `watch_workloads`). The table has Ankaios' columns;
//! `-o wide` adds ours (READY, AVAILABLE, PRIORITY).

use crate::cli::{GetWorkloadsArgs, WorkloadsOutput};
use crate::cmd::{Ctx, fetch_state};
use crate::output::{self, WorkloadRow};
use crate::view::StateView;

/// Which rows to show.
#[derive(Debug, Clone, Default)]
pub struct WorkloadFilter {
    pub names: Vec<String>,
    pub agent: Option<String>,
    pub state: Option<String>,
}

impl WorkloadFilter {
    pub fn matches(&self, row: &WorkloadRow) -> bool {
        let name_ok = self.names.is_empty() || self.names.contains(&row.name);
        let agent_ok = self.agent.as_ref().is_none_or(|a| *a == row.agent);
        let state_ok = self.state.as_ref().is_none_or(|wanted| {
            row.state.as_ref().is_some_and(|s| {
                let (state, _) = s.kind.names();
                wanted.eq_ignore_ascii_case(state) || wanted.eq_ignore_ascii_case(&s.kind.to_string())
            })
        });
        name_ok && agent_ok && state_ok
    }
}

/// The rows of `view` that pass `filter`, sorted by workload name.
pub fn workload_rows(view: &StateView, filter: &WorkloadFilter) -> Vec<WorkloadRow> {
    let runtimes = view.runtimes();
    let priorities = view.priorities();
    let mut rows: Vec<WorkloadRow> = view
        .workload_state_list()
        .into_iter()
        .map(|s| WorkloadRow {
            runtime: runtimes.get(&s.instance_name.workload_name).cloned().unwrap_or_default(),
            priority: priorities.get(&s.instance_name.workload_name).copied(),
            name: s.instance_name.workload_name,
            agent: s.instance_name.agent_name,
            state: Some(s.execution_state),
            status: s.status,
        })
        .filter(|r| filter.matches(r))
        .collect();
    rows.sort_by(|a, b| (&a.name, &a.agent).cmp(&(&b.name, &b.agent)));
    rows
}

/// Prints the workload table: Ankaios' columns, ours too with `-o wide`.
pub async fn run(ctx: &mut Ctx<'_>, args: GetWorkloadsArgs) -> anyhow::Result<()> {
    let records = args.output.and_then(WorkloadsOutput::records);
    let wide = args.output == Some(WorkloadsOutput::Wide);
    if args.watch {
        if records.is_some() {
            anyhow::bail!("--watch prints a table: use it without -o, or with -o wide");
        }
        let filter = WorkloadFilter { names: args.names, agent: args.agent, state: args.state };
        return super::watch_workloads::run(ctx, filter, wide).await;
    }
    if args.rendered {
        return super::rendered_workloads::run(ctx, &args.names, args.agent.as_deref(), records).await;
    }
    let masks = vec!["desiredState.workloads".to_owned(), "workloadStates".to_owned()];
    let view = fetch_state(ctx, masks).await?;
    let filter = WorkloadFilter { names: args.names, agent: args.agent, state: args.state };
    let rows = workload_rows(&view, &filter);
    match (records, wide) {
        (Some(f), _) => ctx.print(&output::records(&with_priorities(output::workload_records(&rows), &view), f)?),
        (None, true) => ctx.print(&output::workload_table_wide(&rows)),
        (None, false) => ctx.print(&output::workload_table(&rows)),
    }
}

/// The records with each workload's `priority` and `effectivePriority`,
/// where the desired state has them.
// [feature K3: effectivePriority visible in `ank get workloads -o yaml`]
pub fn with_priorities(mut records: serde_json::Value, view: &StateView) -> serde_json::Value {
    for record in records.as_array_mut().into_iter().flatten() {
        let Some(wl) = record["name"].as_str().and_then(|n| view.workload(n)) else { continue };
        let (priority, effective) = (wl.priority, wl.effective_priority);
        if let Some(map) = record.as_object_mut() {
            if let Some(p) = priority {
                map.insert("priority".into(), p.into());
            }
            if let Some(e) = effective {
                map.insert("effectivePriority".into(), e.into());
            }
        }
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> StateView {
        StateView::from_tree(&serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {
                "web": {"runtime": "podman", "agent": "agent_A"},
                "db": {"runtime": "podman-kube", "agent": "agent_B"},
            }},
            "workloadStates": {
                "agent_A": {"web": {"1": {"state": "Running", "subState": "Ok"}}},
                "agent_B": {"db": {"2": {"state": "Pending", "subState": "StartingFailed", "additionalInfo": "no runtime"}}},
                "agent_C": {"gone": {"3": {"state": "Removed", "subState": "Removed"}}},
            },
        }))
        .unwrap()
    }

    fn names(rows: &[WorkloadRow]) -> Vec<&str> {
        rows.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn get_workloads_rows_sorted_with_runtime() {
        let rows = workload_rows(&view(), &WorkloadFilter::default());
        assert_eq!(names(&rows), vec!["db", "gone", "web"]);
        assert_eq!(rows[0].runtime, "podman-kube");
        assert_eq!(rows[1].runtime, "", "unknown runtime stays empty");
        let text = output::workload_table_with_width(&rows, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "WORKLOAD NAME   AGENT     RUNTIME       EXECUTION STATE           ADDITIONAL INFO");
        assert_eq!(lines[1], "db              agent_B   podman-kube   Pending(StartingFailed)   no runtime     ");
        assert_eq!(lines[2], "gone            agent_C                 Removed                                  ");
    }

    // [test of feature K3: `ank get workloads -o yaml` shows effectivePriority]
    #[test]
    fn get_workloads_records_carry_the_priorities() {
        let v = StateView::from_tree(&serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {
                "A": {"runtime": "podman", "agent": "agent_A", "priority": 0, "effectivePriority": 5},
                "C": {"runtime": "podman", "agent": "agent_A"},
            }},
            "workloadStates": {"agent_A": {
                "A": {"1": {"state": "Pending", "subState": "WaitingToStart"}},
                "C": {"2": {"state": "Running", "subState": "Ok"}},
            }},
        }))
        .unwrap();
        let rows = workload_rows(&v, &WorkloadFilter::default());
        let records = with_priorities(output::workload_records(&rows), &v);
        let yaml = output::records(&records, crate::cli::OutputFormat::Yaml).unwrap();
        assert!(yaml.contains("effectivePriority: 5"), "{yaml}");
        assert_eq!(records[0]["priority"], 0);
        assert!(records[1].get("effectivePriority").is_none(), "{records}");
    }

    #[test]
    fn get_workloads_filters_by_name_agent_and_state() {
        let v = view();
        let by_name = WorkloadFilter { names: vec!["web".into()], ..Default::default() };
        assert_eq!(names(&workload_rows(&v, &by_name)), vec!["web"]);
        let by_agent = WorkloadFilter { agent: Some("agent_B".into()), ..Default::default() };
        assert_eq!(names(&workload_rows(&v, &by_agent)), vec!["db"]);
        let by_state = WorkloadFilter { state: Some("running".into()), ..Default::default() };
        assert_eq!(names(&workload_rows(&v, &by_state)), vec!["web"]);
        let by_full_state = WorkloadFilter { state: Some("Pending(StartingFailed)".into()), ..Default::default() };
        assert_eq!(names(&workload_rows(&v, &by_full_state)), vec!["db"]);
    }

    #[test]
    // [test of feature K1]
    fn get_workloads_wide_shows_a_priority_column_when_a_workload_has_a_priority() {
        let plain = output::workload_table_wide(&workload_rows(&view(), &WorkloadFilter::default()));
        assert!(!plain.contains("PRIORITY"), "no priorities, no column: {plain}");
        let v = StateView::from_tree(&serde_json::json!({
            "desiredState": {"apiVersion": "v1", "workloads": {
                "nav": {"runtime": "podman", "agent": "agent_A", "priority": 9},
                "dep": {"runtime": "podman", "agent": "agent_A", "priority": 0, "effectivePriority": 9},
                "log": {"runtime": "podman", "agent": "agent_A"},
            }},
            "workloadStates": {"agent_A": {
                "nav": {"1": {"state": "Running", "subState": "Ok"}},
                "dep": {"2": {"state": "Running", "subState": "Ok"}},
                "log": {"3": {"state": "Pending", "subState": "QuotaBlocked", "additionalInfo": "agent_A 2/2"}},
            }},
        }))
        .unwrap();
        let rows = workload_rows(&v, &WorkloadFilter::default());
        let default = output::workload_table(&rows);
        assert!(!default.contains("PRIORITY") && !default.contains("READY"), "Ankaios' columns only: {default}");
        let text = output::workload_table_wide(&rows);
        let lines: Vec<&str> = text.lines().collect();
        let col = lines[0].find("PRIORITY").expect("PRIORITY column");
        let at = |line: &str| line[col..].split_whitespace().next().unwrap_or_default().to_owned();
        assert_eq!(at(lines[1]), "9", "dep shows its effective priority: {text}");
        assert_eq!(at(lines[2]), "0", "log has none, 0: {text}");
        assert!(lines[2].contains("Pending(QuotaBlocked)") && lines[2].ends_with("agent_A 2/2"), "{text}");
        assert_eq!(at(lines[3]), "9", "{text}");
    }
}
