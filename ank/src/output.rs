//! Printers: the rows of the workload tables of `ank get workloads` and of
//! the wait mode (laid out by [`crate::table`]), the agent rows, and the
//! YAML/JSON rendering of `ank get state`. Pure functions from data to
//! text; the commands decide where it goes.

use std::collections::BTreeMap;

use ank_common::ExecutionState;
use ank_common::conditions::{ConditionType, InstanceStatus};
use anyhow::Context;

use crate::cli::OutputFormat;
use crate::table::{self, Fit};

/// The terminal text that replaces `old` (printed last, `""` for none) by
/// `new`: cursor up over the old lines, clear to the end, the new text.
pub fn redraw(old: &str, new: &str) -> String {
    match old.lines().count() {
        0 => new.to_owned(),
        n => format!("\x1b[{n}A\x1b[J{new}"),
    }
}

/// One row of a workload table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadRow {
    pub name: String,
    pub agent: String,
    pub runtime: String,
    /// `None` while no state is known yet.
    pub state: Option<ExecutionState>,
    /// Generation and conditions (empty from an Ankaios server).
    pub status: InstanceStatus,
    /// The start priority, when the workload has one.
    pub priority: Option<u32>,
}

impl WorkloadRow {
    /// A condition's status for the READY / AVAILABLE columns; empty when
    /// the server does not report it.
    fn condition_cell(&self, kind: ConditionType) -> String {
        self.status.condition(kind).map(|c| c.status.as_str().to_owned()).unwrap_or_default()
    }
}

/// The workload table exactly as Ankaios prints it (WORKLOAD NAME, AGENT,
/// RUNTIME, EXECUTION STATE, ADDITIONAL INFO), rows sorted by workload
/// name, then agent; on a terminal a long additional info wraps.
pub fn workload_table(rows: &[WorkloadRow]) -> String {
    workload_table_with_width(rows, table::output_width())
}

/// [`workload_table`] for a given terminal width (`None`: no limit).
pub fn workload_table_with_width(rows: &[WorkloadRow], width: Option<usize>) -> String {
    let cells: Vec<[String; 5]> = sorted(rows)
        .iter()
        .map(|r| {
            let (state, info) = state_cells(r);
            [r.name.clone(), r.agent.clone(), r.runtime.clone(), state, info]
        })
        .collect();
    table::render(WORKLOAD_HEADER, &cells, Fit::Wrap(4), width)
}

/// The columns of Ankaios' workload table.
const WORKLOAD_HEADER: [&str; 5] = ["WORKLOAD NAME", "AGENT", "RUNTIME", "EXECUTION STATE", "ADDITIONAL INFO"];

/// The table `apply`, `run`, `delete` and `set state` print while they
/// wait, as Ankaios does: the state of each row not yet settled is
/// preceded by the `spinner` symbol, of settled ones by a space; on a
/// terminal a long additional info is cut.
pub fn wait_table(rows: &[(WorkloadRow, bool)], spinner: char, width: Option<usize>) -> String {
    let mut rows: Vec<&(WorkloadRow, bool)> = rows.iter().collect();
    rows.sort_by(|(a, _), (b, _)| (&a.name, &a.agent).cmp(&(&b.name, &b.agent)));
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|(r, settled)| {
            let (state, info) = state_cells(r);
            let mark = if *settled { ' ' } else { spinner };
            [r.name.clone(), r.agent.clone(), r.runtime.clone(), format!("{mark} {state}"), info]
        })
        .collect();
    let mut header = WORKLOAD_HEADER;
    header[3] = "  EXECUTION STATE";
    let mut text = table::render(header, &cells, Fit::Truncate(4), width);
    text.pop(); // Ankaios' wait table has no final line break.
    text
}

/// The state and additional info cells, the info on one line as Ankaios
/// shows it: trimmed, line breaks replaced by ", ".
fn state_cells(r: &WorkloadRow) -> (String, String) {
    match &r.state {
        Some(s) => (s.kind.to_string(), s.additional_info.trim().replace('\n', ", ")),
        None => (String::new(), String::new()),
    }
}

fn sorted(rows: &[WorkloadRow]) -> Vec<&WorkloadRow> {
    let mut rows: Vec<&WorkloadRow> = rows.iter().collect();
    rows.sort_by(|a, b| (&a.name, &a.agent).cmp(&(&b.name, &b.agent)));
    rows
}

