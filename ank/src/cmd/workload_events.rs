//! `ank get events NAME... [-o yaml|json]`: the events the server keeps for
//! workloads (`{kind, reason, count, firstSeen, last}`, merged by kind and
//! reason, oldest first), as a table or as records.

use std::collections::BTreeMap;

use ank_common::workload_events::WorkloadEvent;
use anyhow::bail;

use crate::cli::OutputFormat;
use crate::cmd::{Ctx, fetch_state};
use crate::output;
use crate::view::StateView;

/// The kept events of every workload in `view`, by workload name (every
/// instance of a workload carries the same events).
pub fn events_by_workload(view: &StateView) -> BTreeMap<String, Vec<WorkloadEvent>> {
    let mut by_name: BTreeMap<String, Vec<WorkloadEvent>> = BTreeMap::new();
    for s in view.workload_state_list() {
        let slot = by_name.entry(s.instance_name.workload_name).or_default();
        if slot.is_empty() {
            *slot = s.status.events;
        }
    }
    by_name
}

/// The event table: one row per kept event.
pub fn event_table(events: &[(String, WorkloadEvent)]) -> String {
    let rows: Vec<[String; 6]> = events
        .iter()
        .map(|(name, e)| {
            [
                name.clone(),
                e.kind.as_str().to_owned(),
                e.reason.clone(),
                e.count.to_string(),
                e.first_seen.clone(),
                e.last.clone(),
            ]
        })
        .collect();
    crate::table::table(["WORKLOAD", "KIND", "REASON", "COUNT", "FIRST SEEN", "LAST"], &rows)
}

/// Prints the events of `names`; a name the server does not know is an error.
// [feature K8: `ank get events WORKLOAD`]
pub async fn run(ctx: &mut Ctx<'_>, names: &[String], format: Option<OutputFormat>) -> anyhow::Result<()> {
    let mut masks: Vec<String> = names.iter().map(|n| format!("desiredState.workloads.{n}")).collect();
    masks.push("workloadStates".to_owned());
    let view = fetch_state(ctx, masks).await?;
    let by_name = events_by_workload(&view);
    let mut rows = Vec::new();
    for name in names {
        if view.workload(name).is_none() && !by_name.contains_key(name) {
            bail!("workload '{name}' not found");
        }
        for e in by_name.get(name).into_iter().flatten() {
            rows.push((name.clone(), e.clone()));
        }
    }
    match format {
        None => ctx.print(&event_table(&rows)),
        Some(f) => {
            let records: BTreeMap<&str, Vec<&WorkloadEvent>> = names
                .iter()
                .map(|n| (n.as_str(), rows.iter().filter(|(w, _)| w == n).map(|(_, e)| e).collect()))
                .collect();
            ctx.print(&output::records(&serde_json::to_value(records)?, f)?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // [test of feature K8: the events of a workload as the CLI prints them]
    #[test]
    fn events_are_read_from_any_instance_and_tabled() {
        let view = StateView::from_tree(&serde_json::json!({
            "workloadStates": {"agent_A": {"w": {"1": {"state": "Pending", "subState": "QuotaBlocked",
                "events": [{"kind": "QuotaBlocked", "reason": "agent_A 2/2", "count": 5,
                            "firstSeen": "2026-11-23T10:00:00.000Z", "last": "2026-11-23T10:00:04.000Z"}]}}}}
        }))
        .unwrap();
        let by_name = events_by_workload(&view);
        assert_eq!(by_name["w"].len(), 1);
        let rows: Vec<(String, WorkloadEvent)> = by_name["w"].iter().map(|e| ("w".to_owned(), e.clone())).collect();
        let table = event_table(&rows);
        assert!(table.starts_with("WORKLOAD"), "{table}");
        assert!(table.contains("QuotaBlocked"), "{table}");
        assert!(table.contains("agent_A 2/2"), "{table}");
        assert!(table.contains(" 5 "), "{table}");
    }

    #[test]
    fn arguments_are_workload_names_unless_they_look_like_masks() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let cli = crate::cli::Cli::try_parse_from([&["ank", "get", "events"], args].concat()).unwrap();
            let crate::cli::Command::Get(crate::cli::GetCommand::Events(a)) = cli.command else { panic!() };
            a.workload_names().map(<[String]>::to_vec)
        };
        assert_eq!(parse(&["web", "db"]), Some(vec!["web".to_owned(), "db".to_owned()]));
        assert_eq!(parse(&["workloadStates"]), None);
        assert_eq!(parse(&["desiredState.workloads.web"]), None);
        assert_eq!(parse(&[]), None);
        assert_eq!(parse(&["-c", "web"]), None);
    }
}
