//! `ank wait workload/NAME... [-f manifest.yaml] --for Ready|Available
//! --timeout 60s`: subscribes to the workload states and returns once every
//! named workload, and every workload of the named manifests (a manifest
//! meets a condition when all its workloads do), meets the condition
//! (exit 0), or fails after the timeout naming what each unmet one reports
//! (exit 1). A workload's condition is read from its
//! newest instance (the highest generation), so an instance being replaced
//! does not count. A workload that is not in the desired state, or whose
//! newest instance will not start without a change (Pending(StartingFailed),
//! Pending(Canceled)), fails the wait at once instead of at the timeout.

use ank_common::WorkloadState;
use ank_common::conditions::{ConditionStatus, ConditionType};
use ank_common::messages::{RequestContent, ResponseContent};
use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::WaitArgs;
use crate::cmd::Ctx;
use crate::cmd::get_events::CurrentState;
use crate::view::StateView;

/// The newest instance (highest generation) of `workload`, if any.
fn newest<'a>(states: &'a [WorkloadState], workload: &str) -> Option<&'a WorkloadState> {
    states.iter().filter(|s| s.instance_name.workload_name == workload).max_by_key(|s| s.status.generation)
}

/// Why a workload does not (yet) meet the condition, `None` when it does.
pub fn unmet(states: &[WorkloadState], workload: &str, kind: ConditionType) -> Option<String> {
    let Some(state) = newest(states, workload) else { return Some("no state reported".to_owned()) };
    let Some(c) = state.status.condition(kind) else {
        return Some(format!(
            "{} reported, but no {} condition (an Ankaios server?)",
            state.execution_state,
            kind.as_str()
        ));
    };
    if c.status == ConditionStatus::True {
        return None;
    }
    let mut why = format!("{}={} ({})", kind.as_str(), c.status.as_str(), c.reason);
    if !c.message.is_empty() {
        why.push_str(&format!(": {}", c.message));
    }
    Some(why)
}

/// The fields of an instance beside its execution state that the wait reads.
const INSTANCE_EXTENSIONS: &[&str] = &["conditions", "generation"];

/// Waits for the condition or the timeout.
// [feature H3: ank wait --for Ready]
pub async fn run(ctx: &mut Ctx<'_>, args: WaitArgs) -> anyhow::Result<()> {
    let kind = ConditionType::parse(&args.condition).context("unknown condition")?;
    let mut targets = args.targets.clone();
    let mut labels: Vec<String> = args.targets.iter().map(|t| format!("workload/{t}")).collect();
    if !args.files.is_empty() {
        // [feature H3: conditions of a manifest as a whole]
        let merged = crate::cmd::apply::merge(crate::cmd::apply::read_manifests(&args.files)?)?;
        for name in merged.workloads.keys() {
            if !targets.contains(&name.to_string()) {
                targets.push(name.to_string());
            }
        }
        labels.extend(args.files.iter().map(|f| format!("manifest {f}")));
    }
    let mut conn = ctx.connect().await?;
    let request_id = conn.new_request_id();
    let mut field_mask = vec!["workloadStates".to_owned(), "desiredState.workloads".to_owned()];
    if conn.pushes_states() {
        // Our server reports the fields beside an execution state (the
        // conditions, the generation) only to subscribers naming them; without
        // these masks the wait saw the first conditions and never a change.
        // Ankaios' server has neither field, so it is not asked for them.
        field_mask.extend(INSTANCE_EXTENSIONS.iter().map(|f| format!("workloadStates.*.*.*.{f}")));
    }
    let request = RequestContent::CompleteState { field_mask, subscribe_for_events: true };
    conn.send_request(&request_id, request).await?;
    let deadline = tokio::time::Instant::now() + args.timeout;
    let mut current = CurrentState::default();
    let wait = async {
        loop {
            match conn.next_response(&request_id).await? {
                ResponseContent::CompleteState(state) => current = CurrentState(state.to_json()?),
                ResponseContent::Event { complete_state, altered_fields } => {
                    current.apply(&complete_state, &altered_fields)
                }
                ResponseContent::Error(e) => bail!("the server rejected the subscription: {e}"),
                _ => continue,
            }
            let unmet = pending(&current.0, &targets, kind)?;
            if unmet.is_empty() {
                return Ok(());
            }
            let lost = hopeless(&current.0, &unmet)?;
            if !lost.is_empty() {
                bail!(
                    "{} will not become {}: {}",
                    lost.iter().map(|(w, _)| format!("workload/{w}")).collect::<Vec<_>>().join(", "),
                    kind.as_str(),
                    lost.iter().map(|(w, why)| format!("workload/{w}: {why}")).collect::<Vec<_>>().join("; ")
                );
            }
        }
    };
    let outcome = tokio::time::timeout_at(deadline, wait).await;
    let _ = conn.send_request(&request_id, RequestContent::EventsCancel).await;
    conn.goodbye().await;
    match outcome {
        Ok(result) => {
            result?;
            ctx.print(&format!("{}: {}\n", labels.join(", "), args.condition))
        }
        Err(_) => {
            let unmet = pending(&current.0, &targets, kind)?;
            bail!(
                "timed out after {:?} waiting for {}: {}",
                args.timeout,
                args.condition,
                unmet.iter().map(|(w, why)| format!("workload/{w}: {why}")).collect::<Vec<_>>().join("; ")
            )
        }
    }
}

