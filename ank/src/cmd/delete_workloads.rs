//! `ank delete workloads NAME...`: removes workloads from the desired state
//! (masks `desiredState.workloads.<name>` with the names absent from the new
//! state), then waits until their instances are removed.

use std::collections::{BTreeMap, BTreeSet};

use ank_common::convert::{PartialCompleteState, PartialState};
use ank_common::messages::RequestContent;
use ank_common::{WorkloadInstanceName, WorkloadName};
use anyhow::Context;

use crate::cmd::{Ctx, UpdateOutcome, follow, report_update, send_update, until_interrupted};

/// The update request deleting `names`.
pub fn delete_request(names: &[WorkloadName]) -> RequestContent {
    let update_mask = names.iter().map(|n| format!("desiredState.workloads.{n}")).collect();
    let new_state = PartialCompleteState::of_desired(PartialState::current());
    RequestContent::UpdateState { new_state: Box::new(new_state), update_mask }
}

/// The requested names of which the server deleted no instance.
pub fn unknown_names<'a>(names: &'a [WorkloadName], outcome: &UpdateOutcome) -> Vec<&'a str> {
    let deleted: BTreeSet<String> =
        outcome.deleted.iter().filter_map(|i| WorkloadInstanceName::parse(i).ok()).map(|i| i.workload_name).collect();
    names.iter().map(WorkloadName::as_str).filter(|n| !deleted.contains(*n)).collect()
}

/// Validates the names; a name with a dot would address a field inside
/// another workload.
pub fn parse_names(names: &[String]) -> anyhow::Result<Vec<WorkloadName>> {
    let set: BTreeSet<&String> = names.iter().collect();
    set.into_iter().map(|n| WorkloadName::new(n.as_str()).context("cannot delete the workload")).collect()
}

/// Deletes the workloads and (in wait mode) waits for their removal. Like
/// Ankaios, names without a workload pass silently; `--verbose` names them.
pub async fn run(ctx: &mut Ctx<'_>, names: &[String]) -> anyhow::Result<()> {
    let names = parse_names(names)?;
    let interrupted = crate::signals::termination();
    let mut conn = ctx.connect().await?;
    let result = until_interrupted(interrupted, async {
        let outcome = send_update(&mut conn, delete_request(&names)).await?;
        report_update(ctx, &outcome, &[]);
        if ctx.settings.verbose {
            for name in unknown_names(&names, &outcome) {
                ctx.warn(&format!("workload '{name}' does not exist; nothing to delete"));
            }
        }
        follow(ctx, &mut conn, &outcome, BTreeMap::new()).await
    })
    .await;
    conn.goodbye().await;
    result
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn delete_request_masks_each_name_and_omits_it_from_the_new_state() {
        let names = parse_names(&["b".into(), "a".into(), "b".into()]).unwrap();
        let RequestContent::UpdateState { new_state, update_mask } = delete_request(&names) else {
            panic!("not an update")
        };
        let new_state = new_state.to_json().unwrap();
        assert_eq!(update_mask, vec!["desiredState.workloads.a", "desiredState.workloads.b"]);
        assert_eq!(new_state, json!({"desiredState": {"apiVersion": "v1"}}));
    }

    #[test]
    fn delete_rejects_names_that_would_address_other_fields() {
        let e = parse_names(&["a.agent".into()]).unwrap_err();
        assert!(format!("{e:#}").contains("'a.agent'"), "{e:#}");
    }

    #[test]
    fn delete_reports_names_without_deleted_instances() {
        let names = parse_names(&["a".into(), "ghost".into()]).unwrap();
        let outcome = UpdateOutcome {
            added: vec![],
            deleted: vec!["a.123.agent_A".into()],
            job_id: 3,
            ..UpdateOutcome::default()
        };
        assert_eq!(unknown_names(&names, &outcome), vec!["ghost"]);
    }
}