/// The workload table of `-o wide`: Ankaios' columns plus READY and
/// AVAILABLE and, when some workload has one, PRIORITY.
// [feature K1: the PRIORITY column]
pub fn workload_table_wide(rows: &[WorkloadRow]) -> String {
    let rows = sorted(rows);
    let cells = |r: &&WorkloadRow| {
        let (state, info) = match &r.state {
            Some(s) => (s.kind.to_string(), one_line(&s.additional_info)),
            None => (String::new(), String::new()),
        };
        let ready = r.condition_cell(ConditionType::Ready);
        let available = r.condition_cell(ConditionType::Available);
        [r.name.clone(), r.agent.clone(), r.runtime.clone(), state, ready, available, info]
    };
    if rows.iter().all(|r| r.priority.is_none()) {
        let cells: Vec<[String; 7]> = rows.iter().map(cells).collect();
        return table::table(
            ["WORKLOAD NAME", "AGENT", "RUNTIME", "EXECUTION STATE", "READY", "AVAILABLE", "ADDITIONAL INFO"],
            &cells,
        );
    }
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            let [name, agent, runtime, state, ready, available, info] = cells(r);
            let priority = r.priority.unwrap_or(0).to_string();
            [name, agent, runtime, state, ready, available, priority, info]
        })
        .collect();
    table::table(
        ["WORKLOAD NAME", "AGENT", "RUNTIME", "EXECUTION STATE", "READY", "AVAILABLE", "PRIORITY", "ADDITIONAL INFO"],
        &cells,
    )
}

/// A multi-line additional info (podman's whole error output) as one table
/// cell: its last `Error:` line when it has one, else its lines joined by
/// "; ". `-o yaml` shows it whole.
pub fn one_line(info: &str) -> String {
    let lines: Vec<&str> = info.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    match lines.iter().rev().find(|l| l.starts_with("Error:")) {
        Some(error) => (*error).to_owned(),
        None => lines.join("; "),
    }
}

/// One row of the agent table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentRow {
    pub name: String,
    pub workloads: usize,
    /// CPU usage in percent, if reported.
    pub cpu_usage: Option<u64>,
    /// Free memory in bytes, if reported.
    pub free_memory: Option<u64>,
    /// State reports the server dropped as stale or from the future.
    pub dropped_stale_reports: u64,
    /// What the agent advertises to agent selectors (records only).
    pub labels: BTreeMap<String, String>,
    pub capabilities: Vec<String>,
    pub metrics: ank_common::placement::metrics::Metrics,
    /// The agent's workload quota and its use, if it has one.
    pub quota: Option<ank_common::quota::AgentQuota>,
    /// What the agent does not report (an Eclipse Ankaios agent: our
    /// generations, conditions and quota).
    pub not_reported: Vec<String>,
}

/// A state tree as YAML or pretty JSON, ending in a newline.
pub fn state_tree(tree: &serde_json::Value, format: OutputFormat) -> anyhow::Result<String> {
    let mut text = match format {
        OutputFormat::Yaml => serde_saphyr::to_string(tree).context("cannot render the state as YAML")?,
        OutputFormat::Json => serde_json::to_string_pretty(tree).context("cannot render the state as JSON")?,
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// A list of records as YAML or JSON (for `-o` of table commands).
pub fn records(records: &serde_json::Value, format: OutputFormat) -> anyhow::Result<String> {
    state_tree(records, format)
}

/// The records of a workload table, sorted like the table.
pub fn workload_records(rows: &[WorkloadRow]) -> serde_json::Value {
    let mut rows: Vec<&WorkloadRow> = rows.iter().collect();
    rows.sort_by(|a, b| (&a.name, &a.agent).cmp(&(&b.name, &b.agent)));
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                let mut record = serde_json::json!({
                    "name": r.name,
                    "agent": r.agent,
                    "runtime": r.runtime,
                    "executionState": r.state,
                });
                if let (Some(map), Ok(serde_json::Value::Object(status))) =
                    (record.as_object_mut(), serde_json::to_value(&r.status))
                {
                    map.extend(status);
                    if let Some(priority) = r.priority {
                        map.insert("priority".into(), priority.into());
                    }
                }
                record
            })
            .collect(),
    )
}