/// The targets that do not meet the condition, with the reason.
fn pending(tree: &Value, targets: &[String], kind: ConditionType) -> anyhow::Result<Vec<(String, String)>> {
    let states = StateView::from_tree(tree)?.workload_state_list();
    Ok(targets.iter().filter_map(|t| Some((t.clone(), unmet(&states, t, kind)?))).collect())
}

/// Of the `unmet` targets, those that cannot meet any condition without a
/// change, and why: not in the desired state, or a newest instance that
/// will not start (Pending(StartingFailed), Pending(Canceled)).
fn hopeless(tree: &Value, unmet: &[(String, String)]) -> anyhow::Result<Vec<(String, String)>> {
    use ank_common::StateKind;
    use ank_common::execution_state::Pending;
    let states = StateView::from_tree(tree)?.workload_state_list();
    let desired = tree.pointer("/desiredState/workloads");
    Ok(unmet
        .iter()
        .filter_map(|(w, _)| {
            if desired.and_then(|d| d.get(w)).is_none() {
                return Some((w.clone(), "not found in the desired state".to_owned()));
            }
            let newest = newest(&states, w)?;
            matches!(newest.execution_state.kind, StateKind::Pending(Pending::StartingFailed | Pending::Canceled))
                .then(|| (w.clone(), newest.execution_state.to_string()))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tree(ready_old: &str, ready_new: &str) -> Value {
        json!({"workloadStates": {"A": {"w": {
            "old": {"state": "Running", "subState": "Ok", "generation": 1,
                    "conditions": [{"type": "Ready", "status": ready_old, "observedGeneration": 1}]},
            "new": {"state": "Pending", "subState": "StartingFailed", "additionalInfo": "no image", "generation": 2,
                    "conditions": [{"type": "Ready", "status": ready_new, "observedGeneration": 2, "reason": "NotAvailable", "message": "no image"}]}
        }}}})
    }

    fn states(tree: &Value) -> Vec<WorkloadState> {
        StateView::from_tree(tree).unwrap().workload_state_list()
    }

    #[test]
    fn the_newest_instance_decides() {
        let t = tree("True", "False");
        assert_eq!(unmet(&states(&t), "w", ConditionType::Ready).unwrap(), "Ready=False (NotAvailable): no image");
        assert_eq!(unmet(&states(&tree("False", "True")), "w", ConditionType::Ready), None);
        assert_eq!(unmet(&states(&t), "other", ConditionType::Ready).unwrap(), "no state reported");
        let plain = json!({"workloadStates": {"A": {"w": {"1": {"state": "Running", "subState": "Ok"}}}}});
        assert!(unmet(&states(&plain), "w", ConditionType::Ready).unwrap().contains("no Ready condition"));
        assert_eq!(pending(&t, &["w".into()], ConditionType::Ready).unwrap().len(), 1);
    }

    #[test]
    fn an_unknown_workload_or_one_that_will_not_start_is_hopeless_at_once() {
        let mut t = tree("True", "False");
        t["desiredState"] = json!({"workloads": {"w": {}, "queued": {}}});
        t["workloadStates"]["A"]["queued"] =
            json!({"1": {"state": "Pending", "subState": "WaitingToStart", "generation": 1}});
        let unmet = pending(&t, &["w".into(), "nosuch".into(), "queued".into()], ConditionType::Ready).unwrap();
        assert_eq!(unmet.len(), 3);
        let lost = hopeless(&t, &unmet).unwrap();
        assert_eq!(
            lost,
            [
                ("w".to_owned(), "Pending(StartingFailed): 'no image'".to_owned()),
                ("nosuch".to_owned(), "not found in the desired state".to_owned())
            ],
            "queued may still start"
        );
    }
}