/// The records of the agent table.
pub fn agent_records(rows: &[AgentRow]) -> serde_json::Value {
    serde_json::Value::Array(
        rows.iter()
            .map(|r| {
                let mut record = serde_json::json!({
                    "name": r.name,
                    "workloads": r.workloads,
                    "cpuUsage": r.cpu_usage,
                    "freeMemory": r.free_memory,
                    "droppedStaleReports": r.dropped_stale_reports,
                });
                // [feature S1: the advertisement shows in `ank get agents -o yaml`]
                if !r.labels.is_empty() {
                    record["labels"] = serde_json::json!(r.labels);
                }
                if !r.capabilities.is_empty() {
                    record["capabilities"] = serde_json::json!(r.capabilities);
                }
                if !r.metrics.is_empty() {
                    record["metrics"] = serde_json::json!(r.metrics);
                }
                if let (Some(quota), Some(map)) = (r.quota, record.as_object_mut()) {
                    map.insert("quota".into(), serde_json::json!(quota));
                }
                if !r.not_reported.is_empty() {
                    record["notReported"] = serde_json::json!(r.not_reported);
                }
                record
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_additional_info_becomes_one_cell() {
        let podman = "Trying to pull localhost/nope:latest...\nError: initializing source docker://localhost/nope:latest: connection refused\n";
        assert_eq!(one_line(podman), "Error: initializing source docker://localhost/nope:latest: connection refused");
        assert_eq!(one_line("first\n\n second \n"), "first; second");
        assert_eq!(one_line("single"), "single");
        assert_eq!(one_line(""), "");
    }

    #[test]
    fn table_records_for_output_yaml_and_json() {
        let rows = [
            WorkloadRow { name: "b".into(), agent: "A".into(), runtime: "podman".into(), ..Default::default() },
            WorkloadRow {
                name: "a".into(),
                agent: "A".into(),
                runtime: "podman".into(),
                state: Some(ExecutionState::running()),
                status: InstanceStatus { generation: 2, ..Default::default() },
                priority: Some(5),
            },
        ];
        let json = records(&workload_records(&rows), OutputFormat::Json).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v[0]["name"], "a");
        assert_eq!(v[0]["executionState"]["state"], "Running");
        assert_eq!(v[0]["executionState"]["subState"], "Ok");
        assert!(v[1]["executionState"].is_null());
        assert_eq!(v[0]["generation"], 2);
        assert_eq!((v[0]["priority"].as_u64(), v[1].get("priority")), (Some(5), None));
        let yaml = records(
            &agent_records(&[AgentRow { name: "A".into(), workloads: 2, cpu_usage: Some(3), ..Default::default() }]),
            OutputFormat::Yaml,
        )
        .unwrap();
        assert!(yaml.contains("name: A") && yaml.contains("workloads: 2") && yaml.contains("cpuUsage: 3"), "{yaml}");
    }
    use ank_common::StateKind;
    use ank_common::execution_state::Pending;

    fn row(name: &str, agent: &str, state: Option<ExecutionState>) -> WorkloadRow {
        WorkloadRow { name: name.into(), agent: agent.into(), runtime: "podman".into(), state, ..Default::default() }
    }

    #[test]
    fn output_redraw_moves_up_over_the_old_table() {
        assert_eq!(redraw("", "a\n"), "a\n");
        assert_eq!(redraw("a\nb\n", "c\n"), "\x1b[2A\x1b[Jc\n");
    }

    #[test]
    fn output_workload_tables_rows_start_with_name_sorted() {
        let rows = vec![
            row("web", "agent_B", Some(ExecutionState::with_info(StateKind::Pending(Pending::Starting), "Retry 1"))),
            row("db", "agent_A", Some(ExecutionState::running())),
            row("new", "agent_A", None),
        ];
        let mut rows = rows;
        rows[1].status.conditions = ank_common::conditions::agent_conditions(
            &ExecutionState::running(),
            1,
            &ank_common::conditions::RuntimeHealth::Reachable,
        );
        let ready = ank_common::conditions::ready(&rows[1].status, 1);
        rows[1].status.conditions.push(ready);
        let plain = workload_table_with_width(&rows, None);
        assert_eq!(
            plain.lines().next(),
            Some("WORKLOAD NAME   AGENT     RUNTIME   EXECUTION STATE     ADDITIONAL INFO"),
            "Ankaios' columns: {plain}"
        );
        let text = workload_table_wide(&rows);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("WORKLOAD NAME   AGENT"), "{text}");
        assert!(lines[1].starts_with("db ") && lines[1].contains("Running(Ok)"), "{text}");
        assert!(lines[2].starts_with("new "), "{text}");
        assert!(
            lines[3].starts_with("web ") && lines[3].contains("Pending(Starting)") && lines[3].ends_with(" Retry 1"),
            "{text}"
        );
        let ready_col = lines[0].find("READY").unwrap();
        assert_eq!(lines[1].find("True"), Some(ready_col), "{text}");
        assert_eq!(lines[1][lines[0].find("AVAILABLE").unwrap()..].split_whitespace().next(), Some("True"));
        let state_col = lines[0].find("EXECUTION STATE").unwrap();
        assert_eq!(lines[1].find("Running(Ok)"), Some(state_col));
        assert_eq!(lines[3].find("Pending(Starting)"), Some(state_col));
    }

    #[test]
    fn output_state_tree_formats() {
        let tree = serde_json::json!({"desiredState": {"apiVersion": "v1"}});
        assert_eq!(state_tree(&tree, OutputFormat::Yaml).unwrap(), "desiredState:\n  apiVersion: v1\n");
        assert_eq!(
            state_tree(&tree, OutputFormat::Json).unwrap(),
            "{\n  \"desiredState\": {\n    \"apiVersion\": \"v1\"\n  }\n}\n"
        );
    }
}
